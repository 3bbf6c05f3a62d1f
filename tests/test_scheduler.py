"""Scheduled goals on the real daemon (`artoo up`: bus, tap, auditor, memory, perceiver, planner,
spawner + effectors, meta-validator, GGS, scheduler) with the scripted LLM.

A schedule that fell due while the daemon was down is reported missed and runs once after `up`; a
schedule added with the daemon up fires, its run ends with a FinalResult (acknowledged by the
scheduler: GGS keeps nothing unacked), it does not overlap its own still-running run, and pause
stops it. The scheduler ticks every 0.2 s here (ARTOO_SCHEDULER_TICK_S) and `--every 2s` is used,
so nothing waits an hour; every wait is on an observed event (the schedule file, a FinalResult, a
heartbeat of the scheduler that shows it looked again).
"""
from __future__ import annotations

import json
import threading
import time
from types import SimpleNamespace

import pytest
from click.testing import CliRunner

from audit_support import wait_until
from conftest import scripted_daemon
from pipeline_harness import Recorder
from protocol.bus import BusClient
from replies_effector import all_met
from replies_pipeline import accept, effector_responder, perception, plan, subtask
from scripted_llm import ScriptedLLM
from services.runtime import schedules, tasklog

INTENT = "print the tick value"
MISSED_SLOTS = 5


@pytest.fixture(scope="module")
def sched_env():
    gate = threading.Event()
    gate.set()

    def planner(req):            # a closed gate holds every run in planning
        assert gate.wait(90), "planner gate never opened"
        return plan(subtask(INTENT, ["the tick value is printed"]))

    executor, _ = effector_responder("cat tick.txt", "TICK-7", "the tick value is printed")
    agentval = lambda req: all_met("the tick value is printed",  # noqa: E731
                                   evidence="the tool printed TICK-7")
    missed: dict = {}

    def store_missed(settings):
        """Stored while the daemon is down: every 10 minutes since 55 minutes ago, so the slots
        at -45, -35, -25, -15 and -5 minutes all went by with no daemon to run them."""
        (settings.workspace / "tick.txt").write_text("TICK-7\n")
        missed.update(schedules.new_schedule("print the tick, catching up", every="10m",
                                             now=time.time() - 3300, yes=True))
        with schedules.ScheduleStore(settings.schedules_file).edit() as data:
            data["schedules"].append(missed)

    with ScriptedLLM() as llm:
        llm.on("perceiver", lambda req: perception(INTENT))
        llm.on("planner", planner)
        llm.on("executor", executor)
        llm.on("agentval", agentval)
        llm.on("metaval", lambda req: accept("the tick is TICK-7", merged_output="TICK-7"))
        with scripted_daemon(llm, prefix="at-sch-", scale=1,
                             extra_env={"ARTOO_SCHEDULER_TICK_S": "0.2"},
                             before_up=store_missed) as (settings, root):
            rec = Recorder()
            client = BusClient("user", settings=settings, heartbeat=False)
            client.on("FinalResult", rec)          # observe only: the scheduler must ack them
            client.on("Heartbeat", rec)
            client.start()
            try:
                yield SimpleNamespace(settings=settings, rec=rec, gate=gate, llm=llm, root=root,
                                      store=schedules.ScheduleStore(settings.schedules_file),
                                      missed_id=missed["id"])
            finally:
                gate.set()
                client.stop()


def sched(env, sid: str) -> dict:
    return schedules.find(env.store.read(), sid)


def events(s: dict, kind: str) -> list[dict]:
    return [h for h in s["history"] if h["event"] == kind]


def cli(*args: str):
    from services.cli import main
    out = CliRunner().invoke(main, list(args), catch_exceptions=False)
    assert out.exit_code == 0, out.output
    return out.output


def final_of(env, run_id: str, timeout: float = 60.0):
    return env.rec.wait_type("FinalResult", task=run_id, timeout=timeout)[0]


def scheduler_looked_after(env, t: float, timeout: float = 20.0) -> None:
    """Wait for a scheduler heartbeat showing a tick later than `t` (it has seen the file since)."""
    env.rec.wait_for(lambda: any(e.type == "Heartbeat" and m.role == "scheduler"
                                 and m.info.get("ticked_at", 0) > t
                                 for e, m in env.rec.items), timeout, f"a scheduler tick after {t}")


def ggs_settled(env, after: float, timeout: float = 30.0) -> None:
    """GGS re-sends a FinalResult until `user` acks it: with only the scheduler acking, its
    heartbeat must come to show nothing unacknowledged."""
    env.rec.wait_for(lambda: any(e.type == "Heartbeat" and m.role == "ggs" and e.ts > after
                                 and m.unacked == 0 for e, m in env.rec.items),
                     timeout, "GGS with nothing unacked")


