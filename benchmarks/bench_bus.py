"""Bus benchmarks (issue 2): throughput, latency at a fixed rate, request/reply and ack round trips.

Every figure goes through a real `services.runtime.bus` proxy process with envelope + pydantic validation on
both ends (the publisher builds a validated model, the subscriber validates the body it receives).
The baseline is raw pyzmq PUB→SUB between two processes, no proxy and no validation, measured in the
same run. Signing (HMAC-SHA256 per envelope, protocol/signing.py) is on as deployed; the same run
also measures throughput and latency with it off (ARTOO_BUS_SIGN=0, runs interleaved on/off) and
prints the ratio. `--tracing-rounds N` adds interleaved throughput runs with trace context
propagation on and off (BusClient.tracing: every envelope carries a W3C traceparent and every
handler runs in it, as with OTEL_* export on) and latency both ways.
Run: `.venv/bin/python benchmarks/bench_bus.py [--messages 200000] [--json]`.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import multiprocessing as mp
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

import zmq  # noqa: E402

from protocol import tracecontext  # noqa: E402
from protocol.bus import BusClient  # noqa: E402
from protocol.bus.cpulatency import CpuLatency  # noqa: E402
from protocol.envelope import Envelope, encode  # noqa: E402
from protocol.messages import LlmUsage, MemoryQuery, MemoryResult, UserRequest  # noqa: E402
from protocol.settings import load_settings  # noqa: E402
from protocol.signing import new_signer  # noqa: E402

TYPE = "LlmUsage"           # a realistic telemetry-sized message (~330 bytes on the wire)


def sample(i: int, stamp_ns: int = 0) -> LlmUsage:
    """One validated message; `prompt_tokens` carries the sender's CLOCK_MONOTONIC stamp."""
    return LlmUsage(task_id="t-bench", role="planner", tier="BRAIN", model="bench-model",
                    prompt_tokens=stamp_ns, completion_tokens=i, latency_ms=12.5)


def idle_policy() -> str:
    """How this machine's idle CPUs wait, which sets the cost of every wake-up a hop needs. On
    a KVM guest with the `haltpoll` cpuidle driver and `guest_halt_poll_ns` 0 an idle vCPU halts
    at once, and waking it is a VM exit: a raw ping-pong through the proxy measured 271-351 us
    here, 93 us with the kernel's default 200 us of halt-polling (docs/BENCHMARKS.md)."""
    def read(path: str) -> str | None:
        try:
            return Path(path).read_text().strip()
        except OSError:
            return None
    driver = read("/sys/devices/system/cpu/cpuidle/current_driver") or "unknown"
    poll = read("/sys/module/haltpoll/parameters/guest_halt_poll_ns")
    return f"cpuidle {driver}" + (f", guest_halt_poll_ns {poll}" if poll is not None else "")


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(p / 100 * (len(ordered) - 1))))]


# ------------------------------------------------------------------------------------------------
# processes
# ------------------------------------------------------------------------------------------------

def _bus_subscriber(env: dict, expected: int, ready, results) -> None:
    """Count validated messages; report the first→last interval and one-way latencies."""
    os.environ.update(env)
    settings = load_settings()
    done = threading.Event()
    state = {"n": 0, "first": 0.0, "last": 0.0, "lat": []}

    def handle(_env, msg: LlmUsage) -> None:
        now = time.monotonic_ns()
        if state["n"] == 0:
            state["first"] = time.perf_counter()
        state["n"] += 1
        if msg.prompt_tokens:
            state["lat"].append((now - msg.prompt_tokens) / 1000.0)
        if state["n"] >= expected:
            state["last"] = time.perf_counter()
            done.set()

    client = BusClient("metaval", settings=settings, heartbeat=False)
    client.tracing = os.environ.get("BENCH_TRACING") == "1"
    client.on(TYPE, handle)
    client.start()
    ready.set()
    done.wait(120)
    if not state["last"]:
        state["last"] = time.perf_counter()
    results.put({"n": state["n"], "elapsed": state["last"] - state["first"], "lat": state["lat"],
                 "rejected": sum(client.rejected.values()), "gaps": sum(client.gaps.values())})
    client.stop()


