"""Unit tests of the GGS mathematics (services/roles/loss.py): the 24-cell table of seeds/000 Appendix A
as the oracle, the boundary value of every threshold, D/P/Ω/L, the overrides, blocked sets from the
structured tool records, and Megram construction by the quantization matrix."""
from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from protocol.messages import (CriterionVerdict, GapTrajectoryPoint, OutcomeSummary, ReplanRequest,
                               SubTaskOutcome, ToolCallRecord)
from services.roles import loss
from services.roles.loss import GgsParams, Trajectory

P0 = GgsParams()
EPS, DELTA, RHO, THETA = P0.epsilon, P0.delta, P0.rho, P0.theta

# Representative values of each class of Appendix A.
GRAD = {"<-e": -0.3, "|<e|": 0.0, ">e": 0.3}
D_ = {"<=d": 0.2, ">d": 0.7}
P_ = {"<=r": 0.2, ">r": 0.8}
OM = {"<t": 0.5, ">=t": 0.9}

# seeds/000 Appendix A, verbatim: (#, ∇L, D, P, Ω, macro-state).
APPENDIX_A = [
    (1, "<-e", "<=d", "<=r", "<t", "success"), (2, "<-e", "<=d", ">r", "<t", "success"),
    (3, "<-e", "<=d", "<=r", ">=t", "abandon"), (4, "<-e", "<=d", ">r", ">=t", "abandon"),
    (5, "<-e", ">d", "<=r", "<t", "refine"), (6, "<-e", ">d", ">r", "<t", "change_approach"),
    (7, "<-e", ">d", "<=r", ">=t", "abandon"), (8, "<-e", ">d", ">r", ">=t", "abandon"),
    (9, "|<e|", "<=d", "<=r", "<t", "success"), (10, "|<e|", "<=d", ">r", "<t", "success"),
    (11, "|<e|", "<=d", "<=r", ">=t", "abandon"), (12, "|<e|", "<=d", ">r", ">=t", "abandon"),
    (13, "|<e|", ">d", "<=r", "<t", "change_path"), (14, "|<e|", ">d", ">r", "<t", "break_symmetry"),
    (15, "|<e|", ">d", "<=r", ">=t", "abandon"), (16, "|<e|", ">d", ">r", ">=t", "abandon"),
    (17, ">e", "<=d", "<=r", "<t", "success"), (18, ">e", "<=d", ">r", "<t", "success"),
    (19, ">e", "<=d", "<=r", ">=t", "abandon"), (20, ">e", "<=d", ">r", ">=t", "abandon"),
    (21, ">e", ">d", "<=r", "<t", "refine"), (22, ">e", ">d", ">r", "<t", "change_approach"),
    (23, ">e", ">d", "<=r", ">=t", "abandon"), (24, ">e", ">d", ">r", ">=t", "abandon"),
]


def test_appendix_a_is_complete():
    cells = {(g, d, p, o) for _, g, d, p, o, _ in APPENDIX_A}
    assert len(cells) == 24 == len(APPENDIX_A)


@pytest.mark.parametrize("num,g,d,p,o,expected", APPENDIX_A, ids=[f"cell{r[0]}" for r in APPENDIX_A])
def test_24_cells(num, g, d, p, o, expected):
    assert loss.macro_state(D_[d], P_[p], OM[o], GRAD[g], P0) == expected
    # The full decision (no streak, R4b recommends replan) agrees with the table.
    decision = loss.decide(D_[d], P_[p], OM[o], GRAD[g], P0)
    assert decision.directive == expected and decision.cell == expected


