"""R2 Planner: memory calibration, the plan, its validation in code, and the replans GGS directs.

A plan is task-level criteria plus subtasks; the LLM proposes intents, criteria (each labelled
verifiable or plausible), contexts and sequence numbers, and code does the rest: subtask ids are
assigned here (never by the LLM), a missing or non-positive sequence is 1, and the plan is validated
(not empty, not too big, every subtask with an intent and criteria, no blocked tool or target, sequence
numbers contiguous from 1). A violation is re-asked once with the reasons; a second failure, like any
LLM error, is a PlanningFailed to GGS, which delivers the honest FinalResult (the planner never talks
to the user). The subtask dispatcher that runs the plan lives in services/roles/dispatcher.py.
"""
from __future__ import annotations

import logging
import re
import threading
from datetime import datetime, timezone
from typing import Any, Literal, Optional

from pydantic import BaseModel, Field, field_validator, model_validator

from protocol.bus import DEFER, BusClient
from protocol.envelope import Envelope
from protocol.messages import (FinalResult, MemoryRecall, PlanDirective, PlanningFailed, TaskCancel,
                               TaskSpec)
from protocol.settings import Settings

from services.runtime import tasklog, telemetry
from services.safety import mcp, referents
from .calibration import build_constraints, calibrate
from .dispatcher import Dispatcher, TaskPlan
from services.runtime.llm import LLMClient, LLMError
from services.runtime.role import run_role
from services.runtime.takeover import Begun, Takeover

ROLE = "planner"
log = logging.getLogger("artoo.planner")


# ---------------------------------------------------------------------------------------------
# the LLM contract
# ---------------------------------------------------------------------------------------------

class PlanCriterion(BaseModel):
    text: str
    mode: Literal["verifiable", "plausible"] = "verifiable"


def _coerce_criteria(value: Any) -> Any:
    """Criteria may come back as plain strings; those are verifiable assertions."""
    if isinstance(value, str):
        value = [value]
    if isinstance(value, list):
        return [{"text": v} if isinstance(v, str) else v for v in value]
    return value


class PlannedSubtask(BaseModel):
    intent: str = ""
    success_criteria: list[PlanCriterion] = Field(default_factory=list)
    context: str = ""
    sequence: Optional[int] = None
    tools: list[str] = Field(default_factory=list)

    _criteria = field_validator("success_criteria", mode="before")(_coerce_criteria)

    @field_validator("sequence", mode="before")
    @classmethod
    def _sequence(cls, value: Any) -> Any:
        try:
            return int(value) if value is not None else None
        except (TypeError, ValueError):
            return None

    @field_validator("tools", mode="before")
    @classmethod
    def _tools(cls, value: Any) -> Any:
        return [value] if isinstance(value, str) else value


class PlanReply(BaseModel):
    """What the planner asks the LLM for (ids and dispatch details are added in code)."""
    task_criteria: list[PlanCriterion] = Field(default_factory=list)
    subtasks: list[PlannedSubtask] = Field(default_factory=list)

    _criteria = field_validator("task_criteria", mode="before")(_coerce_criteria)

    @model_validator(mode="before")
    @classmethod
    def _bare_list(cls, value: Any) -> Any:
        return {"subtasks": value} if isinstance(value, list) else value


SYSTEM_PROMPT = """You are the Planner of artoo. Break the task into the minimum number of subtasks (prefer one).
Each subtask is run by an executor agent with tools: shell (bash in the workspace), read_file, write_file, list_files, search_text, web_search.
Rules:
- sequence: subtasks with the same number run in parallel; a higher number runs after every lower one and
  gets their outputs in its context. Numbers start at 1 with no gaps.
- context: everything the executor needs (paths, names, the user's constraints).
- success_criteria: concrete assertions about tool output that can be checked, not an echo of the intent.
  mode "verifiable" when a tool result can prove it, "plausible" when only judgement can.
- task_criteria: assertions about the final merged output of all subtasks.
- tools: the tools the subtask will use.
- Use standard Unix tools only (no third-party CLIs such as jq, ripgrep, fd, tokei).
- MUST NOT lines are hard prohibitions; SHOULD PREFER lines are preferences.
Reply with only JSON:
{"task_criteria": [{"text": "...", "mode": "verifiable"}],
 "subtasks": [{"intent": "...", "success_criteria": [{"text": "...", "mode": "verifiable"}],
               "context": "...", "sequence": 1, "tools": ["shell"]}]}"""

