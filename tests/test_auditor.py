"""The auditor's analysis (auditor/auditor.py AuditState): pure logic fed with envelopes and a clock.

The process-level behaviour (bus, operator socket, reports on disk, publishing nothing but
heartbeats) is in test_auditor_process.py.
"""
from __future__ import annotations

import pytest

from auditor.auditor import AuditState, boundary_problem
from protocol.envelope import Envelope, dump_body, encode, topic_for
from protocol.messages import (AuditReport, ExecutionResult, FinalResult, Heartbeat, LlmUsage,
                               LossBreakdown, Megram, MemoryWrite, OutcomeSummary, PlanDirective,
                               ReplanRequest, SubTaskOutcome, TaskSpec, ToolCallRecord)
from protocol.routes import ANY, ROUTES, SELF
from protocol.settings import load_settings

T0 = 1_800_000_000.0


@pytest.fixture
def s(artoo_env):
    return load_settings()


def env(msg, sender: str, to: str | None = None, node: str | None = None, task: str = "run1",
        ts: float = T0, seq: int = 1) -> Envelope:
    return Envelope(type=type(msg).__name__, body=dump_body(msg), sender=sender,
                    node=node or f"{sender}-0-1-aaaa", to=to, task=task, ts=ts, seq=seq)


def state(s, expected=(), now=T0) -> AuditState:
    return AuditState(s, list(expected), now, node="auditor-0-9-ffff")


def hb(role: str, node: str, started_at: float = T0 - 100, **kw) -> Heartbeat:
    return Heartbeat(role=role, node=node, pid=1, started_at=started_at, **kw)


# -- boundary -------------------------------------------------------------------------------------

def test_every_route_in_the_catalogue_is_allowed():
    for type_name, route in ROUTES.items():
        for frm, to in route.pairs:
            sender = "planner" if frm == ANY else frm
            if type_name == "AuditReport" or sender == "auditor" and type_name != "Heartbeat":
                continue
            receiver = None if to == ANY else "self" if to == SELF else to
            e = Envelope(type=type_name, body={}, sender=sender, node="n", to=receiver)
            assert boundary_problem(e) is None, (type_name, frm, to)


def test_effector_sending_memory_write_is_a_boundary_violation(s):
    st = state(s)
    write = MemoryWrite(task_id="run1", megrams=[Megram(space="a", entity="b", f=1, sigma=1,
                                                        k=0.1)])
    st.observe(env(write, "executor", to="memory", ts=T0 + 1), T0 + 1.001)
    st.observe(env(write, "ggs", to="memory"), T0 + 2)              # the legitimate writer
    st.observe(env(write, "agentval"), T0 + 3)                      # broadcast, still not allowed
    rep = st.report("on_demand", T0 + 4)
    assert [(v["sender"], v["type"]) for v in rep.boundary_violations] == [
        ("executor", "MemoryWrite"), ("agentval", "MemoryWrite")]
    first = rep.boundary_violations[0]
    assert first["time"] == T0 + 1 and first["to"] == "memory" and first["node"].startswith(
        "executor") and "ggs→memory" in first["reason"]


def test_auditor_itself_and_audit_reports_on_the_bus_are_violations(s):
    st = state(s)
    st.observe(env(hb("auditor", "auditor-0-9-ffff"), "auditor", task="auditor"), T0)
    hello = Envelope(type="Hello", body={"node": "x", "nonce": "1"}, sender="auditor",
                     node="auditor-0-9-ffff", to="self")
    st.observe(hello, T0)
    assert st.report("on_demand", T0).boundary_violations == []
    st.observe(env(TaskSpec(task_id="r", intent_slug="x", intent="x", raw_input="x"), "auditor",
                   to="planner"), T0)
    st.observe(env(AuditReport(report_id="x", window_start=0, window_end=1), "auditor",
                   to="user"), T0)
    reasons = [v["reason"] for v in st.report("on_demand", T0).boundary_violations]
    assert "the auditor published TaskSpec" in reasons[0]
    assert "operator socket" in reasons[1]


