"""Who may send which message type to whom: the one from→to table of the catalogue (DESIGN §5).

The auditor's boundary rules are this table; `docs/PROTOCOL.md` is generated from it
(`python -m protocol.routes > docs/PROTOCOL.md`). A *work* message moves a task forward: it is
acknowledged by every listed consumer role and re-sent until it is (DESIGN §4).
"""
from __future__ import annotations

import sys
from dataclasses import dataclass

from .messages import MESSAGE_TYPES

ROLES = (
    "user", "perceiver", "planner", "executor", "agentval", "metaval", "ggs", "memory",
    "auditor", "tap", "bus", "spawner", "scheduler", "metrics", "world",
)
ANY = "*"          # any role (as sender) / broadcast to observers (as receiver)
SELF = "self"      # the sender itself (readiness probe)
ROLE_NAMES = {
    "user": "User (CLI)", "perceiver": "R1 Perceiver", "planner": "R2 Planner + dispatcher",
    "executor": "R3 Executor", "agentval": "R4a Agent-Validator", "metaval": "R4b Meta-Validator",
    "ggs": "R7 Goal Gradient Solver", "memory": "R5 Memory", "auditor": "R6 Auditor",
    "tap": "Tap", "bus": "Bus proxy", "spawner": "Effector spawner",
    "scheduler": "Scheduler (scheduled goals)", "metrics": "Metrics exporter (Prometheus)",
    "world": "World model (seed 002: entities, facts, goals)",
}
LLM_ROLES = ("perceiver", "planner", "executor", "agentval", "metaval", "memory", "world")
# the roles whose decision-log events move a task's lifecycle
TRANSITION_ROLES = ("perceiver", "planner", "executor", "metaval", "ggs", "scheduler")


@dataclass(frozen=True)
class Route:
    pairs: tuple[tuple[str, str], ...]    # allowed (sender role, receiver role)
    work: bool = False                    # acknowledged + re-sent until acked
    note: str = ""

    def consumers(self, sender: str) -> tuple[str, ...]:
        return tuple(to for frm, to in self.pairs if frm in (sender, ANY) and to not in (ANY, SELF))


def _r(*pairs: str, work: bool = False, note: str = "") -> Route:
    return Route(tuple(tuple(p.split("->")) for p in pairs), work, note)  # type: ignore[misc]


