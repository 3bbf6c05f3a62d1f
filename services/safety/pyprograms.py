"""The executor's Python programs as Law 0 reads them: the program inside a `python3 -c` command,
and the literals it prints as they are (what it spells out rather than computes). Pure AST
reading; no I/O."""
from __future__ import annotations

import ast
import re
import shlex
from collections import Counter
from typing import Any, Optional

_PY_C = re.compile(r"^\s*python[0-9.]*\s+-c\s", re.S)


def python_program(command: str) -> str | None:
    """The program of a `python3 -c PROGRAM` command (the executor's PYTHON: form), else None."""
    if not _PY_C.match(command or ""):
        return None
    try:
        words = shlex.split(command)
    except ValueError:
        return None
    return words[2] if len(words) >= 3 and words[1] == "-c" else None


_WRITERS = frozenset({"print", "write", "writelines", "writerow", "writerows"})


def printed_literals(program: str) -> Optional[list[str]]:
    """The literals a program prints or writes as they are: constants among the arguments of
    `print`/`write` (directly, in f-strings, concatenations, tuples and lists) and names bound
    only ever to one constant (`x = 'Alice'` … `print(x)`). None if it does not parse (then the
    whole program counts as spelt out)."""
    try:
        tree = ast.parse(program)
    except (SyntaxError, ValueError):
        return None
    fixed = _fixed(tree)
    out: list[str] = []

    def collect(node: ast.AST) -> None:
        if isinstance(node, ast.Constant) and node.value is not None:
            out.append(str(node.value))
        elif isinstance(node, ast.Name) and node.id in fixed:
            out.append(str(fixed[node.id]))
        elif isinstance(node, ast.JoinedStr):
            for part in node.values:
                collect(part.value if isinstance(part, ast.FormattedValue) else part)
        elif isinstance(node, ast.BinOp):
            collect(node.left)
            collect(node.right)
        elif isinstance(node, (ast.Tuple, ast.List, ast.Set)):
            for elt in node.elts:
                collect(elt)

    for node in writer_calls(tree):
        for arg in [*node.args, *(k.value for k in node.keywords)]:
            collect(arg)
    return out


def constant_writes(program: str) -> list[str]:
    """The texts a program prints or writes whole as one constant (`f.write('none found')`,
    `print(msg)` with `msg` bound once to a string): output that nothing the program read can
    have shaped. [] if it does not parse."""
    try:
        tree = ast.parse(program)
    except (SyntaxError, ValueError):
        return []
    fixed = _fixed(tree)
    out = []
    for node in writer_calls(tree):
        if len(node.args) == 1:
            arg = node.args[0]
            value = arg.value if isinstance(arg, ast.Constant) else \
                fixed.get(arg.id) if isinstance(arg, ast.Name) else None
            if isinstance(value, str):
                out.append(value)
    return out


def _fixed(tree: ast.AST) -> dict[str, Any]:
    """Names bound only ever to one constant (`+=` stores again: a counter is no constant)."""
    constants: dict[str, Any] = {}
    stores: Counter = Counter()
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant):
            for target in node.targets:
                if isinstance(target, ast.Name):
                    constants[target.id] = node.value.value
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            stores[node.id] += 1
    return {name: value for name, value in constants.items() if stores[name] == 1}


def writer_calls(tree: ast.AST) -> list[ast.Call]:
    """The calls of a parsed program that print or write (`print`, `f.write`, `w.writerow`…)."""
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            func = node.func
            name = func.id if isinstance(func, ast.Name) else \
                func.attr if isinstance(func, ast.Attribute) else ""
            if name in _WRITERS:
                out.append(node)
    return out
