"""Types the bus client's halves share: subscriptions, pending work messages, bounded maps."""
from __future__ import annotations

import threading
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any, Callable, Optional

from ..envelope import Envelope, topic_for

Handler = Callable[[Envelope, Any], Any]
ALL = "*"
LRU_CAP = 8192
# (sender node, stream) pairs whose last seq a receiver keeps to count gaps: the oldest half goes
# when 2 × SENDERS_CAP are kept. Every subtask's effector is a new sender, so this is what grows
# with the tasks a long-lived role hears from (≈ 250 bytes a pair): 16,384 pairs were ≈ 4 MB.
SENDERS_CAP = 1024


class _Defer:
    def __repr__(self) -> str:
        return "DEFER"


# An acknowledged handler returns DEFER to leave the message unacknowledged and forgotten: its
# sender re-sends it (backoff up to ack_max_backoff_s) and the next copy is handled afresh, by
# whichever instance owns the task then (protocol/bus/membership.py).
DEFER = _Defer()


class BusTimeout(TimeoutError):
    pass


class Gather:
    """An observer's pace: woken by a message, it waits `period_s` for the rest of the burst and
    takes them all in one go.

    Why: the processes that only observe every message (the tap, the auditor, metrics) are on
    no task's path, yet woken once per message they competed for the cores with the roles that
    are — a one-subtask task's ≈ 50 messages cost each of them ≈ 4 core-ms, much of it wake-ups.
    Gathering costs them a lag of at most `period_s` and the task nothing (docs/BENCHMARKS.md).
    After a drain that stopped at its limit (more was waiting) there is no wait: under load the
    pace is the drain's, never slower."""
    __slots__ = ("period_s", "bursts", "capped")

    def __init__(self, period_s: float):
        self.period_s = max(0.0, period_s)
        self.bursts = 0             # wake-ups that took messages
        self.capped = False         # the last drain stopped at its limit: more was waiting

    def before_drain(self, more_waiting: bool | None = None) -> None:
        """Called when messages have arrived, before taking them (sleeps on the caller's thread);
        `more_waiting` defaults to whether the last drain stopped at its limit (`after_drain`)."""
        self.bursts += 1
        if self.period_s > 0 and not (self.capped if more_waiting is None else more_waiting):
            time.sleep(self.period_s)

    def after_drain(self, capped: bool) -> None:
        self.capped = capped


class ReplySlot:
    """Where the loop thread leaves a request's reply for the thread waiting on it: one lock,
    held from creation and released once, so the waiter wakes on one futex (a Future's condition
    wakes it, then makes it queue again for the lock the setter still holds)."""
    __slots__ = ("_lock", "_set", "_value", "_error")

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._lock.acquire()
        self._set = False
        self._value: Any = None
        self._error: Optional[BaseException] = None

    def done(self) -> bool:
        return self._set

    def set_result(self, value: Any) -> None:
        self._settle(value, None)

    def set_exception(self, error: BaseException) -> None:
        self._settle(None, error)

    def _settle(self, value: Any, error: Optional[BaseException]) -> None:
        if self._set:             # a duplicate reply, or stop() racing the loop: first wins
            return
        self._value, self._error, self._set = value, error, True
        try:
            self._lock.release()
        except RuntimeError:
            pass

    def result(self, timeout: float) -> Any:
        """The reply; TimeoutError when none came within `timeout` seconds."""
        if not self._set and not self._lock.acquire(timeout=timeout):
            raise TimeoutError
        if self._error is not None:
            raise self._error
        return self._value


