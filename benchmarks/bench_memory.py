"""Memory benchmarks (issue 6): QueryMK latency by tag size and store size, acknowledged write
throughput, one Dreamer cycle and the memory process's RSS at 1M Megrams.

Everything goes through the real processes: a `services.runtime.bus` proxy and the `memory_server.server`
process with its LMDB file in a temporary ARTOO_HOME; queries are MemoryQuery request/replies and
writes are acknowledged MemoryWrite work messages, as the planner and GGS use them. Baselines in the
same run: the bus round trip of a QueryMK on an empty tag (what the bus costs), the same QueryMK
computed in-process on a read-only view of the LMDB file (what the store costs), and one-Megram-per-
message writes (what batching buys). The Dreamer's LLM is a scripted OpenAI-compatible server on
loopback, so the cycle time is the store's, not a model's.

Run: `.venv/bin/python benchmarks/bench_memory.py [--total 1000000] [--queries 200] [--json]`.
"""
from __future__ import annotations

import argparse
import json
import os
import queue
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests"))

import psutil  # noqa: E402

from memory_server import mkct  # noqa: E402
from services.runtime import mkct as tags  # noqa: E402
from memory_server.store import MemoryStore  # noqa: E402
from protocol.bus import BusClient  # noqa: E402
from protocol.messages import FinalResult, Megram, MemoryQuery, MemoryWrite  # noqa: E402
from protocol.settings import load_settings  # noqa: E402
from scripted_llm import ScriptedLLM  # noqa: E402

DAY = mkct.SECONDS_PER_DAY
BATCH = 1000                # Megrams per MemoryWrite in the batched runs (~300 KB frames)
WINDOW = 8                  # MemoryWrites in flight (unacknowledged) at a time
SIZED_TAGS = {"1k": 1_000, "10k": 10_000, "100k": 100_000}
SPREAD_TAGS = 100_000       # the rest of the store: micro/macro events over this many tags
STATES = list(tags.QUANTIZATION)


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(p / 100 * (len(ordered) - 1))))]


def megram(rng: random.Random, space: str, entity: str, now: float, state: str | None = None,
           mean_age_days: float = 3.0) -> Megram:
    """A GGS-like Megram: mostly change_path micro-events, some terminal outcomes; ages drawn as if
    the Dreamer had not run for a few days (about 10% of the store is due for GC)."""
    state = state or rng.choices(STATES, weights=(6, 8, 6, 8, 8, 62, 2))[0]
    f, sigma, k = tags.QUANTIZATION[state]
    return Megram(space=space, entity=entity, state=state, f=f, sigma=sigma, k=k,
                  created_at=now - min(40.0, rng.expovariate(1 / mean_age_days)) * DAY,
                  content=f"{state}: subtask intent + failure reason / summary, "
                          f"#{rng.randrange(10**9)} on {entity}")


