"""Each requesting thread's own reply socket (BusClient.request).

Why: a reply used to reach the loop thread's SUB socket, and the loop thread handed it on to the
thread waiting in `request()` — one more thread woken for every round trip, and where idle vCPUs
halt (a KVM guest, docs/BENCHMARKS.md) every wake-up costs a VM exit; the loop thread, woken
for a frame that was not its own work, then also contended for the GIL with the thread it had
just woken. Instead a thread that makes requests gets a SUB socket of its own on the proxy,
subscribed to a reply address of its own, `@<node>~<k>/`, which its requests name as their
`reply_to`: the replier sends there as to any node, and the waiting thread takes the reply off its
socket itself. The address is proven live by a probe through the proxy (as `start()` proves the
client's own) before the first request goes out, so no reply is sent before anyone hears it.

A channel is used only by the thread it belongs to (ZeroMQ sockets are not thread-safe), under
its lock; the loop thread closes every channel (taking each lock) before it terminates the context.
The wait polls the socket and the client's stop eventfd, so `stop()` ends a wait at once.
"""
from __future__ import annotations

import secrets
import threading
import time
from typing import TYPE_CHECKING, Any, Optional

import zmq

from .. import accel, curve
from ..envelope import Envelope, ProtocolError, parse_body
from .common import BusTimeout

if TYPE_CHECKING:
    from .client import BusClient

_FIRST_PROBE_S = 0.001   # the first probe races the subscription: re-probe soon, then back off
_MAX_PROBE_S = 0.1
_STOPPED = "bus client stopped"


class ReplyChannel:
    """One thread's reply socket and address (used by that thread alone, under `lock`)."""

    def __init__(self, client: "BusClient", name: str):
        s = client.settings
        self.client = client
        self.name = name                         # the requests' reply_to
        self.lock = threading.Lock()
        self.received = 0
        self.closed = False
        sock = client._ctx.socket(zmq.SUB)
        try:
            sock.setsockopt(zmq.LINGER, 0)
            sock.setsockopt(zmq.RECONNECT_IVL, 50)
            sock.setsockopt(zmq.RECONNECT_IVL_MAX, 1000)
            sock.setsockopt(zmq.RCVHWM, s.hwm)
            if curve.is_tcp(s.endpoint("xpub")):
                curve.apply_client(sock, s)
            sock.connect(s.endpoint("xpub"))
            sock.setsockopt(zmq.SUBSCRIBE, f"@{name}/".encode())
        except BaseException:
            sock.close(0)         # an open socket would keep the context from terminating
            raise
        self.sock = sock
        self._recv = accel.receiver(sock)
        self._items = [(sock, zmq.POLLIN), (client._stop_fd, zmq.POLLIN)]

    def prove(self, timeout_s: float) -> None:
        """Return once a probe sent to this address comes back through the proxy: the
        subscription is live at every publisher (the proxy forwards it before the probe)."""
        nonce = secrets.token_hex(8)
        deadline = time.monotonic() + timeout_s
        interval = _FIRST_PROBE_S
        while True:
            self.client._send_probe(self.name, nonce)
            got = self._wait(lambda env: env.type == "Hello" and env.body.get("nonce") == nonce,
                             min(interval, max(0.0, deadline - time.monotonic())))
            if got is not None:
                return
            if time.monotonic() >= deadline:
                raise BusTimeout(f"{self.client.node}: reply address {self.name} not live "
                                 f"after {timeout_s}s")
            interval = min(interval * 2, _MAX_PROBE_S)

    def wait_reply(self, request_id: str, timeout_s: float) -> Optional[tuple[Envelope, Any]]:
        """The reply to `request_id` (envelope, validated body), or None after `timeout_s`.
        Anything else on the address — the late reply to an earlier request of this thread, a
        second copy of one — is dropped; a frame that fails its checks is counted as rejected."""
        got = self._wait(lambda env: env.corr == request_id and env.type != "Hello", timeout_s)
        if got is None:
            return None
        try:
            return got, parse_body(got)
        except ProtocolError as exc:
            self.client._reject(exc)
            return None

    def _wait(self, wanted, timeout_s: float) -> Optional[Envelope]:
        client = self.client
        deadline = time.monotonic() + timeout_s
        recv, items = self._recv, self._items
        while True:
            frames = recv()
            if frames is None:
                left = deadline - time.monotonic()
                if left <= 0:
                    return None
                ready = zmq.zmq_poll(items, max(1, int(left * 1000 + 0.999)))
                if client._stop.is_set() or any(item[0] is not self.sock for item in ready):
                    raise BusTimeout(_STOPPED)
                continue
            self.received += 1
            env = client._check_frames(frames)
            if env is not None and wanted(env):
                return env

    def close(self) -> None:
        with self.lock:             # waits for a request in progress (stop() ends its wait)
            if not self.closed:
                self.closed = True
                self.sock.close(0)


class ReplyChannels:
    """A client's reply channels, one per requesting thread (by thread id: a new thread that
    gets a dead one's id takes over its channel, which nobody else can be using)."""

    def __init__(self, client: "BusClient"):
        self.client = client
        self._by_thread: dict[int, ReplyChannel] = {}
        self._lock = threading.Lock()
        self._count = 0
        self._retired_received = 0    # frames taken by channels closed since
        self.closed = False

    def mine(self, timeout_s: float) -> ReplyChannel:
        """The calling thread's channel, opened and proven on its first request (within
        `timeout_s`: the request's own time-out; a channel not proven in time is closed, and
        the thread's next request tries again)."""
        ident = threading.get_ident()
        channel = self._by_thread.get(ident)
        if channel is not None:
            return channel
        client = self.client
        with self._lock:
            if self.closed or not client._pub_live or client._stop.is_set():
                raise BusTimeout(_STOPPED)
            self._forget_dead_threads()
            self._count += 1
            channel = ReplyChannel(client, f"{client.node}~{self._count}")
            self._by_thread[ident] = channel
        try:
            with channel.lock:   # close_all may close it meanwhile: then the client stopped
                if channel.closed:
                    raise BusTimeout(_STOPPED)
                channel.prove(min(timeout_s, client.settings.ready_timeout_s))
        except BaseException:
            with self._lock:
                if self._by_thread.get(ident) is channel:
                    del self._by_thread[ident]
                    self._retire(channel)
            raise
        return channel

    def _forget_dead_threads(self) -> None:
        """Close the channels of threads that have ended (under the lock): a client that serves
        requests from short-lived threads keeps one socket per live thread, not per thread ever."""
        if len(self._by_thread) < 16:
            return
        alive = {t.ident for t in threading.enumerate()}
        for ident in [i for i in self._by_thread if i not in alive]:
            self._retire(self._by_thread.pop(ident))

    def _retire(self, channel: ReplyChannel) -> None:
        channel.close()
        self._retired_received += channel.received

    def received(self) -> int:
        """Frames taken by the channels, closed ones included (the client's `received`)."""
        return self._retired_received + sum(ch.received for ch in list(self._by_thread.values()))

    def close_all(self) -> None:
        """Close every channel (the loop thread, before it terminates the context)."""
        with self._lock:
            self.closed = True
            channels = list(self._by_thread.values())
            self._by_thread.clear()
            for channel in channels:
                self._retire(channel)
