"""Process-level tests of R7: the real `services.roles.ggs` process on a real bus proxy, driven by
synthetic meta-validator / perceiver / user messages from test clients that acknowledge what GGS
sends (user: FinalResult, planner: PlanDirective, memory: MemoryWrite). An observer client sees
GGS's messages in the order GGS published them, which is how ordering and "nothing else was sent"
are checked without sleeping."""
from __future__ import annotations

import threading
import time
import uuid

import pytest
from conftest import start_process, stop_process

from protocol.envelope import owner
from protocol.messages import (CriterionVerdict, LlmUsage, OutcomeSummary, PlanningFailed,
                               ReplanRequest, RunOptions, SubTaskOutcome, TaskCancel, TaskSpec,
                               ToolCallRecord)
from services.roles import ggs
from services.runtime import tasklog

WAIT = 20.0


class Harness:
    """Test-side roles around one or more GGS processes."""

    def __init__(self, settings, bus_clients):
        self.settings = settings
        self.cond = threading.Condition()
        self.seen: list[tuple] = []          # (env, msg) in arrival order at the observer
        self.heartbeats: list = []
        self.procs = []

        def ack(env, msg):
            pass

        self.user = bus_clients("user", setup=lambda c: c.on("FinalResult", ack, ack=True))
        self.planner = bus_clients("planner", setup=lambda c: c.on("PlanDirective", ack, ack=True))
        self.memory = bus_clients("memory", setup=lambda c: c.on("MemoryWrite", ack, ack=True))
        self.metaval = bus_clients("metaval")
        self.perceiver = bus_clients("perceiver")
        self.planner_out = bus_clients("planner")   # sends PlanningFailed

        def observe(env, msg):
            if env.sender != "ggs" or env.type in ("Ack", "Hello"):
                return
            with self.cond:
                (self.heartbeats if env.type == "Heartbeat" else self.seen).append((env, msg))
                self.cond.notify_all()

        self.observer = bus_clients("auditor", setup=lambda c: c.on("*", observe))

    # -- processes ---------------------------------------------------------------------------
    def start_ggs(self, instance: int = 0, instances: int = 1, env: dict | None = None):
        proc = start_process(["-m", "services.roles.ggs"],
                             {"ARTOO_INSTANCE": str(instance), "ARTOO_INSTANCES": str(instances),
                              "ARTOO_GGS_WATCHDOG_INTERVAL_S": "0.1", **(env or {})},
                             f"ggs{instance}")
        self.procs.append(proc)
        self.heartbeat_from(proc.pid)
        return proc

    def heartbeat_from(self, pid: int, pred=lambda hb: True):
        return self.wait(lambda: next((m for _, m in self.heartbeats if m.pid == pid and pred(m)),
                                      None), what=f"heartbeat from ggs pid {pid}")

    def stop(self):
        for proc in self.procs:
            stop_process(proc)

    # -- waiting -----------------------------------------------------------------------------
    def wait(self, probe, what: str, timeout: float = WAIT):
        deadline = time.monotonic() + timeout
        with self.cond:
            while True:
                value = probe()
                if value:
                    return value
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise AssertionError(f"timed out waiting for {what}; saw "
                                         f"{[(e.type, e.task) for e, _ in self.seen]}")
                self.cond.wait(remaining)

    def of(self, type_name: str, task: str) -> list:
        with self.cond:
            return [m for e, m in self.seen if e.type == type_name and e.task == task]

    def next_of(self, type_name: str, task: str, n: int):
        """Wait for the n-th (1-based) message of a type for a task and return it."""
        found = self.wait(lambda: len(self.of(type_name, task)) >= n and self.of(type_name, task),
                          what=f"{type_name} #{n} for {task}")
        return found[n - 1]

    def types_for(self, task: str) -> list[str]:
        """The work GGS sent for a task (its TaskTransition telemetry left out)."""
        with self.cond:
            return [e.type for e, _ in self.seen if e.task == task and e.type != "TaskTransition"]

    # -- sending -----------------------------------------------------------------------------
    def send_acked(self, client, msg, consumers=("ggs",)):
        done = threading.Event()
        result = []
        client.send(msg, consumers=consumers, on_done=lambda ok: (result.append(ok), done.set()))
        assert done.wait(WAIT), f"{type(msg).__name__} was not acknowledged by ggs"
        assert result == [True]

    def task_spec(self, task: str, deadline_in: float = 120.0, slug: str = "count-files"):
        now = time.time()
        self.send_acked(self.perceiver, TaskSpec(task_id=task, intent_slug=slug, intent="count files",
                                                 raw_input="count the files", created_at=now,
                                                 deadline_at=now + deadline_in))

    def replan(self, task: str, outcomes, **kw):
        self.send_acked(self.metaval, ReplanRequest(task_id=task, intent="count files",
                                                    intent_slug="count-files", outcomes=outcomes,
                                                    **kw))