ROUTES: dict[str, Route] = {
    # infrastructure
    "Hello": _r(f"{ANY}->{SELF}", note="readiness probe, comes back to its sender (its node, "
                                       "or a thread's reply address `node~k`)"),
    "Ack": _r(f"{ANY}->{ANY}", note="directed to the sender of the acknowledged message"),
    "Heartbeat": _r(f"{ANY}->{ANY}", note="every second from every process"),
    "LlmUsage": _r(*(f"{r}->{ANY}" for r in LLM_ROLES), note="per-call accounting (telemetry)"),
    "TaskTransition": _r(*(f"{r}->{ANY}" for r in TRANSITION_ROLES),
                         note="a task's lifecycle move (telemetry; the trail in the audit log)"),
    "TaskCancel": _r(f"user->{ANY}", "ggs->*", note="reaches every role and effector"),
    "EffectorStarted": _r(f"spawner->{ANY}"),
    "EffectorExited": _r("spawner->planner", work=True,
                         note="the dispatcher fails or re-offers the subtask of a dead effector"),
    # user <-> perceiver
    "UserRequest": _r("user->perceiver", "scheduler->perceiver", work=True,
                      note="the scheduler starts a scheduled goal's run as the CLI does"),
    "ClarificationRequest": _r("perceiver->user", work=True),
    "ClarificationReply": _r("user->perceiver", work=True),
    "ConversationalReply": _r("perceiver->user", work=True, note="greeting fast path"),
    "TaskSpec": _r("perceiver->planner", "perceiver->ggs", work=True,
                   note="GGS arms the task deadline from it"),
    # planner / dispatcher / placement
    "MemoryRecall": _r("planner->memory", note="display of the calibration, not a query"),
    "DispatchManifest": _r("planner->metaval", work=True),
    "SubTask": _r("planner->executor", note="observability copy; delivery is Offer/Assign"),
    "SubTaskOffer": _r("planner->spawner"),
    "SubTaskClaim": _r("spawner->planner"),
    "SubTaskAssign": _r("planner->spawner", work=True),
    "PlanningFailed": _r("planner->ggs", work=True),
    "TaskLost": _r("perceiver->ggs", "planner->ggs", "metaval->ggs", work=True,
                   note="the instance that took over a dead instance's task could not get its "
                        "state; GGS ends the task honestly"),
    # effector
    "ExecutionResult": _r("executor->agentval"),
    "CorrectionSignal": _r("agentval->executor"),
    "ApprovalRequest": _r("executor->user", work=True),
    "ApprovalDecision": _r("user->executor", work=True),
    "SubTaskOutcome": _r("agentval->metaval", "agentval->planner", "planner->metaval",
                         "planner->planner", work=True,
                         note="the dispatcher also emits failed outcomes for dead effectors"),
    # meta-validation and the solver
    "ReplanRequest": _r("metaval->ggs", work=True),
    "OutcomeSummary": _r("metaval->ggs", work=True),
    "PlanDirective": _r("ggs->planner", work=True),
    "FinalResult": _r("ggs->user", work=True,
                      note="GGS is the only role that delivers one; the CLI following the run acks "
                           "it, or, for a scheduled run, the scheduler (acking as `user`)"),
    # memory
    "MemoryWrite": _r("ggs->memory", "user->memory", work=True),
    "MemoryQuery": _r("planner->memory", "perceiver->memory", "user->memory",
                      note="request/reply by correlation id"),
    "MemoryResult": _r("memory->planner", "memory->perceiver", "memory->user"),
    "DreamerEvent": _r(f"memory->{ANY}"),
    # world model (seed 002)
    "WorldQuery": _r("perceiver->world", "planner->world", "user->world",
                     note="request/reply by correlation id; the projection, listings, goals"),
    "WorldResult": _r("world->perceiver", "world->planner", "world->user"),
    "GoalProposed": _r(f"world->{ANY}",
                       note="a proposal waiting for `artoo goals accept` (Law 1); telemetry"),
    # auditor: operator channel only
    "AuditReport": _r("auditor->user", note="over the operator socket, never on the bus"),
}

WORK_TYPES = frozenset(t for t, r in ROUTES.items() if r.work)


def allowed(type_name: str, sender: str, receiver: str | None) -> bool:
    """True when `sender` may send `type_name` to `receiver` (None = broadcast)."""
    route = ROUTES.get(type_name)
    if route is None:
        return False
    receiver = receiver or ANY
    for frm, to in route.pairs:
        if frm not in (sender, ANY):
            continue
        if to == ANY or to == receiver or (to == SELF and receiver in (SELF, sender)):
            return True
    return False


def consumers(type_name: str, sender: str) -> tuple[str, ...]:
    """The roles that must acknowledge a work message of this type from this sender."""
    route = ROUTES.get(type_name)
    return route.consumers(sender) if route else ()


def render_markdown() -> str:
    lines = [
        "# Bus message catalogue",
        "",
        "Generated from `protocol/routes.py` by `python -m protocol.routes`; do not edit by hand.",
        "The auditor reports any message whose (sender, receiver) pair is not listed here.",
        "*Work* messages are acknowledged by each receiver role and re-sent with backoff until they are.",
        "",
        "| type | from → to | work (acked) | fields | note |",
        "|---|---|---|---|---|",
    ]
    for name, route in ROUTES.items():
        pairs = "<br>".join(f"{f} → {t}" for f, t in route.pairs)
        model = MESSAGE_TYPES[name]
        fields = ", ".join(model.model_fields)
        lines.append(f"| {name} | {pairs} | {'yes' if route.work else ''} | {fields} | {route.note} |")
    lines += ["", "Roles: " + ", ".join(f"`{r}` {ROLE_NAMES[r]}" for r in ROLES), ""]
    return "\n".join(lines)


assert set(ROUTES) == set(MESSAGE_TYPES), set(ROUTES) ^ set(MESSAGE_TYPES)

if __name__ == "__main__":  # pragma: no cover
    sys.stdout.write(render_markdown())
