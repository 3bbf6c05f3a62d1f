"""The `tap` process: every bus message, exactly once, into the hash-chained audit log (DESIGN §8).

It connects a DEALER to the capture relay in the bus process (services/runtime/capture.py), resumes from the
(epoch, cseq) of the last record in the log, appends what the relay sends, hands each received batch
to the kernel at once (so a SIGKILL loses nothing already received), fsyncs at most
`tap_fsync_interval_s` after the first unsynced record and only then acknowledges, so the relay
forgets a message only once it is durable. Duplicates (replays after a reconnect) are dropped by
cseq; a cseq jump without a LOST notice is a transport gap and is re-requested.

Its BusClient only heartbeats (log position, lag, counters); it subscribes to nothing on the bus.
"""
from __future__ import annotations

import logging
import os
import signal
import threading
import time

import zmq

from protocol import curve
from protocol.bus import BusClient
from protocol.bus.common import Gather
from protocol.envelope import pack
from protocol.settings import Settings
from services.runtime.capture import ACK, BATCH_HEAD, DATA, FROM, ITEM, LOST, LOST_RANGE, POS
from services.runtime.role import run_role

from .log import GAP, LogWriter

log = logging.getLogger("artoo.tap")

IDLE_RESYNC_S = 1.0       # nothing from the relay this long: say FROM again (it may have restarted)


def log_dir(settings: Settings):
    return settings.audit_dir / "log"


