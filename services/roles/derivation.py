"""The independent check's request and reply (R4a's Law 0 half, `verifier.py`).

The checker is a model that sees the goal and the workspace before the work, never the
executor's commands or answer. Its reply is plain text — a FILE line and one read-only COMMAND,
or a FILE line and a PYTHON program for a goal about a data file — parsed here into a
`Derivation`.
"""
from __future__ import annotations

import ast
import os
import re
from pathlib import Path
from typing import Any, Iterable, Mapping, Optional

from pydantic import BaseModel, ConfigDict, Field, model_validator

from services.roles.programs import mended_command, python_code, python_command
from services.safety import evidence as ev, referents


class Derivation(BaseModel):
    """The re-deriving model's reply: which file the goal asks for (if any) and the command."""
    model_config = ConfigDict(extra="ignore")
    output_file: str = Field(default="", max_length=120)
    command: str = Field(default="", max_length=1500)    # a PYTHON: program is longer

    @model_validator(mode="before")
    @classmethod
    def _tolerate(cls, value: Any) -> Any:
        if isinstance(value, dict):
            value = dict(value)
            for key in ("output_file", "command"):
                if value.get(key) is None:
                    value[key] = ""
                elif not isinstance(value[key], str):
                    value[key] = str(value[key])
        return value


# Plain text, not JSON: under a JSON grammar the small model cut commands at their first `"`.
SYSTEM = """You independently check another agent's work. You see the goal and the workspace files as they were BEFORE the work.
Reply with exactly two lines:
FILE: <the file the goal asks to create or change, or none>
COMMAND: <one read-only shell command>
The command must print exactly the correct result and nothing else:
- A question: print only the answer value(s), one per line.
- A file to create or change: print exactly the content that file must have, computed from the input files.
- If what the goal asks about does not exist, print nothing.
- Use every condition the goal states. Match names exactly. Skip the header line of CSV files.
- When the goal selects by a field, column or level, compare that exact field (awk), never a word found anywhere in the line.
- Read-only: never write, move or delete files (no >, no rm, no sed -i).
Examples:
Goal: How many .md files are under docs?
FILE: none
COMMAND: find docs -type f -name '*.md' | wc -l
Goal: What is bob's email in users.csv (columns name,email)?
FILE: none
COMMAND: awk -F, -v k=bob 'NR>1 && $1==k {print $2}' users.csv
Goal: Put the names of people older than 40 from people.csv (name,age) into old.txt
FILE: old.txt
COMMAND: awk -F, 'NR>1 && $2>40 {print $1}' people.csv"""
# A goal about data inside files: the check is a short program that reads records by their
# fields (run in the sandbox on a scratch copy of the before-copy). The executor's PYTHON: form
# raised its first-attempt skill from 4/22 to 10/22 on such goals; the checker's awk was often
# wrong.
SYSTEM_PYTHON = """You independently check another agent's work. You see the goal and the workspace files as they were BEFORE the work.
Reply with a FILE: line, then a PYTHON: program:
FILE: <the file the goal asks to create or change, or none>
PYTHON:
<a short python3 program that reads the input files and prints exactly the correct result>
The program must print exactly the correct result and nothing else (it must not write files):
- A question: print only the answer value(s), one per line.
- A file to create or change: print exactly the content that file must have (do not write it).
- If what the goal asks about does not exist, print nothing.
- Split each record into its fields and compare the exact field the goal names: csv.DictReader for CSV; json.load for JSON; for logs, settings and other text, for line in open(...) with line.split() or line.partition('='). Use every condition the goal states. Match names exactly.
Examples:
Goal: What is bob's email in users.csv (columns name,email)?
FILE: none
PYTHON:
import csv
for row in csv.DictReader(open('users.csv')):
    if row['name'] == 'bob':
        print(row['email'])
Goal: Put the names of people older than 40 from people.csv (name,age) into old.txt
FILE: old.txt
PYTHON:
import csv
for row in csv.DictReader(open('people.csv')):
    if float(row['age']) > 40:
        print(row['name'])"""
