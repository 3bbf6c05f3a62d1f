"""The real `world` process on a real bus proxy with its real LMDB file: it learns from the messages
a task sends, answers the projection, survives a restart and kill -9, refuses a second owner, and
loses nothing under concurrent writers."""
from __future__ import annotations

import os
import signal
import subprocess
import threading
import time

import pytest
from conftest import start_process, stop_process

from protocol.messages import (FinalResult, RunOptions, SubTaskOutcome, TaskSpec, ToolCallRecord,
                               UserRequest, WorldQuery)

WAIT = 20.0


class World:
    def __init__(self, settings, bus_clients):
        self.settings = settings
        self.cond = threading.Condition()
        self.pids: set[int] = set()
        self.procs: list[subprocess.Popen] = []

        def beat(env, msg):
            if msg.role == "world":
                with self.cond:
                    self.pids.add(msg.pid)
                    self.cond.notify_all()

        self.user = bus_clients("user", setup=lambda c: c.on("Heartbeat", beat))
        self.perceiver = bus_clients("perceiver")
        self.agentval = bus_clients("agentval")
        self.ggs = bus_clients("ggs")

    def start(self, env: dict | None = None) -> subprocess.Popen:
        proc = start_process(["-m", "world_server.server"], env or {}, "world")
        self.procs.append(proc)
        with self.cond:
            ok = self.cond.wait_for(lambda: proc.pid in self.pids or proc.poll() is not None, WAIT)
        assert ok and proc.poll() is None, "world process did not come up"
        return proc

    def stop(self) -> None:
        for proc in self.procs:
            stop_process(proc, timeout=10)

    def query(self, **fields):
        _, res = self.user.request(WorldQuery(**fields), to="world", timeout=WAIT)
        assert res.ok, res.error
        return res

    def until(self, check, what: str):
        """Poll a query until `check(result)` holds (the world handles observations in order,
        queries on other threads): bounded by WAIT."""
        deadline = time.monotonic() + WAIT
        while True:
            res = self.query(op="stats")
            if check(res.stats):
                return res.stats
            assert time.monotonic() < deadline, f"timed out waiting for {what}: {res.stats}"
            time.sleep(0.05)

    def task(self, task: str, text: str, calls: list[ToolCallRecord], status="verified",
             answer="", session="") -> None:
        ws = str(self.settings.workspace)
        # one sender after the other, each seen before the next (in a real task each message is
        # caused by the one before; four test clients would race)
        for client, msg in (
                (self.user, UserRequest(task_id=task, text=text, session_id=session,
                                        options=RunOptions(workspace=ws))),
                (self.perceiver, TaskSpec(task_id=task, intent_slug="s-" + task, intent=text,
                                          raw_input=text, options=RunOptions(workspace=ws))),
                (self.agentval, SubTaskOutcome(task_id=task, subtask_id="st1",
                                               parent_task_id=task, status="matched",
                                               tool_calls=calls)),
                (self.ggs, FinalResult(task_id=task, directive="accept", summary="done",
                                       status=status, verified=status == "verified",
                                       answer=answer))):
            seen = self.query(op="stats").stats["service"]["observed"]
            client.publish(msg)
            self.until(lambda s, n=seen: s["service"]["observed"] > n, type(msg).__name__)


@pytest.fixture
def world(settings, bus_process, bus_clients):
    harness = World(settings, bus_clients)
    yield harness
    harness.stop()


def _ended(stats: dict, n: int) -> bool:
    return stats.get("episodes", 0) >= n and stats["service"]["observed"] >= 4 * n


