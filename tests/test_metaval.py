"""R4b Meta-Validator: the accept check (pure) and the real metaval process on a real bus with the
scripted LLM, fed by bus-level stand-ins for the planner and effectors, answered by a stand-in GGS."""
from __future__ import annotations

import time

import pytest

from pipeline_harness import pipeline_stack, run_id
from protocol.messages import (Criterion, DispatchManifest, FinalResult, SubTaskOutcome, TaskSpec,
                               ToolCallRecord)
from replies_pipeline import PROSE, accept, reject
from scripted_llm import Delay, Http
from services.roles.metaval import MergeVerdict, check_accept

CRITERIA = [Criterion(text="the count is printed"), Criterion(text="reads well", mode="plausible")]


# ---------------------------------------------------------------------------------------------
# pure
# ---------------------------------------------------------------------------------------------

def test_accept_with_a_failed_task_criterion_is_not_an_accept():
    v = MergeVerdict.model_validate(accept(verdicts=[("the count is printed", "fail"),
                                                     ("reads well", "pass")]))
    ok, verdicts = check_accept(v, CRITERIA)
    assert not ok
    assert [(x.criterion, x.verdict, x.mode) for x in verdicts] == [
        ("the count is printed", "fail", "verifiable"), ("reads well", "pass", "plausible")]


def test_unjudged_criteria_follow_the_overall_verdict():
    ok, verdicts = check_accept(MergeVerdict.model_validate(accept()), CRITERIA)
    assert ok and all(v.verdict == "pass" for v in verdicts)
    ok, verdicts = check_accept(MergeVerdict.model_validate(reject("missing")), CRITERIA)
    assert not ok and all(v.verdict == "fail" for v in verdicts)


# ---------------------------------------------------------------------------------------------
# the metaval process
# ---------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def stack():
    with pipeline_stack(["metaval"], {"ARTOO_LLM_RETRIES": "0"}) as s:
        s.planner = s.client("planner")
        s.effector = s.client("agentval")
        s.ggs_rec = s.recorder("ggs", ["ReplanRequest", "OutcomeSummary"],
                               ack=("ReplanRequest", "OutcomeSummary"))
        s.ggs = s.client("ggs")
        yield s


def manifest(stack, rid: str, ids: list[str], round_: int = 0, criteria=CRITERIA) -> None:
    spec = TaskSpec(task_id=rid, intent_slug="count-line", intent="count the lines",
                    raw_input="count the lines", created_at=time.time(),
                    deadline_at=time.time() + 120)
    stack.planner.send(DispatchManifest(task_id=rid, plan_round=round_, subtask_ids=ids,
                                        task_criteria=criteria, task_spec=spec))


def outcome(stack, rid: str, sid: str, status: str = "matched", output="42", round_: int = 0,
            reason: str | None = None) -> None:
    stack.effector.send(SubTaskOutcome(
        task_id=rid, subtask_id=sid, parent_task_id=rid, intent=f"do {sid}", status=status,
        output=output, failure_reason=reason, plan_round=round_,
        tool_calls=[ToolCallRecord(tool="shell", target="wc -l a.txt", output=str(output))]),
        consumers=("metaval",))


def test_hard_gate_replans_without_an_llm_call(stack):
    rid = run_id()
    manifest(stack, rid, ["a", "b"])
    outcome(stack, rid, "a")
    outcome(stack, rid, "b", "failed", None, reason="wc: a.txt: No such file")
    req = stack.ggs_rec.wait_type("ReplanRequest", rid)[0]
    assert req.failed_subtasks == ["b"] and "No such file" in req.gap_summary
    assert req.recommendation == "replan" and len(req.outcomes) == 2 and req.intent_slug == "count-line"
    assert stack.llm.calls("metaval", rid) == 0


def test_accept_merges_against_the_task_criteria(stack):
    rid = run_id()
    stack.llm.add("metaval", accept("a.txt has 42 lines", merged_output={"lines": 42},
                                    verdicts=[("the count is printed", "pass"),
                                              ("reads well", "pass")]), task=rid)
    manifest(stack, rid, ["a"])
    outcome(stack, rid, "a")
    outcome(stack, rid, "a")  # the dispatcher's relay: a duplicate must not count twice
    summary = stack.ggs_rec.wait_type("OutcomeSummary", rid)[0]
    assert summary.merged_output == {"lines": 42} and summary.summary == "a.txt has 42 lines"
    assert [v.verdict for v in summary.task_criteria_verdicts] == ["pass", "pass"]
    prompt = stack.llm.filter("metaval", rid)[0].user
    assert "the count is printed" in prompt and "(plausible) reads well" in prompt
    assert "wc -l a.txt" in prompt
    assert stack.llm.calls("metaval", rid) == 1


