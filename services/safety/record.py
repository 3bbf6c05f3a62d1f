"""Outcome from the record, not from the words: whether the work a result claims happened.

"done" requires that the work happened: the files the goal makes exist with content, and the
answer is a value — not an error message, a traceback or a code fragment, and not "nothing found"
for a thing the referent resolution found in the workspace. These are pure functions over the
answer, the tool records and the workspace; the verifier turns each finding into a failed
attempt (retry, replan or abandon, honestly reported), never into "done, but not verified".
"""
from __future__ import annotations

import ast
import os
import re
import shlex
from typing import Iterable, NamedTuple, Optional

from protocol.messages import ToolCallRecord

from services.safety.referents import Referent

_ERROR_SHAPES = re.compile(
    r"Traceback \(most recent call last\)|No such file or directory|command not found|"
    r"Permission denied|Is a directory|Not a directory|cannot (?:open|access|stat|read)|"
    r"\b[A-Z]\w*(?:Error|Exception):|\[Errno \d+\]|syntax error|unexpected EOF|"
    r"Segmentation fault|non-zero exit|exit (?:code|status) [1-9]", re.I)
_SHELL_START = re.compile(r"^\s*(?:\$\s*)?(?:grep|egrep|awk|sed|cat|wc|find|ls|cut|sort|uniq|head|"
                          r"tail|python3?|echo|printf|jq|cp|mv|rm|mkdir|touch|tr|xargs|du|stat)"
                          r"\s+(?:-|'|\"|[\w./*]+\s)", re.I)
_CODE_NODES = (ast.Import, ast.ImportFrom, ast.FunctionDef, ast.ClassDef, ast.For, ast.While,
               ast.With, ast.If, ast.AugAssign, ast.Lambda, ast.ListComp, ast.DictComp,
               ast.GeneratorExp)


# what arithmetic prints when it selected nothing (a mean of no values, a division by a count of
# 0: awk prints -nan, Python nan or inf) — the mark of a wrong selection, never a result
_OVER_NOTHING = re.compile(r"\s*[-+]?(?:nan|inf(?:inity)?)\s*", re.I)


def over_nothing(text: str) -> bool:
    """`text` is only NaN or infinity: a computation over nothing."""
    return bool(text and _OVER_NOTHING.fullmatch(text))


def _failed_texts(records: Iterable[ToolCallRecord]) -> list[str]:
    out = []
    for r in records:
        if r.error:
            out += [t for t in (r.error, r.output) if t and t.strip()]
    return out


def printed_only_errors(output: str) -> str:
    """The first line of an output in which every line is an error message ('' otherwise): a
    command can exit 0 having done nothing (`find … -exec rename` with no `rename` prints one
    "No such file or directory" per file and still exits 0)."""
    lines = [line for line in (output or "").splitlines() if line.strip()]
    if lines and all(_ERROR_SHAPES.search(line) for line in lines):
        return lines[0].strip()
    return ""


def _is_code(text: str) -> bool:
    """A program or a command rather than a value: Python statements (an import, a loop, an
    assignment, a call of a function on something) or a shell command line."""
    if _SHELL_START.match(text):
        return True
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return False
    if len(tree.body) > 1 and all(isinstance(n, (ast.Assign, ast.Expr)) for n in tree.body) and \
            any(isinstance(n, ast.Assign) for n in tree.body) and "\n" in text.strip():
        return True                   # statements on several lines ("total=42" alone is a value)
    for node in ast.walk(tree):
        if isinstance(node, _CODE_NODES):
            return True
        if isinstance(node, ast.Call) and isinstance(node.func, (ast.Name, ast.Attribute)) and \
                re.search(r"(?<![\w.])[a-z_][\w.]*\(", text) and \
                any(isinstance(a, (ast.Name, ast.Attribute, ast.Subscript, ast.Call))
                    for a in node.args):
            return True             # len(rows), csv.reader(fh): a call as code writes it
    return False


def not_a_value(answer: str, records: Iterable[ToolCallRecord]) -> str:
    """Why the answer is no value ('' when it may be one): the text of a failed call, an error
    message or traceback, or a fragment of code."""
    text = (answer or "").strip()
    if not text:
        return ""
    low = " ".join(text.lower().split())
    for failed in _failed_texts(records):
        f = " ".join(failed.lower().split())
        if len(low) >= 8 and (low in f or (len(f) >= 8 and f in low and len(f) * 2 >= len(low))):
            return f"the answer is the error of a failed call ({failed.strip()[:160]!r})"
    if _ERROR_SHAPES.search(text):
        return f"the answer is an error message ({text[:160]!r}), not a value"
    if over_nothing(text):
        return (f"the answer is {text!r}, what arithmetic prints over no values (a mean of "
                f"nothing, a division by a count of 0): the selection matched nothing")
    if _is_code(text):
        return f"the answer is a fragment of code ({text[:160]!r}), not its result"
    return ""


def undelivered(refs: Iterable[Referent], root: str, goal: str) -> list[str]:
    """The files and folders the goal says to make that are missing or empty after the work
    (a file may be empty only when the goal says so)."""
    refs = list(refs)
    allow_empty = bool(re.search(r"\bempty\b", goal or "", re.I))
    # a namesake the goal itself names (the source of a copy) is no misplaced output
    named = {os.path.normpath(w) for ref in refs if ref.role != "create" for w in ref.where}
    out = []
    for ref in refs:
        if ref.role != "create" or ref.kind not in ("file", "folder") or ref.status == "outside":
            continue
        path = os.path.join(root, os.path.expanduser(ref.text)) if not os.path.isabs(
            ref.text) else ref.text
        if ref.kind == "folder":
            if not os.path.isdir(path):
                out.append(f"the folder {ref.text} the goal asks for does not exist")
        elif not os.path.isfile(path):
            out.append(f"the file {ref.text} the goal asks for does not exist"
                       + _elsewhere(root, ref.text, named))
        elif os.path.getsize(path) == 0 and not allow_empty:
            out.append(f"the file {ref.text} the goal asks for is empty"
                       + _elsewhere(root, ref.text, named))
        elif os.path.getsize(path) <= 16 and over_nothing(text := _read(path)):
            out.append(f"the file {ref.text} the goal asks for holds only {text.strip()!r}, "
                       f"what arithmetic prints over no values: the selection matched nothing")
    return out


