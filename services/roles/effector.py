"""The effector process: R3 Executor + R4a Agent-Validator for exactly one subtask, then exit.

Started by the spawner (forked from its preloaded zygote) with one SubTask. Both roles live on one
BusClient and speak as themselves (`as_role`). R3 hands each ExecutionResult to R4a in this
process and publishes it once (directed at this process's node: the tap and the observers see the
fast loop); R4a answers the same way with a CorrectionSignal (the design's "dual publish": a direct
channel to its R3 and a bus copy), or with the final SubTaskOutcome, sent to metaval and planner and
acknowledged by both. Taking them from the bus instead cost a round trip through the proxy per
attempt (~1.9 ms on an idle machine) and a re-publish watchdog against PUB/SUB drops. A deadline
watchdog sends an honest failed outcome shortly before the spawner's hard kill. Law 1 approvals
are asked over the bus (ApprovalRequest → ApprovalDecision, acked only by the effector that asked).

Exit codes: 0 outcome delivered, 1 crashed, 3 outcome not acknowledged in time, 4 deadline.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import os
import queue
import secrets
import sys
import threading
import time
from pathlib import Path
from typing import Callable, Optional

from protocol.bus import BusClient
from protocol.messages import CriterionVerdict, ExecutionResult, SubTask, SubTaskOutcome
from protocol.settings import Settings, load_settings, workspace_problem

from services.runtime import llm, tasklog, telemetry
from services.safety import law1, referents, sandbox_session
from .agentval import AgentValidator, Judgement
from .executor import Executor
from services.runtime.llm import Budgeted, CallBudget, LLMClient
from services.runtime.journal import ToolJournal
from services.runtime.role import transition_publisher
from services.safety.mcpclient import McpHub
from services.safety.tools import Toolbox
from .verifier import Verifier

log = logging.getLogger("artoo.effector")

EXIT_DELIVERED, EXIT_CRASHED, EXIT_UNACKED, EXIT_DEADLINE = 0, 1, 3, 4


class RoleBus:
    """Lets a second role in this process (agentval) publish its LLM accounting as itself."""

    def __init__(self, client: BusClient, role: str):
        self.client = client
        self.role = role

    def publish(self, msg, **kwargs):
        return self.client.publish(msg, as_role=self.role, **kwargs)


class Effector:
    """The fast loop of one subtask, wired over one bus client."""

    def __init__(self, subtask: SubTask, settings: Settings, client: BusClient,
                 executor: Executor, validator: AgentValidator, *, deadline_at: float,
                 exit_on_deadline: bool = True):
        self.subtask = subtask
        self.settings = settings
        self.client = client
        self.executor = executor
        self.validator = validator
        self.deadline_at = deadline_at
        self.exit_on_deadline = exit_on_deadline
        self.events: queue.Queue = queue.Queue()
        self._outcome_lock = threading.Lock()
        self.outcome: Optional[SubTaskOutcome] = None
        self.acked = threading.Event()
        self.ack_ok = False
        self._timer: Optional[threading.Timer] = None

    def _hand_over(self, msg, role: str) -> None:
        """The bus copy of a message R3 and R4a hand each other in this process."""
        self.client.publish(msg, as_role=role, to="agentval" if role == "executor" else "executor",
                            node=self.client.node)

    # -- R4a side -----------------------------------------------------------------------------
    def on_result(self, result: ExecutionResult) -> None:
        """Judge one attempt's result (R3 waits for the correction or the outcome)."""
        if self.outcome is not None:
            return
        try:
            judgement = self.validator.judge(result)
        except Exception as exc:  # a validator bug still ends in an honest outcome
            log.exception("validator failed")
            judgement = Judgement("failed", outcome=self._failed_outcome(
                f"validator crashed: {type(exc).__name__}: {exc}"))
        if judgement.kind == "retry" and judgement.correction is not None:
            self._hand_over(judgement.correction, "agentval")
            self.events.put(("correction", judgement.correction))
        else:
            self.deliver(judgement.outcome)

    def deliver(self, outcome: SubTaskOutcome) -> bool:
        """Send the one SubTaskOutcome of this subtask (first caller wins)."""
        with self._outcome_lock:
            if self.outcome is not None:
                return False
            self.outcome = outcome

        def done(ok: bool) -> None:
            self.ack_ok = ok
            self.acked.set()

        self.client.send(outcome, consumers=("metaval", "planner"), as_role="agentval",
                         on_done=done)
        self.events.put(("final", outcome))
        return True

    def _failed_outcome(self, reason: str) -> SubTaskOutcome:
        return self.validator.deadline_outcome(self.executor.history, reason)

    # -- deadline -----------------------------------------------------------------------------
    def arm_deadline(self) -> None:
        budget = self.deadline_at - time.time()
        margin = min(self.settings.effector_deadline_margin_s, max(0.5, budget * 0.1))
        delay = max(0.0, budget - margin)
        self._timer = threading.Timer(delay, self._on_deadline, args=(margin,))
        self._timer.daemon = True
        self._timer.start()

    def _on_deadline(self, margin: float) -> None:
        calls = len(self.executor.history)
        sent = self.deliver(self._failed_outcome(
            f"deadline: the subtask ran out of time after {calls} tool call(s)"))
        if sent:
            self.acked.wait(max(0.2, margin * 0.8))
        if self.exit_on_deadline:
            telemetry.shutdown(1000)       # os._exit skips atexit: export the spans first
            os._exit(EXIT_DEADLINE)

    # -- main loop ----------------------------------------------------------------------------
    def missing_referents(self) -> list:
        """The referents the goal reads and the workspace lacks (resolved by the perceiver, and
        still missing now: an earlier subtask may have made one)."""
        st = self.subtask
        goal = st.goal or st.intent
        missing = referents.decisive(goal, referents.coerce(st.referents))
        if not missing:
            return []
        now = {(r.kind, r.text) for r in referents.resolve(
            goal, str(self.settings.workspace), referents.coerce(missing)) if r.status == "missing"}
        return [r for r in missing if (r.kind, r.text) in now]

    def run(self) -> int:
        self.arm_deadline()
        missing = self.missing_referents()
        if missing:                        # not_possible in code: no model call at all
            self.deliver(self.validator.absent_outcome(missing))
            delivered = self.acked.wait(self.settings.effector_ack_wait_s)
            if self._timer:
                self._timer.cancel()
            return EXIT_DELIVERED if delivered and self.ack_ok else EXIT_UNACKED
        if self.validator.verifier is not None:
            self.validator.verifier.start(self.executor.journal)  # before the first tool call
        attempt, correction = 1, None
        while self.outcome is None:
            result = self.executor.run_attempt(attempt, correction)
            if self.outcome is not None:
                break
            self._hand_over(result, "executor")
            self.on_result(result)
            kind, payload = self._next_event()
            if kind == "final":
                break
            correction = payload
            attempt = payload.attempt_number + 1
        delivered = self.acked.wait(self.settings.effector_ack_wait_s)
        if self._timer:
            self._timer.cancel()
        return EXIT_DELIVERED if delivered and self.ack_ok else EXIT_UNACKED

    def _next_event(self):
        while True:
            try:
                return self.events.get(timeout=0.5)
            except queue.Empty:
                if self.outcome is not None:
                    return ("final", self.outcome)