def new_task(prefix="t") -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def outcome(task, intent, status, *, verdicts=(), calls=(), output=None, reason=None,
            verified=None):
    """A subtask outcome; a matched one counts as checked by code (Law 0) unless told otherwise."""
    return SubTaskOutcome(task_id=task, subtask_id=f"{task}-{intent}-{uuid.uuid4().hex[:4]}",
                          parent_task_id=task, intent=intent, status=status, output=output,
                          failure_reason=reason, criteria_verdicts=list(verdicts),
                          tool_calls=list(calls),
                          verified=status == "matched" if verified is None else verified)


def fail(text, cls):
    return CriterionVerdict(criterion=text, verdict="fail", failure_class=cls)


def ok(text):
    return CriterionVerdict(criterion=text, verdict="pass")


def env_failure(task, intent, target, output=None):
    return outcome(task, intent, "failed", verdicts=[fail(f"{intent} done", "environmental")],
                   calls=[ToolCallRecord(tool="shell", target=target, error="No such file")],
                   reason="No such file", output=output)


@pytest.fixture
def harness(bus_process, settings, bus_clients):
    h = Harness(settings, bus_clients)
    try:
        yield h
    finally:
        h.stop()


# ------------------------------------------------------------------------------------------------

def test_change_path_refine_success_trajectory(harness):
    h = harness
    h.start_ggs()
    task = new_task()
    h.task_spec(task)

    h.replan(task, [env_failure(task, "list the files", "ls /data")], gap_summary="no files")
    d1 = h.next_of("PlanDirective", task, 1)
    assert (d1.directive, d1.prev_directive, d1.urgency, d1.replan_round) == (
        "change_path", "init", "normal", 1)
    assert d1.grad_l == 0.0 and d1.loss.D == 1.0 and d1.loss.P == 0.0
    assert d1.blocked_targets == ["ls /data"] and d1.failure_class == "environmental"
    assert d1.failed_criterion == "list the files done" and "act on 'ls /data' again" in d1.must_not
    # the action Megram was published before the directive
    assert h.types_for(task)[:2] == ["MemoryWrite", "PlanDirective"]
    mw = h.of("MemoryWrite", task)[0]
    assert [(m.space, m.entity, m.state, m.f, m.sigma, m.k) for m in mw.megrams] == [
        ("tool:shell", "target:ls /data", "change_path", 0.30, 0.0, 0.2)]

    h.replan(task, [outcome(task, "count them", "matched", verdicts=[ok("n known")], output=7),
                    env_failure(task, "list the files", "ls /srv")])
    d2 = h.next_of("PlanDirective", task, 2)
    assert (d2.directive, d2.prev_directive, d2.urgency) == ("refine", "change_path", "low")
    assert d2.grad_l == pytest.approx(-0.22, abs=0.01) and d2.loss.D == 0.5
    assert d2.blocked_targets == ["ls /data", "ls /srv"]

    h.replan(task, [outcome(task, "list the files", "matched", verdicts=[ok("listed")],
                            output=["a", "b"])])
    final = h.next_of("FinalResult", task, 1)
    assert final.directive == "success" and final.prev_directive == "refine"
    assert final.output == ["a", "b"] and final.loss.D == 0.0 and final.replans == 2
    assert final.completed == ["count them", "list the files"] and final.failed == []
    assert h.types_for(task)[-2:] == ["MemoryWrite", "FinalResult"]
    term = h.of("MemoryWrite", task)[-1].megrams
    assert [(m.space, m.entity, m.state, m.f, m.sigma) for m in term] == [
        ("intent:count-files", "env:local", "success", 0.80, 1.0)]

    events = list(tasklog.read(h.settings.tasks_dir, task))
    decisions = [e for e in events if e["kind"] == "ggs_decision"]
    assert [e["directive"] for e in decisions] == ["change_path", "refine", "success"]
    for e in decisions:
        assert {"d", "p", "omega", "l", "grad_l", "directive", "urgency", "rationale"} <= set(e)
        assert e["rationale"]
    assert [e["urgency"] for e in decisions] == ["normal", "low", "low"]
    assert [e["directive"] for e in events if e["kind"] == "plan_directive"] == ["change_path",
                                                                                 "refine"]
    assert [e["state"] for e in events if e["kind"] == "memory_write"] == [
        "change_path", "refine", "success"]
    assert [e["status"] for e in events if e["kind"] == "task_end"] == ["success"]
    # per-task state is gone; only the tombstone is left
    hb = h.heartbeat_from(h.procs[0].pid, lambda m: m.info.get("final_results", 0) >= 1)
    assert hb.info["tasks"] == 0 and hb.info["tombstones"] == 1


