"""Acceptance (issue 7): 1,000 msgs/s for 60 s through the proxy, the tap SIGKILLed and restarted in
the middle — the audit log holds every message exactly once (ids and counts match the publishers').
The default suite streams for 10 s (the same kill at the midpoint); `bash scripts/test-soak` runs
the full 60 s (ARTOO_STREAM_SECONDS).
"""
from __future__ import annotations

import os
import signal
import threading
import time

import pytest

from audit_support import (capture_stats, id_counts, log_dir, logged_envelopes, start_bus,
                           start_tap, wait_until)
from auditor import log as L
from conftest import stop_process
from protocol.messages import LlmUsage

RATE = 1000                                              # messages per second, all publishers
SECONDS = float(os.environ.get("ARTOO_STREAM_SECONDS", "10"))


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_stream_with_tap_killed_midway_is_logged_exactly_once(settings, bus_clients):
    procs = [start_bus(settings)]
    try:
        procs.append(start_tap(settings))
        publishers = [bus_clients("planner"), bus_clients("executor")]
        total = int(RATE * SECONDS)
        ids: list[str] = []
        restarted = threading.Event()
        failure: list[BaseException] = []

        def kill_and_restart():
            try:
                tap = procs[1]
                os.kill(tap.pid, signal.SIGKILL)
                tap.wait(10)
                procs[1] = start_tap(settings, connected_before=1)
                restarted.set()
            except BaseException as exc:  # noqa: BLE001 - reported by the test thread
                failure.append(exc)

        killer = threading.Thread(target=kill_and_restart)
        t0 = time.monotonic()
        i = 0
        while i < total:
            due = min(total, int((time.monotonic() - t0) * RATE) + 1)
            while i < due:
                pub = publishers[i % 2]
                ids.append(pub.publish(LlmUsage(role=pub.role, tier="BRAIN", latency_ms=i,
                                                task_id=f"stream-{i // 1000}")))
                i += 1
                if i == total // 2:
                    killer.start()
            time.sleep(0.002)                            # pacing, not a handshake
        elapsed = time.monotonic() - t0
        killer.join(60)
        assert not failure, failure
        assert restarted.is_set(), "the tap was not restarted"
        print(f"published {total} messages in {elapsed:.1f}s")  # pacing is reported, not asserted

        nodes = {p.node for p in publishers}
        expected = set(ids)
        counts = wait_until(lambda: (c := id_counts(settings, nodes)) and expected <= set(c)
                            and c, 90, "every published message in the audit log",
                            interval=1.0)
        assert len(ids) == total == len(expected)
        dupes = {k: v for k, v in counts.items() if v != 1}
        assert not dupes, f"{len(dupes)} message(s) logged more than once"
        extra = set(counts) - expected
        # ...and nothing else from the publishers but their readiness probes (re-sent under load)
        extra_types = {e["type"] for e in logged_envelopes(settings) if e["id"] in extra}
        assert extra and extra_types == {"Hello"}, extra_types
        stats = capture_stats(settings)
        assert stats["dropped"] == 0 and stats["tap_connections"] == 2
        assert L.verify(log_dir(settings)).ok
    finally:
        for proc in reversed(procs):
            stop_process(proc)