def test_malformed_frames_are_counted_not_fatal(s):
    st = state(s)
    st.observe_frames([b"garbage"], T0)
    st.observe_frames(st.signer.sign(b"X/-", b"\xc1\xc1"), T0)
    bad_body = Envelope(type="PlanDirective", body={"task_id": 3}, sender="ggs", node="g",
                        to="planner")
    frames = st.signer.sign(topic_for("PlanDirective", "run1"), encode(bad_body))
    st.observe_frames(frames, T0)
    st.observe_frames(frames[:2], T0)                                   # unsigned
    st.observe_frames(frames[:2] + [b"\x00" * 32], T0)                 # forged
    rep = st.report("on_demand", T0)
    assert rep.role_stats["ggs"]["invalid"] == 1
    assert sorted((g["kind"], g["sender"], g["count"]) for g in rep.bus_gaps) == [
        ("undecodable", "bad_signature", 1), ("undecodable", "frames", 1),
        ("undecodable", "msgpack", 1), ("undecodable", "unsigned", 1)]
    assert st.errors == 0


# -- convergence ----------------------------------------------------------------------------------

def directive(d: float, grad: float, name: str = "refine", rnd: int = 1) -> PlanDirective:
    return PlanDirective(task_id="run1", directive=name, grad_l=grad, replan_round=rnd,
                         loss=LossBreakdown(D=d, P=0.6, Omega=0.2, L=0.6 * d + 0.2))


def test_worsening_gap_and_ggs_thrashing(s):
    st = state(s)
    st.observe(env(directive(0.6, 0.0, "change_path", 1), "ggs", "planner"), T0)
    st.observe(env(directive(0.7, 0.3, "refine", 2), "ggs", "planner"), T0 + 1)
    st.observe(env(directive(0.7, 0.0, "break_symmetry", 3), "ggs", "planner"), T0 + 2)
    st.observe(env(directive(0.72, 0.02, "break_symmetry", 4), "ggs", "planner"), T0 + 3)
    rep = st.report("on_demand", T0 + 4)
    kinds = [c["kind"] for c in rep.convergence_failures]
    assert kinds == ["worsening_gap", "ggs_thrashing"]
    worse = rep.convergence_failures[0]
    assert worse["round"] == 2 and worse["grad_l"] == 0.3 and len(worse["trend"]) == 2
    assert rep.convergence_failures[1]["streak"] == 2
    assert rep.gap_trends == {"stable": 3, "worsening": 1}


def test_break_symmetry_that_improves_is_not_thrashing(s):
    st = state(s)
    st.observe(env(directive(0.7, 0.0, "break_symmetry", 1), "ggs", "planner"), T0)
    st.observe(env(directive(0.5, -0.05, "break_symmetry", 2), "ggs", "planner"), T0)
    st.observe(env(directive(0.4, -0.05, "break_symmetry", 3), "ggs", "planner"), T0)
    assert st.report("on_demand", T0).convergence_failures == []


def test_correction_thrashing(s):
    st = state(s)
    st.observe(env(ReplanRequest(task_id="run1", correction_count=2), "metaval", "ggs"), T0)
    st.observe(env(ReplanRequest(task_id="run1", correction_count=6, plan_round=1), "metaval",
                   "ggs"), T0)
    rep = st.report("on_demand", T0)
    assert [c["kind"] for c in rep.convergence_failures] == ["correction_thrashing"]
    assert rep.corrections == 8


# -- drift ----------------------------------------------------------------------------------------

def outcomes(st, matched: int, failed: int, now: float) -> None:
    for i in range(matched + failed):
        st.observe(env(SubTaskOutcome(task_id="run1", subtask_id=f"s{i}", parent_task_id="run1",
                                      status="matched" if i < matched else "failed"),
                       "agentval", "metaval"), now)