def test_unverified_success_is_reported_as_such_and_teaches_memory_nothing(harness):
    """Law 0: a success no code checked ends as 'unverified' and writes no terminal Megram, so
    the next run is not taught to repeat an approach nobody confirmed."""
    h = harness
    h.start_ggs()
    task = new_task()
    h.task_spec(task)
    h.replan(task, [outcome(task, "count them", "matched", verdicts=[ok("n known")], output=7,
                            verified=False)])
    final = h.next_of("FinalResult", task, 1)
    assert final.directive == "success"
    assert (final.status, final.verified) == ("unverified", False)
    assert final.unverified == ["not checked by code"]
    assert h.types_for(task) == ["FinalResult"]


def test_two_worsening_rounds_abandon_below_theta(harness):
    h = harness
    h.start_ggs()
    task = new_task()
    h.task_spec(task)
    checks = [ok("c1"), ok("c2"), fail("c3", "environmental")]
    h.replan(task, [outcome(task, "step", "failed", verdicts=checks)])
    assert h.next_of("PlanDirective", task, 1).directive == "change_path"
    h.replan(task, [outcome(task, "step", "failed",
                            verdicts=[ok("c1"), fail("c2", "logical"), fail("c3", "logical")])])
    d2 = h.next_of("PlanDirective", task, 2)
    assert d2.directive == "change_approach" and d2.urgency == "high" and d2.grad_l >= 0.1
    h.replan(task, [outcome(task, "step", "failed", verdicts=[fail(c, "logical")
                                                              for c in ("c1", "c2", "c3")])])
    final = h.next_of("FinalResult", task, 1)
    assert final.directive == "abandon" and final.loss.Omega < 0.8 and final.grad_l >= 0.1
    assert "kill switch" in final.summary and final.output is None
    assert final.prev_directive == "change_approach" and final.replans == 2
    # two directives issued (delivery is at least once: a slow ack brings a re-sent copy)
    assert sorted({d.replan_round for d in h.of("PlanDirective", task)}) == [1, 2]
    term = h.of("MemoryWrite", task)[-1].megrams[0]
    assert (term.state, term.f, term.sigma) == ("abandon", 0.95, -1.0)


def test_budget_exhausted_by_elapsed_time_abandons_with_partial_output(harness):
    h = harness
    h.start_ggs()
    task = new_task()
    h.task_spec(task)
    h.replan(task, [outcome(task, "fetch prices", "matched", verdicts=[ok("prices")],
                            output={"AAPL": 190}),
                    env_failure(task, "fetch news", "curl news.example")], elapsed_ms=5_000)
    assert h.next_of("PlanDirective", task, 1).directive == "change_path"
    h.replan(task, [env_failure(task, "fetch news", "curl news2.example")], elapsed_ms=400_000,
             gap_summary="news source unreachable")
    final = h.next_of("FinalResult", task, 1)
    assert final.directive == "abandon" and final.loss.Omega >= 0.8
    assert final.output == {"AAPL": 190}
    assert final.completed == ["fetch prices"] and final.failed == ["fetch news: No such file"]
    assert "budget is exhausted" in final.summary and "news source unreachable" in final.summary
    assert "Completed: fetch prices" in final.summary


