"""`artoo run "GOAL"` and `artoo repl`: submit a goal, render the pipeline live, answer prompts.

The CLI is the bus role "user". It assigns the run id in code (`run-YYYYmmdd-HHMMSS-xxxx`), sends the
UserRequest (acknowledged by the perceiver), watches every message of that run, and acknowledges only
its own runs' FinalResult, ClarificationRequest, ConversationalReply and ApprovalRequest.

A run ends with exactly one of: a FinalResult (from GGS) or a ConversationalReply (the perceiver's
greeting fast path; then there is no TaskSpec and no FinalResult). Exit codes (EXIT_CODES): 0 done
and verified (or a conversational reply), 3 done but not verified, 4 not possible, 1 abandoned
(including a cancelled run) or no result, 2 usage/configuration errors such as an unreachable
daemon. Ctrl+C publishes TaskCancel (repeated until the FinalResult
arrives), which every role and the spawner act on; GGS then delivers the abandon FinalResult.
"""
from __future__ import annotations

import json
import os
import queue
import sys
import time
from collections import OrderedDict
from pathlib import Path
from typing import Any

import click
from rich.console import Console
from rich.markup import escape

from protocol.bus import BusClient, BusTimeout
from protocol.messages import (ApprovalDecision, ApprovalRequest, ClarificationReply,
                               ClarificationRequest, ConversationalReply, RunOptions, TaskCancel,
                               UserRequest)
from protocol.settings import Settings, load_settings, workspace_problem

from services.runtime import tasklog
from . import render

RESULT_GRACE_S = 30.0       # wait this long past the task deadline before giving up
CANCEL_REPEAT_S = 1.0
CANCEL_WAIT_S = 15.0
ENDED_RUNS_KEPT = 1000       # finished run ids remembered to drop a duplicate terminal message


class ConfigError(Exception):
    """A usage or configuration problem: exit code 2."""


new_run_id = tasklog.new_run_id


def connect(settings: Settings, timeout: float = 5.0) -> BusClient:
    """A started user-role client, or ConfigError with a clear message when the daemon is down."""
    xpub = settings.endpoint("xpub")
    if xpub.startswith("ipc://") and not Path(xpub[len("ipc://"):]).exists():
        raise ConfigError(f"the artoo daemon is not running (no bus at {xpub}); start it with "
                          f"`artoo up`")
    client = BusClient("user", settings=settings, heartbeat=False)
    return client


