"""The checker's third form for goals about tabular data: an SQL query over tables code loaded.

"Verified" needs a second derivation in another form than the first (k-of-N, confirm.py). For a
goal about a CSV/TSV/JSON file the first is a Python program, and the other form used to be a
shell one-liner, which the small model gets wrong on exactly such files: `awk -F,` splits quoted
commas, counts the header line, compares the wrong column (dev runs: most right answers left
unverified had an awk check that misread the file). Here code does the reading — the header gives
the column names, quoting and types are the csv/json modules' business — and the model states
only the logic, as one SELECT. That is another method in fact, not in spelling: a different
language over a different reading of the file, so its agreement is evidence the shell form rarely
gave, and its mistakes are not the program's.

The query runs as a `python3 -c` program (the loader below plus the query) in the sandbox on a
scratch copy, like any checking program; its rows are printed one per line, a row of several
values as a CSV record. `reads` gives Law 0's independence rules what the query asks of the data (its
columns and looked-for strings), as `datafiles.python_reads` does for a program.
"""
from __future__ import annotations

import ast
import csv
import inspect
import io
import os
import re
import shlex
from typing import Optional

from services.roles.programs import PYTHON_PREFIX
from services.safety import datafiles

# Loaded in the sandbox (stdlib only) and, for the prompt's table list, here: one reading of the
# files for both. A table per file: CSV/TSV rows by header, the longest list of JSON objects
# anywhere in the document, or a log's lines (below); a column is INTEGER or REAL if every
# non-empty value is one, else TEXT; nested JSON values are JSON text (json_extract, json_array_length work on them),
# and the scalars of a nested object are columns as well (`_flat`).
LOADER = r'''
import csv, json, os, re, sqlite3, sys

def _rows(path):
    with open(path, encoding="utf-8", errors="replace", newline="") as fh:
        raw = fh.read(1 << 20)
    if path.endswith((".json", ".jsonl")):
        doc = json.loads(raw) if path.endswith(".json") else \
            [json.loads(l) for l in raw.splitlines() if l.strip()]
        best = _flat(json_records(doc))
        cols = []
        for d in best:
            cols += [k for k in d if k not in cols]
        return cols, [[d.get(c) for c in cols] for d in best]
    if path.endswith(".log"):
        return _log_rows(raw)
    rows = [r for r in csv.reader(raw.splitlines(),
                                  delimiter="\t" if path.endswith(".tsv") else ",") if r]
    if not rows:
        return [], []
    cols = [h.strip() for h in rows[0]]
    return cols, [(r + [""] * len(cols))[:len(cols)] for r in rows[1:]]

def _flat(records):
    """Records whose values are objects get a column per scalar inside, beside the object's own
    (JSON text): `email`, or `contact_email` where the name is taken or under two objects. A
    query names the value as the data nests it (`SELECT name, email ...`), no json_extract."""
    top, parents = set(), {}
    for d in records:
        top.update(d)
        for k, v in d.items():
            if isinstance(v, dict):
                for k2, v2 in v.items():
                    if not isinstance(v2, (list, dict)):
                        parents.setdefault(k2, set()).add(k)
    out = []
    for d in records:
        flat = dict(d)
        for k, v in d.items():
            if isinstance(v, dict):
                for k2, v2 in v.items():
                    if not isinstance(v2, (list, dict)):
                        alone = len(parents[k2]) == 1 and k2 not in top
                        flat.setdefault(k2 if alone else f"{k}_{k2}", v2)
        out.append(flat)
    return out

# A log's line is a table row by what code finds in it, not by position: a leading timestamp
# (date, time), a severity word (level), key=value pairs (a column per key), the words after those
# (w1..w4) and the text after the timestamp and level (message); `line` is the line as written.
_STAMP = re.compile(r"\[?(\d{4}-\d{2}-\d{2})(?:[T ](\d{2}:\d{2}(?::\d{2})?(?:[.,]\d+)?)"
                    r"(?:Z|[+-]\d{2}:?\d{2})?)?\]?\s*|\[?(\d{2}:\d{2}:\d{2}(?:[.,]\d+)?)\]?\s*")
_LEVELS = {"TRACE", "DEBUG", "INFO", "NOTICE", "WARN", "WARNING", "ERROR", "ERR", "CRIT",
           "CRITICAL", "ALERT", "EMERG", "FATAL", "SEVERE"}
_PAIR = re.compile(r"([A-Za-z_]\w*)=(\"[^\"]*\"|'[^']*'|\S*)")

def _log_row(line):
    row = {"line": line}
    stamp = _STAMP.match(line)
    rest = line
    if stamp:
        row["date"], row["time"] = stamp.group(1), stamp.group(2) or stamp.group(3)
        rest = line[stamp.end():]
    first = (rest.split() or [""])[0]
    if first.strip("[]():<>").upper() in _LEVELS:
        row["level"] = first.strip("[]():<>")
        rest = rest.lstrip()[len(first):]
    row["message"] = rest.strip()
    for key, value in _PAIR.findall(rest):
        row.setdefault("kv:" + key, value.strip("\"'"))
    for k, word in enumerate(_PAIR.sub(" ", rest).split()[:4], 1):
        row[f"w{k}"] = word
    return row

def _log_rows(raw):
    found = [(i, _log_row(l)) for i, l in enumerate(raw.splitlines(), 1) if l.strip()]
    keys = []      # a key is a column where it is a field of the lines, not one message's text
    for _, r in found:
        keys += [k for k in r if k.startswith("kv:") and k not in keys
                 and 4 * sum(k in o for _, o in found) >= max(len(found), 8)]
    fixed = [c for c in ("date", "time", "level") if any(c in r for _, r in found)]
    cols = ["n", "line"] + fixed + keys[:8] + \
        [f"w{k}" for k in range(1, 5) if any(f"w{k}" in r for _, r in found)] + ["message"]
    names = [(c[3:] if c[3:] not in cols else c[3:] + "_value") if c.startswith("kv:") else c
             for c in cols]
    return names, [[i] + [r.get(c) for c in cols[1:]] for i, r in found]

def _value(v, kind):
    if v is None or (isinstance(v, str) and not v.strip()):
        return None
    if isinstance(v, (list, dict)):
        return json.dumps(v)
    if kind == "INTEGER":
        return int(str(v).strip())
    if kind == "REAL":
        return float(str(v).strip())
    return v if isinstance(v, str) else json.dumps(v)

def _kind(values):
    present = [v for v in values if v is not None and str(v).strip() != ""]
    if not present or any(isinstance(v, (list, dict, bool)) for v in present):
        return "TEXT"
    for kind, cast in (("INTEGER", int), ("REAL", float)):
        try:
            for v in present:
                cast(str(v).strip())
            return kind
        except ValueError:
            pass
    return "TEXT"

def load(files):
    """{table: (path, [(column, type)], rows)} for the files."""
    tables = {}
    for path in files:
        try:
            cols, rows = _rows(path)
        except (OSError, ValueError):
            continue
        if not cols:
            continue
        name = re.sub(r"\W", "_", os.path.basename(path).rsplit(".", 1)[0]) or "t"
        if name[0].isdigit():
            name = "t_" + name
        while name in tables:
            name += "_"
        kinds = [_kind([r[i] for r in rows]) for i in range(len(cols))]
        tables[name] = (path, list(zip(cols, [_collate(k, [r[i] for r in rows])
                                              for i, k in enumerate(kinds)])),
                        [[_value(r[i], kinds[i]) for i in range(len(cols))] for r in rows])
    return tables

def _collate(kind, values):
    """A text column that holds one value in two cases (`Berlin`, `berlin`) compares without
    case (`= 'Berlin'`, GROUP BY, DISTINCT): the data says its case means nothing, and a query
    matching one spelling contradicted a right count."""
    text = {v for v in values if isinstance(v, str) and v.strip()}
    return kind + " COLLATE NOCASE" if kind == "TEXT" and \
        len({v.lower() for v in text}) < len(text) else kind

def _cell(v):
    if v is None:
        return ""
    if isinstance(v, float) and v.is_integer() and abs(v) < 1e15:
        return str(int(v))
    return str(v)

def _db(files):
    db, tables = sqlite3.connect(":memory:"), load(files)
    for name, (path, cols, rows) in tables.items():
        db.execute(f'CREATE TABLE "{name}" (' + ", ".join(
            '"' + c.replace('"', '""') + '" ' + k for c, k in cols) + ")")
        db.executemany(f'INSERT INTO "{name}" VALUES (' + ", ".join("?" * len(cols)) + ")",
                       rows)
    return db, tables

def run_change(files, statement, target):
    """A statement that changes the table of `target` (a CSV/TSV file), then that table as the
    file must read afterwards: its header, then its rows in their order."""
    db, tables = _db(files)
    name = next((n for n, (p, _, _) in tables.items() if p == target), None)
    changed = re.match(r'\s*(?:(?:INSERT|REPLACE)(?:\s+OR\s+\w+)?\s+INTO|UPDATE(?:\s+OR\s+\w+)?'
                       r'|DELETE\s+FROM)\s+["`\[]?(\w+)', statement, re.I)
    if name is None or not changed or changed.group(1).lower() != name.lower():
        print(f"the statement changes no table of {target}", file=sys.stderr)
        sys.exit(2)
    try:
        db.execute(null_safe(statement))
        rows = db.execute(f'SELECT * FROM "{name}" ORDER BY rowid').fetchall()
    except sqlite3.Error as exc:
        print(f"the statement failed: {exc}", file=sys.stderr)
        sys.exit(2)
    out = csv.writer(sys.stdout, delimiter="\t" if target.endswith(".tsv") else ",",
                     lineterminator="\n")
    out.writerow([c for c, _ in tables[name][1]])
    for row in rows:
        out.writerow([_cell(v) for v in row])

def null_safe(query):
    """`a != b` as `a IS NOT b`, outside string literals: a blank cell is loaded as NULL, and
    `previous_office != 'Berlin'` drops the rows with no previous office, where the file, read
    as text (Python, awk), says a blank is not Berlin (dev berlin-office-count: a query printed
    3 for 4). IS NOT has the precedence of != in SQLite."""
    parts = re.split(r"('(?:[^']|'')*')", query)
    return "".join(p if i % 2 else re.sub(r"!=|<>", " IS NOT ", p) for i, p in enumerate(parts))

def run(files, query):
    db, _ = _db(files)
    out = csv.writer(sys.stdout, lineterminator="\n")
    try:
        for row in db.execute(null_safe(query)):
            # a row of several values is a CSV record (a value holding a comma is quoted, as
            # the csv module writes it); one value is printed as it is
            if len(row) > 1:
                out.writerow([_cell(v) for v in row])
            else:
                print(_cell(row[0]))
    except sqlite3.Error as exc:
        print(f"the query failed: {exc}", file=sys.stderr)
        sys.exit(2)
'''
LOADER = inspect.getsource(datafiles.json_records) + LOADER   # one reading of JSON records
_NS: dict = {}
exec(compile(LOADER, "<sqlcheck loader>", "exec"), _NS)   # noqa: S102 - our own constant

