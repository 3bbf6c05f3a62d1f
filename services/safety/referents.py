"""Referents: what a goal names, resolved against the workspace by code, once, before any model
call.

A goal reads and writes things it names: files and paths, folders, file extensions, the fields
of its data (columns, keys, settings), quoted values, and the records it singles out. Each is
extracted from the goal's words (`extract`) and resolved against the workspace (`resolve`):
found (where), or missing with its near matches ("no reports/q3.csv; near: reports/q1.csv").
The result travels with the task (TaskSpec.referents → SubTask.referents) to the planner, the
executor, the checkers and Law 0, so every kind of referent gets the same treatment:

* a missing referent the goal reads (not one it creates) makes the goal `not_possible` before
  any model call (`decisive`), with the evidence and the near matches offered;
* work that reads a near match of a missing referent, or a sibling of a named file instead of
  the file itself, answered another question and cannot be verified (`misread`).

Pure reading of the workspace: no LLM, no bus.
"""
from __future__ import annotations

import csv
import difflib
import json
import os
import re
from dataclasses import dataclass, field
from typing import Iterable, Optional

from services.safety.evidence import SKIP_DIRS, STOPWORDS, absent_terms, asks_to_change, \
    number_forms, workspace_words

KINDS = ("file", "folder", "extension", "field", "value")
MAX_FILES = 5000
_DATA_EXT = (".csv", ".tsv", ".json", ".jsonl", ".ini", ".env", ".cfg", ".conf", ".yaml",
             ".yml", ".toml", ".properties")

_FILE = re.compile(r"(?<![\w@/.:~-])((?:~?/)?(?:[\w.-]+/)*[\w-][\w.-]*\.[A-Za-z][A-Za-z0-9]{0,5})"
                   r"(?![\w/-])")
_ABS_PATH = re.compile(r"(?<![\w@/.:-])(~?/[\w.-]+(?:/[\w.-]+)*/?)(?=[\s,;:!?)'\"`]|\.(?:\s|$)|$)")
_FOLDER_SLASH = re.compile(r"(?<![\w@/.:~-])((?:~?/)?(?:[\w.-]+/)+)(?=[\s,;:!?)'\"`]|\.(?:\s|$)|$)")
_FOLDER_WORD = re.compile(r"\b(?:the\s+|a\s+|an\s+)?([\w.-]+)\s+(?:folder|directory|dir|subfolder)\b"
                          r"|\b(?:folder|directory|subfolder)\s+(?:called\s+|named\s+)?"
                          r"['\"`]?([\w.-]+/?)", re.I)
_EXTENSION = re.compile(r"(?:(?<=\s)|(?<=^)|(?<=[\"'`(*]))\.([A-Za-z][A-Za-z0-9]{0,5})\b")
_FIELD_WORD = re.compile(r"\b([\w-]+)\s+(?:column|field|key|setting|attribute|property)s?\b"
                         r"|\b(?:column|field|key|setting)s?\s+(?:called\s+|named\s+)?"
                         r"['\"`]?([\w.-]+)", re.I)
_FIELD_PAIR = re.compile(r"\b([\w-]+)\s*(?:,|and|&)\s*([\w-]+)\s+(?:columns|fields|keys)\b", re.I)
_IDENTIFIER = re.compile(r"(?<![\w./-])([A-Za-z][A-Za-z0-9]*(?:_[A-Za-z0-9]+)+|"
                         r"[a-z]+[A-Z][A-Za-z0-9]*)(?![\w./-])")
_QUOTED = re.compile(r"(?:^|(?<=[\s(:=,]))(?:\"([^\"\n]{1,80})\"|'([^'\n]{1,80})'|"
                     r"`([^`\n]{1,80})`|“([^”\n]{1,80})”)")
_CREATE_BEFORE = re.compile(r"(?:\b(?:to|into|as|named|called|create|creating|new|produce|"
                            r"generate|make)\b|>)\s*(?:(?:a|an|the|new|file|folder|directory|"
                            r"called|named|text)\s+){0,4}['\"`]?$", re.I)
