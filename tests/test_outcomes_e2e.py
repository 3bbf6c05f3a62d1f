"""Outcomes a user can trust, end to end on the real daemon with the scripted LLM: a goal that
reads what the workspace lacks ends not_possible in code with the near matches and no model call
at all (each kind of referent); the task's LLM call budget is a bound, not a replanning hint."""
from __future__ import annotations

import itertools

import pytest

from replies_effector import all_met, check, check_program, result, shell
from replies_pipeline import perception, plan, subtask
from services.runtime import tasklog
from test_pipeline_e2e import e2e, new_rid, run_task  # noqa: F401 (the module's daemon fixture)


def make(root, files: dict[str, str]) -> None:
    for rel, text in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)


@pytest.mark.parametrize("kind, goal, files, near", [
    ("file", "How many lines are in {t}_report_2023.txt?",
     {"{t}_report_2022.txt": "a\nb\n"}, "{t}_report_2022.txt"),
    ("folder", "Which file in the {t}_archive/ folder is the biggest?",
     {"{t}_archives/a.txt": "aaaa"}, "{t}_archives"),
    ("field", "What is the average of the rating column in {t}_products.csv?",
     {"{t}_products.csv": "name,ratings_count\nlamp,3\n"}, "ratings_count"),
    ("value", "What is the email address of the user alice in {t}_accounts.csv?",
     {"{t}_accounts.csv": "username,email\nalicia,a@x.org\nbob,b@x.org\n"}, "alicia"),
    ("extension", "How many .zyml files are there?", {"{t}.zyaml": "k: 1\n"}, ".zyaml"),
])
def test_a_missing_referent_is_not_possible_without_a_model_call(e2e, kind, goal, files, near):
    rid = new_rid(f"ref{kind}")
    t = f"r{abs(hash(rid)) % 10**6}"
    make(e2e.settings.workspace, {k.format(t=t): v for k, v in files.items()})
    final = run_task(e2e, rid, goal.format(t=t))
    assert final.status == "not_possible" and final.verified, final.summary
    assert near.format(t=t) in final.summary, final.summary
    assert e2e.llm.calls(task=rid) == 0                # not one model call, of any role
    kinds = [ev["kind"] for ev in tasklog.read(e2e.settings.tasks_dir, rid)]
    assert "referents_missing" in kinds and "llm_call" not in kinds


def run_with_budget(e2e, rid: str, text: str, calls: int):
    """One task run with `--max-llm-calls calls`."""
    e2e.session.max_llm_calls = calls
    try:
        return run_task(e2e, rid, text)
    finally:
        e2e.session.max_llm_calls = None


def test_the_call_budget_is_a_bound(e2e):
    """A run with --max-llm-calls 4 whose executor never answers: the perceiver and planner
    spend 2, the subtask gets the 2 left, and its third call is never made. The task ends
    (abandoned, honestly), with at most 4 calls in its log."""
    rid = new_rid("budget")
    intent = f"keep looking {rid}"
    counter = itertools.count()
    (e2e.settings.workspace / f"hay-{rid}.txt").write_text("straw\n" * 3)
    e2e.router.calls[intent] = lambda req: shell(f"grep -c straw hay-{rid}.txt; echo {next(counter)}")
    e2e.llm.add("perceiver", perception("keep looking"), task=rid)
    e2e.llm.add("planner", plan(subtask(intent, ["found"])), task=rid)
    final = run_with_budget(e2e, rid, "keep looking", 4)
    calls = [ev for ev in tasklog.read(e2e.settings.tasks_dir, rid) if ev["kind"] == "llm_call"]
    assert len(calls) <= 4, [c["role"] for c in calls]
    assert final.status != "verified" and "budget" in final.summary, final.summary


def test_the_executor_leaves_the_last_calls_to_the_checks(e2e):
    """--max-llm-calls 6: perceiver and planner spend 2, the subtask gets 4; the executor,
    which never answers, may make only 2 of them (one is kept for R4a's opinion, one for the
    independent check). Its last output is then judged — checked and reported as done — instead
    of the task ending with an answer nobody checked."""
    rid = new_rid("reserve")
    intent = f"count the straws {rid}"
    hay = f"hay-{rid}.txt"
    (e2e.settings.workspace / hay).write_text("straw\n" * 3)
    e2e.router.script.executor(intent, shell(f"grep -c straw {hay}"),
                               shell(f"grep -c straw ./{hay}"), shell(f"cat {hay}"))
    e2e.router.script.agentval(intent, all_met("counted", evidence="grep printed 3"))
    e2e.router.script.verifier(intent, check(f"wc -l < {hay}"))
    e2e.llm.add("perceiver", perception("count the straws"), task=rid)
    e2e.llm.add("planner", plan(subtask(intent, ["counted"])), task=rid)
    final = run_with_budget(e2e, rid, "count the straws", 6)
    roles = [ev["role"] for ev in tasklog.read(e2e.settings.tasks_dir, rid)
             if ev["kind"] == "llm_call"]
    assert len(roles) <= 6 and roles.count("executor") == 2, " ".join(roles)
    assert "verifier" in roles, roles
    log = [(ev["kind"], ev.get("role") or ev.get("what_was_wrong") or ev.get("evidence") or
            ev.get("tool_output")) for ev in tasklog.read(e2e.settings.tasks_dir, rid)
           if ev["kind"] in ("llm_call", "tool_call", "criterion_verdict", "correction")]
    assert final.status == "unverified" and final.answer.strip() == "3", (final.summary, log)
    assert any("wc -l" in c for c in final.checks), final.checks


def test_a_result_printed_instead_of_written_is_written_by_the_fix_without_a_model_call(e2e):
    """The executor printed the count and never wrote the file the goal names: Law 0's
    correction carries the command that writes it (`fix_command`), the executor runs it through
    the gate and sandbox without a model call, and the file is then checked like any other —
    two independent derivations agree, so the task ends verified."""
    rid = new_rid("fix")
    src, out = f"colours-{rid}.md", f"lines-{rid}.txt"
    goal = f"count the lines of {src} and write the number to {out}"
    (e2e.settings.workspace / src).write_text("red\ngreen\nblue\n")
    e2e.router.script.executor(goal, shell(f"wc -l < {src}"), result("3"))
    e2e.router.script.agentval(goal, all_met("written", evidence="wc printed 3"),
                               all_met("written", evidence="printf wrote 3"))
    e2e.router.script.verifier(goal, check(f"grep -c '' {src}", out),
                               check_program(f"print(len(open({src!r}).read().splitlines()))",
                                             out))
    e2e.llm.add("perceiver", perception(goal), task=rid)
    e2e.llm.add("planner", plan(subtask(goal, ["written"])), task=rid)
    final = run_task(e2e, rid, goal)
    log = list(tasklog.read(e2e.settings.tasks_dir, rid))
    roles = [ev["role"] for ev in log if ev["kind"] == "llm_call"]
    fixes = [ev for ev in log if ev["kind"] == "tool_call" and ev.get("by")]
    assert (e2e.settings.workspace / out).read_text() == "3\n"
    assert [ev["tool_input"]["command"] for ev in fixes] == [f"printf '%s\\n' 3 > {out}"], fixes
    assert roles.count("executor") == 2, roles       # the shell step and the answer; no third
    assert final.status == "verified", (final.summary, final.checks)
    assert out in final.answer and "printf" not in final.answer, final.answer
