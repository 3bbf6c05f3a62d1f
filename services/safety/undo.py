"""Law 1 undo: copies of what approved actions delete or overwrite inside the workspace, kept under
`<data dir>/undo/<run_id>/`, so `artoo undo RUN_ID` can put them back."""
from __future__ import annotations

import glob as globmod
import json
import logging
import os
import re
import shutil
import threading
import time
from pathlib import Path
from typing import Iterable

from protocol.settings import Settings
from services.runtime.disk import tree_size

from .paths import GLOB_CHARS, within

log = logging.getLogger("artoo.law1")

_SAFE = re.compile(r"[^A-Za-z0-9._-]")


def undo_dir(settings: Settings, run_id: str) -> Path:
    return Path(settings.home) / "undo" / _SAFE.sub("_", run_id)[:120]


class UndoStore:
    """Copies of what approved actions delete or overwrite inside the workspace."""

    def __init__(self, settings: Settings, run_id: str):
        self.settings = settings
        self.root = undo_dir(settings, run_id)
        self.workspace = os.path.realpath(settings.workspace)
        self._lock = threading.Lock()

    def save(self, paths: Iterable[str], *, command: str, subtask_id: str = "",
             snapshot_roots: Iterable[str] = ()) -> str:
        """Copy the given workspace paths (globs expanded) and whole snapshot dirs. Returns a
        one-line note for the tool result."""
        items: list[str] = []
        for p in list(paths) + list(snapshot_roots):
            expanded = globmod.glob(p) if GLOB_CHARS.search(p) else [p]
            for e in expanded:
                real = os.path.realpath(os.path.dirname(e)) + "/" + os.path.basename(e)
                if within(real, self.workspace) and os.path.lexists(real) and real not in items:
                    items.append(real)
        # A path inside another saved dir is already covered.
        items = [p for p in items if not any(o != p and within(p, o) for o in items)]
        if not items:
            return ""
        size = sum(tree_size(p) for p in items)
        if size > self.settings.undo_max_bytes:
            return (f"no undo copy: {size / 1e6:.0f} MB exceeds undo_max_bytes "
                    f"({self.settings.undo_max_bytes / 1e6:.0f} MB)")
        with self._lock:
            self.root.mkdir(parents=True, exist_ok=True, mode=0o700)
            n = len([d for d in self.root.iterdir() if d.is_dir()])
            entry = self.root / f"{n:04d}"
            while entry.exists():
                n += 1
                entry = self.root / f"{n:04d}"
            entry.mkdir(mode=0o700)
            manifest = []
            for i, path in enumerate(items):
                backup = entry / "files" / str(i)
                backup.parent.mkdir(exist_ok=True)
                if os.path.isdir(path) and not os.path.islink(path):
                    shutil.copytree(path, backup, symlinks=True)
                    kind = "dir"
                else:
                    shutil.copy2(path, backup, follow_symlinks=False)
                    kind = "file"
                manifest.append({"original": path, "backup": str(backup.relative_to(entry)),
                                 "kind": kind})
            (entry / "manifest.json").write_text(json.dumps(
                {"command": command, "subtask_id": subtask_id, "ts": time.time(),
                 "items": manifest}, indent=1))
        return f"undo copy kept for {len(items)} path(s)"


def undo_entries(settings: Settings, run_id: str) -> list[dict]:
    root = undo_dir(settings, run_id)
    if not root.is_dir():
        return []
    out = []
    for entry in sorted(d for d in root.iterdir() if d.is_dir()):
        try:
            manifest = json.loads((entry / "manifest.json").read_text())
        except (OSError, ValueError):
            continue
        manifest["entry"] = str(entry)
        out.append(manifest)
    return out


def restore(settings: Settings, run_id: str) -> list[str]:
    """Put back every saved path of a run, newest action first, so the oldest copy wins.
    Only paths inside the workspace are ever written. Returns the restored paths."""
    workspace = os.path.realpath(settings.workspace)
    restored: list[str] = []
    for manifest in reversed(undo_entries(settings, run_id)):
        entry = Path(manifest["entry"])
        for item in manifest.get("items", []):
            original = item["original"]
            parent = os.path.realpath(os.path.dirname(original))
            if not within(parent + "/" + os.path.basename(original), workspace):
                log.warning("undo: skipping %s (outside the workspace)", original)
                continue
            backup = entry / item["backup"]
            os.makedirs(parent, exist_ok=True)
            if item["kind"] == "dir":
                if os.path.lexists(original) and not os.path.isdir(original):
                    os.unlink(original)
                shutil.copytree(backup, original, symlinks=True, dirs_exist_ok=True)
            else:
                _put_file(str(backup), original)
            if original not in restored:
                restored.append(original)
    return restored


def _put_file(backup: str, original: str) -> None:
    """Replace whatever is at `original` (a file, a link the work planted — never followed — or
    a folder) by the copy."""
    if os.path.isdir(original) and not os.path.islink(original):
        shutil.rmtree(original)
    elif os.path.lexists(original):
        os.unlink(original)
    shutil.copy2(backup, original, follow_symlinks=False)


def put_back(copy_root: str, workspace: str, paths: Iterable[str]) -> list[str]:
    """Put back files (workspace-relative `paths`) from a copy of the workspace taken before the
    work: what a question's work changed or deleted though the goal asked for no change (a
    program that opened the CSV it was asked about for writing emptied it). Only regular files
    of the copy, only inside the workspace. Returns the paths put back."""
    root = os.path.realpath(workspace)
    back: list[str] = []
    for rel in paths:
        backup = os.path.join(copy_root, rel)
        original = os.path.join(root, rel)
        parent = os.path.realpath(os.path.dirname(original))
        if os.path.isabs(rel) or not os.path.isfile(backup) or os.path.islink(backup) or \
                not within(parent + "/" + os.path.basename(original), root):
            continue
        try:
            os.makedirs(parent, exist_ok=True)
            _put_file(backup, original)
        except OSError as exc:
            log.warning("put back %s: %s", rel, exc)
            continue
        back.append(rel)
    return back
