"""The spawner process: offer/claim/assign, the concurrency cap, TaskCancel, and no orphan effector
(or tool process) after the spawner is SIGKILLed — while another spawner takes the re-offered
subtask. Real spawner processes, real forked effectors, real bus, scripted LLM over HTTP."""
from __future__ import annotations

import os
import signal
import threading
import time

import psutil
import pytest

import replies_effector as R
from effector_harness import EffectorHarness
from protocol.messages import TaskCancel

MARKER_ENV = "ARTOO_EFFECTOR_SPAWNER"


@pytest.fixture(scope="module")
def h():
    harness = EffectorHarness()
    harness.release = threading.Event()
    # Executor requests with no scripted reply block until a test releases them.
    harness.llm.on("executor", lambda req: (harness.release.wait(60), R.result("late"))[1])
    try:
        harness.default = harness.start_spawner()      # shared by the tests that do not kill it
        yield harness
    finally:
        harness.release.set()
        harness.close()


def spawner_info(h, node: str) -> dict:
    return h.seen.wait("Heartbeat", lambda m: m.node == node)[-1].info


def processes_with(pred) -> list[psutil.Process]:
    found = []
    for proc in psutil.process_iter(["pid", "cmdline"]):
        try:
            if pred(proc):
                found.append(proc)
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            continue
    return found


def wait_for(value, timeout: float = 20.0):
    """The first truthy `value()`, polled until `timeout`."""
    deadline = time.monotonic() + timeout
    while not (found := value()):
        if time.monotonic() > deadline:
            raise TimeoutError("condition not met")
        time.sleep(0.05)
    return found


def wait_for_process(pred, timeout: float = 20.0) -> psutil.Process:
    return wait_for(lambda: processes_with(pred), timeout)[0]


def tool_process(subtask_id: str, word: str):
    def pred(proc):
        return word in (proc.info["cmdline"] or []) and \
            proc.environ().get("ARTOO_EFFECTOR_SUBTASK") == subtask_id
    return pred


def test_concurrency_cap_and_queueing(h):
    node = h.start_spawner({"ARTOO_MAX_CONCURRENT_EFFECTORS": "1"})
    try:
        h.release.clear()
        first = h.subtask("first", ["done"])              # blocks in its first LLM call
        h.place(first, spawner=node)
        started = h.seen.wait("EffectorStarted", lambda m: m.subtask_id == first.subtask_id)[0]
        assert started.spawner == node and started.spawn_ms > 0
        second = h.subtask("second", ["done"])
        h.llm.add("executor", R.shell("echo two"), task=second.parent_task_id)
        h.llm.add("executor", R.result("two"), task=second.parent_task_id)
        h.llm.add("agentval", R.all_met("done"), task=second.parent_task_id)
        with pytest.raises(TimeoutError):                  # no free slot: no claim
            h.place(second, spawner=node, timeout=1.5)
        assert spawner_info(h, node)["cap"] == 1
        h.release.set()                                    # the first finishes (not matched)
        h.outcome(first, timeout=30)
        h.place(second, spawner=node)
        assert h.outcome(second).status == "matched"
        assert h.exited(second).reason == "completed"
    finally:
        h.stop_spawner(node)


def test_task_cancel_kills_the_effector(h):
    try:
        h.release.clear()
        st = h.subtask("cancel me", ["done"])
        h.llm.add("executor", R.shell("sleep 45; echo never"), task=st.parent_task_id)
        h.place(st, spawner=h.default)
        started = h.seen.wait("EffectorStarted", lambda m: m.subtask_id == st.subtask_id)[0]
        sleeper = wait_for_process(tool_process(st.subtask_id, "45"))
        h.user.publish(TaskCancel(task_id=st.parent_task_id))
        exited = h.exited(st)
        assert exited.reason == "cancelled" and exited.pid == started.pid
        gone, alive = psutil.wait_procs([sleeper], timeout=10)
        assert not alive and not alive_pid(started.pid)
    finally:
        h.release.set()