def warm_schemas() -> None:
    """Build the JSON schemas R3 and R4a send with every call (llm._schema_for caches them per
    process) before the zygote forks: each forked effector otherwise rebuilds them on its first
    call, on the subtask's path."""
    from .agentval import ValidatorReply
    from .executor import ExecutorStep
    for model in (ExecutorStep, ValidatorReply):
        try:
            llm._schema_for(model)
            llm._grammar_schema_for(model)
        except Exception:  # noqa: BLE001 - an optimisation: the call builds it then
            log.debug("schema warm-up of %s failed", model.__name__, exc_info=True)


def build_llms(settings: Settings) -> dict[str, LLMClient]:
    """The LLM clients of an effector (built once in the spawner's zygote when possible): R3,
    R4a, and R4a's independent checker (its own role name, so its cost shows apart)."""
    return {"executor": LLMClient.for_role("executor", settings),
            "agentval": LLMClient.for_role("agentval", settings),
            "verifier": LLMClient.for_role("verifier", settings)}


def run_effector(subtask: SubTask, settings: Settings | None = None, *,
                 ready: Callable[[], None] | None = None,
                 llms: dict[str, LLMClient] | None = None,
                 exit_on_deadline: bool = True, trace: str | None = None,
                 client: BusClient | None = None) -> int:
    """Run one subtask to its outcome; returns the process exit code. `trace`: the context of
    the spawner's span for this subtask (its "subtask" span is a child of it); `client`: a bus
    client already started (a spare effector's, `connect_early`)."""
    settings = settings or load_settings()
    task_id, sid = subtask.parent_task_id, subtask.subtask_id
    ws_problem = ""
    if subtask.options.workspace:      # the run's own workspace (checked again here: defence)
        ws_problem = workspace_problem(subtask.options.workspace, settings)
        if not ws_problem:
            settings = dataclasses.replace(settings, workspace=Path(subtask.options.workspace))
    if subtask.options.network:        # the run was granted the network (`artoo run --network`)
        settings = dataclasses.replace(settings, sandbox_network=True)
    deadline_at = subtask.deadline_at or (time.time() + settings.subtask_deadline_s)
    client = client or _new_client(settings)
    telemetry.init("effector", node=client.node, client=client)
    llm_error = f"the run's workspace is refused: {ws_problem}" if ws_problem else ""
    try:
        llms = llms or build_llms(settings)
    except Exception as exc:  # LLMError or a broken configuration
        llm_error = f"no LLM available for the effector: {exc}"
        llms = {"executor": None, "agentval": None, "verifier": None}
    if llms["executor"] is not None and subtask.llm_calls_left is not None:
        budget = CallBudget(subtask.llm_calls_left)     # one bound for the executor and checkers
        llms = {k: (Budgeted(v, budget) if v is not None else None) for k, v in llms.items()}
    if llms["executor"] is not None:
        llms["executor"].bus = client
        llms["agentval"].bus = RoleBus(client, "agentval")
        if llms.get("verifier") is not None:
            llms["verifier"].bus = RoleBus(client, "agentval")
    gate = law1.ApprovalGate(client, subtask, settings, deadline_at=deadline_at)
    hub = None if llm_error else McpHub.from_settings(
        settings, workspace=str(settings.workspace),
        read_roots=[r for r in settings.read_roots.split(":") if r.strip()])
    toolbox = Toolbox(settings, approve=gate.ask, undo=law1.UndoStore(settings, task_id),
                      subtask_id=sid, mcp_hub=hub)
    toolbox.prewarm()              # the attempt's one sandbox starts while the bus connects
    journal = ToolJournal(settings, task_id, sid, deadline_at)
    executor = Executor(subtask, llms["executor"], toolbox, settings, journal=journal)
    verifier = Verifier(subtask, llms["verifier"], settings) if llms.get("verifier") else None
    validator = AgentValidator(subtask, llms["agentval"], settings, verifier=verifier)
    if llms["executor"] is not None and subtask.llm_calls_left is not None:
        # the checkers' calls are kept back from the executor: an answer is never left
        # unchecked because the executor spent the whole budget
        llms["executor"].budget_keep = int(verifier is not None) + int(not validator.code_only)
    effector = Effector(subtask, settings, client, executor, validator, deadline_at=deadline_at,
                        exit_on_deadline=exit_on_deadline)
    tasklog.set_after_append(transition_publisher(client))    # a Law 1 approval blocks the task
    # re-sent until this effector acks it, and only ever the answer to its own request, sent long
    # after this: a spare's client (started already) need not wait for a handshake
    client.on("ApprovalDecision", gate.on_decision, ack=True, task=task_id, when=gate.expects,
              prove=False)
    if not client.ready:
        client.start()
    if ready:
        ready()
    tasklog.append(settings.tasks_dir, task_id, "subtask_begin", subtask_id=sid,
                   intent=subtask.intent, sequence=subtask.sequence,
                   criteria=[c.model_dump() for c in subtask.success_criteria], pid=os.getpid())
    sp = telemetry.span("subtask", task=task_id, parent=trace, attrs={
        "artoo.subtask.id": sid, "artoo.subtask.intent": subtask.intent[:200],
        "artoo.subtask.sequence": subtask.sequence, "artoo.plan_round": subtask.plan_round})
    sp.__enter__()
    if hub is not None:
        discover_mcp(hub, settings, task_id, sid)
    try:
        if llm_error:
            outcome = validator.deadline_outcome([], llm_error)
            outcome.criteria_verdicts = [CriterionVerdict(
                criterion=c.text, mode=c.mode, verdict="fail", failure_class="environmental",
                evidence=llm_error[:500], failed_attempts=0, attempts=0)
                for c in validator.criteria]
            effector.deliver(outcome)
            ok = effector.acked.wait(settings.effector_ack_wait_s)
            return EXIT_DELIVERED if ok and effector.ack_ok else EXIT_UNACKED
        return effector.run()
    except Exception as exc:
        log.exception("effector for %s crashed", sid)
        if effector.deliver(effector._failed_outcome(
                f"effector crashed: {type(exc).__name__}: {exc}")):
            effector.acked.wait(min(5.0, settings.effector_ack_wait_s))
        return EXIT_CRASHED
    finally:
        if verifier is not None:
            verifier.close()
        toolbox.close()
        if hub is not None:
            hub.close()
        client.stop(drain_s=0.2)
        if effector.outcome is not None:
            sp.set("artoo.subtask.status", effector.outcome.status)
        sp.__exit__(None, None, None)
        telemetry.shutdown()               # forked: the zygote's child leaves with os._exit