def test_learns_a_task_survives_restart_and_kill9_and_refuses_a_second_owner(world, settings):
    proc = world.start()
    (settings.workspace / "report.md").write_text("# Q3 report\n")
    world.task("t1", "write the Q3 report to report.md",
               [ToolCallRecord(tool="write_file", arguments={"path": "report.md"},
                               target="report.md")], answer="wrote report.md")
    world.until(lambda s: _ended(s, 1) and s["facts"] >= 2, "the first task")
    text = world.query(op="project", text="open the report you wrote yesterday").text
    assert "report.md exists in the workspace" in text and "wrote report.md" in text

    second = start_process(["-m", "world_server.server"], {}, "world-2")
    assert second.wait(WAIT) == 1                    # one owner: the second refuses to start

    stop_process(proc, timeout=10)                   # clean restart
    world.start()
    assert "report.md" in world.query(op="project", text="the report").text

    proc = world.procs[-1]
    world.task("t2", "My name is Ada", [])
    os.killpg(proc.pid, signal.SIGKILL)              # kill -9 of the process group
    proc.wait(WAIT)
    world.start()
    facts = world.query(op="facts").facts
    assert {"Ada", "sha256"} <= {f["object"].split(":")[0] for f in facts}
    assert world.query(op="show", entity="report.md").entities[0]["mentions"] >= 1