def test_accept_through_outcome_summary(harness):
    h = harness
    h.start_ggs()
    task = new_task()
    h.task_spec(task, slug="weather-today")
    h.send_acked(h.metaval, OutcomeSummary(
        task_id=task, intent_slug="weather-today", summary="It is sunny, 21 °C.",
        merged_output={"sky": "sunny", "temp_c": 21},
        outcomes=[outcome(task, "get weather", "matched", verdicts=[ok("has temp")],
                          output={"sky": "sunny", "temp_c": 21})]))
    final = h.next_of("FinalResult", task, 1)
    assert final.directive == "accept" and final.summary == "It is sunny, 21 °C."
    assert final.output == {"sky": "sunny", "temp_c": 21}
    assert final.loss.D == 0.0 and final.replans == 0 and final.prev_directive == "init"
    m = h.of("MemoryWrite", task)[0].megrams[0]
    assert (m.space, m.entity, m.state, m.f, m.sigma) == ("intent:weather-today", "env:local",
                                                          "accept", 0.90, 1.0)
    events = list(tasklog.read(h.settings.tasks_dir, task))
    assert [e["directive"] for e in events if e["kind"] == "ggs_decision"] == ["accept"]


def test_blocked_targets_accumulate_and_never_repeat(harness):
    h = harness
    h.start_ggs()
    task = new_task()
    h.replan(task, [env_failure(task, "read config", "/etc/a.conf")])
    assert h.next_of("PlanDirective", task, 1).blocked_targets == ["/etc/a.conf"]
    h.replan(task, [env_failure(task, "read config", "/etc/b.conf"),
                    env_failure(task, "read backup", "/etc/a.conf"),
                    env_failure(task, "read default", "/etc/c.conf")])
    d2 = h.next_of("PlanDirective", task, 2)
    assert d2.blocked_targets == ["/etc/a.conf", "/etc/b.conf", "/etc/c.conf"]
    assert d2.directive == "change_path" and d2.replan_round == 2
    assert [f"act on '{t}' again" for t in d2.blocked_targets] == d2.must_not
    # the third replan request spends the replan budget (maxReplans = 3): abandon, not a directive
    # a failed subtask's work may stay in the workspace: abandoned is not untouched, and the
    # user is told which files (accumulated over the rounds, each once)
    last = env_failure(task, "read config", "/etc/d.conf")
    last.changed = ["notes.txt", "out/report.csv"]
    h.replan(task, [last])
    final = h.next_of("FinalResult", task, 1)
    assert final.directive == "abandon" and "replan budget is spent" in final.summary
    assert len(h.of("PlanDirective", task)) == 2
    assert final.changed == ["notes.txt", "out/report.csv"]
    assert "The work left these workspace files changed: notes.txt, out/report.csv." in \
        final.summary


def test_deadline_watchdog_abandons_a_silent_task(harness):
    h = harness
    h.start_ggs()
    task = new_task()
    h.task_spec(task, deadline_in=1.0)
    final = h.next_of("FinalResult", task, 1)
    assert final.directive == "abandon" and "deadline" in final.summary
    assert "Nothing was completed" in final.summary
    cancel = h.of("TaskCancel", task)
    assert cancel and cancel[0].reason == "deadline exceeded"
    assert h.types_for(task) == ["TaskCancel", "FinalResult"]   # no memory write for a timeout
    events = list(tasklog.read(h.settings.tasks_dir, task))
    assert [e["reason"] for e in events if e["kind"] == "ggs_decision"] == ["deadline"]


