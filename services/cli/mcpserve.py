"""`artoo mcp serve`: artoo as an MCP server, so IDEs and other agents can delegate whole goals.

Built on the SDK's FastMCP. Tools: `run_goal` (goal, workspace → status, answer, summary, cost),
`task_status`, `list_tasks` and `cancel_task`. It is a client of the bus exactly like `artoo run`
(a RunSession, the bus role "user"): it submits the UserRequest, follows the run to its
FinalResult, and reads finished runs from the decision logs as `artoo tasks` does.

A Law 1 action of a run (an ApprovalRequest) is put to the MCP client as an elicitation when the
client declared that capability: the user approves or declines that one action. A client that
cannot be asked gets the action declined (it is not done) and the call's result says "needs
approval", naming the action and the `artoo gate` command that shows how artoo classifies it;
`yes=true` pre-approves a run's actions, as `artoo run --yes` does.

Transports: stdio (the default; what desktop clients start), or streamable HTTP on 127.0.0.1
behind a bearer token (`--http`; the token from `--token`, ARTOO_MCP_TOKEN, or one made and kept
in `$ARTOO_HOME/mcp-token`, mode 0600).
"""
from __future__ import annotations

import hmac
import io
import os
import queue
import secrets
import shlex
import socket
import sys
import threading
import time
from pathlib import Path
from typing import Any, Optional

from mcp.server.fastmcp import Context
from pydantic import BaseModel, Field

from protocol.messages import ClarificationReply, ConversationalReply, TaskCancel
from protocol.settings import Settings, workspace_problem

from services.runtime import tasklog
from . import render
from . import tasks as tasks_cli

POLL_S = 0.5
TOKEN_FILE = "mcp-token"
INSTRUCTIONS = ("artoo runs a goal in plain language on this machine with local tools (shell, "
                "files, its own MCP servers) and checks the result in code before it says "
                "'verified'. Give run_goal the goal and the workspace directory to work in.")


class Approval(BaseModel):
    approve: bool = Field(description="Allow artoo to do exactly this action?")


class Bridge:
    """The bus side of the server: one RunSession, opened on first use."""

    def __init__(self, settings: Settings, workspace: str = ""):
        self.settings = settings
        self.workspace = workspace
        self._session = None
        self._lock = threading.Lock()

    def session(self):
        from rich.console import Console
        from .run import ConfigError, RunSession
        with self._lock:
            if self._session is None:
                try:
                    self._session = RunSession(self.settings, Console(file=io.StringIO()),
                                               interactive=True, quiet=True)
                except ConfigError as exc:
                    raise RuntimeError(str(exc)) from None
            return self._session

    def close(self) -> None:
        with self._lock:
            if self._session is not None:
                self._session.close()
                self._session = None

    def resolve_workspace(self, workspace: str) -> str:
        ws = workspace or self.workspace or os.environ.get("ARTOO_WORKSPACE") or os.getcwd()
        problem = workspace_problem(ws, self.settings)
        if problem:
            raise ValueError(f"the workspace {ws} is refused: {problem}")
        return os.path.realpath(os.path.expanduser(ws))

    def submit(self, goal: str, workspace: str, *, yes: bool, network: bool,
               deadline_s: Optional[float]) -> str:
        session = self.session()
        with self._lock:       # the options are the session's: set and submit as one step
            session.workspace, session.yes, session.network = workspace, yes, network
            try:
                return session.submit(goal, deadline_s=deadline_s)
            finally:           # `yes` travels in the request; the session itself never
                session.yes = False    # pre-approves another run's request

    def next_event(self, run_id: str, timeout: float = POLL_S):
        try:
            return self.session().queues[run_id].get(timeout=timeout)
        except queue.Empty:
            return None

    def decide(self, req, approved: bool, by: str, reason: str) -> None:
        self.session()._decide(req, approved, by, reason)

    def answer_clarification(self, msg) -> None:
        self.session().client.send(ClarificationReply(task_id=msg.task_id, answer="",
                                                      round=msg.round))

    def cancel(self, run_id: str) -> None:
        self.session().client.publish(TaskCancel(task_id=run_id,
                                                 reason="cancelled by the MCP client"))

    def result(self, run_id: str, final, workspace: str, needs: list[dict]) -> dict[str, Any]:
        session = self.session()
        usage = session.usage_of(run_id)
        out: dict[str, Any] = {"run_id": run_id, "workspace": workspace,
                               "cost": render.cost_summary(usage),
                               "log": str(tasklog.log_path(self.settings.tasks_dir, run_id))}
        if final is None:
            out.update(status="no_result", answer="", summary="no result before the deadline; "
                       "see the run's log")
        elif isinstance(final, ConversationalReply):
            out.update(status="verified", answer=final.answer, summary=final.answer)
        else:
            out.update(status=final.status or ("verified" if final.verified else "unverified"),
                       answer=final.answer or (final.output if isinstance(final.output, str)
                                               else ""),
                       summary=final.summary, law1=list(final.law1),
                       unverified=list(final.unverified), changed=list(final.changed))
        if needs:
            out["status"] = "needs_approval"
            out["needs_approval"] = needs
            out["summary"] = (f"needs approval: {len(needs)} action(s) were not done because "
                              f"nobody could approve them here — "
                              + "; ".join(n["action"] for n in needs)
                              + ". Check how artoo classifies one with `" + needs[0]["check"]
                              + "`, then call run_goal again with yes=true (pre-approve), or "
                                "run it from a terminal with `artoo run`. Result so far: "
                              + str(out.get("summary", "")))
        session.forget(run_id)
        return out


