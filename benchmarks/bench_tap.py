"""Tap and auditor benchmarks (issue 7): log append throughput with the hash chain and batched fsync,
`tap verify` speed, end-to-end capture into the log through a real proxy, and on-demand audit report
latency on a busy bus.

Baselines measured in the same run: append = the same bytes written with the same fsync cadence but
no hashing/chaining; verify = one SHA-256 pass over the same bytes (no per-record work); report
latency = a `ping` over the same operator socket (no report built).

Run: `.venv/bin/python benchmarks/bench_tap.py [--records 200000] [--json]`.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests"))

from auditor import log as L  # noqa: E402
from protocol.envelope import Envelope, encode  # noqa: E402
from protocol.messages import LlmUsage  # noqa: E402


def envelope_bytes(i: int) -> bytes:
    """A realistic captured message (~330 B envelope, like the bus benchmark's LlmUsage)."""
    msg = LlmUsage(task_id="t-bench", role="planner", tier="BRAIN", model="bench-model",
                   prompt_tokens=i, completion_tokens=i, latency_ms=12.5)
    return encode(Envelope(type="LlmUsage", body=msg.model_dump(), sender="planner",
                           node="planner-0-1-abcd", task="t-bench", seq=i))


def pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(p / 100 * (len(ordered) - 1))))]