class RunSession:
    """One operator's connection: submits goals and follows their runs to the end."""

    def __init__(self, settings: Settings, console: Console, *, yes: bool = False,
                 interactive: bool | None = None, quiet: bool = False):
        self.settings = settings
        self.console = console
        self.yes = yes
        self.workspace = ""              # this session's runs' workspace ("" = the daemon's)
        self.network = False             # tool commands may use the network (--network)
        self.max_llm_calls: int | None = None  # the task's LLM call bound (--max-llm-calls)
        self.interactive = sys.stdin.isatty() if interactive is None else interactive
        self.quiet = quiet
        self._cancel_at: float | None = None    # when this session first cancelled its run
        self._last_cancel = 0.0
        self.queues: dict[str, queue.Queue] = {}    # run id -> its events, for follow()
        self.seen: dict[str, list] = {}              # run id -> (envelope, message) observed
        self.usages: dict[str, list[dict]] = {}
        self.shown: dict[str, set] = {}              # run id -> events already rendered
        # runs whose terminal message arrived: a second one (a re-send under a new id) is acked
        # and dropped, never rendered or returned twice
        self.ended: OrderedDict[str, None] = OrderedDict()
        self.client = connect(settings)
        c = self.client
        mine = lambda env, _m: env.task in self.queues  # noqa: E731 - ack only our own runs
        ours = lambda env, _m: env.task in self.queues or env.task in self.ended  # noqa: E731
        c.on("*", self._observe, when=mine)
        c.on("FinalResult", self._terminal, ack=True, when=ours)
        c.on("ConversationalReply", self._terminal, ack=True, when=ours)
        c.on("ClarificationRequest", self._prompt, ack=True, when=mine)
        c.on("ApprovalRequest", self._approval, ack=True, when=mine)
        try:
            c.start(timeout=5.0)
        except BusTimeout as exc:
            raise ConfigError(f"cannot reach the artoo bus ({exc}); is the daemon running? "
                              f"(`artoo up`)") from None

    def close(self) -> None:
        self.client.stop(drain_s=1.0)

    # -- bus handlers (loop thread: only queue work for the main thread) ------------------------
    def _observe(self, env, msg) -> None:
        if env.type == "LlmUsage":
            self.usages.setdefault(env.task, []).append(msg.model_dump())
            return
        self.seen[env.task].append((env, msg))
        # each event once: a re-send keeps its envelope id, and the planner's forward of an
        # outcome repeats the agent-validator's
        key = (("SubTaskOutcome", msg.subtask_id, msg.status) if env.type == "SubTaskOutcome"
               else env.id)
        shown = self.shown.setdefault(env.task, set())
        if key in shown:
            return
        shown.add(key)
        self._put("msg", env, msg)

    def _put(self, kind: str, env, msg) -> None:
        q = self.queues.get(env.task)
        if q is not None:
            q.put((kind, env, msg))

    def _terminal(self, env, msg) -> None:
        if env.task in self.ended:
            return  # a duplicate terminal message: acked (so the sender stops), not rendered
        self.ended[env.task] = None
        while len(self.ended) > ENDED_RUNS_KEPT:
            self.ended.popitem(last=False)
        self._put("end", env, msg)

    def _prompt(self, env, msg: ClarificationRequest) -> None:
        if not self.interactive:  # the perceiver should not ask then; answer "proceed" anyway
            self.client.send(ClarificationReply(task_id=msg.task_id, answer="", round=msg.round))
            return
        self._put("clarify", env, msg)

    def _approval(self, env, msg: ApprovalRequest) -> None:
        if self.yes:
            self._decide(msg, True, "--yes", "pre-approved with --yes")
        elif not self.interactive:
            self._decide(msg, False, "no-operator", "no operator to ask (non-interactive)")
        else:
            self._put("approve", env, msg)

    def _decide(self, req: ApprovalRequest, approved: bool, by: str, reason: str) -> None:
        self.client.send(ApprovalDecision(task_id=req.task_id, approval_id=req.approval_id,
                                          approved=approved, decided_by=by, reason=reason),
                         to="executor")
        tasklog.append(self.settings.tasks_dir, req.task_id, "approval",
                       approval_id=req.approval_id, approved=approved, decided_by=by,
                       command=req.command, paths=req.paths)

    # -- submitting and following a run ---------------------------------------------------------
    def submit(self, text: str, *, run_id: str | None = None, history: list[str] | None = None,
               deadline_s: float | None = None, session_id: str = "") -> str:
        run_id = run_id or new_run_id()
        self.queues[run_id] = queue.Queue()
        self.seen[run_id] = []
        options = RunOptions(yes=self.yes, interactive=self.interactive, deadline_s=deadline_s,
                             workspace=self.workspace, network=self.network,
                             max_llm_calls=self.max_llm_calls)
        self.client.send(UserRequest(task_id=run_id, text=text, options=options,
                                     history=list(history or [])[-5:], session_id=session_id))
        return run_id

    def follow(self, run_id: str, deadline_s: float | None = None):
        """Render the run until its FinalResult / ConversationalReply; Ctrl+C cancels it.

        Returns the terminal message, or None when nothing arrived in time."""
        limit = time.monotonic() + (deadline_s or self.settings.task_deadline_s) + RESULT_GRACE_S
        live = self.console.is_terminal and not self.quiet
        status = self.console.status("perceiving the request", spinner="dots") if live else None
        if status:
            status.start()
        self._cancel_at, self._last_cancel = None, 0.0
        try:
            while True:
                try:
                    done, final = self._step(run_id, limit, status)
                except KeyboardInterrupt:
                    if self._cancel_at is not None:
                        return None  # second Ctrl+C: stop waiting
                    self._cancel(run_id)
                    self._say("[yellow]⚠ cancelling the task (Ctrl+C again to stop waiting)[/yellow]")
                    continue
                if done:
                    return final
        finally:
            if status:
                status.stop()

    def cancel(self, run_id: str, wait_s: float = CANCEL_WAIT_S):
        """Cancel a run this session did not submit (`artoo tasks cancel`): TaskCancel, repeated
        until its FinalResult arrives; the FinalResult, or None after `wait_s`."""
        self.queues.setdefault(run_id, queue.Queue())
        self.seen.setdefault(run_id, [])
        self._cancel_at = None
        self._cancel(run_id)
        limit = time.monotonic() + wait_s
        while True:
            done, final = self._step(run_id, limit, None)
            if done:
                return final

    def _cancel(self, run_id: str) -> None:
        now = time.monotonic()
        if self._cancel_at is None:
            self._cancel_at = now
        self._last_cancel = now
        self.client.publish(TaskCancel(task_id=run_id, reason="cancelled by operator (Ctrl+C)"))

    def _step(self, run_id: str, limit: float, status) -> tuple[bool, Any]:
        """Handle one event (or a 0.2 s tick); (True, terminal message or None) ends the run."""
        now = time.monotonic()
        if self._cancel_at is not None:
            if now - self._cancel_at > CANCEL_WAIT_S:
                return True, None
            if now - self._last_cancel >= CANCEL_REPEAT_S:
                self._cancel(run_id)  # repeated: TaskCancel is a published (droppable) message
        if now > limit:
            return True, None
        try:
            kind, env, msg = self.queues[run_id].get(timeout=0.2)
        except queue.Empty:
            return False, None
        if kind == "msg":
            line = render.describe(env, msg)
            if line and not self.quiet:
                self._say(line)
            label = render.waiting_label(env.type)
            if status and label:
                status.update(label)
        elif kind == "end":
            return True, msg
        elif kind == "clarify":
            self._ask_clarification(msg, status)
        elif kind == "approve":
            self._ask_approval(msg, status)
        return False, None

    def _say(self, line: str) -> None:
        self.console.print(line, highlight=False)

    def _ask_clarification(self, msg: ClarificationRequest, status) -> None:
        if status:
            status.stop()
        try:
            answer = self.console.input(f"[bold cyan]?[/bold cyan] {escape(msg.question)}\n  > ")
        except (EOFError, KeyboardInterrupt):
            answer = ""
        finally:
            if status:
                status.start()
        self.client.send(ClarificationReply(task_id=msg.task_id, answer=answer.strip(),
                                            round=msg.round))

    def _ask_approval(self, msg: ApprovalRequest, status) -> None:
        if status:
            status.stop()
        lines = [f"[bold yellow]Law 1 approval[/bold yellow] for a {msg.kind} action "
                 f"({escape(msg.classification or 'unclassified')})"]
        if msg.command:
            lines.append(f"  command: [bold]{escape(msg.command)}[/bold]")
        for p in msg.paths:
            lines.append(f"  path:    {escape(p)}")
        if msg.reason:
            lines.append(f"  why:     {escape(msg.reason)}")
        for line in lines:
            self._say(line)
        try:
            answer = self.console.input("  Allow this exact action? [y/N] ")
        except (EOFError, KeyboardInterrupt):
            answer = ""
        finally:
            if status:
                status.start()
        approved = answer.strip().lower() in ("y", "yes")
        self._decide(msg, approved, "operator", "approved by the operator" if approved
                     else "denied by the operator")

    # -- after the run ------------------------------------------------------------------------------
    def usage_of(self, run_id: str) -> list[dict]:
        """LlmUsage seen live; the task log's llm_call records fill in any the bus dropped."""
        live = self.usages.get(run_id, [])
        logged = [e for e in tasklog.read(self.settings.tasks_dir, run_id) if e.get("kind") == "llm_call"]
        return logged if len(logged) > len(live) else live

    def forget(self, run_id: str) -> None:
        """Drop a finished run's buffers (a REPL session runs many)."""
        self.queues.pop(run_id, None)
        self.seen.pop(run_id, None)
        self.usages.pop(run_id, None)
        self.shown.pop(run_id, None)

    def report(self, run_id: str, final) -> None:
        if isinstance(final, ConversationalReply):
            self.console.print(f"🤖 {escape(final.answer)}", highlight=False)
            return
        self.console.rule("Result", align="left")
        for line in render.result_markup(final):
            self.console.print(line, highlight=False)
        trail = render.decision_trail(tasklog.read(self.settings.tasks_dir, run_id))
        if trail:
            self.console.rule("Decisions", align="left")
            for line in trail:
                self.console.print(escape(line), highlight=False)
        usage = self.usage_of(run_id)
        if usage:
            self.console.print(render.cost_table(usage))
        self.console.print(f"[dim]run {run_id} — log {tasklog.log_path(self.settings.tasks_dir, run_id)}[/dim]",
                           highlight=False)