def test_role_drift_against_its_own_baseline(s):
    st = state(s)
    outcomes(st, 9, 1, T0)
    for i in range(6):
        st.observe(env(LlmUsage(role="planner", tier="BRAIN", latency_ms=100 + i), "planner"),
                   T0)
    for _ in range(2):
        st.observe(env(ExecutionResult(task_id="run1", subtask_id="s", status="completed",
                                       tool_calls=[ToolCallRecord(tool="shell"),
                                                   ToolCallRecord(tool="shell")]),
                       "executor", "agentval"), T0)
    first = st.roll(T0 + 300)
    assert first.drift_alerts == []            # no baseline yet: nothing to drift from
    assert first.role_stats["agentval"]["metrics"]["pass_rate"]["value"] == 0.9
    outcomes(st, 3, 7, T0 + 301)
    for _ in range(6):
        st.observe(env(LlmUsage(role="planner", tier="BRAIN", latency_ms=450), "planner"),
                   T0 + 302)
    for _ in range(3):
        st.observe(env(ExecutionResult(task_id="run1", subtask_id="s", status="failed",
                                       tool_calls=[ToolCallRecord(tool="shell", error="boom"),
                                                   ToolCallRecord(tool="shell")]),
                       "executor", "agentval"), T0 + 302)
    rep = st.report("on_demand", T0 + 310)
    alerts = {(a["role"], a["metric"]): a for a in rep.drift_alerts}
    assert set(alerts) == {("agentval", "pass_rate"), ("planner", "llm_latency_ms")}
    assert alerts[("agentval", "pass_rate")]["direction"] == "down"
    assert alerts[("agentval", "pass_rate")]["baseline"] == 0.9
    # the executor's first window had only 4 tool calls: too few to become a baseline, so its
    # 50% failure rate now is reported but not judged
    tool = rep.role_stats["executor"]["metrics"]["tool_failure_rate"]
    assert tool["value"] == 0.5 and tool["baseline"] is None


def test_replan_rate_drift(s):
    st = state(s)
    for _ in range(10):
        st.observe(env(OutcomeSummary(task_id="r"), "metaval", "ggs"), T0)
    st.roll(T0 + 300)
    for _ in range(6):
        st.observe(env(ReplanRequest(task_id="r"), "metaval", "ggs"), T0 + 301)
    rep = st.report("on_demand", T0 + 310)
    assert [(a["role"], a["metric"], a["value"]) for a in rep.drift_alerts] == [
        ("metaval", "replan_rate", 1.0)]


# -- bus gaps and missing roles -------------------------------------------------------------------

def test_bus_gaps_count_growth_only(s):
    st = state(s)
    st.observe(env(hb("planner", "planner-0-1-a", gaps={"ggs-0-2-b": 4}), "planner"), T0)
    st.observe(env(hb("planner", "planner-0-1-a", gaps={"ggs-0-2-b": 9}, lost=1), "planner"),
               T0 + 1)
    st.observe(env(hb("tap", "tap-0-3-c", started_at=T0 + 0.5, info={"capture_lost": 7}),
                   "tap"), T0 + 1)
    rep = st.report("on_demand", T0 + 2)
    got = {(g["kind"], g["receiver"], g["sender"]): g["count"] for g in rep.bus_gaps}
    # 4 were missed before the auditor started watching: only the growth counts
    assert got == {("seq_gap", "planner-0-1-a", "ggs-0-2-b"): 5,
                   ("work_lost", "planner-0-1-a", None): 1,
                   ("capture_lost", "tap-0-3-c", None): 7}


def test_own_view_sequence_gaps(s):
    st = state(s)
    msg = LlmUsage(role="planner", tier="BRAIN")
    for seq in (1, 2, 5):
        e = env(msg, "planner", seq=seq)
        st.observe_frames(st.signer.sign(topic_for("LlmUsage", "run1"), encode(e)), T0)
    gaps = st.report("on_demand", T0).bus_gaps
    assert [(g["kind"], g["sender"], g["count"]) for g in gaps] == [("seq_gap", "planner-0-1-aaaa",
                                                                     2)]


