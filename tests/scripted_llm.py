"""A scripted OpenAI-compatible HTTP server for tests (real HTTP on loopback, ephemeral port).

The artoo LLM client sends `X-Artoo-Role` and `X-Artoo-Task` headers, so replies are scripted per
role (optionally per task): FIFO queues of canned replies, or a responder function that sees the
request. Replies may be text, JSON-able values, or faults: `Http(500)`, `Delay(s, then)`, `Drop()`.

    with ScriptedLLM() as llm:
        llm.add("planner", {"task_criteria": [], "subtasks": [...]})
        llm.on("executor", lambda req: {...})          # dynamic replies
        env = llm.env()                                  # OPENAI_* for the processes under test
        ...
        assert llm.calls("planner") == 1
"""
from __future__ import annotations

import json
import threading
import time
from collections import defaultdict, deque
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable

from pydantic import BaseModel


@dataclass
class Http:
    """Answer with an HTTP error status."""
    status: int = 500
    body: str = '{"error": {"message": "scripted failure", "type": "server_error"}}'


@dataclass
class Delay:
    """Wait `seconds` before answering with `then` (use to provoke client timeouts)."""
    seconds: float
    then: Any = ""


@dataclass
class Gate:
    """Hold the answer (`then`) until `until(llm)` holds, checked as each request arrives, or
    `timeout` passes; `opened` says which (a test of what two calls overlap)."""
    until: Callable[["ScriptedLLM"], bool]
    then: Any = ""
    timeout: float = 20.0
    opened: bool = False


@dataclass
class Drop:
    """Close the connection without answering (a transport error for the client)."""


@dataclass
class Hangup:
    """Answer with `then`, then close the connection as a server whose keep-alive time ran out
    does while its client is idle (counted in `ScriptedLLM.hangups`)."""
    then: Any = ""


@dataclass
class Request:
    role: str
    task: str
    body: dict
    ts: float = field(default_factory=time.time)
    peer: tuple = ()              # the client's (address, port): one per connection

    @property
    def messages(self) -> list[dict]:
        return self.body.get("messages", [])

    @property
    def system(self) -> str:
        return next((m["content"] for m in self.messages if m.get("role") == "system"), "")

    @property
    def user(self) -> str:
        """The last user message (the one a reply answers)."""
        users = [m["content"] for m in self.messages if m.get("role") == "user"]
        return users[-1] if users else ""

    @property
    def prompt(self) -> str:
        return "\n".join(str(m.get("content", "")) for m in self.messages)


def in_netns(name: str, make: Callable[[], Any]) -> Any:
    """Run `make` on a thread moved into network namespace `name`: a socket it creates is bound
    there and keeps working when served from any thread (setns moves only the calling thread)."""
    import ctypes
    import os
    out: dict[str, Any] = {}

    def run():
        try:
            fd = os.open(f"/var/run/netns/{name}", os.O_RDONLY)
            try:
                if ctypes.CDLL(None, use_errno=True).setns(fd, 0x40000000) != 0:  # CLONE_NEWNET
                    raise OSError(ctypes.get_errno(), f"setns into {name} failed")
            finally:
                os.close(fd)
            out["value"] = make()
        except BaseException as exc:  # re-raised on the caller's thread
            out["error"] = exc

    t = threading.Thread(target=run)
    t.start()
    t.join()
    if "error" in out:
        raise out["error"]
    return out["value"]


Responder = Callable[[Request], Any]
# The Law 0 checker's reply when a test scripts none: no command, so results stay unverified.
DECLINE_CHECK = "FILE: none\nCOMMAND:"


