"""What a program asks of a data file, and what in the file could mislead it.

Law 0 uses this for agreement between two programs the same small model wrote: if both read the
same fields and look for the same values (`python_reads`), they are one method, and their
agreement is evidence only where the data leaves that method no way to go wrong
(`data_pitfalls`). The workspace overview uses `spelling_hint`. Pure reading, no I/O beyond the
files named; no LLM, no bus.
"""
from __future__ import annotations

import ast
import csv
import json
import os
import re
from typing import Iterable, Optional

from services.safety.evidence import answer_values, is_number, number_value


# calls whose first string argument is something a program looks for in the data
_PY_LOOKUPS = frozenset({"get", "startswith", "endswith", "count", "find", "index"})


def python_reads(program: str) -> Optional[tuple[frozenset, frozenset]]:
    """What a program asks of the data: the string keys it reads (`row['status']`,
    `d.get('age')`), the strings it compares them with or looks for (`== 'shipped'`,
    `.startswith('#')`), and the files it opens. Two programs with the same reads are one method
    spelt twice, whatever their loops and names. None if the program does not parse."""
    try:
        tree = ast.parse(program)
    except (SyntaxError, ValueError):
        return None

    def text(node) -> bool:
        return isinstance(node, ast.Constant) and isinstance(node.value, str)

    reads: set[str] = set()
    files: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Subscript) and text(node.slice):
            reads.add(node.slice.value)
        elif isinstance(node, ast.Call) and node.args and text(node.args[0]):
            func = node.func
            if isinstance(func, ast.Name) and func.id == "open":
                files.add(node.args[0].value)
            elif isinstance(func, ast.Attribute) and func.attr in _PY_LOOKUPS:
                reads.add(node.args[0].value)
        elif isinstance(node, ast.Compare):
            for side in [node.left, *node.comparators]:
                if text(side):
                    reads.add(side.value)
                elif isinstance(side, (ast.Tuple, ast.List, ast.Set)):
                    reads.update(e.value for e in side.elts if text(e))
    return frozenset(reads), frozenset(files)


def _loose(value: str) -> str:
    return " ".join(str(value).split()).casefold()


def _spellings(values: Iterable) -> tuple[list[list[str]], dict[str, set]]:
    """The text values grouped by their case- and space-insensitive form; only groups of more
    than one spelling (`['CLOSED', 'Closed', 'closed']`), and a map of all groups."""
    groups: dict[str, set] = {}
    for v in values:
        if isinstance(v, str) and v.strip():
            groups.setdefault(_loose(v), set()).add(v)
    return [sorted(g) for g in groups.values() if len(g) > 1], groups


def normalised(fold: bool, strip: bool):
    """The value as a check that folds case and/or trims spaces compares it."""
    def norm(value: str) -> str:
        value = value.strip() if strip else value
        return value.casefold() if fold else value
    return norm


def _column_pitfalls(name: str, values: list, wanted: Iterable[str], norm=None) -> list[str]:
    """Ways a field's values make one reading of it differ from another: blanks, case or space
    variants of one value, stray spaces, numbers mixed with words, and a looked-for string that
    the field holds only in another case or spacing. With `norm` (how the check compares the
    field: case folded, spaces trimmed), the spelling pitfalls it takes care of are none."""
    found = []
    present = [v for v in values if v is not None and str(v).strip() != ""]
    if len(present) < len(values):
        found.append(f"{name} is empty in {len(values) - len(present)} record(s)")
    texts = [v for v in present if isinstance(v, str)]
    variants, groups = _spellings(texts)
    if norm is not None:
        variants = [g for g in variants if len({norm(v) for v in g}) > 1]
    if variants:
        found.append(f"{name} holds one value spelt differently: "
                     + ", ".join(repr(v) for v in variants[0][:3]))
    elif any(v != v.strip() for v in texts) and (norm is None or norm(" x") != norm("x")):
        found.append(f"{name} has values with stray spaces")
    words = _words(present)
    if words and len(words) < len(present):
        found.append(f"{name} mixes numbers with other values ({words[0]!r})")
    for want in wanted:
        loose = [v for v in groups.get(_loose(want), ()) if v != want]
        if loose and want not in groups.get(_loose(want), ()) and \
                (norm is None or any(norm(v) != want for v in loose)):
            found.append(f"{name} holds {loose[0]!r}, not {want!r} exactly")
    return found