BOUNDARIES = [
    # threshold θ: Ω ≥ θ abandons
    ("omega=theta", dict(D=0.7, P=0.2, omega=THETA, grad=0.0), "abandon"),
    ("omega<theta", dict(D=0.7, P=0.2, omega=THETA - 1e-6, grad=0.0), "change_path"),
    # threshold δ: D ≤ δ is success
    ("D=delta", dict(D=DELTA, P=0.8, omega=0.5, grad=0.0), "success"),
    ("D>delta", dict(D=DELTA + 1e-6, P=0.8, omega=0.5, grad=0.0), "break_symmetry"),
    # threshold ρ: P > ρ is logical, P = ρ environmental
    ("P=rho", dict(D=0.7, P=RHO, omega=0.5, grad=0.0), "change_path"),
    ("P>rho", dict(D=0.7, P=RHO + 1e-6, omega=0.5, grad=0.0), "break_symmetry"),
    # threshold ε: |∇L| ≥ ε has signal, on either side
    ("grad=+eps", dict(D=0.7, P=0.2, omega=0.5, grad=EPS), "refine"),
    ("grad<+eps", dict(D=0.7, P=0.2, omega=0.5, grad=EPS - 1e-6), "change_path"),
    ("grad=-eps", dict(D=0.7, P=0.8, omega=0.5, grad=-EPS), "change_approach"),
    ("grad>-eps", dict(D=0.7, P=0.8, omega=0.5, grad=-EPS + 1e-6), "break_symmetry"),
]


@pytest.mark.parametrize("name,kw,expected", BOUNDARIES, ids=[b[0] for b in BOUNDARIES])
def test_threshold_boundaries(name, kw, expected):
    assert loss.macro_state(kw["D"], kw["P"], kw["omega"], kw["grad"], P0) == expected


def test_thresholds_are_configurable():
    strict = GgsParams(theta=0.5, delta=0.1, rho=0.9, epsilon=0.5)
    assert loss.macro_state(0.7, 0.2, 0.5, 0.0, strict) == "abandon"
    assert loss.macro_state(0.2, 0.2, 0.3, 0.0, strict) == "change_path"
    assert loss.macro_state(0.7, 0.8, 0.3, 0.0, strict) == "change_path"
    assert loss.macro_state(0.7, 0.2, 0.3, 0.3, strict) == "change_path"


# ------------------------------------------------------------------------------------------------
# overrides: Law 2 kill switch (threshold 2), R4b abandon recommendation, R4b rejection veto
# ------------------------------------------------------------------------------------------------

def test_kill_switch_fires_on_second_consecutive_worsening_round_not_first():
    first = loss.decide(0.7, 0.2, 0.4, EPS, P0, worsening=0)
    assert first.directive == "refine" and first.worsening == 1 and first.urgency == "high"
    second = loss.decide(0.7, 0.2, 0.5, EPS, P0, worsening=first.worsening)
    assert second.directive == "abandon" and second.reason == "kill_switch"
    assert second.cell == "refine"          # Ω < θ: the table alone would have continued
    assert "kill switch" in second.rationale


def test_kill_switch_boundary_and_reset():
    below = loss.decide(0.7, 0.2, 0.4, EPS - 1e-6, P0, worsening=1)
    assert below.directive == "change_path" and below.worsening == 0
    improving = loss.decide(0.7, 0.2, 0.4, -0.3, P0, worsening=1)
    assert improving.worsening == 0 and improving.directive == "refine"
    custom = GgsParams(kill_threshold=3)
    assert loss.decide(0.7, 0.2, 0.4, 0.3, custom, worsening=1).directive == "refine"
    assert loss.decide(0.7, 0.2, 0.4, 0.3, custom, worsening=2).directive == "abandon"


def test_kill_switch_does_not_override_success_or_budget():
    assert loss.decide(0.1, 0.2, 0.4, 0.3, P0, worsening=5).directive == "success"
    assert loss.decide(0.7, 0.2, 0.9, 0.3, P0, worsening=5).reason == "budget"


def test_metaval_abandon_recommendation():
    d = loss.decide(0.7, 0.2, 0.4, 0.0, P0, recommendation="abandon")
    assert d.directive == "abandon" and d.reason == "metaval_abandon"
    assert loss.decide(0.2, 0.2, 0.4, 0.0, P0, recommendation="abandon").directive == "success"