# "to" that is no destination: a compound preposition ("according to config/mail.conf" reads it)
_NOT_DESTINATION = re.compile(r"\b(?:according|next|compared|due|relative|similar|close|prior|"
                              r"thanks|related|belongs?|refers?|points?|pointing|up)\s+to\s*"
                              r"(?:(?:a|an|the|file|folder|directory|called|named|text)\s+){0,4}"
                              r"['\"`]?$", re.I)
# what marks a place the goal reads from, in a goal that also writes
_READ_BEFORE = re.compile(r"\b(?:from|of|under|inside|within|through|across|read|reads|reading|"
                          r"using|use|in)\s*(?:(?:a|an|the|file|folder|directory|called|named)\s+)"
                          r"{0,3}['\"`]?$", re.I)
_COUNTING = re.compile(r"\b(how many|how often|count|(?:the|total)\s+number of|is there|are there|does any|"
                       r"do any|whether)\b", re.I)
# words a folder phrase puts before "folder" that name no folder
_NOT_A_NAME = STOPWORDS | frozenset("""
new same current workspace home other parent sub top root given existing target source output
input main whole entire own project's that's directly inside under below above many much several
few more most less least different distinct unique various multiple numeric total first last
""".split())


@dataclass
class Referent:
    text: str                     # as the goal names it (a path relative to the workspace)
    kind: str                     # one of KINDS
    role: str = "read"            # read / create (the goal makes it) / either
    status: str = "found"         # found / missing / outside (not under the workspace)
    where: list[str] = field(default_factory=list)   # workspace paths that hold it
    near: list[str] = field(default_factory=list)    # near matches, when missing
    labelled: bool = True         # named as what it is ("the amount column", a path, quotes)

    def describe(self) -> str:
        if self.status == "found":
            return f"{self.kind} {self.text}: found in {', '.join(self.where[:3]) or 'workspace'}"
        near = f"; near: {', '.join(self.near[:4])}" if self.near else ""
        return f"{self.kind} {self.text}: {self.status}{near}"

    def as_dict(self) -> dict:
        return {"text": self.text, "kind": self.kind, "role": self.role, "status": self.status,
                "where": self.where[:5], "near": self.near[:5], "labelled": self.labelled}


# ---------------------------------------------------------------------------------------------
# extraction
# ---------------------------------------------------------------------------------------------

_EXAMPLE = re.compile(r"\b(?:e\.\s?g\.?|eg\.|for example|for instance|such as)", re.I)
_CLAUSE_END = re.compile(r"[.!?;)](?=\s|$)")


def _in_example(goal: str, start: int) -> bool:
    """The name stands in an example of the sentence ("e.g. sales-2024-03.csv ->
    2024-03-sales.csv", "such as a.txt"): an illustration of a pattern the goal describes,
    neither a thing it reads (a missing one made a rename goal `not_possible`) nor one it
    makes."""
    return any(not _CLAUSE_END.search(goal, m.end(), start)
               for m in _EXAMPLE.finditer(goal, 0, start))


def _role(goal: str, start: int, change: bool, kind: str) -> str:
    """read, create or either. What follows "to", "into", "as", "named" ... is made (and must
    exist afterwards); in a question everything else is read; in a goal that writes, what follows
    "from", "of", "under" ... is read, a field is read, and any other name is "either": it
    decides nothing (never a false not_possible) and is not required afterwards ("Delete
    old.txt", "Write 'hello' to x.txt"). "in" reads a folder but writes a file ("save it in
    hottest.txt"). A name in an example ("e.g. a.csv -> b.csv") is "either"."""
    if _in_example(goal, start):
        return "either"
    before = goal[max(0, start - 48):start]
    if _CREATE_BEFORE.search(before) and not _NOT_DESTINATION.search(before) and \
            (change or kind in ("file", "folder")):
        return "create"
    if not change or kind == "field":
        return "read"
    read = _READ_BEFORE.search(before)
    if read and kind == "file" and re.search(r"\bin\s", read.group(0) + " ", re.I):
        return "in"                   # resolved: read when it exists, else create
    return "read" if read else "either"