def test_concurrent_writers_lose_nothing(world, settings, bus_clients):
    world.start()
    writers, per = 4, 25
    clients = [bus_clients("user") for _ in range(writers)]

    def burst(i, client):
        for j in range(per):
            client.publish(UserRequest(task_id=f"w{i}-{j}", text=f"update shared.txt, item {j}"))

    threads = [threading.Thread(target=burst, args=(i, c)) for i, c in enumerate(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(WAIT)
    world.until(lambda s: s.get("episodes", 0) >= writers * per, "every episode")
    ent = world.query(op="show", entity="file:shared.txt").entities[0]
    assert ent["mentions"] == writers * per
    assert world.query(op="stats").stats["service"]["errors"] == 0


@pytest.fixture
def tapped(settings, bus_clients):
    """A bus with capture on and the tap writing the audit log (real processes), and the world
    harness on it (its process not started yet)."""
    from audit_support import capture_stats, wait_until
    from conftest import wait_bus_ready
    procs: list[subprocess.Popen] = []      # stopped whatever happens, start-up timeouts too
    harness = None
    try:
        procs.append(start_process(["-m", "services.runtime.bus"], {"ARTOO_CAPTURE": "1"}, "bus"))
        wait_bus_ready(settings)
        procs.append(start_process(["-m", "auditor.tap"], {}, "tap"))
        wait_until(lambda: capture_stats(settings)["tap_connected"], WAIT, "the tap to connect")
        harness = World(settings, bus_clients)
        yield harness
    finally:
        if harness is not None:
            harness.stop()
        for proc in reversed(procs):
            stop_process(proc, timeout=10)


def _publish_task(world: World, task: str, text: str, calls, answer: str) -> None:
    """A task's four messages with no world process to wait on (it is down): each one in the
    audit log before the next is sent, as in a real task, where each is caused by the one before
    (four test clients would otherwise race through the proxy)."""
    from audit_support import logged_envelopes, wait_until
    ws = str(world.settings.workspace)
    for client, msg in (
            (world.user, UserRequest(task_id=task, text=text, options=RunOptions(workspace=ws))),
            (world.perceiver, TaskSpec(task_id=task, intent_slug="s-" + task, intent=text,
                                       raw_input=text, options=RunOptions(workspace=ws))),
            (world.agentval, SubTaskOutcome(task_id=task, subtask_id="st1", parent_task_id=task,
                                            status="matched", tool_calls=calls)),
            (world.ggs, FinalResult(task_id=task, directive="accept", summary="done",
                                    status="verified", verified=True, answer=answer))):
        client.publish(msg)
        kind = type(msg).__name__
        wait_until(lambda: any(e.get("type") == kind and e.get("task") == task
                               for e in logged_envelopes(world.settings)), WAIT,
                   f"{kind} of {task} in the audit log")


def test_catches_up_from_the_audit_log_on_what_it_missed_while_down(tapped, settings):
    from audit_support import logged_envelopes
    world = tapped
    proc = world.start()
    (settings.workspace / "first.md").write_text("one\n")
    world.task("t1", "write first.md", [ToolCallRecord(tool="write_file",
                                                       arguments={"path": "first.md"},
                                                       target="first.md")], answer="wrote it")
    world.until(lambda s: _ended(s, 1), "the first task, live")
    os.killpg(proc.pid, signal.SIGKILL)              # kill -9: no position saved since start-up
    proc.wait(WAIT)

    # while the world is down a task runs: it writes a file and reads a setting
    (settings.workspace / "missed.txt").write_text("late\n")
    (settings.workspace / "svc.yaml").write_text("port: 9123\n")
    _publish_task(world, "t2", "write missed.txt and read svc.yaml", [
        ToolCallRecord(tool="write_file", arguments={"path": "missed.txt"}, target="missed.txt"),
        ToolCallRecord(tool="read_file", arguments={"path": "svc.yaml"}, target="svc.yaml",
                       output="port: 9123\n")], answer="the port is 9123")

    world.start()
    world.until(lambda s: s.get("episodes", 0) >= 2 and s["service"].get("replayed", 0) >= 4,
                "the missed task, replayed")
    missed = world.query(op="show", entity="file:missed.txt")
    assert missed.entities[0]["mentions"] == 1
    assert any(f["object"].startswith("sha256:") for f in missed.facts)
    assert {("port", "9123")} <= {(f["predicate"], f["object"]) for f in world.query(op="facts").facts}
    assert "missed.txt" in world.query(op="project", text="the file missed.txt").text
    # t1 was read back too (handled live, position not yet saved): counted once all the same
    assert world.query(op="show", entity="file:first.md").entities[0]["mentions"] == 1
    stats = world.query(op="stats").stats
    assert stats["service"]["errors"] == 0
    seq = stats["service"]["replay_seq"]
    assert seq >= max(e["_seq"] for e in logged_envelopes(settings) if e.get("task") == "t2")

    # a clean restart starts after the saved position: nothing is read again
    stop_process(world.procs[-1], timeout=10)
    world.start()
    stats = world.until(lambda s: s["service"].get("replay_passes", 0) >= 1, "a replay pass")
    assert stats["service"]["replayed"] == 0 and stats["service"]["replay_seq"] >= seq
    assert world.query(op="show", entity="file:missed.txt").entities[0]["mentions"] == 1


def test_a_replay_pass_skips_what_the_live_path_handled(tapped, settings):
    """The periodic catch-up reads back from the audit log what the world also saw live (its
    position is saved only now and then): those messages are not handled a second time."""
    from audit_support import logged_envelopes, wait_until
    world = tapped
    world.start({"ARTOO_WORLD_REPLAY_INTERVAL_S": "0.3"})
    (settings.workspace / "live.md").write_text("one\n")
    world.task("t-live", "write live.md", [ToolCallRecord(
        tool="write_file", arguments={"path": "live.md"}, target="live.md")], answer="wrote it")
    last = wait_until(lambda: max((e["_seq"] for e in logged_envelopes(settings)
                                   if e.get("task") == "t-live" and e.get("type") == "FinalResult"),
                                  default=None), WAIT, "the task's FinalResult in the audit log")
    stats = world.until(lambda s: s["service"].get("replay_seq", 0) >= last,
                        "a replay pass past the task")["service"]
    assert stats["replay_skipped"] >= 4 and stats["replayed"] == 0 and stats["errors"] == 0
    assert world.query(op="show", entity="file:live.md").entities[0]["mentions"] == 1


def test_a_failing_schedule_proposes_a_system_goal_and_accepting_it_pauses_the_schedule(
        world, settings):
    """SYSTEM goals (seed 002 Def. 4–6) from the runtime's own state, behind Law 1: three failed
    runs of a schedule in a row propose to pause it; nothing changes until `artoo goals accept`."""
    import json

    from click.testing import CliRunner

    from services.cli import main
    from services.runtime import schedules

    def cli(*args):
        out = CliRunner().invoke(main, list(args), catch_exceptions=False)
        assert out.exit_code == 0, out.output
        return out.output

    world.start()
    sched = schedules.new_schedule("check the backups", every="1h",
                                   workspace=str(settings.workspace))
    with schedules.ScheduleStore(settings.schedules_file).edit() as data:
        data["schedules"].append(sched)
    sid = sched["id"]
    for i in range(3):
        world.task(f"f{i}", "check the backups", [], status="abandoned",
                   session=f"schedule:{sid}")
    [goal] = json.loads(cli("goals", "ls", "--json"))
    assert (goal["type"], goal["status"]) == ("SYSTEM", "BLOCKED")
    assert goal["action"] == {"kind": "pause_schedule", "schedule_id": sid}
    assert not schedules.ScheduleStore(settings.schedules_file).read()["schedules"][0].get("paused")

    assert "paused" in cli("goals", "accept", goal["id"])
    [after] = schedules.ScheduleStore(settings.schedules_file).read()["schedules"]
    assert after["paused"] is True
    shown = json.loads(cli("goals", "show", goal["id"]))
    assert shown["status"] == "COMPLETED" and shown["link"] == {"schedule_id": sid}


def test_a_model_reads_facts_from_answers_off_the_task_path_bounded_and_under_law0(world):
    """Where code cannot (free text in an answer): a model call after the FinalResult, on the
    world's own thread (the episode is closed and its code facts are there while the call is still
    pending), at most world_extract_per_hour calls; a value becomes a fact only when a tool output
    shows it verbatim, otherwise a claim."""
    from scripted_llm import ScriptedLLM
    gate = threading.Event()
    reply = {"facts": [{"subject": "deploy target", "predicate": "host", "value": "build7.internal"},
                       {"subject": "release", "predicate": "name", "value": "falcon"}]}

    def responder(req):
        gate.wait(WAIT)                  # held until the test has looked at the world meanwhile
        return reply

    with ScriptedLLM() as llm:
        llm.on("world", responder)
        world.start({**llm.env(), "ARTOO_WORLD_EXTRACT_PER_HOUR": "2"})
        dump = ToolCallRecord(tool="shell", arguments={"command": "ssh-config-dump"},
                              target="ssh-config-dump",
                              output="Host build7 HostName build7.internal User ci\n")
        world.task("e1", "where do we deploy?", [dump],
                   answer="The deploy target is build7.internal; the release is called falcon.")
        deadline = time.monotonic() + WAIT
        while llm.calls("world") < 1:    # the call is made, and held
            assert time.monotonic() < deadline, "no model call for the answer"
            time.sleep(0.05)
        facts = world.query(op="facts", claims=True)
        assert any(f["subject"] == "task:e1" for f in facts.facts)      # code's, already there
        assert not [f for f in facts.facts + facts.claims if f["status"] == "model_extracted"]
        gate.set()
        stats = world.until(lambda s: s["service"].get("extract_facts", 0) >= 1, "extraction")
        assert stats["service"]["extract_claims"] == 1 and stats["service"]["errors"] == 0
        res = world.query(op="facts", claims=True)
        [fact] = [f for f in res.facts if f["status"] == "model_extracted"]
        assert (fact["subject"], fact["predicate"], fact["object"]) == \
            ("concept:deploy target", "host", "build7.internal")
        assert "shell output contains" in fact["episodes"][0]["evidence"]
        [claim] = [f for f in res.claims if f["status"] == "model_extracted"]
        assert claim["object"] == "falcon"                 # in no tool output: a claim (Law 0)
        shown = world.query(op="project", text="the release falcon").text
        assert "release name: falcon" not in shown           # a claim is never shown as a fact
        assert "deploy target host: build7.internal" in shown

        for t in ("e2", "e3"):                             # the bound: 2 calls an hour
            world.task(t, "what is the release called?", [], answer=f"It is called {t}x.")
        stats = world.until(lambda s: s["service"].get("extract_calls", 0)
                            + s["service"].get("extract_skipped", 0) >= 3, "the bound")
        assert stats["service"]["extract_calls"] == 2 and stats["service"]["extract_skipped"] == 1
        assert llm.calls("world") == 2