def test_replan_budget_boundary():
    assert loss.decide(0.7, 0.2, 0.4, 0.0, P0, replans=P0.max_replans - 1).directive == "change_path"
    d = loss.decide(0.7, 0.2, 0.4, 0.0, P0, replans=P0.max_replans)
    assert d.directive == "abandon" and d.reason == "replan_budget"
    assert loss.decide(0.2, 0.2, 0.4, 0.0, P0, replans=P0.max_replans).directive == "success"


def test_metaval_task_rejection_vetoes_success():
    d = loss.decide(0.2, 0.2, 0.4, 0.0, P0, task_rejected=True)
    assert d.directive == "change_path" and d.reason == "metaval_rejected"
    assert loss.decide(0.2, 0.2, 0.9, 0.0, P0, task_rejected=True).directive == "abandon"


def test_urgency_from_sign_of_grad():
    assert loss.urgency(-EPS, P0) == "low"
    assert loss.urgency(EPS, P0) == "high"
    assert loss.urgency(EPS - 1e-6, P0) == "normal"
    assert loss.urgency(0.0, P0) == "normal"


# ------------------------------------------------------------------------------------------------
# D, P, Ω, L
# ------------------------------------------------------------------------------------------------

def outcome(status="failed", verdicts=(), calls=(), intent="step", output=None, reason=None,
            trajectory=()):
    return SubTaskOutcome(task_id="t", subtask_id=f"s-{intent}", parent_task_id="t", intent=intent,
                          status=status, output=output, failure_reason=reason,
                          criteria_verdicts=list(verdicts), tool_calls=list(calls),
                          gap_trajectory=list(trajectory))


def verdict(text, ok, mode="verifiable", cls="", k=0, n=0):
    return CriterionVerdict(criterion=text, mode=mode, verdict="pass" if ok else "fail",
                            failure_class=cls, failed_attempts=k, attempts=n)


def test_distance_basics():
    assert loss.distance([]) == 1.0
    assert loss.distance([outcome("matched")]) == 0.0
    assert loss.distance([outcome("failed")]) == 1.0
    assert loss.distance([outcome("matched"), outcome("failed")]) == 0.5
    # criterion level: 3 of st1 fail + 1 pass of st2 → 0.75
    st1 = outcome("failed", [verdict("a", False), verdict("b", False), verdict("c", False)])
    st2 = outcome("matched", [verdict("d", True)])
    assert loss.distance([st1, st2]) == 0.75


def test_distance_weights_plausible_by_trajectory_consistency():
    systematic = outcome("failed", [verdict("v", True), verdict("p", False, "plausible", k=2, n=2)])
    transient = outcome("failed", [verdict("v", True), verdict("p", False, "plausible", k=1, n=2)])
    verifiable = outcome("failed", [verdict("v", True), verdict("p", False)])
    assert loss.distance([systematic]) == 0.5
    assert loss.distance([transient]) == pytest.approx(0.5 / 1.5)
    assert loss.distance([transient]) < loss.distance([systematic]) == loss.distance([verifiable])


def test_plausible_weight_from_gap_trajectory_when_counters_missing():
    traj = [GapTrajectoryPoint(attempt=1, score=0.5, unmet_criteria=["p"]),
            GapTrajectoryPoint(attempt=2, score=0.5, unmet_criteria=[]),
            GapTrajectoryPoint(attempt=3, score=0.5, unmet_criteria=[]),
            GapTrajectoryPoint(attempt=4, score=0.5, unmet_criteria=["p"])]
    o = outcome("failed", [verdict("v", True), verdict("p", False, "plausible")], trajectory=traj)
    assert loss.trajectory_consistency(o.criteria_verdicts[1], o) == 0.5
    assert loss.distance([o]) == pytest.approx(0.5 / 1.5)
    # no evidence at all: counted fully
    assert loss.trajectory_consistency(verdict("p", False, "plausible")) == 1.0