DIRECTIVE_MEANING = {
    "refine": "keep the approach, tighten its parameters",
    "change_path": "same kind of tools, but a different target (path, query, command arguments)",
    "change_approach": "a clearly different class of tool or method",
    "break_symmetry": "a novel approach that reuses none of the blocked tools",
}
FAILURE_CLASS_HINT = {
    "environmental": "environmental failure: change the target or parameters, not the tool class",
    "logical": "logical failure: change the method or the tool class",
    "mixed": "mixed failure: fix the environmental problems first",
}


# ---------------------------------------------------------------------------------------------
# validation (pure)
# ---------------------------------------------------------------------------------------------

def normalise_sequences(plan: PlanReply) -> None:
    for st in plan.subtasks:
        if not st.sequence or st.sequence < 1:
            st.sequence = 1  # the Go reference never dispatched sequence ≤ 0 and hung


def validate_plan(plan: PlanReply, blocked_tools: list[str], blocked_targets: list[str],
                  max_subtasks: int) -> list[str]:
    """Every reason the plan cannot be dispatched (empty list = valid)."""
    problems: list[str] = []
    if not plan.subtasks:
        return ["the plan has no subtasks"]
    if len(plan.subtasks) > max_subtasks:
        problems.append(f"the plan has {len(plan.subtasks)} subtasks; at most {max_subtasks}")
    tools_blocked = {t.strip().lower() for t in blocked_tools if t.strip()}
    targets_blocked = [t.strip() for t in blocked_targets if len(t.strip()) >= 3]
    for i, st in enumerate(plan.subtasks, 1):
        if not st.intent.strip():
            problems.append(f"subtask {i} has no intent")
        if not [c for c in st.success_criteria if c.text.strip()]:
            problems.append(f"subtask {i} has no success criteria")
        used = {t.strip().lower() for t in st.tools}
        words = set(re.findall(r"[a-z_][a-z0-9_]*", st.intent.lower()))
        for tool in sorted(tools_blocked & (used | words)):
            problems.append(f"subtask {i} uses the blocked tool {tool!r}")
        text = f"{st.intent}\n{st.context}\n" + "\n".join(c.text for c in st.success_criteria)
        for target in targets_blocked:
            if target.lower() in text.lower():
                problems.append(f"subtask {i} uses the blocked target {target!r}")
    seqs = sorted({st.sequence or 1 for st in plan.subtasks})
    if seqs != list(range(1, len(seqs) + 1)):
        problems.append(f"sequence numbers must be contiguous from 1; got {seqs}")
    return problems


# ---------------------------------------------------------------------------------------------
# memory calibration (services/roles/calibration.py, owned by the memory capability)
# ---------------------------------------------------------------------------------------------

class Calibration(BaseModel):
    text: str = ""                         # constraint lines: GGS blocked sets + memory entries
    must_not: list[str] = Field(default_factory=list)   # the merged MUST NOT set
    recall: Optional[MemoryRecall] = None


def calibrate_memory(client: BusClient, settings: Settings, spec: TaskSpec,
                     directive: PlanDirective | None, block_tools: bool = True) -> Calibration:
    """Memory calibration before every plan and replan (seeds/000 §4.5), no LLM call. The merged
    MUST NOT set is memory Avoid rules ∪ GGS blocked_tools ∪ blocked_targets; extra MUST NOT lines
    GGS sends that do not just restate a blocked tool or target are kept as well. Without
    `block_tools` (a plan that does not block tools) no line says a tool is blocked."""
    tools = list(dict.fromkeys(directive.blocked_tools if directive and block_tools else []))
    targets = list(dict.fromkeys(directive.blocked_targets if directive else []))
    try:
        text, recall, must_not = calibrate(client, spec, tools, targets, settings,
                                           timeout=min(settings.request_timeout_s, 5.0))
    except Exception as exc:  # memory misbehaving must not stop planning; say so
        log.warning("memory calibration failed for %s: %s", spec.task_id, exc)
        lines, must_not, _, _ = build_constraints(None, tools, targets)
        text = "\n".join(lines)
        recall = MemoryRecall(task_id=spec.task_id, space=spec.intent_slug, entity="env:local",
                              constraints=f"(memory unavailable: {exc})"[:300])
        tasklog.append(settings.tasks_dir, spec.task_id, "memory_query", space=spec.intent_slug,
                       entity="env:local", error=str(exc)[:300])
    # GGS's own lines that restate a tool block go too when the plan does not block tools:
    # "MUST NOT: use the tool 'shell'" told an executor with no other tool to give up
    blocked = [b.lower() for b in (directive.blocked_tools if directive else []) + targets
               if b.strip()]
    extra = [m for m in (directive.must_not if directive else [])
             if m.strip() and not any(b in m.lower() for b in blocked)]
    if extra:
        text = "\n".join([f"MUST NOT: {m}" for m in extra] + ([text] if text else []))
    return Calibration(text=text, must_not=list(dict.fromkeys(must_not + extra)), recall=recall)


