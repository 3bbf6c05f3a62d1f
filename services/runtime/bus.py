"""The `bus` process: the XSUB/XPUB proxy every role talks through (DESIGN §4).

The forwarding loop is libzmq's steerable proxy (C, no Python on the hot path). Its capture socket
feeds the capture relay (capture.py), a thread that numbers every message and keeps it until
the tap has fsynced it, so the audit log gets each message exactly once even across tap restarts.
A small control thread serves `{"cmd": "stats"}` (the proxy's counters, with the relay's) and
`{"cmd": "capture"}` (relay counters and the current subscriptions) as JSON over REP.
"""
from __future__ import annotations

import fcntl
import json
import logging
import os
import signal
import struct
import threading
import time

import zmq

from protocol import curve
from protocol.bus import BusClient
from protocol.settings import Settings, load_settings, tcp_endpoint

from .capture import CAPTURE_INPROC, CaptureRelay
from .role import configure_logging, settle_heap

log = logging.getLogger("artoo.bus.proxy")
_COUNTERS = ("frontend_msgs_in", "frontend_bytes_in", "frontend_msgs_out", "frontend_bytes_out",
             "backend_msgs_in", "backend_bytes_in", "backend_msgs_out", "backend_bytes_out")


def _ipc_path(endpoint: str) -> str | None:
    return endpoint[len("ipc://"):] if endpoint.startswith("ipc://") else None