def _raw_subscriber(endpoint: str, expected: int, ready, results) -> None:
    ctx = zmq.Context()
    sub = ctx.socket(zmq.SUB)
    sub.setsockopt(zmq.RCVHWM, 0)
    sub.setsockopt(zmq.SUBSCRIBE, b"")
    sub.connect(endpoint)
    # Raw PUB/SUB has no handshake of its own: the publisher probes until we answer via `ready`.
    n, first = 0, 0.0
    while True:
        if not sub.poll(30000):
            break
        frames = sub.recv_multipart()
        if frames[0] == b"probe":
            ready.set()
            continue
        if n == 0:
            first = time.perf_counter()
        n += 1
        if n >= expected:
            break
    results.put({"n": n, "elapsed": time.perf_counter() - first})
    sub.close(0)
    ctx.term()


def _raw_stamped_subscriber(endpoint: str, expected: int, ready, results) -> None:
    """Raw pyzmq SUB behind the proxy: latency of each stamped frame, no envelope."""
    ctx = zmq.Context()
    sub = ctx.socket(zmq.SUB)
    sub.connect(endpoint)
    sub.setsockopt(zmq.SUBSCRIBE, b"raw/")
    lat: list[float] = []
    ready.set()
    while len(lat) < expected:
        _, payload = sub.recv_multipart()
        if payload != b"probe":
            lat.append((time.monotonic_ns() - int(payload)) / 1000)
    results.put(lat)
    sub.close(0)
    ctx.term()


def _replier(env: dict, ready) -> None:
    """A memory-like role: answers MemoryQuery requests and acknowledges UserRequest work."""
    os.environ.update(env)
    settings = load_settings()
    client = BusClient("memory", settings=settings, heartbeat=False)
    client.on("MemoryQuery", lambda e, m: MemoryResult(op=m.op, stats={"n": m.n}), request=True)
    client.on("UserRequest", lambda e, m: None, ack=True)
    client.start()
    ready.set()
    stop = threading.Event()
    import signal
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    stop.wait(300)
    client.stop()


# ------------------------------------------------------------------------------------------------
# measurements
# ------------------------------------------------------------------------------------------------

def bench_raw(n: int, ctx_mp) -> dict:
    """Baseline: raw pyzmq PUB→SUB (ipc), no proxy, no envelope, no validation."""
    run = Path(tempfile.mkdtemp(prefix="ab-", dir="/tmp"))
    endpoint = f"ipc://{run}/raw.sock"
    ctx = zmq.Context()
    pub = ctx.socket(zmq.PUB)
    pub.setsockopt(zmq.SNDHWM, 0)
    pub.bind(endpoint)
    ready, results = ctx_mp.Event(), ctx_mp.Queue()
    proc = ctx_mp.Process(target=_raw_subscriber, args=(endpoint, n, ready, results))
    proc.start()
    while not ready.is_set():
        pub.send_multipart([b"probe", b""])
        ready.wait(0.01)
    payload = encode(Envelope(type=TYPE, body=sample(0).model_dump(), sender="planner",
                              node="planner-0-1-abcd"))
    topic = f"{TYPE}/t-bench".encode()
    t0 = time.perf_counter()
    for _ in range(n):
        pub.send_multipart([topic, payload])
    sent_s = time.perf_counter() - t0
    res = results.get(timeout=120)
    proc.join(10)
    pub.close(0)
    ctx.term()
    shutil.rmtree(run, ignore_errors=True)
    return {"received": res["n"], "rate": res["n"] / res["elapsed"], "send_rate": n / sent_s,
            "bytes": len(payload) + len(topic)}


def _tracing_publisher(pub: BusClient, env: dict) -> None:
    """With BENCH_TRACING=1 the publisher sends from within a span's context, as a role does."""
    if env.get("BENCH_TRACING") == "1":
        pub.tracing = True
        tracecontext.CURRENT.set(tracecontext.format(tracecontext.task_trace_id("t-bench"), 1))
    else:
        tracecontext.CURRENT.set(None)


def bench_throughput(n: int, env: dict, settings, ctx_mp) -> dict:
    ready, results = ctx_mp.Event(), ctx_mp.Queue()
    proc = ctx_mp.Process(target=_bus_subscriber, args=(env, n, ready, results))
    proc.start()
    ready.wait(30)
    pub = BusClient("planner", settings=settings, heartbeat=False).start()
    _tracing_publisher(pub, env)
    pub.handshake()  # the subscriber joined before us; its subscription reached the proxy
    t0 = time.perf_counter()
    for i in range(n):
        pub.publish(sample(i), task="t-bench")
    sent_s = time.perf_counter() - t0
    res = results.get(timeout=180)
    proc.join(10)
    pub.stop()
    return {"received": res["n"], "rate": res["n"] / max(res["elapsed"], 1e-9),
            "send_rate": n / sent_s, "rejected": res["rejected"], "gaps": res["gaps"]}