# ---------------------------------------------------------------------------------------------
# prompts
# ---------------------------------------------------------------------------------------------

def _today() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%d")


def spec_block(spec: TaskSpec) -> str:
    lines = [f"Task: {spec.intent}", f"User's words: {spec.raw_input}"]
    if spec.success_criteria:
        lines.append("Success criteria: " + "; ".join(spec.success_criteria))
    c = spec.constraints
    extra = [x for x in ([f"scope: {c.scope}"] if c.scope else []) +
             ([f"deadline: {c.deadline}"] if c.deadline else []) + list(c.other)]
    if extra:
        lines.append("Constraints: " + "; ".join(extra))
    if spec.world:
        lines.append(spec.world)
    return "\n".join(lines)


def constraints_block(text: str) -> str:
    if not text.strip():
        return ""
    return "--- CONSTRAINTS (code-derived) ---\n" + text.strip() + "\n--- END CONSTRAINTS ---"


def plan_prompt(spec: TaskSpec, constraints: str, directive: PlanDirective | None = None,
                last_round: str = "") -> str:
    parts = [f"Today's date: {_today()} (UTC)", spec_block(spec)]
    if directive is not None:
        d = directive
        lines = [f"REPLAN (round {d.replan_round}) directed by the Goal Gradient Solver:",
                 f"directive: {d.directive} — {DIRECTIVE_MEANING.get(d.directive, '')}"]
        if d.failure_class:
            lines.append(FAILURE_CLASS_HINT.get(d.failure_class, f"failure class: {d.failure_class}"))
        if d.failed_criterion:
            lines.append(f"failed criterion: {d.failed_criterion}")
        if d.rationale:
            lines.append(f"rationale: {d.rationale}")
        lines.append(f"urgency: {d.urgency}; budget used: {d.budget_pressure:.0%}")
        parts.append("\n".join(lines))
        if last_round:
            parts.append("What happened in the previous round:\n" + last_round)
    block = constraints_block(constraints)
    if block:
        parts.append(block)
    return "\n\n".join(parts)


# ---------------------------------------------------------------------------------------------
# the role
# ---------------------------------------------------------------------------------------------

