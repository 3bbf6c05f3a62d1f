"""What a step is shown of the workspace before it acts (the executor's and the checker's
prompts): the files with their sizes, the first lines of small text files — a small file the goal
names whole — and what code notices in them (CSV columns, one value in several spellings, quoted
commas, a last line without a newline, a JSON document's shape)."""
from __future__ import annotations

import json
import os
from typing import Iterable

from services.safety.datafiles import spelling_hint
from services.safety.evidence import columns_hint, json_shape, quoted_commas, snapshot


def _no_final_newline(root: str, path: str, size: int) -> str:
    """Marks a text file whose last line has no newline: appending with `echo >>` then glues the
    new line onto the old one."""
    if not size or size > 256 << 10:
        return ""
    try:
        with open(os.path.join(root, path), "rb") as fh:
            if b"\x00" in fh.read(1024):
                return ""           # binary
            fh.seek(-1, os.SEEK_END)
            last = fh.read(1)
    except OSError:
        return ""
    return "" if last == b"\n" else ", no newline at the end"


WHOLE_CHARS = 1200     # a file the goal names, shown whole in an overview up to this size


def whole_files(root: str, names: Iterable[str]) -> dict[str, str]:
    """The files of `names` (workspace-relative) an overview shows whole: small text files, path
    -> text. What the executor was shown is, like a tool's output, a place its answer's values
    can come from (Law 0's provenance; whether they are right is still the checks' to say)."""
    shown: dict[str, str] = {}
    for p in dict.fromkeys(names):
        if os.path.isabs(p) or ".." in p.split("/"):
            continue        # a workspace file only
        try:
            if os.path.getsize(os.path.join(root, p)) > WHOLE_CHARS:
                continue
            with open(os.path.join(root, p), "rb") as fh:
                raw = fh.read(WHOLE_CHARS + 1)
        except OSError:
            continue
        if raw and b"\x00" not in raw:
            shown[p] = raw.decode("utf-8", "replace")
    return shown


def workspace(root: str, *, budget: int = 900, head_lines: int = 3, max_listed: int = 40,
             whole: Iterable[str] = ()) -> str:
    """What a step needs to know about the workspace before acting: the files (with sizes) and
    the first lines of small text files, within `budget` characters. The files in `whole` (the
    ones the goal names) come first and, up to WHOLE_CHARS, whole: where the value sits in a
    config file is past its first lines, and a program written blind parses the wrong part."""
    state = snapshot(root, max_files=max_listed + 1, hash_max_bytes=0)
    if not state:
        return "(the workspace is empty)"
    paths = sorted(state)
    lines = [f"{p} ({state[p].size} bytes{_no_final_newline(root, p, state[p].size)})"
             for p in paths[:max_listed]]
    if len(paths) > max_listed:
        lines.append(f"... more files not listed")
    text = "\n".join(lines)
    shown = whole_files(root, whole)     # shown whatever the budget: the verifier counts them
    for p in list(shown) + [p for p in paths if p not in shown]:
        entire = p in shown
        if not entire and (len(text) >= budget or state[p].size > 256 << 10):
            continue
        try:
            with open(os.path.join(root, p), "rb") as fh:
                raw = fh.read(256 << 10 if p.endswith(".json") else 2048)
        except OSError:
            continue
        if b"\x00" in raw:
            continue
        if p.endswith(".json") and not entire:
            try:
                shape = json_shape(json.loads(raw))
            except ValueError:
                shape = ""
            if shape:
                block = f"\n--- shape of {p} (JSON): {shape[:400]}"
                if len(text) + len(block) <= budget:
                    text += block
                continue
        head = raw.decode("utf-8", "replace").splitlines()
        head = head if entire else head[:head_lines]
        if not head:
            continue
        block = (f"\n--- {p} (whole):\n" if entire else f"\n--- first lines of {p}:\n") + \
            "\n".join(h[:160] for h in head)
        block += columns_hint(head[0]) + spelling_hint(os.path.join(root, p))
        if quoted_commas(raw.decode("utf-8", "replace")):
            block += ("\n(some fields are quoted and contain commas: awk -F, and cut -d, split "
                      "them wrongly; read this file with python3's csv module)")
        if len(text) + len(block) > budget and not entire:
            continue
        text += block
    return text
