"""Per-message CPU cost of the bus hot path and per-command cost of the tool sandbox (issue 34).

In-process, no proxy: what one process spends per message, as CPU time (`time.thread_time`), so
the figure holds on a loaded machine where wall-clock benchmarks swing. Stages:

* publish: build the validated pydantic model + `BusClient.publish` (envelope, msgpack, HMAC, the
  three frame sends on a PUB socket with no peer);
* receive: `BusClient._on_frames` on signed frames as they come off the socket (MAC check,
  decode, envelope and body validation, sequence tracking, replay filter, dispatch to a handler
  that reads one field);
* decode only / encode only / MAC only.

Sandbox (wall clock: it is process work): one command (`basename $PWD`) in a one-shot sandbox
(ARTOO_SANDBOX_REUSE=0) against the same command in the attempt's long-lived sandbox, and the
long-lived sandbox's spawn-to-ready.

`--repo PATH` runs the same measurements against another checkout (e.g. the commit before issue
34 in a temporary directory): before/after in one run on one machine.
Run: `.venv/bin/python benchmarks/bench_hotpath.py [--repo /tmp/base] [--json]`.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent.parent


def per_call_us(fn, n: int, rounds: int = 5) -> float:
    """Median over rounds of the CPU time per call, µs."""
    out = []
    for _ in range(rounds):
        t0 = time.thread_time()
        for i in range(n):
            fn(i)
        out.append((time.thread_time() - t0) / n * 1e6)
    return statistics.median(out)


def bus_figures(n: int) -> dict:
    import zmq
    from protocol.bus import BusClient
    from protocol.envelope import Envelope, decode, encode
    from protocol.messages import LlmUsage
    from protocol.settings import load_settings

    def sample(i: int) -> LlmUsage:
        return LlmUsage(task_id="t-bench", role="planner", tier="BRAIN", model="bench-model",
                        prompt_tokens=123456789, completion_tokens=i, latency_ms=12.5)

    root = Path(tempfile.mkdtemp(prefix="at-hp-", dir="/tmp"))
    os.environ["ARTOO_HOME"] = str(root / "home")
    settings = load_settings()
    settings.ensure_dirs()
    out: dict = {}
    pub = BusClient("planner", settings=settings, heartbeat=False)
    ctx = zmq.Context()
    pub._pub = ctx.socket(zmq.PUB)
    pub._pub.bind(f"ipc://{root}/pub.sock")
    pub._pub_live = True
    out["publish_us"] = per_call_us(lambda i: pub.publish(sample(i), task="t-bench"), n)
    out["model_us"] = per_call_us(sample, n)

    signer = pub._signer
    frames = []
    for i in range(n):
        env = Envelope(type="LlmUsage", body=sample(i).model_dump(), sender="planner",
                       node="planner-0-1-abcd", seq=i + 1, task="t-bench", id=f"m{i}")
        payload = encode(env)
        topic = b"LlmUsage/t-bench"
        frames.append([topic, payload, signer.mac(topic, payload)])
    seen = []

    def handler(_env, msg) -> None:
        seen.append(msg.completion_tokens)

    rounds = []
    for r in range(5):   # a fresh receiver per round: the replay filter must see new frames
        sub = BusClient("metaval", settings=settings, heartbeat=False)
        sub.on("LlmUsage", handler)
        t0 = time.thread_time()
        for f in frames:
            sub._on_frames(f)
        rounds.append((time.thread_time() - t0) / n * 1e6)
        assert not sub.rejected, sub.rejected
    out["receive_us"] = statistics.median(rounds)
    max_bytes = settings.max_frame_bytes
    out["decode_us"] = per_call_us(lambda i: decode(frames[i], max_bytes, signer), n)
    env = Envelope(type="LlmUsage", body=sample(0).model_dump(), sender="planner",
                   node="planner-0-1-abcd", task="t-bench")
    out["encode_us"] = per_call_us(lambda i: encode(env), n)
    topic, payload = frames[0][0], frames[0][1]
    out["mac_us"] = per_call_us(lambda i: signer.mac(topic, payload), n)
    pub._pub.close(0)
    pub._pub_live = False
    ctx.term()
    return out


def sandbox_figures(n: int) -> dict:
    import dataclasses
    from protocol.settings import load_settings
    from services.safety import sandbox
    from services.safety.tools import Toolbox
    root = Path(tempfile.mkdtemp(prefix="at-hp-", dir="/tmp"))
    os.environ["ARTOO_HOME"] = str(root / "home")
    os.environ["ARTOO_WORKSPACE"] = str(root / "ws")
    settings = load_settings()
    settings.ensure_dirs()
    if sandbox.status(settings).mode != "bubblewrap":
        return {"skipped": "no bubblewrap"}
    one_shot = Toolbox(dataclasses.replace(settings, sandbox_reuse=False)
                       if hasattr(settings, "sandbox_reuse") else settings)
    out: dict = {}
    reuse = None
    if hasattr(settings, "sandbox_reuse"):
        reuse = Toolbox(settings)
        t0 = time.perf_counter()
        reuse.prewarm()
        session = reuse._session(reuse.network, True)
        session.ready.wait(60)
        out["session_spawn_to_ready_ms"] = round(session.spawn_ms, 1)
        out["session_ready_wait_ms"] = round((time.perf_counter() - t0) * 1000, 1)
    times: dict[str, list[float]] = {"one_shot": [], "reuse": []}
    for _ in range(n):                       # interleaved: the machine's load hits both alike
        for name, tb in (("one_shot", one_shot), ("reuse", reuse)):
            if tb is None:
                continue
            t0 = time.perf_counter()
            res = tb.run("shell", {"command": "basename $PWD"})
            times[name].append((time.perf_counter() - t0) * 1000)
            assert res.output.strip() == "ws", res
    for name, values in times.items():
        if values:
            out[f"{name}_command_ms_p50"] = round(statistics.median(values), 1)
            out[f"{name}_command_ms_min"] = round(min(values), 1)
    if reuse is not None:
        reuse.close()
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repo", default=str(HERE), help="the checkout to measure")
    ap.add_argument("--messages", type=int, default=20000)
    ap.add_argument("--commands", type=int, default=20)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    sys.path.insert(0, str(Path(args.repo).resolve()))
    figures = {"repo": args.repo, "bus": bus_figures(args.messages),
               "sandbox": sandbox_figures(args.commands),
               "load_average": [round(x, 2) for x in os.getloadavg()]}
    if args.json:
        print(json.dumps(figures, indent=2))
        return 0
    b, s = figures["bus"], figures["sandbox"]
    print(f"{args.repo}: CPU per message (µs, thread time, median of 5 rounds)")
    for k in ("model_us", "publish_us", "receive_us", "decode_us", "encode_us", "mac_us"):
        print(f"  {k:<12} {b[k]:7.2f}")
    print("sandbox (ms, wall):", ", ".join(f"{k} {v}" for k, v in s.items()))
    print("load average:", figures["load_average"])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