def extract(goal: str) -> list[Referent]:
    """The referents of a goal, each once (first mention decides its role), without touching
    the workspace."""
    goal = goal or ""
    change = asks_to_change(goal)
    found: dict[tuple[str, str], Referent] = {}
    spans: list[tuple[int, int]] = []

    def add(text: str, kind: str, start: int, *, labelled: bool = True) -> None:
        text = text.strip().rstrip(".")
        if not text or any(t == text.lower() for _, t in found):
            return                    # one name, one referent (the first kind that took it)
        found[(kind, text.lower())] = Referent(text=text, kind=kind, labelled=labelled,
                                               role=_role(goal, start, change, kind))

    for m in _FILE.finditer(goal):
        text = m.group(1)
        if re.fullmatch(r"[\d.]+", text) or text.lower() in ("e.g", "i.e", "etc"):
            continue
        add(text, "file", m.start(1))
        spans.append(m.span(1))
    for m in _ABS_PATH.finditer(goal):
        if not any(a <= m.start(1) < b for a, b in spans):
            path = m.group(1)
            add(path.rstrip("/") or "/", "folder" if path.endswith("/") else "file", m.start(1))
            spans.append(m.span(1))
    for m in _FOLDER_SLASH.finditer(goal):
        if any(a <= m.start(1) < b for a, b in spans):
            continue
        add(m.group(1).rstrip("/") or "/", "folder", m.start(1))
    for m in _FOLDER_WORD.finditer(goal):
        name = (m.group(1) or m.group(2) or "").rstrip("/")
        if name and name.lower() not in _NOT_A_NAME and not re.fullmatch(r"\d+", name) and \
                "." not in name.strip("."):
            add(name, "folder", m.start(m.lastindex or 0))
    for m in _EXTENSION.finditer(goal):
        if any(a <= m.start() < b for a, b in spans):
            continue
        add("." + m.group(1).lower(), "extension", m.start())
    for m in _FIELD_WORD.finditer(goal):
        name = m.group(1) or m.group(2) or ""
        if name and name.lower() not in _NOT_A_NAME and not name.isdigit():
            add(name, "field", m.start(m.lastindex or 0))
    for m in _FIELD_PAIR.finditer(goal):
        for g in (1, 2):
            if m.group(g).lower() not in _NOT_A_NAME:
                add(m.group(g), "field", m.start(g))
    for m in _IDENTIFIER.finditer(goal):
        if not any(a <= m.start(1) < b for a, b in spans):
            add(m.group(1), "field", m.start(1))
    for m in _QUOTED.finditer(goal):
        text = next(g for g in m.groups() if g is not None)
        if (("file", text.lower()) in found) or (("folder", text.lower().rstrip("/")) in found):
            continue
        add(text, "value", m.start())
    refs = list(found.values())
    made = {r.text.split("/")[0].lower() for r in refs if r.kind == "file" and r.role == "create"
            and "/" in r.text}
    for ref in refs:                  # the folder of a file the goal makes is made along with it
        if ref.kind == "folder" and ref.text.lower() in made and ref.role == "read":
            ref.role = "either"
    return refs


# ---------------------------------------------------------------------------------------------
# the workspace as resolution sees it
# ---------------------------------------------------------------------------------------------

@dataclass
class Snapshot:
    root: str
    files: list[str]                               # relative paths
    folders: list[str]
    _fields: dict[str, set[str]] = field(default_factory=dict)   # per data file
    _values: dict[str, set[str]] = field(default_factory=dict)
    _text: dict[str, str] = field(default_factory=dict)

    @classmethod
    def of(cls, root: str) -> "Snapshot":
        files, folders = [], []
        for dirpath, dirnames, filenames in os.walk(root):
            dirnames[:] = sorted(d for d in dirnames if d not in SKIP_DIRS)
            rel = os.path.relpath(dirpath, root)
            for d in dirnames:
                folders.append(os.path.normpath(os.path.join(rel, d)))
            for f in sorted(filenames):
                files.append(os.path.normpath(os.path.join(rel, f)))
                if len(files) >= MAX_FILES:
                    return cls(root, files, folders)
        return cls(root, files, folders)

    def text(self, rel: str) -> str:
        if rel not in self._text:
            try:
                with open(os.path.join(self.root, rel), "rb") as fh:
                    raw = fh.read(1 << 20)
                self._text[rel] = "" if b"\x00" in raw[:4096] else raw.decode("utf-8", "replace")
            except OSError:
                self._text[rel] = ""
        return self._text[rel]

    def fields(self, rel: str) -> set[str]:
        """The names a data file gives its values: a CSV's header, every key of a JSON
        document, the keys (and sections) of an INI/env/YAML/TOML file."""
        if rel not in self._fields:
            self._fields[rel], self._values[rel] = _fields_and_values(rel, self.text(rel))
        return self._fields[rel]

    def values(self, rel: str) -> set[str]:
        self.fields(rel)
        return self._values[rel]


