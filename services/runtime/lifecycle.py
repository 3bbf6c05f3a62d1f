"""One task lifecycle (seed 003's 9 states), one table of allowed transitions, and a trail.

Pure: no I/O. `transition()` is the only way a state changes: an illegal move is refused (the trail
counts it, the state stays), a legal one is appended to the trail as (from, to, actor role,
reason, time). `derive()` replays a run's decision log (`tasks/<run_id>.jsonl`: every role appends
to it) through `transition()`, so `artoo tasks` shows every run's state and trail, runs the CLI never
saw included.

The table is seed 003's, extended only where artoo has a path the seed lacks (marked `+` below):

* pending -> blocked -> pending: the perceiver asks a clarification before the task starts;
* in_progress / review -> cancelled: Ctrl+C or `artoo tasks cancel` at any time (TaskCancel);
* pending / blocked / review / rejected -> failed: GGS abandons from wherever the task stands (a
  replan that cannot be planned, the deadline while an approval is pending, a not-possible merge,
  the abandon after a rejection);
* failed / rejected -> archived, like completed and cancelled.

A rejection (the meta-validator asks for a replan) goes review -> rejected, and GGS's PlanDirective
takes it back to pending; the planner's new plan makes it in_progress again, as in the seed.
`completed` is reached only through `review` (the seed's submit-review rule): a conversational
reply passes review with the reason that there was nothing to validate.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable

STATES = ("pending", "in_progress", "blocked", "review", "completed", "failed", "rejected",
          "cancelled", "archived")
TERMINAL = frozenset({"completed", "failed", "cancelled", "archived"})

# from -> the states it may move to. The one table; nothing else decides what is legal.
TRANSITIONS: dict[str, frozenset[str]] = {
    "pending": frozenset({"in_progress", "cancelled", "blocked", "failed"}),        # + blocked, failed
    "in_progress": frozenset({"blocked", "review", "failed", "cancelled"}),         # + cancelled
    "blocked": frozenset({"in_progress", "cancelled", "pending", "failed"}),        # + pending, failed
    "review": frozenset({"completed", "rejected", "cancelled", "failed"}),          # + cancelled, failed
    "completed": frozenset({"archived"}),
    "failed": frozenset({"pending", "cancelled", "archived"}),                      # + archived
    "rejected": frozenset({"pending", "cancelled", "failed", "archived"}),          # + failed, archived
    "cancelled": frozenset({"archived"}),
    "archived": frozenset(),
}
assert set(TRANSITIONS) == set(STATES) and all(t <= set(STATES) for t in TRANSITIONS.values())


def allowed(frm: str | None, to: str) -> bool:
    """A task is created `pending`; afterwards only the table's moves are legal."""
    if frm is None:
        return to == "pending"
    return to in TRANSITIONS.get(frm, frozenset())


class IllegalTransition(ValueError):
    pass


@dataclass
class Trail:
    """A task's lifecycle: its current state, every applied transition, every refused one."""
    state: str | None = None
    entries: list[dict] = field(default_factory=list)
    refused: list[dict] = field(default_factory=list)

    def as_dict(self) -> dict:
        return {"state": self.state, "trail": list(self.entries), "refused": list(self.refused)}


def transition(trail: Trail, to: str, actor: str, reason: str = "", ts: float = 0.0, *,
               strict: bool = False) -> bool:
    """Move `trail` to `to` if the table allows it. Returns True when applied; an illegal move is
    recorded in `trail.refused` (counted, never applied), or raises with `strict=True`."""
    entry = {"from": trail.state, "to": to, "actor": actor, "reason": reason, "ts": ts}
    if to not in STATES or not allowed(trail.state, to):
        if strict:
            raise IllegalTransition(f"{trail.state} -> {to} is not an allowed transition")
        trail.refused.append(entry)
        return False
    trail.entries.append(entry)
    trail.state = to
    return True


