"""The message catalogue (DESIGN §5): one pydantic model per bus message type.

Bodies hold only msgpack-native values (str, int, float, bool, None, list, dict) so a message can be
encoded without custom hooks; timestamps are Unix epoch seconds (float). Every model ignores unknown
fields (forward compatibility within a protocol version) but validates the fields it knows.
"""
from __future__ import annotations

from typing import Any, Literal, Optional

from pydantic import BaseModel, ConfigDict, Field, model_validator


class Body(BaseModel):
    model_config = ConfigDict(extra="ignore", populate_by_name=True)


# ----------------------------------------------------------------------------------------------
# Shared records
# ----------------------------------------------------------------------------------------------

CriterionMode = Literal["verifiable", "plausible"]
FailureClass = Literal["logical", "environmental", "mixed", ""]
Directive = Literal["refine", "change_path", "change_approach", "break_symmetry"]
Terminal = Literal["accept", "success", "abandon"]
Level = Literal["M", "K", "C", "T"]


class Criterion(Body):
    """A success criterion; the planner labels it verifiable (a tool can prove it) or plausible."""
    text: str
    mode: CriterionMode = "verifiable"


class ToolCallRecord(Body):
    """The one structured record of a tool call, used alike by R3, R4a, GGS and memory (Law 0)."""
    tool: str
    arguments: dict[str, Any] = Field(default_factory=dict)
    target: str = ""                      # the path, command or query the call acted on
    output: str = ""                      # head+tail excerpt of what the tool returned
    error: Optional[str] = None           # set when the tool failed (non-zero exit, exception...)
    elapsed_ms: float = 0.0
    law1: bool = False                    # the call was refused by the Law 1 gate
    law1_class: str = ""                  # its Law 1 tier: read-only, workspace-write, unknown,
                                          # destructive ("" = not run: blocked, repeated)
    server: str = ""                      # an MCP tool's server (mcp.json); "" for artoo's own
    digest: str = ""                      # an MCP call: sha256 of the whole result it returned


class CriterionVerdict(Body):
    criterion: str
    mode: CriterionMode = "verifiable"
    verdict: Literal["pass", "fail"]
    failure_class: FailureClass = ""
    evidence: str = ""
    checked: bool = False                 # Law 0: the evidence was checked by code, not a model
    # For GGS's trajectory weighting k/N: in how many of the N scored attempts this criterion failed.
    failed_attempts: int = 0
    attempts: int = 0


class GapTrajectoryPoint(Body):
    attempt: int
    score: float
    unmet_criteria: list[str] = Field(default_factory=list)
    failure_class: FailureClass = ""


class LossBreakdown(Body):
    D: float
    P: float
    Omega: float
    L: float


class Megram(Body):
    """The MKCT memory atom (seeds/000 §4.2)."""
    id: str = ""
    level: Level = "M"
    created_at: float = 0.0
    last_recalled_at: Optional[float] = None
    space: str
    entity: str
    content: str = ""
    state: str = ""
    f: float
    sigma: float
    k: float
    # Filled by the memory server on reads (ignored on writes): live contributions to the tag's
    # potentials at query time, and the rule a source was distilled into by the Dreamer.
    live_attention: Optional[float] = None
    live_decision: Optional[float] = None
    consolidated_into: str = ""


# ----------------------------------------------------------------------------------------------
# Infrastructure
# ----------------------------------------------------------------------------------------------

class Hello(Body):
    """Readiness probe: a process is ready once its own Hello comes back through the proxy."""
    node: str
    nonce: str


class Ack(Body):
    """Acknowledges a work message by id; sent only by the message's consumer."""
    ack_id: str
    ok: bool = True
    error: Optional[str] = None


