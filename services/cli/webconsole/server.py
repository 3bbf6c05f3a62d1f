"""The console's HTTP server: stdlib ThreadingHTTPServer on 127.0.0.1, token-guarded, read-only.

* Every request needs the token printed on start: `?token=…` (the first visit sets it as a
  cookie, HttpOnly + SameSite=Strict), the cookie, or `Authorization: Bearer …`; else 403.
* GET/HEAD only; anything else is 405. Nothing handled here writes a file or sends a work message.
* `/events` is a server-sent-event stream fed by `LiveFeed`: one bus client (role `user`, node
  `web-console-…`, no heartbeat) that observes every message and publishes nothing but the
  readiness probe every client sends; `/api/memory` asks the memory process (request/reply,
  MemoryQuery `list`/`show`/`stats`, which change nothing); `/api/world` asks the world process
  (WorldQuery `entities`/`facts`/`goals`/`show`, which change nothing).
"""
from __future__ import annotations

import hmac
import json
import logging
import os
import queue
import secrets
import threading
import time
from http.cookies import SimpleCookie
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib import resources
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

from protocol.settings import Settings

from . import data

log = logging.getLogger("artoo.web")
COOKIE = "artoo_console"
STATIC_TYPES = {".html": "text/html; charset=utf-8", ".js": "text/javascript; charset=utf-8",
                ".css": "text/css; charset=utf-8", ".svg": "image/svg+xml"}
SSE_KEEPALIVE_S = 10.0
FEED_RETRY_S = 3.0
SUBSCRIBER_QUEUE = 2000
SKIP_LIVE = frozenset({"Hello"})


def _static(name: str) -> bytes | None:
    if "/" in name or name.startswith("."):
        return None
    try:
        return resources.files(__package__).joinpath("static", name).read_bytes()
    except (FileNotFoundError, IsADirectoryError, OSError):
        return None


class LiveFeed:
    """Observes the bus and fans every message out to the open `/events` streams."""

    def __init__(self, settings: Settings):
        self.settings = settings
        self.node = f"web-console-{os.getpid()}-{secrets.token_hex(3)}"
        self.client = None
        self.error = ""
        self._subs: set[queue.Queue] = set()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._connect_loop, name="web-feed", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def _connect_loop(self) -> None:
        from protocol.bus import BusClient, BusTimeout
        while not self._stop.is_set():
            client = BusClient("user", settings=self.settings, node=self.node, heartbeat=False)
            client.on("*", self._observe)
            try:
                client.start(timeout=5.0)
            except (BusTimeout, OSError, Exception) as exc:   # daemon down: retry later
                self.error = f"bus unreachable ({exc})"
                self._stop.wait(FEED_RETRY_S)
                continue
            if self._stop.is_set():   # stopped while connecting: nobody else will stop it
                client.stop()
                return
            self.client, self.error = client, ""
            self._broadcast({"type": "_console", "state": "live"})
            return

    def _observe(self, env, _msg) -> None:
        if env.type in SKIP_LIVE:
            return
        from .. import audit as audit_cli
        event = {"type": env.type, "from": env.sender, "node": env.node, "to": env.to or "",
                 "task": env.task or audit_cli.body_task(env), "ts": env.ts,
                 "summary": audit_cli.summary(env, 120)}
        if env.type == "Heartbeat" and isinstance(env.body, dict):
            event["instance"] = env.body.get("instance")
            event["pid"] = env.body.get("pid")
        self._broadcast(event)

    def _broadcast(self, event: dict) -> None:
        with self._lock:
            subs = list(self._subs)
        for q in subs:
            try:
                q.put_nowait(event)
            except queue.Full:
                pass                      # a stalled browser loses events, never the bus

    def subscribe(self) -> queue.Queue:
        q: queue.Queue = queue.Queue(SUBSCRIBER_QUEUE)
        with self._lock:
            self._subs.add(q)
        return q

    def unsubscribe(self, q: queue.Queue) -> None:
        with self._lock:
            self._subs.discard(q)

    def stats(self) -> dict:
        base = self.client.stats() if self.client is not None else {"node": self.node}
        return {**base, "live": self.client is not None, "error": self.error}

    def request_memory(self, query, to: str = "memory") -> Any:
        if self.client is None:
            raise RuntimeError(self.error or "not connected to the bus yet")
        _env, result = self.client.request(query, to=to,
                                           timeout=self.settings.request_timeout_s)
        return result

    def stop(self) -> None:
        self._stop.set()
        self._broadcast({"type": "_console", "state": "stopping"})
        if self.client is not None:
            self.client.stop()
        self._thread.join(6)


