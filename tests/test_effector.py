"""The effector fast loop end to end: a real spawner process forks real effector processes on a
real bus; the scripted LLM answers over HTTP; test clients play the planner, the meta-validator and
the operator. One harness (bus + spawner) serves the module; every test uses its own task id."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import replies_effector as R
from effector_harness import EffectorHarness
from scripted_llm import Delay, Gate, Http

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def h():
    harness = EffectorHarness()
    try:
        harness.start_spawner()
        yield harness
    finally:
        harness.close()


def script(h, st, executor=(), agentval=()):
    for reply in executor:
        h.llm.add("executor", reply, task=st.parent_task_id)
    for reply in agentval:
        h.llm.add("agentval", reply, task=st.parent_task_id)


def test_fail_once_then_succeed(h):
    crit = "hello.txt contains the greeting"
    st = h.subtask("write a greeting to hello.txt", [crit])
    script(h, st,
           executor=[R.write_file("hello.txt", "helo"), R.result("wrote it"),
                     R.shell("echo hello > hello2.txt && cat hello2.txt"), R.result("hello")],
           agentval=[R.unmet(crit, "the file says 'helo'", "write 'hello' to a new file"),
                     R.all_met(crit)])
    outcome = h.run(st)
    assert outcome.status == "matched", outcome.failure_reason
    corrections = h.seen.of("CorrectionSignal", lambda m: m.subtask_id == st.subtask_id)
    assert len(corrections) == 1
    assert corrections[0].attempt_number == 1 and corrections[0].failed_criterion == crit
    results = h.seen.of("ExecutionResult", lambda m: m.subtask_id == st.subtask_id)
    assert [r.attempt for r in results] == [1, 2]         # each published once, in order
    assert [p.score for p in outcome.gap_trajectory] == [0.0, 1.0]
    verdict = outcome.criteria_verdicts[0]
    assert (verdict.verdict, verdict.failed_attempts, verdict.attempts) == ("pass", 1, 2)
    assert [c.tool for c in outcome.tool_calls] == ["write_file", "shell"]
    retry_prompt = h.llm.filter("executor", st.parent_task_id)[2].user
    assert "the file says 'helo'" in retry_prompt and "write_file hello.txt" in retry_prompt
    assert h.exited(st).reason == "completed"
    senders = {e.sender for e in h.seen.envelopes("CorrectionSignal")}
    assert senders == {"agentval"}


def test_the_checkers_derivation_does_not_wait_for_a_slow_models_scoring_call(h):
    """R4a's independent checker derives its check from the goal and the workspace as it was
    before the work, so where a model call takes a while (here the executor's took 80 ms) its
    call is made while R4a's scoring call is still open: the scoring reply is held here until
    the checker's request has arrived (one after the other, it never would). The outcome is what
    it was without the overlap, and the derivation made early is the one the check uses (not
    made again). (Quicker calls: the two follow each other, test_effector_units.)"""
    st = h.subtask("count the lines", ["counted"])
    task, name = st.parent_task_id, f"notes-{st.subtask_id}.txt"
    (h.workspace / name).write_text("one\ntwo\nthree\n")
    st.intent = st.goal = f"count the lines of {name}"
    script(h, st, executor=[Delay(0.08, R.shell(f"wc -l < {name}")), Delay(0.08, R.result("3"))])
    held = Gate(lambda llm: llm.calls("verifier", task) > 0,
                R.all_met("counted", evidence="wc printed 3"))
    h.llm.add("agentval", held, task=task)
    h.llm.add("verifier", R.check(f"grep -c . {name}"), task=task)
    h.llm.add("verifier", R.check_program(f"print(len(open({name!r}).read().split()))"),
              task=task)
    h.place(st)
    out = h.outcome(st)
    assert held.opened
    assert out.status == "matched" and out.verified and out.answer == "3", out
    assert h.llm.calls("verifier", task) == 2


def test_identical_repeated_call_is_not_executed_twice(h):
    st = h.subtask("append one line to log.txt", ["log.txt has one line"])
    call = R.shell("echo line >> log.txt")
    script(h, st, executor=[call, call, R.result("appended")],
           agentval=[R.all_met("log.txt has one line")])
    outcome = h.run(st)
    assert outcome.status == "matched"
    assert (h.workspace / "log.txt").read_text() == "line\n"
    assert len(outcome.tool_calls) == 1
    third = h.llm.filter("executor", st.parent_task_id)[2].user
    assert "DUPLICATE CALL NOT EXECUTED" in third


def test_third_identical_call_ends_the_attempt(h):
    st = h.subtask("append a line to loop.txt", ["loop.txt has a line"])
    call = R.shell("echo line >> loop.txt")
    script(h, st, executor=[call, call, call],
           agentval=[R.all_met("loop.txt has a line")])
    outcome = h.run(st)
    result = h.seen.of("ExecutionResult", lambda m: m.subtask_id == st.subtask_id)[0]
    assert result.status == "uncertain" and "three times" in result.uncertainty
    assert (h.workspace / "loop.txt").read_text() == "line\n"
    assert outcome.status == "matched"             # the one real call did the job
    assert h.llm.calls("executor", st.parent_task_id) == 3


def test_long_tool_output_reaches_the_prompt_as_head_and_tail(h):
    body = "".join(f"{i:05d}|" for i in range(2000))            # 12,000 characters, all distinct
    assert len(body) == 12_000
    (h.workspace / "big.txt").write_text(body)
    st = h.subtask("read big.txt", ["the content is shown"])
    script(h, st, executor=[R.shell("cat big.txt"), R.result("shown")],
           agentval=[R.all_met("the content is shown")])
    outcome = h.run(st)
    prompt = h.llm.filter("executor", st.parent_task_id)[1].user
    assert body[:1333] in prompt and body[-2667:] in prompt
    assert "[8000 characters omitted]" in prompt
    assert body[1333:1400] not in prompt and body[5000:5100] not in prompt
    record = outcome.tool_calls[0].output
    assert record.startswith(body[:1333]) and record.endswith(body[-2667:])


def test_rm_with_yes_deletes_and_undo_restores(h):
    victim = h.workspace / "victim.txt"
    victim.write_text("precious data\n")
    st = h.subtask("delete victim.txt", ["victim.txt no longer exists"], yes=True,
                   interactive=False)
    script(h, st, executor=[R.shell("rm victim.txt && ls"), R.result("deleted")],
           agentval=[R.all_met("victim.txt no longer exists")])
    outcome = h.run(st)
    assert outcome.status == "matched"
    assert not victim.exists()
    assert "approved by --yes" in outcome.tool_calls[0].output
    assert not h.seen.of("ApprovalRequest", lambda m: m.subtask_id == st.subtask_id)
    env = {**os.environ, **h.env}
    undo = subprocess.run([sys.executable, "-m", "services.cli", "undo", st.parent_task_id],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=60)
    assert undo.returncode == 0, undo.stderr
    assert victim.read_text() == "precious data\n"


def test_operator_approves_one_specific_action(h):
    victim = h.workspace / "asked.txt"
    victim.write_text("x")
    h.approval_policy = lambda req: (True, "operator")
    try:
        st = h.subtask("delete asked.txt", ["asked.txt no longer exists"])
        script(h, st, executor=[R.shell("rm -f asked.txt"), R.result("deleted")],
               agentval=[R.all_met("asked.txt no longer exists")])
        outcome = h.run(st)
    finally:
        h.approval_policy = lambda req: (False, "operator")
    assert outcome.status == "matched" and not victim.exists()
    req = h.seen.of("ApprovalRequest", lambda m: m.subtask_id == st.subtask_id)[0]
    assert req.command == "rm -f asked.txt" and req.paths == [str(victim)]
    assert req.classification == "destructive" and "deletes" in req.reason


@pytest.mark.parametrize("interactive", [True, False])
def test_rm_without_approval_leaves_the_file_and_reports_law1(h, interactive):
    victim = h.workspace / f"keep-{interactive}.txt"
    victim.write_text("keep me\n")
    crit = f"{victim.name} no longer exists"
    st = h.subtask(f"delete {victim.name}", [crit], interactive=interactive)
    script(h, st, executor=[R.shell(f"rm {victim.name}"), R.result("could not delete")],
           agentval=[R.unmet(crit, "the delete was refused", "ask the operator")])
    outcome = h.run(st)
    assert victim.read_text() == "keep me\n"
    assert outcome.status == "failed"
    assert "[LAW1]" in outcome.failure_reason
    assert outcome.tool_calls[0].law1 and "[LAW1]" in outcome.tool_calls[0].output
    assert outcome.criteria_verdicts[0].failure_class == "environmental"
    assert not h.seen.of("CorrectionSignal", lambda m: m.subtask_id == st.subtask_id)
    asked = h.seen.of("ApprovalRequest", lambda m: m.subtask_id == st.subtask_id)
    assert len(asked) == (1 if interactive else 0)


def test_writes_outside_the_workspace_are_refused(h, tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (h.workspace / "exit").symlink_to(outside)
    st = h.subtask("try to escape", ["nothing escapes"])
    attempts = [R.write_file("../escaped.txt", "x"), R.write_file("exit/escaped.txt", "x"),
                R.write_file(str(outside / "escaped.txt"), "x"),
                R.write_file("~/escaped.txt", "x"),
                R.write_file(str(h.home / "memory.lmdb"), "x"),
                R.shell(f"cat {h.home}/logs/bus.log")]
    script(h, st, executor=[*attempts, R.result("refused")],
           agentval=[R.all_met("nothing escapes")])
    outcome = h.run(st)
    assert [c.law1 for c in outcome.tool_calls] == [True] * len(attempts)
    assert all(c.error.startswith("[LAW1] refused") for c in outcome.tool_calls)
    assert list(outside.iterdir()) == []
    assert not (h.root / "escaped.txt").exists() and not (h.home / "memory.lmdb").exists()


def test_llm_errors_end_in_a_message(h):
    st = h.subtask("something", ["done"])
    script(h, st, executor=[Http(500)])
    outcome = h.run(st)
    assert outcome.status == "failed" and "executor LLM error" in outcome.failure_reason
    assert h.llm.calls("agentval", st.parent_task_id) == 0     # failed → no scoring call
    st2 = h.subtask("something else", ["done"])
    script(h, st2, executor=["no json here", "still prose", ])
    outcome2 = h.run(st2)
    assert outcome2.status == "failed" and "invalid LLM output" in outcome2.failure_reason
    st3 = h.subtask("a third thing", ["done"])
    script(h, st3, executor=[R.shell("echo ok"), R.result("ok")], agentval=[Http(500)])
    outcome3 = h.run(st3)
    assert outcome3.status == "failed" and "scoring error" in outcome3.failure_reason


def test_claims_without_tool_evidence_are_not_met(h):
    crit = "report.txt lists the files"
    st = h.subtask("write report.txt", [crit])
    script(h, st, executor=[R.result("I wrote report.txt"), R.result("I wrote it again")],
           agentval=[R.all_met(crit), R.all_met(crit)])
    outcome = h.run(st)
    assert outcome.status == "failed"
    assert "max retries (2) reached" in outcome.failure_reason
    assert "claim alone is not evidence" in outcome.criteria_verdicts[0].evidence
    assert outcome.criteria_verdicts[0].failed_attempts == 2


def test_environmental_promotion_in_code(h):
    crit = "the config is read"
    st = h.subtask("read the config", [crit])
    script(h, st, executor=[R.shell("cat /nonexistent/config.yaml"), R.result("no config"),
                            R.shell("cat /nonexistent/other.yaml"), R.result("no config")],
           agentval=[R.unmet(crit, "wrong file", "read another file", failure_class="logical"),
                     R.unmet(crit, "wrong file", "read another file", failure_class="logical")])
    outcome = h.run(st)
    assert outcome.status == "failed"
    assert outcome.criteria_verdicts[0].failure_class == "environmental"
    assert [p.failure_class for p in outcome.gap_trajectory] == ["environmental"] * 2


def test_deadline_produces_an_honest_failed_outcome(h):
    from scripted_llm import Delay
    st = h.subtask("slow thing", ["done"], deadline_s=3.0)
    script(h, st, executor=[R.shell("echo started"), Delay(20, R.result("too late"))])
    outcome = h.run(st, timeout=20)
    assert outcome.status == "failed" and outcome.failure_reason.startswith("deadline")
    assert [c.target for c in outcome.tool_calls] == ["echo started"]
    assert h.exited(st).reason == "deadline"


def test_r3_and_r4a_hand_each_other_their_messages_and_publish_one_copy_each(settings):
    """Pure logic of the fast loop (the processes run it above): R4a judges each result its R3
    hands it, and R3 runs the correction R4a hands back, with no delivery from the bus (this
    client delivers nothing), while each is published once, in order, for the tap and observers."""
    import time
    from protocol.messages import CorrectionSignal, ExecutionResult, SubTask, SubTaskOutcome
    from services.roles.agentval import Judgement
    from services.roles.effector import EXIT_DELIVERED, Effector

    class Recorder:                               # publishes into a list; delivers nothing back
        node = "effector-unit"

        def __init__(self):
            self.published = []

        def publish(self, msg, *, as_role, to, node):
            self.published.append((type(msg).__name__, as_role, to, node))

        def send(self, msg, *, consumers, as_role, on_done):
            self.published.append((type(msg).__name__, as_role, consumers, None))
            on_done(True)

    st = SubTask(subtask_id="st-1", parent_task_id="run-hand", intent="i", goal="do it")
    seen = {"attempts": [], "corrections": []}

    class Executor:
        history: list = []

        def run_attempt(self, attempt, correction):
            seen["corrections"].append(correction and correction.attempt_number)
            return ExecutionResult(task_id="run-hand", subtask_id="st-1", attempt=attempt,
                                   status="completed", output="done")

    class Validator:
        verifier = None

        def judge(self, result):
            seen["attempts"].append(result.attempt)
            if result.attempt == 1:
                return Judgement("retry", correction=CorrectionSignal(
                    task_id="run-hand", subtask_id="st-1", attempt_number=1))
            return Judgement("matched", outcome=SubTaskOutcome(
                task_id="run-hand", subtask_id="st-1", parent_task_id="run-hand",
                status="matched"))

    client = Recorder()
    effector = Effector(st, settings, client, Executor(), Validator(),
                        deadline_at=time.time() + 60, exit_on_deadline=False)
    assert effector.run() == EXIT_DELIVERED
    assert seen == {"attempts": [1, 2], "corrections": [None, 1]}
    node = client.node
    assert client.published == [
        ("ExecutionResult", "executor", "agentval", node),
        ("CorrectionSignal", "agentval", "executor", node),
        ("ExecutionResult", "executor", "agentval", node),
        ("SubTaskOutcome", "agentval", ("metaval", "planner"), None)]
