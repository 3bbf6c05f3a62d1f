"""The tap on real processes: bus proxy with its capture relay, the tap, publishers, the CLI.

Exactly once across a tap SIGKILL in the middle of a burst and across a proxy restart; loss beyond
the relay's bound is recorded as a GAP, never silent; the inspector commands read what happened.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from audit_support import (capture_stats, id_counts, log_dir, logged_envelopes, start_bus,
                           start_tap, wait_until)
from auditor import log as L
from conftest import stop_process
from protocol.bus import BusClient
from protocol.messages import (LlmUsage, LossBreakdown, PlanDirective, SubTask, SubTaskOutcome,
                               TaskSpec)

REPO = Path(__file__).resolve().parent.parent


def artoo(*args: str):
    """Run `artoo <args>` in-process (click's runner) against the real processes."""
    from click.testing import CliRunner
    from services.cli import main
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


@pytest.fixture
def procs(settings):
    started: list = []
    yield started
    for proc in reversed(started):
        stop_process(proc)


def usage(i: int) -> LlmUsage:
    return LlmUsage(role="planner", tier="BRAIN", latency_ms=float(i), task_id=f"t{i % 5}")


def test_tap_sigkill_mid_burst_loses_and_duplicates_nothing(settings, procs, bus_clients):
    """The nasty case: messages already delivered into the tap's receive buffers (sent by the
    relay, not yet written/acknowledged) when it is SIGKILLed. SIGSTOP first makes that certain."""
    procs.append(start_bus(settings))
    tap = start_tap(settings)
    procs.append(tap)
    pub = bus_clients("planner")
    ids = [pub.publish(usage(i)) for i in range(1500)]
    os.kill(tap.pid, signal.SIGSTOP)
    ids += [pub.publish(usage(i)) for i in range(1500, 3000)]
    wait_until(lambda: capture_stats(settings)["inflight"] > 0, 20,
               "messages in flight to the frozen tap")
    os.kill(tap.pid, signal.SIGKILL)
    tap.wait(10)
    ids += [pub.publish(usage(i)) for i in range(3000, 4000)]   # while no tap is running
    procs.append(start_tap(settings, connected_before=1))
    counts = wait_until(lambda: (c := id_counts(settings, {pub.node})) and
                        set(ids) <= set(c) and c, 30, "every message in the log")
    dupes = {i: n for i, n in counts.items() if n > 1}
    assert not dupes, f"{len(dupes)} message(s) logged more than once"
    # besides what it published, only the client's own handshake probes (a loaded box resends one)
    extra = {e["type"] for e in logged_envelopes(settings)
             if e.get("node") == pub.node and e["id"] not in ids}
    assert extra == {"Hello"}
    stats = capture_stats(settings)
    assert stats["resends"] > 0      # the killed tap really had unwritten messages in hand
    assert stats["dropped"] == 0
    assert L.verify(log_dir(settings)).ok


def test_proxy_restart_starts_a_new_capture_epoch(settings, procs, bus_clients):
    bus = start_bus(settings)
    procs.append(bus)
    procs.append(start_tap(settings))
    a = bus_clients("planner")
    first = [a.publish(usage(i)) for i in range(50)]
    wait_until(lambda: set(first) <= set(id_counts(settings, {a.node})), 20, "the first batch")
    os.kill(bus.pid, signal.SIGKILL)
    bus.wait(10)
    procs.remove(bus)
    procs.insert(0, start_bus(settings))
    # the running tap finds the new relay on its own (idle re-announce)
    wait_until(lambda: capture_stats(settings)["tap_connected"], 20, "the tap to reconnect")
    b = BusClient("planner", settings=settings, heartbeat=False).start()
    try:
        second = [b.publish(usage(i)) for i in range(50)]
        wait_until(lambda: set(second) <= set(id_counts(settings, {b.node})), 20,
                   "the second batch")
    finally:
        b.stop()
    envs = logged_envelopes(settings)
    epochs = {e["_epoch"] for e in envs if e["id"] in set(first)} | \
        {e["_epoch"] for e in envs if e["id"] in set(second)}
    assert len(epochs) == 2
    assert sum(1 for e in envs if e["id"] in set(first) | set(second)) == 100
    assert L.verify(log_dir(settings)).ok


def test_loss_beyond_the_replay_bound_is_recorded_as_a_gap(settings, procs, bus_clients):
    procs.append(start_bus(settings, {"ARTOO_TAP_REPLAY_BYTES": "100000"}))
    pub = bus_clients("planner")
    ids = [pub.publish(usage(i)) for i in range(2000)]
    wait_until(lambda: capture_stats(settings)["captured"] >= 2000, 20, "capture")
    dropped = capture_stats(settings)["dropped"]
    assert dropped > 0
    procs.append(start_tap(settings))
    last = pub.publish(usage(99999))
    wait_until(lambda: last in id_counts(settings, {pub.node}), 20, "the last message")

    def gap_records():
        return [r for r in L.iter_records(log_dir(settings)) if r.kind == L.GAP]

    # With so small a bound, heartbeats may still be dropped while the tap catches up: every drop
    # the relay counts must end up announced in a GAP record (loss is never silent).
    wait_until(lambda: sum(g.meta()["count"] for g in gap_records())
               == capture_stats(settings)["dropped"], 20, "every drop announced")
    records = list(L.iter_records(log_dir(settings)))
    gaps = [r for r in records if r.kind == L.GAP]
    assert gaps and sum(g.meta()["count"] for g in gaps) >= dropped
    # every captured cseq is accounted for exactly once: logged, or inside an announced gap
    covered = [r.cseq for r in records if r.kind not in (L.GAP, L.REPAIR)]
    for g in gaps:
        covered += range(g.meta()["first_cseq"], g.meta()["last_cseq"] + 1)
    assert sorted(covered) == list(range(1, max(covered) + 1))
    logged = id_counts(settings, {pub.node})
    assert 0 < sum(1 for i in ids if i in logged) < len(ids)
    assert set(logged.values()) == {1}
    assert L.verify(log_dir(settings)).ok


def test_inspector_commands(settings, procs, bus_clients):
    procs.append(start_bus(settings))
    procs.append(start_tap(settings))
    perceiver = bus_clients("perceiver")
    planner = bus_clients("planner", setup=lambda c: c.on("TaskSpec", lambda e, m: None,
                                                          ack=True))
    agentval = bus_clients("agentval")
    ggs = bus_clients("ggs")
    acked = threading.Event()
    perceiver.send(TaskSpec(task_id="run-tl", intent_slug="x", intent="do x", raw_input="do x"),
                   consumers=("planner",), on_done=lambda ok: acked.set())
    assert acked.wait(10)
    planner.publish(SubTask(subtask_id="s1", parent_task_id="run-tl", intent="list files"),
                    to="executor")
    agentval.publish(SubTaskOutcome(task_id="run-tl", subtask_id="s1", parent_task_id="run-tl",
                                    status="matched", intent="list files"), to="metaval")
    last = ggs.publish(PlanDirective(task_id="run-tl", directive="refine", grad_l=0.2,
                                     loss=LossBreakdown(D=0.5, P=0.4, Omega=0.1, L=0.45)),
                       to="planner")
    wait_until(lambda: last in id_counts(settings, {ggs.node}), 20, "the directive in the log")

    out = artoo("tap", "log", "--task", "run-tl", "--json")
    assert out.exit_code == 0, out.output
    lines = [json.loads(x) for x in out.output.splitlines()]
    assert sorted(x["type"] for x in lines) == ["Ack", "PlanDirective", "SubTask",
                                                 "SubTaskOutcome", "TaskSpec"]
    assert all(x["task"] == "run-tl" for x in lines)
    only = artoo("tap", "log", "--type", "SubTask", "--role", "planner", "--json")
    assert [json.loads(x)["type"] for x in only.output.splitlines()] == ["SubTask"]
    grep = artoo("tap", "log", "--grep", "list files", "--count", "1", "--json")
    assert len(grep.output.splitlines()) == 1
    future = artoo("tap", "log", "--since", "2999-01-01T00:00:00", "--json")
    assert future.exit_code == 0 and future.output == ""

    tl = artoo("tap", "timeline", "run-tl", "--json")
    assert tl.exit_code == 0, tl.output
    tree = json.loads(tl.output)
    spec = tree["timeline"][0]
    assert spec["type"] == "TaskSpec" and spec["acks"][0]["by"] == "planner"
    sub = next(e for e in tree["timeline"] if "subtask" in e)
    assert sub["subtask"] == "s1" and {e["type"] for e in sub["events"]} == {"SubTask",
                                                                            "SubTaskOutcome"}
    pretty = artoo("tap", "timeline", "run-tl")
    assert "subtask s1" in pretty.output and "acked by planner" in pretty.output
    assert artoo("tap", "timeline", "no-such-run").exit_code == 1

    stats = artoo("tap", "stats", "--window", "1.5", "--json")
    assert stats.exit_code == 0, stats.output
    st = json.loads(stats.output)
    assert st["capture"]["tap_connected"] and st["proxy"]["frontend_msgs_in"] > 0
    assert "TaskSpec/" in st["capture"]["subscriptions"]   # the planner client's subscription
    assert st["rates_per_type"]                             # heartbeats at least
    assert artoo("tap", "verify").exit_code == 0

    # live tail: filters and --count, against traffic published while it listens
    tail = subprocess.Popen([sys.executable, "-m", "services.cli", "tap", "--type", "LlmUsage",
                             "--role", "planner", "--count", "3", "--json"], cwd=REPO,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        done = threading.Event()

        def feed():
            i = 0
            while not done.is_set() and i < 2000:
                planner.publish(usage(i))
                agentval.publish(LlmUsage(role="agentval", tier="TOOL"))
                i += 1
                done.wait(0.01)

        feeder = threading.Thread(target=feed)
        feeder.start()
        out, err = tail.communicate(timeout=30)
        done.set()
        feeder.join()
    finally:
        if tail.poll() is None:
            tail.kill()
    assert tail.returncode == 0, err
    got = [json.loads(x) for x in out.splitlines()]
    assert len(got) == 3 and all(x["type"] == "LlmUsage" and x["from"] == "planner" for x in got)