def _fields_and_values(rel: str, text: str) -> tuple[set[str], set[str]]:
    names: set[str] = set()
    values: set[str] = set()
    low = rel.lower()
    if low.endswith((".csv", ".tsv")):
        rows = list(csv.reader(text.splitlines()[:2000], delimiter="\t" if low.endswith(".tsv")
                               else ","))
        if rows:
            names = {h.strip() for h in rows[0] if h.strip()}
            for row in rows[1:]:
                values.update(c.strip() for c in row if c.strip())
        return names, values
    if low.endswith((".json", ".jsonl")):
        try:
            docs = [json.loads(text)] if low.endswith(".json") else \
                [json.loads(ln) for ln in text.splitlines() if ln.strip()]
        except ValueError:
            return names, values
        stack = list(docs)
        while stack and len(names) + len(values) < 20000:
            item = stack.pop()
            if isinstance(item, dict):
                names.update(str(k) for k in item)
                stack.extend(item.values())
            elif isinstance(item, list):
                stack.extend(item)
            elif item is not None:
                values.add(str(item))
        return names, values
    for line in text.splitlines()[:5000]:
        m = re.match(r"\s*(?:export\s+)?\[?([\w.-]+)\]?\s*(?:[=:]\s*(.*))?$", line)
        if m and not line.lstrip().startswith(("#", ";", "//")) and (
                m.group(2) is not None or line.strip().startswith("[")):
            names.add(m.group(1))
            if m.group(2):
                values.add(m.group(2).strip().strip("'\""))
    return names, values


def _norm(word: str) -> str:
    """Case and a plural's end aside: `Products` and `product` are one name."""
    w = word.lower().strip()
    if len(w) > 4 and w.endswith("ies"):
        return w[:-3] + "y"
    if len(w) > 3 and w.endswith("s") and not w.endswith("ss"):
        return w[:-1]
    return w


def _near(name: str, candidates: Iterable[str], *, cutoff: float = 0.6) -> list[str]:
    """Candidates that look like `name` (edit similarity, or one containing the other), best
    first."""
    cands = sorted(set(candidates))
    low = name.lower()
    scored = []
    for c in cands:
        cl = c.lower()
        if cl == low:
            continue
        ratio = difflib.SequenceMatcher(None, low, cl).ratio()
        if ratio >= cutoff or (len(low) >= 3 and (low in cl or cl in low)):
            scored.append((-ratio, c))
    return [c for _, c in sorted(scored)[:5]]


# ---------------------------------------------------------------------------------------------
# resolution
# ---------------------------------------------------------------------------------------------

def _relative(text: str, root: str) -> Optional[str]:
    """A goal's path as a path under the workspace; None when it points outside."""
    path = os.path.expanduser(text)
    if os.path.isabs(path):
        real, base = os.path.realpath(path), os.path.realpath(root)
        if real != base and not real.startswith(base + os.sep):
            return None
        return os.path.relpath(real, base)
    return os.path.normpath(path)


def _resolve_file(ref: Referent, snap: Snapshot) -> None:
    rel = _relative(ref.text, snap.root)
    if rel is None:
        ref.status = "outside"
        return
    base = os.path.basename(rel).lower()
    exact = [f for f in snap.files if f == rel]
    same_name = [f for f in snap.files if os.path.basename(f).lower() == base]
    names = {os.path.basename(f): f for f in snap.files}
    siblings = [names[n] for n in _near(os.path.basename(rel), names)]
    if not exact and "/" in rel and ref.role == "create":
        same_name = []                   # a path to make: the name elsewhere is not it
    if exact or same_name:               # (a bare name, or the name in another folder)
        ref.where = exact or same_name
        ref.near = [s for s in siblings if s not in ref.where]   # what a slip could read instead
        return
    if any(f == rel or f.startswith(rel + "/") for f in snap.folders):
        ref.kind, ref.where = "folder", [rel]
        return
    ref.status = "missing"
    ref.near = siblings


