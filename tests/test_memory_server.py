"""The real `memory` process on a real bus proxy with a real LMDB file: acknowledged writes, the
query API, the recall clock, the Dreamer (triggered by a FinalResult, its LLM a scripted
OpenAI-compatible server over real HTTP), SIGKILL during a write burst, the CLI, and the planner's
calibration reading what GGS wrote."""
from __future__ import annotations

import json
import math
import os
import queue
import signal
import subprocess
import sys
import threading
import time
import uuid

import pytest
from conftest import REPO, start_process, stop_process
from scripted_llm import ScriptedLLM

from memory_server import mkct
from services.runtime import mkct as tags
from memory_server.store import MemoryStore
from protocol.messages import (FinalResult, Megram, MemoryQuery, MemoryResult, MemoryWrite,
                               TaskSpec)
from services.runtime import tasklog
from services.roles.calibration import calibrate

WAIT = 20.0
DAY = mkct.SECONDS_PER_DAY
TAG = ("intent:count-files", "env:local")


class Memory:
    """Test-side roles around the memory process: GGS (writes, FinalResult), a user (queries)."""

    def __init__(self, settings, bus_clients):
        self.settings = settings
        self.events: queue.Queue = queue.Queue()
        self.cond = threading.Condition()
        self.heartbeat_pids: set[int] = set()
        self.procs: list[subprocess.Popen] = []

        def observe(env, msg):
            if env.type == "DreamerEvent":
                self.events.put(msg)
            elif env.type == "Heartbeat" and msg.role == "memory":
                with self.cond:
                    self.heartbeat_pids.add(msg.pid)
                    self.cond.notify_all()

        self.user = bus_clients("user", setup=lambda c: (c.on("DreamerEvent", observe),
                                                         c.on("Heartbeat", observe)))
        self.ggs = bus_clients("ggs")

    def start(self, env: dict | None = None) -> subprocess.Popen:
        full = {"ARTOO_DREAMER_INTERVAL_S": "3600", "ARTOO_DREAMER_AFTER_FINAL_S": "0.05"}
        full.update(env or {})
        proc = start_process(["-m", "memory_server.server"], full, "memory")
        self.procs.append(proc)
        with self.cond:   # ready = its heartbeat came through the proxy (no sleeps)
            ok = self.cond.wait_for(lambda: proc.pid in self.heartbeat_pids or
                                    proc.poll() is not None, WAIT)
        assert ok and proc.poll() is None, "memory process did not come up"
        return proc

    def stop(self) -> None:
        for proc in self.procs:
            stop_process(proc, timeout=15)

    def query(self, **fields) -> MemoryResult:
        _, res = self.user.request(MemoryQuery(**fields), to="memory", timeout=WAIT)
        return res

    def write(self, megrams: list[Megram]) -> None:
        done = threading.Event()
        self.ggs.send(MemoryWrite(task_id="t-" + uuid.uuid4().hex[:8], megrams=megrams),
                      on_done=lambda ok: done.set())
        assert done.wait(WAIT), "MemoryWrite was not acknowledged"

    def dream(self) -> object:
        """One Dreamer cycle, triggered the way production triggers it: a FinalResult."""
        self.ggs.publish(FinalResult(task_id="t-" + uuid.uuid4().hex[:8], directive="accept",
                                     summary="done"))
        event = self.events.get(timeout=WAIT)
        assert event.trigger == "final_result"
        return event


@pytest.fixture
def memory(settings, bus_process, bus_clients):
    harness = Memory(settings, bus_clients)
    yield harness
    harness.stop()


def mg(state="accept", *, tag=TAG, age_days=0.0, level="M", content=None, **kw) -> Megram:
    f, sigma, k = tags.QUANTIZATION.get(state, (1.0, 1.0, 0.0))
    values = dict(f=f, sigma=sigma, k=0.0 if level in "CT" else k,
                  created_at=time.time() - age_days * DAY)
    values.update(kw)
    return Megram(space=tag[0], entity=tag[1], state=state, level=level,
                  content=content or f"{state} {age_days}d", **values)