EXIT_CODES = {"verified": 0, "abandoned": 1, "unverified": 3, "not_possible": 4}


def exit_code(final) -> int:
    if final is None:
        return 1
    if isinstance(final, ConversationalReply):
        return 0
    return EXIT_CODES.get(final.status, 1)


def terminal_json(final, usage: list[dict] | None = None, workspace: str = "") -> str:
    """The FinalResult for scripts, with the run's cost (calls, tokens, seconds per role) and
    its workspace."""
    body = final.model_dump(mode="json")
    if usage is not None:
        body["cost"] = render.cost_summary(usage)
    if workspace:
        body["workspace"] = workspace
    return json.dumps(body, ensure_ascii=False, default=str)


# ---------------------------------------------------------------------------------------------
# commands
# ---------------------------------------------------------------------------------------------

def _settings() -> Settings:
    try:
        return load_settings()
    except ValueError as exc:
        raise click.UsageError(str(exc)) from None


def _fail(console: Console, message: str, code: int = 2) -> None:
    console.print(f"[red]error:[/red] {escape(message)}", highlight=False)
    sys.exit(code)


NETWORK_HELP = ("let tool commands use the network (the sandbox has none; without this, "
                "network programs ask the operator)")
WORKSPACE_HELP = "the runs' workspace (default: ARTOO_WORKSPACE if set, else the current directory)"