def _resolve_folder(ref: Referent, snap: Snapshot) -> None:
    rel = _relative(ref.text, snap.root)
    if rel is None:
        ref.status = "outside"
        return
    if rel in (".", ""):
        ref.where = ["."]
        return
    low = rel.lower()
    hits = [d for d in snap.folders if d.lower() == low or
            os.path.basename(d).lower() == os.path.basename(low)]
    if hits:
        ref.where = hits
        return
    ref.status = "missing"
    names = {os.path.basename(d): d for d in snap.folders}
    ref.near = [names[n] for n in _near(os.path.basename(rel), names)]


def _scope(refs: list[Referent], snap: Snapshot) -> list[str]:
    """The files a goal's fields and values live in: the data files it names, else every data
    file of the workspace."""
    named = [w for r in refs if r.kind == "file" and r.status == "found" for w in r.where]
    named = [f for f in named if f.lower().endswith(_DATA_EXT)] or named
    if named:
        return named
    return [f for f in snap.files if f.lower().endswith(_DATA_EXT)][:200]


def _resolve_field(ref: Referent, snap: Snapshot, scope: list[str]) -> None:
    low = _norm(ref.text)
    names: dict[str, str] = {}
    for rel in scope:
        for name in snap.fields(rel):
            names.setdefault(name, rel)
            if _norm(name) == low:
                ref.where.append(rel)
    if ref.where:
        return
    # a word of the files in scope (a section title, a value used as a name): not missing
    if any(re.search(rf"(?<![\w]){re.escape(ref.text)}(?![\w])", snap.text(rel), re.I)
           for rel in scope):
        ref.where = [rel for rel in scope if ref.text.lower() in snap.text(rel).lower()][:3]
        return
    if not scope:
        ref.status = "outside"        # no data to look in: nothing to decide
        return
    ref.status = "missing"
    ref.near = _near(ref.text, names)


def _holding(text: str, snap: Snapshot, files: list[str]) -> list[str]:
    """The files (at most five) whose text or name holds `text`."""
    low = text.lower()
    return [rel for rel in files if low in snap.text(rel).lower() or
            low in os.path.basename(rel).lower()][:5]


def _resolve_value(ref: Referent, snap: Snapshot, scope: list[str]) -> None:
    files = scope if scope else snap.files[:500]
    ref.where = _holding(ref.text, snap, files)
    if ref.where:
        return
    ref.status = "missing"
    values: set[str] = set()
    for rel in files:
        values |= snap.values(rel) if rel.lower().endswith(_DATA_EXT) else set(
            re.findall(r"[\w.@-]{3,}", snap.text(rel))[:5000])
    ref.near = _near(ref.text, values, cutoff=0.75)


def _resolve_extension(ref: Referent, snap: Snapshot) -> None:
    ext = ref.text.lower()
    ref.where = [f for f in snap.files if f.lower().endswith(ext)][:5]
    if not ref.where:
        ref.status = "missing"
        exts = {os.path.splitext(f)[1].lower() for f in snap.files if os.path.splitext(f)[1]}
        ref.near = _near(ext, exts, cutoff=0.7)


def _singled_out_values(goal: str, refs: list[Referent], snap: Snapshot,
                        scope: list[str]) -> list[Referent]:
    """Words of a question that single out a record the named data lacks while the data holds
    a near spelling of it (`alice` where the file has `alicia`): a value the goal reads, missing,
    with its near matches. Only with a named data file, only for words absent from every file."""
    named = [w for r in refs if r.kind == "file" and r.status == "found" for w in r.where]
    data = [f for f in named if f.lower().endswith(_DATA_EXT)]
    if not data or asks_to_change(goal):
        return []
    known = {r.text.lower() for r in refs} | {os.path.basename(w).lower() for w in named}
    texts = " ".join(snap.text(f).lower() for f in data)
    values: set[str] = set()
    fields: set[str] = set()
    for f in data:
        values |= {v for v in snap.values(f) if re.fullmatch(r"[\w.@' -]{3,40}", v)}
        fields |= snap.fields(f)
    out = []
    for word in dict.fromkeys(re.findall(r"(?<![\w./-])([A-Za-z][\w-]{3,})(?![\w./-])", goal)):
        low = word.lower()
        if low in STOPWORDS or low in known or _norm(low) in {_norm(k) for k in known} or \
                re.search(rf"(?<!\w){re.escape(_norm(low))}", texts):
            continue
        near = [v for v in _near(word, values, cutoff=0.7)
                if v.lower()[:3] == low[:3] and _norm(v) != _norm(low)]
        if near and not any(_norm(f) == _norm(low) for f in fields):
            out.append(Referent(text=word, kind="value", status="missing", near=near,
                                labelled=False))
    return out