def test_sigkill_of_the_spawner_leaves_nothing_and_another_spawner_takes_over(h):
    a = h.start_spawner()
    b = h.default
    try:
        h.release.clear()
        st = h.subtask("survive a crash", ["done"])
        h.llm.add("executor", R.shell("sleep 40; echo never"), task=st.parent_task_id)
        h.place(st, spawner=a)
        started = h.seen.wait("EffectorStarted", lambda m: m.subtask_id == st.subtask_id)[0]
        assert started.spawner == a
        sleeper = wait_for_process(tool_process(st.subtask_id, "40"))
        zygote = psutil.Process(spawner_info(h, a)["zygote_pid"])
        effector = psutil.Process(started.pid)
        spawner = h.spawners.pop(a)
        marker = sleeper.environ()[MARKER_ENV]
        os.kill(spawner.pid, signal.SIGKILL)
        spawner.wait(10)
        gone, alive = psutil.wait_procs([effector, zygote, sleeper], timeout=10)
        assert not alive, [(p.pid, p.cmdline()) for p in alive]
        deadline = time.monotonic() + 10
        while True:           # killed processes may take a moment to leave the process table
            left = processes_with(lambda p: p.environ().get(MARKER_ENV) == marker)
            if not left or time.monotonic() > deadline:
                break
            time.sleep(0.05)
        assert not left, [(p.pid, p.info["cmdline"]) for p in left]
        # the dispatcher re-offers; the other spawner takes it and runs it to an outcome
        h.llm.add("executor", R.shell("echo again"), task=st.parent_task_id)
        h.llm.add("executor", R.result("again"), task=st.parent_task_id)
        h.llm.add("agentval", R.all_met("done"), task=st.parent_task_id)
        assert h.place(st) == b
        outcome = h.outcome(st)
        assert outcome.status == "matched"
        assert h.exited(st).spawner == b
    finally:
        h.release.set()
        if a in h.spawners:
            h.stop_spawner(a)


@pytest.mark.parametrize("sandbox", ["off", "on"])
def test_a_restarted_spawner_sweeps_what_a_killed_process_group_left(h, sandbox):
    a = h.start_spawner(extra_env={"ARTOO_SANDBOX": sandbox})
    try:
        h.release.clear()
        st = h.subtask("orphan maker", ["done"])
        h.llm.add("executor", R.shell("sleep 35; echo never"), task=st.parent_task_id)
        h.place(st, spawner=a)
        sleeper = wait_for_process(tool_process(st.subtask_id, "35"))
        spawner = h.spawners.pop(a)
        os.killpg(spawner.pid, signal.SIGKILL)         # spawner and zygote at once
        spawner.wait(10)
        if sandbox == "on":                            # it dies with its namespace at once
            gone, alive = psutil.wait_procs([sleeper], timeout=10)
            assert not alive
            return
        assert sleeper.is_running()                    # its parent bash died; it did not
        c = h.start_spawner()                          # what supervisord would do
        gone, alive = psutil.wait_procs([sleeper], timeout=10)
        assert not alive
        h.stop_spawner(c)
    finally:
        h.release.set()


def test_the_zygote_runs_this_checkouts_code(h):
    """`-m services.roles.spawner` resolves from the zygote's working directory: the checkout
    the spawner runs from, not whatever copy of artoo is installed elsewhere."""
    zygote = psutil.Process(spawner_info(h, h.default)["zygote_pid"])
    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    assert zygote.cwd() == repo
    assert os.path.isfile(os.path.join(zygote.cwd(), "services", "roles", "spawner.py"))


def scripted(h, st, word: str) -> None:
    h.llm.add("executor", R.shell(f"echo {word}"), task=st.parent_task_id)
    h.llm.add("executor", R.result(word), task=st.parent_task_id)
    h.llm.add("agentval", R.all_met("done"), task=st.parent_task_id)