class Proxy:
    """The proxy with its capture and control sockets; run() blocks until stop()."""

    def __init__(self, settings: Settings, capture: bool = True):
        self.settings = settings
        self.capture_enabled = capture
        self.ctx = zmq.Context()
        self.started_at = time.time()
        self._steer_lock = threading.Lock()
        self._steer = None
        self._thread: threading.Thread | None = None
        self._control_thread: threading.Thread | None = None
        self._stop = threading.Event()
        self.error: BaseException | None = None
        self.relay: CaptureRelay | None = None   # the capture side (capture.py)

    def _bind(self, sock, name: str) -> None:
        endpoint = self.settings.endpoint(name)
        path = _ipc_path(endpoint)
        if path and os.path.exists(path):
            os.unlink(path)  # stale from a killed proxy: the lock proves no live one owns it
        if curve.is_tcp(endpoint):
            curve.apply_server(sock, self.settings)
        sock.bind(endpoint)
        if path:
            os.chmod(path, 0o600)

    def _lock(self) -> None:
        """One proxy per data dir: a second one would unlink the live one's sockets."""
        path = self.settings.run_dir / "bus.lock"
        self._lock_fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(self._lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(self._lock_fd, 32, 0).decode(errors="replace").strip()
            os.close(self._lock_fd)
            raise RuntimeError(f"another bus proxy (pid {holder or '?'}) already serves "
                               f"{self.settings.run_dir}") from None
        os.ftruncate(self._lock_fd, 0)
        os.pwrite(self._lock_fd, str(os.getpid()).encode(), 0)

    def start(self) -> "Proxy":
        s = self.settings
        s.run_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        os.chmod(s.run_dir, 0o700)
        self._lock()
        self._auth = curve.start_authenticator(self.ctx, s) if curve.needs_curve(s) else None
        front = self.ctx.socket(zmq.XSUB)
        back = self.ctx.socket(zmq.XPUB)
        front.setsockopt(zmq.RCVHWM, s.hwm)
        front.setsockopt(zmq.MAXMSGSIZE, s.proxy_max_frame_bytes)
        back.setsockopt(zmq.SNDHWM, s.hwm)
        for sock in (front, back):
            sock.setsockopt(zmq.LINGER, 0)
        self._bind(front, "xsub")
        self._bind(back, "xpub")
        if s.bus_listen:
            # Worker hosts: the same sockets also listen on tcp, CURVE only. Security options
            # apply to the endpoints bound after them, so the local ipc endpoints stay as they are.
            for sock, name in ((front, "xsub"), (back, "xpub")):
                curve.apply_server(sock, s)
                sock.bind(tcp_endpoint(s.bus_listen, name))
        capture = None
        if self.capture_enabled:
            capture = self.ctx.socket(zmq.PUSH)
            capture.setsockopt(zmq.SNDHWM, 0)  # never block the proxy; the relay bounds memory
            capture.setsockopt(zmq.LINGER, 0)
            capture.bind(CAPTURE_INPROC)
            self.relay = CaptureRelay(self.ctx, s, bind=self._bind).start()
            # Publishers filter on their side: without a catch-all subscription upstream, a message
            # nobody subscribes to would never reach the proxy, and so never the audit log.
            front.send(b"\x01")
        control = self.ctx.socket(zmq.PAIR)
        control.bind("inproc://proxy-control")
        self._steer = self.ctx.socket(zmq.PAIR)
        self._steer.connect("inproc://proxy-control")
        self._sockets = [front, back, capture, control]

        def run():
            try:
                zmq.proxy_steerable(front, back, capture, control)
            except zmq.ContextTerminated:
                pass
            except Exception as exc:  # pragma: no cover - reported via error
                self.error = exc
                log.exception("proxy failed")
            finally:
                self._stop.set()

        self._thread = threading.Thread(target=run, name="proxy", daemon=True)
        self._thread.start()
        self._control_thread = threading.Thread(target=self._serve_control, name="control",
                                                daemon=True)
        self._control_thread.start()
        return self

    def statistics(self) -> dict:
        """The proxy's 8 counters (messages and bytes, in and out, frontend and backend)."""
        with self._steer_lock:
            self._steer.send(b"STATISTICS")
            if not self._steer.poll(2000):
                raise TimeoutError("proxy did not answer STATISTICS")
            frames = self._steer.recv_multipart()
        values = [struct.unpack("=Q", f)[0] for f in frames]
        stats = dict(zip(_COUNTERS, values))
        stats["uptime_s"] = round(time.time() - self.started_at, 3)
        stats["pid"] = os.getpid()
        if self.relay is not None:
            stats["capture"] = self.relay.stats()
        if self._auth is not None:
            stats["curve"] = self._auth.allow_list.stats()
        return stats

    def _serve_control(self) -> None:
        rep = self.ctx.socket(zmq.REP)
        rep.setsockopt(zmq.LINGER, 0)
        try:
            self._bind(rep, "control")
        except zmq.ZMQError as exc:
            log.error("control endpoint unavailable: %s", exc)
            rep.close()
            return
        while not self._stop.is_set():
            try:
                if not rep.poll(200):
                    continue
                raw = rep.recv()
                try:
                    cmd = json.loads(raw).get("cmd")
                except (ValueError, AttributeError):
                    cmd = None
                if cmd == "stats":
                    reply = {"ok": True, "stats": self.statistics()}
                elif cmd == "capture" and self.relay is not None:
                    reply = {"ok": True, "capture": self.relay.stats(subscriptions=True)}
                else:
                    reply = {"ok": False, "error": f"unknown command {raw[:40]!r}; try stats"}
                rep.send(json.dumps(reply).encode())
            except zmq.ContextTerminated:
                break
            except Exception as exc:
                log.warning("control request failed: %s", exc)
                try:
                    rep.send(json.dumps({"ok": False, "error": str(exc)}).encode())
                except zmq.ZMQError:
                    pass
        rep.close()

    def stop(self) -> None:
        if self._steer is not None and not self._stop.is_set():
            with self._steer_lock:
                try:
                    self._steer.send(b"TERMINATE")
                except zmq.ZMQError:
                    pass
        if self._thread:
            self._thread.join(3)
        if self.relay is not None:
            self.relay.stop()  # gives a connected tap a moment to take what is still buffered
        self._stop.set()
        if self._control_thread:
            self._control_thread.join(3)
        for sock in self._sockets + [self._steer]:
            if sock is not None:
                sock.close(0)
        if self._auth is not None:
            self._auth.stop()
        self.ctx.term()


def query_control(settings: Settings, cmd: str = "stats", timeout_s: float = 2.0) -> dict:
    """Ask the running proxy for its counters (used by `artoo tap stats` and `artoo status`)."""
    ctx = zmq.Context.instance()
    sock = ctx.socket(zmq.REQ)
    sock.setsockopt(zmq.LINGER, 0)
    try:
        if curve.is_tcp(settings.endpoint("control")):
            curve.apply_client(sock, settings)
        sock.connect(settings.endpoint("control"))
        sock.send(json.dumps({"cmd": cmd}).encode())
        if not sock.poll(int(timeout_s * 1000)):
            raise TimeoutError("bus proxy control socket did not answer")
        return json.loads(sock.recv())
    finally:
        sock.close(0)


def main() -> int:
    configure_logging("bus")
    settings = load_settings()
    capture = settings.bus_capture
    try:
        proxy = Proxy(settings, capture=capture).start()
    except (RuntimeError, zmq.ZMQError) as exc:
        log.error("bus proxy cannot start: %s", exc)
        return 1
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    # The proxy publishes its own heartbeat (with its counters) like every other process.
    client = BusClient("bus", settings=settings)
    client.heartbeat_info = lambda: {"proxy": proxy.statistics(), "capture": capture}
    settle_heap()
    try:
        client.start()
    except Exception as exc:
        log.error("proxy self-check failed: %s", exc)
        proxy.stop()
        return 1
    log.info("bus proxy ready (capture=%s)", capture)
    while not stop.wait(0.5):
        if proxy._stop.is_set():
            log.error("proxy thread ended unexpectedly: %s", proxy.error)
            client.stop()
            return 1
    client.stop()
    proxy.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
