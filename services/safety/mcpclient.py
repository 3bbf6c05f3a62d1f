"""The effector's MCP client (the official `mcp` SDK): the servers of mcp.json as tools.

One `McpHub` per effector owns an asyncio loop on a thread of its own; each server is one
long-lived task holding its transport and `ClientSession` (entered and left in that task, as
anyio requires), started on first use and stopped with the effector. The executor's thread calls
`hub.call(...)`, which never raises and never blocks past its bound:

* a **stdio** server runs inside the bubblewrap sandbox (sandbox.program_argv): the run's
  workspace writable, its own install (mcp.install_roots) read-only, artoo's data hidden, no
  network unless its entry says `"network": true`, a process limit, and it dies with the
  effector; without bubblewrap it is refused (fail closed) unless the operator set
  ARTOO_SANDBOX=off. A streamable-HTTP server is reached at its `url` as configured.
* a call that takes longer than the server's timeout stops the server (the next call starts it
  again); a server that exits, or writes what is not JSON-RPC, or answers with something that is
  not a tool result, is a tool error that says so — with the tail of what it wrote on stderr.

Discovery (`tools/list`) is cached per server entry under `$ARTOO_HOME/state/mcp/`, so an effector
whose goal needs no MCP tool starts no server; `artoo mcp tools` refreshes it.
"""
from __future__ import annotations

import asyncio
import logging
import os
import tempfile
import threading
import time
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, Optional

from protocol.settings import Settings

from services.runtime import mcpconfig
from services.runtime.mcpconfig import ServerSpec

from . import mcp as gate
from . import sandbox

log = logging.getLogger("artoo.mcp")
STDERR_TAIL = 300
_PARSE_FAILURES: list[float] = []          # times the SDK's stdio reader saw a non-JSON-RPC line


class _ParseWatch(logging.Handler):
    def emit(self, record: logging.LogRecord) -> None:
        if "Failed to parse" in record.getMessage():
            _PARSE_FAILURES.append(time.monotonic())
            del _PARSE_FAILURES[:-50]


logging.getLogger("mcp.client.stdio").addHandler(_ParseWatch())


@dataclass
class CallOutcome:
    output: str = ""
    error: Optional[str] = None
    digest: str = ""


class McpFailure(Exception):
    """A server could not be used (start, discovery or call): the message is for the model
    and the operator alike."""


