"""When a result's agreement with the independent check is not independent evidence.

The checker is the same small model as the executor, blind to its commands but not to its
habits: it often writes the same command, or the same program, and then repeats the same
mistake. Agreement of one method with itself is one derivation, not two; Law 0 then keeps the
result unverified (`doubts`). Pure reading of commands and the before-copy's files.
"""
from __future__ import annotations

import ast
import os
import re
from typing import Iterable, Mapping

from services.roles import sqlcheck
from services.safety import datafiles, evidence as ev
from services.safety.pyprograms import writer_calls


def doubts(what: str, check: str, shell: list[str], *, root: str, names: Iterable[str],
           files: Mapping[str, ev.FileState], verified: bool) -> list[str]:
    """Why `what` (the answer, a file) agreeing with the check `check` proves less than it
    seems, given the executor's shell commands `shell`: the executor's own method (a word
    grepped anywhere in the line where the goal names a field); the same reading of the same
    fields on data that can mislead it, or the same flat listing of a workspace with subfolders
    (only asked while `verified`); both splitting on every comma a CSV with quoted commas."""
    found = []
    echo = own_method(check, shell, names)
    if echo is not None:
        found.append(f"{what} agrees only with a check that used the executor's own method "
                     f"(`{echo}`), not an independent one")
    elif verified:
        found += _same_reads(what, check, shell, root)
    if verified and not found and _flat_listings([check, *shell]) and \
            any("/" in p for p in files):
        found.append(f"{what} agrees with a check that, like the work, listed files without "
                     f"looking inside subfolders, and the workspace has files in subfolders")
    quoted = [f for f in _quoted_csvs(root, files) if f in check]
    if quoted and ev.naive_split(check) and any(
            ev.naive_split(c) and any(f in c for f in quoted) for c in shell):
        found.append(f"{what} and the check both split {quoted[0]} on every comma, but it has "
                     f"quoted fields that contain commas")
    return found


def same_program(a: str, b: str) -> bool:
    """Two Python checks that are one method spelt twice: they read the same keys and values
    of the same files and print (or write) them in the same shape — the same literal text
    around the values — whatever their names, loops and `open()` arguments. A resample of the
    first check counts as a second opinion only where it reads or prints otherwise (dev
    books-md-table at 432b1db: a resample that wrote the same header-less rows as the first
    check, by the same `csv.DictReader` and f-string, "confirmed" them). Not where the data
    could mislead one reading (`doubts`): where the two would make the same mistake in
    anything, including the output's layout."""
    programs = [ev.python_program(c or "") for c in (a, b)]
    if not all(programs):
        return False
    signatures = [_signature(p) for p in programs]
    return signatures[0] is not None and signatures[0] == signatures[1]


def _signature(program: str):
    """(keys and values read, files opened for reading, literal text printed or written)."""
    reads = datafiles.python_reads(program)
    if reads is None:
        return None
    tree = ast.parse(program)
    read_files = set()
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        name = node.func.id if isinstance(node.func, ast.Name) else \
            node.func.attr if isinstance(node.func, ast.Attribute) else ""
        if name == "open" and node.args and isinstance(node.args[0], ast.Constant):
            mode = node.args[1] if len(node.args) > 1 else next(
                (k.value for k in node.keywords if k.arg == "mode"), None)
            mode = mode.value if isinstance(mode, ast.Constant) else "r"
            if not set(str(mode)) & set("wax"):
                read_files.add(node.args[0].value)
    shape = {n.value for call in writer_calls(tree)
             for part in [*call.args, *(k.value for k in call.keywords)] for n in ast.walk(part)
             if isinstance(n, ast.Constant) and isinstance(n.value, str)}
    return reads[0], frozenset(read_files), frozenset(shape - reads[0])


def own_method(check: str, shell: list[str], names: Iterable[str]) -> str | None:
    """The executor's command that `check` repeats (the same method), if any."""
    return next((c for c in shell if ev.same_method(c, check, names)), None)


def _same_reads(what: str, check: str, shell: list[str], root: str) -> list[str]:
    """Two programs that read the same fields and look for the same values are one method
    (the same model writes the same program twice; a shell command that looks for the same
    value in the same file reads it the same way). Their agreement is still evidence where
    the data leaves that method no way to go wrong, and not where it does: a value spelt two
    ways, blanks, numbers mixed with words, duplicate records, records that group
    (`datafiles.data_pitfalls`)."""
    program = ev.python_program(check)
    mine = _reads(program, root) if program else None
    if mine is None:
        return []
    for command in shell:
        other = ev.python_program(command) or ""
        theirs = _reads(other, root) if other else None
        if not other and any(f in command for f in mine[1]) and \
                set(re.findall(r"[\w.@-]+", command)) & mine[0]:
            # a shell command on the same file looking for the same literal value (`grep
            # closed`, `$3=="closed"`) shares the program's reading of it
            theirs, other = mine, command
        if theirs is None or theirs[0] != mine[0]:
            continue
        text = program + other
        norms, grouped = handling(program)
        pitfalls = datafiles.data_pitfalls(root, mine[1] | theirs[1], mine[0],
                                           parsed="csv." in text or "json." in text,
                                           norms=norms, grouped=grouped)
        if pitfalls:
            fields = ", ".join(sorted(mine[0])) or "the same lines"
            return [f"{what} agrees only with a check that read the same fields the same way "
                    f"({fields}), and the data could mislead that way: {'; '.join(pitfalls[:3])}"]
    return []