SYSTEM_SQL = """You independently check another agent's work. You see the goal and the tables code loaded from the workspace's data files BEFORE the work (one table per file, its header as column names).
Reply with a FILE: line, then an SQL: line:
FILE: <the file the goal asks to create or change, or none>
SQL: <one SQLite SELECT statement>
Code prints the rows of your query, one per line, the values of a row joined by commas. They must be exactly the correct result:
- A question: select only the answer value(s).
- A file to create or change: select exactly the lines that file must have, in its order.
- If what the goal asks about does not exist, select nothing.
- Use every condition the goal states, on the exact column the goal names. Where a column holds one value in several spellings, compare LOWER(TRIM(column)).
- A log file is a table of its lines: n (line number), line (the whole line as written), date, time and level where lines start with them, a column per key=value key, w1..w4 (the other words, in order) and message (the text after time and level). Select by the column that holds the field the goal names (level = 'ERROR'), never by text found anywhere in line or message.
- To sort, ORDER BY the selected expression itself (ORDER BY 1).
- A column holding JSON lists or objects: json_array_length(column), json_extract(column, '$.key').
Examples:
Goal: What is bob's email in users.csv?
Tables: users (users.csv): name TEXT, email TEXT
FILE: none
SQL: SELECT email FROM users WHERE name = 'bob'
Goal: Put the names of people older than 40 from people.csv into old.txt
Tables: people (people.csv): name TEXT, age INTEGER
FILE: old.txt
SQL: SELECT name FROM people WHERE age > 40
Goal: How many accounts in accounts.csv are active?
Tables: accounts (accounts.csv): id INTEGER, state TEXT
  state values: 'ACTIVE', 'Active', 'active', 'closed'
FILE: none
SQL: SELECT COUNT(*) FROM accounts WHERE LOWER(TRIM(state)) = 'active'
Goal: list the hosts that were denied in access.log, in order
Tables: access (access.log): n INTEGER, line TEXT, date TEXT, time TEXT, w1 TEXT, w2 TEXT, message TEXT
  w2 values: 'ALLOW', 'DENY'
FILE: none
SQL: SELECT w1 FROM access WHERE w2 = 'DENY' ORDER BY n"""