class Heartbeat(Body):
    role: str
    instance: int = 0
    node: str
    host: str = ""                                           # ARTOO_HOST_NAME or the hostname
    pid: int
    state: str = "running"
    in_flight: int = 0
    version: str = ""
    started_at: float = 0.0
    uptime_s: float = 0.0
    gaps: dict[str, int] = Field(default_factory=dict)       # per sender node: messages missed
    rejected: dict[str, int] = Field(default_factory=dict)   # per reason: frames refused
    received: int = 0
    sent: int = 0
    unacked: int = 0                                         # work messages awaiting an ack
    lost: int = 0                                            # work messages given up on
    info: dict[str, Any] = Field(default_factory=dict)       # role-specific figures


class TaskCancel(Body):
    task_id: str
    reason: str = "cancelled by operator"


class EffectorStarted(Body):
    task_id: str
    subtask_id: str
    pid: int
    spawner: str
    spawn_ms: float = 0.0


class EffectorExited(Body):
    task_id: str
    subtask_id: str
    pid: int
    spawner: str
    exit_code: Optional[int] = None
    signal: Optional[int] = None
    reason: str = ""                      # "completed", "deadline", "cancelled", "crashed", ...
    elapsed_s: float = 0.0


class LlmUsage(Body):
    """Per-call accounting (telemetry): the CLI's cost table and the auditor's latency drift."""
    task_id: str = ""
    role: str
    tier: str
    model: str = ""
    prompt_tokens: int = 0
    completion_tokens: int = 0
    latency_ms: float = 0.0
    ok: bool = True
    error: str = ""


class TaskTransition(Body):
    """One move of a task's lifecycle (services/runtime/lifecycle.py), published by the role whose
    decision-log event caused it, so the audit log holds the trail; `refused` marks an illegal
    move that was counted and not applied."""
    task_id: str
    from_state: str = ""
    to_state: str
    actor: str = ""
    reason: str = ""
    refused: bool = False


# ----------------------------------------------------------------------------------------------
# User ↔ Perceiver
# ----------------------------------------------------------------------------------------------

class RunOptions(Body):
    yes: bool = False                     # pre-approve Law 1 actions
    interactive: bool = False             # an operator is present to answer prompts
    deadline_s: Optional[float] = None
    workspace: str = ""                   # this run's workspace (absolute); "" = the daemon's
    network: bool = False                 # tool commands may use the network (`--network`)
    max_llm_calls: Optional[int] = None  # no replan after this many LLM calls (None = the setting)


class UserRequest(Body):
    task_id: str                          # the run id, assigned in code by the CLI
    text: str
    session_id: str = ""
    options: RunOptions = Field(default_factory=RunOptions)
    history: list[str] = Field(default_factory=list)


class ClarificationRequest(Body):
    task_id: str
    question: str
    round: int = 1


class ClarificationReply(Body):
    task_id: str
    answer: str
    round: int = 1


class ConversationalReply(Body):
    """The perceiver's fast path: a greeting answered directly, ending the run without a plan."""
    task_id: str
    answer: str


class TaskConstraints(Body):
    scope: Optional[str] = None
    deadline: Optional[str] = None        # as the user said it: relative dates stay verbatim
    other: list[str] = Field(default_factory=list)


class Referent(Body):
    """Something the goal names (a file, folder, extension, field or value), resolved against the
    workspace by code before any model call (services/safety/referents.py)."""
    text: str
    kind: Literal["file", "folder", "extension", "field", "value"]
    role: Literal["read", "create", "either"] = "read"
    # recalled: the workspace lacks it, but the world model knows it from an earlier session
    status: Literal["found", "missing", "outside", "recalled"] = "found"
    where: list[str] = Field(default_factory=list)
    near: list[str] = Field(default_factory=list)
    labelled: bool = True


class EmotionVector(Body):
    """Seed 002 Def. 3: the user message's valence [-1, 1] and arousal [0, 1], computed by code
    (services/runtime/world.py), with the cues that moved it."""
    valence: float = 0.0
    arousal: float = 0.3
    label: str = "neutral"
    cues: list[str] = Field(default_factory=list)