def test_slots_missed_while_down_are_reported_and_run_once(sched_env):
    env = sched_env
    s = wait_until(lambda: (lambda x: x if events(x, "ended") else None)(sched(env, env.missed_id)),
                   90, "the catch-up run to end")
    assert s["runs"] == 1 and s["missed"] == MISSED_SLOTS, s
    assert [h["event"] for h in s["history"]] == ["missed", "fired", "ended"]
    assert events(s, "missed")[0]["slots"] == MISSED_SLOTS
    run_id = s["last_run_id"]
    final = final_of(env, run_id)
    assert final.directive == "accept" and final.output == "TICK-7", final.summary
    assert s["last_outcome"] == (final.status or final.directive) and not s["running"]
    fired = [e for e in tasklog.read(env.settings.tasks_dir, run_id)
             if e["kind"] == "schedule_fired"]
    assert fired and fired[0]["schedule_id"] == env.missed_id and fired[0]["catch_up"] is True
    assert s["next_due"] > time.time()                    # the next slot is still ahead: no rerun
    scheduler_looked_after(env, time.time() + 1.0)
    assert sched(env, env.missed_id)["runs"] == 1
    listed = {r["id"]: r for r in json.loads(cli("schedule", "ls", "--json"))}
    assert listed[env.missed_id]["missed"] == MISSED_SLOTS
    assert env.missed_id in cli("schedule", "ls")         # the table renders
    shown = json.loads(cli("tasks", "show", run_id, "--json"))   # the run's lifecycle and trail
    assert shown["lifecycle"] == "completed" and not shown["refused_transitions"]
    assert [t["to"] for t in shown["trail"]] == ["pending", "in_progress", "review", "completed"]
    assert shown["trail"][0]["actor"] == "scheduler" and env.missed_id in shown["trail"][0]["reason"]
    row = next(r for r in json.loads(cli("tasks", "ls", "--json", "--state", "completed"))
               if r["id"] == run_id)
    assert row["lifecycle"] == "completed" and row["illegal_transitions"] == 0
    assert run_id in cli("tasks", "ls")
    cli("schedule", "rm", env.missed_id)
    ggs_settled(env, time.time())


def test_schedule_fires_does_not_overlap_and_pause_stops_it(sched_env):
    env = sched_env
    env.gate.clear()                                      # the first run will sit in planning
    out = cli("schedule", "add", "print", "the", "tick", "--every", "2s", "--yes")
    assert "daemon is running" in out
    sid = next(s["id"] for s in env.store.read()["schedules"] if s["goal"] == "print the tick")
    s = wait_until(lambda: (lambda x: x if x["runs"] else None)(sched(env, sid)), 30, "first fire")
    first = s["last_run_id"]
    assert s["running"] == [first]
    wait_until(lambda: env.llm.calls("planner", first) >= 1, 30, "the run to reach the planner")
    s = wait_until(lambda: (lambda x: x if x["skipped"] >= 2 else None)(sched(env, sid)), 30,
                   "two skipped slots")
    assert s["runs"] == 1 and s["running"] == [first]     # no second run while the first goes
    skipped = events(s, "skipped")
    assert all(h["detail"] == "skipped: previous run still running" and h["run_id"] == first
               for h in skipped)
    env.gate.set()
    final = final_of(env, first)
    assert final.directive == "accept" and final.output == "TICK-7", final.summary
    wait_until(lambda: any(h.get("run_id") == first for h in events(sched(env, sid), "ended")),
               30, "the end recorded")

    cli("schedule", "pause", sid)
    paused_at = time.time()
    runs = sched(env, sid)["runs"]
    scheduler_looked_after(env, paused_at + 5.0)          # more than two 2 s slots later
    s = sched(env, sid)
    assert s["runs"] == runs and s["paused"]
    assert not [h for h in s["history"] if h["event"] == "fired" and h["ts"] > paused_at]
    # every run this schedule started ends, and its FinalResult is acknowledged (by the scheduler)
    wait_until(lambda: not env.store.read()["open_runs"], 60, "every scheduled run to end")
    for run_id in [h["run_id"] for h in events(sched(env, sid), "fired")]:
        assert final_of(env, run_id).directive == "accept"
    ggs_settled(env, time.time())
    assert "resumed" in cli("schedule", "resume", sid)
    cli("schedule", "rm", sid)


def test_the_audit_log_finds_every_scheduler_message_on_a_route(sched_env):
    """The tap recorded the scheduler's UserRequests and its acks as `user`; the auditor's
    from→to table (protocol/routes.py) allows every message of the run, the scheduler's included."""
    from auditor import log as audit_log
    from auditor.auditor import boundary_problem
    from services.cli.audit import decoded
    directory = sched_env.settings.audit_dir / "log"

    def envelopes():
        return [env for _rec, env, _p in decoded(audit_log.iter_records(directory)) if env]
    envs = wait_until(lambda: (lambda xs: xs if any(e.type == "UserRequest" and
                                                    e.sender == "scheduler" for e in xs) else None)(
        envelopes()), 30, "the scheduler's UserRequest in the audit log")
    assert [(e.type, e.sender, e.to, boundary_problem(e)) for e in envs if boundary_problem(e)] == []
    acks = [e for e in envs if e.type == "Ack" and e.node.startswith("scheduler-")]
    assert acks and {e.sender for e in acks} == {"user"} and {e.to for e in acks} <= {"ggs"}