class WebConsole:
    """`artoo web`: the server, its token and its live feed."""

    def __init__(self, settings: Settings, port: int = 0, token: str | None = None,
                 live: bool = True):
        self.settings = settings
        self.token = token or secrets.token_urlsafe(24)
        self.feed = LiveFeed(settings) if live else None
        self.stopping = threading.Event()
        self.httpd = ThreadingHTTPServer(("127.0.0.1", port), _handler_for(self))
        self.httpd.daemon_threads = True
        self.port = self.httpd.server_address[1]
        self._thread: threading.Thread | None = None
        self._closed = False

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/?token={self.token}"

    def start(self) -> "WebConsole":
        """Serve in a background thread (tests); `serve_forever` serves in this one."""
        if self.feed is not None:
            self.feed.start()
        self._thread = threading.Thread(target=self.httpd.serve_forever, name="web-http",
                                        daemon=True)
        self._thread.start()
        return self

    def serve_forever(self) -> None:
        if self.feed is not None:
            self.feed.start()
        try:
            self.httpd.serve_forever(poll_interval=0.25)
        finally:
            self.close()

    def stop(self) -> None:
        self.stopping.set()
        self.httpd.shutdown()
        if self._thread is not None:
            self._thread.join(5)
        self.close()

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self.stopping.set()
        if self.feed is not None:
            self.feed.stop()
        self.httpd.server_close()

    def authorized(self, query_token: str, cookie: str, header: str) -> bool:
        want = self.token.encode()
        bearer = header[7:] if header.startswith("Bearer ") else ""
        return any(hmac.compare_digest(want, t.encode()) for t in (query_token, cookie, bearer)
                   if t)


def _handler_for(console: WebConsole):
    class Handler(ConsoleHandler):
        app = console
    return Handler


