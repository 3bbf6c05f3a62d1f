"""Which instances of this process's own role are alive, from their heartbeats (issue 18).

Partitioned roles (N instances, possibly on several hosts) own a task by rendezvous hashing over
the instances that are alive (protocol/envelope.py `owner`): an instance counts itself alive always;
a peer is alive while its heartbeats keep coming (at most `missing_after_s` apart); a peer never
heard from counts as alive until this process has listened for `missing_after_s` (a fresh process
has not had time to hear anyone, and must not grab every task while it starts). So when an
instance dies, after `missing_after_s` every survivor agrees it is gone and its tasks, and only its
tasks, move to their next-ranked live instance; when it comes back, they move back.

A peer that is only slow (a loaded machine can starve a process of CPU for seconds) would still
handle the messages it has queued, so a work message about a task this instance owns only because
a higher-ranked peer has been missing for less than `fence_s` (missing_after_s +
ack_max_backoff_s) is fenced: it is left unacknowledged until it has been waiting `fence_s` since
it was first sent (re-sends keep the original timestamp). A slow peer that wakes up in that time
acknowledges it and its sender stops re-sending; otherwise a re-send reaches this instance, old
enough to be handled. Two instances then handle one task only if one was stalled longer than
`fence_s`; a peer silent that long is treated as dead and its tasks are no longer fenced.
"""
from __future__ import annotations

import logging
import threading
import time

from ..envelope import owner, ranking

log = logging.getLogger("artoo.bus")


class Membership:
    def __init__(self, role: str, instance: int, instances: int, node: str,
                 missing_after_s: float, fence_s: float = 0.0):
        self.role, self.instance, self.instances, self.node = role, instance, instances, node
        self.missing_after_s = missing_after_s
        self.fence_s = fence_s
        self.started: float | None = None          # when the bus client became ready
        self.seen: dict[int, float] = {}            # peer instance -> monotonic time last heard
        self.where: dict[int, str] = {}             # peer instance -> "node@host" (for reports)
        self._last: frozenset[int] | None = None
        self.misconfigured: set[str] = set()        # peer nodes with another instance count
        self._lock = threading.Lock()

    def on_heartbeat(self, env, hb) -> None:
        if hb.role != self.role or hb.node == self.node:
            return
        theirs = (getattr(hb, "info", None) or {}).get("instances", self.instances)
        if theirs != self.instances or not 0 <= hb.instance < self.instances:
            # hosts that disagree on TOTAL (--instances) would both own some tasks: say so
            if hb.node not in self.misconfigured:
                self.misconfigured.add(hb.node)
                log.error("%s: %s is instance %s of %s, but this host counts %d instances of %s: "
                          "give every host the same --instances TOTAL", self.node, hb.node,
                          hb.instance, theirs, self.instances, self.role)
            return
        with self._lock:
            self.seen[hb.instance] = time.monotonic()
            self.where[hb.instance] = f"{hb.node}@{hb.host}" if hb.host else hb.node

    def alive(self, now: float | None = None) -> frozenset[int]:
        now = time.monotonic() if now is None else now
        young = self.started is None or now - self.started < self.missing_after_s
        with self._lock:
            seen = dict(self.seen)
        return frozenset(i for i in range(self.instances)
                         if i == self.instance
                         or (i in seen and now - seen[i] <= self.missing_after_s)
                         or (i not in seen and young))

    def owner(self, task_id: str) -> int:
        return owner(task_id, self.instances, self.alive() if self.instances > 1 else None)

    def fenced(self, task_id: str, sent_at: float) -> bool:
        """Owned here only because a higher-ranked peer went missing less than `fence_s` ago, and
        sent less than `fence_s` ago: leave it for a merely slow peer (or for a later re-send)."""
        return self.fenced_by(task_id, sent_at) is not None

    def fenced_by(self, task_id: str, sent_at: float) -> int | None:
        """The recently missing peer a message is fenced off for (None: not fenced)."""
        if self.instances <= 1 or not self.fence_s or time.time() - sent_at >= self.fence_s:
            return None
        now = time.monotonic()
        with self._lock:
            seen = dict(self.seen)
        for i in ranking(task_id, self.instances):
            if i == self.instance:
                return None
            if i in seen and now - seen[i] < self.missing_after_s + self.fence_s:
                return i     # missing for less than fence_s: maybe only slow
        return None

    def check(self) -> tuple[frozenset[int], frozenset[int]]:
        """(gone, back) since the last check; logged (a timer calls this every second)."""
        now_alive = self.alive()
        last, self._last = self._last, now_alive
        if last is None:
            return frozenset(), frozenset()
        gone, back = last - now_alive, now_alive - last
        for i in sorted(gone):
            log.warning("%s: %s instance %d (%s) missing for %.0fs: its tasks move to the live "
                        "instances", self.node, self.role, i, self.where.get(i, "never heard"),
                        self.missing_after_s)
        for i in sorted(back):
            log.info("%s: %s instance %d (%s) is back", self.node, self.role, i,
                     self.where.get(i, "?"))
        return gone, back