def test_failed_subtask_without_failing_verdict_still_counts():
    o = outcome("failed", [verdict("a", True)], reason="effector crashed")
    assert loss.distance([o]) == 0.5


def test_task_level_verdicts_count_in_distance():
    all_matched = [outcome("matched", [verdict("a", True)]), outcome("matched", [verdict("b", True)])]
    assert loss.distance(all_matched) == 0.0
    assert loss.distance(all_matched, [verdict("the user's intent", False)]) == pytest.approx(1 / 3)


def test_implausibility():
    assert loss.implausibility([]) == 0.5
    logical = outcome("failed", [verdict("a", False, cls="logical")])
    env = outcome("failed", [verdict("b", False, cls="environmental")])
    assert loss.implausibility([logical]) == 1.0
    assert loss.implausibility([env]) == 0.0
    assert loss.implausibility([logical, env]) == 0.5
    mixed = outcome("failed", [verdict("c", False, cls="mixed")])
    assert loss.implausibility([logical, mixed]) == 0.75
    # matched outcomes do not count; task-level verdicts do
    assert loss.implausibility([outcome("matched", [verdict("x", False, cls="logical")]), env]) == 0.0
    assert loss.implausibility([], [verdict("t", False, cls="logical")]) == 1.0


def test_implausibility_fallbacks():
    traj = [GapTrajectoryPoint(attempt=1, score=0.0, failure_class="logical")]
    assert loss.implausibility([outcome("failed", trajectory=traj)]) == 1.0
    assert loss.implausibility([outcome("failed", reason="connection timed out")]) == 0.0
    assert loss.implausibility([outcome("failed", reason="wrong approach: invalid parsing")]) == 1.0
    call = ToolCallRecord(tool="shell", target="rm x", law1=True, error="denied by operator")
    assert loss.implausibility([outcome("failed", calls=[call])]) == 0.0
    assert loss.implausibility([outcome("failed", reason="something odd")]) == 0.5


def test_resource_cost_and_loss():
    assert loss.resource_cost(0, 0, P0) == 0.0
    assert loss.resource_cost(3, 0, P0) == 0.6
    assert loss.resource_cost(0, 300_000, P0) == 0.4
    assert loss.resource_cost(3, 300_000, P0) == 1.0
    assert loss.resource_cost(9, 10_000_000, P0) == 1.0
    assert loss.resource_cost(3, 150_000, P0) == THETA      # exactly θ despite float arithmetic
    assert loss.loss(1, 0, 0, P0) == 0.6
    assert loss.loss(0, 0, 1, P0) == 0.4
    assert loss.loss(1, 1, 0, P0) == 0.9
    assert loss.loss(0, 1, 1, P0) == loss.loss(0, 0, 1, P0)   # P irrelevant at Ω = 1


# ------------------------------------------------------------------------------------------------
# blocked sets, failed criterion, outputs, Megrams
# ------------------------------------------------------------------------------------------------

def call(tool, target, error=None, law1=False):
    return ToolCallRecord(tool=tool, target=target, error=error, law1=law1)


def test_blocked_sets_come_from_structured_records():
    o = outcome("failed", calls=[call("read_file", "/ok.txt"), call("shell", "cat /gone", "No such file"),
                                 call("shell", "rm -rf /w", "refused", law1=True)])
    m = outcome("matched", calls=[call("search", "weather", "timeout")])
    assert loss.failed_targets([o, m]) == ["cat /gone", "rm -rf /w"]
    assert loss.blocked_tools([o, m]) == ["read_file", "shell"]
    assert loss.accumulate(["a", "b"], ["b", "c", "a", ""]) == ["a", "b", "c"]
    assert loss.must_not(["shell"], ["/x"]) == ["use the tool 'shell'", "act on '/x' again"]