def misses_spellings(command: str, root: str) -> str:
    """Why a checking program misses records, if it does: it compares a field with a value the
    data holds in several spellings, exactly (`datafiles.missed_spellings`). Neither its
    agreement nor its disagreement is then evidence (dev berlin-office-count at 902bc13: a
    resample's `row['office'] == 'Berlin'` counted 3 of the 4 'Berlin'/'berlin' records and
    confirmed a wrong 3). An SQL check compares through the loader's collation, which folds
    such a column: none of its business."""
    program = ev.python_program(command or "")
    if not program or sqlcheck.query_of(program) is not None:
        return ""
    reads = datafiles.python_reads(program)
    if reads is None:
        return ""
    return datafiles.missed_spellings(root, reads[1], reads[0], handling(program)[0])


_FOLDS = {"lower", "upper", "casefold"}
_SQL_WRAP = re.compile(r'((?:\b(?:LOWER|UPPER|TRIM|LTRIM|RTRIM)\s*\(\s*)+)"?([A-Za-z_]\w*)"?\s*\)',
                       re.I)


def handling(program: str) -> tuple[dict, set]:
    """What a check visibly does about the data's pitfalls: the fields it compares with case
    folded and/or spaces trimmed (`LOWER(TRIM(status))`, `row['status'].strip().lower()`), as
    `datafiles.normalised` functions, and the fields it groups records by (`GROUP BY customer`;
    a program that adds into a dict per key groups by every field it reads). A pitfall the
    check takes care of cannot make it agree with a wrong result, so agreement there counts."""
    query = sqlcheck.query_of(program)
    folds: dict[str, set] = {}      # field -> the lower-cased names of what wraps it
    if query is not None:
        for wrap, column in _SQL_WRAP.findall(query):
            folds.setdefault(column, set()).update(re.findall(r"[a-z]+", wrap.lower()))
        grouped = set()
        for clause in re.findall(r"(?is)\bGROUP\s+BY\s+(.+?)(?:\bHAVING\b|\bORDER\b|\bLIMIT\b|\)|$)",
                                 query):
            grouped |= {w.strip('"') for w in re.findall(r'"[^"]+"|[A-Za-z_]\w*', clause)}
    else:
        try:
            tree = ast.parse(program)
        except (SyntaxError, ValueError):
            return {}, set()
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and node.attr in _FOLDS | {"strip"}:
                key = _field_under(node.value)
                if key:
                    folds.setdefault(key, set()).add(node.attr)
        sums = any(isinstance(n, ast.AugAssign) and isinstance(n.target, ast.Subscript) or
                   isinstance(n, ast.Assign) and isinstance(n.targets[0], ast.Subscript) and
                   isinstance(n.value, ast.BinOp) for n in ast.walk(tree)) or \
            re.search(r"\b(?:Counter|defaultdict|groupby)\(", program)
        keys = (datafiles.python_reads(program) or (frozenset(), frozenset()))[0]
        grouped = set(keys) if sums else set()
    norms = {k: datafiles.normalised(bool(f & _FOLDS), bool(f & {"strip", "trim"}))
             for k, f in folds.items()}
    return norms, grouped


def _field_under(node) -> str:
    """The field a chain of string-method calls starts from (`row['x'].strip().lower()`)."""
    while True:
        if isinstance(node, ast.Call):
            func = node.func
            if isinstance(func, ast.Attribute) and func.attr == "get" and node.args and \
                    isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str):
                return node.args[0].value
            node = func.value if isinstance(func, ast.Attribute) else None
        elif isinstance(node, ast.Subscript):
            key = node.slice
            return key.value if isinstance(key, ast.Constant) and isinstance(key.value, str) \
                else ""
        else:
            return ""


def _reads(program: str, root: str):
    """What a program asks of the data: an SQL check's query (its columns and literals), or
    a Python program's keys and compared strings."""
    return sqlcheck.reads(program, root) or datafiles.python_reads(program)


_LISTS = re.compile(r"(?<![\w.-])ls\b|listdir|scandir|\bglob\b|\.iterdir\(")
_RECURSES = re.compile(r"(?<![\w.-])(?:find|tree|du)\b|\bls\s+(?:-\w*R|--recursive)|walk\(|rglob"
                       r"|\*\*|recursive\s*=\s*True|\bgrep\s+-\w*[rR]")


def _flat_listings(commands: list[str]) -> bool:
    """Both sides list a folder's files (`ls`, `os.listdir`, `glob('*.py')`) and none of them
    descends into subfolders: they share the one scope, which the goal may not mean."""
    listing = [c for c in commands if c and _LISTS.search(c)]
    return len(listing) >= 2 and _LISTS.search(commands[0] or "") is not None and \
        not any(_RECURSES.search(c or "") for c in commands)


def _quoted_csvs(root: str, files: Mapping[str, ev.FileState]) -> list[str]:
    """The workspace's (before) text files whose quoted fields hold commas."""
    found = []
    for path, state in files.items():
        if state.size > (1 << 20):
            continue
        try:
            with open(os.path.join(root, path), encoding="utf-8", errors="replace") as fh:
                if ev.quoted_commas(fh.read()):
                    found.append(path)
        except OSError:
            continue
    return found
