"""Scheduled goals: `--every` and cron parsing, due-time math, and the durable schedule file.

Everything here is pure except `ScheduleStore` (the file). The CLI (`artoo schedule`) and the
scheduler role (services/roles/scheduler.py) both use it.

**How the CLI talks to the scheduler: through the file, not the bus.** `$ARTOO_HOME/schedules.json`
is the one source of truth. Every change (CLI: add/rm/pause/resume; scheduler: a run fired, skipped,
missed or ended) is a read-modify-write under an exclusive flock on `schedules.json.lock`, written
atomically (temp file, fsync, rename), so neither side ever sees half a file nor loses the other's
change. The scheduler re-reads the file when its mtime/size changes (it looks every
`ARTOO_SCHEDULER_TICK_S`, default 1 s). Why not a request over the bus: `schedule add` must work with
the daemon down (the schedule is simply stored and runs once the daemon is up), a schedule must
survive any restart anyway (so it has to be on disk), and one file edited under one lock leaves no
second copy to reconcile; the cost is up to one tick of delay before a change is seen.

**Semantics.** `--every D` fires at created + D, + 2D, ... (a fixed grid). `--cron` fires at the
matching minutes, local time, as cron(8) does. A slot the scheduler sees within `grace_s` of its
time runs on time. Slots that went by without a run (the daemon was down, the host was suspended)
are *missed*: counted and written to the schedule's history, and caught up by **one** run at most,
never one per slot. Runs do not overlap unless the schedule says so: a slot that falls due while the
schedule's previous run has no FinalResult yet is *skipped* (recorded, not run later). A paused
schedule fires nothing; `resume` starts from the next slot after now (slots passed while paused are
neither missed nor caught up).
"""
from __future__ import annotations

import fcntl
import json
import math
import os
import re
import secrets
import tempfile
import time
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timedelta
from functools import lru_cache
from pathlib import Path
from typing import Iterator

HISTORY_KEPT = 100          # history entries kept per schedule (oldest dropped)
MIN_EVERY_S = 1.0
MAX_COUNT = 100_000         # missed slots are counted up to this (a cron over years of downtime)
FORMAT_VERSION = 1


class ScheduleError(ValueError):
    """A bad `--every` / `--cron` / schedule id: the CLI reports it as a usage error."""


# -- --every ----------------------------------------------------------------------------------