def _gate_command(req) -> str:
    if req.kind in ("shell", "network") and req.command:
        return f"artoo gate -- {shlex.quote(req.command)}"
    return "artoo gate -- '<command>' (and `artoo mcp tools` for an MCP tool's policy)"


def build_server(settings: Settings, *, workspace: str = "", host: str = "127.0.0.1",
                 port: int = 0):
    """The FastMCP server and its bridge to the bus."""
    import anyio
    from mcp import types
    from mcp.server.fastmcp import FastMCP
    from mcp.server.fastmcp.exceptions import ToolError

    bridge = Bridge(settings, workspace)
    server = FastMCP("artoo", instructions=INSTRUCTIONS, host=host, port=port or 8000,
                     log_level="WARNING")
    readonly = types.ToolAnnotations(readOnlyHint=True, openWorldHint=False)

    async def ask_client(ctx: Context, req) -> tuple[bool, str, str]:
        caps = types.ClientCapabilities(elicitation=types.ElicitationCapability())
        if not ctx.session.check_client_capability(caps):
            return False, "no-operator", "the MCP client cannot be asked (no elicitation)"
        lines = [f"artoo asks to do a {req.classification or 'gated'} {req.kind} action:",
                 req.command] + [f"path: {p}" for p in req.paths] + \
            ([f"why it asks: {req.reason}"] if req.reason else [])
        try:
            with anyio.fail_after(settings.approval_timeout_s):
                answer = await ctx.elicit("\n".join(lines), schema=Approval)
        except TimeoutError:
            return False, "timeout", "no answer from the MCP client in time"
        except Exception as exc:  # noqa: BLE001 - a client that fails to answer: deny
            return False, "no-operator", f"the elicitation failed: {exc}"
        if answer.action == "accept" and answer.data.approve:
            return True, "operator", "approved through the MCP client"
        return False, "operator", f"declined through the MCP client ({answer.action})"

    @server.tool(annotations=types.ToolAnnotations(readOnlyHint=False, destructiveHint=True,
                                                   openWorldHint=True))
    async def run_goal(goal: str, ctx: Context, workspace: str = "", yes: bool = False,
                       network: bool = False, deadline_s: Optional[float] = None) -> dict:
        """Run a goal end to end with artoo in `workspace` (a directory on this machine; default:
        the server's). Returns status (verified / unverified / not_possible / abandoned /
        needs_approval), answer, summary and cost. Deletes, overwrites and other Law 1 actions
        are asked of you; yes=true pre-approves them."""
        try:
            ws = await anyio.to_thread.run_sync(bridge.resolve_workspace, workspace)
            rid = await anyio.to_thread.run_sync(
                lambda: bridge.submit(goal, ws, yes=yes, network=network, deadline_s=deadline_s))
        except (RuntimeError, ValueError) as exc:
            raise ToolError(str(exc)) from None
        limit = time.monotonic() + (deadline_s or settings.task_deadline_s) + 30
        needs: list[dict] = []
        final, events = None, 0
        while time.monotonic() < limit:
            item = await anyio.to_thread.run_sync(bridge.next_event, rid)
            if item is None:
                continue
            kind, env, msg = item
            if kind == "end":
                final = msg
                break
            if kind == "clarify":
                await anyio.to_thread.run_sync(bridge.answer_clarification, msg)
            elif kind == "approve":
                approved, by, why = await ask_client(ctx, msg)
                if not approved and by == "no-operator":
                    needs.append({"action": f"{msg.kind} `{msg.command}`",
                                  "classification": msg.classification, "reason": msg.reason,
                                  "check": _gate_command(msg)})
                await anyio.to_thread.run_sync(lambda: bridge.decide(msg, approved, by, why))
            elif kind == "msg":
                events += 1
                line = render.describe(env, msg)
                if line:
                    try:
                        await ctx.report_progress(events, None, message=_plain(line)[:200])
                    except Exception:  # noqa: BLE001 - progress is optional
                        pass
        return await anyio.to_thread.run_sync(lambda: bridge.result(rid, final, ws, needs))

    @server.tool(annotations=readonly)
    def task_status(run_id: str) -> dict:
        """The state of one run (its id, a unique part of it, or 'last'): state, status, goal,
        answer, summary, cost, lifecycle."""
        try:
            path = tasks_cli.find_run(settings, run_id)
        except Exception as exc:  # click.ClickException: no such run
            raise ToolError(str(getattr(exc, "message", exc))) from None
        return tasks_cli.summarize(tasks_cli.read_events(path))

    @server.tool(annotations=readonly)
    def list_tasks(limit: int = 10) -> list[dict]:
        """The newest runs (id, state, status, goal, age in seconds), newest first."""
        rows = [tasks_cli.summarize(tasks_cli.read_events(p))
                for p in tasks_cli.log_files(settings)[:max(1, min(limit, 100))]]
        return [{k: r[k] for k in ("id", "state", "status", "goal", "age_s", "answer")}
                for r in rows]

    @server.tool(annotations=types.ToolAnnotations(readOnlyHint=False, destructiveHint=True,
                                                   idempotentHint=True, openWorldHint=False))
    async def cancel_task(run_id: str) -> dict:
        """Cancel a running run; it ends as abandoned (what was done is kept)."""
        try:
            path = await anyio.to_thread.run_sync(tasks_cli.find_run, settings, run_id)
        except Exception as exc:  # noqa: BLE001
            raise ToolError(str(getattr(exc, "message", exc))) from None
        rid = path.stem
        row = tasks_cli.summarize(tasks_cli.read_events(path))
        if row["state"] != "running":
            return {"run_id": rid, "cancelled": False, "state": row["state"],
                    "status": row["status"]}
        try:
            await anyio.to_thread.run_sync(bridge.cancel, rid)
        except RuntimeError as exc:
            raise ToolError(str(exc)) from None
        return {"run_id": rid, "cancelled": True, "state": "cancelling"}

    return server, bridge