# "next to it", "in the same folder (as the original)": the place of the file named before
_COLOCATED = re.compile(r"\b(?:(?:next\s+to|beside|alongside)\s+(?:it|that|this|them|the\s+"
                        r"(?:original|source|input|file|csv|one))\b|in\s+the\s+same\s+(?:folder|"
                        r"directory|dir|place|location)\b(?!\s+as\s+(?!it\b|that\b|the\s+"
                        r"(?:original|source|input|file)\b)))", re.I)


def _colocate(goal: str, refs: list[Referent], root: str) -> None:
    """A bare name the goal makes "next to it" / "in the same folder" goes in the folder of the
    file named before it ("save lists/books.csv as a table right next to it as books.md" makes
    lists/books.md, not books.md at the top of the workspace)."""
    for ref in refs:
        if ref.kind != "file" or ref.role != "create" or "/" in ref.text:
            continue
        at = goal.find(ref.text)
        near = [m for m in _COLOCATED.finditer(goal) if abs(m.start() - at) <= 80 and
                not _CLAUSE_END.search(goal, min(m.end(), at), max(m.start(), at))]
        anchors = [r for r in refs if r.kind == "file" and r.role != "create" and
                   "/" in r.text and 0 <= goal.find(r.text) < at]
        if not near or not anchors:
            continue
        where = _relative(anchors[-1].text, root) if root else None
        folder = os.path.dirname(where if where is not None else anchors[-1].text)
        if folder and folder != ".":
            ref.text = f"{folder}/{ref.text}"


def resolve(goal: str, root: str, refs: Optional[list[Referent]] = None) -> list[Referent]:
    """Extract (unless given) and resolve the goal's referents against the workspace at
    `root`."""
    refs = extract(goal) if refs is None else refs
    _colocate(goal, refs, root)
    if not root or not os.path.isdir(root):
        for ref in refs:
            ref.role = "either" if ref.role == "in" else ref.role
            ref.status = "outside"
        return refs
    snap = Snapshot.of(root)
    for ref in refs:
        if ref.kind == "file":
            _resolve_file(ref, snap)
        if ref.role == "in":
            ref.role = "read" if ref.status == "found" else "create"
    for ref in refs:
        if ref.kind == "folder":
            _resolve_folder(ref, snap)
        elif ref.kind == "extension":
            _resolve_extension(ref, snap)
    for ref in refs:
        if ref.kind == "file" and ref.status == "outside" and ref.role != "create" and \
                not os.path.lexists(os.path.expanduser(ref.text)):
            # no such path here, but a string of the data (a route: "which ip hit /login"): a value
            if where := _holding(ref.text, snap, snap.files[:500]):
                ref.kind, ref.status, ref.where = "value", "found", where
    scope = _scope(refs, snap)
    for ref in refs:
        if ref.kind == "field":
            _resolve_field(ref, snap, scope)
        elif ref.kind == "value":
            _resolve_value(ref, snap, scope)
    return refs + _singled_out_values(goal, refs, snap, scope)


# ---------------------------------------------------------------------------------------------
# what the resolution decides
# ---------------------------------------------------------------------------------------------

