"""Catching up on bus messages the world missed, from the audit log.

Why: the world only observes the bus, and a message published while its process is down (killed,
restarting, `artoo up` bringing it up after the roles) is gone for it, so a task run meanwhile would
leave no trace in the world model. Every bus message is also in the tap's append-only audit log, so
the world reads that log after the last position it durably processed — (seq, segment, offset),
kept in its own LMDB (`meta` "replay") — and feeds the four types it observes to the same handlers
as the live path. Those handlers are idempotent (an episode's request, spec, final, and each
outcome by its message id count once), so a message seen live and again in the log, or read twice
after a crash between handling it and saving the position, changes nothing the second time. A
message this process handled live is not handled again at all (`WorldService.live`): a pass every
30 s otherwise re-ran the handlers, each a store transaction, for every task of the interval.

A pass runs at start-up and then every `world_replay_interval_s` (0 = at start-up only), on a thread
of its own so a long backlog never holds up the bus loop (heartbeats, live messages, queries).
"""
from __future__ import annotations

import logging
import math
import threading
import time
from pathlib import Path

from protocol.envelope import ProtocolError, decode, parse_body, stream_of
from services.runtime import auditlog

log = logging.getLogger("artoo.world")
OBSERVED = frozenset({b"UserRequest", b"TaskSpec", b"SubTaskOutcome", b"FinalResult"})
SAVE_EVERY = 2000                  # records read between two saved positions within one pass
_MAX_BYTES = 64 << 20


class Replayer:
    def __init__(self, service, log_dir: Path, interval_s: float):
        self.service = service
        self.log_dir = Path(log_dir)
        self.interval_s = interval_s
        self._pass_lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._next = 0.0                              # monotonic time of the next pass: now
        self.passes = 0
        self.read = 0
        self.replayed = 0
        self.skipped = 0                              # handled live already: not again
        self.errors = 0
        self.caught_up = threading.Event()            # set after the first complete pass

    # -- scheduling (the bus loop's timer calls due()) ---------------------------------------------
    def due(self) -> None:
        now = time.monotonic()
        if self._stop.is_set() or now < self._next or \
                (self._thread is not None and self._thread.is_alive()):
            return
        self._next = now + self.interval_s if self.interval_s > 0 else math.inf
        self._thread = threading.Thread(target=self._run, name="world-replay", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            self.catch_up()
        except Exception:
            self.errors += 1
            log.exception("world: catching up from the audit log failed")

    def stop(self, timeout: float = 5.0) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)

    # -- one pass ----------------------------------------------------------------------------------
    def position(self) -> dict:
        return self.service.model.store.one("meta", "replay") or \
            {"seq": 0, "segment": "", "offset": 0}

    def _save(self, rec: auditlog.Record) -> None:
        pos = {"seq": rec.seq, "segment": rec.segment, "offset": auditlog.record_end(rec),
               "at": time.time()}
        store = self.service.model.store
        store.transact(lambda txn: store.put(txn, "meta", "replay", pos))

    def catch_up(self) -> int:
        """Read the log after the stored position; returns how many observed messages it handled."""
        with self._pass_lock:
            pos = self.position()
            handled = unsaved = 0
            last = None
            for rec in auditlog.iter_after(self.log_dir, int(pos["seq"]), pos.get("segment", ""),
                                           int(pos.get("offset", 0))):
                if self._stop.is_set():
                    break
                last = rec
                self.read += 1
                unsaved += 1
                if rec.kind == auditlog.MSG and stream_of(rec.topic) in OBSERVED:
                    try:
                        _topic, env = decode([rec.topic, rec.payload], _MAX_BYTES)
                        if env.id in self.service.live:
                            self.skipped += 1
                            continue
                        msg = parse_body(env)
                    except ProtocolError:
                        continue                      # the auditor reports those; not ours
                    self.service.dispatch(env, msg)
                    handled += 1
                if unsaved >= SAVE_EVERY:
                    self._save(rec)
                    unsaved = 0
            if last is not None and unsaved:
                self._save(last)
            self.passes += 1
            self.replayed += handled
            if handled:
                log.info("world: caught up on %d message(s) from the audit log (to #%d)",
                         handled, last.seq if last else pos["seq"])
            if not self._stop.is_set():
                self.caught_up.set()
            return handled

    def info(self) -> dict:
        pos = self.position()
        return {"replay_seq": pos["seq"], "replay_passes": self.passes,
                "replayed": self.replayed, "replay_skipped": self.skipped}
