"""Partitioning by task when instances of a role die (issue 18, "more than one machine").

* the pure ownership function: rendezvous hashing over the live instances (only a dead instance's
  tasks move; one owner per task whenever the instances agree on who is alive);
* membership from heartbeats (a fresh process does not grab every task; a silent peer goes);
* DEFER on a real bus: a work message a handler declines is re-delivered, not lost;
* the takeover registry (services/runtime/takeover.py) with a stand-in client;
* real processes: three planners and three GGS instances on one bus with the scripted LLM;
  instances 1 (state on this machine) and 2 (state elsewhere) of both are SIGKILLed and kept down.
  Goals hashed to them still complete, each with exactly one FinalResult; the goals they held are
  resumed (1) or ended honestly (2), long before their deadline.
"""
from __future__ import annotations

import os
import signal
import threading
import time
from collections import Counter
from contextlib import contextmanager
from types import SimpleNamespace

import pytest

from audit_support import wait_until
from conftest import start_process
from pipeline_harness import FakeSpawner, Recorder, pipeline_stack, run_id
from protocol.bus import DEFER, BusClient
from protocol.bus.membership import Membership
from protocol.envelope import owner, ranking
from protocol.messages import RunOptions, TaskSpec, UserRequest
from replies_pipeline import accept, perception, plan, subtask
from services.runtime import tasklog
from services.runtime.takeover import Takeover

TASKS = [f"run-{i:05d}" for i in range(3000)]


# ---------------------------------------------------------------------------------------------
# the ownership function (pure)
# ---------------------------------------------------------------------------------------------

def test_everyone_alive_is_the_static_assignment_and_n1_is_instance_0():
    for task in TASKS[:200]:
        assert owner(task, 1) == 0 and owner(task, 1, alive=()) == 0
        assert owner(task, 4) == owner(task, 4, alive={0, 1, 2, 3}) == ranking(task, 4)[0]
        assert sorted(ranking(task, 4)) == [0, 1, 2, 3]


@pytest.mark.parametrize("n", [2, 3, 5])
def test_when_an_instance_dies_only_its_tasks_move_and_they_spread(n):
    everyone = set(range(n))
    for dead in range(n):
        alive = everyone - {dead}
        moved_to: Counter[int] = Counter()
        for task in TASKS:
            before, after = owner(task, n), owner(task, n, alive)
            assert after in alive
            if before != dead:
                assert after == before            # the live instances keep their tasks
            else:
                moved_to[after] += 1
        assert set(moved_to) == alive, moved_to    # the dead one's tasks spread over the rest
        # and when it comes back, they return to it
        assert all(owner(t, n, everyone) == owner(t, n) for t in TASKS[:300])


def test_instances_that_agree_on_membership_never_both_own_a_task():
    n = 4
    for alive in ({0, 1, 2, 3}, {0, 2, 3}, {1}, {0, 3}):
        for task in TASKS[:1000]:
            owners = [i for i in alive if owner(task, n, alive) == i]
            assert len(owners) == 1
    assert owner("t", 3, alive=()) == ranking("t", 3)[0]   # nobody alive: still an instance


# ---------------------------------------------------------------------------------------------
# membership from heartbeats
# ---------------------------------------------------------------------------------------------

def beat(instance: int, role: str = "ggs", node: str = ""):
    return SimpleNamespace(role=role, instance=instance, node=node or f"{role}-{instance}-x",
                           host="h")


def test_membership_grace_then_heartbeats_decide():
    m = Membership("ggs", 0, 3, "ggs-0-me", missing_after_s=3.0)
    assert m.alive() == {0, 1, 2}                  # not listening yet: everyone counts as alive
    m.started = t0 = time.monotonic()              # the bus client is ready
    assert m.alive(t0 + 1) == {0, 1, 2}            # young: peers not heard yet count as alive
    m.on_heartbeat(None, beat(1))
    m.on_heartbeat(None, beat(2, role="planner"))  # another role's beats do not count
    m.on_heartbeat(None, beat(7))                  # out of range: ignored, reported
    m.on_heartbeat(None, beat(0, node="ggs-0-me"))  # our own beat
    assert set(m.seen) == {1}
    m.seen[1] = t0 + 1.0                           # (as if heard a second after our start)
    assert m.alive(t0 + 3.5) == {0, 1}             # 2 never heard after the grace: missing
    assert m.alive(t0 + 4.5) == {0}                # 1 silent too long; we are always alive
    m.on_heartbeat(None, beat(2))
    assert 2 in m.alive()
    wrong = beat(1, node="ggs-1-other-host")
    wrong.info = {"instances": 4}                  # a host given another --instances TOTAL
    m.on_heartbeat(None, wrong)
    assert m.misconfigured == {"ggs-1-other-host", "ggs-7-x"}   # (7 is out of range too)
    assert m.check() == (frozenset(), frozenset())  # first check: the baseline


