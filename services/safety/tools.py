"""The Executor's tools (seeds/000 §10.1, DESIGN §9): shell, read_file, write_file, list, glob,
search_text and web_search.

Every tool returns a ToolOutput (output, error, target, law1) and never raises: R3 turns it into the
one structured ToolCallRecord that R4a, GGS and memory all read. Paths are confined: writes only
inside the workspace, reads inside the workspace and the configured read roots, and artoo's own data
dir (and runtime dir) is never readable or writable by any tool — `~`, `..`, absolute paths outside
and symlinks that escape are refused. Shell commands go through the Law 1 gate
(services/safety/law1.py): destructive and unknown ones run only with the operator's approval, and
approved deletes and overwrites inside the workspace keep an undo copy first.
"""
from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import threading
import time
import urllib.parse
import urllib.request
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any, Callable, Optional

from protocol.settings import Settings

from . import law1, mcp, sandbox, sandbox_session
from .sandbox import SETPRIV, die_with_parent, with_pdeathsig
from .capture import Capture

_SECRET_ENV = re.compile(r"(KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL)", re.I)
_DROP_ENV_PREFIXES = ("OPENAI_", "BRAIN_", "TOOL_", "ANTHROPIC_", "SERPER_")
_KEEP_ARTOO_ENV = ("ARTOO_DAEMON_TAG", "ARTOO_EFFECTOR_SPAWNER", "ARTOO_EFFECTOR_SUBTASK")
_SKIP_DIRS = {".git", "node_modules", "__pycache__", ".venv", "venv", ".mypy_cache", ".tox"}
MAX_READ_BYTES = 2 << 20
MAX_LIST = 500
MAX_MATCHES = 200


@dataclass
class ToolOutput:
    output: str = ""
    error: Optional[str] = None
    target: str = ""
    law1: bool = False
    law1_class: str = ""           # the Law 1 tier of the call (levels.py): telemetry, metrics
    server: str = ""               # an MCP tool's server
    digest: str = ""               # an MCP call: the digest of its whole result


@dataclass(frozen=True)
class ToolSpec:
    name: str
    args: tuple[str, ...]
    required: tuple[str, ...]
    usage: str                     # one compact line for the prompt


TOOL_SPECS: dict[str, ToolSpec] = {s.name: s for s in (
    ToolSpec("shell", ("command",), ("command",),
             '{"action":"tool","tool":"shell","command":"<bash command>"}'),
    ToolSpec("read_file", ("path",), ("path",),
             '{"action":"tool","tool":"read_file","path":"<file>"}'),
    ToolSpec("write_file", ("path", "content"), ("path", "content"),
             '{"action":"tool","tool":"write_file","path":"<file>","content":"<text>"}'),
    ToolSpec("list", ("path",), (), '{"action":"tool","tool":"list","path":"<dir>"}'),
    ToolSpec("glob", ("pattern", "root"), ("pattern",),
             '{"action":"tool","tool":"glob","pattern":"*.py","root":"<dir>"}'),
    ToolSpec("search_text", ("pattern", "path", "glob"), ("pattern",),
             '{"action":"tool","tool":"search_text","pattern":"<regex>","path":"<dir>"}'),
    ToolSpec("web_search", ("query",), ("query",),
             '{"action":"tool","tool":"web_search","query":"<text>"}'),
)}


class ToolRefused(Exception):
    """A call the tool will not perform (bad argument, confinement); `law1` marks Law 1 ones."""

    def __init__(self, message: str, law1: bool = False):
        super().__init__(message)
        self.law1 = law1


Approve = Callable[..., law1.Decision]


_APPROVAL_NOTE = re.compile(r"\[approved by [^\n\]]*\]")


def approval_note(line: str) -> bool:
    """A line the gate put before a command's output ("[approved by --yes; undo copy kept for 1
    path(s)]"): the runtime's words, not something the command printed."""
    return bool(_APPROVAL_NOTE.fullmatch(line.strip()))


