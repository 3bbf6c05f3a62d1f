"""The pipeline end to end on the real daemon (`artoo up`: bus, tap, auditor, memory, perceiver,
planner, spawner + effectors, meta-validator, GGS) with the scripted LLM, plus the CLI's rendering
helpers and exit codes."""
from __future__ import annotations

import io
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Callable

import pytest

from audit_support import wait_until
from conftest import REPO, scripted_daemon
from protocol.envelope import Envelope
from protocol.messages import (ConversationalReply, FinalResult, LossBreakdown, MemoryRecall,
                               SubTaskOutcome)
from protocol.settings import load_settings
from replies_effector import SubtaskScript, all_met, check, check_program, reads, result, shell
from replies_pipeline import INVALID_JSON, PROSE, accept, empty_plan, perception, plan, reject, subtask
from scripted_llm import Delay, ScriptedLLM
from services.cli import render
from services.runtime import tasklog
from services.cli.run import exit_code


# ---------------------------------------------------------------------------------------------
# rendering and exit codes (pure)
# ---------------------------------------------------------------------------------------------

def _env(type_name: str, sender: str, to: str | None = None) -> Envelope:
    return Envelope(type=type_name, body={}, sender=sender, node="n", task="run-x", to=to)


def test_flow_lines_escape_tags_and_show_verdicts():
    recall = MemoryRecall(task_id="run-x", space="intent:count-file", entity="env:local", sops=2,
                          action="Avoid", constraints="MUST NOT (proven rule): rm -rf [x]")
    line = render.describe(_env("MemoryRecall", "planner", "memory"), recall)
    assert "\\[intent:count-file / env:local]" in line and "Avoid" in line
    out = SubTaskOutcome(task_id="run-x", subtask_id="st0.1-ab", parent_task_id="run-x",
                         status="failed", failure_reason="No such file")
    line = render.describe(_env("SubTaskOutcome", "agentval", "metaval"), out)
    assert "failed" in line and "No such file" in line
    assert render.describe(_env("Heartbeat", "planner"), object()) is None