def json_records(doc) -> list:
    """The records of a JSON document: its longest list of objects, wherever it is. Stdlib
    only and self-contained: the SQL check's loader runs this source in the sandbox."""
    stack, best = [doc], []
    while stack:
        item = stack.pop()
        if isinstance(item, list):
            dicts = [x for x in item if isinstance(x, dict)]
            if len(dicts) > len(best):
                best = dicts
            stack.extend(item)
        elif isinstance(item, dict):
            stack.extend(item.values())
    return best


def _records(path: str) -> Optional[list]:
    """A data file's records as dicts: CSV rows by header (a blank line is an empty dict, a
    short row is padded with ""), or the longest list of JSON objects anywhere in the document.
    None for other files or what does not parse."""
    try:
        with open(path, encoding="utf-8", errors="replace", newline="") as fh:
            raw = fh.read(1 << 20)
    except OSError:
        return None
    if path.endswith((".json", ".jsonl")):
        try:
            doc = json.loads(raw) if path.endswith(".json") else \
                [json.loads(l) for l in raw.splitlines() if l.strip()]
        except ValueError:
            return None
        return json_records(doc)
    if path.endswith((".csv", ".tsv")):
        rows = list(csv.reader(raw.splitlines(), delimiter="\t" if path.endswith(".tsv")
                               else ","))
        if len(rows) < 2:
            return None
        header = [h.strip() for h in rows[0]]
        return [dict(zip(header, r + [""] * (len(header) - len(r)))) if r else {}
                for r in rows[1:]]
    return None


def spelling_hint(path: str) -> str:
    """For a CSV whose field holds one value in several spellings (`closed`, `Closed`,
    `CLOSED `), a line saying so: the first lines of a file do not show it, and an exact match
    then silently misses rows (a `'closed' in` or `== 'closed'` both executor and check wrote)."""
    if not path.endswith((".csv", ".tsv")):
        return ""
    records = _records(path) or []
    for key in (records[0] if records and records[0] else {}):
        spelt, _ = _spellings(r.get(key) for r in records if r)
        if spelt:
            return (f"\n(column {key} holds the same value spelt differently: "
                    f"{', '.join(repr(v) for v in spelt[0][:4])}; compare case- and "
                    f"space-insensitively)")
    return ""


def data_pitfalls(root: str, files: Iterable[str], reads: Iterable[str], *,
                  parsed: bool = False, norms: Optional[dict] = None,
                  grouped: Iterable[str] = ()) -> list[str]:
    """What in the data files a program opens could make a program that reads `reads` wrong
    without an error: blank rows (unless `parsed`: the csv and json modules skip them), duplicate
    records, the pitfalls of each field it reads (`_column_pitfalls`), and records that group
    (`_group_pitfall`). Two programs reading the same fields the same way agree on such data
    whether or not they handled it; on data without them their agreement means more. What the
    check visibly handles is no pitfall: a field it compares through `norms[field]` (case
    folded, spaces trimmed), records grouped by a field of `grouped` (GROUP BY, a sum per key)."""
    norms = norms or {}
    reads = [r for r in reads if isinstance(r, str)]
    found: list[str] = []
    for name in sorted(set(files)):
        path = os.path.realpath(os.path.join(root, name))
        if not path.startswith(os.path.realpath(root) + os.sep) or not os.path.isfile(path):
            continue
        records = _records(path)
        if not records:
            continue
        if not parsed and any(not r for r in records):
            found.append(f"{name} has blank rows")
        rows = [tuple(sorted((k, str(v)) for k, v in r.items())) for r in records if r]
        if len(set(rows)) < len(rows):
            found.append(f"{name} has duplicate records")
        keys = {k for r in records for k in r}
        wanted = [w for w in reads if w not in keys]
        columns = {k: [r.get(k) for r in records if r] for k in sorted(k for k in reads
                                                                       if k in keys)}
        for key, values in columns.items():
            found += [f"{name}: {p}" for p in _column_pitfalls(key, values, wanted,
                                                                norms.get(key))]
        found += [f"{name}: {p}" for p in _group_pitfall(
            {k: v for k, v in columns.items() if k not in set(grouped)}, wanted,
            numbers=[k for k, v in columns.items() if _numeric(v)])]
    return found