class TaskSpec(Body):
    task_id: str                          # run id: unique per run
    intent_slug: str                      # stable across reruns of the same intent: the memory tag
    intent: str
    success_criteria: list[str] = Field(default_factory=list)
    constraints: TaskConstraints = Field(default_factory=TaskConstraints)
    raw_input: str
    created_at: float = 0.0
    deadline_at: float = 0.0              # absolute epoch seconds; FinalResult by then at the latest
    options: RunOptions = Field(default_factory=RunOptions)
    referents: list[Referent] = Field(default_factory=list)   # resolved before any model call
    emotion: Optional[EmotionVector] = None   # of the user's message (seed 002 Def. 3)
    priority: float = 0.5                 # p(g, t) (Def. 5): orders pending work
    goal_type: Literal["USER", "AUTO", "SYSTEM", "REACTIVE"] = "USER"
    world: str = ""                       # the world model's projection for this goal (bounded)


# ----------------------------------------------------------------------------------------------
# Planner, dispatcher, effector placement
# ----------------------------------------------------------------------------------------------

class MemoryRecall(Body):
    task_id: str
    space: str
    entity: str
    sops: int = 0
    recent: int = 0
    attention: float = 0.0
    decision: float = 0.0
    action: str = "Ignore"
    constraints: str = ""                 # the full text injected into the planner prompt
    must_not: list[str] = Field(default_factory=list)


class SubTask(Body):
    subtask_id: str                       # assigned in code
    parent_task_id: str
    intent: str
    success_criteria: list[Criterion] = Field(default_factory=list)
    context: str = ""
    deadline: Optional[str] = None
    sequence: int = 1
    plan_round: int = 0
    blocked_tools: list[str] = Field(default_factory=list)
    blocked_targets: list[str] = Field(default_factory=list)
    deadline_at: float = 0.0
    options: RunOptions = Field(default_factory=RunOptions)
    goal: str = ""                        # the user's own words, when this subtask is the goal
    # calls that earlier, rejected rounds of this task already ran: the executor does not run them
    # again (a model at temperature 0 given nearly the same prompt repeats its first command)
    tried_calls: list[ToolCallRecord] = Field(default_factory=list)
    referents: list[Referent] = Field(default_factory=list)   # the task's, resolved in code
    llm_calls_left: Optional[int] = None  # what is left of the task's LLM call budget (None: no bound)
    priority: float = 0.5                 # the task's p(g, t): the spawner starts queued work by it


class DispatchManifest(Body):
    task_id: str
    plan_round: int = 0
    subtask_ids: list[str]
    task_criteria: list[Criterion] = Field(default_factory=list)
    task_spec: Optional[TaskSpec] = None
    dispatched_at: float = 0.0


class SubTaskOffer(Body):
    task_id: str
    subtask_id: str
    offer_id: str
    subtask: SubTask


class SubTaskClaim(Body):
    task_id: str
    subtask_id: str
    offer_id: str
    spawner: str                          # node id of the claiming spawner
    free_slots: int = 0


class SubTaskAssign(Body):
    task_id: str
    subtask_id: str
    offer_id: str
    spawner: str                          # node id of the spawner that gets the subtask
    subtask: SubTask


class PlanningFailed(Body):
    """The planner could not produce a valid plan; GGS turns it into an honest FinalResult."""
    task_id: str
    intent: str = ""
    intent_slug: str = ""
    error: str
    plan_round: int = 0


class TaskLost(Body):
    """An instance of a partitioned role took over a task whose holder (another instance of that
    role) stopped heartbeating, and the holder's state for it could not be obtained: GGS ends the
    task at once with this reason instead of at its deadline (services/runtime/takeover.py)."""
    task_id: str
    role: str                    # the role whose state was lost
    lost_instance: int = -1      # the instance that held it
    lost_where: str = ""         # its node@host, as last heard
    reason: str