def _plain(line: str) -> str:
    from rich.text import Text
    try:
        return Text.from_markup(line).plain
    except Exception:  # noqa: BLE001
        return line


# -- streamable HTTP behind a bearer token -----------------------------------------------------

def token_for(settings: Settings, given: str = "") -> str:
    """`--token`, else ARTOO_MCP_TOKEN, else the one kept in $ARTOO_HOME/mcp-token (made once,
    mode 0600)."""
    if given or os.environ.get("ARTOO_MCP_TOKEN"):
        return given or os.environ["ARTOO_MCP_TOKEN"]
    path = Path(settings.home) / TOKEN_FILE
    try:
        token = path.read_text().strip()
        if token:
            return token
    except OSError:
        pass
    path.parent.mkdir(parents=True, exist_ok=True)
    token = secrets.token_urlsafe(32)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as fh:
        fh.write(token + "\n")
    return token


class BearerAuth:
    """ASGI middleware: every HTTP request needs `Authorization: Bearer <token>`."""

    def __init__(self, app, token: str):
        self.app = app
        self.expected = f"Bearer {token}".encode()

    async def __call__(self, scope, receive, send):
        if scope["type"] == "http":
            given = dict(scope.get("headers") or []).get(b"authorization", b"")
            if not hmac.compare_digest(given, self.expected):
                body = b'{"error": "unauthorized: send Authorization: Bearer <token>"}'
                await send({"type": "http.response.start", "status": 401,
                            "headers": [(b"content-type", b"application/json"),
                                        (b"www-authenticate", b"Bearer"),
                                        (b"content-length", str(len(body)).encode())]})
                await send({"type": "http.response.body", "body": body})
                return
        await self.app(scope, receive, send)


def serve_http(server, token: str, port: int, announce) -> None:
    """Serve streamable HTTP on 127.0.0.1:port (0 = any free port); `announce(url)` once it
    listens."""
    import anyio
    import uvicorn
    app = BearerAuth(server.streamable_http_app(), token)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", port))
    url = f"http://127.0.0.1:{sock.getsockname()[1]}{server.settings.streamable_http_path}"
    config = uvicorn.Config(app, log_level="warning", lifespan="on")
    userver = uvicorn.Server(config)

    async def main():
        async with anyio.create_task_group() as tg:
            tg.start_soon(lambda: userver.serve(sockets=[sock]))
            while not userver.started:
                await anyio.sleep(0.05)
            announce(url)
    anyio.run(main)


def serve_stdio(server) -> None:
    server.run("stdio")


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)