def paced(n: int, rate: int):
    """0 … n-1, each yielded at its time at `rate` a second: precise, and sleeping the bulk of
    each gap keeps the CPU free for the receiver."""
    next_at = time.perf_counter()
    for i in range(n):
        while True:
            left = next_at - time.perf_counter()
            if left <= 0:
                break
            if left > 0.0003:
                time.sleep(left - 0.0002)
        yield i
        next_at += 1.0 / rate


def bench_latency(rate: int, seconds: float, env: dict, settings, ctx_mp) -> dict:
    n = int(rate * seconds)
    ready, results = ctx_mp.Event(), ctx_mp.Queue()
    proc = ctx_mp.Process(target=_bus_subscriber, args=(env, n, ready, results))
    proc.start()
    ready.wait(30)
    pub = BusClient("planner", settings=settings, heartbeat=False).start()
    _tracing_publisher(pub, env)
    pub.handshake()
    for i in paced(n, rate):
        pub.publish(sample(i, time.monotonic_ns()), task="t-bench")
    res = results.get(timeout=60)
    proc.join(10)
    pub.stop()
    lat = res["lat"]
    return {"received": res["n"], "p50_us": percentile(lat, 50), "p99_us": percentile(lat, 99),
            "max_us": max(lat)}


def bench_raw_latency(rate: int, seconds: float, settings, ctx_mp) -> dict:
    """The floor under `bench_latency`: raw pyzmq PUB → the same proxy → SUB at the same rate,
    no envelope, no validation (with ARTOO_CPU_LATENCY=busy under the same request the clients
    make)."""
    n = int(rate * seconds)
    hold = CpuLatency(settings.cpu_latency)
    ready, results = ctx_mp.Event(), ctx_mp.Queue()
    proc = ctx_mp.Process(target=_raw_stamped_subscriber,
                          args=(settings.endpoint("xpub"), n, ready, results))
    proc.start()
    ready.wait(30)
    ctx = zmq.Context()
    pub = ctx.socket(zmq.PUB)
    pub.connect(settings.endpoint("xsub"))
    hold.touch()
    for _ in range(50):   # the subscription reaches the proxy: probes, not measured
        pub.send_multipart([b"raw/t", b"probe"])
        time.sleep(0.01)
    for _ in paced(n, rate):
        pub.send_multipart([b"raw/t", str(time.monotonic_ns()).encode()])
    lat = results.get(timeout=60)
    proc.join(10)
    hold.close()
    pub.close(0)
    ctx.term()
    return {"p50_us": percentile(lat, 50), "p99_us": percentile(lat, 99)}


def bench_round_trips(n: int, env: dict, settings, ctx_mp) -> dict:
    ready = ctx_mp.Event()
    proc = ctx_mp.Process(target=_replier, args=(env, ready))
    proc.start()
    ready.wait(30)
    client = BusClient("planner", settings=settings, heartbeat=False).start()
    client.handshake()
    for _ in range(50):  # warm-up
        client.request(MemoryQuery(op="stats"), to="memory")
    req = []
    for i in range(n):
        t0 = time.perf_counter()
        _env, reply = client.request(MemoryQuery(op="stats", n=i), to="memory")
        req.append((time.perf_counter() - t0) * 1e6)
        assert reply.stats["n"] == i
    acked = []
    user = BusClient("user", settings=settings, heartbeat=False).start()
    user.handshake()
    for i in range(n):
        done = threading.Event()
        t0 = time.perf_counter()
        user.send(UserRequest(task_id=f"t-{i}", text="hi"), to="memory",
                  on_done=lambda ok, d=done: d.set())
        done.wait(10)
        acked.append((time.perf_counter() - t0) * 1e6)
    user.stop()
    client.stop()
    proc.terminate()
    proc.join(10)
    return {"request_p50_us": percentile(req, 50), "request_p99_us": percentile(req, 99),
            "ack_p50_us": percentile(acked, 50), "ack_p99_us": percentile(acked, 99)}