def test_version_and_shell_completion():
    from protocol.envelope import PROTOCOL_VERSION
    env = dict(os.environ)
    proc = subprocess.run([sys.executable, "-m", "services.cli", "--version"], env=env, cwd=REPO,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0 and f"bus protocol v{PROTOCOL_VERSION}" in proc.stdout
    proc = subprocess.run([sys.executable, "-m", "services.cli"], cwd=REPO, capture_output=True,
                          text=True, timeout=60, env=dict(env, _ARTOO_COMPLETE="bash_source"))
    assert proc.returncode == 0 and "complete " in proc.stdout and "_artoo_completion" in proc.stdout
    proc = subprocess.run([sys.executable, "-m", "services.cli"], cwd=REPO, capture_output=True,
                          text=True, timeout=60, env=dict(env, _ARTOO_COMPLETE="bash_complete",
                                                          COMP_WORDS="artoo tas", COMP_CWORD="1"))
    assert "plain,tasks" in proc.stdout.split()


def test_live_view_prints_each_event_once():
    """A re-send (same envelope id) and the planner's forward of an outcome render nothing new."""
    import queue
    from services.cli.run import RunSession
    session = RunSession.__new__(RunSession)
    session.queues, session.seen, session.usages, session.shown = {"run-x": queue.Queue()}, \
        {"run-x": []}, {}, {}
    req = _env("UserRequest", "user", "perceiver")
    out = SubTaskOutcome(task_id="run-x", subtask_id="st0.1-ab", parent_task_id="run-x",
                         status="matched")
    for env in (req, req, req, _env("SubTaskOutcome", "agentval", "metaval"),
                _env("SubTaskOutcome", "planner", "metaval")):
        session._observe(env, out)
    rendered = [session.queues["run-x"].get_nowait()[1].type for _ in range(2)]
    assert rendered == ["UserRequest", "SubTaskOutcome"] and session.queues["run-x"].empty()
    assert len(session.seen["run-x"]) == 5              # every message is still recorded


def test_decision_trail_and_cost_table():
    events = [
        {"kind": "memory_query", "space": "intent:x", "entity": "env:local", "sop_count": 1,
         "action": "Exploit", "attention": 1.5, "decision": 0.7},
        {"kind": "plan", "plan_round": 0, "subtasks": [{"sequence": 1}, {"sequence": 2}],
         "task_criteria": [{"text": "t"}]},
        {"kind": "llm_call", "role": "planner"},
        {"kind": "ggs_decision", "d": 0.5, "p": 0.2, "omega": 0.1, "l": 0.4, "grad_l": 0.0,
         "directive": "change_path", "rationale": "target missing"},
    ]
    trail = render.decision_trail(events)
    assert trail[0].startswith("memory") and "Exploit" in trail[0]
    assert "2 subtask(s) in 2 group(s)" in trail[1]
    assert "change_path" in trail[2] and len(trail) == 3
    rows = render.cost_rows([{"role": "planner", "prompt_tokens": 10, "completion_tokens": 5,
                              "latency_ms": 1500}, {"role": "perceiver", "latency_ms": 500},
                             {"role": "planner", "prompt_tokens": 1, "latency_ms": 500}])
    assert rows == [("perceiver", 1, 0, 0, 0.5), ("planner", 2, 11, 5, 2.0)]


def test_the_result_names_the_files_the_work_left_changed():
    loss = LossBreakdown(D=1, P=1, Omega=0, L=1)
    final = FinalResult(task_id="r", directive="abandon", summary="Task abandoned.", loss=loss,
                        changed=["members.csv", "out/report.txt"])
    assert "[dim]changed in the workspace:[/dim] members.csv, out/report.txt" in \
        render.result_markup(final)
    assert not any("changed in" in line for line in render.result_markup(
        FinalResult(task_id="r", directive="abandon", summary="Task abandoned.", loss=loss)))


def test_exit_codes():
    loss = LossBreakdown(D=0, P=0, Omega=0, L=0)
    def final(directive, **kw):
        return FinalResult(task_id="r", directive=directive, summary="", loss=loss, **kw)
    assert exit_code(final("accept", status="verified", verified=True)) == 0
    assert exit_code(final("success")) == 3                  # not verified by code: not "done"
    assert exit_code(final("abandon", status="not_possible", verified=True)) == 4
    assert exit_code(final("abandon")) == 1
    assert exit_code(ConversationalReply(task_id="r", answer="hi")) == 0
    assert exit_code(None) == 1


def test_run_without_a_daemon_exits_2_with_a_clear_message(tmp_path):
    env = {"ARTOO_HOME": str(tmp_path / "h"), "ARTOO_WORKSPACE": str(tmp_path / "w"),
           "PATH": "/usr/bin:/bin"}
    proc = subprocess.run([sys.executable, "-m", "services.cli", "run", "count files"], env=env,
                          cwd=REPO, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    assert "not running" in proc.stderr and "artoo up" in proc.stderr
    usage = subprocess.run([sys.executable, "-m", "services.cli", "run"], env=env, cwd=REPO,
                           capture_output=True, text=True, timeout=60)
    assert usage.returncode == 2


# ---------------------------------------------------------------------------------------------
# end to end on the real daemon
# ---------------------------------------------------------------------------------------------

class Router:
    """Executor/agentval replies per subtask intent: SubtaskScript queues, plus callables for the
    replies a test must compute at request time (a barrier, a recorded prompt)."""

    def __init__(self, llm, workspace: Path):
        self.workspace = workspace
        self.script = SubtaskScript()
        self.calls: dict[str, Callable] = {}
        self.prompts: dict[str, list[tuple[float, str, str]]] = {}
        self.lock = threading.Lock()
        for role in ("executor", "agentval", "verifier"):
            llm.on(role, self._respond(role))

    def _respond(self, role: str):
        fallback = self.script.responder(role)

        def respond(req):
            with self.lock:
                for intent, fn in self.calls.items():
                    if f"Subtask: {intent}" in req.user and role == "executor":
                        self.prompts.setdefault(intent, []).append((time.time(), role, req.user))
                        break
                else:
                    fn = None
                for intent in self.prompts_wanted:
                    if f"Subtask: {intent}" in req.user:
                        self.prompts.setdefault(intent, []).append((time.time(), role, req.user))
            return fn(req) if fn is not None else fallback(req)
        return respond

    prompts_wanted: set[str] = set()

    def data(self, output: str) -> str:
        """A workspace file holding `output`, and the command that prints it: the value then
        comes from a tool output, not from the command itself (`echo X` proves nothing, Law 0)."""
        name = f"data-{abs(hash(output)) % 10**8}.txt"
        (self.workspace / name).write_text(output + "\n")
        return f"cat {name}"

    def simple(self, intent: str, output: str, criteria: list[str]) -> None:
        """One tool call, then the result; every criterion met."""
        self.script.executor(intent, shell(self.data(output)), result(output))
        self.script.agentval(intent, all_met(*criteria, evidence=f"the tool printed {output}"))


@pytest.fixture(scope="module")
def e2e():
    from rich.console import Console
    from services.cli.run import RunSession
    with ScriptedLLM() as llm, scripted_daemon(llm, prefix="at-e2e-") as (settings, root):
        session = RunSession(settings, Console(file=io.StringIO(), width=160), interactive=False)
        try:
            yield SimpleNamespace(settings=settings, llm=llm, session=session, root=root,
                                  router=Router(llm, settings.workspace))
        finally:
            session.close()


def new_rid(tag: str) -> str:
    return f"run-e2e-{tag}-{time.monotonic_ns() % 10**8}"


def run_task(e2e, rid: str, text: str, deadline_s: float = 60.0):
    e2e.session.submit(text, run_id=rid, deadline_s=deadline_s)
    final = e2e.session.follow(rid, deadline_s)
    assert final is not None, f"{rid}: no FinalResult"
    return final


def seen(e2e, rid: str, type_name: str) -> list:
    return [m for env, m in e2e.session.seen.get(rid, []) if env.type == type_name]


def log_kinds(e2e, rid: str) -> list[str]:
    return [ev["kind"] for ev in tasklog.read(e2e.settings.tasks_dir, rid)]


def test_parallel_sequence_group_then_dependent_step(e2e):
    rid = new_rid("par")
    a, b, c = f"find alpha {rid}", f"find beta {rid}", f"combine {rid}"
    barrier = threading.Barrier(2, timeout=30)

    def meet_then(output):  # both sequence-1 executors must be in flight at the same time
        def first_turn(req):
            if "Tool calls so far" in req.user:
                return result(output)
            barrier.wait()
            return shell(command)
        command = e2e.router.data(output)
        return first_turn

    e2e.router.calls[a] = meet_then("ALPHA-OUT-17")
    e2e.router.calls[b] = meet_then("BETA-OUT-42")
    e2e.router.script.agentval(a, all_met("alpha found", evidence="ALPHA-OUT-17"))
    e2e.router.script.agentval(b, all_met("beta found", evidence="BETA-OUT-42"))
    e2e.router.prompts_wanted.add(c)
    e2e.router.simple(c, "SUM-59", ["combined"])
    e2e.llm.add("perceiver", perception("find alpha and beta, then combine them"), task=rid)
    e2e.llm.add("planner", plan(subtask(a, ["alpha found"], sequence=1),
                                subtask(b, ["beta found"], sequence=1),
                                subtask(c, ["combined"], sequence=2)), task=rid)
    e2e.llm.add("metaval", accept("combined", merged_output="SUM-59"), task=rid)
    final = run_task(e2e, rid, "find alpha and beta, then combine them")
    assert final.directive == "accept", final.summary
    outcomes = {o.intent: o for o in seen(e2e, rid, "SubTaskOutcome")}
    assert {a, b, c} <= set(outcomes)
    started = {m.subtask_id: m for m in seen(e2e, rid, "EffectorStarted")}
    assert len(started) == 3 and len({m.pid for m in started.values()}) == 3  # one process each
    first_c = e2e.router.prompts[c][0]
    assert "ALPHA-OUT-17" in first_c[2] and "BETA-OUT-42" in first_c[2]  # injected context
    ab_done = [ts for ts, role, _ in e2e.router.prompts.get(a, []) + e2e.router.prompts.get(b, [])]
    assert first_c[0] >= max(ab_done)


@pytest.mark.parametrize("replies, words", [
    ([PROSE, PROSE], "no usable plan"),
    ([INVALID_JSON, INVALID_JSON], "no usable plan"),
    ([empty_plan(), empty_plan()], "no subtasks"),
])
def test_planning_failures_end_in_an_honest_final_result(e2e, replies, words):
    rid = new_rid("pf")
    e2e.llm.add("perceiver", perception("tidy the notes"), task=rid)
    for r in replies:
        e2e.llm.add("planner", r, task=rid)
    final = run_task(e2e, rid, "tidy the notes")
    assert final.directive == "abandon"
    assert "planning failed" in final.summary and words in final.summary
    assert "planning_failed" in log_kinds(e2e, rid)
    assert not seen(e2e, rid, "DispatchManifest")


def test_task_level_rejection_with_every_subtask_matched_replans(e2e):
    rid = new_rid("rej")
    first, second = f"list sizes {rid}", f"list sizes again {rid}"
    crit = ["the largest file is named", "its size is given"]
    e2e.router.simple(first, "a.txt-b.txt", ["sizes listed"])
    e2e.router.simple(second, "largest=b.txt-2048", ["sizes listed"])
    e2e.llm.add("perceiver", perception("name the largest file"), task=rid)
    e2e.llm.add("planner", plan(subtask(first, ["sizes listed"]), task_criteria=crit), task=rid)
    e2e.llm.add("planner", plan(subtask(second, ["sizes listed"]), task_criteria=crit), task=rid)
    e2e.llm.add("metaval", reject("the largest file is not named", [(c, "fail") for c in crit]),
                task=rid)
    e2e.llm.add("metaval", accept("b.txt is the largest (2048 bytes)",
                                  merged_output="b.txt 2048", verdicts=[(c, "pass") for c in crit]),
                task=rid)
    final = run_task(e2e, rid, "name the largest file")
    assert final.directive == "accept" and final.replans == 1, final.summary
    replan = seen(e2e, rid, "ReplanRequest")[0]
    assert replan.failed_subtasks == [] and all(v.verdict == "fail"
                                                for v in replan.task_criteria_verdicts)
    assert seen(e2e, rid, "PlanDirective")
    replan_prompt = e2e.llm.filter("planner", rid)[1].user
    assert "REPLAN" in replan_prompt and "the largest file is not named" in replan_prompt


def test_concurrent_tasks_do_not_mix_and_a_rerun_keeps_the_slug(e2e):
    rids = {"alpha": new_rid("ca"), "beta": new_rid("cb")}
    for word, rid in rids.items():
        intent = f"count {word} words {rid}"
        e2e.router.simple(intent, f"{word.upper()}-COUNT", ["count printed"])
        e2e.llm.add("perceiver", perception(f"count the {word} words"), task=rid)
        e2e.llm.add("planner", plan(subtask(intent, ["count printed"])), task=rid)
        e2e.llm.add("metaval", accept(f"{word} counted", merged_output=f"{word.upper()}-COUNT"),
                    task=rid)
    (e2e.settings.workspace / "words.txt").write_text("alpha beta\n")   # the file it names
    for word, rid in rids.items():
        e2e.session.submit(f"count the {word} words in words.txt", run_id=rid, deadline_s=60)
    finals = {}
    threads = [threading.Thread(target=lambda w=w, r=r: finals.__setitem__(w, e2e.session.follow(r, 60)))
               for w, r in rids.items()]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for word, rid in rids.items():
        other = "beta" if word == "alpha" else "alpha"
        final = finals[word]
        assert final.directive == "accept" and final.task_id == rid
        assert final.output == f"{word.upper()}-COUNT"
        assert other not in json.dumps([m.model_dump() for m in seen(e2e, rid, "SubTaskOutcome")])
        assert all(ev["task_id"] == rid for ev in tasklog.read(e2e.settings.tasks_dir, rid))
    assert finals["alpha"].intent_slug != finals["beta"].intent_slug

    rerun = new_rid("ra")
    intent = f"count alpha words {rerun}"
    e2e.router.simple(intent, "ALPHA-COUNT", ["count printed"])
    e2e.llm.add("perceiver", perception("tally alpha words in words.txt"), task=rerun)
    e2e.llm.add("planner", plan(subtask(intent, ["count printed"])), task=rerun)
    e2e.llm.add("metaval", accept("alpha counted", merged_output="ALPHA-COUNT"), task=rerun)
    again = run_task(e2e, rerun, "count the alpha words in words.txt")
    assert again.task_id != rids["alpha"] and again.intent_slug == finals["alpha"].intent_slug


@pytest.mark.parametrize("role", ["perceiver", "planner", "metaval"])
def test_sigkill_of_a_pipeline_role_mid_task_still_ends_before_the_deadline(e2e, role):
    from protocol.envelope import owner
    from services.runtime import daemon
    rid = new_rid(f"k{role[:2]}")
    intent = f"archive reports {rid}"
    e2e.router.simple(intent, "ARCHIVED", ["archive made"])
    replies = {"perceiver": perception("archive the reports"),
               "planner": plan(subtask(intent, ["archive made"])),
               "metaval": accept("archived", merged_output="ARCHIVED")}
    for r, reply in replies.items():
        if r == role:  # the first call hangs: the role is killed in the middle of it
            e2e.llm.add(r, Delay(60, reply), task=rid)
        e2e.llm.add(r, reply, task=rid)
    deadline_s = 40.0
    started = time.time()
    e2e.session.submit("archive the reports", run_id=rid, deadline_s=deadline_s)
    wait_until(lambda: e2e.llm.calls(role, rid) >= 1, 30, f"{role} LLM call")
    info = daemon.supervisor_processes(e2e.settings)[(role, owner(rid, 2))]
    os.kill(info["pid"], signal.SIGKILL)
    final = e2e.session.follow(rid, deadline_s)
    assert final is not None and time.time() < started + deadline_s
    assert final.directive == "accept", final.summary  # resumed, not merely abandoned
    assert e2e.llm.calls(role, rid) == 2


def test_cancel_reaches_every_role_and_the_effector(e2e):
    import psutil
    rid = new_rid("cx")
    intent = f"wait forever {rid}"
    e2e.router.script.executor(intent, Delay(60, result("never")))
    e2e.llm.add("perceiver", perception("wait"), task=rid)
    e2e.llm.add("planner", plan(subtask(intent, ["done"])), task=rid)
    e2e.session.submit("wait for a long time", run_id=rid, deadline_s=60)
    started = wait_until(lambda: seen(e2e, rid, "EffectorStarted"), 30, "effector start")[0]
    e2e.session._cancel(rid)
    final = e2e.session.follow(rid, 30)
    assert final.directive == "abandon" and "cancel" in final.summary.lower()

    def gone(pid: int) -> bool:          # the effector may exit between two psutil calls
        try:
            return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
        except psutil.NoSuchProcess:     # ZombieProcess is one too
            return True
    wait_until(lambda: gone(started.pid), 15, "effector gone")
    state = e2e.settings.home / "state"
    wait_until(lambda: not any((state / r / f"{rid}.json").exists()
                               for r in ("planner", "metaval", "perceiver")), 15, "state dropped")


def test_cli_json_exit_codes_and_the_conversational_path(e2e):
    env = dict(os.environ)
    rid = new_rid("cli")
    intent = f"print the date {rid}"
    e2e.router.simple(intent, "2026-11-22", ["date printed"])
    data = e2e.router.data("2026-11-22")
    e2e.router.script.verifier(intent, check(data), reads(data))
    e2e.llm.add("perceiver", perception("print the date"), task=rid)
    e2e.llm.add("planner", plan(subtask(intent, ["date printed"])), task=rid)
    e2e.llm.add("metaval", accept("printed", merged_output="2026-11-22"), task=rid)
    proc = subprocess.run([sys.executable, "-m", "services.cli", "run", "--json", "--run-id", rid,
                           "print", "the", "date"], env=env, cwd=REPO, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    final = json.loads(proc.stdout)
    assert final["task_id"] == rid and final["directive"] == "accept"
    assert final["status"] == "verified" and final["verified"] is True
    cost = final["cost"]
    assert cost["total"]["calls"] == sum(r["calls"] for r in cost["per_role"].values()) >= 4
    assert {"executor", "agentval", "verifier"} <= set(cost["per_role"])
    assert cost["total"]["prompt_tokens"] > 0 and cost["total"]["seconds"] >= 0

    bad = new_rid("clibad")
    e2e.llm.add("perceiver", perception("print the time"), task=bad)
    e2e.llm.add("planner", PROSE, times=2, task=bad)
    proc = subprocess.run([sys.executable, "-m", "services.cli", "run", "--run-id", bad,
                           "print the time"], env=env, cwd=REPO, capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 1 and "abandon" in proc.stdout and "Decisions" in proc.stdout
    again = subprocess.run([sys.executable, "-m", "services.cli", "run", "--run-id", bad,
                            "print the time"], env=env, cwd=REPO, capture_output=True, text=True,
                           timeout=60)          # an id a run used is refused, not waited on
    assert again.returncode == 2 and "not reused" in again.stderr

    hello = new_rid("hi")
    e2e.llm.add("perceiver", "Hello! I'm artoo.", task=hello)
    final = run_task(e2e, hello, "hello")
    assert isinstance(final, ConversationalReply) and final.answer == "Hello! I'm artoo."
    assert exit_code(final) == 0


def test_operator_approval_prompt_denies_then_approves(e2e):
    """Law 1 through the CLI: the effector asks, the interactive CLI shows the exact command and
    answers with the operator's y/N (scripted here) — denied leaves the file and a [LAW1] line in
    the result, approved deletes it."""
    from rich.console import Console
    from services.cli.run import RunSession
    out = io.StringIO()
    session = RunSession(e2e.settings, Console(file=out, width=160), interactive=True)
    answers: list[str] = []
    session.console.input = lambda prompt="": answers.pop(0)
    target = e2e.settings.workspace / "old-notes.txt"
    try:
        for answer in ("n", "y"):
            target.write_text("keep me?")
            rid = new_rid(f"ap{answer}")
            intent = f"delete old notes {rid}"
            e2e.router.script.executor(intent, shell("rm old-notes.txt"), result("deleted"))
            e2e.router.script.agentval(intent, all_met("old-notes.txt is gone"))
            e2e.llm.add("perceiver", perception("delete old-notes.txt"), task=rid)
            e2e.llm.add("planner", plan(subtask(intent, ["old-notes.txt is gone"])), task=rid)
            e2e.llm.add("metaval", accept("deleted"), task=rid)
            answers.append(answer)
            session.submit("delete old-notes.txt", run_id=rid, deadline_s=60)
            final = session.follow(rid, 60)
            request = [m for env, m in session.seen[rid] if env.type == "ApprovalRequest"][0]
            assert "rm old-notes.txt" in request.command
            assert "rm old-notes.txt" in out.getvalue()  # the exact command was shown
            decision = [m for env, m in session.seen[rid] if env.type == "ApprovalDecision"][0]
            assert decision.decided_by == "operator" and decision.approved == (answer == "y")
            if answer == "n":
                assert target.exists() and final.directive == "abandon"
                assert final.law1 and "[LAW1]" in final.law1[0]
            else:
                assert not target.exists() and final.directive == "accept", final.summary
    finally:
        session.close()


def test_repl_runs_goals_and_its_commands(e2e):
    e2e.llm.add("perceiver", "Hi from the repl!")  # the REPL assigns the run id itself
    proc = subprocess.run([sys.executable, "-m", "services.cli", "repl"],
                          input="/help\n/memory\n/audit\nhello\nexit\n", env=dict(os.environ),
                          cwd=REPO, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert "/memory" in out and "Megrams in" in out          # help, then the memory summary
    assert "audit report" in out                              # the auditor's on-demand report
    assert "Hi from the repl!" in out                         # a goal run through the pipeline


# ---------------------------------------------------------------------------------------------
# Law 0 over the real daemon: honest outcomes
# ---------------------------------------------------------------------------------------------

def test_law0_invented_value_is_corrected_then_verified(e2e):
    """The `date` shape end to end: the executor answers a value no tool printed; R4a's opinion
    says met, code says no (correction); the second answer comes from a tool and agrees with the
    independent check: verified, exit 0."""
    rid = new_rid("inv")
    intent = f"sum the amounts {rid}"
    (e2e.settings.workspace / f"amounts-{rid}.csv").write_text("name,amount\na,40\nb,2\n")
    total = f"awk -F, 'NR>1 {{s+=$2}} END {{print s}}' amounts-{rid}.csv"
    e2e.router.script.executor(intent, shell("date"), result("1000000"),
                               shell(total), result("42"))
    e2e.router.script.agentval(intent, all_met("summed", evidence="printed 1000000"),
                               all_met("summed", evidence="awk printed 42"))
    e2e.router.script.verifier(intent, check(f"cut -d, -f2 amounts-{rid}.csv | tail -n +2 | "
                                             f"paste -sd+ | bc"),
                               check_program(f"import csv\nprint(sum(int(r['amount']) for r in "
                                             f"csv.DictReader(open('amounts-{rid}.csv'))))"))
    e2e.llm.add("perceiver", perception("sum the amounts"), task=rid)
    e2e.llm.add("planner", plan(subtask(intent, ["summed"])), task=rid)
    final = run_task(e2e, rid, "sum the amounts")
    assert final.status == "verified" and final.verified and final.answer == "42"
    assert exit_code(final) == 0
    corrections = [ev for ev in tasklog.read(e2e.settings.tasks_dir, rid)
                   if ev["kind"] == "correction"]
    assert corrections and "1000000" in corrections[0]["what_was_wrong"]


def test_law0_unchecked_result_is_reported_unverified(e2e):
    rid = new_rid("unv")
    intent = f"count the notes {rid}"
    e2e.router.simple(intent, "3", ["counted"])          # the checker declines: no check ran
    e2e.llm.add("perceiver", perception("count the notes"), task=rid)
    e2e.llm.add("planner", plan(subtask(intent, ["counted"])), task=rid)
    final = run_task(e2e, rid, "count the notes")
    assert final.directive in ("accept", "success") and final.status == "unverified"
    assert not final.verified and final.unverified and exit_code(final) == 3


def test_law0_a_second_check_that_disagrees_leaves_the_result_unverified(e2e):
    """k-of-N over the bus: the first check agrees, the second (a program) counts otherwise: done,
    exit 3, the reason names the second check; no retry of an answer that may be right."""
    rid = new_rid("k2")
    intent = f"count the lines {rid}"
    (e2e.settings.workspace / f"lines-{rid}.txt").write_text("a\nb\nc\n")
    e2e.router.script.executor(intent, shell(f"wc -l < lines-{rid}.txt"), result("3"))
    e2e.router.script.agentval(intent, all_met("counted", evidence="wc printed 3"))
    e2e.router.script.verifier(intent, check(f"grep -c . lines-{rid}.txt"), check_program(
        f"print(len(open('lines-{rid}.txt').read().split()) + 1)"))
    e2e.llm.add("perceiver", perception("count the lines"), task=rid)
    e2e.llm.add("planner", plan(subtask(intent, ["counted"])), task=rid)
    final = run_task(e2e, rid, "count the lines")
    assert final.status == "unverified" and not final.verified and exit_code(final) == 3
    assert final.answer == "3", final.summary
    assert any("second independent check in another form" in u and "printed: 4" in u
               for u in final.unverified), final.unverified
    assert not [ev for ev in tasklog.read(e2e.settings.tasks_dir, rid)
                if ev["kind"] == "correction"]


def test_law0_impossible_goal_ends_not_possible_without_replanning(e2e):
    rid = new_rid("imp")
    intent = f"email of alice {rid}"
    (e2e.settings.workspace / f"users-{rid}.csv").write_text("name,email\nalicia,a@x.org\n")
    e2e.router.script.executor(intent, shell(f"grep -w alice users-{rid}.csv"),
                               result("no user alice in the file", status="not_possible"))
    e2e.router.script.verifier(intent, check(f"awk -F, -v k=alice '$1==k {{print $2}}' "
                                             f"users-{rid}.csv"))
    e2e.llm.add("perceiver", perception("email of alice"), task=rid)
    e2e.llm.add("planner", plan(subtask(intent, ["email found"])), task=rid)
    final = run_task(e2e, rid, "email of alice")
    assert final.status == "not_possible" and final.verified and exit_code(final) == 4, \
        final.summary
    assert "alicia" not in final.answer and final.summary.startswith("Not possible")
    assert not seen(e2e, rid, "PlanDirective") and e2e.llm.calls("planner", rid) == 1
    assert not [ev for ev in tasklog.read(e2e.settings.tasks_dir, rid)
                if ev["kind"] == "plan_directive"]


def script_line_count(e2e, tag: str, count: str) -> str:
    """Script a run that counts the lines of notes.txt in its workspace: `wc` by the executor,
    `grep -c` by the checker (a different method). Returns its run id."""
    rid = new_rid(tag)
    intent = f"count the lines {rid}"
    e2e.router.script.executor(intent, shell("wc -l < notes.txt"), result(count))
    e2e.router.script.agentval(intent, all_met("counted", evidence=f"wc printed {count}"))
    e2e.router.script.verifier(intent, check("grep -c . notes.txt"), check_program(
        "print(sum(1 for line in open('notes.txt') if line.strip()))"))
    e2e.llm.add("perceiver", perception("count the lines of notes.txt"), task=rid)
    e2e.llm.add("planner", plan(subtask(intent, ["counted"])), task=rid)
    return rid


def test_run_in_its_own_workspace_and_unsafe_ones_refused(e2e, tmp_path):
    """`--workspace DIR`: the effector works there (not in the daemon's workspace); HOME, the
    root, system dirs and the data dir are refused before anything is submitted. Without it (and
    without ARTOO_WORKSPACE) the run works in the current directory, with the same refusals."""
    env = dict(os.environ)
    own = tmp_path / "project"
    own.mkdir()
    (own / "notes.txt").write_text("one\ntwo\nthree\n")
    rid = script_line_count(e2e, "ws", "3")
    proc = subprocess.run([sys.executable, "-m", "services.cli", "run", "--json", "--run-id", rid,
                           "--workspace", str(own), "count the lines of notes.txt"], env=env,
                          cwd=REPO, capture_output=True, text=True, timeout=120)
    final = json.loads(proc.stdout)
    assert proc.returncode == 0 and final["status"] == "verified", proc.stdout + proc.stderr
    assert final["answer"] == "3" and final["workspace"] == str(own.resolve())
    assert not (e2e.settings.workspace / "notes.txt").exists()
    for bad in ("/", os.path.expanduser("~"), "/etc", str(e2e.settings.home),
                str(tmp_path / "missing")):
        proc = subprocess.run([sys.executable, "-m", "services.cli", "run", "--workspace", bad,
                               "count files"], env=env, cwd=REPO, capture_output=True,
                              text=True, timeout=60)
        assert proc.returncode == 2 and "--workspace refused as the workspace" in proc.stderr, \
            (bad, proc.stderr)

    # without --workspace, the client's own ARTOO_WORKSPACE wins over the daemon's (and the cwd)
    client_ws = tmp_path / "client-ws"
    client_ws.mkdir()
    (client_ws / "notes.txt").write_text("a\nb\nc\nd\n")
    assert env["ARTOO_WORKSPACE"] != str(client_ws)   # the daemon was started with another one
    rid = script_line_count(e2e, "envws", "4")
    proc = subprocess.run([sys.executable, "-m", "services.cli", "run", "--json", "--run-id", rid,
                           "count the lines of notes.txt"], env={**env, "ARTOO_WORKSPACE":
                          str(client_ws)}, cwd=own, capture_output=True, text=True, timeout=120)
    final = json.loads(proc.stdout)
    assert proc.returncode == 0 and final["answer"] == "4", proc.stdout + proc.stderr
    assert final["workspace"] == str(client_ws.resolve())

    # without --workspace (and no ARTOO_WORKSPACE) the run works in the current directory
    env = {k: v for k, v in env.items() if k != "ARTOO_WORKSPACE"}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    (own / "notes.txt").write_text("one\ntwo\n")
    rid = script_line_count(e2e, "cwd", "2")
    proc = subprocess.run([sys.executable, "-m", "services.cli", "run", "--json", "--run-id", rid,
                           "count the lines of notes.txt"], env=env, cwd=own,
                          capture_output=True, text=True, timeout=120)
    final = json.loads(proc.stdout)
    assert proc.returncode == 0 and final["answer"] == "2", proc.stdout + proc.stderr
    assert final["workspace"] == str(own.resolve())
    proc = subprocess.run([sys.executable, "-m", "services.cli", "run", "count files"], env=env,
                          cwd=os.path.expanduser("~"), capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and "the current directory refused" in proc.stderr, proc.stderr


def test_concurrent_runs_in_different_workspaces_share_one_daemon(e2e, tmp_path):
    """The workspace travels in the request: two runs at once, each in its own directory, each
    sees only its own files."""
    procs = {}
    for name, lines in (("one", "a\nb\n"), ("two", "x\ny\nz\n")):
        ws = tmp_path / name
        ws.mkdir()
        (ws / "notes.txt").write_text(lines)
        count = str(lines.count("\n"))
        rid = script_line_count(e2e, f"cw{name}", count)
        procs[name] = (ws, count, subprocess.Popen(
            [sys.executable, "-m", "services.cli", "run", "--json", "--run-id", rid,
             "--workspace", str(ws), "count the lines of notes.txt"], env=dict(os.environ),
            cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    for name, (ws, count, proc) in procs.items():
        out, err = proc.communicate(timeout=120)
        final = json.loads(out)
        assert proc.returncode == 0 and final["answer"] == count, out + err
        assert final["workspace"] == str(ws.resolve()) and final["status"] == "verified"


# ---------------------------------------------------------------------------------------------
# artoo tasks: ls / show / logs -f / cancel, on the real daemon
# ---------------------------------------------------------------------------------------------

def cli(*args: str, timeout: float = 60, **kw) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "services.cli", *args], env=dict(os.environ),
                          cwd=REPO, capture_output=True, text=True, timeout=timeout, **kw)


def in_terminal(*args: str, env: dict, timeout: float = 60) -> str:
    """Run the CLI in a pseudo-terminal (its output is for people there) and return what it
    printed."""
    import pty
    import select
    master, slave = pty.openpty()
    proc = subprocess.Popen([sys.executable, "-m", "services.cli", *args], env=env, cwd=REPO,
                            stdin=slave, stdout=slave, stderr=slave, close_fds=True)
    os.close(slave)
    out = b""
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], 0.5)
            if ready:
                try:
                    chunk = os.read(master, 65536)
                except OSError:          # EIO: the child closed the terminal
                    break
                if not chunk:
                    break
                out += chunk
            elif proc.poll() is not None:
                break
        assert proc.wait(timeout=10) == 0, out.decode(errors="replace")
    finally:
        if proc.poll() is None:
            proc.kill()
        os.close(master)
    return out.decode(errors="replace")


COLOUR = re.compile(r"\x1b\[(?:\d+;)*(?:3[0-8]|9[0-7])(?:;\d+)*m")


def test_tasks_ls_show_logs_follow_and_cancel(e2e):
    done = new_rid("tdone")
    intent = f"count the notes {done}"
    e2e.router.simple(intent, "41", ["counted"])
    data = e2e.router.data("41")
    e2e.router.script.verifier(intent, check(data), reads(data))
    e2e.llm.add("perceiver", perception("count the notes"), task=done)
    e2e.llm.add("planner", plan(subtask(intent, ["counted"])), task=done)
    final = run_task(e2e, done, "count the notes")
    assert final.status == "verified", final.summary

    rows = json.loads(cli("tasks", "ls", "--json", "-n", "0").stdout)
    row = next(r for r in rows if r["id"] == done)
    assert (row["state"], row["status"], row["answer"]) == ("finished", "verified", "41")
    assert row["goal"] == "count the notes" and row["cost"]["total"]["calls"] >= 3
    detail = json.loads(cli("tasks", "show", done[-10:], "--json").stdout)   # a unique part
    assert detail["plans"][0]["subtasks"][0]["intent"] == intent
    assert detail["subtasks"][0]["verified"] is True and detail["subtasks"][0]["checks"]
    logs = cli("tasks", "logs", done)
    assert logs.returncode == 0 and "task_begin" in logs.stdout and "task_end" in logs.stdout
    assert "You are" not in logs.stdout            # LLM calls without their prompts
    assert cli("tasks", "show", "no-such-run").returncode != 0

    # for people: a table in a terminal, coloured unless NO_COLOR
    env = dict(os.environ, COLUMNS="220")
    shown = in_terminal("tasks", "ls", "-n", "0", env=env)
    assert done in shown and "verified" in shown and COLOUR.search(shown)
    plain = in_terminal("tasks", "ls", "-n", "0", env=dict(env, NO_COLOR="1"))
    assert done in plain and not COLOUR.search(plain)

    # a running task: listed as running, followed, cancelled from another process
    busy = new_rid("tbusy")
    intent = f"wait forever {busy}"
    e2e.router.script.executor(intent, Delay(60, result("never")))
    e2e.llm.add("perceiver", perception("wait"), task=busy)
    e2e.llm.add("planner", plan(subtask(intent, ["done"])), task=busy)
    e2e.session.submit("wait for a long time", run_id=busy, deadline_s=60)
    wait_until(lambda: seen(e2e, busy, "EffectorStarted"), 30, "effector start")
    running = json.loads(cli("tasks", "ls", "--state", "running", "--json", "-n", "0").stdout)
    assert busy in [r["id"] for r in running] and done not in [r["id"] for r in running]
    follower = subprocess.Popen([sys.executable, "-m", "services.cli", "tasks", "logs", "-f", busy],
                                env=dict(os.environ), cwd=REPO, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)
    try:
        cancelled = cli("tasks", "cancel", busy, "--json", timeout=90)
        assert cancelled.returncode == 0, cancelled.stderr
        assert json.loads(cancelled.stdout)["directive"] == "abandon"
        out, _ = follower.communicate(timeout=30)      # -f ends by itself at the task's end
    finally:
        if follower.poll() is None:
            follower.kill()
    assert follower.returncode == 0 and out.rstrip().splitlines()[-1].split()[1] == "task_end"
    assert e2e.session.follow(busy, 30).directive == "abandon"
    again = cli("tasks", "cancel", busy)
    assert again.returncode == 0 and "already finished" in again.stdout