def bench_append(tmp: Path, n: int, interval: float) -> dict:
    """Appends as the tap does them: records handed to the kernel per batch, fsync + HEAD at most
    `interval` after the first unsynced record."""
    payloads = [envelope_bytes(i) for i in range(1000)]
    topic = b"LlmUsage/t-bench"

    w = L.LogWriter(tmp / "chain", segment_bytes=64 << 20).open()
    t0 = time.perf_counter()
    next_sync = t0 + interval
    for i in range(n):
        w.append(L.MSG, time.time(), topic, payloads[i % 1000], 1, i + 1)
        if i % 256 == 255:
            w.flush()
            now = time.perf_counter()
            if now >= next_sync:
                w.sync()
                next_sync = now + interval
    w.close()
    chained = time.perf_counter() - t0

    fd = os.open(tmp / "plain.bin", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    t0 = time.perf_counter()
    next_sync = t0 + interval
    buf = []
    for i in range(n):
        buf.append(topic + payloads[i % 1000])
        if i % 256 == 255:
            os.write(fd, b"".join(buf))
            buf.clear()
            now = time.perf_counter()
            if now >= next_sync:
                os.fsync(fd)
                next_sync = now + interval
    os.write(fd, b"".join(buf))
    os.fsync(fd)
    os.close(fd)
    plain = time.perf_counter() - t0
    return {"records": n, "chained_per_s": n / chained, "plain_per_s": n / plain,
            "ratio_to_plain": plain / chained, "fsyncs": w.fsyncs,
            "bytes": w.bytes_written}


def bench_verify(directory: Path, n: int) -> dict:
    res = L.verify(directory)
    assert res.ok and res.records == n, res
    t0 = time.perf_counter()
    h = hashlib.sha256()
    for seg in L.list_segments(directory):
        h.update(seg.read_bytes())
    raw = time.perf_counter() - t0
    return {"records": n, "verify_per_s": n / res.elapsed_s, "verify_s": res.elapsed_s,
            "one_pass_sha256_s": raw, "ratio_to_one_pass": raw / res.elapsed_s,
            "bytes": res.bytes}


def bench_live(n_capture: int, requests: int) -> dict:
    """A real proxy + tap + auditor: capture throughput into the log, report latency on a busy
    bus."""
    from audit_support import capture_stats, start_bus, start_tap, wait_until
    from auditor.operator import query
    from conftest import start_process, stop_process
    from protocol.bus import BusClient
    from protocol.settings import load_settings

    root = Path(tempfile.mkdtemp(prefix="bt-", dir="/tmp"))
    (root / "home").mkdir()
    os.environ.update({"ARTOO_HOME": str(root / "home"), "ARTOO_WORKSPACE": str(root / "ws"),
                       "ARTOO_SCALE": "1"})
    settings = load_settings()
    settings.ensure_dirs()
    procs = [start_bus(settings)]
    out: dict = {}
    try:
        procs.append(start_tap(settings))
        procs.append(start_process(["-m", "auditor.auditor"], {}, "auditor"))
        wait_until(lambda: query(settings, "ping", 2.0), 20, "the auditor")
        pub = BusClient("planner", settings=settings, heartbeat=False).start()
        msgs = [LlmUsage(task_id="t-bench", role="planner", tier="BRAIN", latency_ms=1.0)
                for _ in range(1000)]
        base = capture_stats(settings)["captured"]
        t0 = time.perf_counter()
        for i in range(n_capture):
            pub.publish(msgs[i % 1000])
        target = base + n_capture
        wait_until(lambda: capture_stats(settings)["acked"] >= target, 120,
                   "the tap to acknowledge everything", interval=0.01)
        elapsed = time.perf_counter() - t0
        out["capture"] = {"messages": n_capture, "fsynced_per_s": n_capture / elapsed}

        # report latency while ~2,000 msgs/s flow
        stop = threading.Event()

        def background():
            i = 0
            while not stop.is_set():
                for _ in range(20):
                    pub.publish(msgs[i % 1000])
                    i += 1
                stop.wait(0.01)

        bg = threading.Thread(target=background)
        bg.start()
        try:
            ping, report = [], []
            for _ in range(requests):
                t = time.perf_counter()
                query(settings, "ping", 5.0)
                ping.append((time.perf_counter() - t) * 1000)
                t = time.perf_counter()
                query(settings, "report", 5.0)
                report.append((time.perf_counter() - t) * 1000)
        finally:
            stop.set()
            bg.join()
        out["report_ms"] = {"requests": requests, "p50": statistics.median(report),
                            "p95": pct(report, 95), "max": max(report),
                            "ping_p50": statistics.median(ping)}
        pub.stop()
    finally:
        for proc in reversed(procs):
            stop_process(proc)
        shutil.rmtree(root, ignore_errors=True)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, default=200_000)
    ap.add_argument("--capture", type=int, default=50_000)
    ap.add_argument("--requests", type=int, default=50)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="bench-tap-"))
    try:
        append = bench_append(tmp, args.records, 0.1)
        verify = bench_verify(tmp / "chain", args.records)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    live = bench_live(args.capture, args.requests)
    result = {"append": append, "verify": verify, **live}
    if args.json:
        print(json.dumps(result, indent=2))
        return 0
    a, v, c, r = append, verify, live["capture"], live["report_ms"]
    print(f"append (SHA-256 chain, fsync ≤100 ms): {a['chained_per_s']:,.0f} records/s "
          f"({a['records']:,} records, {a['fsyncs']} fsyncs); plain write+fsync "
          f"{a['plain_per_s']:,.0f}/s → {a['ratio_to_plain']:.2f}× of plain (target ≥ 20,000/s)")
    print(f"verify: {v['verify_per_s']:,.0f} records/s ({v['records']:,} records, "
          f"{v['bytes'] / 1e6:.1f} MB in {v['verify_s']:.2f}s); one SHA-256 pass over the same "
          f"bytes {v['one_pass_sha256_s']:.2f}s → {v['ratio_to_one_pass']:.2f}× "
          f"(target ≥ 200,000/s)")
    print(f"end-to-end capture (publisher → proxy → relay → tap → fsync → ack): "
          f"{c['fsynced_per_s']:,.0f} msgs/s over {c['messages']:,} messages")
    print(f"on-demand report at ~2,000 msgs/s background: p50 {r['p50']:.1f} ms, p95 "
          f"{r['p95']:.1f} ms, max {r['max']:.1f} ms over {r['requests']} requests "
          f"(socket ping p50 {r['ping_p50']:.2f} ms; budget 3,000 ms)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