_LINE = re.compile(r"^\s*(?:\*\*)?(FILE|COMMAND)(?:\*\*)?\s*:\s*(.*)$", re.I | re.M)
_PROGRAM = re.compile(r"^\s*(?:\*\*)?PYTHON(?:\*\*)?\s*:[ \t]*\n?(.*)", re.I | re.M | re.S)


def parse_derivation(text: str) -> Derivation:
    """`FILE: …` and `COMMAND: …` lines, or a `PYTHON:` program after the FILE line (run as
    `python3 -c`); a fenced block counts as the command."""
    fields = {m.group(1).upper(): m.group(2).strip() for m in _LINE.finditer(text or "")}
    program = _PROGRAM.search(text or "")
    if program and python_code(program.group(1)).strip():
        return Derivation(output_file=_file_field(fields.get("FILE", "")),
                          command=python_command(python_code(program.group(1))))
    command = fields.get("COMMAND", "")
    if not command:
        fenced = re.search(r"```(?:bash|sh)?\s*\n(.+?)```", text or "", re.S)
        command = fenced.group(1).strip() if fenced else ""
    return Derivation(output_file=_file_field(fields.get("FILE", "")),
                      command=mended_command(command.strip("`").strip()))


def _file_field(file: str) -> str:
    return "" if file.lower() in ("none", "-", "n/a", "empty", "(none)") else file


# -- reading a derivation's reply and its failure (used by the verifier) ------------------

def repair_note(check: Any, files: Iterable[str] = (),
                whole: Optional[Mapping[str, str]] = None) -> str:
    """What a check that crashed is shown when it is asked again: its own reply and the error
    it ran into — never the executor's work, so the mended check stays independent. Asked the
    same question, the small model repeats its slip (a datetime compared with 0, a column the
    JSON nests); shown the error, it mends it. A path it could not open that is a file of the
    workspace (`files`, relative paths) under another path, code resolves: shown the error
    alone, the model wrote the same wrong path again. A file it did open that the goal names
    and is small (`whole`: path -> text, what the executor's prompt showed whole) is shown
    whole: a check shown its first lines guessed the layout past them (dev server-port:
    `config['application']` in an ini file whose port is under [server], twice). `check`: a
    `DerivedCheck`, or None."""
    if check is None or not check.reply.strip() or not check.error.strip():
        return ""
    note = (f"\n\nYour previous reply:\n{check.reply.strip()[:1200]}\nIt failed when it "
            f"ran: {check.error.strip()[:300]}")
    path = missing_path(check.error)
    name = path.rstrip("/").rsplit("/", 1)[-1]
    where = sorted(f for f in files if name and f.rsplit("/", 1)[-1] == name)
    if where and path not in where:
        note += (f"\nThere is no {path}: {name} is {' or '.join(where[:3])} (paths are "
                 f"relative to the workspace folder, the current directory).")
    elif not path:
        for rel, text in (whole or {}).items():
            if rel.rsplit("/", 1)[-1] in check.reply:
                note += f"\n{rel} as it is (whole):\n{text.rstrip()}"
    return note + "\nReply again in the same form, with that mistake fixed."


def workspace_relative(command: str, workspace: str) -> str:
    """A check runs on a copy of the workspace: the goal's absolute paths into the workspace
    name nothing there, so they become relative (dev newest-report: `ls -t /…/ws/reports` on
    the copy printed "No such file or directory")."""
    for root in sorted({os.path.realpath(workspace), os.path.abspath(workspace)}, key=len,
                       reverse=True):
        if root and root != os.sep:
            command = command.replace(root + os.sep, "")
            command = re.sub(re.escape(root) + r"(?![\w.-])", ".", command)
    return command


def missing_path(error: str) -> str:
    """The path an error says does not exist (Python's `No such file or directory: 'p'`, a
    shell tool's `p: No such file or directory`), or ''."""
    match = re.search(r"No such file or directory: '([^']+)'", error or "") or re.search(
        r"([^\s:'\"‘’`]+)'?: (?:No such file|cannot open)", error or "", re.I)
    return match.group(1) if match else ""


def named_in(path: str, goal: str) -> bool:
    """The goal names `path`, relative or as the tail of a longer (absolute) path."""
    words = set(ev.tokens(goal))
    path = path.lower()
    name = path.rsplit("/", 1)[-1]
    return path in words or name in words or any(
        w.endswith("/" + path) or w.endswith("/" + name) for w in words)