def test_each_effector_is_forked_and_on_the_bus_before_its_subtask(h):
    """The spare: the zygote forks the next effector ahead of its subtask, and it connects to the
    bus while it waits (its handshake probe is seen), so the process that runs a subtask was
    there before the subtask was offered; one killed while it waits is replaced by a fork on
    request. Every one of them goes with the spawner."""
    node = h.start_spawner()
    zygote = psutil.Process(spawner_info(h, node)["zygote_pid"])

    def waiting_effector(exclude=()):
        return wait_for_process(lambda p: p.ppid() == zygote.pid and p.pid not in exclude)

    spare = waiting_effector()
    h.seen.wait("Hello", lambda m: m.node.startswith(f"effector-{spare.pid}-"))
    # ... and readies its first model call: its own connection, opened with GET /models
    opened = wait_for(lambda: {peer for path, peer in h.llm.gets if path.endswith("/models")} &
                      {tuple(c.laddr) for c in spare.net_connections("tcp")})
    st = h.subtask("run by the spare", ["done"])
    scripted(h, st, "spare")
    h.place(st, spawner=node)
    started = h.seen.wait("EffectorStarted", lambda m: m.subtask_id == st.subtask_id)[0]
    assert started.pid == spare.pid
    assert h.outcome(st).status == "matched"
    first = h.llm.filter(role="executor", task=st.parent_task_id)[0]
    assert first.peer in opened                   # the subtask's first call: that connection
    following = waiting_effector(exclude=(spare.pid,))
    following.kill()
    psutil.wait_procs([following], timeout=10)           # gone, and reaped by the zygote
    again = h.subtask("forked on request", ["done"])
    scripted(h, again, "again")
    h.place(again, spawner=node)
    assert h.outcome(again).status == "matched"
    started = h.seen.wait("EffectorStarted", lambda m: m.subtask_id == again.subtask_id)[0]
    assert started.pid not in (spare.pid, following.pid)
    last = waiting_effector(exclude=(spare.pid, following.pid, started.pid))
    h.stop_spawner(node)
    gone, alive = psutil.wait_procs([zygote, last], timeout=10)
    assert not alive


def test_a_dead_zygote_is_reported_and_restarted(h):
    node = h.default
    try:
        h.release.clear()
        st = h.subtask("zygote victim", ["done"])
        h.place(st, spawner=node)
        started = h.seen.wait("EffectorStarted", lambda m: m.subtask_id == st.subtask_id)[0]
        zygote = spawner_info(h, node)["zygote_pid"]
        os.kill(zygote, signal.SIGKILL)
        exited = h.exited(st)
        assert exited.reason == "crashed" and exited.pid == started.pid
        assert not alive_pid(started.pid)
        h.seen.wait("Heartbeat", lambda m: m.node == node and m.info.get("zygote_pid") not in
                    (None, zygote), timeout=60)
        again = h.subtask("after the restart", ["done"])
        h.llm.add("executor", R.shell("echo back"), task=again.parent_task_id)
        h.llm.add("executor", R.result("back"), task=again.parent_task_id)
        h.llm.add("agentval", R.all_met("done"), task=again.parent_task_id)
        h.place(again, spawner=node)
        assert h.outcome(again).status == "matched"
    finally:
        h.release.set()


def alive_pid(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def test_a_process_whose_parent_is_gone_is_swept_while_its_spawner_lives(tmp_path):
    """A sandbox's first process whose starter was killed while bubblewrap set it up waits on
    that setup for ever, reparented to init (seen after a test run: an `artoo-sandbox` bwrap
    blocked on its eventfd). The spawner's sweep — at start, every SWEEP_EVERY_S and at its
    close — kills a process of its data dir whose parent is neither the spawner nor one of its
    processes, and leaves its children alone. Here this test process is the live spawner."""
    import subprocess
    from services.roles.spawner import MARKER_ENV, _process_marker, sweep_orphans
    home = str(tmp_path)
    env = dict(os.environ, **{MARKER_ENV: _process_marker(os.getpid(), home)})
    kept = subprocess.Popen(["sleep", "300"], env=env)
    starter = subprocess.Popen(["sh", "-c", "sleep 300 & echo $!"], env=env,
                               stdout=subprocess.PIPE, text=True)
    orphan = psutil.Process(int(starter.stdout.readline()))
    starter.wait(10)
    starter.stdout.close()
    try:
        assert orphan.ppid() != starter.pid           # its parent is gone: reparented
        swept = sweep_orphans(home)
        assert swept == [orphan.pid], swept
        orphan.wait(10)
        assert kept.poll() is None                     # the spawner's own child stays
        assert sweep_orphans(str(tmp_path / "other")) == []   # another data dir's: not ours
    finally:
        kept.kill()
        kept.wait(10)
        if orphan.is_running():
            orphan.kill()