_UNITS = {"s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}
_EVERY = re.compile(r"(\d+(?:\.\d+)?)\s*([smhd])")


def parse_every(text: str) -> float:
    """`30s`, `15m`, `1h`, `2d`, or a sum like `1h30m` -> seconds (at least MIN_EVERY_S)."""
    raw = (text or "").strip().lower().replace(" ", "")
    if not raw:
        raise ScheduleError("--every needs a duration such as 30s, 15m, 1h or 1d")
    pos, total = 0, 0.0
    for m in _EVERY.finditer(raw):
        if m.start() != pos:
            break
        total += float(m.group(1)) * _UNITS[m.group(2)]
        pos = m.end()
    if pos != len(raw):
        raise ScheduleError(f"bad --every {text!r}: use a number with a unit s, m, h or d "
                            f"(30s, 15m, 1h, 1h30m, 1d)")
    if total < MIN_EVERY_S:
        raise ScheduleError(f"--every {text!r} is shorter than {MIN_EVERY_S:g}s")
    return total


def format_every(seconds: float) -> str:
    out, rest = [], float(seconds)
    for unit in ("d", "h", "m"):
        n = int(rest // _UNITS[unit])
        if n:
            out.append(f"{n}{unit}")
            rest -= n * _UNITS[unit]
    if rest or not out:
        out.append(f"{rest:g}s")
    return "".join(out)


# -- cron -------------------------------------------------------------------------------------

_FIELDS = (("minute", 0, 59), ("hour", 0, 23), ("day of month", 1, 31), ("month", 1, 12),
           ("day of week", 0, 7))


def _parse_field(text: str, name: str, lo: int, hi: int) -> frozenset[int]:
    values: set[int] = set()
    for part in text.split(","):
        if not part:
            raise ScheduleError(f"cron {name}: empty list item in {text!r}")
        base, _, step_text = part.partition("/")
        step = 1
        if step_text:
            if not step_text.isdigit() or int(step_text) == 0:
                raise ScheduleError(f"cron {name}: bad step {step_text!r}")
            step = int(step_text)
        if base == "*":
            start, end = lo, hi
        elif "-" in base:
            a, _, b = base.partition("-")
            if not (a.isdigit() and b.isdigit()):
                raise ScheduleError(f"cron {name}: bad range {base!r}")
            start, end = int(a), int(b)
            if start > end:
                raise ScheduleError(f"cron {name}: range {base!r} runs backwards")
        elif base.isdigit():
            start = int(base)
            end = hi if step_text else start    # `5/15` = from 5 to the end, every 15
        else:
            raise ScheduleError(f"cron {name}: {base!r} is not a number, range or *")
        if start < lo or end > hi:
            raise ScheduleError(f"cron {name}: {part!r} is outside {lo}-{hi}")
        values.update(range(start, end + 1, step))
    return frozenset(values)


@dataclass(frozen=True)
class Cron:
    """A 5-field cron expression: minute hour day-of-month month day-of-week (0 and 7 = Sunday).

    Numbers, `*`, lists (`1,15`), ranges (`1-5`) and steps (`*/15`, `0-30/10`, `5/15`). As in
    cron(8), when both day fields are restricted a day matches if *either* does."""
    text: str
    minutes: frozenset[int]
    hours: frozenset[int]
    days: frozenset[int]
    months: frozenset[int]
    weekdays: frozenset[int]        # 0 = Sunday ... 6 = Saturday (7 folded onto 0)
    any_day: bool                   # day-of-month field starts with *
    any_weekday: bool

    @classmethod
    def parse(cls, text: str) -> "Cron":
        parts = (text or "").split()
        if len(parts) != 5:
            raise ScheduleError(f"cron {text!r}: need 5 fields (minute hour day month weekday), "
                                f"got {len(parts)}")
        sets = [_parse_field(p, *spec) for p, spec in zip(parts, _FIELDS)]
        weekdays = frozenset(d % 7 for d in sets[4])
        return cls(" ".join(parts), sets[0], sets[1], sets[2], sets[3], weekdays,
                   parts[2].startswith("*"), parts[4].startswith("*"))

    def day_matches(self, dt: datetime) -> bool:
        dom = dt.day in self.days
        dow = (dt.weekday() + 1) % 7 in self.weekdays   # Python: Monday = 0; cron: Sunday = 0
        if self.any_day or self.any_weekday:
            return dom and dow
        return dom or dow

    def matches(self, dt: datetime) -> bool:
        return (dt.minute in self.minutes and dt.hour in self.hours and dt.month in self.months
                and self.day_matches(dt))

    def next_after(self, ts: float) -> float:
        """The first matching minute strictly after `ts` (epoch seconds, local time)."""
        dt = datetime.fromtimestamp(ts).replace(second=0, microsecond=0) + timedelta(minutes=1)
        limit = dt + timedelta(days=366 * 5)     # Feb 29 on a Monday still comes round by then
        while dt < limit:
            if dt.month not in self.months:
                dt = (dt.replace(day=1, hour=0, minute=0) + timedelta(days=32)).replace(day=1)
            elif not self.day_matches(dt):
                dt = dt.replace(hour=0, minute=0) + timedelta(days=1)
            elif dt.hour not in self.hours:
                dt = dt.replace(minute=0) + timedelta(hours=1)
            elif dt.minute not in self.minutes:
                dt += timedelta(minutes=1)
            else:
                return dt.timestamp()
        raise ScheduleError(f"cron {self.text!r} never matches")


@lru_cache(maxsize=64)
def _cron(spec: str) -> Cron:
    return Cron.parse(spec)


# -- one schedule: due-time math ----------------------------------------------------------------

def new_schedule(goal: str, *, every: str | None = None, cron: str | None = None,
                 workspace: str = "", yes: bool = False, overlap: bool = False,
                 now: float | None = None) -> dict:
    """A schedule record (validated). Exactly one of `every` / `cron`."""
    now = time.time() if now is None else now
    goal = (goal or "").strip()
    if not goal:
        raise ScheduleError("a schedule needs a goal")
    if (every is None) == (cron is None):
        raise ScheduleError("give exactly one of --every or --cron")
    sched = {"id": new_id(), "goal": goal, "workspace": workspace,
             "yes": bool(yes), "overlap": bool(overlap), "paused": False, "created_at": now,
             "runs": 0, "skipped": 0, "missed": 0, "last_run_id": "", "last_fired_at": None,
             "last_outcome": "", "running": [], "history": []}
    if every is not None:
        sched.update(kind="every", spec=format_every(parse_every(every)),
                     interval_s=parse_every(every), anchor=now)
    else:
        sched.update(kind="cron", spec=Cron.parse(cron).text)
    sched["next_due"] = next_slot(sched, now)
    return sched


def new_id() -> str:
    return f"s-{secrets.token_hex(3)}"


def describe(sched: dict) -> str:
    return f"every {sched['spec']}" if sched["kind"] == "every" else f"cron {sched['spec']}"


def next_slot(sched: dict, after: float) -> float:
    """The schedule's first slot strictly after `after`."""
    if sched["kind"] == "every":
        interval, anchor = float(sched["interval_s"]), float(sched["anchor"])
        if after < anchor:
            return anchor + interval
        k = math.floor((after - anchor) / interval) + 1
        return anchor + k * interval
    return _cron(sched["spec"]).next_after(after)


def slots_between(sched: dict, start: float, end: float) -> int:
    """How many slots lie in [start, end] (counted up to MAX_COUNT), `start` being a slot."""
    if end < start:
        return 0
    if sched["kind"] == "every":
        return min(MAX_COUNT, math.floor((end - start) / float(sched["interval_s"])) + 1)
    n, t, cron = 1, start, _cron(sched["spec"])
    while n < MAX_COUNT:
        t = cron.next_after(t)
        if t > end:
            break
        n += 1
    return n


@dataclass(frozen=True)
class Decision:
    """What one look at a schedule decides at `now` (pure: `evaluate`)."""
    fire: bool = False         # start a run now
    skip: bool = False         # a slot fell due while the previous run is still going
    missed: int = 0            # slots that went by unrun (daemon down, host suspended)
    next_due: float = 0.0


def evaluate(sched: dict, now: float, *, grace_s: float) -> Decision:
    """Is the schedule due at `now`, and how many slots were missed?

    All slots in [next_due, now] collapse into at most one run. The last of them is on time if it
    is at most `grace_s` old; every other one is missed (it went by with nobody to run it)."""
    due = float(sched["next_due"])
    if sched.get("paused") or now < due:
        return Decision(next_due=due)
    slots = slots_between(sched, due, now)
    last = due if slots == 1 else _last_slot(sched, due, now)
    missed = slots - 1 + (1 if now - last > grace_s else 0)
    following = next_slot(sched, now)
    if sched.get("running") and not sched.get("overlap"):
        return Decision(skip=True, missed=missed, next_due=following)
    return Decision(fire=True, missed=missed, next_due=following)


def _last_slot(sched: dict, due: float, now: float) -> float:
    if sched["kind"] == "every":
        interval = float(sched["interval_s"])
        return due + math.floor((now - due) / interval) * interval
    cron, t = _cron(sched["spec"]), due
    for _ in range(MAX_COUNT):
        nxt = cron.next_after(t)
        if nxt > now:
            break
        t = nxt
    return t


def note(sched: dict, event: str, now: float | None = None, **fields) -> None:
    """Append one history entry (fired, skipped, missed, ended, paused, resumed, added)."""
    entry = {"ts": time.time() if now is None else now, "event": event}
    entry.update({k: v for k, v in fields.items() if v is not None})
    sched.setdefault("history", []).append(entry)
    del sched["history"][:-HISTORY_KEPT]


def find(data: dict, ref: str) -> dict:
    """The schedule whose id is `ref` or starts with it (unique)."""
    scheds = data.get("schedules", [])
    exact = [s for s in scheds if s["id"] == ref]
    hits = exact or [s for s in scheds if s["id"].startswith(ref)]
    if len(hits) == 1:
        return hits[0]
    if not hits:
        raise ScheduleError(f"no schedule {ref!r} (see `artoo schedule ls`)")
    raise ScheduleError(f"{ref!r} matches {len(hits)} schedules; give more of the id")


# -- the file ---------------------------------------------------------------------------------

def empty() -> dict:
    return {"version": FORMAT_VERSION, "schedules": [], "open_runs": {}}


class ScheduleStore:
    """`schedules.json`: read lock-free (it is only ever replaced whole), changed under a lock.

    `open_runs` maps the run id of every run the scheduler started and has not seen end to
    {schedule, started_at, deadline_at, msg_id, submitted}; the schedules hold their counters and
    history."""

    def __init__(self, path: Path):
        self.path = Path(path)
        self.lock_path = self.path.with_name(self.path.name + ".lock")

    def read(self) -> dict:
        try:
            data = json.loads(self.path.read_text())
        except FileNotFoundError:
            return empty()
        except ValueError as exc:
            raise ScheduleError(f"{self.path} is damaged ({exc}); fix or remove it") from None
        if not isinstance(data, dict):
            raise ScheduleError(f"{self.path} is not a schedule file")
        base = empty()
        base.update(data)
        return base

    def stamp(self) -> tuple[int, int] | None:
        """(mtime_ns, size) of the file, to notice a change cheaply; None when there is none."""
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            return None
        return st.st_mtime_ns, st.st_size

    @contextmanager
    def edit(self, timeout_s: float = 10.0) -> Iterator[dict]:
        """Lock, read, let the caller change the dict, write it back atomically, unlock.

        Raises TimeoutError when another process holds the lock longer than `timeout_s`."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.lock_path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            deadline = time.monotonic() + timeout_s
            while True:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    if time.monotonic() >= deadline:
                        raise TimeoutError(f"{self.lock_path} is held by another process") from None
                    time.sleep(0.01)
            data = self.read()
            before = json.dumps(data, sort_keys=True)
            yield data
            if json.dumps(data, sort_keys=True) != before:
                self._write(data)
        finally:
            os.close(fd)       # releases the lock

    def _write(self, data: dict) -> None:
        fd, tmp = tempfile.mkstemp(prefix=".schedules-", dir=self.path.parent)
        try:
            with os.fdopen(fd, "w") as fh:
                json.dump(data, fh, indent=1, sort_keys=True)
                fh.flush()
                os.fsync(fh.fileno())
            os.chmod(tmp, 0o600)
            os.replace(tmp, self.path)
        except BaseException:
            try:
                os.unlink(tmp)
            except FileNotFoundError:
                pass
            raise
        dfd = os.open(self.path.parent, os.O_RDONLY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)
