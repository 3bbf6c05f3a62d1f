"""Short Python programs in the bundled model's replies (the executor's `PYTHON:` form and the
checker's): taken out of their fences, mended where the small model reliably slips, and run as a
`python3 -c '…'` shell command so they pass the same gates, sandbox and records as any command."""
from __future__ import annotations

import ast
import keyword
import os
import re
import shlex

_STDLIB = ("csv", "json", "os", "re", "sys", "math", "glob", "collections", "statistics",
           "datetime", "pathlib", "shutil", "configparser")
PYTHON_PREFIX = "python3 -c "


_BARE_OPEN = re.compile(r"^(\s*)(open\(.*\)\s+as\s+\w+\s*:)", re.M)


def _print_last_value(code: str) -> str:
    """A program ending in a bare expression prints its value, as the interactive interpreter
    does: the small model often ends with `len(rows)` or `f.readline()` and prints nothing."""
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return code
    last = tree.body[-1] if tree.body else None
    if not isinstance(last, ast.Expr) or last.col_offset != 0 or (
            isinstance(last.value, ast.Call) and isinstance(last.value.func, ast.Name)
            and last.value.func.id == "print"):
        return code
    lines = code.splitlines()
    if last.end_lineno != len(lines):
        return code
    value = ast.get_source_segment(code, last)
    head = "\n".join(lines[:last.lineno - 1])
    return (f"{head}\n" if head else "") + (f"_value = ({value})\n"
                                            f"if _value is not None:\n    print(_value)")


def _parses(code: str) -> bool:
    try:
        ast.parse(code)
    except (SyntaxError, ValueError):
        return False
    return True


_COMPOUND = ("if", "elif", "else", "for", "while", "with", "try", "except", "finally", "def",
             "class")
_NESTED = re.compile(r"\s+(?:for|if|while|with|try)\b")


def _split_header(line: str) -> str:
    """`with open(a) as f, open(b) as g: for x in f: g.write(x)` as the block it means: a
    compound statement's body may not start with another compound statement on its line (a
    SyntaxError the small model makes). The colon is found outside brackets and quotes."""
    indent = line[:len(line) - len(line.lstrip())]
    if line.lstrip().split(" ", 1)[0].rstrip(":") not in _COMPOUND:
        return line
    depth, quote, i = 0, "", 0
    while i < len(line):
        ch = line[i]
        if quote:
            if ch == "\\":
                i += 1
            elif ch == quote:
                quote = ""
        elif ch in "'\"":
            quote = ch
        elif ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        elif ch == ":" and depth == 0 and _NESTED.match(line, i + 1):
            return line[:i + 1] + "\n" + _split_header(indent + "    " + line[i + 1:].strip())
        i += 1
    return line


_PROSE = re.compile(r"[A-Za-z]+ [A-Za-z]+ [A-Za-z]+\b")    # "This program reads …", unindented


def _mend_syntax(code: str) -> str:
    """A program that does not parse, mended where the slip is unambiguous, else as it was
    (it then fails and its error is shown): compound statements run together on one line, and
    prose after the code (an explanation the model wrote inside an unfenced program) — a tail
    of lines none of which is a statement, after a head that parses."""
    if _parses(code):
        return code
    split = "\n".join(_split_header(line) for line in code.split("\n"))
    if _parses(split):
        return split
    lines = split.split("\n")
    for k in range(1, len(lines)):
        tail = [line for line in lines[k:] if line.strip()]
        if not tail or not _PROSE.match(tail[0]) or keyword.iskeyword(tail[0].split()[0]):
            continue
        head = "\n".join(lines[:k])
        if head.strip() and _parses(head) and not any(_parses(t.strip()) for t in tail):
            return head.rstrip()
    return code


def python_command(code: str) -> str:
    """A PYTHON: reply as the shell command that runs it (`python3 -c '…'`, quoted for bash), so
    it goes through the same Law 1 gate, sandbox, journal and records as any command. Slips the
    small model often makes are mended: standard modules used but not imported are imported,
    `open(…) as f:` gets its `with`, compound statements run together on a line are split,
    prose after the program is dropped, and a final bare expression is printed."""
    code = _print_last_value(_mend_syntax(_BARE_OPEN.sub(r"\1with \2", code)))

    def imported(name: str) -> bool:
        return bool(re.search(rf"^\s*(?:import|from)\s[^\n]*\b{name}\b", code, re.M))

    # `datetime.strptime(…)`, `Counter(…)`: names the small model uses as if imported from their
    # module (`import datetime` would leave datetime.strptime an AttributeError)
    names = [f"from {mod} import {name}" for name, mod, use in _FROM_IMPORTS
             if re.search(use, code) and not imported(name)]
    missing = [m for m in _STDLIB if re.search(rf"\b{m}\.", code) and not imported(m)
               and not any(line.endswith(f" import {m}") for line in names)]
    if missing:
        names.append(f"import {', '.join(missing)}")
    if names:
        code = "\n".join(names) + "\n" + code
    return PYTHON_PREFIX + shlex.quote(code)


def mended_command(command: str) -> str:
    """A COMMAND that is only `python3 -c PROGRAM`, its program mended as a PYTHON: reply's is
    (`_mend_syntax`) when it does not parse; any other command as it is (its redirections and
    pipes are not the program's to drop)."""
    try:
        words = shlex.split(command or "")
    except ValueError:
        return command
    if len(words) != 3 or not re.fullmatch(r"python[0-9.]*", words[0]) or words[1] != "-c":
        return command
    program = _mend_syntax(words[2])
    return command if program == words[2] else PYTHON_PREFIX + shlex.quote(program)


_FROM_IMPORTS = (
    ("datetime", "datetime", r"(?<![\w.])datetime\.(?:strptime|now|today|utcnow|fromisoformat|"
                             r"fromtimestamp|combine)\("),
    ("date", "datetime", r"(?<![\w.])date\.(?:today|fromisoformat)\("),
    ("timedelta", "datetime", r"(?<![\w.])timedelta\("),
    ("Counter", "collections", r"(?<![\w.])Counter\("),
    ("defaultdict", "collections", r"(?<![\w.])defaultdict\("),
)


_DATA_FILE = re.compile(r"[\w./-]+\.(?:csv|tsv|json|jsonl|log|ini|env|cfg|conf|ya?ml|toml|xml)\b",
                        re.I)


def names_data_file(text: str, workspace: str) -> bool:
    """Whether the task names a data file (CSV, JSON, log, config) that exists in the workspace:
    reading records by their fields is what a short Python program gets right and a one-line
    grep/awk/cut often does not (a word matched anywhere in the line, quoted commas, a header)."""
    names = {m.group(0).strip("./") for m in _DATA_FILE.finditer(text or "")}
    if not names:
        return False
    base = os.path.realpath(workspace)
    for name in names:
        if os.path.isfile(os.path.join(base, name)):
            return True
    wanted = {os.path.basename(n) for n in names}
    for _, _, files in os.walk(base):
        if wanted.intersection(files):
            return True
    return False


def python_code(body: str) -> str:
    """The program of a PYTHON: reply: fences and any prose after the closing fence dropped."""
    fenced = re.match(r"\s*```[a-z0-9]*[ \t]*\n(.*?)(?:\n```|$)", body, re.S | re.I)
    code = fenced.group(1) if fenced else body
    return code.strip("\n").rstrip()