_TABULAR = re.compile(r"[\w./-]+\.(?:csv|tsv|json|jsonl|log)\b", re.I)
MAX_TABLES = 4


def tabular_files(goal: str, root: str, also: list[str] = ()) -> list[str]:
    """The CSV/TSV/JSON/log files the goal names that exist under root (relative paths), and those
    of `also` (where code resolved the goal's files and fields: "the team file")."""
    names = {m.group(0).strip("./") for m in _TABULAR.finditer(goal or "")}
    base = os.path.realpath(root)
    found = [p for p in dict.fromkeys(also) if _TABULAR.fullmatch(p)
             and os.path.isfile(os.path.join(base, p))]
    for name in sorted(names):
        if os.path.isfile(os.path.join(base, name)):
            found += [name] if name not in found else []
            continue
        for dirpath, _, files in os.walk(base):
            if os.path.basename(name) in files:
                rel = os.path.relpath(os.path.join(dirpath, os.path.basename(name)), base)
                found += [rel] if rel not in found else []
                break
    return found[:MAX_TABLES]


def describe(files: list[str], root: str) -> str:
    """The tables as the prompt shows them: columns with types, two rows, and the values of a
    text column that holds few (so its spellings are in view)."""
    lines = []
    for name, (path, cols, rows) in _load(files, root).items():
        lines.append(f"{name} ({path}, {len(rows)} rows): " +
                     ", ".join(f"{_ident(c)} {k}" for c, k in cols))
        try:
            raw = _NS["_rows"](os.path.join(root, path))[1]
        except (OSError, ValueError):
            raw = []
        for row in rows[:2]:
            lines.append("  row: (" + ", ".join(repr(v[:40]) if isinstance(v, str) else
                                               "NULL" if v is None else _NS["_cell"](v)
                                               for v in row) + ")")
        for i, (col, kind) in enumerate(cols):
            values = sorted({r[i] for r in rows if isinstance(r[i], str)})
            if kind.startswith("TEXT") and 1 < len(values) <= 8 and len(values) < len(rows):
                lines.append(f"  {_ident(col)} values: " + ", ".join(repr(v) for v in values))
            nested = {type(r[i]).__name__ for r in raw}
            if nested & {"list", "dict"}:
                lines.append(f"  {_ident(col)} holds JSON "
                             f"{' and '.join(sorted(n + 's' for n in nested & {'list', 'dict'}))}")
    return "\n".join(lines)


