"""BusClient: registration, lifecycle, sending and the loop thread (receiving: inbound.py)."""
from __future__ import annotations

import itertools
import logging
import os
import queue
import secrets
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Callable

import zmq

from .. import accel, curve, fastpath, routes, signing, tracecontext
from ..envelope import (LIVE_KEYS, NO_TASK, PROTOCOL_VERSION, Envelope, ProtocolError, decode,
                        topic_for)
from ..messages import Body, Heartbeat, MESSAGE_TYPES
from ..settings import Settings, load_settings
from .common import (ALL, LRU_CAP, BusTimeout, Gather, Handler, Lru, Pending, ReplyCache,
                     SeenSet, Subscription)
from .cpulatency import QUIET, CpuLatency
from .inbound import Inbound
from .outbound import ENCODE, Outbound
from .membership import Membership
from .outbox import Outbox
from .replies import ReplyChannels

log = logging.getLogger("artoo.bus")

_FIRST_REPROBE_S = 0.001  # the first probe usually races the connect: the next comes soon
_CLOSE_LINGER_MS = 1000  # on stop, queued outgoing messages get this long to reach the proxy
_DIRECT = frozenset(("pub", "work", "reply"))  # items any thread may send itself (PUB lock)
# The loop sleeps until its next deadline (a timer, the heartbeat, a re-send); with none due it
# still wakes this often. Polling every 50 ms instead cost an idle daemon ~35 core-ms/s.
IDLE_WAIT_MS = 1000.0
_FLAT = fastpath.flat_types()   # bodies that are the model's own __dict__ (fastpath.py)


def _signal(fd: int) -> None:
    """Make an eventfd readable (-1: closed already, nothing to wake)."""
    if fd >= 0:
        try:
            os.eventfd_write(fd, 1)
        except OSError:
            pass