class ConsoleHandler(BaseHTTPRequestHandler):
    app: WebConsole
    server_version = "artoo-web"
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt: str, *args) -> None:       # quiet: no token in any log line
        log.debug("%s %s", self.address_string(), fmt % args)

    # -- plumbing -----------------------------------------------------------------------------
    def _send(self, code: int, body: bytes, ctype: str, extra: dict | None = None) -> None:
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store")
        self.send_header("X-Content-Type-Options", "nosniff")
        self.send_header("Referrer-Policy", "no-referrer")
        self.send_header("X-Frame-Options", "DENY")
        self.send_header("Content-Security-Policy",
                         "default-src 'self'; img-src 'self' data:; style-src 'self'; "
                         "script-src 'self'; connect-src 'self'; frame-ancestors 'none'")
        for k, v in (extra or {}).items():
            self.send_header(k, v)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _json(self, value: Any, code: int = 200) -> None:
        body = json.dumps(value, default=str, ensure_ascii=False).encode()
        self._send(code, body, "application/json; charset=utf-8")

    def _error(self, code: int, message: str) -> None:
        self._json({"error": message}, code)

    def _reject_write(self) -> None:
        self._send(405, b"read-only console\n", "text/plain; charset=utf-8",
                   {"Allow": "GET, HEAD"})

    do_POST = do_PUT = do_DELETE = do_PATCH = _reject_write

    def do_HEAD(self) -> None:
        self.do_GET()

    def do_GET(self) -> None:
        url = urlsplit(self.path)
        query = {k: v for k, v in parse_qs(url.query).items()}
        q1 = lambda k, d="": (query.get(k) or [d])[0]  # noqa: E731
        cookies = SimpleCookie()
        try:
            cookies.load(self.headers.get("Cookie", ""))
        except Exception:
            pass
        cookie = cookies[COOKIE].value if COOKIE in cookies else ""
        if not self.app.authorized(q1("token"), cookie, self.headers.get("Authorization", "")):
            self._send(403, b"403 forbidden: open the URL with ?token=... that `artoo web` "
                            b"printed\n", "text/plain; charset=utf-8")
            return
        self._set_cookie = (q1("token") and not cookie)
        try:
            self.route(unquote(url.path), q1, query)
        except (BrokenPipeError, ConnectionResetError):
            pass
        except Exception as exc:                 # a bad page never takes the console down
            log.exception("web console: %s failed", url.path)
            try:
                self._error(500, f"{type(exc).__name__}: {exc}")
            except OSError:
                pass

    def _page(self, name: str) -> None:
        body = _static(name)
        if body is None:
            self._error(404, f"no such file: {name}")
            return
        extra = {}
        if self._set_cookie:
            extra["Set-Cookie"] = (f"{COOKIE}={self.app.token}; HttpOnly; SameSite=Strict; "
                                   f"Path=/")
        ext = "." + name.rsplit(".", 1)[-1]
        self._send(200, body, STATIC_TYPES.get(ext, "application/octet-stream"), extra)

    # -- routes -------------------------------------------------------------------------------
    def route(self, path: str, q1, query: dict) -> None:
        s = self.app.settings
        if path in ("/", "/index.html"):
            self._page("index.html")
        elif path.startswith("/static/"):
            self._page(path[len("/static/"):])
        elif path == "/api/tasks":
            self._json(data.task_rows(s, state=q1("state", "all"), status=q1("status"),
                                      q=q1("q"), limit=_int(q1("limit", "100"), 100)))
        elif path.startswith("/api/tasks/"):
            detail = data.task_detail(s, path[len("/api/tasks/"):],
                                      with_messages=q1("messages", "1") != "0")
            if detail is None:
                self._error(404, "no such run")
            else:
                self._json(detail)
        elif path == "/api/daemon":
            report = data.daemon_status(s, window_s=min(3.0, float(_int(q1("window", "1"), 1))))
            report["console"] = self.app.feed.stats() if self.app.feed else {}
            self._json(report)
        elif path == "/api/console":
            self._json({"feed": self.app.feed.stats() if self.app.feed else {},
                        "home": str(s.home), "read_only": True})
        elif path == "/api/audit":
            import click
            try:
                self._json(data.audit_records(
                    s, types=query.get("type", []), task=q1("task"), roles=query.get("role", []),
                    grep=q1("grep"), since=q1("since"), until=q1("until"),
                    limit=_int(q1("limit", "200"), 200),
                    include_heartbeats=q1("heartbeats") == "1"))
            except click.BadParameter as exc:
                self._error(400, str(exc))
        elif path == "/api/audit/verify":
            self._json(data.audit_verify(s))
        elif path == "/api/memory":
            self._memory(q1)
        elif path == "/api/world":
            self._world(q1)
        elif path == "/events":
            self._events()
        else:
            self._error(404, "not found")

    def _memory(self, q1) -> None:
        from protocol.messages import MemoryQuery
        feed = self.app.feed
        if feed is None:
            self._error(503, "no bus connection (started without the live feed)")
            return
        try:
            if q1("id"):
                res = feed.request_memory(MemoryQuery(op="show", id=q1("id")))
            elif q1("stats") == "1":
                res = feed.request_memory(MemoryQuery(op="stats", n=100))
            else:
                res = feed.request_memory(MemoryQuery(op="list", space=q1("space"),
                                                      entity=q1("entity"),
                                                      level=q1("level") or None,
                                                      n=_int(q1("limit", "100"), 100)))
        except Exception as exc:
            self._error(503, f"memory did not answer: {exc}")
            return
        if not res.ok:
            self._error(404, res.error or "memory refused the query")
            return
        self._json({"groups": res.groups, "stats": res.stats,
                    "megrams": [m.model_dump() for m in res.megrams],
                    "rules": [r.model_dump() for r in res.sops]})

    def _world(self, q1) -> None:
        """The world model (read-only queries: entities, facts valid now or `at`, claims,
        goals; one entity with `entity=`)."""
        from protocol.messages import WorldQuery
        feed = self.app.feed
        if feed is None:
            self._error(503, "no bus connection (started without the live feed)")
            return
        try:
            ask = lambda **kw: feed.request_memory(WorldQuery(**kw), to="world")  # noqa: E731
            if q1("entity"):
                res = ask(op="show", entity=q1("entity"))
                if not res.ok:
                    self._error(404, res.error)
                    return
                self._json({"entity": res.entities[0], "facts": res.facts, "claims": res.claims,
                            "edges": res.edges})
                return
            at = float(q1("at")) if q1("at") else None
            ents, facts, goals = (ask(op="entities", n=100),
                                  ask(op="facts", at=at, claims=True, n=100),
                                  ask(op="goals", n=100))
        except Exception as exc:
            self._error(503, f"world did not answer: {exc}")
            return
        self._json({"entities": ents.entities, "facts": facts.facts, "claims": facts.claims,
                    "goals": goals.goals})

    def _events(self) -> None:
        feed = self.app.feed
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream; charset=utf-8")
        self.send_header("Cache-Control", "no-store")
        self.send_header("X-Accel-Buffering", "no")
        self.end_headers()
        self.close_connection = True
        if self.command == "HEAD":
            return
        q = feed.subscribe() if feed else queue.Queue()
        try:
            state = {"type": "_console", "state": "live" if feed and feed.client else "offline",
                     "error": feed.error if feed else "no live feed"}
            self.wfile.write(f"retry: 3000\ndata: {json.dumps(state)}\n\n".encode())
            self.wfile.flush()
            last = time.monotonic()
            while not self.app.stopping.is_set():
                try:
                    event = q.get(timeout=0.5)
                except queue.Empty:
                    if time.monotonic() - last >= SSE_KEEPALIVE_S:
                        self.wfile.write(b": keepalive\n\n")
                        self.wfile.flush()
                        last = time.monotonic()
                    continue
                batch = [event]
                while len(batch) < 200:
                    try:
                        batch.append(q.get_nowait())
                    except queue.Empty:
                        break
                self.wfile.write(b"".join(f"data: {json.dumps(e, default=str)}\n\n".encode()
                                          for e in batch))
                self.wfile.flush()
                last = time.monotonic()
        except (BrokenPipeError, ConnectionResetError, OSError):
            pass
        finally:
            if feed:
                feed.unsubscribe(q)


def _int(text: str, default: int) -> int:
    try:
        return max(0, int(text))
    except ValueError:
        return default


__all__ = ["WebConsole", "LiveFeed"]