class _Server:
    """One server's session, living in the hub's loop."""

    def __init__(self, hub: "McpHub", spec: ServerSpec):
        self.hub = hub
        self.spec = spec
        self.task: Optional[asyncio.Task] = None
        self.session = None
        self.stopping: Optional[asyncio.Event] = None
        self.error = ""
        self.errlog = tempfile.TemporaryFile(mode="w+", encoding="utf-8", errors="replace")
        self.limits: Optional[sandbox.Limits] = None

    @property
    def timeout(self) -> float:
        return float(self.spec.timeout or self.hub.settings.mcp_timeout_s)

    def stderr_tail(self) -> str:
        try:
            self.errlog.flush()
            self.errlog.seek(0, os.SEEK_END)
            size = self.errlog.tell()
            self.errlog.seek(max(0, size - 4 * STDERR_TAIL))
            text = self.errlog.read()
            self.errlog.seek(0, os.SEEK_END)
        except (OSError, ValueError):
            return ""
        text = " ".join(text.split())
        return text[-STDERR_TAIL:]

    def _transport(self):
        spec = self.spec
        if spec.transport == "http":
            return _http_transport(spec.url, spec.headers, self.timeout)
        from mcp.client.stdio import StdioServerParameters, stdio_client
        argv = self.hub.server_argv(spec, self)
        return stdio_client(StdioServerParameters(command=argv[0], args=argv[1:],
                                                  env=self.hub.server_env(spec),
                                                  cwd=self.hub.workspace),
                            errlog=self.errlog)

    async def start(self):
        """The live session (started now if it is not running), or McpFailure."""
        if self.session is not None and self.task is not None and not self.task.done():
            return self.session
        await self.stop()
        self.error = ""
        try:                                   # what it writes from now on is this run's
            self.errlog.seek(0)
            self.errlog.truncate()
        except (OSError, ValueError):
            pass
        loop = asyncio.get_running_loop()
        ready: asyncio.Future = loop.create_future()
        self.stopping = asyncio.Event()
        self.task = loop.create_task(self._run(ready))
        try:
            self.session = await asyncio.wait_for(asyncio.shield(ready),
                                                  self.hub.settings.mcp_start_timeout_s)
        except asyncio.TimeoutError:
            await self.stop()
            raise McpFailure(self._why(f"did not finish starting within "
                                       f"{self.hub.settings.mcp_start_timeout_s:g}s")) from None
        except McpFailure:
            await self.stop()
            raise
        except Exception as exc:  # noqa: BLE001 - whatever the transport raised
            await self.stop()
            raise McpFailure(self._why(f"could not start: {_describe(exc)}")) from None
        return self.session

    async def _run(self, ready: asyncio.Future) -> None:
        from mcp import ClientSession
        try:
            async with AsyncExitStack() as stack:
                streams = await stack.enter_async_context(self._transport())
                # no session-wide read timeout: a slow start must not fail `initialize` (start()
                # bounds it); every later request carries its own bound
                session = await stack.enter_async_context(ClientSession(streams[0], streams[1]))
                await session.initialize()
                if not ready.done():
                    ready.set_result(session)
                await self.stopping.wait()
        except BaseException as exc:  # noqa: BLE001 - ends this server, never the hub
            self.error = _describe(exc)
            if not ready.done():
                ready.set_exception(McpFailure(self._why(f"could not start: {self.error}")))
            if isinstance(exc, (KeyboardInterrupt, SystemExit)):
                raise
        finally:
            self.session = None
            if self.limits is not None:
                self.limits.cleanup()
                self.limits = None

    async def stop(self) -> None:
        task, self.task = self.task, None
        self.session = None
        if task is None:
            return
        if self.stopping is not None:
            self.stopping.set()
        try:
            await asyncio.wait_for(asyncio.shield(task), 4.0)
        except (asyncio.TimeoutError, Exception):  # noqa: BLE001
            task.cancel()
            try:
                await asyncio.wait_for(task, 2.0)
            except (asyncio.TimeoutError, asyncio.CancelledError, Exception):  # noqa: BLE001
                pass

    def _why(self, what: str) -> str:
        tail = self.stderr_tail()
        return f"MCP server {self.spec.name} {what}" + (f" (it wrote: {tail})" if tail else "")

    async def list_tools(self) -> list[dict]:
        session = await self.start()
        tools, cursor = [], None
        bound = max(self.timeout, self.hub.settings.mcp_start_timeout_s)
        for _ in range(20):                 # pages
            try:
                page = await asyncio.wait_for(session.list_tools(cursor=cursor) if cursor
                                              else session.list_tools(), bound)
            except asyncio.TimeoutError:
                await self.stop()
                raise McpFailure(self._why(f"did not list its tools within {bound:g}s"))
            except Exception as exc:  # noqa: BLE001
                await self.stop()
                raise McpFailure(self._why(f"failed to list its tools: {_describe(exc)}"))
            tools += [t.model_dump(mode="json", exclude_none=True) for t in page.tools]
            cursor = page.nextCursor
            if not cursor:
                break
        return tools

    async def call(self, tool: str, args: dict) -> dict:
        session = await self.start()
        seen_garbage = len(_PARSE_FAILURES)
        t = self.timeout
        try:
            result = await asyncio.wait_for(session.call_tool(
                tool, args, read_timeout_seconds=timedelta(seconds=t)), t + 2.0)
        except asyncio.TimeoutError:
            await self.stop()
            raise McpFailure(self._why(
                f"did not answer {tool} within {t:g}s{self._garbage(seen_garbage)}; it was "
                f"stopped (the next call starts it again)")) from None
        except Exception as exc:  # noqa: BLE001 - McpError, a validation error, a broken pipe
            text = _describe(exc)
            if "timed out" in text.lower() or "timeout" in text.lower():
                await self.stop()
                raise McpFailure(self._why(
                    f"did not answer {tool} within {t:g}s{self._garbage(seen_garbage)}; it was "
                    f"stopped (the next call starts it again)")) from None
            dead = self.task is None or self.task.done() or "closed" in text.lower()
            if dead:
                await self.stop()
                raise McpFailure(self._why(f"exited or closed the connection during {tool} "
                                           f"({text}){self._garbage(seen_garbage)}")) from None
            raise McpFailure(self._why(f"failed on {tool}: {text}")) from None
        return result.model_dump(mode="json", exclude_none=True)

    @staticmethod
    def _garbage(since: int) -> str:
        return "; it wrote output that is not JSON-RPC" if len(_PARSE_FAILURES) > since else ""