def _load(files: list[str], root: str) -> dict:
    """The loader's tables, its paths read under root (relative names kept)."""
    tables = _NS["load"]([os.path.join(root, f) for f in files])
    return {name: (os.path.relpath(path, root), cols, rows)
            for name, (path, cols, rows) in tables.items()}


def _ident(column: str) -> str:
    return column if re.fullmatch(r"[A-Za-z_]\w*", column) else '"' + column + '"'


_SQL = re.compile(r"^\s*(?:\*\*)?SQL(?:\*\*)?\s*:[ \t]*\n?(.*)", re.I | re.M | re.S)


def parse_query(text: str) -> str:
    """The SELECT of an `SQL:` reply (fences and trailing prose dropped, one statement); '' if
    there is none or it is not a query."""
    query = _statement(text)
    return query if re.match(r"(?is)\s*(SELECT|WITH)\b", query) else ""


_CHANGE = re.compile(r"(?is)\s*(INSERT|REPLACE|UPDATE|DELETE)\b")


def is_change(query: str) -> bool:
    """A statement that changes a table: its derivation is the file's whole content, header
    included (`derivation`)."""
    return bool(_CHANGE.match(query or ""))


def derivation(text: str, files: list[str], change_file: str = "") -> tuple[str, str]:
    """(statement, program) of an `SQL:` reply over the tables of `files`: a SELECT, or, where
    the goal changes `change_file` and it is one of the CSV/TSV `files`, a statement that changes
    its table (INSERT, UPDATE, DELETE) — the table afterwards, header first, is what the file
    must hold. The model writes `INSERT INTO members …` for "add a row to members.csv" whatever
    the prompt asks (dev append-user-row, three runs): a SELECT cannot say it, and without this
    no check in the SQL form could confirm a changed table. ('', '') for anything else."""
    query = parse_query(text)
    if query:
        return query, command(files, query)
    statement = _statement(text)
    target = next((f for f in files if change_file and f.endswith((".csv", ".tsv")) and (
        f == change_file or f.rsplit("/", 1)[-1] == change_file)), "")
    if not target or not is_change(statement):
        return "", ""
    return statement, command(files, statement, target=target)