def decisive(goal: str, refs: Iterable[Referent]) -> list[Referent]:
    """The missing referents that make the goal impossible: ones the goal reads (not creates),
    named as what they are. A quoted value a count or a yes/no question looks for is an answer
    (0, no), not an impossibility, and so is an extension no file has unless another one is
    spelt like it (`.yml` where the files are `.yaml`); an unlabelled word decides only with a
    near match present (the record it singles out is spelt otherwise)."""
    counting = bool(_COUNTING.search(goal or ""))
    out = []
    for ref in refs:
        if ref.status != "missing" or ref.role != "read":
            continue
        if ref.kind == "extension" and (not ref.near or asks_to_change(goal)):
            continue                  # no such files: 0 of them, or nothing to change
        if ref.kind == "value" and (counting or (ref.labelled and asks_to_change(goal))):
            continue
        if not ref.labelled and not ref.near:
            continue
        out.append(ref)
    return out


def absence_report(refs: list[Referent]) -> str:
    """The evidence of a not_possible goal, in the user's terms: what is missing, and the near
    matches the workspace offers."""
    parts = []
    for ref in refs:
        what = {"file": "no file", "folder": "no folder", "field": "no field",
                "value": "no value", "extension": "no file ending in"}[ref.kind]
        near = f" (the workspace has {', '.join(ref.near[:4])})" if ref.near else ""
        parts.append(f"{what} {ref.text}{near}")
    return "; ".join(parts)


def misread(refs: Iterable[Referent], commands: Iterable[str], *, goal: str = "",
            root: str = "") -> list[str]:
    """Work that read another referent than the one the goal names: a near match of a missing
    referent, or a sibling of a named file (one of its near matches) while the named file itself
    was never read. With `goal` and `root`, the same for any word of the goal that names
    something the workspace lacks (no file name, no word of a file) while the work read a longer
    name of the workspace that contains it (`rating` -> the column `ratings_count`): a referent
    the extraction did not label. And a value the goal singles out that the work never reads
    (`unread`). One line per case; empty when the work read what the goal names."""
    text = "\n".join(c or "" for c in commands)
    low = text.lower()

    def used(name: str) -> bool:
        base = os.path.basename(name.rstrip("/")).lower()
        return bool(base) and re.search(rf"(?<![\w.-]){re.escape(base)}(?![\w-])", low) is not None

    out = unread(refs, [text], goal) if text.strip() else []
    labelled = set()
    for ref in refs:
        labelled.add(ref.text.lower())
        if ref.status == "missing" and ref.role == "read":
            hits = [n for n in ref.near if used(n)]
            if hits:
                out.append(f"the goal names {ref.text!r}, which the workspace lacks, and the work "
                           f"read {hits[0]!r} instead")
        elif ref.kind == "file" and ref.status == "found" and not any(
                used(w) for w in ref.where) and not used(ref.text):
            hits = [n for n in ref.near if used(n)]
            if hits:
                out.append(f"the goal names {ref.text!r}, but the work read {hits[0]!r}")
    if goal and root:
        absent = [t for t in absent_terms(goal, root) if len(t) >= 4 and
                  re.fullmatch(r"[\w-]+", t) and t not in labelled]
        if absent:
            # a longer name the goal itself names is what the goal names ("Back up … as
            # backup/todo.txt" reads `backup`; "failed login attempts" reads `LOGIN_FAILED`;
            # "p50 latency" reads `latency_p50_ms`: each part a word of the goal, in either
            # number, units and other short parts aside), not a near match of one of its words
            said = {w.lower() for w in re.findall(r"[A-Za-z0-9]+", goal)}
            words = {w for w in workspace_words(root)
                     if not all(number_forms(p) & said for p in re.split(r"[_-]+", w)
                                if len(p) > 2)}
            read = {w.lower() for w in re.findall(r"[A-Za-z0-9_]+", text)} & words
            out += [f"the goal names {t!r}, which the workspace lacks, and the work read {w!r} "
                    f"instead" for t in absent for w in sorted(read) if t in w and len(w) > len(t)]
    return out


_UNREAD = "which the work never reads"
_COMMENT = re.compile(r"(?m)(?:^|(?<=\s))#.*$")


def what_to_do(wrong: list[str]) -> str:
    """The correction for what `misread` found: a value never read is there, in the data."""
    if all(line.endswith(_UNREAD) for line in wrong):
        return ("compute the result over the records that hold what the goal names (it is in "
                "the data), not over all of them")
    return ("use exactly what the goal names, not a similar name; if it does not exist, reply "
            "NOT POSSIBLE: <what is missing>")