def test_a_task_owned_only_because_a_peer_just_went_missing_is_fenced():
    m = Membership("planner", 1, 2, "planner-1-me", missing_after_s=3.0, fence_s=7.0)
    m.started = time.monotonic() - 10
    theirs = next(t for t in TASKS if ranking(t, 2)[0] == 0)
    mine = next(t for t in TASKS if ranking(t, 2)[0] == 1)
    assert not m.fenced(theirs, time.time())       # instance 0 never heard: gone, no fence
    m.on_heartbeat(None, beat(0, role="planner"))
    m.seen[0] -= 4                                 # heard 4 s ago: missing, but recently
    assert m.owner(theirs) == 1
    assert m.fenced_by(theirs, time.time()) == 0   # a fresh message: maybe 0 is only slow
    assert not m.fenced(theirs, time.time() - 8)   # waiting longer than the fence: ours
    assert not m.fenced(mine, time.time())         # ranked first here anyway
    m.seen[0] -= 7.0                               # missing for longer than the fence: dead
    assert not m.fenced(theirs, time.time())


# ---------------------------------------------------------------------------------------------
# DEFER on a real bus: the declined copy comes back
# ---------------------------------------------------------------------------------------------

def test_a_deferred_work_message_is_redelivered_and_then_acknowledged(settings, bus_process,
                                                                      monkeypatch):
    monkeypatch.setenv("ARTOO_ACK_MAX_BACKOFF_S", "0.5")
    calls: list[str] = []
    acked = threading.Event()

    def handler(env, msg):
        calls.append(env.id)
        return DEFER if len(calls) == 1 else None

    ggs = BusClient("ggs", settings=settings, heartbeat=False)
    ggs.on("TaskSpec", handler, ack=True)
    ggs.start()
    perceiver = BusClient("perceiver", settings=settings, heartbeat=False)
    perceiver.start()
    try:
        now = time.time()
        perceiver.send(TaskSpec(task_id="t-defer", intent_slug="x", intent="x", raw_input="x",
                                created_at=now, deadline_at=now + 60), consumers=("ggs",),
                       on_done=lambda ok: ok and acked.set())
        assert acked.wait(15), calls
        assert len(calls) == 2 and calls[0] == calls[1]   # the same message, handled afresh
        assert ggs.stats()["deferred"] == 1 and not ggs.busy
    finally:
        perceiver.stop()
        ggs.stop()


# ---------------------------------------------------------------------------------------------
# the takeover registry with a stand-in client
# ---------------------------------------------------------------------------------------------

class FakeClient:
    def __init__(self, instance: int = 0, instances: int = 2):
        self.instance, self.instances, self.node, self.role = instance, instances, "me", "planner"
        self.owned: set[str] = set()
        self.busy: Counter = Counter()
        self.membership = SimpleNamespace(where={1: "planner-1-9@w1"}, alive=lambda: {0},
                                          fenced_by=lambda task, ts: None)

    def owns(self, task):
        return task in self.owned

    def owner_of(self, task):
        return self.instance if task in self.owned else 1


def test_takeover_waits_for_redelivery_then_ends_only_orphans(settings):
    c = FakeClient()
    held: set[str] = set()
    taken: list[str] = []
    released: list[str] = []
    t = Takeover(c, settings, begins=(), ends=(), holds=lambda x: x in held,
                 take_over=lambda b: taken.append(b.task_id), held=lambda: list(held),
                 release=lambda x: (released.append(x), held.discard(x)))
    t.settle_s = t.redelivered_by_s = 0.05
    spec = lambda task: SimpleNamespace(task_id=task, deadline_at=time.time() + 60)  # noqa: E731
    env = SimpleNamespace(ts=time.time())
    for task in ("orphan", "redelivered", "busy", "other"):
        t._begin(env, spec(task))                   # each began at instance 1
    t._begin(env, spec("ended"))
    t._end(env, spec("ended"))
    assert t.defer("orphan") and not t.defer("ended") and t.registry["orphan"].holder == 1
    c.owned |= {"orphan", "redelivered", "busy"}    # instance 1 went missing
    t.tick()                                        # orphaned from now on
    t._begin(env, spec("redelivered"))              # its TaskSpec was re-sent: ours now
    c.busy["busy"] = 1                              # a message of it is being handled here
    time.sleep(0.1)                                 # (the settle time of this stand-in)
    t.tick()
    assert taken == ["orphan"] and "orphan" not in t.registry
    assert not t.defer("redelivered") and t.defer("other")
    # instance 1 comes back: what it ranks first moves back and is released here
    held.add("redelivered")
    c.owned.discard("redelivered")
    t.tick()
    assert released == ["redelivered"] and t.defer("redelivered")