def _quiet_approval(e: dict) -> bool:
    """An approval nobody waited for: pre-approved by --yes, or denied for want of an operator."""
    return e.get("decided_by") in ("--yes", "no-operator")


def derive(events: Iterable[dict]) -> Trail:
    """A run's lifecycle from its decision-log events (in file order)."""
    trail = Trail()
    go = lambda to, actor, reason, e: transition(trail, to, actor, reason,  # noqa: E731
                                                 float(e.get("ts") or 0.0))
    for e in events:
        kind = e.get("kind")
        if trail.state is None:
            go("pending", "scheduler" if kind == "schedule_fired" else "user",
               f"scheduled by {e.get('schedule_id')}" if kind == "schedule_fired" else "submitted",
               e)
        state = trail.state
        if kind == "clarification":
            go("blocked", "perceiver", f"asked: {e.get('question', '')}"[:200], e)
        elif kind == "clarification_reply" and state == "blocked":
            go("pending", "user" if not e.get("timed_out") else "perceiver",
               "no answer in time" if e.get("timed_out") else "answered", e)
        elif kind == "task_begin":
            conversational = e.get("path") == "conversational"
            go("in_progress", "perceiver",
               "greeting: answered directly" if conversational else "TaskSpec", e)
        elif kind == "plan" and state == "pending":
            go("in_progress", "planner", f"plan round {e.get('plan_round')}", e)
        elif kind == "approval" and e.get("subtask_id") and not _quiet_approval(e):
            if go("blocked", "executor", f"Law 1 approval asked: {e.get('command') or ''}"[:200],
                  e):
                go("in_progress", str(e.get("decided_by") or "operator"),
                   "approved" if e.get("approved") else "denied", e)
        elif kind == "merge_verdict" and state == "in_progress":
            go("review", "metaval", f"meta-validation of round {e.get('plan_round')}", e)
        elif kind == "replan":
            if state == "in_progress":
                go("review", "metaval", f"meta-validation of round {e.get('plan_round')}", e)
            go("rejected", "metaval", str(e.get("gap_summary") or "replan")[:200], e)
        elif kind == "plan_directive" and state == "rejected":
            go("pending", "ggs", f"replan round {e.get('replan_round')}: {e.get('directive')}", e)
        elif kind == "task_end":
            _end(trail, e, go)
    return trail


# the decision-log events derive() turns into moves
KINDS = frozenset({"schedule_fired", "clarification", "clarification_reply", "task_begin", "plan",
                   "approval", "merge_verdict", "replan", "plan_directive", "task_end"})


def caused_by(events: list[dict], event: dict) -> list[tuple[dict, bool]]:
    """The moves (applied, or refused: True) that `event` adds to the trail of `events` (the
    run's log, `event` included): what the role that wrote `event` publishes."""
    ts = float(event.get("ts") or 0.0)
    trail = derive(events)
    applied = [m for m in trail.entries if m["ts"] == ts]
    first = trail.entries[0] if trail.entries else None
    if applied and first is not None and first not in applied and \
            trail.entries[1] is applied[0]:    # the task's creation rides on its first move
        applied.insert(0, first)
    return [(m, False) for m in applied] + [(m, True) for m in trail.refused if m["ts"] == ts]


def _end(trail: Trail, e: dict, go) -> None:
    status, reason = e.get("status"), str(e.get("reason") or "")
    if status in ("accepted", "success", "conversational"):
        if trail.state == "in_progress":
            go("review", "perceiver" if status == "conversational" else "metaval",
               "conversational reply: nothing to validate" if status == "conversational"
               else "outcomes merged", e)
        go("completed", "perceiver" if status == "conversational" else "ggs",
           str(e.get("outcome") or status), e)
    elif reason == "cancelled":
        go("cancelled", "ggs", str(e.get("summary") or "cancelled")[:200], e)
    else:
        go("failed", "ggs", f"{e.get('outcome') or status}: {reason}"[:200], e)