def unread(refs: Iterable[Referent], commands: Iterable[str], goal: str) -> list[str]:
    """Values the goal (these words of it) singles out and the data holds — a quoted string, a
    route — that the work never mentions: it computed over every record, not the ones the goal
    asks about (dev login-ip-top at 8243677: the executor and both checks counted every request
    per address, agreed on the busiest one, and "verified" it for "which ip hit /login the
    most"). One line per value; empty when the work reads each of them."""
    said = (goal or "").lower()
    # as written in a command: shell-quoted ('"'"' is one quote) or regex-escaped (`\/login`);
    # a comment reads nothing ("# the IP that hit /login the most" over a count of every line)
    low = _COMMENT.sub("", "\n".join(c or "" for c in commands).replace("'\"'\"'", "'")
                       ).lower().replace("\\", "")
    return [f"the goal singles out {ref.text!r} (in {ref.where[0]}), {_UNREAD}"
            for ref in refs if ref.kind == "value" and ref.status == "found" and ref.where
            and ref.labelled and ref.text.lower() in said and ref.text.lower() not in low]


_FIELDS = ("text", "kind", "role", "status", "where", "near", "labelled")


def coerce(items: Iterable) -> list[Referent]:
    """Referents from their wire form (protocol `Referent` models or dicts)."""
    out = []
    for item in items or []:
        d = item if isinstance(item, dict) else {k: getattr(item, k, None) for k in _FIELDS}
        try:
            out.append(Referent(**{k: d[k] for k in _FIELDS if d.get(k) is not None}))
        except TypeError:
            continue
    return out


def located(refs: Iterable) -> list[str]:
    """Prompt lines for the names of the goal the workspace holds somewhere else than the goal's
    words say (`todo.txt` is `notes/todo.txt`): where the model should look. Empty otherwise,
    so a prompt stays the same for a goal that names exact paths."""
    out = []
    for ref in coerce(refs):
        if ref.kind in ("file", "folder") and ref.status == "found" and ref.where and \
                os.path.normpath(ref.text) not in ref.where:
            out.append(f"{ref.text} is {', '.join(ref.where[:3])}")
    return out


def named_files(refs: Iterable) -> list[str]:
    """Where the files the goal names are (found by resolution), the workspace-relative paths."""
    return [w for ref in coerce(refs) if ref.kind == "file" and ref.status == "found"
            for w in ref.where[:2]]


def to_make(refs: Iterable) -> list[str]:
    """The relative paths of the files and folders the goal makes: a prompt line says they are
    paths from the workspace folder (a model shown drafts/letter.txt wrote drafts/hello.txt for
    "a file hello.txt", and wrote there again when told hello.txt was missing)."""
    return [ref.text for ref in coerce(refs) if ref.role == "create" and
            ref.kind in ("file", "folder") and ref.status != "outside" and
            not os.path.isabs(os.path.expanduser(ref.text))]


def placed(path: str, refs: Iterable) -> str:
    """Where the goal's resolution put a file someone names by its bare name: `books.md` is
    lists/books.md when the goal makes that ("right next to" lists/books.csv; a check that
    named books.md found none at the top of the workspace and had the executor write one
    there). `path` itself when the goal makes it as written, or when not exactly one path the
    goal makes ends with it."""
    made = to_make(refs)
    tail = os.path.normpath(path) if path else ""
    if not path or path in made or tail in made or os.path.isabs(tail) or tail.startswith(".."):
        return path
    tails = [m for m in made if m.endswith("/" + tail)]
    return tails[0] if len(tails) == 1 else path


def unmade(refs: Iterable, workspace: str, goal: str) -> list[str]:
    """The files the goal makes that do not exist yet in the workspace (the goal's words, as the
    referents hold them): while one is missing, the work is not finished, whatever a silent
    command said. A goal that asks for no change makes nothing."""
    if not asks_to_change(goal):
        return []
    return [ref.text for ref in coerce(refs) if ref.role == "create" and ref.kind == "file"
            and ref.status != "outside"
            and not os.path.exists(os.path.join(workspace, os.path.expanduser(ref.text)))]
