"""The capture link from the bus proxy to the tap: exactly once into the audit log (DESIGN §4, §8).
The producer half and the wire below are the proxy's own interface; auditor/tap.py consumes it.

Plain PUSH/PULL from the proxy to the tap loses whatever sits in a killed tap's receive buffer, and
duplicates nothing but also proves nothing. So the proxy's capture socket feeds a relay thread in the
bus process (`CaptureRelay`) that numbers every captured message (`epoch`, `cseq`) and keeps it in a
bounded replay buffer until the tap acknowledges it as fsynced:

    proxy capture ──inproc PUSH/PULL──▶ CaptureRelay ══ROUTER ⇄ DEALER (capture endpoint)══▶ tap

relay → tap   DATA  [b"D", (epoch u64, n u32), n × (cseq u64, recv_ts f64, kind u8), topic, payload, …]
              LOST  [b"L", (epoch, first, last)]  cseqs the relay had to drop (buffer bound)
tap → relay   ACK   [b"A", (epoch, cseq)]  everything up to cseq is durable in the log: forget it
              FROM  [b"F", (epoch, cseq)]  I have up to cseq: (re)send from cseq + 1 (start-up,
                                           after a transport gap, and every second while idle, so
                                           a restarted relay learns about the tap)

The tap writes each record with its (epoch, cseq), resumes from the last one in the log, and drops
any cseq it already has, so a tap SIGKILLed at any instant neither loses nor duplicates a message.
`epoch` is random per bus process: a restarted proxy starts a new numbering (its predecessor's
unacknowledged messages died with it, like everything else in flight in that process).

The buffer is bounded (`tap_replay_bytes`); beyond it the oldest messages are dropped, counted, and
announced to the tap, which writes a GAP record — loss is never silent. Subscription changes the
proxy sees are captured too (kind SUB) and tracked for `artoo tap stats`.
"""
from __future__ import annotations

import logging
import secrets
import struct
import threading
import time
from collections import deque
from typing import Callable

import zmq

from protocol.envelope import pack
from protocol.settings import Settings
from protocol.signing import Signer, signer_for

log = logging.getLogger("artoo.capture")

CAPTURE_INPROC = "inproc://artoo-capture"
# what a captured item is (the tap keeps the kind in each audit log record)
MSG = 0       # a bus message: topic frame + raw envelope bytes
RAW = 1       # a captured message that is not a (validly signed) message: payload = msgpack frames
SUB = 2       # a subscription change seen by the proxy (payload = the subscription frame)
DATA, LOST, ACK, FROM = b"D", b"L", b"A", b"F"
POS = struct.Struct("<QQ")                  # epoch, cseq
LOST_RANGE = struct.Struct("<QQQ")          # epoch, first, last
BATCH_HEAD = struct.Struct("<QI")           # epoch, item count
ITEM = struct.Struct("<QdB")                # cseq, recv_ts, kind
BATCH_ITEMS = 512
BATCH_BYTES = 1 << 20
WINDOW = 50_000                             # sent but unacknowledged messages at most
_ITEM_OVERHEAD = 120                        # rough Python object cost per buffered message


def classify(frames: list[bytes], signer: Signer | None = None) -> tuple[int, bytes, bytes]:
    """(kind, topic, payload) of one captured multipart message.

    With signing on, a message is `[topic, payload, mac]` and only one whose MAC checks out is
    logged as MSG (topic and payload, as before); an unsigned or forged one — which every receiver
    refuses — is logged as RAW, all its frames kept as evidence."""
    if signer is None:
        if len(frames) == 2:
            return MSG, frames[0], frames[1]
    elif len(frames) == 3 and signer.verify(frames[0], frames[1], frames[2]):
        return MSG, frames[0], frames[1]
    if len(frames) == 1 and frames[0][:1] in (b"\x00", b"\x01"):
        return SUB, b"", frames[0]
    return RAW, frames[0][:1024] if frames else b"", pack(list(frames))