def test_cancel_planning_failure_and_late_messages(harness):
    h = harness
    proc = h.start_ggs()
    cancelled, failed, barrier = new_task("c"), new_task("p"), new_task("b")
    h.task_spec(cancelled)
    h.user.publish(TaskCancel(task_id=cancelled))
    final = h.next_of("FinalResult", cancelled, 1)
    assert final.directive == "abandon" and "cancelled by operator" in final.summary
    assert h.types_for(cancelled) == ["FinalResult"]      # nothing else broadcast

    h.task_spec(failed)
    h.replan(failed, [outcome(failed, "part one", "matched", output="half"),
                      env_failure(failed, "part two", "/x")])
    h.next_of("PlanDirective", failed, 1)
    h.send_acked(h.planner_out, PlanningFailed(task_id=failed, error="LLM endpoint unreachable"))
    pf = h.next_of("FinalResult", failed, 1)
    assert pf.directive == "abandon" and "LLM endpoint unreachable" in pf.summary
    assert pf.output == "half" and pf.completed == ["part one"]

    # late messages for ended tasks are acknowledged and ignored
    h.replan(cancelled, [env_failure(cancelled, "x", "/y")])
    h.send_acked(h.metaval, OutcomeSummary(task_id=failed, summary="late"))
    h.task_spec(failed)
    h.replan(barrier, [env_failure(barrier, "x", "/z")])
    h.next_of("PlanDirective", barrier, 1)   # GGS handled everything sent before this
    assert len(h.of("FinalResult", cancelled)) == 1 and len(h.of("FinalResult", failed)) == 1
    assert h.heartbeat_from(proc.pid, lambda m: m.info.get("tombstones") == 2)


def test_sigkill_between_rounds_gives_exactly_one_final_result(harness):
    h = harness
    first = h.start_ggs()
    survivor, timed = new_task("s"), new_task("d")
    h.task_spec(survivor)
    h.task_spec(timed, deadline_in=4.0)
    h.replan(survivor, [env_failure(survivor, "step", "/a")])
    assert h.next_of("PlanDirective", survivor, 1).directive == "change_path"
    h.replan(timed, [outcome(timed, "part", "matched", output="kept"),
                     env_failure(timed, "rest", "/b")])
    h.next_of("PlanDirective", timed, 1)

    # "between rounds": everything GGS sent has been acknowledged, then SIGKILL
    h.heartbeat_from(first.pid, lambda m: m.unacked == 0 and m.info.get("decisions") == 2)
    first.kill()
    first.wait(10)
    second = h.start_ggs()
    # the trajectory survived: L_prev (∇L ≠ 0), the round count and the blocked targets
    h.replan(survivor, [outcome(survivor, "step", "failed",
                                verdicts=[fail("a", "logical"), fail("b", "logical")],
                                calls=[ToolCallRecord(tool="shell", target="/c", error="bad")])])
    d2 = h.next_of("PlanDirective", survivor, 2)
    assert d2.replan_round == 2 and d2.grad_l != 0.0 and d2.prev_directive == "change_path"
    assert d2.blocked_targets == ["/a", "/c"]
    h.replan(survivor, [outcome(survivor, "step", "matched", output=42)])
    assert h.next_of("FinalResult", survivor, 1).output == 42

    # the restarted process enforces the deadline it reloaded, with the partial output
    timed_final = h.next_of("FinalResult", timed, 1)
    assert timed_final.directive == "abandon" and timed_final.output == "kept"

    h.heartbeat_from(second.pid, lambda m: m.unacked == 0 and m.info.get("final_results") == 2)
    second.kill()
    second.wait(10)
    third = h.start_ggs()
    h.replan(survivor, [env_failure(survivor, "step", "/late")])     # late: ignored
    # a heartbeat reporting a watchdog tick is published after the tick's recovery re-sends
    h.heartbeat_from(third.pid, lambda m: m.info.get("tombstones") == 2
                     and m.info.get("watchdog_at", 0) > 0)
    assert len(h.of("FinalResult", survivor)) == 1 and len(h.of("FinalResult", timed)) == 1
    assert len(h.of("PlanDirective", survivor)) == 2


def test_partitioned_instances_each_task_handled_once(harness):
    h = harness
    procs = [h.start_ggs(0, 2), h.start_ggs(1, 2)]
    tasks = [new_task("part") for _ in range(6)]
    for task in tasks:
        h.replan(task, [env_failure(task, "x", "/p")])
    for task in tasks:
        env = h.wait(lambda: next((e for e, _ in h.seen if e.type == "PlanDirective"
                                   and e.task == task), None), what=f"directive for {task}")
        assert env.node.startswith(f"ggs-{owner(task, 2)}-")
    # a barrier task per instance: afterwards every earlier directive of that instance has arrived
    for inst in (0, 1):
        barrier = next(t for t in (new_task("bar") for _ in range(100)) if owner(t, 2) == inst)
        h.replan(barrier, [env_failure(barrier, "x", "/q")])
        h.next_of("PlanDirective", barrier, 1)
    assert all(len(h.of("PlanDirective", t)) == 1 for t in tasks)
    assert {p.pid for p in procs} == {p.pid for p in h.procs}