class ScriptedLLM:
    def __init__(self, default: Any = None, host: str = "127.0.0.1", netns: str = ""):
        """`netns`: serve inside that network namespace (`ip netns`), reachable at `host` there."""
        self.host, self.netns = host, netns
        self._queues: dict[tuple[str, str | None], deque] = defaultdict(deque)
        self._responders: dict[str, Responder] = {}
        self._default = default
        self._lock = threading.RLock()
        self._arrived = threading.Condition(self._lock)   # notified as each request arrives
        self.requests: list[Request] = []
        self.gets: list[tuple[str, tuple]] = []   # (path, the client's address): GET requests
        self.hangups = 0                        # connections closed after a Hangup reply
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- scripting ---------------------------------------------------------------------------
    def add(self, role: str, reply: Any, times: int = 1, task: str | None = None) -> "ScriptedLLM":
        with self._lock:
            for _ in range(times):
                self._queues[(role, task)].append(reply)
        return self

    def on(self, role: str, responder: Responder) -> "ScriptedLLM":
        """Dynamic replies for a role (used when its queue is empty)."""
        self._responders[role] = responder
        return self

    def calls(self, role: str | None = None, task: str | None = None) -> int:
        return len(self.filter(role, task))

    def filter(self, role: str | None = None, task: str | None = None) -> list[Request]:
        with self._lock:
            return [r for r in self.requests
                    if (role is None or r.role == role) and (task is None or r.task == task)]

    def _next_reply(self, req: Request) -> Any:
        with self._lock:
            for key in ((req.role, req.task), (req.role, None)):
                if self._queues.get(key):
                    return self._queues[key].popleft()
        responder = self._responders.get(req.role) or self._responders.get("*")
        if responder:
            return responder(req)
        if self._default is not None:
            return self._default
        if req.role == "verifier":      # R4a's independent checker declines unless scripted
            return DECLINE_CHECK
        return Http(500, json.dumps({"error": {"message": f"no scripted reply for {req.role}"}}))

    # -- server ------------------------------------------------------------------------------
    @property
    def base_url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}/v1"

    def env(self) -> dict[str, str]:
        return {"OPENAI_BASE_URL": self.base_url, "OPENAI_API_KEY": "scripted",
                "OPENAI_MODEL": "scripted-model"}

    def start(self) -> "ScriptedLLM":
        owner = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            # Headers and body are separate writes: without TCP_NODELAY, Nagle + the client's
            # delayed ACK add ~40 ms to every reply, which is not "answering at once".
            disable_nagle_algorithm = True

            def log_message(self, *args):  # keep test output clean
                pass

            def do_GET(self):
                with owner._lock:
                    owner.gets.append((self.path, tuple(self.client_address)))
                if self.path.rstrip("/").endswith("/models"):
                    self._send(200, {"object": "list", "data": [{"id": "scripted-model",
                                                                  "object": "model"}]})
                else:
                    self._send(404, {"error": {"message": "not found"}})

            def do_POST(self):
                length = int(self.headers.get("Content-Length") or 0)
                try:
                    body = json.loads(self.rfile.read(length) or b"{}")
                except ValueError:
                    self._send(400, {"error": {"message": "invalid JSON body"}})
                    return
                req = Request(self.headers.get("X-Artoo-Role", "unknown"),
                              self.headers.get("X-Artoo-Task", "-"), body,
                              peer=tuple(self.client_address))
                with owner._arrived:
                    owner.requests.append(req)
                    owner._arrived.notify_all()
                try:
                    reply = owner._next_reply(req)
                except Exception as exc:  # a broken responder is a test bug: make it loud
                    self._send(500, {"error": {"message": f"responder failed: {exc!r}"}})
                    return
                if isinstance(reply, Gate):
                    with owner._arrived:
                        reply.opened = owner._arrived.wait_for(lambda: reply.until(owner),
                                                               reply.timeout)
                    reply = reply.then
                while isinstance(reply, Delay):
                    time.sleep(reply.seconds)
                    reply = reply.then
                if isinstance(reply, Hangup):
                    self._answer(req, body, reply.then)
                    self._hang_up()
                    with owner._arrived:
                        owner.hangups += 1
                        owner._arrived.notify_all()
                    return
                self._answer(req, body, reply)

            def _hang_up(self) -> None:
                self.close_connection = True
                try:
                    self.connection.shutdown(2)
                except OSError:
                    pass

            def _answer(self, req: Request, body: dict, reply: Any) -> None:
                if isinstance(reply, Drop):
                    self._hang_up()
                    return
                if isinstance(reply, Http):
                    raw = reply.body.encode()
                    self.send_response(reply.status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(raw)))
                    self.end_headers()
                    self.wfile.write(raw)
                    return
                if isinstance(reply, BaseModel):
                    content = reply.model_dump_json()
                elif isinstance(reply, str):
                    content = reply
                else:
                    content = json.dumps(reply)
                prompt_tokens = sum(len(str(m.get("content", ""))) for m in req.messages) // 4
                self._send(200, {
                    "id": f"scripted-{len(owner.requests)}", "object": "chat.completion",
                    "created": int(time.time()), "model": body.get("model", "scripted-model"),
                    "choices": [{"index": 0, "finish_reason": "stop",
                                 "message": {"role": "assistant", "content": content}}],
                    "usage": {"prompt_tokens": prompt_tokens,
                              "completion_tokens": max(1, len(content) // 4),
                              "total_tokens": prompt_tokens + max(1, len(content) // 4)},
                })

            def _send(self, status: int, payload: dict):
                raw = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(raw)))
                self.end_headers()
                try:
                    self.wfile.write(raw)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the caller was killed while its reply was held (crash tests)

        if self.netns:
            self._server = in_netns(self.netns, lambda: ThreadingHTTPServer((self.host, 0),
                                                                            Handler))
        else:
            self._server = ThreadingHTTPServer((self.host, 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server:
            self._server.shutdown()
            self._server.server_close()

    def __enter__(self) -> "ScriptedLLM":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