@asynccontextmanager
async def _http_transport(url: str, headers: dict[str, str], timeout: float):
    """The streamable-HTTP transport with the entry's headers, on a client this owns."""
    import httpx
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client
    http = create_mcp_http_client(headers=headers or None,
                                  timeout=httpx.Timeout(timeout, read=max(timeout, 60.0)))
    async with http:
        async with streamable_http_client(url, http_client=http) as streams:
            yield streams


def _describe(exc: BaseException) -> str:
    """A one-line account of an exception, through anyio's exception groups."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    text = str(exc).strip() or type(exc).__name__
    return f"{type(exc).__name__}: {text}" if type(exc).__name__ not in text else text


class McpHub:
    """The MCP servers of one effector (module docstring)."""

    def __init__(self, settings: Settings, specs: dict[str, ServerSpec], *, workspace: str,
                 read_roots: list[str] = (), network: bool = False):
        self.settings = settings
        self.workspace = os.path.realpath(workspace)
        self.read_roots = list(read_roots)
        self.specs = {n: s.resolved(self.workspace) for n, s in specs.items() if not s.disabled}
        self.sandbox = sandbox.status(settings)
        self.tools: dict[str, gate.McpTool] = {}          # SERVER.TOOL -> tool
        self.problems: dict[str, str] = {}                 # server -> why it offers nothing
        self._servers: dict[str, _Server] = {}
        self._loop: Optional[asyncio.AbstractEventLoop] = None
        self._thread: Optional[threading.Thread] = None
        self._lock = threading.Lock()

    @classmethod
    def from_settings(cls, settings: Settings, **kwargs) -> Optional["McpHub"]:
        """The hub of mcp.json's servers, or None when there are none (or the file is bad:
        logged, and the run goes on with its other tools)."""
        try:
            specs = mcpconfig.load(settings.home)
        except mcpconfig.McpConfigError as exc:
            log.warning("MCP servers not used: %s", exc)
            return None
        if not any(not s.disabled for s in specs.values()):
            return None
        return cls(settings, specs, **kwargs)

    # -- the loop -----------------------------------------------------------------------------
    def _run(self, coro, timeout: float):
        with self._lock:
            if self._loop is None:
                self._loop = asyncio.new_event_loop()
                self._thread = threading.Thread(target=self._loop.run_forever, daemon=True,
                                                name="mcp-hub")
                self._thread.start()
        future = asyncio.run_coroutine_threadsafe(coro, self._loop)
        try:
            return future.result(timeout)
        except TimeoutError:
            future.cancel()
            raise McpFailure(f"no answer within {timeout:g}s") from None

    def _server(self, name: str) -> _Server:
        server = self._servers.get(name)
        if server is None:
            server = self._servers[name] = _Server(self, self.specs[name])
        return server

    # -- confinement --------------------------------------------------------------------------
    def server_argv(self, spec: ServerSpec, server: _Server) -> list[str]:
        program = [spec.command, *spec.args]
        if self.sandbox.mode == "off":
            return program
        if not self.sandbox.usable:
            raise McpFailure(f"refused: stdio MCP servers run only in the tool sandbox, which "
                             f"cannot start: {self.sandbox.detail}")
        roots = gate.install_roots(spec.command, spec.args, spec.roots)
        argv = sandbox.program_argv(self.settings, program, workspace=self.workspace,
                                    network=spec.network, read_roots=self.read_roots + roots,
                                    env=spec.env)
        server.limits = sandbox.Limits(self.settings)
        setpriv = sandbox.SETPRIV or ""
        return ([setpriv, "--pdeathsig", "KILL", "--"] if setpriv else []) + \
            server.limits.prefix() + argv

    def server_env(self, spec: ServerSpec) -> dict[str, str]:
        env = {k: os.environ[k] for k in ("PATH", "LANG", "LC_ALL") if k in os.environ}
        env.update(spec.env)
        return env

    # -- discovery ----------------------------------------------------------------------------
    def discover(self, *, refresh: bool = False) -> dict[str, gate.McpTool]:
        """Every server's tools (from the cache when its entry is unchanged, unless `refresh`);
        a server that cannot be asked is in `problems` and offers nothing."""
        cache = {} if refresh else mcpconfig.read_cache(self.settings.home)
        todo = []
        for name, spec in self.specs.items():
            hit = cache.get(name) or {}
            if hit.get("fingerprint") == spec.fingerprint() and isinstance(hit.get("tools"), list):
                self._add(name, hit["tools"])
            else:
                todo.append(name)
        if todo:
            async def ask_all():
                return await asyncio.gather(*(self._server(n).list_tools() for n in todo),
                                            return_exceptions=True)
            try:
                answers = self._run(ask_all(), 2 * self.settings.mcp_start_timeout_s +
                                    max(self.specs[n].timeout or self.settings.mcp_timeout_s
                                        for n in todo) + 10)
            except McpFailure as exc:
                answers = [exc] * len(todo)
            for name, answer in zip(todo, answers):
                if isinstance(answer, BaseException):
                    self.problems[name] = _describe(answer) if not isinstance(
                        answer, McpFailure) else str(answer)
                    continue
                mcpconfig.write_cache(self.settings.home, name,
                                      self.specs[name].fingerprint(), answer)
                self._add(name, answer)
        return self.tools

    def _add(self, server: str, raw: list[dict]) -> None:
        for item in raw:
            tool = gate.McpTool.from_dict(server, item)
            if tool.name:
                self.tools[tool.full_name] = tool

    # -- calls --------------------------------------------------------------------------------
    def call(self, full_name: str, args: dict[str, Any]) -> CallOutcome:
        """Call one tool; every failure is a CallOutcome with an error, within the bound."""
        tool = self.tools.get(full_name)
        if tool is None:
            return CallOutcome(error=f"unknown MCP tool {full_name!r}")
        server = self._server(tool.server)
        bound = self.settings.mcp_start_timeout_s + server.timeout + 15
        try:
            result = self._run(server.call(tool.name, args), bound)
        except McpFailure as exc:
            return CallOutcome(error=str(exc))
        except Exception as exc:  # noqa: BLE001 - a client bug must not take the effector down
            return CallOutcome(error=f"MCP call {full_name} failed: {_describe(exc)}")
        if not isinstance(result, dict) or not isinstance(result.get("content", []), list):
            return CallOutcome(error=f"MCP server {tool.server} returned something that is not "
                                     f"a tool result for {tool.name}")
        output, error = gate.render_result(result, self.settings.shell_output_max_chars)
        return CallOutcome(output=output, error=error, digest=gate.digest(result))

    def close(self) -> None:
        """Stop every server (their sandboxes die with them) and the loop."""
        if self._loop is None:
            return
        servers = list(self._servers.values())

        async def stop_all():
            await asyncio.gather(*(s.stop() for s in servers), return_exceptions=True)
        try:
            self._run(stop_all(), 10.0)
        except McpFailure:
            pass
        self._loop.call_soon_threadsafe(self._loop.stop)
        if self._thread is not None:
            self._thread.join(5.0)
        for s in servers:
            try:
                s.errlog.close()
            except OSError:
                pass
        self._loop = None