def test_dual_channel_query_over_the_bus_and_the_recall_clock(memory):
    memory.start()
    memory.write([mg(f=0.6, sigma=1, k=0, content="worked: ls -la"),
                  mg(f=0.4, sigma=-1, k=0, content="failed: ls /root")])
    res = memory.query(op="query_mk", space=TAG[0], entity=TAG[1])
    assert res.ok and (round(res.attention, 9), round(res.decision, 9)) == (1.0, 0.2)
    assert res.action == "Caution"
    assert [(m.content, m.live_attention) for m in res.megrams] == [("worked: ls -la", 0.6),
                                                                    ("failed: ls /root", 0.4)]
    # A C entry with k = 0.2 created 7 days ago: ≈ 0.22 until QueryC resets its clock, then ≈ 0.9.
    tag = ("intent:recall", "env:local")
    memory.write([mg(tag=tag, level="C", f=0.9, sigma=1, k=0.2, age_days=7, content="rule")])
    stale = memory.query(op="query_mk", space=tag[0], entity=tag[1])
    assert stale.attention == pytest.approx(0.9 * math.exp(-1.4), rel=1e-3)
    sops = memory.query(op="query_c", space=tag[0], entity=tag[1]).sops
    assert [s.content for s in sops] == ["rule"]
    fresh = memory.query(op="query_mk", space=tag[0], entity=tag[1])
    assert fresh.attention == pytest.approx(0.9, rel=1e-4)
    assert fresh.megrams[0].last_recalled_at == pytest.approx(time.time(), abs=30)
    # Bad requests get clear errors; the process keeps serving.
    bad = memory.query(op="query_mk", space="", entity="")
    assert not bad.ok and "needs both space and entity" in bad.error
    assert "no Megram" in memory.query(op="show", id="0123abcd").error
    assert memory.query(op="stats").stats["megrams"] == 3


def test_invalid_megrams_are_refused_and_the_valid_ones_written(memory):
    memory.start()
    memory.write([mg(content="good"), mg(f=7.0, content="bad f"), mg(content="also good")])
    memory.write([mg(sigma=float("nan"), content="nan")])
    contents = {m.content for m in memory.query(op="recent", space=TAG[0], entity=TAG[1]).megrams}
    assert contents == {"good", "also good"}
    assert memory.procs[0].poll() is None


def test_dreamer_gc_and_trust_bankruptcy_over_the_bus(memory):
    memory.start()
    bp_tag, fresh_tag = ("intent:bp", "env:local"), ("intent:fresh", "env:local")
    memory.write([
        mg("refine", age_days=3, content="decayed refine"),
        mg("change_path", level="K", age_days=30, content="decayed dead end"),
        mg(level="C", f=0.01, age_days=365, content="tiny ancient rule"),
        mg(level="T", f=0.01, age_days=365, content="a law"),
        mg("accept", content="fresh success"),
        # a Best Practice with contradicting evidence that is OLDER than it: kept
        mg(tag=bp_tag, level="C", age_days=10, content="BP old evidence"),
        mg("abandon", tag=bp_tag, age_days=20),
        # a Best Practice contradicted by NEWER evidence: demoted
        mg(tag=fresh_tag, level="C", age_days=10, content="BP newer evidence"),
        mg("abandon", tag=fresh_tag, age_days=1),
    ])
    event = memory.dream()
    assert event.gc_deleted == 2 and len(event.demoted) == 1 and event.promoted == []
    demoted = memory.query(op="show", id=event.demoted[0])
    assert demoted.megrams[0].content == "BP newer evidence"
    assert (demoted.megrams[0].level, demoted.megrams[0].k) == ("K", 0.05)
    left = {m.content for m in memory.query(op="list", space=TAG[0], entity=TAG[1]).megrams}
    assert left == {"tiny ancient rule", "a law", "fresh success"}
    kept = memory.query(op="list", space=bp_tag[0], entity=bp_tag[1]).megrams
    assert [m.level for m in kept if m.content == "BP old evidence"] == ["C"]
    assert memory.dream().demoted == []          # nothing new: nothing changes