class Rig:
    """Bus proxy + memory process on a temporary data dir, and the benchmark's bus clients."""

    def __init__(self, llm_env: dict[str, str]):
        self.root = Path(tempfile.mkdtemp(prefix="bm-", dir="/tmp"))
        self.env = dict(os.environ, ARTOO_HOME=str(self.root / "home"),
                        ARTOO_WORKSPACE=str(self.root / "ws"), ARTOO_CAPTURE="0",
                        ARTOO_DREAMER_INTERVAL_S="86400", ARTOO_DREAMER_AFTER_FINAL_S="0",
                        PYTHONUNBUFFERED="1", **llm_env)
        for key in ("ARTOO_RUN_DIR",):
            self.env.pop(key, None)
        os.environ.update({k: self.env[k] for k in ("ARTOO_HOME", "ARTOO_WORKSPACE")})
        self.settings = load_settings()
        self.settings.ensure_dirs()
        logs = self.settings.logs_dir
        self.bus = subprocess.Popen([sys.executable, "-m", "services.runtime.bus"], env=self.env,
                                    cwd=REPO, stdout=open(logs / "bus.log", "ab"),
                                    stderr=subprocess.STDOUT)
        self.events: queue.Queue = queue.Queue()
        self.client = self._start_client("user", lambda c: c.on(
            "DreamerEvent", lambda env, msg: self.events.put(msg)))
        self.ggs = self._start_client("ggs")
        self.memory = subprocess.Popen([sys.executable, "-m", "memory_server.server"],
                                       env=self.env, cwd=REPO,
                                       stdout=open(logs / "memory.log", "ab"),
                                       stderr=subprocess.STDOUT)
        self.query(op="stats", timeout=30)     # request/reply re-sends until memory answers

    def _start_client(self, role: str, setup=None) -> BusClient:
        deadline = time.monotonic() + 30
        while True:
            client = BusClient(role, settings=self.settings, heartbeat=False)
            if setup:
                setup(client)
            try:
                return client.start(timeout=2)
            except Exception:
                if time.monotonic() > deadline:
                    raise

    def query(self, timeout: float = 30, **fields):
        _, res = self.client.request(MemoryQuery(**fields), to="memory", timeout=timeout)
        if not res.ok:
            raise RuntimeError(res.error)
        return res

    def cpu_s(self) -> tuple[float, float]:
        """CPU seconds used so far by the memory process and by this benchmark process."""
        t = psutil.Process(self.memory.pid).cpu_times()
        return t.user + t.system, time.process_time()

    def write_stream(self, batches, window: int = WINDOW) -> tuple[int, float]:
        """Send MemoryWrites with `window` in flight; returns (Megrams, seconds until all acked)."""
        slots = threading.Semaphore(window)
        done = threading.Condition()
        pending = [0]
        total = 0
        failed = []

        def finished(ok: bool) -> None:
            if not ok:
                failed.append(1)
            with done:
                pending[0] -= 1
                done.notify_all()
            slots.release()

        started = time.perf_counter()
        for batch in batches:
            slots.acquire()
            with done:
                pending[0] += 1
            total += len(batch)
            self.ggs.send(MemoryWrite(task_id="bench", megrams=batch), on_done=finished)
        with done:
            done.wait_for(lambda: pending[0] == 0, 600)
        if failed:
            raise RuntimeError(f"{len(failed)} MemoryWrites were never acknowledged")
        return total, time.perf_counter() - started

    def rss_mb(self) -> dict:
        """RSS split into anonymous memory (the process's own heap) and file pages (the LMDB map,
        page cache the kernel can reclaim)."""
        status = Path(f"/proc/{self.memory.pid}/status").read_text().splitlines()
        kb = {line.split(":")[0]: int(line.split()[1]) for line in status
              if line.startswith(("VmRSS", "RssAnon", "RssFile"))}
        return {"rss_mb": round(kb["VmRSS"] / 1024, 1), "anon_mb": round(kb["RssAnon"] / 1024, 1),
                "lmdb_file_mb": round(kb["RssFile"] / 1024, 1)}

    def close(self) -> None:
        for client in (self.client, self.ggs):
            client.stop()
        for proc in (self.memory, self.bus):
            proc.terminate()
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        shutil.rmtree(self.root, ignore_errors=True)


def time_queries(rig: Rig, space: str, entity: str, n: int) -> dict:
    samples = []
    for _ in range(n):
        t0 = time.perf_counter()
        rig.query(op="query_mk", space=space, entity=entity, n=10)
        samples.append((time.perf_counter() - t0) * 1000)
    return {"p50_ms": round(percentile(samples, 50), 2), "p95_ms": round(percentile(samples, 95), 2)}