# ---------------------------------------------------------------------------------------------
# real processes: instance 1 of planner and GGS killed and kept down
# ---------------------------------------------------------------------------------------------

FAST = {"ARTOO_HEARTBEAT_INTERVAL_S": "0.5", "ARTOO_MISSING_AFTER_S": "2",
        "ARTOO_ACK_MAX_BACKOFF_S": "1", "ARTOO_OFFER_INTERVAL_S": "0.3",
        "ARTOO_GGS_WATCHDOG_INTERVAL_S": "0.2", "ARTOO_EFFECTOR_EXIT_GRACE_S": "0.5"}
DEADLINE_S = 600.0    # far: a task that ends here ended by takeover, not by its deadline
WAIT = 60.0


def wait_instances(stack, want: set[tuple[str, int]], timeout: float = 40.0) -> dict:
    """Block until a heartbeat from each (role, instance) arrives; returns their pids."""
    pids: dict[tuple[str, int], int] = {}
    done = threading.Event()

    def on_beat(env, hb):
        if (hb.role, hb.instance) in want:
            pids[(hb.role, hb.instance)] = hb.pid
            if set(pids) == want:
                done.set()
    listen_heartbeats(stack, on_beat, done, timeout,
                      lambda: f"heard only {sorted(pids)} of {sorted(want)}")
    return pids


def listen_heartbeats(stack, on_beat, done: threading.Event, timeout: float, failure,
                      task: str | None = None) -> None:
    """Feed heartbeats to on_beat until it sets done; failure() says what was missing."""
    probe = BusClient("user", settings=stack.settings, heartbeat=False)
    probe.on("Heartbeat", on_beat, **({"task": task} if task else {}))
    probe.start()
    try:
        assert done.wait(timeout), failure()
    finally:
        probe.stop()