def _statement(text: str) -> str:
    """The one statement of an `SQL:` reply, fences and trailing prose dropped."""
    match = _SQL.search(text or "")
    body = match.group(1) if match else ""
    if not body:
        fenced = re.search(r"```sql\s*\n(.+?)```", text or "", re.S | re.I)
        body = fenced.group(1) if fenced else ""
    body = re.sub(r"^\s*```[a-z]*[ \t]*\n?", "", body, flags=re.I)
    body = body.split("```", 1)[0]
    query = body.split(";", 1)[0].strip()
    return "\n".join(line for line in query.splitlines()
                     if not re.match(r"\s*(FILE|COMMAND|PYTHON)\s*:", line, re.I)).strip()


def foreign_layout(output: str, file: str, query: str) -> bool:
    """A query prints its rows comma-separated — code's rendering (`run`), not a reading of the
    goal. Rows of several cells say nothing of the layout of a file whose name does not make it
    comma-separated (a markdown table, a report, a .tsv): against such a file a query neither
    confirms nor contradicts (dev books-md-table at e7e9187: a query's comma rows "confirmed" a
    CSV the executor wrote to books.md, which the goal asked to be a markdown table). A change
    statement prints the changed file in its own layout (`run_change`)."""
    if file.lower().endswith(".csv") or is_change(query):
        return False
    return any(len(row) > 1 for row in csv.reader(io.StringIO(output)))


def rows_after_header(content: str, query: str) -> Optional[str]:
    """`content` without its first line, when that line is a header of the query's columns —
    each of its fields (comma, tab or semicolon separated) a word of the query — else None. A
    query prints rows, never a header: the rows of a file that begins with its column names are
    what it can confirm (dev active-users-csv: `name,email` then the rows, and the query's
    right rows "did not agree")."""
    lines = content.splitlines(keepends=True)
    if len(lines) < 2:
        return None
    fields = [f.strip().strip('"').lower() for f in re.split(r"[,\t;]", lines[0].strip())]
    words = set(re.findall(r"[a-z_][a-z0-9_]*", query.lower()))
    return "".join(lines[1:]) if fields and all(f in words for f in fields) else None


def command(files: list[str], query: str, *, target: str = "") -> str:
    """The query as the `python3 -c` program that loads the files and prints its rows (with
    `target`, the statement that changes that file's table, and the table afterwards)."""
    call = f"run_change({files!r}, QUERY, {target!r})" if target else f"run({files!r}, QUERY)"
    code = f"{LOADER}\nQUERY = {query!r}\n{call}\n"
    return PYTHON_PREFIX + shlex.quote(code)


_QUERY_LINE = re.compile(r"^QUERY = (.+)$", re.M)


def query_of(program: str) -> Optional[str]:
    """The SQL of a program `command` built, or None for any other program."""
    if "def run(files, query)" not in (program or ""):
        return None
    match = _QUERY_LINE.search(program)
    if not match:
        return None
    try:
        value = ast.literal_eval(match.group(1))
    except (ValueError, SyntaxError):
        return None
    return value if isinstance(value, str) else None


def reads(program: str, root: str) -> Optional[tuple[frozenset, frozenset]]:
    """What a query program asks of the data, in `datafiles.python_reads`' shape: the string
    literals it compares with and the column names it mentions (quoted or bare, as the files
    under `root` name them), and the files it loads. None for any other program."""
    query = query_of(program)
    if query is None:
        return None
    files = re.search(r"^run(?:_change)?\((\[.*?\]), QUERY[,)]", program, re.M)
    try:
        paths = frozenset(ast.literal_eval(files.group(1))) if files else frozenset()
    except (ValueError, SyntaxError):
        paths = frozenset()
    literals = set(re.findall(r"'((?:[^']|'')*)'", query))
    words = set(re.findall(r'"([^"]+)"|([A-Za-z_]\w*)', query))
    names = {a or b for a, b in words}
    columns: set[str] = set()
    for _, cols, _ in _load(sorted(paths), root).values():
        columns |= {c for c, _ in cols if c in names}
    return frozenset(literals | columns), paths