def _use_workspace(session: "RunSession", workspace: str | None, err: Console) -> None:
    """Point the session's runs at the user's workspace: `--workspace`, else the client's own
    ARTOO_WORKSPACE, else the current directory (like Codex CLI or aider: work where the user is).
    The result always travels with the request, so the daemon's own ARTOO_WORKSPACE never decides
    where a user's files land; unsafe places end the command with exit 2 before anything is
    submitted."""
    env_ws = os.environ.get("ARTOO_WORKSPACE")
    if workspace is not None:
        where = "--workspace"
    elif env_ws:
        where, workspace = "ARTOO_WORKSPACE", env_ws
    else:
        where, workspace = "the current directory", os.getcwd()
    problem = workspace_problem(workspace, session.settings)
    if problem:
        session.close()
        _fail(err, f"{where} refused as the workspace: {problem}; cd into a project directory "
                   f"or pass --workspace DIR", 2)
    session.workspace = os.path.realpath(os.path.expanduser(workspace))


@click.command()
@click.argument("goal", nargs=-1, required=True)
@click.option("--yes", is_flag=True, help="pre-approve Law 1 actions (deletes, overwrites, ...)")
@click.option("--json", "as_json", is_flag=True, help="print only the FinalResult as JSON")
@click.option("--deadline", type=float, default=None, help="task deadline in seconds")
@click.option("--workspace", "-w", default=None, metavar="DIR", help=WORKSPACE_HELP)
@click.option("--network", is_flag=True, help=NETWORK_HELP)
@click.option("--max-llm-calls", type=click.IntRange(min=0), default=None, metavar="N",
              help="the task makes at most N LLM calls (0 = no bound; default "
                   "ARTOO_TASK_LLM_CALLS, or ARTOO_LOCAL_TASK_LLM_CALLS on the bundled model)")