class BusClient(Inbound, Outbound):
    """A process's connection to the artoo bus (threading model: the protocol.bus docstring)."""

    def __init__(self, role: str, *, instance: int = 0, instances: int = 1,
                 settings: Settings | None = None, node: str | None = None,
                 heartbeat: bool = True, version: str = "", outbox: Path | None = None):
        self.role = role
        self.instance = instance
        self.instances = max(1, instances)
        self.settings = settings or load_settings()
        # HMAC signer of every frame sent and check of every frame received (None: signing off)
        self._signer = signing.signer_for(self.settings)
        s = self.settings
        self._max_age = (max(s.bus_max_age_s, s.ack_give_up_s + 60.0)
                         if self._signer is not None and s.bus_max_age_s > 0 else 0.0)
        self.node = node or f"{role}-{instance}-{os.getpid()}-{secrets.token_hex(2)}"
        self.version = version
        self.heartbeat_enabled = heartbeat
        self.heartbeat_info: Callable[[], dict] = lambda: {}
        self.state = "starting"
        self.started_at = time.time()
        # trace context propagation (protocol/tracecontext.py): off unless telemetry turns it on
        self.tracing = False

        self._subs: list[Subscription] = []
        self._by_type: dict[str, list[Subscription]] = {}
        self._wildcard: list[Subscription] = []
        self._full_streams: set[bytes] = set()
        self._all_subscribed = False
        self._my_prefix = f"@{self.node}/".encode()

        self._seq: dict[bytes, int] = {}
        self._topics: dict[tuple, bytes] = {}   # (type, task, node) -> topic (publish's)
        self._last_seq: dict[tuple[str, bytes], int] = {}   # (sender node, stream) -> last seq
        self.gaps: Counter[str] = Counter()
        self.rejected: Counter[str] = Counter()
        self.duplicates = 0                 # byte-identical frames seen again (re-sends, replays)
        self.handler_errors = 0
        self.deferred = 0                   # work messages a handler left unacknowledged (DEFER)
        self.busy: Counter[str] = Counter()  # task -> acknowledged messages being handled now
        self.received = 0
        self.sent = 0
        self.lost = 0

        self._pending: dict[str, Pending] = {}
        # unacked work messages on disk too, re-sent by a restarted instance (protocol/bus/outbox.py)
        self._outbox = Outbox(outbox) if outbox is not None else None
        self._seen: Lru = Lru(self.settings.dedup_capacity)       # msg id -> "running"/"done"
        self._delivered = SeenSet(LRU_CAP)                       # MACs of frames dispatched
        self._replies = ReplyCache(self.settings.reply_keep_s)   # request id -> reply frames
        self._answering: set[str] = set()                          # request ids being handled
        self._channels = ReplyChannels(self)   # each requesting thread's reply socket
        self._timers: list[list] = []                               # [next_at, interval, fn]
        self._in_flight = 0
        self._in_flight_lock = threading.Lock()
        # idle CPUs kept polling while this process has work (ARTOO_CPU_LATENCY, cpulatency.py)
        self.cpu = CpuLatency(s.cpu_latency, s.cpu_latency_linger_s)
        self._cpu_touch = self.cpu.touch if self.cpu.enabled else None
        # an observer process sets this to take messages in bursts (common.Gather); None: at once
        self.gather: Gather | None = None

        self._outq: queue.SimpleQueue = queue.SimpleQueue()
        self._batch: list[tuple[bytes, dict]] = []  # acks + heartbeat, sent at a wake-up's end
        self._wake_fd = -1                  # an eventfd from start() until stop()
        self._stop_fd = -1                  # another, written once on stop: ends reply waits
        self._wake_pending = False          # coalesces wake-ups: one eventfd write per drain
        self._send_lock = threading.Lock()  # guards the PUB socket, _seq and _pending inserts
        self._pub_live = False              # PUB socket connected and not yet closed
        # the sockets' frame I/O (protocol/accel.py), set on connect; the sender is only called
        # under the send lock with _pub_live set, which is cleared before the socket closes
        self._send_raw: Callable[[list[bytes]], None] | None = None
        self._recv_raw: Callable[[], list[bytes] | None] | None = None
        self._pack: Callable[..., bytes] | None = None   # C envelope writer (None: the wire map)
        # Message ids: a random per-client prefix plus a counter; unique without a syscall each.
        self._id_prefix = secrets.token_hex(8)
        self._id_counter = itertools.count(1)
        self._ctx: zmq.Context | None = None
        self._pub = self._sub = None
        self._thread: threading.Thread | None = None
        self._pool: ThreadPoolExecutor | None = None
        self._stop = threading.Event()
        self._stopped = threading.Event()
        self._ready = threading.Event()
        self._hello_nonce = ""
        self._hello_interval = _FIRST_REPROBE_S  # re-probe backoff: 1 ms doubling to 100 ms
        self._start_error: BaseException | None = None
        self._log_budget: Counter[str] = Counter()
        # Liveness of the other instances of this role, for task ownership (membership.py)
        self.membership = Membership(role, instance, self.instances, self.node,
                                     self.settings.missing_after_s,
                                     self.settings.missing_after_s + self.settings.ack_max_backoff_s)
        if self.instances > 1:
            self.on("Heartbeat", self.membership.on_heartbeat, task=role)

    # -- registration ------------------------------------------------------------------------
    def on(self, type_name: str, fn: Handler, *, ack: bool | str = False, partition: bool = False,
           threaded: bool = False, request: bool = False, task: str | None = None,
           when: Callable[[Envelope, Any], bool] | None = None, raw: bool = False,
           every_copy: bool = False, directed: bool = False, prove: bool = True) -> None:
        """Handle messages of `type_name` ("*" = all). Register before start(), or the call
        blocks until the new subscription is proven live by a fresh handshake.

        `ack=True`: this process is a consumer (de-duplicate, acknowledge as its role); a role name
        acknowledges as that role: a process that stands in for another consumer (the scheduler
        acks the FinalResult of the runs it started as `user`, the role GGS waits for).
        `every_copy`: an idempotent observer also sees re-sent copies (with signing on, a
        non-acknowledging handler otherwise gets a byte-identical frame once).
        `directed`: only the copies sent to this process (`publish(node=...)`), which need no
        subscription of their own (the node's, live since start) and so no handshake.
        `prove=False`: registered after start, no handshake either — for an acknowledged message
        (re-sent until acked), where a first copy missed in the race costs a re-send only."""
        if type_name != ALL and type_name not in MESSAGE_TYPES:
            raise ValueError(f"unknown message type {type_name!r}")
        sub = Subscription(type_name, fn, ack, partition, threaded, request, task, when, raw,
                           every_copy, directed)
        self._subs.append(sub)
        if type_name == ALL:
            self._wildcard.append(sub)
        else:
            self._by_type.setdefault(type_name, []).append(sub)
        if self._ready.is_set() and not directed:
            self._call_in_loop(lambda: self._subscribe(sub))
            if prove:
                self.handshake()

    def add_timer(self, interval_s: float, fn: Callable[[], None]) -> None:
        """Run fn on the loop thread every interval_s seconds."""
        entry = [time.monotonic() + interval_s, interval_s, fn]
        if self._ready.is_set():
            self._call_in_loop(lambda: self._timers.append(entry))
        else:
            self._timers.append(entry)

    # -- lifecycle ---------------------------------------------------------------------------
    def start(self, timeout: float | None = None) -> "BusClient":
        """Connect and return once the handshake proves the path through the proxy works."""
        timeout = timeout or self.settings.ready_timeout_s
        # what a predecessor left, read before this process writes entries of its own (a role's
        # resume sends before start: those are pending here already, not to be sent twice)
        left = self._outbox.load() if self._outbox is not None else []
        self._wake_fd = os.eventfd(0, os.EFD_NONBLOCK | os.EFD_CLOEXEC)
        self._stop_fd = os.eventfd(0, os.EFD_NONBLOCK | os.EFD_CLOEXEC)
        self._pool = ThreadPoolExecutor(self.settings.handler_threads,
                                        thread_name_prefix=f"{self.role}-h")
        self._thread = threading.Thread(target=self._loop_main, name=f"bus-{self.role}",
                                        daemon=True)
        self._thread.start()
        if not self._ready.wait(timeout) or self._start_error:
            self.stop()
            raise BusTimeout(f"{self.node}: not ready after {timeout}s "
                             f"({self._start_error or 'no echo from proxy'})")
        self.state = "running"
        self.membership.started = time.monotonic()   # peers not heard yet: alive for a while
        self._restore_outbox(left)
        return self

    def _restore_outbox(self, left: list) -> None:
        """Re-send what a killed predecessor left unacknowledged (same ids: consumers de-dup),
        unless it is older than the give-up time: its sender would have dropped it by now."""
        if self._outbox is None:
            return
        now = time.time()
        for topic, payload, consumers, written in left:
            msg_id = ""
            try:
                _, env = decode([topic, payload], self.settings.max_frame_bytes)
                msg_id = env.id
                if now - written > self.settings.ack_give_up_s:
                    raise ProtocolError("stale", f"persisted {now - written:.0f}s ago")
            except ProtocolError as exc:
                log.warning("%s: outbox entry %s not re-sent: %s", self.node, msg_id or "?", exc)
                if msg_id:
                    self._outbox.remove(msg_id)
                continue
            env.node, env.ts = self.node, now
            log.info("%s: re-sending %s %s left unacknowledged by a predecessor", self.node,
                     env.type, env.id)
            self._submit(("work", env, topic, (consumers, None)))

    def stop(self, drain_s: float = 0.0) -> None:
        """Stop the loop; with drain_s > 0 first wait for outstanding acks that long."""
        if drain_s > 0 and self._ready.is_set():
            deadline = time.monotonic() + drain_s
            while self._pending and time.monotonic() < deadline and not self._stopped.is_set():
                time.sleep(0.02)
        self.state = "stopping"
        self._stop.set()
        _signal(self._stop_fd)
        self._wake()
        if self._thread and self._thread is not threading.current_thread():
            self._thread.join(5)
        if self._stopped.is_set():  # closed only once nobody can poll them (channels closed)
            for name in ("_wake_fd", "_stop_fd"):
                fd = getattr(self, name)
                if fd >= 0:
                    setattr(self, name, -1)
                    os.close(fd)
        if self._pool:
            self._pool.shutdown(wait=False, cancel_futures=True)

    def wait_stopped(self, timeout: float | None = None) -> bool:
        return self._stopped.wait(timeout)

    @property
    def ready(self) -> bool:
        return self._ready.is_set() and not self._stop.is_set()

    # -- sending (any thread) ----------------------------------------------------------------
    def publish(self, msg: Body, *, task: str | None = None, to: str | None = None,
                node: str | None = None, corr: str | None = None, reply_to: str | None = None,
                trace: str | None = None, as_role: str | None = None,
                msg_id: str | None = None) -> str:
        """Fire-and-forget publish; returns the message id. `node` directs it to one process.
        `as_role`: a process hosting two roles (the effector: executor + agentval) speaks as one.
        `msg_id`: re-publish under an id chosen earlier (receivers de-dup by id)."""
        tname, body, task, trace = self._body(msg, task, trace)
        mid = msg_id or f"{self._id_prefix}{next(self._id_counter):x}"
        self._emit(tname, body, task, to, node, corr, reply_to, trace, as_role or self.role, mid)
        return mid

    def _emit(self, tname: str, body: dict, task: str, to, node, corr, reply_to, trace,
              sender: str, mid: str) -> list[bytes] | None:
        """Send one envelope from any thread; its frames (None: queued for the loop, not live)."""
        topic = self._topics.get((tname, task, node))
        if topic is None:             # kept per (type, task, node); a few hundred at most
            if len(self._topics) >= LIVE_KEYS:
                self._topics.clear()
            topic = self._topics[(tname, task, node)] = topic_for(tname, task, node)
        if self._pub_live and not self._stop.is_set():
            # the hot path: the envelope encoded under the send lock at once (no Envelope
            # object, no copy of a flat body, no hop through the loop thread)
            with self._send_lock:
                pack = self._pack
                if pack is not None:  # C: the envelope's msgpack written with no wire map
                    return self._send_payload_locked(topic, pack(
                        mid, time.time(), tname, sender, self.node, self._next_seq(topic), task,
                        to, corr, reply_to, trace, ENCODE(body)))
                return self._send_wire_locked(topic, {
                    "v": PROTOCOL_VERSION, "id": mid, "ts": time.time(), "type": tname,
                    "from": sender, "node": self.node, "seq": 0, "task": task, "to": to,
                    "corr": corr, "reply_to": reply_to, "trace": trace, "body": body})
        self._submit(("pub", Envelope(tname, dict(body), sender, self.node, 0, task, mid,
                                      time.time(), to, corr, reply_to, trace), topic, None))
        return None

    def new_id(self) -> str:
        return f"{self._id_prefix}{next(self._id_counter):x}"

    def send(self, msg: Body, *, task: str | None = None, to: str | None = None,
             consumers: tuple[str, ...] | None = None, node: str | None = None,
             on_done: Callable[[bool], None] | None = None, trace: str | None = None,
             as_role: str | None = None, msg_id: str | None = None) -> str:
        """Publish a work message and re-send it with backoff until every consumer role acks.

        `msg_id`: send under an id chosen earlier — a process that persisted the message (GGS's
        outbox) re-sends it after a restart under the same id, so consumers de-dup it."""
        tname = type(msg).__name__
        if consumers is None:
            consumers = (to,) if to else routes.consumers(tname, as_role or self.role)
        if not consumers:
            raise ValueError(f"{tname} from {as_role or self.role} has no consumer to acknowledge it")
        env = self._envelope(msg, task, to or (consumers[0] if len(consumers) == 1 else None),
                             None, None, trace, as_role, msg_id)
        self._submit(("work", env, topic_for(env.type, env.task, node),
                      (set(consumers), on_done)))
        return env.id

    def request(self, msg: Body, *, to: str, timeout: float | None = None,
                task: str | None = None) -> tuple[Envelope, Any]:
        """Request/reply by correlation id; re-sends with backoff until a reply or the timeout.
        The reply comes to this thread's own reply address and socket (protocol/bus/replies.py)."""
        if threading.current_thread() is self._thread:
            raise RuntimeError("request() would deadlock on the bus loop thread; use threaded=True")
        timeout = timeout or self.settings.request_timeout_s
        deadline = time.monotonic() + timeout
        channel = self._channels.mine(timeout)
        mid = self.new_id()
        wait = 0.5
        with channel.lock:
            if channel.closed:
                raise BusTimeout("bus client stopped")
            while True:   # each copy under the same id: the replier answers it once (dedup)
                self.publish(msg, task=task, to=to, reply_to=channel.name, msg_id=mid)
                remaining = deadline - time.monotonic()
                got = channel.wait_reply(mid, max(0.0, min(wait, remaining)))
                if got is not None:
                    return got
                if time.monotonic() >= deadline:
                    raise BusTimeout(f"no reply to {type(msg).__name__} from {to} within "
                                     f"{timeout}s")
                wait = min(wait * 2, 2.0)

    def reply(self, request_env: Envelope, msg: Body) -> None:
        """Answer a request (normally done for you by handlers registered with request=True)."""
        self._submit(("reply", request_env, msg, None))

    def handshake(self, timeout: float | None = None) -> None:
        """Block until a fresh probe comes back through the proxy (all subscriptions live)."""
        if threading.current_thread() is self._thread:
            raise RuntimeError("handshake() cannot run on the loop thread")
        done = threading.Event()
        self._submit(("hello", done, None, None))
        if not done.wait(timeout or self.settings.ready_timeout_s):
            raise BusTimeout(f"{self.node}: handshake timed out")

    # -- introspection -----------------------------------------------------------------------
    def stats(self) -> dict:
        return {
            "node": self.node, "role": self.role, "instance": self.instance,
            "received": self.received + self._channels.received(), "sent": self.sent, "rejected": dict(self.rejected),
            "gaps": dict(self.gaps), "unacked": len(self._pending), "lost": self.lost,
            "handler_errors": self.handler_errors, "in_flight": self._in_flight,
            "signed": self._signer is not None, "duplicates": self.duplicates,
            "deferred": self.deferred, "senders": len(self._last_seq),
            "cpu_latency": self.cpu.state,
        }

    def owns(self, task_id: str) -> bool:
        """This instance owns the task: first in its rendezvous ranking among the live instances
        of this role (protocol/bus/membership.py)."""
        return self.instances <= 1 or self.membership.owner(task_id) == self.instance

    def owner_of(self, task_id: str) -> int:
        return self.membership.owner(task_id)

    # -- internals: envelope and queue -------------------------------------------------------
    def _body(self, msg: Body, task: str | None, trace: str | None
              ) -> tuple[str, dict, str, str | None]:
        """(type name, body map, task, trace) of a message about to be sent. A flat body is the
        model's own `__dict__` (fastpath.py), not copied: a caller that keeps it copies it."""
        tname = type(msg).__name__
        if self._cpu_touch is not None and tname not in QUIET:
            self._cpu_touch()
        if tname in _FLAT:
            body = msg.__dict__
        elif tname in MESSAGE_TYPES:
            body = msg.__pydantic_serializer__.to_python(msg)  # = dump_body(msg)
        else:
            raise ValueError(f"{tname} is not a catalogue message type")
        if task is None:
            task = getattr(msg, "task_id", None) or getattr(msg, "parent_task_id", None) or NO_TASK
        if trace is None and self.tracing:
            trace = tracecontext.current(task)
        return tname, body, task, trace

    def _envelope(self, msg: Body, task, to, corr, reply_to, trace,
                  as_role: str | None = None, msg_id: str | None = None) -> Envelope:
        tname, body, task, trace = self._body(msg, task, trace)
        if body is msg.__dict__:
            body = dict(body)
        return Envelope(tname, body, as_role or self.role, self.node, 0, task,
                        msg_id or f"{self._id_prefix}{next(self._id_counter):x}", time.time(), to,
                        corr, reply_to, trace)

    def _submit(self, item: tuple) -> None:
        if self._stop.is_set():
            return
        if threading.current_thread() is self._thread:
            self._process_item(item)
        elif self._pub_live and item[0] in _DIRECT:
            self._process_item(item)
            if item[0] == "work":
                self._wake()   # the loop re-sends it unacknowledged: it must not sleep past that
        else:
            self._outq.put(item)
            self._wake()

    def _call_in_loop(self, fn: Callable[[], None]) -> None:
        self._submit(("call", fn, None, None))

    def _wake(self) -> None:
        # The loop clears the flag before it drains the queue, so an item put before a caller sees
        # the flag still set is always drained: at most one syscall per drain, none lost.
        if self._wake_pending:
            return
        self._wake_pending = True
        _signal(self._wake_fd)

    def _process_item(self, item: tuple) -> None:
        kind, a, b, c = item
        if kind == "pub":
            self._send_env(a, b)
        elif kind == "work":
            consumers, on_done = c
            now = time.monotonic()
            pending = Pending([], consumers, a.type, now, now + self.settings.ack_initial_s,
                               self.settings.ack_initial_s, on_done=on_done)
            frames = self._send_env(a, b, pending)  # registered before the send: the ack cannot win
            if self._outbox is not None:
                self._outbox.put(a.id, b, frames[1], consumers)
                if a.id not in self._pending:
                    # acked by every consumer while the file was being written (a handler thread
                    # sends, the loop thread takes the acks, and its removal found no file yet):
                    # left there, a restart would re-send a message its consumers finished with
                    self._outbox.remove(a.id)
        elif kind == "reply":
            self._send_reply(a, b)
        elif kind == "hello":
            self._hello_waiters.append(a)
            self._hello_interval = _FIRST_REPROBE_S
            self._send_hello()
        elif kind == "call":
            a()

    def _send_reply(self, req: Envelope, msg: Body) -> None:
        if not req.reply_to:
            return
        tname, body, task, trace = self._body(msg, req.task, req.trace)
        frames = self._emit(tname, body, task, req.sender, req.reply_to, req.id, None, trace,
                            self.role, self.new_id())
        if frames is not None:
            self._replies.put(req.id, frames)

    def _send_probe(self, name: str, nonce: str) -> None:
        """A probe to the address `name` (this node's own, or one of its reply channels), which
        comes back through the proxy once the subscription to it is live."""
        env = Envelope(type="Hello", body={"node": name, "nonce": nonce}, sender=self.role,
                       node=self.node, id=self.new_id(), ts=time.time(), to="self")
        self._send_env(env, topic_for("Hello", node=name))

    def _ack(self, env: Envelope, ok: bool = True, error: str | None = None,
             role: str | None = None) -> None:
        """Queue the ack of a handled work message (loop thread): the acks of one wake-up go out
        together at its end (_flush_batch), one lock for all, off the per-message path."""
        self._batch.append((topic_for("Ack", node=env.node), {
            "v": PROTOCOL_VERSION, "id": self.new_id(), "ts": time.time(), "type": "Ack",
            "from": role or self.role, "node": self.node, "seq": 0, "task": env.task,
            "to": env.sender, "corr": env.id, "reply_to": None, "trace": None,
            "body": {"ack_id": env.id, "ok": ok, "error": error}}))

    def _flush_batch(self) -> None:
        """Send the acks and the heartbeat queued during this wake-up of the loop."""
        batch = self._batch
        if batch:
            self._batch = []
            with self._send_lock:
                for topic, wire in batch:
                    self._send_wire_locked(topic, wire)

    def _send_hello(self) -> None:
        if not self._hello_nonce:
            self._hello_nonce = secrets.token_hex(8)
        self._send_probe(self.node, self._hello_nonce)

    def _note(self, reason: str, message: str) -> None:
        self._log_budget[reason] += 1
        n = self._log_budget[reason]
        if n <= 5 or n % 1000 == 0:
            log.warning("%s [%s #%d] %s", self.node, reason, n, message)

    # -- internals: the loop -----------------------------------------------------------------
    def _subscribe(self, sub: Subscription) -> None:
        if sub.directed:
            return                   # the node's own prefix brings it
        self._sub.setsockopt(zmq.SUBSCRIBE, sub.prefix)
        if sub.type_name == ALL:
            self._all_subscribed = True
        elif not sub.task:
            self._full_streams.add(sub.type_name.encode())

    def _connect(self) -> None:
        s = self.settings
        self._ctx = zmq.Context()
        self._pub = self._ctx.socket(zmq.PUB)
        self._sub = self._ctx.socket(zmq.SUB)
        for sock in (self._pub, self._sub):
            sock.setsockopt(zmq.LINGER, 0)
            sock.setsockopt(zmq.RECONNECT_IVL, 50)
            sock.setsockopt(zmq.RECONNECT_IVL_MAX, 1000)
        self._pub.setsockopt(zmq.SNDHWM, s.hwm)
        self._sub.setsockopt(zmq.RCVHWM, s.hwm)
        for sock, name in ((self._pub, "xsub"), (self._sub, "xpub")):
            if curve.is_tcp(s.endpoint(name)):
                curve.apply_client(sock, s)
            sock.connect(s.endpoint(name))
        for sub in self._subs:
            self._subscribe(sub)
        # Last: the proxy forwards one socket's subscriptions in order, so when the probe on this
        # prefix comes back, every subscription above is live at every publisher too.
        self._sub.setsockopt(zmq.SUBSCRIBE, self._my_prefix)
        self._send_raw = accel.sender(self._pub)
        self._recv_raw = accel.receiver(self._sub)
        self._pack = accel.envelope_packer()
        self._pub_live = True

    def _loop_main(self) -> None:
        self._hello_waiters: list[threading.Event] = []
        try:
            self._connect()
        except Exception as exc:  # e.g. CURVE keys missing: start() reports it
            self._start_error = exc
            if self._ctx is not None:
                self._ctx.destroy(linger=0)
            self._ready.set()
            self._stopped.set()
            return
        poller = zmq.Poller()
        poller.register(self._sub, zmq.POLLIN)
        poller.register(self._wake_fd, zmq.POLLIN)
        hb_next = 0.0
        hello_next = 0.0
        try:
            while not self._stop.is_set():
                now = time.monotonic()
                if not self._ready.is_set() or self._hello_waiters:
                    if now >= hello_next:  # re-probe: the first probes race the subscription
                        self._send_hello()
                        hello_next = now + self._hello_interval
                        self._hello_interval = min(self._hello_interval * 2, 0.1)
                    timeout_ms = max(1, int((hello_next - now) * 1000))
                else:
                    timeout_ms = self._run_timers(now)
                    if self.heartbeat_enabled and now >= hb_next:
                        self._publish_heartbeat()
                        hb_next = now + self.settings.heartbeat_interval_s
                    timeout_ms = min(timeout_ms,
                                     max(0, int((hb_next - now) * 1000)) if self.heartbeat_enabled
                                     else timeout_ms)
                    if self.cpu.held:   # released once idle: wake for that, not later
                        due = self.cpu.due_ms(now)
                        if due is not None:
                            timeout_ms = min(timeout_ms, int(due) + 1)
                self._flush_batch()    # the acks of the last wake-up, the heartbeat
                events = dict(poller.poll(timeout_ms))
                if self._sub in events:
                    gather = self.gather
                    if gather is not None:
                        gather.before_drain()
                    # drain the socket: every message already queued is handled in this wake-up
                    recv_frames, on_frames = self._recv_raw, self._on_frames
                    capped = True
                    for _ in range(1000):  # bounded batch keeps timers and the queue served
                        frames = recv_frames()
                        if frames is None:
                            capped = False
                            break
                        try:
                            on_frames(frames)
                        except Exception as exc:  # survive any input, whatever it trips over
                            self.rejected["internal"] += 1
                            log.exception("%s: frame handling failed: %s", self.node, exc)
                    if gather is not None:
                        gather.after_drain(capped)
                if self._wake_fd in events:
                    try:
                        os.eventfd_read(self._wake_fd)
                    except BlockingIOError:
                        pass
                self._wake_pending = False
                while True:
                    try:
                        item = self._outq.get_nowait()
                    except queue.Empty:
                        break
                    self._process_item(item)
                if self._pending and self._ready.is_set():
                    self._resend_due(time.monotonic())
        except Exception:  # a bug in the loop itself: exit loudly so supervisord restarts us
            log.exception("%s: bus loop crashed", self.node)
            self._start_error = RuntimeError("bus loop crashed")
            self._ready.set()
        finally:
            try:
                self._flush_batch()    # acks of the last wake-up still leave
            except Exception:
                pass
            self.cpu.close()
            _signal(self._stop_fd)
            self._channels.close_all()   # their sockets close before the context terminates
            self._stopped.set()
            with self._send_lock:
                self._pub_live = False
            try:
                # Messages published just before stop() still leave (an effector's last word).
                self._pub.close(linger=_CLOSE_LINGER_MS)
                self._sub.close(0)
                self._ctx.term()
            except Exception:
                pass

    def _run_timers(self, now: float) -> int:
        wait = IDLE_WAIT_MS
        for entry in self._timers:
            if now >= entry[0]:
                entry[0] = now + entry[1]
                try:
                    entry[2]()
                except Exception:
                    self.handler_errors += 1
                    log.exception("%s: timer failed", self.node)
            wait = min(wait, max(0.0, (entry[0] - now) * 1000))
        if self._pending:
            wait = min(wait, 20.0)
        return int(wait)

    def _publish_heartbeat(self) -> None:
        try:
            info = self.heartbeat_info() or {}
        except Exception as exc:
            info = {"error": str(exc)}
        hb = Heartbeat(role=self.role, instance=self.instance, node=self.node,
                       host=self.settings.host, pid=os.getpid(),
                       state=self.state, in_flight=self._in_flight, version=self.version,
                       started_at=self.started_at, uptime_s=time.time() - self.started_at,
                       gaps=dict(self.gaps.most_common(20)), rejected=dict(self.rejected),
                       received=self.received + self._channels.received(), sent=self.sent, unacked=len(self._pending),
                       lost=self.lost, info=info)
        tname, body, task, trace = self._body(hb, self.role, None)
        self._batch.append((topic_for("Heartbeat", task), {
            "v": PROTOCOL_VERSION, "id": self.new_id(), "ts": time.time(), "type": tname,
            "from": self.role, "node": self.node, "seq": 0, "task": task, "to": None,
            "corr": None, "reply_to": None, "trace": trace, "body": body}))

    def _resend_due(self, now: float) -> None:
        s = self.settings
        with self._send_lock:  # senders on other threads insert while we walk
            due = list(self._pending.items())
        for msg_id, p in due:
            if now < p.next_at:
                continue
            if now - p.first_sent > s.ack_give_up_s:
                self._pending.pop(msg_id, None)
                if self._outbox is not None:
                    self._outbox.remove(msg_id)
                self.lost += 1
                log.error("%s: %s %s never acknowledged by %s; giving up after %d sends",
                          self.node, p.type_name, msg_id, sorted(p.consumers - p.acked),
                          p.attempts)
                if p.on_done:
                    p.on_done(False)
                continue
            self._send_frames(p.frames)
            p.attempts += 1
            p.backoff = min(p.backoff * 2, s.ack_max_backoff_s)
            p.next_at = now + p.backoff