# ----------------------------------------------------------------------------------------------
# Effector (R3 + R4a)
# ----------------------------------------------------------------------------------------------

class ExecutionResult(Body):
    task_id: str
    subtask_id: str
    attempt: int = 1
    status: Literal["completed", "uncertain", "failed", "not_possible"]
    output: Any = None
    uncertainty: Optional[str] = None
    tool_calls: list[ToolCallRecord] = Field(default_factory=list)


class CorrectionSignal(Body):
    task_id: str
    subtask_id: str
    attempt_number: int
    failed_criterion: str = ""
    failure_class: FailureClass = ""
    what_was_wrong: str = ""
    what_to_do: str = ""
    # a command code composed that fixes the flaw (write a printed result into the file the goal
    # names; append a line after a missing newline): the executor runs it through the same gate
    # and sandbox without asking its model, and the attempt is checked as any other
    fix_command: str = ""


class ApprovalRequest(Body):
    task_id: str
    subtask_id: str
    approval_id: str
    kind: Literal["shell", "write", "delete", "overwrite", "network", "mcp"] = "shell"
    command: str = ""
    paths: list[str] = Field(default_factory=list)
    classification: str = ""              # read-only / workspace-write / destructive / unknown
    reason: str = ""


class ApprovalDecision(Body):
    task_id: str
    approval_id: str
    approved: bool
    decided_by: str = "operator"          # operator / --yes / timeout / no-operator
    reason: str = ""


class SubTaskOutcome(Body):
    task_id: str
    subtask_id: str
    parent_task_id: str
    intent: str = ""
    success_criteria: list[Criterion] = Field(default_factory=list)
    status: Literal["matched", "failed"]
    output: Any = None
    failure_reason: Optional[str] = None
    gap_trajectory: list[GapTrajectoryPoint] = Field(default_factory=list)
    criteria_verdicts: list[CriterionVerdict] = Field(default_factory=list)
    tool_calls: list[ToolCallRecord] = Field(default_factory=list)
    plan_round: int = 0
    sequence: int = 1
    # Law 0: what code checked. verified = every criterion backed by code-checked evidence;
    # not_possible = the executor and an independent check agree the thing asked for is absent.
    verified: bool = False
    not_possible: bool = False
    answer: str = ""                      # the answer in plain words (no appended tool output)
    checks: list[str] = Field(default_factory=list)       # what code checked, one line each
    unverified: list[str] = Field(default_factory=list)   # what could not be checked, and why
    # the workspace files its work left changed (made, modified or deleted) as it ended
    changed: list[str] = Field(default_factory=list)


# ----------------------------------------------------------------------------------------------
# Meta-Validator (R4b) → GGS (R7) → Planner / User
# ----------------------------------------------------------------------------------------------

class ReplanRequest(Body):
    task_id: str
    intent: str = ""
    intent_slug: str = ""
    gap_summary: str = ""
    failed_subtasks: list[str] = Field(default_factory=list)
    correction_count: int = 0
    elapsed_ms: float = 0.0
    outcomes: list[SubTaskOutcome] = Field(default_factory=list)
    task_criteria_verdicts: list[CriterionVerdict] = Field(default_factory=list)
    recommendation: Literal["replan", "abandon"] = "replan"
    plan_round: int = 0


class OutcomeSummary(Body):
    task_id: str
    intent: str = ""
    intent_slug: str = ""
    summary: str = ""
    merged_output: Any = None
    elapsed_ms: float = 0.0
    outcomes: list[SubTaskOutcome] = Field(default_factory=list)
    task_criteria_verdicts: list[CriterionVerdict] = Field(default_factory=list)
    plan_round: int = 0


