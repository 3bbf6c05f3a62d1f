"""The chaos suite (opt-in: `bash scripts/test-chaos`): batches of tasks on the full daemon while
faults are injected, then the reliability checks of issue 9 / DESIGN §4:

* every submitted task ends with exactly one FinalResult (distinct envelope ids), before its
  deadline (+ a watchdog grace);
* every acknowledged memory write is in LMDB afterwards (opened read-only after `artoo down`);
* the audit log verifies and holds every UserRequest / FinalResult the run saw;
* no process of the daemon is left after `artoo down`, and no live per-task state is left.

The run writes a JSON summary (docs/reliability-run.json, or $ARTOO_CHAOS_SUMMARY) that
scripts/reliability-table renders into the fault matrix of docs/RELIABILITY.md.
"""
from __future__ import annotations

import json
import os
import random
import statistics
import threading
import time
from pathlib import Path

import pytest

from chaos_support import DEADLINE_S, LATE_GRACE_S, LLM_FAULTS, chaos_daemon
from protocol.bus import BusClient

pytestmark = pytest.mark.chaos

REPO = Path(__file__).resolve().parents[2]
KILL_TARGETS = ["perceiver", "planner", "metaval", "ggs", "memory", "spawner", "effector", "tap",
                "auditor", "bus"]
PER_KILL_TASKS = int(os.environ.get("ARTOO_CHAOS_TASKS_PER_KILL", "14"))
KILLS_PER_TARGET = int(os.environ.get("ARTOO_CHAOS_KILLS_PER_TARGET", "3"))
CONCURRENCY = int(os.environ.get("ARTOO_CHAOS_CONCURRENCY", "6"))
STOP_TARGETS = ["perceiver", "planner", "metaval", "ggs", "memory", "spawner"]