def test_six_accepts_promote_exactly_one_sop_five_do_not(memory):
    with ScriptedLLM() as llm:
        llm.on("memory", lambda req: "Count files with `find . -type f | wc -l`; it is exact."
               if "Best Practice" in req.user else "Never delete files outside the workspace.")
        memory.start(llm.env())
        six, five, bad = TAG, ("intent:five", "env:local"), ("intent:risky", "env:local")
        memory.write([mg(tag=six, content=f"Succeeded. Tools: shell:find #{i}") for i in range(6)]
                     + [mg(tag=five) for _ in range(5)]
                     + [mg("abandon", tag=bad, content=f"Failed: rm -rf #{i}") for i in range(6)])
        event = memory.dream()
        assert len(event.promoted) == 2 and event.error == ""
        assert llm.calls("memory") == 2
        rules = {r.megrams[0].space: r.megrams[0]
                 for r in (memory.query(op="show", id=i) for i in event.promoted)}
        assert set(rules) == {six[0], bad[0]}
        best, constraint = rules[six[0]], rules[bad[0]]
        assert (best.level, best.sigma, best.k, best.state) == ("C", 1.0, 0.0, "best_practice")
        assert best.content.startswith("Count files with")
        assert (constraint.sigma, constraint.state) == (-1.0, "constraint")
        prompt = next(r.user for r in llm.filter("memory") if six[0] in r.user)
        assert "Succeeded. Tools: shell:find #5" in prompt
        sources = memory.query(op="list", space=six[0], entity=six[1]).megrams
        assert sum(1 for m in sources if m.consolidated_into == best.id) == 6
        # The next cycle: no new SOP, no second LLM call, the fresh Constraint is not demoted.
        again = memory.dream()
        assert again.promoted == [] and again.demoted == []
        assert llm.calls("memory") == 2
        assert memory.query(op="show", id=constraint.id).megrams[0].level == "C"


def test_sigkill_during_a_write_burst_loses_no_acknowledged_write(memory, settings):
    proc = memory.start()
    messages = [[uuid.uuid4().hex for _ in range(20)] for _ in range(600)]
    acked: dict[int, bool] = {}
    lock = threading.Condition()
    enough = threading.Event()

    def on_done(i):
        def done(ok):
            with lock:
                acked[i] = ok
                lock.notify_all()
                if len(acked) >= 40:
                    enough.set()
        return done

    for i, ids in enumerate(messages):
        memory.ggs.send(MemoryWrite(task_id=f"burst-{i}", megrams=[
            mg(id=mid, tag=(f"intent:burst{i % 13}", "env:local"), content=f"m{i}")
            for mid in ids]), on_done=on_done(i))
    assert enough.wait(WAIT)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(10)
    with lock:
        acked_at_kill = {i for i, ok in acked.items() if ok}
    assert acked_at_kill, "nothing was acknowledged before the kill"

    store = MemoryStore(settings.memory_path, readonly=True)
    try:
        assert store.verify() == []                          # nothing half-written
        with store.read() as txn:
            present = {i: sum(txn.get(bytes.fromhex(mid), db=store.db["megrams"]) is not None
                              for mid in ids) for i, ids in enumerate(messages)}
    finally:
        store.close()
    assert all(present[i] == 20 for i in acked_at_kill)     # every acknowledged write is there
    assert set(present.values()) <= {0, 20}                 # each message all-or-nothing
    assert len(acked_at_kill) < len(messages), "the burst ended before the kill"

    memory.start()                                           # the store opens again...
    with lock:                                               # ...and GGS's re-sends land
        assert lock.wait_for(lambda: len(acked) == len(messages), 60)
    stats = memory.query(op="stats").stats
    assert stats["megrams"] == 20 * len(messages)          # ...and re-delivery duplicated nothing


def test_sigterm_during_a_write_burst_loses_nothing(memory):
    """A graceful stop mid-burst: writes it can no longer take stay unacknowledged (never acked
    with an error), so GGS's re-sends reach the restarted process and every Megram lands once."""
    proc = memory.start()
    acked: list[int] = []
    cond = threading.Condition()

    def done(ok):
        with cond:
            acked.append(1)
            cond.notify_all()

    total = 400
    for i in range(total):
        memory.ggs.send(MemoryWrite(task_id=f"term-{i}", megrams=[
            mg(tag=(f"intent:term{i % 7}", "env:local"), content=f"m{i}") for _ in range(10)]),
            on_done=done)
    with cond:
        assert cond.wait_for(lambda: len(acked) >= 20, WAIT)
    proc.terminate()
    assert proc.wait(30) == 0
    memory.start()
    with cond:
        assert cond.wait_for(lambda: len(acked) == total, 60)
    assert memory.query(op="stats").stats["megrams"] == 10 * total


