"""Idempotency records of tool calls, so that a subtask re-run after a crash never repeats a side
effect blindly (issue 17, seed 004).

One JSONL file per subtask under `$ARTOO_HOME/state/effector/<task>/`. Before a tool call runs, the
executor appends `started` with the call's idempotency key (subtask, attempt, turn, call signature)
and a digest of the workspace; after it, `finished` with the output. A re-run of the same subtask by
another process (the planner re-offers it after the effector, the spawner or the whole daemon died)
looks its calls up first:

* `finished` by an earlier process: the recorded result is reused, the call is not run again;
* `started` but never finished (killed inside the call): if the workspace digest differs from the
  one taken before the call, the call had an effect whose outcome is unknown, so it is not re-run
  and the model is told so; if the workspace is unchanged, nothing happened and the call runs.

Records of this process are ignored on lookup (a deliberate repeat within one run is the executor's
business). Files are removed when the task ends (`drop`) or swept once their deadline is long past.
"""
from __future__ import annotations

import json
import logging
import os
import re
import shutil
import time
from pathlib import Path
from typing import Any, Optional

from protocol.settings import Settings

log = logging.getLogger("artoo.journal")
_SAFE = re.compile(r"[^A-Za-z0-9._-]")
SWEEP_AFTER_DEADLINE_S = 3600.0
INCARNATION = f"{os.getpid()}-{time.time_ns()}"


def _safe(name: str) -> str:
    return _SAFE.sub("_", name)[:150]


def journal_root(settings: Settings) -> Path:
    return Path(settings.home) / "state" / "effector"


class ToolJournal:
    def __init__(self, settings: Settings, task_id: str, subtask_id: str, deadline_at: float = 0.0):
        self.dir = journal_root(settings) / _safe(task_id)
        self.path = self.dir / f"{_safe(subtask_id)}.jsonl"
        self.deadline_at = deadline_at
        self.prior: dict[str, dict] = {}      # key -> last record written by another process
        try:
            for line in self.path.read_text().splitlines():
                try:
                    rec = json.loads(line)
                except ValueError:                # a line torn by the kill: skip it
                    continue
                if isinstance(rec, dict) and rec.get("by") != INCARNATION and rec.get("key"):
                    self.prior[rec["key"]] = rec
        except OSError:
            pass

    @staticmethod
    def key(attempt: int, turn: int, sig: str) -> str:
        return f"{attempt}:{turn}:{sig}"

    def lookup(self, key: str) -> Optional[dict]:
        """The record an earlier process left for this call (its last state), if any."""
        return self.prior.get(key)

    def _append(self, rec: dict[str, Any], durable: bool = False) -> None:
        """Append one record. A killed process loses nothing it wrote (the page cache outlives
        it); `durable` also puts the file on disk before returning, for a host that dies too —
        and with it every record written before (one file), so only `started` needs it."""
        rec = {**rec, "by": INCARNATION, "ts": time.time(), "deadline_at": self.deadline_at}
        try:
            self.dir.mkdir(parents=True, exist_ok=True)
            with open(self.path, "a", encoding="utf-8") as f:
                f.write(json.dumps(rec, ensure_ascii=False, default=str) + "\n")
                if durable:
                    f.flush()
                    os.fsync(f.fileno())
        except OSError as exc:            # recovery aid: never take the effector down
            log.warning("could not write tool journal %s: %s", self.path, exc)

    def started(self, key: str, tool: str, args: dict, digest: str, durable: bool = True
                ) -> None:
        """On disk before the side effect (with the `before` picture written ahead of it). Its
        `finished` is not synced: lost with a dead host, the call reads as started and never
        finished, which the digest check above handles without running it blindly. `durable`
        False: a call that changes nothing (made again as it is if its record is lost)."""
        self._append({"key": key, "state": "started", "tool": tool, "args": args,
                      "digest": digest}, durable=durable)

    def finished(self, key: str, output: str, error: Optional[str], target: str = "",
                 **extra: Any) -> None:
        """`extra`: what else the record of the call carries (an MCP call's server and result
        digest), so a reused call's record is the one the first process made."""
        self._append({"key": key, "state": "finished", "output": output, "error": error,
                      "target": target, **extra})

    # The verifier's picture of the workspace before the first tool call (Law 0 compares the end
    # against it): a re-run must compare against the state before the *first* run's effects.
    BEFORE = "__before__"

    def before(self) -> Optional[dict]:
        return self.prior.get(self.BEFORE)

    def record_before(self, snapshot: dict[str, list], copy_dir: str) -> None:
        """Written before the first tool call, whose `started` record syncs it too."""
        self._append({"key": self.BEFORE, "state": "before", "snapshot": snapshot,
                      "dir": copy_dir})


def drop(settings: Settings, task_id: str) -> None:
    """The task ended: its tool records are no longer needed."""
    shutil.rmtree(journal_root(settings) / _safe(task_id), ignore_errors=True)


def sweep(settings: Settings, now: float | None = None) -> int:
    """Remove the journals of tasks whose deadline is long past (a task that ended while no
    spawner was there to drop them). Returns how many task directories went."""
    now = now or time.time()
    root = journal_root(settings)
    removed = 0
    for task_dir in (root.iterdir() if root.is_dir() else []):
        newest = 0.0
        for f in task_dir.glob("*.jsonl"):
            try:
                lines = f.read_text().splitlines()
                newest = max(newest, float(json.loads(lines[-1]).get("deadline_at") or 0)
                             if lines else 0.0, f.stat().st_mtime)
            except (OSError, ValueError, IndexError):
                continue
        if newest and newest + SWEEP_AFTER_DEADLINE_S < now:
            shutil.rmtree(task_dir, ignore_errors=True)
            removed += 1
    return removed