def bench_signing(n: int, rate: int, seconds: float, env: dict, settings, ctx_mp,
                  rounds: int) -> dict:
    """Throughput with signing on and off, interleaved (off/on, on/off, ...) so load on the machine
    hits both alike; latency at a fixed rate both ways; and the per-message cost of the MAC."""
    modes = {"on": ({**env, "ARTOO_BUS_SIGN": "1"}, dataclasses.replace(settings, bus_sign=True)),
             "off": ({**env, "ARTOO_BUS_SIGN": "0"}, dataclasses.replace(settings, bus_sign=False))}
    runs: dict[str, list[dict]] = {"on": [], "off": []}
    for r in range(rounds):
        for mode in (("off", "on") if r % 2 == 0 else ("on", "off")):
            runs[mode].append(bench_throughput(n, *modes[mode], ctx_mp))
    out: dict = {}
    for mode, results in runs.items():
        rates = sorted(x["rate"] for x in results)
        out[mode] = {"rates": rates, "median": rates[len(rates) // 2],
                     "rejected": sum(x["rejected"] for x in results),
                     "received": sum(x["received"] for x in results)}
    out["ratio_on_off"] = out["on"]["median"] / out["off"]["median"]
    out["latency"] = {mode: bench_latency(rate, seconds, *modes[mode], ctx_mp)
                      for mode in ("off", "on")}
    payload = encode(Envelope(type=TYPE, body=sample(0).model_dump(), sender="planner",
                              node="bench", task="t-bench"))
    topic, signer, k = b"LlmUsage/t-bench", new_signer(os.urandom(32)), 100_000
    t0 = time.perf_counter()
    for _ in range(k):
        mac = signer.mac(topic, payload)
    t1 = time.perf_counter()
    for _ in range(k):
        signer.verify(topic, payload, mac)
    t2 = time.perf_counter()
    out["mac_us"] = (t1 - t0) / k * 1e6
    out["verify_us"] = (t2 - t1) / k * 1e6
    out["payload_bytes"] = len(payload)
    return out


def bench_cpu_latency(rate: int, seconds: float, round_trips: int, env: dict, settings, ctx_mp,
                      rounds: int) -> dict:
    """Latency at a fixed rate and request/reply with ARTOO_CPU_LATENCY off and busy (idle CPUs
    kept polling while a client has work: protocol/bus/cpulatency.py), interleaved."""
    modes = {m: ({**env, "ARTOO_CPU_LATENCY": m}, dataclasses.replace(settings, cpu_latency=m))
             for m in ("off", "busy")}
    runs: dict[str, list[dict]] = {"off": [], "busy": []}
    for r in range(rounds):
        for mode in (("off", "busy") if r % 2 == 0 else ("busy", "off")):
            lat = bench_latency(rate, seconds, *modes[mode], ctx_mp)
            raw = bench_raw_latency(rate, seconds, modes[mode][1], ctx_mp)
            runs[mode].append({**lat, "raw_p50_us": raw["p50_us"], "raw_p99_us": raw["p99_us"],
                               **bench_round_trips(round_trips, *modes[mode], ctx_mp)})
    return runs


def bench_tracing(n: int, rate: int, seconds: float, env: dict, settings, ctx_mp,
                  rounds: int) -> dict:
    """Throughput with trace propagation on and off, interleaved; latency at a fixed rate both."""
    modes = {"on": {**env, "BENCH_TRACING": "1"}, "off": {**env, "BENCH_TRACING": "0"}}
    runs: dict[str, list[float]] = {"on": [], "off": []}
    for r in range(rounds):
        for mode in (("off", "on") if r % 2 == 0 else ("on", "off")):
            runs[mode].append(bench_throughput(n, modes[mode], settings, ctx_mp)["rate"])
    out: dict = {mode: {"rates": sorted(v), "median": sorted(v)[len(v) // 2]}
                 for mode, v in runs.items()}
    out["ratio_on_off"] = out["on"]["median"] / out["off"]["median"]
    out["latency"] = {mode: bench_latency(rate, seconds, modes[mode], settings, ctx_mp)
                      for mode in ("off", "on")}
    return out


def wait_ready(settings, timeout_s: float = 30.0) -> None:
    """Until a client's handshake through the proxy succeeds."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            BusClient("user", settings=settings, heartbeat=False).start(timeout=1).stop()
            return
        except Exception:
            if time.monotonic() > deadline:
                raise


def start_bus(env: dict, settings, with_tap: bool = False) -> list[subprocess.Popen]:
    """The proxy (and the tap) as subprocesses; returns once a client's handshake succeeds."""
    modules = ["services.runtime.bus"] + (["auditor.tap"] if with_tap else [])
    procs = [subprocess.Popen([sys.executable, "-m", m], cwd=REPO, env={**os.environ, **env},
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
             for m in modules]
    wait_ready(settings)
    if with_tap:  # the tap is up once its heartbeat is on the bus
        seen = threading.Event()
        probe = BusClient("user", settings=settings, heartbeat=False)
        probe.on("Heartbeat", lambda e, m: seen.set(), task="tap")
        probe.start()
        ok = seen.wait(30)
        probe.stop()
        if not ok:
            raise TimeoutError("the tap never sent a heartbeat")
    return procs


def stop_all(procs: list[subprocess.Popen]) -> None:
    for proc in procs:
        if proc.poll() is None:
            proc.terminate()
            proc.wait(15)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=200_000)
    parser.add_argument("--rate", type=int, default=1000)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--round-trips", type=int, default=2000)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--no-capture-run", action="store_true",
                        help="skip the throughput run with capture on and the tap running")
    parser.add_argument("--tracing-rounds", type=int, default=0,
                        help="interleaved trace propagation on/off throughput runs (0: skip)")
    parser.add_argument("--only-tracing", action="store_true",
                        help="run only the tracing on/off comparison")
    parser.add_argument("--cpu-latency-rounds", type=int, default=2,
                        help="interleaved latency and request/reply runs with ARTOO_CPU_LATENCY "
                             "off and busy (0: skip)")
    parser.add_argument("--sign-rounds", type=int, default=3,
                        help="interleaved signing on/off throughput runs of each (0: skip)")
    args = parser.parse_args()

    root = Path(tempfile.mkdtemp(prefix="ab-", dir="/tmp"))
    env = {"ARTOO_HOME": str(root / "home"), "ARTOO_WORKSPACE": str(root / "ws"),
           "ARTOO_CAPTURE": "0", "ARTOO_HWM": str(max(100_000, args.messages + 1000))}
    os.environ.update(env)
    settings = load_settings()
    settings.ensure_dirs()
    ctx_mp = mp.get_context("spawn")
    out: dict = {"idle_policy": idle_policy()}
    procs = start_bus(env, settings)
    try:
        if args.only_tracing:
            out["tracing"] = bench_tracing(args.messages, args.rate, args.seconds, env, settings,
                                           ctx_mp, max(1, args.tracing_rounds))
            print_tracing(out["tracing"], args)
            return 0
        out["raw"] = bench_raw(args.messages, ctx_mp)
        out["bus"] = bench_throughput(args.messages, env, settings, ctx_mp)
        out["latency"] = bench_latency(args.rate, args.seconds, env, settings, ctx_mp)
        out["round_trips"] = bench_round_trips(args.round_trips, env, settings, ctx_mp)
        if args.sign_rounds > 0:
            out["signing"] = bench_signing(args.messages, args.rate, args.seconds, env, settings,
                                           ctx_mp, args.sign_rounds)
        if args.cpu_latency_rounds > 0:
            out["cpu_latency"] = bench_cpu_latency(args.rate, args.seconds, args.round_trips,
                                                   env, settings, ctx_mp, args.cpu_latency_rounds)
        if args.tracing_rounds > 0:
            out["tracing"] = bench_tracing(args.messages, args.rate, args.seconds, env, settings,
                                           ctx_mp, args.tracing_rounds)
        stop_all(procs)
        if not args.no_capture_run:  # the proxy as deployed: capture on, the tap logging it all
            env["ARTOO_CAPTURE"] = "1"
            os.environ.update(env)
            procs = start_bus(env, settings, with_tap=True)
            out["bus_capture"] = bench_throughput(args.messages, env, settings, ctx_mp)
    finally:
        stop_all(procs)
        shutil.rmtree(root, ignore_errors=True)

    if args.json:
        print(json.dumps(out, indent=2))
        return 0
    raw, bus, lat, rt = out["raw"], out["bus"], out["latency"], out["round_trips"]
    print(f"machine: {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.2f}, {out['idle_policy']}")
    print(f"throughput, 1 publisher -> 1 subscriber, {args.messages} x {TYPE}:")
    print(f"  raw pyzmq PUB->SUB (no proxy, no validation): {raw['rate']:>9,.0f} msgs/s "
          f"({raw['received']} received, {raw['bytes']} B/msg)")
    print(f"  artoo bus (proxy + validation both ends):     {bus['rate']:>9,.0f} msgs/s "
          f"({bus['received']} received, publish call rate {bus['send_rate']:,.0f}/s, "
          f"gaps {bus['gaps']}, rejected {bus['rejected']})   target >= 40,000")
    print(f"  ratio bus/raw: {bus['rate'] / raw['rate']:.2f}")
    if "bus_capture" in out:
        cap = out["bus_capture"]
        print(f"  artoo bus, capture on + tap writing the audit log: {cap['rate']:>9,.0f} msgs/s "
              f"({cap['received']} received, ratio to capture off {cap['rate'] / bus['rate']:.2f})")
    print(f"latency at {args.rate} msgs/s for {args.seconds:.0f} s ({lat['received']} msgs): "
          f"p50 {lat['p50_us']:.0f} us, p99 {lat['p99_us']:.0f} us, max {lat['max_us']:.0f} us"
          f"   targets p50 <= 300 us, p99 <= 2000 us")
    print(f"request/reply round trip ({args.round_trips}): p50 {rt['request_p50_us']:.0f} us, "
          f"p99 {rt['request_p99_us']:.0f} us   target p50 <= 1000 us")
    print(f"acknowledged work message send->ack ({args.round_trips}): p50 {rt['ack_p50_us']:.0f} us, "
          f"p99 {rt['ack_p99_us']:.0f} us")
    if "signing" in out:
        sg = out["signing"]
        print(f"signing (HMAC-SHA256 per envelope), {args.sign_rounds} interleaved runs each, "
              f"{args.messages} x {TYPE}:")
        for mode in ("on", "off"):
            print(f"  signing {mode:>3}: median {sg[mode]['median']:>9,.0f} msgs/s  (runs: "
                  + ", ".join(f"{r:,.0f}" for r in sg[mode]["rates"])
                  + f"; rejected {sg[mode]['rejected']})")
        print(f"  ratio on/off: {sg['ratio_on_off']:.2f}")
        lon, loff = sg["latency"]["on"], sg["latency"]["off"]
        print(f"  latency at {args.rate} msgs/s: on p50 {lon['p50_us']:.0f} us / p99 "
              f"{lon['p99_us']:.0f} us, off p50 {loff['p50_us']:.0f} us / "
              f"p99 {loff['p99_us']:.0f} us")
        print(f"  MAC of one {sg['payload_bytes']} B envelope: sign {sg['mac_us']:.2f} us, "
              f"verify {sg['verify_us']:.2f} us")
    if "cpu_latency" in out:
        print(f"idle CPUs polling while a client has work (ARTOO_CPU_LATENCY), "
              f"{args.cpu_latency_rounds} interleaved runs each   issue 34 targets: p99 at "
              f"{args.rate} msgs/s <= 500 us, request/reply p50 <= 300 us")
        for mode, runs in out["cpu_latency"].items():
            def col(key: str) -> str:
                return " / ".join(f"{r[key]:.0f}" for r in runs)
            print(f"  {mode:>4}: at {args.rate} msgs/s p50 {col('p50_us')} us, p99 {col('p99_us')} "
                  f"us (raw pyzmq through the proxy: p50 {col('raw_p50_us')} us, p99 "
                  f"{col('raw_p99_us')} us); request/reply p50 {col('request_p50_us')} us, p99 "
                  f"{col('request_p99_us')} us; send->ack p50 {col('ack_p50_us')} us")
    if "tracing" in out:
        print_tracing(out["tracing"], args)
    return 0


def print_tracing(tr: dict, args) -> None:
    if args.json:
        print(json.dumps({"tracing": tr}, indent=2))
        return
    print(f"trace propagation (traceparent in every envelope, handlers in its context), "
          f"{len(tr['on']['rates'])} interleaved runs each, {args.messages} x {TYPE}:")
    for mode in ("off", "on"):
        print(f"  tracing {mode:>3}: median {tr[mode]['median']:>9,.0f} msgs/s  (runs: "
              + ", ".join(f"{r:,.0f}" for r in tr[mode]["rates"]) + ")")
    print(f"  ratio on/off: {tr['ratio_on_off']:.2f}")
    lon, loff = tr["latency"]["on"], tr["latency"]["off"]
    print(f"  latency at {args.rate} msgs/s: off p50 {loff['p50_us']:.0f} us / p99 "
          f"{loff['p99_us']:.0f} us, on p50 {lon['p50_us']:.0f} us / p99 {lon['p99_us']:.0f} us")


if __name__ == "__main__":
    raise SystemExit(main())