def test_a_spent_llm_call_budget_ends_the_task_instead_of_a_replan(harness):
    h = harness
    h.start_ggs()
    within, spent = new_task("within"), new_task("spent")
    for task in (within, spent):
        now = time.time()
        h.send_acked(h.perceiver, TaskSpec(task_id=task, intent_slug="count-files",
                                           intent="count files", raw_input="count the files",
                                           created_at=now, deadline_at=now + 120,
                                           options=RunOptions(max_llm_calls=3)))
    # LlmUsage is telemetry; sent by the same client as the ReplanRequest it precedes, so the
    # proxy delivers it first
    # within: 2 of 3 left, a checked round (an executor call and a check) fits; starved: 1 left,
    # it does not — a round whose answer could not be checked is not started
    starved = new_task("starved")
    now = time.time()
    h.send_acked(h.perceiver, TaskSpec(task_id=starved, intent_slug="count-files",
                                       intent="count files", raw_input="count the files",
                                       created_at=now, deadline_at=now + 120,
                                       options=RunOptions(max_llm_calls=3)))
    h.metaval.publish(LlmUsage(task_id=within, role="executor", tier="EXECUTOR"))
    for _ in range(2):
        h.metaval.publish(LlmUsage(task_id=starved, role="executor", tier="EXECUTOR"))
    for _ in range(3):
        h.metaval.publish(LlmUsage(task_id=spent, role="executor", tier="EXECUTOR"))
    h.replan(starved, [env_failure(starved, "count", "ls data")])
    final = h.next_of("FinalResult", starved, 1)
    assert final.directive == "abandon" and "fewer than a checked round needs" in final.summary
    for task in (within, spent):
        h.replan(task, [env_failure(task, "count", "ls data")])
    assert h.next_of("PlanDirective", within, 1).directive in ("change_path", "refine",
                                                                "change_approach",
                                                                "break_symmetry")
    final = h.next_of("FinalResult", spent, 1)
    assert final.directive == "abandon" and final.status == "abandoned"
    assert "LLM call budget is spent (3 of 3 calls" in final.summary
    assert h.of("PlanDirective", spent) == []
    decisions = [e for e in tasklog.read(h.settings.tasks_dir, spent)
                 if e.get("kind") == "ggs_decision"]
    assert decisions[-1]["reason"] == "llm_budget"


def test_the_default_llm_call_budget_is_the_bundled_models_own_when_the_executor_runs_on_it(
        harness):
    """No --max-llm-calls: the budget is ARTOO_LOCAL_TASK_LLM_CALLS when the executor tier has no
    endpoint of its own (the bundled model), ARTOO_TASK_LLM_CALLS otherwise."""
    assert ggs.budget_field({}) == "local_task_llm_calls"
    assert ggs.budget_field({"TOOL_BASE_URL": "http://x/v1"}) == "task_llm_calls"
    assert ggs.budget_field({"OPENAI_BASE_URL": "http://x/v1"}) == "task_llm_calls"
    h = harness
    h.start_ggs(env={"ARTOO_LOCAL_TASK_LLM_CALLS": "2", "ARTOO_TASK_LLM_CALLS": "50"})
    task = new_task("local")
    now = time.time()
    h.send_acked(h.perceiver, TaskSpec(task_id=task, intent_slug="count-files",
                                       intent="count files", raw_input="count the files",
                                       created_at=now, deadline_at=now + 120))
    for _ in range(2):
        h.metaval.publish(LlmUsage(task_id=task, role="executor", tier="TOOL"))
    h.replan(task, [env_failure(task, "count", "ls data")])
    final = h.next_of("FinalResult", task, 1)
    assert final.directive == "abandon" and final.status == "abandoned"
    assert "LLM call budget is spent (2 of 2 calls" in final.summary
    assert "ARTOO_LOCAL_TASK_LLM_CALLS" in final.summary