def test_failed_criterion_and_class():
    o = outcome("failed", [verdict("ok", True), verdict("file exists", False)])
    assert loss.failed_criterion([outcome("matched"), o]) == "file exists"
    traj = [GapTrajectoryPoint(attempt=1, score=0, unmet_criteria=["count is right"])]
    assert loss.failed_criterion([outcome("failed", trajectory=traj)]) == "count is right"
    assert loss.failed_criterion([], [verdict("intent met", False)]) == "intent met"
    assert loss.failure_class_of(0.8, P0) == "logical"
    assert loss.failure_class_of(0.2, P0) == "environmental"
    assert loss.failure_class_of(0.5, P0) == "mixed"
    assert loss.failure_class_of(0.5, P0, any_failure=False) == ""


def test_merge_outputs():
    assert loss.merge_outputs([]) is None
    assert loss.merge_outputs([None, "a"]) == "a"
    assert loss.merge_outputs(["a", {"b": 1}]) == ["a", {"b": 1}]


@pytest.mark.parametrize("state", ["abandon", "accept", "change_approach", "success",
                                   "break_symmetry", "change_path", "refine"])
def test_quantization_matrix(state):
    expected = {"abandon": (0.95, -1.0, 0.05), "accept": (0.90, 1.0, 0.05),
                "change_approach": (0.85, -1.0, 0.05), "success": (0.80, 1.0, 0.05),
                "break_symmetry": (0.75, 1.0, 0.05), "change_path": (0.30, 0.0, 0.2),
                "refine": (0.10, 0.5, 0.5)}[state]
    m = loss.make_megram(state, "s", "e", "c", 1.0, ("t", state))
    assert (m.f, m.sigma, m.k, m.state, m.level) == (*expected, state, "M")


def test_terminal_and_action_megrams():
    o = outcome("failed", intent="read the log", reason="missing",
                calls=[call("shell", "cat /var/log/x", "No such file"), call("shell", "cat /var/log/x", "No such file"),
                       call("read_file", "/tmp/a")])
    m = loss.terminal_megram("abandon", "run-1", "check-logs",
                             loss.terminal_content("abandon", [o], "log missing"), 5.0)
    assert (m.space, m.entity, m.state, m.f, m.sigma) == ("intent:check-logs", "env:local",
                                                          "abandon", 0.95, -1.0)
    assert m.content.startswith("Failed. Tools tried: shell:cat /var/log/x, read_file:/tmp/a.")
    assert len(m.id) == 16
    path = loss.action_megrams("change_path", "run-1", 1, [o], 5.0)
    assert [(x.space, x.entity) for x in path] == [("tool:shell", "target:cat /var/log/x")]
    assert path[0].content == "read the log: No such file" and path[0].sigma == 0.0
    logical = loss.action_megrams("change_approach", "run-1", 1, [o], 5.0)
    assert {(x.space, x.entity) for x in logical} == {("tool:shell", "target:cat /var/log/x"),
                                                       ("tool:read_file", "target:/tmp/a")}
    # deterministic ids: a re-sent write names the same records
    assert [x.id for x in loss.action_megrams("change_path", "run-1", 1, [o], 9.0)] == [path[0].id]
    ok = loss.terminal_content("success", [outcome("matched", calls=[call("search", "q")])], "done")
    assert ok == "Succeeded. Tools: search:q. Result: done"


# ------------------------------------------------------------------------------------------------
# step / replay / explain
# ------------------------------------------------------------------------------------------------

def req(outcomes, elapsed=0.0, **kw):
    return ReplanRequest(task_id="t", outcomes=outcomes, elapsed_ms=elapsed, **kw)


def test_step_trajectory_change_path_refine_success():
    env_fail = verdict("found", False, cls="environmental")
    r1 = loss.step(Trajectory(), req([outcome("failed", [env_fail], [call("shell", "ls /a", "nf")])]), P0)
    assert (r1.directive, r1.D, r1.P, r1.omega, r1.L, r1.grad) == ("change_path", 1.0, 0.0, 0.2, 0.68, 0.0)
    r2 = loss.step(r1.trajectory, req([outcome("matched", [verdict("x", True)]),
                                       outcome("failed", [env_fail], [call("shell", "ls /b", "nf")])]), P0)
    assert r2.directive == "refine" and r2.grad == pytest.approx(-0.22) and r2.urgency == "low"
    assert r2.blocked_targets == ["ls /a", "ls /b"] and r2.prev_directive == "change_path"
    r3 = loss.step(r2.trajectory, req([outcome("matched", [verdict("found", True)])]), P0)
    assert r3.directive == "success" and r3.replans == 3 and r3.trajectory.directives == 2