@dataclass
class Subscription:
    type_name: str                 # message type, or "*" for everything
    fn: Handler
    ack: bool | str = False        # this process is a consumer: acknowledge and de-duplicate
                                   # (a role name: acknowledge as that role, see BusClient.on)
    partition: bool = False        # only the owning instance of a scalable role handles the task
    threaded: bool = False
    request: bool = False          # fn returns the reply body; replies are cached by request id
    task: Optional[str] = None     # only this task's messages
    when: Optional[Callable[[Envelope, Any], bool]] = None  # extra filter (e.g. "addressed to me")
    raw: bool = False              # receive the envelope only, skip body validation
    every_copy: bool = False       # also byte-identical re-sends (an idempotent observer: no
                                   # replay filter), e.g. a registry of the tasks begun on the bus
    directed: bool = False         # only copies sent to this node: no subscription of its own

    def __post_init__(self) -> None:
        # nothing to check but the directed-topic rule and the replay filter: the hot path
        self.plain = not (self.ack or self.partition or self.threaded or self.request
                          or self.task or self.when is not None or self.raw
                          or self.type_name == ALL or self.directed)

    @property
    def ack_role(self) -> str | None:
        return self.ack if isinstance(self.ack, str) else None

    @property
    def prefix(self) -> bytes:
        if self.type_name == ALL:
            return b""
        return topic_for(self.type_name, self.task) if self.task else f"{self.type_name}/".encode()


@dataclass
class Pending:
    frames: list[bytes]
    consumers: set[str]
    type_name: str
    first_sent: float
    next_at: float
    backoff: float
    acked: set[str] = field(default_factory=set)
    on_done: Optional[Callable[[bool], None]] = None
    attempts: int = 1


class Lru(OrderedDict):
    def __init__(self, cap: int):
        super().__init__()
        self.cap = cap

    def put(self, key, value):
        self[key] = value
        self.move_to_end(key)
        if len(self) > self.cap:
            self.popitem(last=False)


class ReplyCache:
    """The replies a replier sent, by request id, for as long as a requester may re-send the
    request (`keep_s`): a copy re-sent in that time is answered with the same frames, not handled
    again. Bounded by age as well as count, so that a replier of large results (a world
    projection, a memory query) does not hold thousands of them long after any re-send could
    come; a copy arriving later is handled again, as one past the count bound always was."""

    __slots__ = ("keep_s", "cap", "_entries")

    def __init__(self, keep_s: float, cap: int = 2048):
        self.keep_s, self.cap = keep_s, cap
        self._entries: OrderedDict = OrderedDict()     # id -> (kept until, frames), oldest first

    def put(self, key: str, frames: list[bytes], now: float | None = None) -> None:
        now = time.monotonic() if now is None else now
        entries = self._entries
        entries[key] = (now + self.keep_s, frames)
        entries.move_to_end(key)
        while entries and (len(entries) > self.cap or next(iter(entries.values()))[0] <= now):
            entries.popitem(last=False)

    def get(self, key: str, now: float | None = None) -> list[bytes] | None:
        hit = self._entries.get(key)
        if hit is None or hit[0] <= (time.monotonic() if now is None else now):
            return None
        return hit[1]

    def __len__(self) -> int:
        return len(self._entries)


class SeenSet:
    """Membership of the last `cap` keys at least (at most 2 × cap): two generations of plain
    sets, swapped when the young one is full. O(1) and a C call per lookup and insert, where an
    ordered LRU costs a move-to-end and a size check in Python per message. With `max_age_s` the
    generations are swapped that often too: a key is kept at least that long (or for `cap` more
    keys), for a set that is needed only so long and would otherwise fill at a slow rate."""

    __slots__ = ("cap", "young", "old", "max_age_s", "_born")

    def __init__(self, cap: int, max_age_s: float = 0.0):
        self.cap = cap
        self.young: set = set()
        self.old: set = set()
        self.max_age_s = max_age_s
        self._born = time.monotonic()

    def __contains__(self, key) -> bool:
        return key in self.young or key in self.old

    def add(self, key) -> None:
        young = self.young
        young.add(key)
        if len(young) >= self.cap or (
                self.max_age_s and time.monotonic() - self._born >= self.max_age_s):
            self.old, self.young = young, set()
            self._born = time.monotonic()

    def __len__(self) -> int:
        return len(self.young | self.old)
