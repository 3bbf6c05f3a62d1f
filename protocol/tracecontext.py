"""The trace context a message carries: a W3C `traceparent` string in the envelope's `trace` field.

`version-traceid-spanid-flags`, e.g. `00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01`
(https://www.w3.org/TR/trace-context/). The bus client does the propagation when tracing is on in
its process (`BusClient.tracing`, set by services/runtime/telemetry.py): a handler runs with
`CURRENT` set to the trace of the message it handles, and every message sent while it runs (or from
within a span the handler opens) carries the current context. With tracing off nothing here runs.

No OpenTelemetry import: the wire format only, so `protocol/` stays free of our other layers.
"""
from __future__ import annotations

import hashlib
from contextvars import ContextVar
from typing import Optional

# The traceparent of the span (or the received message) this thread of control is in.
CURRENT: ContextVar[Optional[str]] = ContextVar("artoo_traceparent", default=None)

# The last trace context seen per task, for what a process sends outside any handler (timers,
# deadlines, re-sends after a restart): it still lands in its task's trace.
_TASKS: dict[str, str] = {}
_TASKS_CAP = 4096


def remember(task: str, traceparent: str) -> None:
    if task and task != "-":
        if len(_TASKS) >= _TASKS_CAP and task not in _TASKS:
            for old in list(_TASKS)[: _TASKS_CAP // 2]:   # oldest first (insertion order)
                del _TASKS[old]
        _TASKS[task] = traceparent


def for_task(task: str | None) -> Optional[str]:
    return _TASKS.get(task) if task else None


def forget(task: str) -> None:
    _TASKS.pop(task, None)


def enter(trace: str | None, task: str):
    """Set CURRENT for a handler of a message with this trace (or its task's); returns the token
    to reset it with."""
    if trace:
        remember(task, trace)
    else:
        trace = _TASKS.get(task)
    return CURRENT.set(trace)


def current(task: str | None = None) -> Optional[str]:
    """The context a message sent now carries: the current span's, else its task's."""
    return CURRENT.get() or (_TASKS.get(task) if task else None)


def parse(traceparent: str | None) -> Optional[tuple[int, int, int]]:
    """(trace id, span id, flags) of a well-formed traceparent; None otherwise."""
    if not traceparent or len(traceparent) < 55:
        return None
    parts = traceparent.split("-")
    if len(parts) < 4 or len(parts[0]) != 2 or parts[0] == "ff" or len(parts[1]) != 32 \
            or len(parts[2]) != 16 or len(parts[3]) != 2:
        return None
    try:
        trace_id, span_id, flags = int(parts[1], 16), int(parts[2], 16), int(parts[3], 16)
    except ValueError:
        return None
    if not trace_id or not span_id:
        return None
    return trace_id, span_id, flags


def format(trace_id: int, span_id: int, flags: int = 1) -> str:  # noqa: A001 (the W3C name)
    return f"00-{trace_id:032x}-{span_id:016x}-{flags:02x}"


def task_trace_id(task: str) -> int:
    """The trace id of a task: derived from its id, so every process that starts a span for a
    task it has no context for (a restarted role, a timer) still lands in the task's one trace."""
    return int.from_bytes(hashlib.blake2b(task.encode(), digest_size=16).digest(), "big") or 1
