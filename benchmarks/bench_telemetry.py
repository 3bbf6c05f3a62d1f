"""What tracing costs per call, off and on (issue 33): the code it adds to a role step, an LLM
call, and the envelope of every message. Per-call figures (best of 5 rounds, in-process), so
they hold on a loaded machine where end-to-end timings drown in noise.

* off: no OTEL_* variables: `span()` returns the shared no-op, `@traced` tests one global, the bus
  client's `_envelope` tests one attribute. Compared with the same call without the wrapper.
* on: OTEL_EXPORTER_OTLP_ENDPOINT at a real OTLP/HTTP receiver in this process
  (tests/otlp_receiver.py); a span is recorded and batched (the export runs on the SDK's thread).

Run: `.venv/bin/python benchmarks/bench_telemetry.py [--n 20000] [--json]`.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests"))

from protocol import tracecontext  # noqa: E402
from protocol.bus import BusClient  # noqa: E402
from protocol.messages import LlmUsage  # noqa: E402
from services.runtime import telemetry  # noqa: E402


def best_ns(fn, n: int, rounds: int = 5) -> float:
    best = float("inf")
    for _ in range(rounds):
        t0 = time.perf_counter_ns()
        for _ in range(n):
            fn()
        best = min(best, (time.perf_counter_ns() - t0) / n)
        if telemetry.enabled():   # export what the round made, outside the timing
            telemetry._state.provider.force_flush()
    return best


def measure(n: int) -> dict:
    def bare(x):
        return x

    @telemetry.traced("step", task=lambda x: "run-bench")
    def wrapped(x):
        return x

    def step():
        with telemetry.span("step", task="run-bench"):
            pass

    def llm():
        telemetry.llm_span(role="planner", tier="BRAIN", model="m", task="run-bench",
                           latency_ms=5.0, input_tokens=100, output_tokens=20, ok=True,
                           finish_reason="stop", server="127.0.0.1:1")

    client = BusClient("planner", heartbeat=False)
    client.tracing = telemetry.enabled()
    msg = LlmUsage(task_id="run-bench", role="planner", tier="BRAIN", model="m")
    token = tracecontext.CURRENT.set(tracecontext.format(tracecontext.task_trace_id("run-bench"), 1)
                                     if telemetry.enabled() else None)
    try:
        out = {
            "bare_call_ns": best_ns(lambda: bare(1), n),
            "traced_call_ns": best_ns(lambda: wrapped(1), n),
            "span_ns": best_ns(step, n),
            "llm_span_ns": best_ns(llm, n),
            "envelope_ns": best_ns(lambda: client._envelope(msg, None, None, None, None, None), n),
        }
    finally:
        tracecontext.CURRENT.reset(token)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=20000)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    for key in [k for k in os.environ if k.startswith("OTEL_")]:
        del os.environ[key]
    telemetry.init("bench")
    off = measure(args.n)
    telemetry.shutdown()          # forget "off": init decides again with the variables below
    from otlp_receiver import OtlpReceiver
    with OtlpReceiver() as rx:
        os.environ.update(rx.env())
        telemetry.init("bench")
        on = measure(500)            # < the SDK's queue (2,048): none dropped
        telemetry.shutdown(10_000)
        spans = len(rx.spans)
    figures = {"off": off, "on": on, "spans_received": spans,
               "load_average": [round(x, 2) for x in os.getloadavg()]}
    if args.json:
        print(json.dumps(figures, indent=2))
        return 0
    print(f"per call, best of 5 rounds (load average {figures['load_average']}):")
    rows = [("plain function call", "bare_call_ns"), ("the same with @telemetry.traced", "traced_call_ns"),
            ("with telemetry.span(...): pass", "span_ns"), ("telemetry.llm_span(...)", "llm_span_ns"),
            ("BusClient._envelope (every message)", "envelope_ns")]
    print(f"  {'':<40} {'tracing off':>12} {'tracing on':>12}")
    for label, key in rows:
        print(f"  {label:<40} {off[key]:>9,.0f} ns {on[key]:>9,.0f} ns")
    print(f"  spans exported to the receiver: {spans}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