def test_cli_against_the_running_memory_process(memory):
    memory.start()

    def artoo(*args, ok=True):
        proc = subprocess.run([sys.executable, "-m", "services.cli", "memory", *args],
                              capture_output=True, text=True, cwd=REPO, timeout=60,
                              env={**os.environ, "COLUMNS": "200"})
        assert (proc.returncode == 0) == ok, proc.stderr + proc.stdout
        return proc.stdout if ok else proc.stderr

    memory.write([mg(content="Succeeded. Tools: shell:find"), mg("abandon", content="Failed.")])
    made = json.loads(artoo("remember", "Always", "write", "into", "the", "workspace", "--json"))
    assert (made["level"], made["space"], made["content"]) == ("C", "global:user",
                                                                "Always write into the workspace")
    groups = json.loads(artoo("ls", "--json"))["groups"]
    assert {(g["space"], g["action"]) for g in groups} == {(TAG[0], "Caution"),
                                                           ("global:user", "Exploit")}
    table = artoo("ls", "--space", TAG[0], "--entity", TAG[1])
    assert "intent:count-files" in table and "Caution" in table and "Failed." in table
    shown = artoo("show", made["id"][:8])
    assert "Always write into the workspace" in shown and "Exploit" in shown
    stats = json.loads(artoo("stats", "--json"))
    assert stats["stats"]["megrams"] == 3 and stats["stats"]["levels"]["C"] == 1
    assert [r["content"] for r in stats["rules"]] == ["Always write into the workspace"]
    assert "forgot" in artoo("forget", made["id"][:8])
    assert "no Megram" in artoo("show", made["id"], ok=False)
    assert memory.query(op="stats").stats["megrams"] == 2


def test_calibration_gives_the_next_run_the_previous_outcome(memory, settings, bus_clients):
    memory.start()
    planner = bus_clients("planner")
    spec = TaskSpec(task_id="run-2", intent_slug="count-files", intent="count the files",
                    raw_input="how many files are in ~/data?")
    # Nothing remembered yet: no memory lines, only what GGS blocked.
    text, recall, must_not = calibrate(planner, spec, ["search"], [], settings)
    assert text == "MUST NOT use tool: search (blocked by GGS)" and recall.action == "Ignore"
    # The first run's terminal Megram, written exactly as GGS writes it.
    from services.roles.loss import terminal_megram
    memory.write([terminal_megram("accept", "run-1", "count-files",
                                  "Succeeded. Tools: shell:find ~/data -type f. Result: 42 files",
                                  time.time())])
    text, recall, must_not = calibrate(planner, spec, [], ["/root/data"], settings)
    assert "SHOULD PREFER (worked before): Succeeded. Tools: shell:find ~/data -type f. " \
           "Result: 42 files" in text
    assert "MUST NOT use again: /root/data" in text
    assert (recall.space, recall.action, recall.recent) == ("intent:count-files", "Exploit", 1)
    assert must_not == ["target:/root/data"]
    # An operator constraint in global:user joins every calibration and the MUST NOT set.
    memory.query(op="remember", text="Never read /etc/shadow.", sigma=-1.0)
    text, recall, must_not = calibrate(planner, "count-files", ["shell"], [], settings,
                                       task_id="run-3")
    assert text.splitlines()[0] == "MUST NOT (proven rule): Never read /etc/shadow."
    assert must_not == ["Never read /etc/shadow.", "tool:shell"]
    logged = [e for e in tasklog.read(settings.tasks_dir, "run-3") if e["kind"] == "memory_query"]
    assert logged and logged[0]["action"] == "Exploit"


def test_calibration_without_memory_still_returns_the_ggs_constraints(settings, bus_process,
                                                                      bus_clients):
    planner = bus_clients("planner")
    text, recall, must_not = calibrate(planner, "count-files", ["shell"], [], settings,
                                       timeout=1.0)
    assert text == "MUST NOT use tool: shell (blocked by GGS)"
    assert recall.action == "Ignore" and must_not == ["tool:shell"]
