"""Waiting on a condition variable for a predicate, with a deadline (shared by test harnesses)."""
from __future__ import annotations

import threading
import time
from typing import Any, Callable


def wait_on(cond: threading.Condition, pred: Callable[[], Any], timeout: float, what: str,
            poll: float) -> Any:
    """The predicate's first truthy value, re-checked on every notify (and every `poll` s);
    AssertionError naming `what` when `timeout` passes."""
    deadline = time.monotonic() + timeout
    with cond:
        while True:
            value = pred()
            if value:
                return value
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError(f"timed out waiting for {what}")
            cond.wait(min(left, poll))
