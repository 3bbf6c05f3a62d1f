"""Where a bus request/reply round trip spends its time (issue 34), leg by leg, beside a raw
pyzmq ping-pong through the same proxy.

Each process stamps `time.monotonic_ns()` (one clock for the whole machine) where a frame is
sent, where the replier's loop thread has it, where the handler runs and where the reply reaches
the requesting thread (on its own reply socket, protocol/bus/replies.py); medians per leg over N
round trips. The raw ping-pong is the floor the
wire sets: two Python processes blocking in `recv` on the same XSUB/XPUB proxy.

    .venv/bin/python benchmarks/bench_request_legs.py [--round-trips 2000]
"""
from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

import zmq

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_bus  # noqa: E402
from protocol.bus import BusClient  # noqa: E402
from protocol.bus.cpulatency import CpuLatency  # noqa: E402
from protocol.messages import MemoryQuery, MemoryResult  # noqa: E402
from protocol.settings import load_settings  # noqa: E402


def _stamp_bus(rec: dict) -> None:
    """Stamp, in this process, each MemoryQuery/MemoryResult frame sent and each frame taken in,
    by the loop thread or a requesting thread (wrapping the methods every such frame passes)."""
    check, send = BusClient._check_frames, BusClient._send_payload_locked

    def stamped_in(self, frames):
        if b"Memory" in frames[0]:
            rec.setdefault("in", []).append(time.monotonic_ns())
        return check(self, frames)

    def stamped_out(self, topic, payload, msg_id="", pending=None):
        frames = send(self, topic, payload, msg_id, pending)
        if b"Memory" in topic:
            rec.setdefault("out", []).append(time.monotonic_ns())
        return frames

    BusClient._check_frames, BusClient._send_payload_locked = stamped_in, stamped_out


def _replier(env: dict, ready, results, seconds: float) -> None:
    os.environ.update(env)
    rec: dict = {}
    _stamp_bus(rec)
    handled: list[int] = []

    def answer(_env, msg):
        handled.append(time.monotonic_ns())
        return MemoryResult(op=msg.op, stats={"n": msg.n})

    client = BusClient("memory", settings=load_settings(), heartbeat=False)
    client.on("MemoryQuery", answer, request=True)
    client.start()
    ready.set()
    time.sleep(seconds)
    results.put((handled, rec))
    client.stop()


def _raw_pair(xsub: str, xpub: str, topic: bytes, timeout_ms: int):
    """A plain PUB to the proxy and a SUB from it, subscribed to `topic`."""
    ctx = zmq.Context()
    pub, sub = ctx.socket(zmq.PUB), ctx.socket(zmq.SUB)
    pub.connect(xsub)
    sub.connect(xpub)
    sub.setsockopt(zmq.SUBSCRIBE, topic)
    sub.RCVTIMEO = timeout_ms
    return ctx, pub, sub


def _raw_echo(xsub: str, xpub: str, ready, seconds: float) -> None:
    ctx, pub, sub = _raw_pair(xsub, xpub, b"ping", 200)
    ready.set()
    end = time.time() + seconds
    while time.time() < end:
        try:
            frames = sub.recv_multipart()
        except zmq.Again:
            continue
        pub.send_multipart([b"pong", frames[1]])
    pub.close(0)
    sub.close(0)
    ctx.term()


def raw_ping_pong(settings, n: int, ctx_mp) -> float:
    """p50 µs of a raw ping-pong through the proxy, both ends blocking in recv; with
    ARTOO_CPU_LATENCY=busy under the same CPU wake-up latency request the bus clients make."""
    hold = CpuLatency(settings.cpu_latency)
    hold.touch()
    xsub, xpub = settings.endpoint("xsub"), settings.endpoint("xpub")
    ready = ctx_mp.Event()
    proc = ctx_mp.Process(target=_raw_echo, args=(xsub, xpub, ready, 5 + n / 2000))
    proc.start()
    ready.wait(30)
    ctx, pub, sub = _raw_pair(xsub, xpub, b"pong", 100)
    lat: list[float] = []
    while len(lat) < n:       # the first pings race the subscriptions: those time out, unmeasured
        t0 = time.perf_counter()
        pub.send_multipart([b"ping", b"x"])
        try:
            sub.recv_multipart()
        except zmq.Again:
            continue
        lat.append((time.perf_counter() - t0) * 1e6)
    pub.close(0)
    sub.close(0)
    ctx.term()
    proc.join(30)
    hold.close()
    return _p50(lat)


def _p50(values) -> float:
    values = sorted(values)
    return values[len(values) // 2]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--round-trips", type=int, default=2000)
    args = parser.parse_args()
    n = args.round_trips
    root = Path(tempfile.mkdtemp(prefix="ab-", dir="/tmp"))
    env = {"ARTOO_HOME": str(root / "home"), "ARTOO_WORKSPACE": str(root / "ws"),
           "ARTOO_CAPTURE": "0"}
    os.environ.update(env)
    settings = load_settings()
    settings.ensure_dirs()
    ctx_mp = mp.get_context("spawn")
    procs = bench_bus.start_bus(env, settings)
    try:
        ready, results = ctx_mp.Event(), ctx_mp.Queue()
        proc = ctx_mp.Process(target=_replier, args=(env, ready, results, 5 + n / 1000))
        proc.start()
        ready.wait(30)
        rec: dict = {}
        _stamp_bus(rec)
        client = BusClient("planner", settings=settings, heartbeat=False).start()
        client.handshake()
        for _ in range(100):                                   # warm-up
            client.request(MemoryQuery(op="stats"), to="memory")
        rec.clear()
        start, end = [], []
        for i in range(n):
            start.append(time.monotonic_ns())
            client.request(MemoryQuery(op="stats", n=i), to="memory")
            end.append(time.monotonic_ns())
        handled, rrec = results.get(timeout=60)
        client.stop()
        proc.join(10)
        legs = [("request call -> frames sent", start, rec["out"]),
                ("-> the replier's loop has them", rec["out"], rrec["in"]),
                ("-> its handler runs", rrec["in"], handled),
                ("-> reply frames sent", handled, rrec["out"]),
                ("-> the requesting thread has them", rrec["out"], rec["in"]),
                ("-> it returns the reply", rec["in"], end),
                ("round trip", start, end)]
        print(f"machine: {bench_bus.idle_policy()}, ARTOO_CPU_LATENCY={settings.cpu_latency}")
        print(f"request/reply legs over {n} round trips, p50 in us:")
        for name, a, b in legs:
            print(f"  {name:36s} {_p50([(y - x) / 1000 for x, y in zip(a[-n:], b[-n:])]):7.1f}")
        print(f"raw pyzmq ping-pong through the same proxy, p50: "
              f"{raw_ping_pong(settings, n, ctx_mp):.1f} us")
    finally:
        bench_bus.stop_all(procs)
        shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