def test_goals_hashed_to_dead_instances_complete_and_their_goals_are_taken_over():
    """Three instances of the planner and of GGS. Instance 1 shares the data dir with instance 0
    (two instances on one host); instance 2 has its own (as on another host: its state files are
    out of reach once it dies). Both are SIGKILLed and kept down while each holds a goal. New goals
    hashed to them complete on instance 0; the goal instance 1 held is resumed from its state files
    and accepted; the goal instance 2 held ends as an honest abandon — both long before their
    deadline, and every goal has exactly one FinalResult."""
    with pipeline_stack(["perceiver", "metaval"], FAST) as stack, logs_on_failure(stack):
        (stack.root / "hostb").mkdir()
        elsewhere = {"ARTOO_HOME": str(stack.root / "hostb"),     # same bus (run dir) and key
                     "ARTOO_RUN_DIR": str(stack.settings.run_dir),
                     "ARTOO_BUS_KEY_FILE": str(stack.settings.bus_key_file)}
        for role in ("planner", "ggs"):
            for i in (0, 1, 2):
                stack.procs[f"{role}{i}"] = start_process(
                    ["-m", f"services.roles.{role}"],
                    {"ARTOO_INSTANCE": str(i), "ARTOO_INSTANCES": "3",
                     **(elsewhere if i == 2 else {})}, f"{role}{i}")
        wait_instances(stack, {(r, i) for r in ("planner", "ggs") for i in (0, 1, 2)})

        holds: dict[str, threading.Event] = {}
        stack.llm.on("perceiver", lambda req: perception(f"append to {req.task}"))
        stack.llm.on("planner", lambda req: plan(subtask("append a line", ["a line appended"])))
        stack.llm.on("metaval", lambda req: accept("appended", merged_output="appended"))
        spawner = FakeSpawner(stack)

        def run(st):
            ev = holds.get(st.parent_task_id)
            if ev is not None:
                ev.wait(WAIT)
            return "matched", f"appended for {st.parent_task_id}"
        spawner.run = run
        user = Recorder()
        user_client = stack.client("user", lambda c: c.on("FinalResult", user, ack=True))

        def rid_for(instance: int) -> str:
            while True:
                rid = run_id("pt")
                if owner(rid, 3) == instance:
                    return rid

        def submit(rid: str) -> None:
            user_client.send(UserRequest(task_id=rid, text=f"append to {rid}",
                                         options=RunOptions(deadline_s=DEADLINE_S)))

        # a goal in flight on each instance: its effector holds on
        kept, resumed, ended = rid_for(0), rid_for(1), rid_for(2)
        for rid in (kept, resumed, ended):
            holds[rid] = threading.Event()
            submit(rid)
        spawner.rec.wait_for(lambda: {a.task_id for a in spawner.rec.of("SubTaskAssign")}
                             >= {kept, resumed, ended}, WAIT, "every goal on an effector")
        # every TaskSpec acknowledged (by planner and GGS), every manifest and assignment too:
        # instances 1 and 2 hold their goals (unacknowledged, they would just be re-delivered)
        wait_beat(stack, "perceiver", lambda hb: hb.unacked == 0)
        for i in (1, 2):
            wait_beat(stack, "planner", lambda hb: hb.instance == i and hb.unacked == 0)

        # instances 1 and 2 of the planner and of GGS: SIGKILL, kept down
        for name in ("planner1", "ggs1", "planner2", "ggs2"):
            proc = stack.procs.pop(name)
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)

        # new goals hashed to the dead instances are served by the live one
        fresh = [rid_for(1), rid_for(2)]
        for rid in fresh:
            submit(rid)
        # instance 0 takes the held goals over, then the effectors finish: GGS both (its heartbeat
        # says so), the planner at least the resumed one (the ended one may end first)
        def kinds(rid: str) -> list[str]:
            return [e["kind"] for e in tasklog.read(stack.settings.tasks_dir, rid)]
        wait_beat(stack, "ggs", lambda hb: hb.instance == 0 and hb.info.get("taken_over") == 2)
        wait_until(lambda: "planner_resumed" in kinds(resumed), WAIT, "the plan resumed")
        for ev in holds.values():
            ev.set()

        def finals(rid: str) -> list:
            return [(e, m) for e, m in user.items if e.type == "FinalResult" and e.task == rid]

        for rid in fresh + [kept, resumed]:
            user.wait_for(lambda: finals(rid), WAIT, f"the FinalResult of {rid}")
            env, final = finals(rid)[0]
            assert final.directive == "accept", (rid, final.summary)
            assert env.node.startswith("ggs-0-"), env.node
        assert "ggs_resumed" in kinds(resumed), kinds(resumed)
        user.wait_for(lambda: finals(ended), WAIT, f"the FinalResult of {ended}")
        env, lost = finals(ended)[0]
        assert env.node.startswith("ggs-0-"), env.node
        assert lost.directive == "abandon" and lost.status == "abandoned"
        assert "instance 2" in lost.summary and "stopped heartbeating" in lost.summary, lost.summary

        # every FinalResult the survivor sent has been acknowledged: none is still on its way
        wait_beat(stack, "ggs", lambda hb: hb.info.get("final_results") == 5 and hb.unacked == 0)
        for rid in fresh + [kept, resumed, ended]:
            assert len({e.id for e, _ in finals(rid)}) == 1, rid   # exactly one each


@contextmanager
def logs_on_failure(stack):
    """On a failed assertion, print the end of each role's log (the data dir goes afterwards)."""
    try:
        yield
    except AssertionError:
        for log in sorted(stack.root.glob("**/logs/*.log")):
            lines = log.read_text(errors="replace").splitlines()
            print(f"--- {log.relative_to(stack.root)}\n" + "\n".join(lines[-25:]))
        raise


def wait_beat(stack, role: str, pred) -> dict:
    """The first heartbeat of `role` that satisfies pred."""
    got: dict = {}
    done = threading.Event()

    def on_beat(env, hb):
        if not done.is_set() and hb.role == role and pred(hb):
            got.update(hb.model_dump())
            done.set()
    listen_heartbeats(stack, on_beat, done, WAIT, lambda: f"no such heartbeat from {role}",
                      task=role)
    return got
