"""The soak run (opt-in: `bash scripts/test-soak`, ARTOO_SOAK_MINUTES, default 10): tasks run
continuously on the full daemon while the memory and open file descriptors of every daemon
process are sampled (psutil). Reported per process: the least-squares slope after a warm-up
(MB/min, fds/min) of its RSS and of its own memory — RSS less the file-backed pages it maps
(`shared`): a store's data file mapped by LMDB (the memory and world stores) is page cache that
grows with the data and that the kernel takes back under pressure, not the process's heap.
Asserted: no upward trend of the process's own memory beyond noise, no fd growth, and no per-task
state outliving its task (state files, GGS live tasks, every role's in-flight and unacked counters
back at 0). The memory trend is the slope over the later half of the measured window, held to a
growth of max(8 MB, 10 % of the process's RSS) over the whole window: a leak grows at the same rate
throughout and is caught as before, while a long-lived role that fills bounded tables (the replay
filter, caches keyed by task, the allocator's heaps) rises early and levels off — at the soak's
slow task rate the world model was still filling 20 minutes in, past any fixed warm-up. Both
slopes and each process's sampled series are in the summary.

Writes docs/soak-run.json (or $ARTOO_SOAK_SUMMARY)."""
from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path

import psutil
import pytest

from chaos_support import chaos_daemon
from protocol.bus import BusClient
from soak_trend import later_half, measured, slope, trends_upward

pytestmark = pytest.mark.soak

REPO = Path(__file__).resolve().parents[2]
MINUTES = float(os.environ.get("ARTOO_SOAK_MINUTES", "10"))
SAMPLE_S = 10.0
CONCURRENCY = int(os.environ.get("ARTOO_SOAK_CONCURRENCY", "4"))


def sample(settings, samples: dict) -> None:
    from services.runtime import daemon
    now = time.monotonic()
    for (program, inst), info in daemon.supervisor_processes(settings).items():
        pid = info.get("pid")
        if not pid:
            continue
        try:
            proc = psutil.Process(pid)
            mem, fds = proc.memory_info(), proc.num_fds()
        except psutil.Error:
            continue
        # keyed by program+instance+pid: a restarted process starts a new series
        samples.setdefault(f"{program}_{inst}", {}).setdefault(pid, []).append(
            (now, mem.rss / 2**20, fds, (mem.rss - mem.shared) / 2**20))


def collect_heartbeats(settings, seconds: float = 8.0) -> dict:
    """The latest heartbeat of every process: role/instance -> (in_flight, unacked, info)."""
    seen: dict = {}
    got = threading.Event()
    probe = BusClient("user", settings=settings, heartbeat=False)

    def hb(env, m):
        seen[f"{m.role}_{m.instance}"] = {"in_flight": m.in_flight, "unacked": m.unacked,
                                           "info": m.info}
    probe.on("Heartbeat", hb)
    probe.start(timeout=30)
    try:
        got.wait(seconds)  # heartbeats come every few seconds; gather one round from everyone
    finally:
        probe.stop()
    return seen


@pytest.mark.timeout(int(MINUTES * 60 + 900))
def test_soak_rss_and_fds_stay_flat():
    samples: dict = {}
    summary: dict = {"date": time.strftime("%Y-%m-%d %H:%M"), "minutes": MINUTES,
                     "concurrency": CONCURRENCY}
    with chaos_daemon() as (chaos, result):
        stop = threading.Event()
        submitted = []

        def load():
            while not stop.is_set():
                submitted.extend(chaos.run_batch("soak", CONCURRENCY * 4, CONCURRENCY))
        loader = threading.Thread(target=load, daemon=True)
        loader.start()
        end = time.monotonic() + MINUTES * 60
        while time.monotonic() < end:
            sample(chaos.settings, samples)
            stop.wait(SAMPLE_S)
        stop.set()
        loader.join(300)
        chaos.wait_ended(submitted)
        sample(chaos.settings, samples)
        summary["heartbeats"] = collect_heartbeats(chaos.settings)
        summary["ggs_live_tasks"] = {str(k): v.get("tasks")
                                     for k, v in chaos.ggs_live_tasks().items()}
        summary["tasks"] = {"submitted": len(submitted),
                            "finished": sum(1 for t in submitted if t.finals),
                            "duplicated": sum(1 for t in submitted if len(t.finals) > 1)}
    summary.update(result)
    report, series = {}, {}
    for name, by_pid in sorted(samples.items()):
        pid, points = max(by_pid.items(), key=lambda kv: len(kv[1]))   # the longest-lived process
        t0 = points[0][0]
        window = measured(points)
        minutes = (window[-1][0] - window[0][0]) / 60 if len(window) > 1 else 0.0
        own = [(t, o) for t, _, _, o in points]
        rss_slope = slope([(t, r) for t, r, _, _ in window])
        own_slope = slope([(t, o) for t, _, _, o in window])
        own_late = slope(later_half(measured(own)))
        bound = max(8.0, 0.10 * points[-1][1])
        fd_slope = slope([(t, f) for t, _, f, _ in window])
        report[name] = {"pid": pid, "samples": len(points), "rss_mb_start": round(points[0][1], 1),
                        "rss_mb_end": round(points[-1][1], 1),
                        "rss_mb_per_min": round(rss_slope, 3),
                        "own_mb_start": round(points[0][3], 1),
                        "own_mb_end": round(points[-1][3], 1),
                        "own_mb_per_min": round(own_slope, 3),
                        "own_mb_per_min_later_half": round(own_late, 3),
                        "fds_start": points[0][2],
                        "fds_end": points[-1][2], "fds_per_min": round(fd_slope, 3),
                        "window_min": round(minutes, 1),
                        "own_trends_upward": trends_upward(own, bound)}
        series[name] = [[round((t - t0) / 60, 2), round(o, 1)] for t, o in own]
    summary["processes"] = report
    out = Path(os.environ.get("ARTOO_SOAK_SUMMARY", REPO / "docs" / "soak-run.json"))
    text = json.dumps(summary, indent=1, default=str)
    # each process's samples, (minutes, own MB) — filling or leaking — one line per process
    text = text[:-2] + ',\n "own_mb_series": {\n' + ",\n".join(
        f'  "{n}": {json.dumps(v, separators=(",", ":"))}' for n, v in series.items()) + "\n }\n}"
    out.write_text(text + "\n")
    for name, r in report.items():
        print(f"[soak] {name}: {r}", flush=True)

    assert summary["tasks"]["finished"] == summary["tasks"]["submitted"] > 0
    assert summary["tasks"]["duplicated"] == 0
    assert not summary["orphans"]
    growing = {n: r for n, r in report.items() if r["own_trends_upward"]}
    assert not growing, f"a process's own memory trends upward: {growing}"
    leaking_fds = {n: r for n, r in report.items() if r["fds_per_min"] * r["window_min"] > 5}
    assert not leaking_fds, f"open fds grow: {leaking_fds}"
    live = {role: v for role, v in summary["post_down"]["state_files"].items() if v["live"]}
    assert not live, f"per-task state outlived its task: {live}"
    assert all(v == 0 for v in summary["ggs_live_tasks"].values())
    busy = {k: v for k, v in summary["heartbeats"].items()
            if v["in_flight"] or v["unacked"]}
    assert not busy, f"in-flight work left after every task ended: {busy}"