class CaptureRelay:
    """Bus-process side: number, buffer and replay captured messages until the tap has them."""

    def __init__(self, ctx: zmq.Context, settings: Settings,
                 bind: Callable[[zmq.Socket, str], None], source: str = CAPTURE_INPROC):
        """`bind(socket, "capture")` is the proxy's own endpoint binder (stale ipc files, mode
        0600, CURVE on tcp://), so the capture endpoint is served exactly like the others."""
        self.ctx = ctx
        self.bind = bind
        self.settings = settings
        self.source = source
        self.signer = signer_for(settings)
        self.epoch = secrets.randbits(63) or 1
        self.next_cseq = 1
        self.acked = 0
        self.cursor = 1                       # the cseq the current tap expects next
        self.unsent: deque = deque()          # (cseq, ts, kind, topic, payload)
        self.inflight: deque = deque()
        self.buffered_bytes = 0
        self.dropped = 0
        self.unreplayable = 0
        self.tap: bytes | None = None
        self.tap_connections = 0
        self.last_tap_contact = 0.0
        self.captured = {"msg": 0, "raw": 0, "sub": 0}
        self.subscriptions: dict[str, int] = {}
        self.resends = 0                      # sent but unacknowledged when a tap went away
        self._stop = threading.Event()
        self._drain_s = 0.0
        self._thread: threading.Thread | None = None
        self._ready = threading.Event()
        self.error: BaseException | None = None

    # -- lifecycle ------------------------------------------------------------------------------
    def start(self) -> "CaptureRelay":
        self._thread = threading.Thread(target=self._run, name="capture-relay", daemon=True)
        self._thread.start()
        self._ready.wait(5)
        if self.error:
            raise self.error
        return self

    def stop(self, drain_s: float = 1.0) -> None:
        """Stop; first give a connected tap up to drain_s to acknowledge what is buffered."""
        self._drain_s = drain_s
        self._stop.set()
        if self._thread:
            self._thread.join(drain_s + 3)

    def stats(self, subscriptions: bool = False) -> dict:
        """Counters (cheap: part of every bus heartbeat); the subscription list on request."""
        out = {
            "epoch": self.epoch, "captured": self.next_cseq - 1, "acked": self.acked,
            "buffered": len(self.unsent) + len(self.inflight), "inflight": len(self.inflight),
            "buffered_bytes": self.buffered_bytes, "dropped": self.dropped,
            "unreplayable": self.unreplayable,
            "tap_connected": self.tap is not None, "tap_connections": self.tap_connections,
            "last_tap_contact_s": round(time.time() - self.last_tap_contact, 3)
            if self.last_tap_contact else None,
            "resends": self.resends, "by_kind": dict(self.captured),
            "subscription_count": len(self.subscriptions),
        }
        if subscriptions:
            out["subscriptions"] = sorted(dict(self.subscriptions))
        return out

    # -- the loop -------------------------------------------------------------------------------
    def _run(self) -> None:
        try:
            pull = self.ctx.socket(zmq.PULL)
            pull.setsockopt(zmq.RCVHWM, 0)
            pull.setsockopt(zmq.LINGER, 0)
            pull.connect(self.source)
            router = self.ctx.socket(zmq.ROUTER)
            router.setsockopt(zmq.ROUTER_MANDATORY, 1)
            router.setsockopt(zmq.SNDHWM, 64)
            router.setsockopt(zmq.LINGER, 0)
            self.bind(router, "capture")
        except Exception as exc:
            self.error = exc
            self._ready.set()
            return
        self._ready.set()
        poller = zmq.Poller()
        poller.register(pull, zmq.POLLIN)
        poller.register(router, zmq.POLLIN)
        stop_deadline = None
        failures = 0
        try:
            while True:
                if self._stop.is_set():
                    if stop_deadline is None:
                        stop_deadline = time.monotonic() + self._drain_s
                    if not self.unsent and not self.inflight or self.tap is None \
                            or time.monotonic() >= stop_deadline:
                        break
                try:
                    blocked = self.tap is not None and self.unsent
                    events = dict(poller.poll(5 if blocked or self._stop.is_set() else 200))
                    if pull in events:
                        self._take(pull)
                    if router in events:
                        self._control(router)
                    if self.tap is not None and self.unsent:
                        self._send(router)
                    self._bound()
                except zmq.ContextTerminated:
                    raise
                except Exception as exc:
                    # never die quietly: a dead relay would stop draining the proxy's capture
                    self.error = exc
                    failures += 1
                    if failures <= 5 or failures % 1000 == 0:
                        log.exception("capture relay error #%d (continuing)", failures)
                    self.tap = None       # the next FROM re-establishes a clean state
                    self.unsent.extendleft(reversed(self.inflight))
                    self.inflight.clear()
                    self._stop.wait(0.05)
        except zmq.ContextTerminated:
            pass
        finally:
            if self.unsent or self.inflight:
                log.warning("capture relay stopping with %d message(s) not acknowledged by the tap",
                            len(self.unsent) + len(self.inflight))
            pull.close(0)
            router.close(0)

    def _take(self, pull) -> None:
        now = time.time()
        for _ in range(5000):
            try:
                frames = pull.recv_multipart(zmq.NOBLOCK)
            except zmq.Again:
                return
            kind, topic, payload = classify(frames, self.signer)
            if kind == SUB:
                self._track_subscription(payload)
                self.captured["sub"] += 1
            else:
                self.captured["msg" if kind == MSG else "raw"] += 1
            cseq = self.next_cseq
            self.next_cseq += 1
            self.unsent.append((cseq, now, kind, topic, payload))
            self.buffered_bytes += len(topic) + len(payload) + _ITEM_OVERHEAD

    def _track_subscription(self, frame: bytes) -> None:
        prefix = frame[1:].decode("utf-8", "replace")
        if frame[:1] == b"\x01":
            self.subscriptions[prefix] = self.subscriptions.get(prefix, 0) + 1
        elif prefix in self.subscriptions:
            self.subscriptions[prefix] -= 1
            if self.subscriptions[prefix] <= 0:
                del self.subscriptions[prefix]

    def _control(self, router) -> None:
        for _ in range(100):
            try:
                frames = router.recv_multipart(zmq.NOBLOCK)
            except zmq.Again:
                return
            if len(frames) != 3 or len(frames[2]) != POS.size or frames[1] not in (ACK, FROM):
                continue  # not our protocol: ignore rather than crash the bus process
            ident, kind = frames[0], frames[1]
            epoch, cseq = POS.unpack(frames[2])
            self.last_tap_contact = time.time()
            if epoch == self.epoch:
                self._trim(cseq)
            if kind == FROM or ident != self.tap:
                if ident != self.tap:
                    self.tap_connections += 1
                    log.info("tap connected (resuming after epoch %x cseq %d)", epoch, cseq)
                self.tap = ident
                if self.inflight:
                    self.resends += len(self.inflight)
                self.unsent.extendleft(reversed(self.inflight))
                self.inflight.clear()
                self.cursor = cseq + 1 if epoch == self.epoch else 1

    def _trim(self, cseq: int) -> None:
        if cseq > self.acked:
            self.acked = min(cseq, self.next_cseq - 1)
        for queue_ in (self.inflight, self.unsent):
            while queue_ and queue_[0][0] <= cseq:
                item = queue_.popleft()
                self.buffered_bytes -= len(item[3]) + len(item[4]) + _ITEM_OVERHEAD

    def _send(self, router) -> None:
        tap = self.tap
        while self.unsent and len(self.inflight) < WINDOW:
            first = self.unsent[0][0]
            try:
                if first > self.cursor:
                    router.send_multipart([tap, LOST, LOST_RANGE.pack(self.epoch, self.cursor,
                                                                      first - 1)], zmq.NOBLOCK)
                    self.cursor = first
                items, frames, size = [], [], 0
                while self.unsent and len(items) < BATCH_ITEMS and size < BATCH_BYTES:
                    item = self.unsent.popleft()
                    items.append(item)
                    frames.append(item[3])
                    frames.append(item[4])
                    size += len(item[3]) + len(item[4])
                meta = b"".join(ITEM.pack(c, ts, k) for c, ts, k, _t, _p in items)
                try:
                    router.send_multipart([tap, DATA, BATCH_HEAD.pack(self.epoch, len(items)),
                                           meta, *frames], zmq.NOBLOCK)
                except zmq.ZMQError:
                    self.unsent.extendleft(reversed(items))
                    raise
                self.inflight.extend(items)
                self.cursor = items[-1][0] + 1
            except zmq.Again:
                return  # the tap is busy: try again on the next turn
            except zmq.ZMQError as exc:
                if exc.errno == zmq.EHOSTUNREACH:
                    log.warning("tap disconnected; buffering until it is back")
                    self.tap = None
                    self.resends += len(self.inflight)
                    self.unsent.extendleft(reversed(self.inflight))
                    self.inflight.clear()
                    return
                raise

    def _bound(self) -> None:
        limit = self.settings.tap_replay_bytes
        if self.buffered_bytes <= limit:
            return
        dropped_before = self.dropped
        while self.buffered_bytes > limit and (self.inflight or self.unsent):
            # An in-flight item already reached the tap: it will be logged, it just can no longer
            # be replayed (if the tap dies first, the FROM/LOST exchange announces it). Only unsent
            # items are lost outright; each of those is announced in a LOST notice -> GAP record.
            if self.inflight:
                item = self.inflight.popleft()
                self.unreplayable += 1
            else:
                item = self.unsent.popleft()
                self.dropped += 1
            self.buffered_bytes -= len(item[3]) + len(item[4]) + _ITEM_OVERHEAD
        if self.dropped > dropped_before:
            log.error("capture buffer full (%d bytes): dropped %d oldest message(s) the tap has not "
                      "received; the tap records the gap", limit, self.dropped - dropped_before)