class Planner:
    def __init__(self, client: BusClient, settings: Settings, llm: LLMClient | None = None):
        self.client = client
        self.settings = settings
        self._llm = llm
        self.dispatcher = Dispatcher(client, settings)
        self._task_locks: dict[str, threading.Lock] = {}   # one planning at a time per task
        self._lock = threading.Lock()
        # Several instances: a dead planner instance's tasks are taken over (resumed or ended)
        self.takeover = Takeover(client, settings, begins=("TaskSpec",),
                                 ends=("FinalResult", "TaskCancel"), holds=self._holds,
                                 take_over=self._take_over, held=lambda: list(self.dispatcher.plans),
                                 release=self._release)
        self.dispatcher.takeover = self.takeover

    def register(self) -> None:
        c = self.client
        c.on("TaskSpec", self.on_spec, ack=True, partition=True, threaded=True)
        c.on("PlanDirective", self.on_directive, ack=True, partition=True, threaded=True)
        c.on("TaskCancel", self.on_end, partition=True)
        c.on("FinalResult", self.on_end, partition=True)
        self.dispatcher.register()
        info = c.heartbeat_info
        c.heartbeat_info = lambda: {**info(), **self.takeover.info()}
        self.takeover.attach()

    @property
    def llm(self) -> LLMClient:
        if self._llm is None:
            self._llm = LLMClient.for_role(ROLE, self.settings, bus=self.client)
        return self._llm

    # -- handlers ------------------------------------------------------------------------------
    def _task_lock(self, task_id: str) -> threading.Lock:
        with self._lock:
            return self._task_locks.setdefault(task_id, threading.Lock())

    def on_spec(self, env: Envelope, spec: TaskSpec) -> None:
        with self._task_lock(spec.task_id):
            if self.dispatcher.get(spec.task_id) is not None or self.dispatcher.ended(spec.task_id):
                return  # re-delivered TaskSpec: the plan exists (maybe from before a restart)
            if tasklog.kinds_logged(self.settings.tasks_dir, spec.task_id, tasklog.ENDED):
                return  # a late copy of an ended task's TaskSpec (a restart lost our tombstone)
            self._plan(spec, None, 0, env.id)

    def on_directive(self, env: Envelope, directive: PlanDirective) -> None:
        with self._task_lock(directive.task_id):
            plan = self.dispatcher.get(directive.task_id)
            if plan is None:
                if self.dispatcher.ended(directive.task_id):
                    return
                if self.takeover.defer(directive.task_id):
                    return DEFER  # its plan is with another instance (maybe coming back)
                self._fail_unknown(directive)
                return
            if env.id in plan.handled:
                return  # re-delivered directive, already acted on
            self._plan(plan.spec, directive, plan.round + 1, env.id, previous=plan)

    def on_end(self, env: Envelope, msg: FinalResult | TaskCancel) -> None:
        self.dispatcher.drop(msg.task_id)
        with self._lock:
            self._task_locks.pop(msg.task_id, None)

    # -- more than one instance (services/runtime/takeover.py) ----------------------------------
    def _holds(self, task_id: str) -> bool:
        with self._lock:
            planning = task_id in self._task_locks
        return planning or self.dispatcher.get(task_id) is not None or \
            self.dispatcher.ended(task_id)

    def _take_over(self, begun: Begun) -> None:
        """The planner instance holding this task's plan is gone: resume the plan from its state
        file on this machine, else GGS ends the task (TaskLost)."""
        task = begun.task_id
        if self.dispatcher.resume_one(task):
            return   # its state file is on this machine: the plan carries on here
        msg = self.takeover.lost(begun, ROLE, "its plan and the dispatch state of its subtasks")
        tasklog.append(self.settings.tasks_dir, task, "planning_failed", error=msg.reason)
        self.dispatcher.drop(task)          # ended here; a state file on this host goes too
        self.client.send(msg)

    def _release(self, task_id: str) -> None:
        """Its owner is back: forget the task here (its state file stays, for the owner)."""
        with self.dispatcher.lock:
            self.dispatcher.plans.pop(task_id, None)
        with self._lock:
            self._task_locks.pop(task_id, None)

    # -- planning ------------------------------------------------------------------------------
    @telemetry.traced("plan", task=lambda self, spec, directive, round_, *a, **k: spec.task_id,
                      attrs=lambda self, spec, directive, round_, *a, **k: {
                          "artoo.plan_round": round_,
                          "artoo.directive": directive.directive if directive else "init"})
    def _plan(self, spec: TaskSpec, directive: PlanDirective | None, round_: int, msg_id: str,
              previous: TaskPlan | None = None) -> None:
        """Calibrate, ask, validate, dispatch (serialised per task by the caller's lock)."""
        task = spec.task_id
        missing = referents.decisive(spec.raw_input, referents.coerce(spec.referents))
        local = bool(getattr(self.llm, "local", False) or missing)
        # local: the bundled model's executor has one tool, the shell: a logical failure blocks
        # the approach (the context says what failed), not the tool — and no line says it does
        # (told "MUST NOT use tool: shell", the model repeated a tried command or gave up)
        calibration = calibrate_memory(self.client, self.settings, spec, directive,
                                       block_tools=not local)
        if calibration.recall is not None:
            self.client.publish(calibration.recall)
        tools = list(dict.fromkeys(directive.blocked_tools)) if directive and not local else []
        targets = list(dict.fromkeys(directive.blocked_targets)) if directive else []
        last_round = previous.describe_outcomes() if previous else ""
        if local:
            # A goal that reads what the workspace lacks needs no plan: its one subtask ends
            # not_possible in code, before any model call.
            plan, error = self._local_plan(spec, directive, tools, targets)
        else:
            prompt = plan_prompt(spec, calibration.text, directive, last_round)
            plan, error = self._ask(spec, prompt, tools, targets)
        if self.dispatcher.ended(task):
            return  # cancelled or finished while the LLM was thinking
        if plan is None:
            self._planning_failed(spec, error, round_)
            return
        self.dispatcher.start_round(spec, round_, plan, tools, targets, calibration.must_not,
                                    calibration.text, handled=msg_id, previous=previous)

    def _ask(self, spec: TaskSpec, prompt: str, tools: list[str],
             targets: list[str]) -> tuple[PlanReply | None, str]:
        """One LLM plan, validated in code, re-asked once on a violation."""
        task = spec.task_id
        problems: list[str] = []
        note = mcp.planner_note(self.settings.home, f"{spec.raw_input}\n{spec.intent}")
        for attempt in (1, 2):
            user = prompt + (f"\n{note}" if note else "")
            if problems:
                user += ("\n\nYour previous plan was rejected: " + "; ".join(problems) +
                         ". Fix this and reply with the whole plan as JSON.")
            try:
                plan = self.llm.complete_json(PlanReply, SYSTEM_PROMPT, user, task_id=task)
            except LLMError as exc:
                return None, f"the planner LLM gave no usable plan: {exc}"
            normalise_sequences(plan)
            problems = validate_plan(plan, tools, targets, self.settings.plan_max_subtasks)
            if not problems:
                return plan, ""
            tasklog.append(self.settings.tasks_dir, task, "plan_rejected", attempt=attempt,
                           violations=problems)
        return None, "the plan was invalid twice: " + "; ".join(problems)

    def _local_plan(self, spec: TaskSpec, directive: PlanDirective | None,
                    tools: list[str], targets: list[str]) -> tuple[PlanReply | None, str]:
        """The plan on the bundled 1.5B model: one subtask built in code from the TaskSpec.

        At ~12 tokens/s a planner call costs 20-40 s and the small model mostly restates the spec
        (or copies the prompt's placeholders); the perceiver's intent and criteria already are a
        one-step plan, R4a judges those criteria against tool records, and a replan carries GGS's
        directive, failed criterion and blocked tools to the executor through the context."""
        criteria = [PlanCriterion(text=c) for c in spec.success_criteria if c.strip()][:3] or \
            [PlanCriterion(text=f"The tool results show this was done: {spec.intent}")]
        context: list[str] = []         # (the user's words travel as SubTask.goal)
        if directive is not None:
            context.append(f"A previous attempt failed ({directive.directive}: "
                           f"{DIRECTIVE_MEANING.get(directive.directive, '')}).")
            if directive.failed_criterion:
                context.append(f"Failed criterion: {directive.failed_criterion}")
            # (the last round's report is left out: the 1.5B executor copied it as its answer)
            if tools:
                context.append("Do not use: " + ", ".join(tools))
        plan = PlanReply(task_criteria=criteria, subtasks=[PlannedSubtask(
            intent=spec.intent, success_criteria=criteria, sequence=1)])
        # validated before the context is added: the report of the last round names the blocked
        # targets on purpose (the executor enforces them in code)
        problems = validate_plan(plan, tools, targets, self.settings.plan_max_subtasks)
        plan.subtasks[0].context = "\n".join(context)
        tasklog.append(self.settings.tasks_dir, spec.task_id, "plan_source",
                       source="local: one subtask from the TaskSpec (no planner LLM call)",
                       violations=problems or None)
        if problems:
            return None, "the one-step local plan violates: " + "; ".join(problems)
        return plan, ""

    def _planning_failed(self, spec: TaskSpec, error: str, round_: int) -> None:
        log.warning("planning failed for %s: %s", spec.task_id, error)
        tasklog.append(self.settings.tasks_dir, spec.task_id, "planning_failed", error=error,
                       plan_round=round_)
        self.dispatcher.planning_failed(spec, round_, error)

    def _fail_unknown(self, directive: PlanDirective) -> None:
        """A directive for a task we hold no plan of (state lost): end it honestly via GGS."""
        error = "the planner holds no plan for this task (its state was lost); cannot replan"
        tasklog.append(self.settings.tasks_dir, directive.task_id, "planning_failed", error=error,
                       plan_round=directive.replan_round)
        self.client.send(PlanningFailed(task_id=directive.task_id, error=error,
                                        plan_round=directive.replan_round))


def setup(client: BusClient, settings: Settings) -> Planner:
    planner = Planner(client, settings)
    try:  # build the LLM client now (and warm the SDK), not on the first task
        planner.llm
    except LLMError as exc:
        log.warning("LLM not configured yet: %s", exc)
    planner.register()
    planner.dispatcher.resume()
    planner.takeover.register_files(
        planner.dispatcher.store.load_all(lambda t: not client.owns(t)))
    return planner


def main() -> int:
    return run_role(ROLE, setup)


if __name__ == "__main__":
    raise SystemExit(main())