def head_tail(text: str, limit: int) -> str:
    """Keep the first third and the last two thirds of `limit` characters, with a marker
    saying how much of the middle was cut (characters, never bytes: no split code points)."""
    if limit <= 0 or len(text) <= limit:
        return text
    head = limit // 3
    tail = limit - head
    return f"{text[:head]}\n…[{len(text) - limit} characters omitted]…\n{text[-tail:]}"


def one_line(text: str, limit: int = 160) -> str:
    """A call's target on one line of a prompt. A program's lines are never joined into one:
    the 1.5B model copied such a flattened program back as its next command, a SyntaxError
    (`python3 -c 'import json import csv # …`); its first line and its length stand for it."""
    lines = [line for line in (text or "").strip().splitlines() if line.strip()]
    head = " ".join(lines[0].split()) if lines else ""
    head = head[:limit] + "…" if len(head) > limit else head
    return head + (f" … ({len(lines)} lines)" if len(lines) > 1 else "")


class Toolbox:
    """The tools of one effector, bound to the workspace, the Law 1 gate and the undo store."""

    def __init__(self, settings: Settings, *, approve: Approve | None = None,
                 undo: law1.UndoStore | None = None, subtask_id: str = "", mcp_hub=None):
        self.settings = settings
        self.workspace = os.path.realpath(settings.workspace)
        self.protected = law1.protected_roots(settings)
        self.read_roots = [os.path.realpath(os.path.expanduser(r))
                           for r in settings.read_roots.split(":") if r.strip()]
        self.approve = approve or (lambda **_: law1.Decision(False, "no-operator",
                                                             "no approval channel"))
        self.undo = undo
        self.subtask_id = subtask_id
        self.home = os.path.expanduser("~")
        self.sandbox = sandbox.status(settings)
        self.network = bool(settings.sandbox_network)
        self.mcp = mcp_hub             # services/safety/mcpclient.McpHub, or None
        Path(self.workspace).mkdir(parents=True, exist_ok=True)
        # one long-lived sandbox per (network, writable), reused by every command of the attempt
        self._sessions: dict[tuple[bool, bool], sandbox_session.Session] = {}
        self._sessions_lock = threading.Lock()
        self._reuse = False     # on for an attempt's toolbox (prewarm); a one-off check: one-shot
        self._verdict: tuple[str, law1.Classification] | None = None   # the last command's

    # -- the attempt's sandbox ----------------------------------------------------------------
    def prewarm(self) -> None:
        """This toolbox is a subtask attempt's: its commands share one long-lived sandbox,
        started now, in the background, so it is ready by the first command (its start
        overlaps the first LLM turn). Without it every command gets a sandbox of its own."""
        self._reuse = self.sandbox.mode == "bubblewrap" and \
            sandbox_session.usable(self.settings)
        if self._reuse:
            self._session(self.network, True)

    def close(self) -> None:
        """End the attempt's sandboxes (their processes and cgroups)."""
        with self._sessions_lock:
            sessions, self._sessions = list(self._sessions.values()), {}
        for s in sessions:
            s.close()

    def _session(self, network: bool, writable: bool) -> "sandbox_session.Session":
        with self._sessions_lock:
            s = self._sessions.get((network, writable))
            if s is None or (s.ready.is_set() and not s.alive()):
                if s is not None:
                    s.close()
                s = sandbox_session.take_spare(workspace=self.workspace, network=network,
                                               read_roots=self.read_roots, writable=writable)
                if s is not None:        # the zygote's spare, started before this effector
                    s.adopt(self._env())
                else:
                    s = sandbox_session.Session(
                        self.settings, workspace=self.workspace, network=network,
                        read_roots=self.read_roots, writable=writable, env=self._env(),
                        wrap=with_pdeathsig)
                self._sessions[(network, writable)] = s
            return s

    @classmethod
    def spare(cls, settings: Settings) -> Optional["sandbox_session.Session"]:
        """A sandbox for the next attempt, started now on the calling thread (a spare effector's
        main thread, which lives as long as it does), for the subtask's toolbox to adopt: None
        where there is no bubblewrap or reuse is off."""
        tb = cls(settings)
        if tb.sandbox.mode != "bubblewrap" or not sandbox_session.usable(settings):
            return None
        return sandbox_session.Session(settings, workspace=tb.workspace, network=tb.network,
                                       read_roots=tb.read_roots, writable=True, env=tb._env(),
                                       wrap=with_pdeathsig, keeper=False)

    def _run_in_session(self, command: str, network: bool, writable: bool
                        ) -> tuple[str, int, bool] | None:
        """The command in the attempt's sandbox; None if that sandbox cannot start (nothing ran:
        the caller runs it in a one-shot sandbox instead)."""
        session = self._session(network, writable)
        capture = Capture(self.settings.shell_output_max_chars)
        try:
            code, timed_out = session.run(command, self.settings.shell_timeout_s, capture.feed)
        except sandbox_session.NotStarted:
            if not session.ready.is_set() or session.error:
                self._reuse = False          # this system cannot host it: one-shot from now on
            return None
        except sandbox_session.SandboxGone as exc:   # died under the command: never re-run it
            capture.feed(f"\n[the sandbox ended during the command: {exc}]\n".encode())
            return capture.text(), -9, False
        return capture.text(), code, timed_out

    # -- dispatch -----------------------------------------------------------------------------
    def available(self) -> list[str]:
        names = list(TOOL_SPECS)
        if not self.search_configured():
            names.remove("web_search")
        return names

    def mcp_tools(self) -> dict[str, "mcp.McpTool"]:
        return dict(self.mcp.tools) if self.mcp is not None else {}

    def offered_mcp(self, goal: str, *, local: bool = False) -> list["mcp.McpTool"]:
        """The MCP tools the executor is shown for this goal (the most relevant, bounded)."""
        limit = self.settings.mcp_local_max_tools if local else self.settings.mcp_max_tools
        return mcp.select(self.mcp_tools().values(), goal, limit)

    def rerun_safe(self, tool: str) -> bool:
        """Whether a call that was started and never reported back may be made again when the
        workspace shows no effect of it: artoo's own tools and a sandboxed stdio server can
        only act on the workspace; another MCP tool only when it says it is read-only or
        idempotent."""
        found = self.mcp_tools().get(tool)
        if found is None:
            return True
        spec = self.mcp.specs.get(found.server)
        confined = spec is not None and spec.transport == "stdio" and \
            self.sandbox.mode == "bubblewrap"
        return found.rerun_safe or confined

    def may_change(self, tool: str, args: dict[str, Any]) -> bool:
        """Whether the call may change anything: a command the Law 1 gate does not class as
        read-only, a write, an MCP tool. A call that cannot is safe to make again after a
        restart, so its journal record need not reach the disk first (executor.py)."""
        if tool == "shell":
            command = args.get("command")
            return not isinstance(command, str) or self._classify(command).level != law1.READ_ONLY
        return tool not in TOOL_SPECS or tool == "write_file"

    def _classify(self, command: str) -> law1.Classification:
        """The gate's verdict on a command, kept for the call that asked first (`may_change`)
        and the call that runs it (`_shell`): one parse of it, not two."""
        if self._verdict is None or self._verdict[0] != command:
            self._verdict = (command, law1.classify(
                command, workspace=self.workspace, protected=self.protected, cwd=self.workspace,
                home=self.home))
        return self._verdict[1]

    def run(self, tool: str, args: dict[str, Any]) -> ToolOutput:
        """Run one tool call; every failure comes back as a ToolOutput, never an exception."""
        # the call's Law 1 tier: the shell's classification, an overwrite's, else the tool's own
        self._law1_class = law1.WORKSPACE_WRITE if tool == "write_file" else \
            law1.READ_ONLY if tool in TOOL_SPECS else law1.UNKNOWN
        out = self._run(tool, args)
        out.law1_class = self._law1_class
        return out

    def _run(self, tool: str, args: dict[str, Any]) -> ToolOutput:
        spec = TOOL_SPECS.get(tool)
        if spec is None and tool in self.mcp_tools():
            try:
                return self._mcp_call(tool, args)
            except Exception as exc:  # a client bug must not take the effector down
                return ToolOutput(error=f"{tool} failed: {type(exc).__name__}: {exc}",
                                  target=tool, server=tool.split(mcp.SEP, 1)[0])
        if spec is None:
            names = self.available() + list(self.mcp_tools())
            return ToolOutput(error=f"unknown tool {tool!r}; available: "
                                    f"{', '.join(names)}", target=tool)
        missing = [a for a in spec.required if args.get(a) in (None, "")]
        if missing:
            return ToolOutput(error=f"{tool}: missing argument(s) {', '.join(missing)}",
                              target=str(args.get(spec.args[0], "")))
        try:
            return getattr(self, f"_{tool}")(**{a: args.get(a) for a in spec.args})
        except ToolRefused as exc:
            target = str(args.get(spec.args[0], ""))
            text = str(exc)
            return ToolOutput(output=text if exc.law1 else "", error=text, target=target,
                              law1=exc.law1)
        except Exception as exc:  # a tool bug must not take the effector down
            return ToolOutput(error=f"{tool} failed: {type(exc).__name__}: {exc}",
                              target=str(args.get(spec.args[0], "")))

    # -- confinement --------------------------------------------------------------------------
    def confine(self, raw: Any, *, write: bool) -> str:
        """The real path a tool may use, or ToolRefused saying why not."""
        if not isinstance(raw, str) or not raw.strip():
            raise ToolRefused("a path is required")
        raw = raw.strip()
        if "\x00" in raw:
            raise ToolRefused("the path contains a NUL byte")
        if raw.startswith("~"):
            raise ToolRefused(self._refusal(raw, write, "'~' paths are refused"), law1=write)
        if ".." in PurePosixPath(raw).parts:
            raise ToolRefused(self._refusal(raw, write, "'..' is refused"), law1=write)
        joined = raw if os.path.isabs(raw) else os.path.join(self.workspace, raw)
        real = os.path.realpath(joined)
        for root in self.protected:
            if law1.within(real, root):
                raise ToolRefused(f"{law1.LAW1} refused: {raw} is inside artoo's own data dir; "
                                  f"agent tools may never read or write it", law1=True)
        roots = [self.workspace] if write else [self.workspace, *self.read_roots]
        if not any(law1.within(real, root) for root in roots):
            why = "is outside the workspace" if real == os.path.normpath(joined) else \
                "resolves (through a symlink) outside the workspace"
            raise ToolRefused(self._refusal(raw, write, f"{raw} {why}"), law1=write)
        return real

    def _refusal(self, raw: str, write: bool, why: str) -> str:
        if write:
            return (f"{law1.LAW1} refused: {why}; files may only be written inside the workspace "
                    f"{self.workspace} (use a relative path)")
        roots = ", ".join([self.workspace, *self.read_roots])
        return f"refused: {why}; file tools read only inside {roots} (use shell for other reads)"

    def display(self, real: str) -> str:
        if law1.within(real, self.workspace):
            rel = os.path.relpath(real, self.workspace)
            return "." if rel == "." else rel
        return real

    # -- approvals ----------------------------------------------------------------------------
    def _approved(self, *, kind: str, command: str, paths: list[str], classification: str,
                  reason: str, snapshot_roots: list[str], keep_undo: bool = True
                  ) -> tuple[bool, str]:
        """Ask for approval; on yes keep an undo copy. Returns (approved, note or refusal)."""
        decision = self.approve(kind=kind, command=command, paths=paths,
                                classification=classification, reason=reason)
        if not decision.approved:
            what = f"{classification} action `{command}` ({reason})"
            return False, law1.law1_refusal(what, decision)
        note = ""
        if self.undo is not None and keep_undo:
            inside = [p for p in paths if law1.within(p, self.workspace)]
            # A command whose targets cannot be enumerated (code, unknown programs): copy the
            # whole workspace, within undo_max_bytes.
            roots = snapshot_roots or ([] if paths else [self.workspace])
            try:
                note = self.undo.save(inside, command=command, subtask_id=self.subtask_id,
                                      snapshot_roots=roots)
            except OSError as exc:
                note = f"no undo copy: {exc}"
        return True, f"approved by {decision.decided_by}" + (f"; {note}" if note else "")

    # -- shell --------------------------------------------------------------------------------
    def _shell(self, command: Any) -> ToolOutput:
        if not isinstance(command, str):
            raise ToolRefused("command must be a string")
        verdict = self._classify(command)
        self._law1_class = verdict.level
        if verdict.protected:
            raise ToolRefused(f"{law1.LAW1} refused: `{command}` {verdict.reason}", law1=True)
        if not self.sandbox.usable:      # fail closed: no sandbox, no commands
            raise ToolRefused(f"refused: the tool sandbox cannot start: {self.sandbox.detail}")
        confined = self.sandbox.mode == "bubblewrap"
        prefix, network = "", self.network
        net = sandbox.needs_network(command) if confined and not network else ""
        if net:
            ok, note = self._approved(kind="network", command=command, paths=[],
                                      classification="network",
                                      reason=f"`{net}` needs the network, which this run was "
                                             f"not granted (artoo run --network)",
                                      snapshot_roots=[], keep_undo=False)
            if not ok:
                return ToolOutput(output=note, error=note, target=command, law1=True)
            prefix, network = f"[{note}]\n", True
        # In the sandbox an unknown program can only touch the workspace: it runs without
        # asking, after an undo copy of the workspace. Deletes and overwrites still ask.
        if sandbox.asks_operator(verdict, confined=confined):
            ok, note = self._approved(kind="shell", command=command, paths=verdict.paths,
                                      classification=verdict.level, reason=verdict.reason,
                                      snapshot_roots=verdict.snapshot_roots)
            if not ok:
                return ToolOutput(output=note, error=note, target=command, law1=True)
            prefix += f"[{note}]\n"
        elif verdict.needs_approval and self.undo is not None:
            try:
                self.undo.save([], command=command, subtask_id=self.subtask_id,
                               snapshot_roots=[self.workspace])
            except OSError:
                pass
        return self._bash_output(command, prefix, network=network)

    def _bash_output(self, command: str, prefix: str = "", *, network: bool = False,
                     writable: bool = True) -> ToolOutput:
        out, code, timed_out = self._run_bash(command, network=network, writable=writable)
        out = self._redact(out)
        if timed_out:
            error = f"timed out after {self.settings.shell_timeout_s:g}s (process group killed)"
        elif code != 0:
            last = next((ln for ln in reversed(out.strip().splitlines()) if ln.strip()), "")
            error = f"exit status {code}" + (f": {last[:200]}" if last else "")
        else:
            error = None
        return ToolOutput(output=prefix + (out if out.strip() else "(no output)"), error=error,
                          target=command)

    def run_confined(self, command: str, *, writable: bool = True) -> ToolOutput:
        """Any program, without the Law 1 gate and without asking, in the sandbox and only there
        (without bubblewrap it is refused): for a check that runs on a scratch copy of the
        workspace (or read-only), where what the gate cannot classify — a Python program — can
        harm nothing."""
        if self.sandbox.mode != "bubblewrap":
            return ToolOutput(error=f"refused: a program runs unasked only in the sandbox "
                                    f"({self.sandbox.detail})", target=command)
        return self._bash_output(command, writable=writable)

    def _run_bash(self, command: str, *, network: bool = False, writable: bool = True
                  ) -> tuple[str, int, bool]:
        if self._reuse:
            result = self._run_in_session(command, network, writable)
            if result is not None:
                return result
        argv = [*sandbox.BASH_C, command]
        limits = None
        if self.sandbox.mode == "bubblewrap":
            limits = sandbox.Limits(self.settings)
            argv = limits.prefix() + sandbox.command_argv(
                self.settings, command, workspace=self.workspace, network=network,
                read_roots=self.read_roots, writable=writable)
        try:
            return self._spawn(argv)
        finally:
            if limits is not None:
                limits.cleanup()

    def _spawn(self, argv: list[str]) -> tuple[str, int, bool]:
        kwargs: dict[str, Any] = {}
        argv = with_pdeathsig(argv)
        if not SETPRIV:  # pragma: no cover - setpriv is part of util-linux
            kwargs["preexec_fn"] = die_with_parent
        proc = subprocess.Popen(argv, cwd=self.workspace, stdin=subprocess.DEVNULL,
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                env=self._env(), process_group=0, close_fds=True, **kwargs)
        capture = Capture(self.settings.shell_output_max_chars)
        reader = threading.Thread(target=capture.drain, args=(proc.stdout,), daemon=True)
        reader.start()
        timed_out = False
        try:
            proc.wait(self.settings.shell_timeout_s)
        except subprocess.TimeoutExpired:
            timed_out = True
        # Kill the whole group: background children must not outlive the call.
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        proc.wait()
        reader.join(2.0)
        return capture.text(), proc.returncode, timed_out

    def _env(self) -> dict[str, str]:
        env = {}
        for key, value in os.environ.items():
            if key.startswith("ARTOO_") and key not in _KEEP_ARTOO_ENV:
                continue
            if key.startswith(_DROP_ENV_PREFIXES) or _SECRET_ENV.search(key):
                continue
            env[key] = value
        env.update({"PWD": self.workspace, "PAGER": "cat", "GIT_PAGER": "cat", "TERM": "dumb",
                    "GIT_TERMINAL_PROMPT": "0"})
        return env

    def _redact(self, text: str) -> str:
        """Drop output lines that name artoo's data dir (e.g. from `find ~` or `grep -r ~`)."""
        def names_data_dir(chunk: str) -> bool:
            return any(law1.mentions_path(chunk, root) for root in self.protected)

        if not names_data_dir(text):
            return text
        lines = text.splitlines(keepends=True)
        hidden = sum(1 for ln in lines if names_data_dir(ln))
        kept = [ln for ln in lines if not names_data_dir(ln)]
        return "".join(kept) + f"[{hidden} line(s) about artoo's data dir hidden]\n"

    # -- MCP tools ----------------------------------------------------------------------------
    def _mcp_call(self, name: str, args: dict[str, Any]) -> ToolOutput:
        """One MCP tool call through the same gates as a shell command (services/safety/mcp.py):
        the operator's policy and the tool's annotations decide run / ask / deny; an approved
        call on a sandboxed server keeps an undo copy of the workspace first."""
        tool = self.mcp.tools[name]
        spec = self.mcp.specs[tool.server]
        target = f"{name} {json.dumps(args, ensure_ascii=False, sort_keys=True)}"
        problem = mcp.check_arguments(tool, args)
        if problem:
            return ToolOutput(error=problem, target=target, server=tool.server)
        verdict = mcp.classify(tool, spec)
        if verdict.action == "deny":
            text = mcp.denied_text(tool, verdict)
            return ToolOutput(output=text, error=text, target=target, law1=True,
                              server=tool.server)
        prefix = ""
        if verdict.action == "ask":
            confined = spec.transport == "stdio" and self.sandbox.mode == "bubblewrap"
            ok, note = self._approved(kind="mcp", command=target, paths=[],
                                      classification=verdict.level, reason=verdict.reason,
                                      snapshot_roots=[self.workspace] if confined else [],
                                      keep_undo=confined)
            if not ok:
                return ToolOutput(output=note, error=note, target=target, law1=True,
                                  server=tool.server)
            prefix = f"[{note}]\n"
        out = self.mcp.call(name, args)
        return ToolOutput(output=prefix + self._redact(out.output), error=out.error,
                          target=target, server=tool.server, digest=out.digest)

    # -- files --------------------------------------------------------------------------------
    def _read_file(self, path: Any) -> ToolOutput:
        real = self.confine(path, write=False)
        if os.path.isdir(real):
            raise ToolRefused(f"{path} is a directory; use the list tool")
        size = os.path.getsize(real)
        with open(real, "rb") as fh:
            data = fh.read(MAX_READ_BYTES)
        if b"\x00" in data[:8192]:
            raise ToolRefused(f"{path} is a binary file ({size} bytes)")
        text = data.decode("utf-8", errors="replace")
        if size > MAX_READ_BYTES:
            text += f"\n[file continues: {size - MAX_READ_BYTES} more bytes not read]"
        return ToolOutput(output=text if text else "(empty file)", target=self.display(real))

    def _write_file(self, path: Any, content: Any) -> ToolOutput:
        real = self.confine(path, write=True)
        if not isinstance(content, str):
            content = json.dumps(content, ensure_ascii=False, indent=2)
        if os.path.isdir(real):
            raise ToolRefused(f"{path} is a directory")
        note = ""
        if os.path.lexists(real):
            try:
                with open(real, encoding="utf-8", errors="strict") as fh:
                    if fh.read() == content:
                        return ToolOutput(output=f"{self.display(real)} already has this content "
                                                 f"(unchanged)", target=self.display(real))
            except (OSError, UnicodeDecodeError):
                pass
            self._law1_class = law1.DESTRUCTIVE
            ok, note = self._approved(kind="overwrite", command=f"write_file {path}",
                                      paths=[real], classification=law1.DESTRUCTIVE,
                                      reason=f"overwrites existing {real}", snapshot_roots=[])
            if not ok:
                return ToolOutput(output=note, error=note, target=self.display(real), law1=True)
        os.makedirs(os.path.dirname(real), exist_ok=True)
        with open(real, "w", encoding="utf-8") as fh:
            fh.write(content)
        text = f"wrote {len(content)} characters to {self.display(real)}"
        return ToolOutput(output=text + (f" [{note}]" if note else ""), target=self.display(real))

    def _list(self, path: Any = None) -> ToolOutput:
        real = self.confine(path or ".", write=False)
        if not os.path.isdir(real):
            raise ToolRefused(f"{path} is not a directory")
        rows = []
        with os.scandir(real) as it:
            entries = sorted(it, key=lambda e: e.name)
        for entry in entries:
            full = os.path.realpath(entry.path)
            if any(law1.within(full, root) for root in self.protected):
                continue
            try:
                if entry.is_dir():
                    rows.append(f"{entry.name}/")
                else:
                    rows.append(f"{entry.name}  {entry.stat().st_size} B")
            except OSError:
                rows.append(f"{entry.name}  (unreadable)")
        extra = f"\n… {len(rows) - MAX_LIST} more entries" if len(rows) > MAX_LIST else ""
        body = "\n".join(rows[:MAX_LIST]) + extra
        return ToolOutput(output=body or "(empty directory)", target=self.display(real))

    def _glob(self, pattern: Any, root: Any = None) -> ToolOutput:
        if not isinstance(pattern, str) or ".." in PurePosixPath(pattern).parts \
                or pattern.startswith(("/", "~")):
            raise ToolRefused("glob patterns are relative to root and may not contain '..'")
        base = self.confine(root or ".", write=False)
        matches = []
        iterator = Path(base).rglob(pattern) if "/" not in pattern else Path(base).glob(pattern)
        for match in iterator:
            real = os.path.realpath(match)
            if any(law1.within(real, r) for r in self.protected):
                continue
            if any(part in _SKIP_DIRS for part in match.relative_to(base).parts[:-1]):
                continue
            matches.append(self.display(str(match)))
            if len(matches) > MAX_LIST:
                break
        if not matches:
            return ToolOutput(output=f"(no files matched {pattern} under {self.display(base)})",
                              target=pattern)
        more = "\n… more matches not shown" if len(matches) > MAX_LIST else ""
        return ToolOutput(output="\n".join(sorted(matches[:MAX_LIST])) + more, target=pattern)

    def _search_text(self, pattern: Any, path: Any = None, glob: Any = None) -> ToolOutput:
        if not isinstance(pattern, str):
            raise ToolRefused("pattern must be a string")
        try:
            regex = re.compile(pattern)
        except re.error:
            regex = re.compile(re.escape(pattern))
        base = self.confine(path or ".", write=False)
        deadline = time.monotonic() + self.settings.search_timeout_s
        hits: list[str] = []
        files = [base] if os.path.isfile(base) else _walk_files(base, glob)
        truncated = False
        for file in files:
            if time.monotonic() > deadline:
                truncated = True
                break
            if any(law1.within(os.path.realpath(file), r) for r in self.protected):
                continue
            try:
                if os.path.getsize(file) > MAX_READ_BYTES:
                    continue
                with open(file, "rb") as fh:
                    data = fh.read()
            except OSError:
                continue
            if b"\x00" in data[:8192]:
                continue
            for lineno, line in enumerate(data.decode("utf-8", "replace").splitlines(), 1):
                if regex.search(line):
                    hits.append(f"{self.display(file)}:{lineno}: {line.strip()[:200]}")
                    if len(hits) >= MAX_MATCHES:
                        truncated = True
                        break
            if len(hits) >= MAX_MATCHES:
                break
        if not hits:
            return ToolOutput(output=f"(no matches for {pattern!r} under {self.display(base)})",
                              target=pattern)
        tail = "\n… search stopped early (limit reached)" if truncated else ""
        return ToolOutput(output="\n".join(hits) + tail, target=pattern)

    # -- web search ---------------------------------------------------------------------------
    def search_configured(self) -> bool:
        return bool(self.settings.search_url or os.environ.get("SERPER_API_KEY"))

    def _web_search(self, query: Any) -> ToolOutput:
        if not isinstance(query, str) or not query.strip():
            raise ToolRefused("query must be a non-empty string")
        if not self.search_configured():
            return ToolOutput(error="web_search unavailable: no search provider is configured "
                                    "(set ARTOO_SEARCH_URL to a SearXNG-style JSON endpoint or "
                                    "SERPER_API_KEY); answer from local tools or say it is not "
                                    "possible", target=query)
        timeout = self.settings.search_timeout_s
        if self.settings.search_url:
            url = self.settings.search_url
            sep = "&" if "?" in url else "?"
            req = urllib.request.Request(f"{url}{sep}" + urllib.parse.urlencode(
                {"q": query, "format": "json"}), headers={"User-Agent": "artoo"})
            with urllib.request.urlopen(req, timeout=timeout) as resp:
                payload = json.loads(resp.read().decode("utf-8", "replace"))
            results = [(r.get("title", ""), r.get("content", ""), r.get("url", ""))
                       for r in payload.get("results", [])]
        else:
            req = urllib.request.Request(
                "https://google.serper.dev/search",
                data=json.dumps({"q": query, "num": 10}).encode(),
                headers={"X-API-KEY": os.environ["SERPER_API_KEY"],
                         "Content-Type": "application/json"})
            with urllib.request.urlopen(req, timeout=timeout) as resp:
                payload = json.loads(resp.read().decode("utf-8", "replace"))
            results = [(r.get("title", ""), r.get("snippet", ""), r.get("link", ""))
                       for r in payload.get("organic", [])]
        if not results:
            return ToolOutput(output=f"no results for {query!r}", target=query)
        blocks = ["\n".join(x for x in (t, s, u) if x) for t, s, u in results[:5]]
        return ToolOutput(output="\n\n".join(blocks), target=query)


def _walk_files(base: str, glob: Any):
    import fnmatch
    for dirpath, dirs, files in os.walk(base):
        dirs[:] = sorted(d for d in dirs if d not in _SKIP_DIRS)
        for name in sorted(files):
            if glob and isinstance(glob, str) and not fnmatch.fnmatch(name, glob):
                continue
            yield os.path.join(dirpath, name)

