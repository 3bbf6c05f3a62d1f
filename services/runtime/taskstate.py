"""Small per-task state files that let a role resume a task after a SIGKILL.

A restarted planner or meta-validator (same supervisord instance number, so it owns the same
tasks) reloads what its predecessor persisted instead of leaving the task to the deadline watchdog.
One JSON file per (role, task) under `$ARTOO_HOME/state/<role>/`, replaced atomically (write + rename),
no fsync: a killed process does not lose the page cache, and a host crash loses the daemon anyway.
Files are deleted when the task ends; files of tasks past their deadline are swept on load, so no
per-task state outlives its task.
"""
from __future__ import annotations

import json
import logging
import os
import re
import time
from pathlib import Path
from typing import Callable

from protocol.settings import Settings

log = logging.getLogger("artoo.taskstate")
_SAFE = re.compile(r"[^A-Za-z0-9._-]")
STALE_AFTER_DEADLINE_S = 60.0
# GGS delivers every task's FinalResult by its deadline. A role that missed it (down or stopped
# when it passed) drops what it still holds this long after the deadline, so nothing outlives a task.
EXPIRE_AFTER_DEADLINE_S = 5.0


class TaskStateStore:
    def __init__(self, settings: Settings, role: str):
        self.dir = Path(settings.home) / "state" / role
        self.dir.mkdir(parents=True, exist_ok=True)

    def _path(self, task_id: str) -> Path:
        return self.dir / f"{_SAFE.sub('_', task_id)[:150]}.json"

    def save(self, task_id: str, data: dict) -> None:
        path = self._path(task_id)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        try:
            tmp.write_text(json.dumps(data, default=str, ensure_ascii=False))
            os.replace(tmp, path)
        except OSError as exc:  # state is an optimisation for recovery; never take the role down
            log.warning("could not persist state of %s: %s", task_id, exc)

    def load(self, task_id: str) -> dict | None:
        try:
            return json.loads(self._path(task_id).read_text())
        except (OSError, ValueError):
            return None

    def delete(self, task_id: str) -> None:
        try:
            self._path(task_id).unlink()
        except FileNotFoundError:
            pass
        except OSError as exc:
            log.warning("could not delete state of %s: %s", task_id, exc)

    def load_all(self, owns: Callable[[str], bool]) -> dict[str, dict]:
        """Every live task state this instance owns; stale or unreadable files are removed."""
        out: dict[str, dict] = {}
        now = time.time()
        for path in sorted(self.dir.glob("*.json")):
            try:
                data = json.loads(path.read_text())
                task_id = data["task_id"]
            except (OSError, ValueError, KeyError, TypeError):
                path.unlink(missing_ok=True)
                continue
            deadline = float(data.get("deadline_at") or 0)
            if deadline and now > deadline + STALE_AFTER_DEADLINE_S:
                path.unlink(missing_ok=True)
                continue
            if owns(task_id):
                out[task_id] = data
        return out
