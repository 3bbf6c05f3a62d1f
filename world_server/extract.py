"""Model-based extraction where code cannot (issue 31): what a task's answer states in free text.

Code extraction (services/runtime/worldfacts.py) reads paths, ports, `key: value` settings and the
user's own statements; an answer such as "the deploy target is build7.internal, run as ci" states
values code cannot tie to a subject. For those the world asks a model, with three bounds:

* off the task's path — after the FinalResult has been handled, on a thread of the world process
  of its own, from a bounded queue (the oldest dropped, counted): no task ever waits for it;
* a bounded number of calls — at most `world_extract_per_hour` (0 = never: the default, since on
  the bundled local model every call competes with the user's tasks for the CPU);
* Law 0 — a value the model names is a *fact* only when code finds it verbatim in the output of
  one of the task's successful tool calls (that output is the evidence); otherwise it is kept as a
  claim, status `model_extracted`, never shown as a fact.
"""
from __future__ import annotations

import collections
import logging
import threading
import time
from typing import Callable

from pydantic import BaseModel, Field

log = logging.getLogger("artoo.world")
MAX_QUEUE = 50
MAX_TRIPLES = 5
SYSTEM = ("You extract facts from one finished task for a long-term world model. Given the "
          "user's request and the task's answer, list at most 5 facts the answer states as "
          "(subject, predicate, value): subject a short name (a file path, a host, a service, a "
          "setting), predicate one or two words, value the exact text from the answer. Only what "
          "the answer states; nothing guessed. Reply with JSON only.")


class Triple(BaseModel):
    subject: str = Field(max_length=120)
    predicate: str = Field(max_length=60)
    value: str = Field(max_length=200)


class Extracted(BaseModel):
    facts: list[Triple] = Field(default_factory=list)


class Extractor:
    def __init__(self, model, llm_factory: Callable[[], object], per_hour: int,
                 on_error: Callable[[], None] | None = None):
        self.model = model
        self.llm_factory = llm_factory
        self.per_hour = per_hour
        self.on_error = on_error
        self._llm = None
        self._queue: collections.deque[str] = collections.deque()
        self._cond = threading.Condition()
        self._calls: collections.deque[float] = collections.deque()   # monotonic times
        self._stop = False
        self._thread: threading.Thread | None = None
        self.calls = 0
        self.skipped = 0          # over the hourly bound, or dropped from a full queue
        self.admitted = {"facts": 0, "claims": 0}

    @property
    def enabled(self) -> bool:
        return self.per_hour > 0

    def start(self) -> None:
        if self.enabled and self._thread is None:
            self._thread = threading.Thread(target=self._main, name="world-extract", daemon=True)
            self._thread.start()

    def stop(self, timeout: float = 5.0) -> None:
        with self._cond:
            self._stop = True
            self._cond.notify_all()
        if self._thread is not None:
            self._thread.join(timeout)

    def submit(self, task: str) -> None:
        """A task ended with an answer: extract from it later (never blocks)."""
        if not self.enabled:
            return
        with self._cond:
            if len(self._queue) >= MAX_QUEUE:
                self._queue.popleft()
                self.skipped += 1
            self._queue.append(task)
            self._cond.notify()

    def _main(self) -> None:
        while True:
            with self._cond:
                while not self._queue and not self._stop:
                    self._cond.wait()
                if self._stop:
                    return
                task = self._queue.popleft()
            now = time.monotonic()
            while self._calls and now - self._calls[0] > 3600.0:
                self._calls.popleft()
            if len(self._calls) >= self.per_hour:
                self.skipped += 1                   # the bound: this episode stays code-only
                continue
            self._calls.append(now)
            try:
                self.extract(task)
            except Exception:
                log.exception("world: model extraction for %s failed", task)
                if self.on_error is not None:
                    self.on_error()

    def extract(self, task: str) -> dict:
        ep = self.model.store.one("episodes", task)
        final = (ep or {}).get("final") or {}
        if not final.get("answer") or ep.get("extracted"):     # a replayed final: done already
            return {"facts": 0, "claims": 0}
        if self._llm is None:
            self._llm = self.llm_factory()
        self.calls += 1
        user = (f"Request: {ep.get('text', '')[:600]}\n\nAnswer: {final['answer'][:1200]}\n\n"
                f'JSON: {{"facts": [{{"subject": "...", "predicate": "...", "value": "..."}}]}}')
        got = self._llm.complete_json(Extracted, SYSTEM, user, task_id=task, max_tokens=300)
        summary = self.model.admit_extracted(task, got.facts[:MAX_TRIPLES])
        for k in self.admitted:
            self.admitted[k] += summary.get(k, 0)
        return summary

    def info(self) -> dict:
        return {"extract_calls": self.calls, "extract_skipped": self.skipped,
                "extract_facts": self.admitted["facts"], "extract_claims": self.admitted["claims"]}
