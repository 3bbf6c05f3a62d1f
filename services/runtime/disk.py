"""Bytes on disk under a path: what the undo copies' bound and the world's storage check measure."""
from __future__ import annotations

import os


def tree_size(path) -> int:
    """Bytes under `path` (files' sizes; links counted, not followed; unreadable parts skipped)."""
    path = os.fspath(path)
    if os.path.islink(path) or not os.path.isdir(path):
        try:
            return os.lstat(path).st_size
        except OSError:
            return 0
    total = 0
    for dirpath, _dirs, files in os.walk(path):
        for f in files:
            try:
                total += os.lstat(os.path.join(dirpath, f)).st_size
            except OSError:
                pass
    return total