def fault_during(chaos, n: int, count: int, inject) -> callable:
    """A trigger for run_batch: after evenly spaced submissions, inject on a side thread after a
    random 0–2 s (a random moment in the task's life, not a fixed stage)."""
    marks = {max(0, (k + 1) * n // (count + 1) - 1) for k in range(count)}
    threads: list[threading.Thread] = []

    def trigger(i: int) -> None:
        if i in marks:
            def go():
                time.sleep(random.uniform(0.0, 2.0))  # the random moment itself, not a handshake
                inject()
            t = threading.Thread(target=go, daemon=True)
            t.start()
            threads.append(t)
    trigger.threads = threads
    return trigger


def run_phase(chaos, summary: dict, name: str, n: int, *, concurrency: int = CONCURRENCY,
              inject=None, count: int = 0, llm_faults=None) -> None:
    faults_before = len(chaos.faults)
    t0 = time.monotonic()
    trigger = fault_during(chaos, n, count, inject) if inject else None
    tasks = chaos.run_batch(name, n, concurrency, trigger, llm_faults)
    for t in (trigger.threads if trigger else []):
        t.join(120)
    chaos.wait_ended(tasks)
    faults = chaos.faults[faults_before:]
    if llm_faults:
        faults = faults + [{"kind": "llm", "target": f"{r}:{k}"} for r, k in llm_faults]
    row = outcome_row(name, tasks, faults)
    row["wall_s"] = round(time.monotonic() - t0, 1)
    summary["phases"].append(row)
    print(f"[chaos] {name}: {row}", flush=True)


def outcome_row(name: str, tasks, faults) -> dict:
    finished = [t for t in tasks if t.finals]
    late = [t for t in finished if t.first_final > t.submitted + DEADLINE_S + LATE_GRACE_S]
    restarts = [f["restart_s"] for f in faults if "restart_s" in f]
    directives: dict[str, int] = {}
    for t in finished:
        d = min(t.finals.values())[1]
        directives[d] = directives.get(d, 0) + 1
    latencies = [t.first_final - t.submitted for t in finished]
    return {
        "phase": name, "submitted": len(tasks), "finished": len(finished),
        "lost": len(tasks) - len(finished), "late": len(late),
        "duplicated": sum(1 for t in tasks if len(t.finals) > 1),
        "directives": directives, "faults": len(faults),
        "fault_kinds": sorted({f"{f['kind']}:{f['target']}" for f in faults}),
        "restart_s_max": max(restarts) if restarts else None,
        "restart_s_median": round(statistics.median(restarts), 2) if restarts else None,
        "latency_s_median": round(statistics.median(latencies), 1) if latencies else None,
        "latency_s_max": round(max(latencies), 1) if latencies else None,
        "lost_ids": [t.task_id for t in tasks if not t.finals],
        "late_ids": [t.task_id for t in late],
    }


@pytest.mark.timeout(2400)  # the suite's own budget; tasks are bounded by their deadlines
def test_fault_matrix():
    random.seed(int(os.environ.get("ARTOO_CHAOS_SEED", "9")))
    summary: dict = {"date": time.strftime("%Y-%m-%d %H:%M"), "deadline_s": DEADLINE_S,
                     "concurrency": CONCURRENCY, "scale": int(os.environ.get("ARTOO_SCALE", "2")),
                     "phases": []}
    t_start = time.monotonic()
    with chaos_daemon() as (chaos, result):
        run_phase(chaos, summary, "baseline", 10)
        for target in KILL_TARGETS:
            run_phase(chaos, summary, f"sigkill-{target}", PER_KILL_TASKS,
                      inject=lambda t=target: chaos.kill(t), count=KILLS_PER_TARGET)
        stops = iter(STOP_TARGETS)
        run_phase(chaos, summary, "sigstop-5s", 3 * len(STOP_TARGETS),
                  inject=lambda: chaos.stop_cont(next(stops), 5.0), count=len(STOP_TARGETS))
        run_phase(chaos, summary, "burst-10x", 10 * CONCURRENCY, concurrency=10 * CONCURRENCY,
                  inject=lambda: chaos.record_fault("burst", f"{10 * CONCURRENCY} at once"),
                  count=1)
        slow = SlowSubscriber(chaos.settings)
        try:
            run_phase(chaos, summary, "slow-subscriber", 10,
                      inject=lambda: chaos.record_fault("slow_subscriber", "50 ms per message"),
                      count=1)
        finally:
            slow.stop()
        summary["slow_subscriber"] = slow.stats()
        run_phase(chaos, summary, "bad-frames", 10, inject=chaos.garbage_frames, count=2)
        llm_faults = [(role, kind) for role in ("perceiver", "planner", "metaval")
                      for kind in LLM_FAULTS]
        run_phase(chaos, summary, "llm-faults", len(llm_faults), llm_faults=llm_faults)
        summary["llm_faults_served"] = len(chaos.llm_faults_served)
        summary["ggs_live_tasks"] = {str(k): v.get("tasks") for k, v in
                                     chaos.ggs_live_tasks().items()}
    summary.update(result)
    summary["total_s"] = round(time.monotonic() - t_start, 1)
    rows = summary["phases"]
    summary["totals"] = {k: sum(r[k] for r in rows)
                         for k in ("submitted", "finished", "lost", "late", "duplicated", "faults")}
    out = Path(os.environ.get("ARTOO_CHAOS_SUMMARY", REPO / "docs" / "reliability-run.json"))
    out.write_text(json.dumps(summary, indent=1, default=str) + "\n")
    print(f"[chaos] totals {summary['totals']} in {summary['total_s']} s -> {out}", flush=True)

    totals, post = summary["totals"], summary["post_down"]
    lost = {r["phase"]: r["lost_ids"] for r in rows if r["lost_ids"]}
    late = {r["phase"]: r["late_ids"] for r in rows if r["late_ids"]}
    assert not lost, f"tasks without a FinalResult: {lost}"
    assert not late, f"tasks whose FinalResult came after the deadline: {late}"
    assert totals["duplicated"] == 0
    assert summary["llm_faults_served"] == len(llm_faults)
    assert not summary["orphans"], f"processes left after artoo down: {summary['orphans']}"
    assert post["memory_missing"] == 0, post
    assert post["audit_ok"], post["audit_reason"]
    assert post["audit_missing_ids"] == 0 or post["audit_gap_records"] > 0, post
    live = {role: v for role, v in post["state_files"].items() if v["live"]}
    assert not live, f"per-task state outlived its task: {live}"
    assert all(v == 0 for v in summary["ggs_live_tasks"].values()), summary["ggs_live_tasks"]


class SlowSubscriber:
    """A client subscribed to everything whose handler takes 50 ms per message on the bus loop:
    it falls behind; the bus must not slow anyone else down (its queue overflows, not theirs)."""

    def __init__(self, settings):
        self.count = 0
        self.client = BusClient("user", settings=settings, heartbeat=False)
        self.client.on("*", self._slow)
        self.client.start(timeout=30)

    def _slow(self, env, msg) -> None:
        self.count += 1
        time.sleep(0.05)  # the fault: a consumer that cannot keep up

    def stop(self) -> None:
        self.client.stop()

    def stats(self) -> dict:
        s = self.client.stats()
        return {"handled": self.count, "gaps": sum(s["gaps"].values())}