def time_in_process(path: Path, space: str, entity: str, n: int) -> dict:
    store = MemoryStore(path, readonly=True, cache_bytes=0)   # every query reads LMDB
    try:
        samples = []
        for _ in range(n):
            t0 = time.perf_counter()
            store.query_mk(space, entity, top_n=10)
            samples.append((time.perf_counter() - t0) * 1000)
    finally:
        store.close()
    return {"p50_ms": round(percentile(samples, 50), 2), "p95_ms": round(percentile(samples, 95), 2)}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--total", type=int, default=1_000_000, help="Megrams in the full store")
    ap.add_argument("--queries", type=int, default=200, help="QueryMK samples per figure")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    rng = random.Random(7)
    now = time.time()
    results: dict = {"total": args.total}
    llm = ScriptedLLM(default="Prefer the approach that succeeded; never repeat the failed one.")
    llm.start()
    rig = Rig(llm.env())
    try:
        q = args.queries
        results["baseline_empty_tag"] = time_queries(rig, "intent:none", "env:local", q)

        # 1. one-Megram-per-message writes (the unbatched baseline), then the sized tags, batched
        unbatched_n = 2000
        n, secs = rig.write_stream([[megram(rng, "intent:unbatched", "env:local", now)]
                                    for _ in range(unbatched_n)])
        results["write_unbatched_per_s"] = round(n / secs)
        sized_written = 0
        sized_secs = 0.0
        for label, size in SIZED_TAGS.items():
            space = f"intent:bench-{label}"

            def batches(size=size, space=space):
                for start in range(0, size, BATCH):
                    yield [megram(rng, space, "env:local", now)
                           for _ in range(min(BATCH, size - start))]
            n, secs = rig.write_stream(batches())
            sized_written += n
            sized_secs += secs
        results["write_batched_per_s"] = round(sized_written / sized_secs)
        small_store = sized_written + unbatched_n
        results["querymk_small_store"] = {"store": small_store, **{
            label: time_queries(rig, f"intent:bench-{label}", "env:local", q)
            for label in SIZED_TAGS}}

        # 2. fill to the full size over many tags, with QueryMK running concurrently
        remaining = max(0, args.total - small_store)
        during: list[float] = []
        stop = threading.Event()

        def query_during_fill():   # a planner calibrating ~50 times a second
            while not stop.wait(0.02):
                t0 = time.perf_counter()
                rig.query(op="query_mk", space="intent:bench-1k", entity="env:local", n=10)
                during.append((time.perf_counter() - t0) * 1000)

        def spread():
            left = remaining
            while left > 0:
                size = min(BATCH, left)
                batch = []
                for _ in range(size):
                    t = rng.randrange(SPREAD_TAGS)
                    if t % 10 == 0:
                        space, entity = f"intent:task-{t}", "env:local"
                    else:
                        space, entity = f"tool:{('shell', 'read_file', 'search', 'glob')[t % 4]}", \
                            f"target:/home/user/project/{t}/file.txt"
                    batch.append(megram(rng, space, entity, now))
                left -= size
                yield batch
        watcher = threading.Thread(target=query_during_fill, daemon=True)
        watcher.start()
        cpu0 = rig.cpu_s()
        n, secs = rig.write_stream(spread())
        cpu1 = rig.cpu_s()
        stop.set()
        watcher.join(30)
        results["write_fill_per_s"] = round(n / secs) if secs else 0
        results["fill_cpu_us_per_megram"] = {
            "memory_process": round((cpu1[0] - cpu0[0]) / max(n, 1) * 1e6, 1),
            "benchmark_sender": round((cpu1[1] - cpu0[1]) / max(n, 1) * 1e6, 1)}
        results["querymk_1k_during_fill"] = {
            "p50_ms": round(percentile(during, 50), 2), "p95_ms": round(percentile(during, 95), 2),
            "samples": len(during)} if during else {}
        stats = rig.query(op="stats").stats
        results["store"] = {"megrams": stats["megrams"], "tags": stats["tags"],
                            "file_mb": round(stats["file_bytes"] / 2**20, 1),
                            "map_mb": round(stats["map_size"] / 2**20), "resizes": stats["resizes"]}
        results["querymk_full_store"] = {
            label: time_queries(rig, f"intent:bench-{label}", "env:local", q)
            for label in SIZED_TAGS}
        cold = []
        for _ in range(min(q, 50)):     # a write to the tag first (the writer refreshes the cache)
            rig.write_stream([[megram(rng, "intent:bench-100k", "env:local", now)]])
            t0 = time.perf_counter()
            rig.query(op="query_mk", space="intent:bench-100k", entity="env:local", n=10)
            cold.append((time.perf_counter() - t0) * 1000)
        results["querymk_100k_after_write"] = {"p50_ms": round(percentile(cold, 50), 2),
                                               "p95_ms": round(percentile(cold, 95), 2)}
        t0 = time.perf_counter()
        groups = rig.query(op="list", n=50).stats["groups"]
        results["list_all_tags"] = {"tags": groups,
                                    "ms": round((time.perf_counter() - t0) * 1000, 1)}
        results["rss_full_store"] = rig.rss_mb()
        results["querymk_100k_in_process"] = time_in_process(
            rig.settings.memory_path, "intent:bench-100k", "env:local", min(q, 100))

        # 3. one Dreamer cycle over the full store, triggered by a FinalResult
        t0 = time.perf_counter()
        rig.ggs.publish(FinalResult(task_id="bench", directive="accept", summary="bench"))
        event = rig.events.get(timeout=900)
        results["dreamer"] = {"wall_s": round(time.perf_counter() - t0, 2),
                              "cycle_s": round(event.elapsed_ms / 1000, 2),
                              "gc_deleted": event.gc_deleted, "demoted": len(event.demoted),
                              "promoted": len(event.promoted), "llm_calls": llm.calls("memory"),
                              "error": event.error[:200]}
        last = rig.query(op="stats").stats["dreamer"]["last"]
        results["dreamer"].update({k: last[k] for k in ("plan_ms", "apply_ms", "consolidate_ms",
                                                        "deferred", "scanned")})
        results["rss_after_dreamer"] = rig.rss_mb()
        results["megrams_after_dreamer"] = rig.query(op="stats").stats["megrams"]
    finally:
        rig.close()
        llm.stop()

    if args.json:
        print(json.dumps(results, indent=2))
        return
    base = results["baseline_empty_tag"]["p50_ms"]
    print(f"QueryMK over the bus, empty tag (baseline): p50 {base} ms, "
          f"p95 {results['baseline_empty_tag']['p95_ms']} ms")
    for key, title in (("querymk_small_store", "store of %d" % results["querymk_small_store"]
                        ["store"]), ("querymk_full_store",
                                     "store of %d" % results["store"]["megrams"])):
        for label in SIZED_TAGS:
            fig = results[key][label]
            print(f"QueryMK {label:>4} Megrams on the tag, {title}: p50 {fig['p50_ms']} ms "
                  f"(x{fig['p50_ms'] / base:.1f} baseline), p95 {fig['p95_ms']} ms")
    print(f"QueryMK 100k right after an acked write to the tag: "
          f"{results['querymk_100k_after_write']}")
    print(f"QueryMK 100k in-process, no bus, no cache: {results['querymk_100k_in_process']}")
    print(f"QueryMK 1k while the store fills: {results['querymk_1k_during_fill']}")
    print(f"acked writes: batched {results['write_batched_per_s']}/s (fill "
          f"{results['write_fill_per_s']}/s) vs one per message {results['write_unbatched_per_s']}/s"
          f" (x{results['write_batched_per_s'] / results['write_unbatched_per_s']:.0f})")
    print(f"CPU per Megram during the fill: {results['fill_cpu_us_per_megram']} µs")
    print(f"`artoo memory ls` over every tag of the full store: {results['list_all_tags']}")
    print(f"store: {results['store']}")
    print(f"Dreamer cycle: {results['dreamer']}")
    print(f"memory RSS at full store: {results['rss_full_store']}, after the Dreamer "
          f"{results['rss_after_dreamer']} ({results['megrams_after_dreamer']} Megrams left)")


if __name__ == "__main__":
    main()