def _new_client(settings: Settings) -> BusClient:
    return BusClient("executor", settings=settings, heartbeat=False,
                     node=f"effector-{os.getpid()}-{secrets.token_hex(2)}")


def connect_early(settings: Settings) -> BusClient | None:
    """What a spare effector (forked by the zygote before its subtask) does while it waits: it
    starts the attempt's sandbox, connects to the bus and readies its first model call
    (`llm.warm_fork`), so none of them is on the subtask's path. None if the bus does not
    answer: the subtask then connects on its own, as without a spare."""
    try:
        sandbox_session.SPARE = Toolbox.spare(settings)   # adopted if the workspace matches
    except Exception as exc:  # noqa: BLE001 - the toolbox starts its own then
        log.warning("no spare sandbox: %s", exc)
    client = _new_client(settings)
    try:
        client.start()
    except Exception as exc:  # noqa: BLE001 - e.g. the bus not up yet: connect later
        log.warning("spare effector not connected: %s", exc)
        client = None
    if settings.llm_preconnect:
        llm.warm_fork()
    return client


def discover_mcp(hub: McpHub, settings: Settings, task_id: str, sid: str) -> None:
    """The MCP servers' tools (cached per server entry; a server that cannot be asked offers
    nothing, and the task log says why)."""
    try:
        tools = hub.discover()
    except Exception as exc:  # a client bug: the subtask goes on with artoo's own tools
        log.exception("MCP discovery failed")
        hub.problems["*"] = f"{type(exc).__name__}: {exc}"
        tools = {}
    tasklog.append(settings.tasks_dir, task_id, "mcp_tools", subtask_id=sid,
                   servers=sorted(hub.specs), tools=len(tools),
                   problems=dict(hub.problems) or None)


def main(argv: list[str] | None = None) -> int:
    """`python -m services.effector SUBTASK.json`: run one effector outside the spawner
    (debugging, and the cold-start baseline of the spawn benchmark)."""
    from services.runtime.role import configure_logging
    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("subtask", help="path to a SubTask JSON file ('-' = stdin)")
    args = parser.parse_args(argv)
    configure_logging("effector")
    raw = sys.stdin.read() if args.subtask == "-" else open(args.subtask).read()
    subtask = SubTask.model_validate(json.loads(raw))
    return run_effector(subtask)


if __name__ == "__main__":
    sys.exit(main())