def _read(path: str) -> str:
    try:
        with open(path, "rb") as fh:
            return fh.read(64).decode("utf-8", "replace")
    except OSError:
        return ""


def _elsewhere(root: str, wanted: str, named: set = frozenset(), *, limit: int = 2000) -> str:
    """Where files of the asked-for name are instead (a model told "groceries.txt" that writes
    drafts/groceries.txt, told the file is missing, writes there again): the path the goal names
    is relative to the workspace folder, and saying where it wrote is what turns it round."""
    if os.path.isabs(wanted) or not root:
        return ""
    name, target = os.path.basename(wanted), os.path.normpath(wanted)
    found = []
    for n, (dirpath, dirnames, filenames) in enumerate(os.walk(root)):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
        if n > limit:
            break
        if name in filenames:
            rel = os.path.relpath(os.path.join(dirpath, name), root)
            if os.path.normpath(rel) not in named | {target}:
                found.append(rel)
    if not found:
        return ""
    return (f" (there is {', '.join(sorted(found)[:3])}; the goal names {wanted}, a path from "
            f"the top of the workspace: write exactly that path)")


def glued(before_root: str, after_root: str, paths: Iterable[str]) -> list["Glued"]:
    """Files the work appended to whose last line had no newline, so the appended text joined
    it (`milk` + `echo bread >>` = `milkbread`): not the line the work meant to add. A check that
    appends the same way agrees (the same model makes the same slip), so code says it, from the
    before-copy: the old content is a prefix of the new, and the next character is no newline."""
    out = []
    for path in paths:
        try:
            with open(os.path.join(before_root, path), "rb") as fh:
                old = fh.read(1 << 20)
            with open(os.path.join(after_root, path), "rb") as fh:
                new = fh.read((1 << 20) + 4096)
        except OSError:
            continue
        joined = glued_content(path, old, new)
        if joined is not None:
            out.append(joined)
    return out


def glued_content(path: str, old: bytes, new: bytes) -> Optional["Glued"]:
    """`new` is `old` with text appended onto its last line, which had no newline; else None.
    The same test judges the work's file and the content a check derived for it: a check that
    makes the slip is no check of a file the work got right."""
    if not old or old.endswith(b"\n") or b"\x00" in old[:4096] or \
            len(new) <= len(old) or not new.startswith(old) or new[len(old):][:1] in b"\r\n":
        return None
    last = old.rsplit(b"\n", 1)[-1].decode("utf-8", "replace")
    text = new[len(old):].decode("utf-8", "replace")
    return Glued(path, f"{path}: the added text joined its last line "
                       f"({(last + text.split(chr(10), 1)[0])[:80]!r}), because the file "
                       f"did not end with a newline", text)


class Glued(NamedTuple):
    path: str
    message: str
    added: str          # all the work appended after the old last line

    def command(self) -> str:
        """The command that appends the text right on the file as it was (a retry starts from
        it), when the text is one short line; else ""."""
        line = self.added.rstrip("\r\n")
        if not line or "\n" in line or "\r" in line or len(line) > 200:
            return ""
        return f"printf '\\n%s\\n' {shlex.quote(line)} >> {shlex.quote(self.path)}"

    def fix(self) -> str:
        """What to do: the newline first, then the text — spelt out as one command where code
        knows it, which a small model copies where it does not act on "put a newline before
        it" (and which the executor runs without its model: CorrectionSignal.fix_command)."""
        command = self.command()
        if not command:
            return "put a newline between the old last line and the new text (or write the " \
                   "whole file again), then cat the file"
        return (f"add a newline before the new text: reply COMMAND: {command} , then cat "
                f"{shlex.quote(self.path)}")


def write_out(path: str, answer: str) -> str:
    """The command that writes a printed result into the file the goal names: an executor that
    printed the right value and wrote the file empty (or not at all) is told exactly this."""
    return f"printf '%s\\n' {shlex.quote(answer.strip())} > {shlex.quote(path)}"


def inputs_present(refs: Iterable[Referent]) -> bool:
    """The goal names something it reads, and the resolution found every such thing (no
    missing file, folder, field, value or extension it reads): a claim that the goal cannot be
    done has nothing to rest on."""
    refs = list(refs)
    made = [r.text.rstrip("/") + "/" for r in refs if r.role == "create"]
    # a folder on the way to a file the goal makes is made with it ("backup" for backup/x.txt)
    reads = [r for r in refs if r.role in ("read", "either") and r.status != "outside" and not (
        r.status == "missing" and any(m.startswith(r.text.rstrip("/") + "/") for m in made))]
    return bool(reads) and all(r.status == "found" for r in reads)


def found_things(refs: Iterable[Referent]) -> list[Referent]:
    """The values and fields a goal reads that the resolution found in the workspace: "nothing
    found" about them is contradicted by code. Empty when any of them is missing (then absence
    may be the answer)."""
    things = [r for r in refs if r.kind in ("value", "field") and r.role == "read"]
    if not things or any(r.status != "found" for r in things):
        return []
    return things