def test_missing_roles_and_recovery(s):
    st = state(s, expected=[("planner", 0), ("tap", 0)])
    st.observe(env(hb("planner", "planner-0-1-a"), "planner"), T0 + 0.5)
    st.tick(T0 + 2)
    assert st.report("on_demand", T0 + 2).missing_roles == []
    st.observe(env(hb("tap", "tap-0-3-c"), "tap"), T0 + 2.5)
    st.tick(T0 + 4)                        # planner silent 3.5 s > 3 s
    st.observe(env(hb("tap", "tap-0-3-c"), "tap"), T0 + 4)
    rep = st.report("on_demand", T0 + 4)
    assert [(m["role"], m["state"]) for m in rep.missing_roles] == [("planner", "missing")]
    assert rep.missing_roles[0]["last_seen"] == T0 + 0.5
    st.observe(env(hb("planner", "planner-0-7-z"), "planner"), T0 + 6)   # restarted
    rep = st.report("on_demand", T0 + 6)
    (ep,) = rep.missing_roles
    assert ep["state"] == "recovered" and ep["restarted"] and ep["silent_s"] == 5.5
    assert rep.role_stats["planner"]["restarts"] == 1


def test_roll_resets_the_window_but_keeps_state(s):
    st = state(s, expected=[("planner", 0)])
    st.observe(env(TaskSpec(task_id="run1", intent_slug="x", intent="x", raw_input="x"),
                   "perceiver"), T0)
    st.observe(env(MemoryWrite(task_id="run1", megrams=[]), "executor", "memory"), T0)
    st.tick(T0 + 10)
    first = st.roll(T0 + 300)
    assert first.trigger == "periodic" and first.tasks_observed == 1
    assert len(first.boundary_violations) == 1 and len(first.missing_roles) == 1
    second = st.report("on_demand", T0 + 301)
    assert second.window_start == first.window_end
    assert second.boundary_violations == [] and second.messages_observed == 0
    assert [m["state"] for m in second.missing_roles] == ["missing"]   # still missing
    st.observe(env(FinalResult(task_id="run1", directive="success", summary="ok"), "ggs",
                   "user"), T0 + 302)
    assert st.report("on_demand", T0 + 303).final_results == {"success": 1}


def test_findings_are_capped_and_the_rest_counted(artoo_env, monkeypatch):
    monkeypatch.setenv("ARTOO_AUDIT_MAX_FINDINGS", "3")
    st = state(load_settings())
    for i in range(10):
        st.observe(env(MemoryWrite(task_id="run1", megrams=[]), "executor", "memory"), T0 + i)
    rep = st.report("on_demand", T0 + 20)
    assert len(rep.boundary_violations) == 3 and rep.omitted == {"boundary_violations": 7}


def test_a_worker_host_gone_silent_is_a_missing_host_not_a_missing_role(s):
    # the main host runs spawner 0 and so does the worker: the worker's beats are its host's
    st = state(s, expected=[("spawner", 0)])
    st.observe(env(hb("spawner", "spawner-0-1-a", host=s.host), "spawner"), T0 + 0.5)
    st.observe(env(hb("spawner", "spawner-0-2-b", host="w1"), "spawner"), T0 + 0.5)
    for t in (T0 + 2, T0 + 3.5):
        st.observe(env(hb("spawner", "spawner-0-1-a", host=s.host), "spawner"), t)
    st.tick(T0 + 4)                        # w1 silent 3.5 s > 3 s
    rep = st.report("on_demand", T0 + 4)
    assert rep.missing_roles == [] and rep.role_stats.get("spawner", {}).get("restarts") is None
    (gone,) = rep.missing_hosts
    assert (gone["host"], gone["state"], gone["roles"]) == ("w1", "missing", ["spawner[0]"])
    st.observe(env(hb("spawner", "spawner-0-2-b", host="w1"), "spawner"), T0 + 6)
    (back,) = st.report("on_demand", T0 + 6).missing_hosts
    assert back["state"] == "recovered" and back["silent_s"] == 5.5