@click.option("--run-id", default=None, hidden=True, help="use this run id (automation)")
def run(goal: tuple[str, ...], yes: bool, as_json: bool, deadline: float | None,
        workspace: str | None, network: bool, max_llm_calls: int | None,
        run_id: str | None) -> None:
    """Run GOAL end to end and show the pipeline live."""
    text = " ".join(goal).strip()
    err = Console(stderr=True, soft_wrap=True)
    if not text:
        raise click.UsageError("the goal is empty")
    if deadline is not None and deadline <= 0:
        raise click.UsageError("--deadline must be positive")
    settings = _settings()
    if run_id and tasklog.kinds_logged(settings.tasks_dir, run_id, tasklog.BEGUN):
        # the perceiver never starts a task its decision log shows begun (a re-delivery after
        # a restart must not run a goal twice): a reused id would wait for nothing
        _fail(err, f"run id {run_id} was used by an earlier run; run ids are not reused", 2)
    console = Console(stderr=True) if as_json else Console()
    try:
        session = RunSession(settings, console, yes=yes, quiet=as_json)
    except ConfigError as exc:
        _fail(err, str(exc), 2)
    _use_workspace(session, workspace, err)
    session.network = network
    session.max_llm_calls = max_llm_calls
    try:
        rid = session.submit(text, run_id=run_id, deadline_s=deadline)
        if not as_json:
            console.print(f"[dim]run {rid}[/dim]", highlight=False)
        final = session.follow(rid, deadline)
        if final is None:
            _fail(err, f"no result for {rid} (deadline passed or cancel unanswered); see "
                       f"{tasklog.log_path(settings.tasks_dir, rid)}", 1)
        if as_json:
            click.echo(terminal_json(final, session.usage_of(rid),
                                     session.workspace or str(settings.workspace)))
        else:
            session.report(rid, final)
        code = exit_code(final)
    finally:
        session.close()
    sys.exit(code)


REPL_HELP = """Type a goal to run it. Commands:
  /memory [verbose]   memory summary (levels, SOPs)
  /audit              an on-demand audit report from the auditor
  /help               this help
  exit, quit, Ctrl+D  leave
Ctrl+C while a task runs cancels it."""


def show_memory(session: RunSession, verbose: bool) -> None:
    """`/memory`: the memory capability's own `artoo memory stats` (and `ls` when verbose)."""
    from . import memory as memory_cli
    try:
        memory_cli.stats_cmd.callback(as_json=False)
        if verbose:
            memory_cli.ls_cmd.callback(space="", entity="", level=None, limit=50, as_json=False)
    except SystemExit:  # it reports "memory not answering" itself and exits; the REPL stays
        pass


def show_audit(session: RunSession) -> None:
    """`/audit`: an on-demand report over the auditor's operator socket (not the bus)."""
    from . import audit as audit_cli
    from auditor.operator import request_report
    try:
        audit_cli.print_report(request_report(session.settings, timeout=3.0))
    except (OSError, RuntimeError, ValueError) as exc:
        session.console.print(f"[yellow]the auditor did not answer: {escape(str(exc))}[/yellow]")


@click.command()
@click.option("--yes", is_flag=True, help="pre-approve Law 1 actions for the whole session")
@click.option("--workspace", "-w", default=None, metavar="DIR", help=WORKSPACE_HELP)
@click.option("--network", is_flag=True, help=NETWORK_HELP)
def repl(yes: bool, workspace: str | None, network: bool) -> None:
    """Interactive session: run goals one after another with the same live rendering."""
    settings = _settings()
    console = Console()
    try:
        session = RunSession(settings, console, yes=yes, interactive=sys.stdin.isatty())
    except ConfigError as exc:
        _fail(Console(stderr=True), str(exc), 2)
    _use_workspace(session, workspace, Console(stderr=True))
    session.network = network
    history: list[str] = []
    console.print("[bold]artoo[/bold] — /help for commands", highlight=False)
    idle_interrupt = False
    try:
        while True:
            try:
                line = console.input("🧑 > ")
            except EOFError:
                break
            except KeyboardInterrupt:
                if idle_interrupt:
                    break
                idle_interrupt = True
                console.print("\n(Ctrl+C again or type 'exit' to quit)")
                continue
            idle_interrupt = False
            text = line.strip()
            if not text:
                continue
            if text in ("exit", "quit"):
                break
            if text == "/help":
                console.print(REPL_HELP, highlight=False)
                continue
            if text.startswith("/memory"):
                show_memory(session, verbose="verbose" in text)
                continue
            if text == "/audit":
                show_audit(session)
                continue
            rid = session.submit(text, history=history)
            final = session.follow(rid)
            if final is None:
                console.print("[red]no result (cancel unanswered or deadline passed)[/red]")
                continue
            session.report(rid, final)
            session.forget(rid)
            summary = final.answer if isinstance(final, ConversationalReply) else final.summary
            history.append(f"[{len(history) + 1}] User: {text}\n    Result: {render.clip(summary, 300)}")
            history = history[-5:]
    finally:
        session.close()


def register(main: click.Group) -> None:
    main.add_command(run)
    main.add_command(repl)