class Tap:
    """The capture receiver and log writer; runs on its own thread."""

    def __init__(self, settings: Settings, writer: LogWriter | None = None):
        self.settings = settings
        self.writer = writer or LogWriter(log_dir(settings), settings.tap_segment_bytes)
        self.epoch = 0
        self.expected = 1
        self.received = 0
        self.duplicates = 0
        self.lost = 0                     # messages the relay announced as dropped
        self.gap_requests = 0
        self.acks = 0
        self.last_recv = 0.0
        self.started_at = time.time()
        self.error: BaseException | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._ctx: zmq.Context | None = None

    def start(self) -> "Tap":
        self.writer.open()
        self.epoch, self.expected = self.writer.resume_epoch, self.writer.resume_cseq + 1
        for note in self.writer.repairs:
            log.warning("audit log repaired at start-up: %s", note)
        log.info("audit log at seq %d; resuming capture after epoch %x cseq %d",
                 self.writer.last_seq, self.epoch, self.expected - 1)
        self._thread = threading.Thread(target=self._run, name="tap", daemon=True)
        self._thread.start()
        return self

    def close(self) -> None:
        self._stop.set()
        if self._thread:
            self._thread.join(5)
        self.writer.close()

    def info(self) -> dict:
        w = self.writer
        return {"seq": w.last_seq, "synced_seq": w.synced_seq,
                "segment": w.segment.name if w.segment else "", "epoch": self.epoch,
                "cseq": self.expected - 1, "received": self.received,
                "duplicates": self.duplicates, "capture_lost": self.lost,
                "gap_requests": self.gap_requests, "fsyncs": w.fsyncs,
                "bytes_written": w.bytes_written, "repairs": len(w.repairs),
                "idle_s": round(time.time() - self.last_recv, 2) if self.last_recv else None,
                "error": str(self.error) if self.error else None}

    # -- the loop -------------------------------------------------------------------------------
    def _run(self) -> None:
        self._ctx = zmq.Context()
        sock = self._ctx.socket(zmq.DEALER)
        sock.setsockopt(zmq.LINGER, 0)
        sock.setsockopt(zmq.RCVHWM, 64)
        sock.setsockopt(zmq.RECONNECT_IVL, 100)
        sock.setsockopt(zmq.RECONNECT_IVL_MAX, 1000)
        endpoint = self.settings.endpoint("capture")
        if curve.is_tcp(endpoint):
            curve.apply_client(sock, self.settings)
        sock.connect(endpoint)
        interval = self.settings.tap_fsync_interval_s
        unsynced_since: float | None = None
        asked_at = 0.0
        asked_for = -1
        last_heard = time.monotonic()
        sock.send_multipart([FROM, POS.pack(self.epoch, self.expected - 1)])
        # off every task's path: take the relay's batches in bursts (the relay stamps receive
        # times, so the log's times are the proxy's whatever the pace here)
        gather = Gather(self.settings.observer_gather_ms / 1000)
        try:
            while not self._stop.is_set():
                now = time.monotonic()
                timeout = IDLE_RESYNC_S
                if unsynced_since is not None:
                    timeout = max(0.0, unsynced_since + interval - now)
                if sock.poll(int(timeout * 1000) + 1):
                    gather.before_drain()
                    gather.after_drain(True)
                    for _ in range(64):
                        try:
                            frames = sock.recv_multipart(zmq.NOBLOCK)
                        except zmq.Again:
                            gather.after_drain(False)
                            break
                        need = self._handle(frames)
                        if need is not None and (need != asked_for or now - asked_at > 1.0):
                            sock.send_multipart([FROM, POS.pack(self.epoch, need)])
                            self.gap_requests += 1
                            asked_for, asked_at = need, now
                    self.writer.flush()
                    last_heard = time.monotonic()
                    if unsynced_since is None and self.writer.last_seq != self.writer.synced_seq:
                        unsynced_since = last_heard
                now = time.monotonic()
                if unsynced_since is not None and now >= unsynced_since + interval:
                    self.writer.sync()
                    unsynced_since = None
                    sock.send_multipart([ACK, POS.pack(self.writer.resume_epoch,
                                                       self.writer.resume_cseq)])
                    self.acks += 1
                if now - last_heard >= IDLE_RESYNC_S:
                    sock.send_multipart([FROM, POS.pack(self.epoch, self.expected - 1)])
                    last_heard = now
        except Exception as exc:  # a disk error: stop loudly, supervisord restarts us
            self.error = exc
            log.exception("tap failed; stopping the process so supervisord restarts it")
        finally:
            try:
                self.writer.sync()
            except Exception:
                log.exception("final sync failed")
            sock.close(0)
            self._ctx.term()
            if self.error is not None:
                os.kill(os.getpid(), signal.SIGTERM)

    def _handle(self, frames: list[bytes]) -> int | None:
        """Write what a relay message carries; returns a cseq to resume after on a gap."""
        kind = frames[0] if frames else b""
        if kind == DATA and len(frames) >= 3 and len(frames[1]) == BATCH_HEAD.size:
            epoch, count = BATCH_HEAD.unpack(frames[1])
            meta = frames[2]
            if len(frames) != 3 + 2 * count or len(meta) != count * ITEM.size:
                log.warning("malformed capture batch ignored")
                return None
            if epoch != self.epoch:
                self._new_epoch(epoch)
            append = self.writer.append
            now = time.time()
            self.last_recv = now
            for i, (cseq, ts, rkind) in enumerate(ITEM.iter_unpack(meta)):
                if cseq < self.expected:
                    self.duplicates += 1
                    continue
                if cseq > self.expected:
                    return self.expected - 1  # a transport gap: ask again from what we have
                append(rkind, ts, frames[3 + 2 * i], frames[4 + 2 * i], epoch, cseq)
                self.expected = cseq + 1
                self.received += 1
            return None
        if kind == LOST and len(frames) == 2 and len(frames[1]) == LOST_RANGE.size:
            epoch, first, last = LOST_RANGE.unpack(frames[1])
            if epoch != self.epoch:
                self._new_epoch(epoch)
            if last >= self.expected:
                first = max(first, self.expected)
                note = {"epoch": epoch, "first_cseq": first, "last_cseq": last,
                        "count": last - first + 1,
                        "reason": "capture buffer bound exceeded while the tap was behind"}
                self.writer.append(GAP, time.time(), b"", pack(note), epoch, last)
                self.lost += last - first + 1
                self.expected = last + 1
                log.error("capture lost %d message(s) (epoch %x cseq %d-%d); recorded as a gap",
                          last - first + 1, epoch, first, last)
            return None
        log.warning("unexpected frame from the capture relay ignored (%r)", kind[:8])
        return None

    def _new_epoch(self, epoch: int) -> None:
        if self.epoch:
            log.info("capture relay restarted (epoch %x -> %x)", self.epoch, epoch)
        self.epoch = epoch
        self.expected = 1


def setup(client: BusClient, settings: Settings) -> Tap:
    tap = Tap(settings).start()
    client.heartbeat_info = tap.info
    return tap


def main() -> int:
    return run_role("tap", setup)


if __name__ == "__main__":
    raise SystemExit(main())
