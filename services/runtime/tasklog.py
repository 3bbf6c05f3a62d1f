"""The per-task decision log `tasks/<run_id>.jsonl` (seeds/000 §10.3).

Several processes write one task's log (planner, effectors, meta-validator, GGS, the LLM client), so
each event is one JSON line appended under an exclusive flock: lines never interleave, and a crash
loses at most the event being written. Events: task_begin, task_end, subtask_begin, subtask_end,
llm_call (with full prompts, for offline replay), tool_call, criterion_verdict, correction, replan,
ggs_decision, plan_directive, memory_query, memory_write, approval, and more as roles need them.
"""
from __future__ import annotations

import fcntl
import json
import os
import re
import secrets
import time
from datetime import datetime
from pathlib import Path
from typing import Any, Callable, Iterator

_SAFE = re.compile(r"[^A-Za-z0-9._-]")


def new_run_id() -> str:
    """A run id as the CLI and the scheduler assign it: `run-YYYYmmdd-HHMMSS-xxxx`."""
    return f"run-{datetime.now().strftime('%Y%m%d-%H%M%S')}-{secrets.token_hex(2)}"


def log_path(tasks_dir: Path, run_id: str) -> Path:
    return Path(tasks_dir) / f"{_SAFE.sub('_', run_id)[:120]}.jsonl"


# Called after each append with (tasks_dir, run_id, event): a role process sets it to publish
# the lifecycle moves its events cause (services/runtime/lifecycle.py: publisher).
_after_append: Callable[[Path, str, dict], None] | None = None


def set_after_append(fn: Callable[[Path, str, dict], None] | None) -> None:
    global _after_append
    _after_append = fn


def append(tasks_dir: Path, run_id: str, kind: str, **fields: Any) -> None:
    """Append one event; never raises (a decision log must not take a role down)."""
    if not run_id or run_id == "-":
        return
    event = {"kind": kind, "ts": time.time(), "task_id": run_id}
    event.update({k: v for k, v in fields.items() if v is not None})
    line = (json.dumps(event, default=str, ensure_ascii=False) + "\n").encode()
    try:
        Path(tasks_dir).mkdir(parents=True, exist_ok=True)
        fd = os.open(log_path(tasks_dir, run_id), os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            os.write(fd, line)
        finally:
            os.close(fd)
    except OSError:
        return
    hook = _after_append
    if hook is not None:
        try:
            hook(Path(tasks_dir), run_id, event)
        except Exception:   # telemetry: never take the role down
            pass


def count(tasks_dir: Path, run_id: str, kind: str) -> int:
    """How many events of one kind a run logged, without parsing them: `append` writes `kind`
    first, so a line of that kind starts with the same bytes (a whole task's prompts need not be
    decoded to count its model calls). A line torn after its start still counts, unlike `read`."""
    try:
        with open(log_path(tasks_dir, run_id), "rb") as fh:
            return sum(1 for raw in fh if _kind(raw) == kind)
    except FileNotFoundError:
        return 0


ENDED = frozenset({"task_end"})      # GGS's last word on a task (the conversational path's too)
BEGUN = ENDED | {"task_begin"}       # perceived (or ended): never started again under its id


def kinds_logged(tasks_dir: Path, run_id: str, kinds: frozenset[str]) -> set[str]:
    """Which of `kinds` a run has logged (by each line's first bytes, as `count`): the durable
    answer to "did this task begin / end?" for a role whose memory went with a restart."""
    try:
        with open(log_path(tasks_dir, run_id), "rb") as fh:
            return {k for raw in fh if (k := _kind(raw)) in kinds}
    except OSError:
        return set()


def read(tasks_dir: Path, run_id: str, kinds: frozenset[str] | None = None) -> Iterator[dict]:
    """Events of one run in order; a damaged line is skipped, not fatal. `kinds`: only the run's
    first event and those of these kinds, the others skipped undecoded (a lifecycle needs no
    prompt: `llm_call` lines are most of a log's bytes)."""
    first = True
    try:
        with open(log_path(tasks_dir, run_id), "rb") as fh:
            for raw in fh:
                if kinds is not None and not first and _kind(raw) not in kinds:
                    continue
                try:
                    event = json.loads(raw)
                except ValueError:
                    continue
                first = False
                yield event
    except FileNotFoundError:
        return


def _kind(raw: bytes) -> str | None:
    """The kind of a logged line, from its first bytes (`append` writes it first)."""
    if not raw.startswith(b'{"kind": "'):
        return None
    end = raw.find(b'"', 10)
    return raw[10:end].decode("utf-8", "replace") if end > 0 else None