def strip_redirect(command: str, file: str) -> str:
    """`grep x in > out.txt` for the output file → `grep x in`: the check must print, not write
    (the small model often writes the file it was asked to derive)."""
    if file:
        pattern = r"\s*>>?\s*(\./)?['\"]?" + re.escape(file) + r"['\"]?\s*$"
        command = re.sub(pattern, "", command)
    return command


def clean_path(raw: str) -> str:
    path = (raw or "").strip().strip("'\"`")
    if path.endswith("/"):
        return ""                      # a folder, never the file a goal asks for
    while path.startswith("./"):
        path = path[2:]
    if not path or path in (".", "none", "null", "-") or path.startswith(("/", "~")) or \
            ".." in Path(path).parts:
        return ""
    return path


def missing_key(error: str) -> str:
    """The key a check's program failed on (`KeyError: 'rating'`): a column or key the data
    lacks, which is evidence of absence when the goal names it and the workspace does not."""
    match = re.search(r"KeyError: '([^']+)'", error or "")
    return match.group(1) if match else ""


_READS = frozenset({"open", "input", "exec", "eval", "__import__", "os", "glob", "pathlib",
                    "Path", "subprocess", "sys", "shutil", "fileinput", "io", "sqlite3"})
_CONSTANT_SHELL = re.compile(r"\s*(?:echo|printf)\b[^|;&<>$`()]*"
                             r"(?:\s*(?:;|&&)\s*(?:echo|printf)\b[^|;&<>$`()]*)*\s*")


def restates(command: str, output: str, goal: str) -> bool:
    """The check printed values it was given rather than derived: it reads no input (an echo
    of literals, a program that opens nothing) and every value it printed is written in its own
    command, while the goal does not state them. It repeats a belief (a fact recalled into the
    context, or an invention); agreeing with it is no evidence. A program that computes from
    the goal's own numbers (squares of 1 to 10) prints values its text does not hold."""
    # every word, not only what answer_values counts as a value: "Your Name" and "blue" are
    # words too, and a check that reads nothing has only the goal to take them from
    words = set(ev.tokens(output))
    if not words or not words <= set(ev.tokens(command)) or words <= set(ev.tokens(goal)):
        return False
    program = ev.python_program(command)
    if program is None:
        return bool(_CONSTANT_SHELL.fullmatch(command or ""))
    try:
        tree = ast.parse(program)
    except (SyntaxError, ValueError):
        return False
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and node.id in _READS or \
                isinstance(node, (ast.Import, ast.ImportFrom)) and any(
                    (getattr(node, "module", None) or a.name).split(".")[0] in _READS
                    for a in node.names):
            return False
    return True


def not_found(error: str) -> bool:
    return bool(re.search(r"no such file|cannot open|does not exist", error or "", re.I))


def names_missing(self: Any, error: str) -> bool:
    """(`Verifier`) A check that failed on what the goal names and the workspace lacks has
    found an absence: a key (`KeyError: 'rating'`) that is one of the goal's absent terms, or a path
    ("No such file") that is a file or folder the goal names and the resolution found
    missing — not any word of the goal a command happened to use as a path."""
    key = missing_key(error)
    if key:
        return looks_for_absent(self, key)
    if not not_found(error):
        return False
    named = {m.strip("'\"‘’`").rstrip("/").rsplit("/", 1)[-1].lower() for m in re.findall(
        r"([^\s:]+): (?:No such file|cannot open|does not exist)", error, re.I)}
    refs = referents.coerce(self.subtask.referents) or \
        referents.resolve(self.goal, self.before_dir or self.workspace)
    return any(r.kind in ("file", "folder") and r.status == "missing" and
               r.text.rstrip("/").rsplit("/", 1)[-1].lower() in named for r in refs)


def looks_for_absent(self: Any, command: str) -> bool:
    """(`Verifier`) The check's command names something the goal names and the workspace
    lacks."""
    absent = ev.absent_terms(self.goal, self.before_dir or self.workspace)
    words = set(ev.tokens(command)) | {w.lower() for w in re.findall(r"[\w.]+", command)}
    return any(t in words for t in absent)