def test_step_task_rejection_not_overridden():
    """Go defect: all subtasks matched + R4b rejected a task criterion → GGS said success."""
    r = loss.step(Trajectory(), req([outcome("matched", [verdict("a", True)]) for _ in range(4)],
                                    task_criteria_verdicts=[verdict("intent", False, cls="logical")]), P0)
    assert r.D == 0.2 and r.directive == "break_symmetry" and r.reason == "metaval_rejected"


def test_step_accept():
    r = loss.step(Trajectory(replans=1, l_prev=0.7),
                  OutcomeSummary(task_id="t", outcomes=[outcome("matched")], elapsed_ms=0), P0)
    assert r.directive == "accept" and r.D == 0.0 and r.replans == 1 and r.grad < 0


def test_replay_and_parse_errors():
    rows = loss.replay([{"D": 0.5, "P": 0.9}, {"D": 0.8, "P": 0.9}, {"D": 1.0, "P": 0.9},
                        {"D": 0.1}], P0)
    assert [r.get("directive") for r in rows] == ["break_symmetry", "change_approach", "abandon", None]
    assert rows[2]["reason"] == "kill_switch" and rows[2]["Omega"] < THETA and rows[3]["ignored"]
    with pytest.raises(ValueError, match="round 1"):
        loss.replay([{"kind": "nope"}], P0)
    with pytest.raises(ValueError, match="round 2"):
        loss.replay([{}, {"D": 2}], P0)
    with pytest.raises(ValueError, match="round 1"):
        loss.replay([{"outcomes": [{"status": "bogus"}]}], P0)


def test_explain_cli(tmp_path, artoo_env):
    from services.cli import main
    rounds = [{"outcomes": [{"task_id": "t", "subtask_id": "s", "parent_task_id": "t",
                             "intent": "count files", "status": "failed",
                             "criteria_verdicts": [{"criterion": "n > 0", "verdict": "fail",
                                                    "failure_class": "environmental"}],
                             "tool_calls": [{"tool": "shell", "target": "ls /nope",
                                             "error": "No such file"}]}],
               "elapsed_ms": 1000},
              {"kind": "accept", "summary": "done", "merged_output": 3}]
    path = tmp_path / "rounds.json"
    path.write_text(json.dumps(rounds))
    runner = CliRunner()
    res = runner.invoke(main, ["ggs", "explain", "--json", str(path)])
    assert res.exit_code == 0, res.output
    rows = json.loads(res.output)
    assert [r["directive"] for r in rows] == ["change_path", "accept"]
    assert rows[0]["blocked_targets"] == ["ls /nope"] and rows[0]["Omega"] == pytest.approx(0.2 + 0.4 / 300)
    # stdin, table output, parameter override
    res = runner.invoke(main, ["ggs", "explain", "--param", "theta=0.1", "-"], input=json.dumps(rounds))
    assert res.exit_code == 0, res.output
    assert "abandon" in res.output and "θ=0.1" in res.output
    bad = runner.invoke(main, ["ggs", "explain", "-"], input="{not json")
    assert bad.exit_code != 0 and "not valid JSON" in bad.output
    bad = runner.invoke(main, ["ggs", "explain", "--param", "zeta=1", "-"], input="[]")
    assert bad.exit_code != 0 and "zeta" in bad.output
    bad = runner.invoke(main, ["ggs", "explain", "-"], input='[{"kind": "x"}]')
    assert bad.exit_code != 0 and "round 1" in bad.output
