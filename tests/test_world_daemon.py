"""The world model in the real daemon (`artoo up`, world process included) on the scripted LLM.

Law 1 for autonomous goals: the same request three times proposes a schedule (AUTO, with the
pattern that fired it and its evidence); nothing runs until `artoo goals accept`, after which the
scheduler runs it; a second repeated request's proposal is rejected and never runs. On the way:
the TaskSpec carries the emotion, the priority and the world's projection of what an earlier task
established (a file it wrote), and `artoo world` shows it.
"""
from __future__ import annotations

import json

import psutil
from click.testing import CliRunner

from conftest import scripted_daemon
from pipeline_harness import Recorder
from protocol.bus import BusClient
from replies_effector import all_met
from replies_pipeline import accept, effector_responder, perception, plan, subtask
from scripted_llm import ScriptedLLM
from services.cli.run import RunSession
from services.runtime import daemon, schedules, tasklog

ACCEPTED = "print the tick value"
REJECTED = "print the tock value"


def cli(*args: str, codes: tuple[int, ...] = (0,)) -> str:
    from services.cli import main
    out = CliRunner().invoke(main, list(args), catch_exceptions=False)
    assert out.exit_code in codes, out.output
    return out.output


def test_repeated_request_proposes_a_schedule_that_runs_only_once_accepted():
    executor, _ = effector_responder("cat tick.txt", "TICK-7", "the tick value is printed")
    with ScriptedLLM() as llm:
        llm.on("perceiver", lambda req: perception(ACCEPTED))
        llm.on("planner", lambda req: plan(subtask(ACCEPTED, ["the tick value is printed"])))
        llm.on("executor", executor)
        llm.on("agentval", lambda req: all_met("the tick value is printed",
                                               evidence="the tool printed TICK-7"))
        llm.on("metaval", lambda req: accept("the tick is TICK-7", merged_output="TICK-7"))
        with scripted_daemon(llm, prefix="at-wd-", scale=1,
                             extra_env={"ARTOO_SCHEDULER_TICK_S": "0.2"}) as (settings, root):
            (settings.workspace / "tick.txt").write_text("TICK-7\n")
            rec = Recorder()
            watcher = BusClient("user", settings=settings, heartbeat=False)
            for t in ("GoalProposed", "UserRequest", "TaskSpec", "FinalResult", "Heartbeat"):
                watcher.on(t, rec)
            watcher.start()
            session = RunSession(settings, _quiet_console(), yes=True, interactive=False,
                                 quiet=True)
            try:
                _run(session, ACCEPTED, 2)
                # the world learns a run's facts when it observes its FinalResult, which may be
                # after this client has its own copy: the third run is asked once they are there
                rec.wait_for(lambda: "TICK-7" in cli("world", "facts", "--claims", "--json") and
                             "tick.txt" in cli("world", "entities", "--json"), 30,
                             "the first two runs' facts in the world model")
                [third] = _run(session, ACCEPTED, 1)
                [proposal] = rec.wait_type("GoalProposed", timeout=30)
                assert proposal.goal_type == "AUTO" and "repetition" in proposal.trigger
                # the third run's own TaskSpec (its last copy, should the perceiver have re-sent it)
                spec = rec.of("TaskSpec", task=third)[-1]
                assert spec.emotion is not None and spec.emotion.label == "neutral"
                assert 0 < spec.priority <= 1
                # the third run's TaskSpec carries what the first two established: the file they
                # read; their answers are unverified here: claims, shown only marked as such
                assert "file tick.txt" in spec.world and "TICK-7" in spec.world, \
                    _world_note(settings, third)
                assert all("(no check confirmed this answer)" in line
                           for line in spec.world.splitlines() if "TICK-7" in line)

                _run(session, REJECTED, 3)
                proposals = rec.wait_type("GoalProposed", n=2, timeout=30)
                other = next(p for p in proposals if p.goal_id != proposal.goal_id)
                ls = json.loads(cli("goals", "ls", "--json"))
                assert {g["id"]: g["status"] for g in ls} == {proposal.goal_id: "BLOCKED",
                                                             other.goal_id: "BLOCKED"}
                shown = json.loads(cli("goals", "show", proposal.goal_id))
                assert len(shown["evidence"]) == 3 and shown["action"]["kind"] == "schedule"
                # proposed is not running: no schedule, no run beyond the user's six
                assert schedules.ScheduleStore(settings.schedules_file).read()["schedules"] == []
                assert len(rec.of("UserRequest")) == 6

                assert "rejected" in cli("goals", "reject", other.goal_id, "--reason", "no")
                out = cli("goals", "accept", proposal.goal_id, "--every", "1s", "--yes")
                sid = out.split("schedule ")[1].split()[0]
                fired = rec.wait_for(lambda: [m for e, m in rec.items if e.type == "UserRequest"
                                              and m.session_id == f"schedule:{sid}"], 60,
                                     "a run of the accepted schedule")
                assert fired[0].text == ACCEPTED
                rec.wait_type("FinalResult", task=fired[0].task_id, timeout=60)
                cli("schedule", "pause", sid)
                ls = {g["id"]: g for g in json.loads(cli("goals", "ls", "--json"))}
                assert ls[proposal.goal_id]["status"] == "ACTIVE"
                assert ls[proposal.goal_id]["link"] == {"schedule_id": sid}
                assert ls[other.goal_id]["status"] == "REJECTED"
                # the rejected one never runs: no schedule of it, no request with its text but the
                # user's own three
                scheds = schedules.ScheduleStore(settings.schedules_file).read()["schedules"]
                assert [s["goal"] for s in scheds] == [ACCEPTED]
                assert sum(m.text == REJECTED for m in rec.of("UserRequest")) == 3
                claims = json.loads(cli("world", "facts", "--claims", "--json"))["claims"]
                assert any(c["subject"].startswith("task:") for c in claims)
                ents = json.loads(cli("world", "entities", "--json"))
                assert "file:tick.txt" in {e["id"] for e in ents}

                # an angry message: its TaskSpec ranks above the calm ones, and it proposes a
                # reactive goal (which, unaccepted, does not run either)
                angry = "The tick is broken AGAIN!! print the tick value"
                _run(session, angry, 1)
                spec = next(m for m in rec.of("TaskSpec") if m.raw_input.startswith("The tick"))
                calm = next(m for m in rec.of("TaskSpec") if m.raw_input == ACCEPTED)
                assert spec.emotion.label == "anger" and spec.emotion.valence < -0.5
                assert spec.priority > calm.priority
                reactive = rec.wait_for(lambda: [m for m in rec.of("GoalProposed")
                                                 if m.goal_type == "REACTIVE"], 30, "reactive")
                assert "Look at what failed" in reactive[0].description
                # accepted, it runs once, as a REACTIVE goal, followed to its end
                out = cli("goals", "accept", reactive[0].goal_id, "--yes", codes=(0, 3))
                rid = out.split("run ")[1].split()[0]
                ran = next(m for m in rec.of("TaskSpec") if m.task_id == rid)
                assert ran.goal_type == "REACTIVE" and ran.priority > calm.priority
                goal = json.loads(cli("goals", "show", reactive[0].goal_id))
                assert goal["link"] == {"run_id": rid}
                assert goal["status"] in ("COMPLETED", "FAILED")

                # the file is gone, but the world knows it from earlier tasks: a goal about it
                # is not ended not_possible in code (it may ask what was known of it)
                (settings.workspace / "tick.txt").unlink()
                rid = session.submit("What did tick.txt say?")
                spec = rec.wait_for(lambda: [m for m in rec.of("TaskSpec") if m.task_id == rid],
                                    60, "the TaskSpec of the recall goal")[0]
                assert "file tick.txt" in spec.world
                assert [(r.text, r.status) for r in spec.referents] == [("tick.txt", "recalled")]
                final = session.follow(rid, 180)
                assert final is not None and final.status != "not_possible", final
            finally:
                session.close()
                watcher.stop()

            # kill -9 of the whole tree (supervisord and every role): the world comes back with
            # everything it had, after `artoo up`
            procs = daemon.our_processes(settings)
            assert procs
            for p in procs:
                try:
                    p.kill()
                except psutil.NoSuchProcess:
                    pass
            psutil.wait_procs(procs, timeout=20)
            daemon.up(settings, timeout_s=120)
            ls = {g["id"]: g["status"] for g in json.loads(cli("goals", "ls", "--json"))}
            assert ls[proposal.goal_id] == "ACTIVE" and ls[other.goal_id] == "REJECTED"
            assert ls[reactive[0].goal_id] in ("COMPLETED", "FAILED")
            ents = json.loads(cli("world", "entities", "--json"))
            assert "file:tick.txt" in {e["id"] for e in ents}


def _run(session: RunSession, text: str, times: int) -> list[str]:
    ids = []
    for _ in range(times):
        ids.append(session.submit(text))
        final = session.follow(ids[-1], 60)
        assert final is not None and final.directive == "accept", getattr(final, "summary", "")
    return ids


def _world_note(settings, task: str) -> str:
    """What the perceiver's task log says of the world's projection (for a failure's message)."""
    log = tasklog.log_path(settings.tasks_dir, task)
    lines = log.read_text().splitlines() if log.exists() else []
    return "\n".join(line for line in lines if '"world"' in line) or f"no world entry in {log}"


def _quiet_console():
    from rich.console import Console
    return Console(file=open("/dev/null", "w"))