class PlanDirective(Body):
    task_id: str
    loss: LossBreakdown
    prev_directive: str = "init"
    directive: Directive
    blocked_tools: list[str] = Field(default_factory=list)
    blocked_targets: list[str] = Field(default_factory=list)
    must_not: list[str] = Field(default_factory=list)
    failed_criterion: str = ""
    failure_class: FailureClass = ""
    budget_pressure: float = 0.0          # = Ω
    grad_l: float = 0.0
    urgency: Literal["low", "normal", "high"] = "normal"
    rationale: str = ""
    replan_round: int = 0


Outcome = Literal["verified", "unverified", "not_possible", "abandoned"]


class FinalResult(Body):
    """The one result of a task. `status` is the honest outcome (Law 0): done and verified by
    code, done but unverified (`unverified` says what could not be checked), not possible (with
    the evidence), or abandoned. `directive` is GGS's terminal macro-state."""
    task_id: str
    intent_slug: str = ""
    status: Optional[Outcome] = None     # when not given: unverified on accept/success
    verified: bool = False
    answer: str = ""
    checks: list[str] = Field(default_factory=list)
    unverified: list[str] = Field(default_factory=list)
    directive: Terminal
    prev_directive: str = "init"
    summary: str
    output: Any = None
    loss: Optional[LossBreakdown] = None
    grad_l: float = 0.0
    replans: int = 0
    completed: list[str] = Field(default_factory=list)   # intents of subtasks that matched
    failed: list[str] = Field(default_factory=list)      # intents of subtasks that failed, with why
    law1: list[str] = Field(default_factory=list)        # [LAW1] refusals that shaped the result
    # workspace files the task's work left changed, whatever its status: an abandoned task
    # may still have written files, and the user must know which
    changed: list[str] = Field(default_factory=list)
    elapsed_ms: float = 0.0
    llm_calls: int = 0                    # the task's LLM calls (its task log's llm_call events)
    llm_budget: int = 0                   # its LLM call budget (0 = no bound)

    @model_validator(mode="after")
    def _honest_default(self) -> "FinalResult":
        if self.status is None:
            self.status = "abandoned" if self.directive == "abandon" else "unverified"
        return self


# ----------------------------------------------------------------------------------------------
# Memory (R5)
# ----------------------------------------------------------------------------------------------

class MemoryWrite(Body):
    task_id: str = ""
    megrams: list[Megram]


MemoryOp = Literal["query_c", "query_mk", "recent", "stats", "list", "show", "remember", "forget",
                   "calibrate"]


class MemoryQuery(Body):
    op: MemoryOp
    space: str = ""
    entity: str = ""
    n: int = 10
    id: str = ""
    text: str = ""
    level: Optional[Level] = None
    task_id: str = ""
    sigma: Optional[float] = None         # remember: valence (default +1; negative = a correction)


class SopRecord(Body):
    id: str
    space: str
    entity: str
    content: str
    sigma: float
    state: str = ""
    level: str = "C"


class MemoryResult(Body):
    op: str
    ok: bool = True
    error: str = ""
    sops: list[SopRecord] = Field(default_factory=list)
    attention: float = 0.0
    decision: float = 0.0
    action: str = "Ignore"
    megrams: list[Megram] = Field(default_factory=list)     # strongest contributors / listings
    stats: dict[str, Any] = Field(default_factory=dict)
    groups: list[dict[str, Any]] = Field(default_factory=list)


class DreamerEvent(Body):
    trigger: str = "timer"                # timer / final_result / manual
    gc_deleted: int = 0
    demoted: list[str] = Field(default_factory=list)
    promoted: list[str] = Field(default_factory=list)
    elapsed_ms: float = 0.0
    error: str = ""


# ----------------------------------------------------------------------------------------------
# World model (seed 002): the `world` process
# ----------------------------------------------------------------------------------------------

WorldOp = Literal["project", "entities", "facts", "show", "forget", "goals", "goal", "decide",
                  "link", "stats"]


