"""The task lifecycle (services/runtime/lifecycle.py): the one transition table, every illegal move
refused and counted, and the state + trail derived from decision-log events."""
from __future__ import annotations

import itertools

import pytest

from services.runtime import lifecycle
from services.runtime.lifecycle import STATES, TRANSITIONS, IllegalTransition, Trail, derive, transition

SEED_003 = {  # seed 003's table: artoo's may only add to it
    "pending": {"in_progress", "cancelled"}, "in_progress": {"blocked", "review", "failed"},
    "blocked": {"in_progress", "cancelled"}, "review": {"completed", "rejected"},
    "completed": {"archived"}, "failed": {"pending", "cancelled"},
    "rejected": {"pending", "cancelled"}, "cancelled": {"archived"}, "archived": set(),
}


def at(state: str) -> Trail:
    return Trail(state=state)


def test_nine_states_and_the_seed_table_is_kept():
    assert len(STATES) == 9 and set(TRANSITIONS) == set(STATES)
    for frm, tos in SEED_003.items():
        assert tos <= TRANSITIONS[frm], frm
    assert not TRANSITIONS["archived"]
    assert all("completed" not in tos for frm, tos in TRANSITIONS.items() if frm != "review")


@pytest.mark.parametrize("frm, to", [(f, t) for f, t in itertools.product(STATES, STATES)
                                     if t not in TRANSITIONS[f]])
def test_every_illegal_transition_is_refused_and_counted(frm, to):
    trail = at(frm)
    assert transition(trail, to, "tester", "x", 1.0) is False
    assert trail.state == frm and trail.entries == []
    assert trail.refused == [{"from": frm, "to": to, "actor": "tester", "reason": "x", "ts": 1.0}]
    with pytest.raises(IllegalTransition):
        transition(trail, to, "tester", strict=True)
    assert trail.state == frm and len(trail.refused) == 1


@pytest.mark.parametrize("frm, to", [(f, t) for f in STATES for t in sorted(TRANSITIONS[f])])
def test_every_legal_transition_is_applied_with_its_trail(frm, to):
    trail = at(frm)
    assert transition(trail, to, "ggs", "why", 2.0)
    assert trail.state == to and trail.entries == [
        {"from": frm, "to": to, "actor": "ggs", "reason": "why", "ts": 2.0}] and not trail.refused


def test_a_task_starts_pending_and_unknown_states_are_refused():
    assert not transition(Trail(), "in_progress", "x") and transition(Trail(), "pending", "user")
    assert not transition(at("pending"), "done", "x")


def ev(kind: str, ts: float, **fields) -> dict:
    return {"kind": kind, "ts": ts, "task_id": "run-1", **fields}


def path(trail: Trail) -> list[str]:
    return [trail.entries[0]["from"] or "-"] + [e["to"] for e in trail.entries]


def test_derive_accepted_run_with_an_approval_the_operator_answered():
    t = derive([ev("task_begin", 1), ev("plan", 2, plan_round=0), ev("dispatch", 3),
                ev("approval", 4, subtask_id="st", command="rm x", approved=True,
                   decided_by="operator"),
                ev("approval", 4.5, approval_id="a1", approved=True, decided_by="operator"),
                ev("subtask_end", 5), ev("merge_verdict", 6, plan_round=0, verdict="accept"),
                ev("ggs_decision", 7), ev("task_end", 8, status="accepted", outcome="verified")])
    assert path(t) == ["-", "pending", "in_progress", "blocked", "in_progress", "review",
                       "completed"]
    assert t.state == "completed" and not t.refused
    assert [e["actor"] for e in t.entries] == ["user", "perceiver", "executor", "operator",
                                               "metaval", "ggs"]


def test_derive_replan_then_abandon_and_a_scheduled_start():
    t = derive([ev("schedule_fired", 0, schedule_id="s-1"), ev("task_begin", 1), ev("plan", 2),
                ev("approval", 2.5, subtask_id="st", decided_by="--yes", approved=True),
                ev("subtask_end", 3), ev("replan", 4, plan_round=0, gap_summary="file missing"),
                ev("ggs_decision", 5), ev("plan_directive", 6, replan_round=1,
                                          directive="change_path"),
                ev("plan", 7, plan_round=1), ev("subtask_end", 8),
                ev("replan", 9, plan_round=1, gap_summary="still missing"),
                ev("ggs_decision", 10), ev("task_end", 11, status="abandoned",
                                           reason="max_replans", outcome="abandoned")])
    assert path(t) == ["-", "pending", "in_progress", "review", "rejected", "pending",
                       "in_progress", "review", "rejected", "failed"]
    assert t.entries[0]["actor"] == "scheduler" and "s-1" in t.entries[0]["reason"]
    assert t.entries[3]["reason"] == "file missing" and not t.refused


def test_derive_clarification_cancel_conversational_and_planning_failure():
    t = derive([ev("clarification", 1, question="which file?"), ev("clarification_reply", 2),
                ev("task_begin", 3), ev("plan", 4), ev("task_end", 5, status="abandoned",
                                                       reason="cancelled")])
    assert path(t) == ["-", "pending", "blocked", "pending", "in_progress", "cancelled"]
    t = derive([ev("task_begin", 1, path="conversational"),
                ev("task_end", 2, status="conversational")])
    assert path(t) == ["-", "pending", "in_progress", "review", "completed"] and not t.refused
    t = derive([ev("task_begin", 1), ev("subtask_end", 2), ev("replan", 3),
                ev("plan_directive", 4), ev("planning_failed", 5),
                ev("task_end", 6, status="abandoned", reason="planning_failed")])
    assert path(t)[-2:] == ["pending", "failed"] and not t.refused
    running = derive([ev("task_begin", 1), ev("plan", 2)])
    assert running.state == "in_progress"


def test_derive_refuses_what_the_table_forbids():
    # a second task_end after the run ended cannot move a terminal state: refused, counted
    t = derive([ev("task_begin", 1), ev("task_end", 2, status="abandoned", reason="deadline"),
                ev("task_end", 3, status="accepted", outcome="verified")])
    assert t.state == "failed" and [(r["from"], r["to"]) for r in t.refused] == [
        ("failed", "completed")]
    assert lifecycle.allowed("failed", "archived") and not lifecycle.allowed("failed", "completed")