def test_task_level_rejection_with_all_subtasks_matched_is_a_replan(stack):
    rid = run_id()
    # The LLM even says "accept" but its own verdict fails a task criterion: code holds it to that.
    stack.llm.add("metaval", accept("fine", verdicts=[("the count is printed", "fail"),
                                                      ("reads well", "pass")]), task=rid)
    manifest(stack, rid, ["a", "b"])
    outcome(stack, rid, "a")
    outcome(stack, rid, "b")
    req = stack.ggs_rec.wait_type("ReplanRequest", rid)[0]
    assert req.failed_subtasks == []
    failing = [v for v in req.task_criteria_verdicts if v.verdict == "fail"]
    assert [v.criterion for v in failing] == ["the count is printed"]
    assert "the count is printed" in req.gap_summary
    assert not stack.ggs_rec.of("OutcomeSummary", rid)


@pytest.mark.parametrize("replies, gap", [
    ([Http(500)], "LLM error"),
    ([PROSE, PROSE], "invalid LLM output"),
    ([{"verdict": "maybe"}, {"verdict": "maybe"}], "invalid LLM output"),  # unknown verdict
])
def test_llm_or_parse_error_is_a_replan_not_a_hang(stack, replies, gap):
    rid = run_id()
    for r in replies:
        stack.llm.add("metaval", r, task=rid)
    manifest(stack, rid, ["a"])
    outcome(stack, rid, "a")
    req = stack.ggs_rec.wait_type("ReplanRequest", rid)[0]
    assert gap in req.gap_summary


def test_third_replan_recommends_abandon_and_early_outcomes_wait_for_their_manifest(stack):
    rid = run_id()
    recs = []
    for rnd in range(3):
        sid = f"s{rnd}"
        outcome(stack, rid, sid, "failed", None, round_=rnd, reason=f"round {rnd} failed")
        manifest(stack, rid, [sid], round_=rnd)  # the outcome arrived first
        recs = stack.ggs_rec.wait_type("ReplanRequest", rid, n=rnd + 1)
    assert [r.recommendation for r in recs] == ["replan", "replan", "abandon"]
    assert [r.plan_round for r in recs] == [0, 1, 2]


def test_final_result_drops_the_fan_in_state(stack):
    rid = run_id()
    manifest(stack, rid, ["a", "b"])
    outcome(stack, rid, "a")
    state = stack.settings.home / "state" / "metaval" / f"{rid}.json"
    stack.ggs_rec.wait_for(lambda: state.exists(), what="persisted fan-in")
    stack.ggs.send(FinalResult(task_id=rid, directive="abandon", summary="deadline"),
                   consumers=("user",))
    stack.ggs_rec.wait_for(lambda: not state.exists(), what="state dropped")


def test_sigkill_mid_fan_in_and_mid_merge_resumes(stack):
    rid = run_id()
    manifest(stack, rid, ["a", "b"])
    outcome(stack, rid, "a", output="first half")
    state = stack.settings.home / "state" / "metaval" / f"{rid}.json"
    stack.ggs_rec.wait_for(lambda: state.exists() and "first half" in state.read_text(),
                           what="outcome a persisted")
    stack.kill_role("metaval")                 # killed mid fan-in
    outcome(stack, rid, "b", output="second half")  # re-sent until the new instance acks
    # The restarted instance is killed again in the middle of its LLM merge ...
    stack.llm.add("metaval", Delay(30, accept("never delivered")), task=rid)
    stack.restart_role("metaval")
    stack.ggs_rec.wait_for(lambda: stack.llm.calls("metaval", rid) >= 1, what="merge started")
    stack.kill_role("metaval")
    # ... and the next one evaluates the persisted, complete round again.
    stack.llm.add("metaval", accept("both halves", merged_output="first half + second half"), task=rid)
    stack.restart_role("metaval")
    summary = stack.ggs_rec.wait_type("OutcomeSummary", rid, timeout=30)[0]
    assert summary.merged_output == "first half + second half"
    assert {o.subtask_id for o in summary.outcomes} == {"a", "b"}