class WorldQuery(Body):
    op: WorldOp
    text: str = ""                        # project: the goal; forget/decide: the reason
    workspace: str = ""                   # project: the goal's workspace ("" = the daemon's)
    entity: str = ""                      # show / forget: an entity id or name
    id: str = ""                          # goal / decide / link: a goal id (or unique prefix)
    at: Optional[float] = None            # facts: valid at this time (world time)
    as_of: Optional[float] = None         # facts: as the world model knew them then (system time)
    claims: bool = False                  # facts: list claims (not facts) as well
    decision: Literal["", "accept", "reject"] = ""
    status: str = ""                      # goals: filter by status
    link: dict[str, Any] = Field(default_factory=dict)   # link: what an accepted goal became
    n: int = 50
    task_id: str = ""


class WorldResult(Body):
    op: str
    ok: bool = True
    error: str = ""
    text: str = ""                        # project: the bounded projection for a prompt
    entities: list[dict[str, Any]] = Field(default_factory=list)
    facts: list[dict[str, Any]] = Field(default_factory=list)
    claims: list[dict[str, Any]] = Field(default_factory=list)
    edges: list[dict[str, Any]] = Field(default_factory=list)
    goals: list[dict[str, Any]] = Field(default_factory=list)
    stats: dict[str, Any] = Field(default_factory=dict)


class GoalProposed(Body):
    """The goal generator proposed an AUTO, SYSTEM or REACTIVE goal (Law 1: it waits for the operator's
    `artoo goals accept`); telemetry, so the tap and the console show it."""
    goal_id: str
    goal_type: str
    description: str
    trigger: str
    priority: float = 0.5


# ----------------------------------------------------------------------------------------------
# Auditor (R6) — operator channel only, never on the bus to an agent
# ----------------------------------------------------------------------------------------------

class AuditReport(Body):
    report_id: str
    trigger: Literal["periodic", "on_demand"] = "on_demand"
    window_start: float
    window_end: float
    tasks_observed: int = 0
    messages_observed: int = 0
    boundary_violations: list[dict[str, Any]] = Field(default_factory=list)
    convergence_failures: list[dict[str, Any]] = Field(default_factory=list)
    drift_alerts: list[dict[str, Any]] = Field(default_factory=list)
    bus_gaps: list[dict[str, Any]] = Field(default_factory=list)
    missing_roles: list[dict[str, Any]] = Field(default_factory=list)
    missing_hosts: list[dict[str, Any]] = Field(default_factory=list)   # worker hosts gone silent
    role_stats: dict[str, Any] = Field(default_factory=dict)
    gap_trends: dict[str, int] = Field(default_factory=dict)      # improving/stable/worsening rounds
    corrections: int = 0                                          # ReplanRequest correction counts
    final_results: dict[str, int] = Field(default_factory=dict)   # FinalResults by directive
    omitted: dict[str, int] = Field(default_factory=dict)         # findings beyond the list cap
    auditor: dict[str, Any] = Field(default_factory=dict)         # node, pid, totals


# ----------------------------------------------------------------------------------------------
# Registry
# ----------------------------------------------------------------------------------------------

MESSAGE_TYPES: dict[str, type[Body]] = {
    cls.__name__: cls
    for cls in (
        Hello, Ack, Heartbeat, TaskCancel, EffectorStarted, EffectorExited, LlmUsage,
        TaskTransition,
        UserRequest, ClarificationRequest, ClarificationReply, ConversationalReply, TaskSpec,
        MemoryRecall, SubTask, DispatchManifest, SubTaskOffer, SubTaskClaim, SubTaskAssign,
        PlanningFailed, TaskLost, ExecutionResult, CorrectionSignal, ApprovalRequest, ApprovalDecision,
        SubTaskOutcome, ReplanRequest, OutcomeSummary, PlanDirective, FinalResult,
        MemoryWrite, MemoryQuery, MemoryResult, DreamerEvent, WorldQuery, WorldResult,
        GoalProposed, AuditReport,
    )
}


def type_name(msg: Body) -> str:
    return type(msg).__name__