def missed_spellings(root: str, files: Iterable[str], reads: Iterable[str],
                     norms: Optional[dict] = None) -> str:
    """Where a program that looks for a value in a field misses records: the field holds that
    value in several spellings (`'Berlin'`, `'berlin'`, `'Berlin '`) and the program compares it
    without folding them together (`norms[field]`, as `data_pitfalls` takes it). Its count or
    list then leaves out the records spelt otherwise, whatever it printed. '' if none."""
    norms = norms or {}
    reads = [r for r in reads if isinstance(r, str)]
    for name in sorted(set(files)):
        path = os.path.realpath(os.path.join(root, name))
        if not path.startswith(os.path.realpath(root) + os.sep) or not os.path.isfile(path):
            continue
        records = [r for r in _records(path) or () if r]
        keys = {k for r in records for k in r}
        wanted = [w for w in reads if w not in keys and w.strip()]
        for key in sorted(k for k in reads if k in keys):
            _, groups = _spellings(r.get(key) for r in records)
            norm = norms.get(key) or (lambda v: v)
            for want in wanted:
                group = groups.get(_loose(want), set()) | {want}
                if len(group) > 1 and len({norm(v) for v in group}) > 1:
                    held = ", ".join(repr(v) for v in sorted(group - {want})[:3])
                    return (f"{name}'s {key} holds {want!r} also as {held}, and it compares "
                            f"{key} with {want!r} without folding case and spaces")
    return ""


def _words(values: list) -> list:
    """The values that are not numbers."""
    return [v for v in values if not isinstance(v, (int, float)) and not is_number(str(v).strip())]


def _numeric(values: list) -> bool:
    present = [v for v in values if v is not None and str(v).strip() != ""]
    return bool(present) and not _words(present)


def _group_pitfall(columns: dict[str, list], wanted: Iterable[str],
                   numbers: Optional[list] = None) -> list[str]:
    """A text field that repeats across records, read together with a number and not compared
    with a value (a filter): the value of one record and the total (or mean) per group are two
    answers, and the same model picks the same one twice (the largest payment, not the customer
    who paid most)."""
    numbers = [k for k, v in columns.items() if _numeric(v)] if numbers is None else numbers
    looked = {_loose(w) for w in wanted}
    for key, values in columns.items():
        texts = [str(v).strip() for v in values if isinstance(v, str) and v.strip()]
        if not numbers or key in numbers or len(set(texts)) == len(texts) or \
                len(texts) < len(values) or looked & {_loose(t) for t in texts}:
            continue
        return [f"{key} repeats ({len(texts)} records, {len(set(texts))} different values), so "
                f"{numbers[0]} per record and {numbers[0]} per {key} differ"]
    return []


def header_counted(root: str, goal: str, answer: str) -> str:
    """The CSV the goal names whose line count, header line included, is the answer's only
    number: the count of records off by one that `wc -l` and `len(readlines())` agree on (not
    suspect when the goal asks for lines)."""
    numbers = [v for v in answer_values(answer) if is_number(v)]
    if len(numbers) != 1 or re.search(r"\blines?\b", goal, re.I):
        return ""
    for name in re.findall(r"[\w./-]+\.[ct]sv\b", goal):
        records = _records(os.path.join(root, name))
        if records and number_value(numbers[0]) == len(records) + 1:
            return name
    return ""
