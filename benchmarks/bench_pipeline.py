"""Pipeline orchestration overhead (issue 3): the whole daemon with a scripted LLM that answers at once.

* Latency: a one-subtask task end to end, UserRequest sent → FinalResult received (perceiver, memory
  calibration, planner, dispatcher offer/claim/assign, effector spawn, executor, agent-validator,
  meta-validator, GGS, the memory write), p50/p95 over N sequential tasks (target p50 ≤ 150 ms).
* Baseline in the same run: the six sequential LLM calls of such a task (R1, R2, R3 tool call,
  R3 result, R4a, R4b) made directly against the same scripted server with the same client — the
  part of the latency that is the (here instant) model, not orchestration. (The task also runs one
  real shell tool call, `basename $PWD`, through the Law 1 gate.)
* Throughput: tasks per minute with C tasks in flight at once.

* `--llm-ms N`: every model call answered after N ms, as a remote model's would be (the floor
  too): what a task's sequence of calls costs when calls are not instant.

* `--tracing on`: the same with OpenTelemetry export on in every process (OTEL_EXPORTER_OTLP_ENDPOINT
  at a real OTLP/HTTP receiver in this process, tests/otlp_receiver.py); the spans received are
  counted. Default off.

Run: `.venv/bin/python benchmarks/bench_pipeline.py [--tasks 50] [--concurrency 8] [--tracing on]
[--json]`.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests"))

from protocol.bus import BusClient  # noqa: E402
from protocol.messages import RunOptions, UserRequest  # noqa: E402
from protocol.settings import load_settings  # noqa: E402
from bench_bus import idle_policy  # noqa: E402
from replies_pipeline import accept, effector_responder, perception, plan, subtask  # noqa: E402
from scripted_llm import DECLINE_CHECK, Delay, ScriptedLLM  # noqa: E402

EXECUTOR, AGENTVAL = effector_responder("basename $PWD", "ws", "the name is printed")
REPLIES = {
    "perceiver": perception("report the workspace name", ["the name is printed"]),
    "planner": plan(subtask("report the workspace name", ["the name is printed"])),
    "executor": EXECUTOR,
    "agentval": AGENTVAL,
    "metaval": accept("the workspace is ws", merged_output="ws"),
}


# Arrival of the first message of each type, as seen by the submitting client.
STAGES = ("TaskSpec", "DispatchManifest", "SubTaskAssign", "EffectorStarted", "ExecutionResult",
          "SubTaskOutcome", "OutcomeSummary", "FinalResult")
SEGMENTS = (  # (label, from, to, owner)
    ("perceiver (LLM + TaskSpec)", "submit", "TaskSpec", "pipeline"),
    ("planner: calibration + LLM + manifest", "TaskSpec", "DispatchManifest", "pipeline"),
    ("dispatcher: offer → claim → assign", "DispatchManifest", "SubTaskAssign", "pipeline"),
    ("spawner: assign → effector ready", "SubTaskAssign", "EffectorStarted", "effector"),
    ("executor: 2 LLM turns + shell tool", "EffectorStarted", "ExecutionResult", "effector"),
    ("agent-validator: LLM verdict", "ExecutionResult", "SubTaskOutcome", "effector"),
    ("meta-validator: fan-in + LLM merge", "SubTaskOutcome", "OutcomeSummary", "pipeline"),
    ("GGS: loss + memory write + FinalResult", "OutcomeSummary", "FinalResult", "ggs"),
)


def breakdown(marks: dict[str, dict[str, float]], runs: list[str]) -> list[tuple[str, str, float]]:
    out = []
    for label, a, b, owner in SEGMENTS:
        deltas = [(m[b] - m[a]) * 1000 for r in runs if (m := marks.get(r)) and a in m and b in m]
        if deltas:
            out.append((label, owner, round(pct(deltas, 0.5), 1)))
    return out


def pct(values: list[float], p: float) -> float:
    values = sorted(values)
    k = (len(values) - 1) * p
    lo, hi = int(k), min(int(k) + 1, len(values) - 1)
    return values[lo] + (values[hi] - values[lo]) * (k - lo)


class Submitter:
    """The user side: sends UserRequests and times each until its FinalResult arrives."""

    def __init__(self, settings):
        self.done: dict[str, float] = {}
        self.results: dict[str, str] = {}
        self.summaries: dict[str, str] = {}
        self.cond = threading.Condition()
        self.marks: dict[str, dict[str, float]] = {}   # run id -> first arrival per type
        self.client = BusClient("user", settings=settings, heartbeat=False)
        self.client.on("FinalResult", self._final, ack=True)
        # everything: the effector's R3 <-> R4a messages are directed at its node
        self.client.on("*", self._mark, raw=True)
        self.client.start()

    def _mark(self, env, _msg) -> None:
        if env.type in STAGES:
            self.marks.setdefault(env.task, {}).setdefault(env.type, time.perf_counter())

    def _final(self, env, msg) -> None:
        with self.cond:
            self.done.setdefault(msg.task_id, time.perf_counter())
            self.results[msg.task_id] = msg.directive
            self.summaries[msg.task_id] = msg.summary
            self.cond.notify_all()

    def run(self, run_id: str, timeout: float = 60.0) -> float:
        start = time.perf_counter()
        self.marks.setdefault(run_id, {})["submit"] = start
        self.client.send(UserRequest(task_id=run_id, text="report the workspace name",
                                     options=RunOptions(yes=True)))
        with self.cond:
            if not self.cond.wait_for(lambda: run_id in self.done, timeout):
                raise TimeoutError(f"no FinalResult for {run_id} within {timeout}s")
            if self.results[run_id] not in ("accept", "success"):
                raise RuntimeError(f"{run_id} ended {self.results[run_id]}: "
                                   f"{self.summaries.get(run_id)}")
            return (self.done[run_id] - start) * 1000


def llm_floor(settings, n: int) -> list[float]:
    """The six sequential LLM calls of one task through the real client."""
    from services.runtime.llm import LLMClient
    from services.roles.metaval import MergeVerdict
    from services.roles.perceiver import Perception
    from services.roles.planner import PlanReply
    clients = {r: LLMClient.for_role(r, settings) for r in REPLIES}
    out = []
    for _ in range(n):
        start = time.perf_counter()
        clients["perceiver"].complete_json(Perception, "s", "u")
        clients["planner"].complete_json(PlanReply, "s", "u")
        clients["executor"].complete_text("s", "u")       # R3: tool call
        clients["executor"].complete_text("s", "Tool calls so far")  # R3: result
        clients["agentval"].complete_text("s", "u")
        clients["metaval"].complete_json(MergeVerdict, "s", "u")
        out.append((time.perf_counter() - start) * 1000)
    return out


def machine_cpu() -> tuple[float, float]:
    """(busy, total) core-seconds of the whole machine so far (/proc/stat; zeros elsewhere): the
    sequential tasks' CPU, every process of the daemon and the forked effectors included."""
    try:
        with open("/proc/stat") as fh:
            ticks = [int(x) for x in fh.readline().split()[1:9]]
    except (OSError, ValueError):
        return 0.0, 0.0
    hz = os.sysconf("SC_CLK_TCK")
    idle = ticks[3] + ticks[4]                  # idle + iowait
    return (sum(ticks) - idle) / hz, sum(ticks) / hz


def process_cpu(settings) -> dict[str, float]:
    """CPU seconds so far of each program of the daemon (its processes summed, each with the
    children it has reaped — an effector's CPU shows under the process that forked it), and of
    this benchmark's own process (the client and the scripted model): `(bench)`."""
    import psutil
    from services.runtime import daemon
    out: dict[str, float] = {}
    for proc in daemon.our_processes(settings):
        try:
            cmd, t = proc.cmdline(), proc.cpu_times()
        except psutil.Error:
            continue
        module = cmd[cmd.index("-m") + 1] if "-m" in cmd and cmd.index("-m") + 1 < len(cmd) \
            else ""
        package, _, last = module.rpartition(".")
        name = (package if last == "server" else last) if module else \
            os.path.basename(cmd[0]) if cmd else "?"
        out[name] = out.get(name, 0.0) + t.user + t.system + t.children_user + t.children_system
    me = os.times()
    out["(bench)"] = me.user + me.system
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tasks", type=int, default=50)
    ap.add_argument("--concurrency", type=int, default=8)
    ap.add_argument("--throughput-tasks", type=int, default=48)
    ap.add_argument("--scale", default="2", help="instances of each scalable role")
    ap.add_argument("--tracing", choices=("off", "on"), default="off",
                    help="OpenTelemetry export from every process to a local OTLP receiver")
    ap.add_argument("--llm-ms", type=float, default=0.0,
                    help="answer every model call after this many ms (a remote model)")
    ap.add_argument("--cpu-latency", choices=("off", "busy"), default="off",
                    help="ARTOO_CPU_LATENCY for the daemon: busy keeps idle CPUs polling while "
                         "a process has bus work")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    # stopped from outside (kill, a harness's time-out): leave by the `finally` below, which
    # takes the daemon down, not with it left running
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    receiver = None
    if args.tracing == "on":
        from otlp_receiver import OtlpReceiver
        receiver = OtlpReceiver().__enter__()
        os.environ.update(receiver.env())
    else:
        for key in [k for k in os.environ if k.startswith("OTEL_")]:
            del os.environ[key]

    root = Path(tempfile.mkdtemp(prefix="at-bp-", dir="/tmp"))
    (root / "home").mkdir()
    (root / "ws").mkdir()
    from services.runtime import daemon
    with ScriptedLLM() as llm:
        for role, reply in {**REPLIES, "verifier": DECLINE_CHECK}.items():
            respond = reply if callable(reply) else (lambda req, reply=reply: reply)
            llm.on(role, respond if not args.llm_ms else (
                lambda req, respond=respond: Delay(args.llm_ms / 1000, respond(req))))
        os.environ.update({"ARTOO_HOME": str(root / "home"), "ARTOO_WORKSPACE": str(root / "ws"),
                           "ARTOO_SCALE": args.scale, "ARTOO_CPU_LATENCY": args.cpu_latency,
                           **llm.env()})
        os.environ.pop("ARTOO_RUN_DIR", None)
        settings = load_settings()
        settings.ensure_dirs()
        t0 = time.perf_counter()
        try:
            daemon.up(settings, timeout_s=180)      # inside: a failed start is taken down too
            up_s = time.perf_counter() - t0
            sub = Submitter(settings)
            for i in range(3):                                   # warm-up (imports, caches)
                sub.run(f"run-warm-{i}")
            cpu0, by0 = machine_cpu(), process_cpu(settings)
            latencies = [sub.run(f"run-seq-{i}") for i in range(args.tasks)]
            cpu1, by1 = machine_cpu(), process_cpu(settings)
            floor = llm_floor(settings, min(args.tasks, 20))

            ids = [f"run-par-{i}" for i in range(args.throughput_tasks)]
            queue_ = list(ids)
            lock = threading.Lock()
            errors: list[str] = []

            def worker():
                while True:
                    with lock:
                        if not queue_:
                            return
                        rid = queue_.pop()
                    try:
                        sub.run(rid, timeout=120)
                    except Exception as exc:  # noqa: BLE001 - reported below
                        errors.append(f"{rid}: {exc}")

            start = time.perf_counter()
            threads = [threading.Thread(target=worker) for _ in range(args.concurrency)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            wall = time.perf_counter() - start
            sub.client.stop()
        finally:
            daemon.down(settings)
            shutil.rmtree(root, ignore_errors=True)
            if receiver is not None:
                receiver.__exit__(None, None, None)

    p50, p95 = pct(latencies, 0.5), pct(latencies, 0.95)
    stages = breakdown(sub.marks, [f"run-seq-{i}" for i in range(args.tasks)])
    f50 = pct(floor, 0.5)
    figures = {
        "tasks": args.tasks, "scale": int(args.scale), "daemon_up_s": round(up_s, 1),
        "e2e_p50_ms": round(p50, 1), "e2e_p95_ms": round(p95, 1),
        "e2e_min_ms": round(min(latencies), 1), "e2e_max_ms": round(max(latencies), 1),
        "llm_floor_p50_ms": round(f50, 1),
        "orchestration_p50_ms": round(p50 - f50, 1),
        "e2e_over_llm_floor": round(p50 / f50, 1) if f50 else None,
        "concurrency": args.concurrency, "throughput_tasks": args.throughput_tasks,
        "throughput_wall_s": round(wall, 2),
        "tasks_per_minute": round(args.throughput_tasks / wall * 60, 1),
        "errors": errors[:5], "target_p50_ms": 150, "meets_target": p50 <= 150,
        "stages_p50_ms": {label: ms for label, _owner, ms in stages},
        "load_average": [round(x, 2) for x in os.getloadavg()],
        "idle_policy": f"{idle_policy()}, ARTOO_CPU_LATENCY={args.cpu_latency}",
        "cpu_busy_per_task_core_ms": round((cpu1[0] - cpu0[0]) * 1000 / args.tasks, 1),
        "cpu_total_per_task_core_ms": round((cpu1[1] - cpu0[1]) * 1000 / args.tasks, 1),
        "cpu_per_task_by_program_core_ms": {
            name: round((by1.get(name, 0.0) - by0.get(name, 0.0)) * 1000 / args.tasks, 1)
            for name in sorted(by1, key=lambda n: by0.get(n, 0.0) - by1[n])},
        "tracing": args.tracing,
        "spans_received": len(receiver.spans) if receiver is not None else 0,
    }
    if args.json:
        print(json.dumps(figures, indent=2))
    else:
        print(f"daemon up in {figures['daemon_up_s']} s (scale {args.scale}); tracing "
              f"{args.tracing}" + (f", {figures['spans_received']} spans received"
                                   if receiver is not None else ""))
        print(f"one-subtask task, submit → FinalResult, {args.tasks} sequential tasks: "
              f"p50 {p50:.1f} ms, p95 {p95:.1f} ms (min {min(latencies):.1f}, max {max(latencies):.1f})"
              f"  [target p50 ≤ 150 ms: {'met' if p50 <= 150 else 'NOT met'}]")
        print(f"baseline, the 6 sequential scripted LLM calls alone: p50 {f50:.1f} ms → "
              f"orchestration ≈ {p50 - f50:.1f} ms ({figures['e2e_over_llm_floor']}× the LLM floor)")
        print("where the time goes (p50 of each stage, first arrival seen by the client):")
        for label, owner, ms in stages:
            print(f"  {label:<42} {ms:7.1f} ms  [{owner}]")
        print(f"machine CPU busy per sequential task: {figures['cpu_busy_per_task_core_ms']} of "
              f"{figures['cpu_total_per_task_core_ms']} core-ms the cores had in its time")
        print("  of which, by program (own CPU and its reaped children's; effectors under the "
              "spawner): " + ", ".join(f"{name} {ms}" for name, ms in
                                      figures["cpu_per_task_by_program_core_ms"].items() if ms))
        print(f"load average at the end: {figures['load_average']}; {figures['idle_policy']}")
        print(f"throughput, {args.concurrency} tasks in flight: {args.throughput_tasks} tasks in "
              f"{wall:.1f} s = {figures['tasks_per_minute']} tasks/minute"
              + (f"; errors: {errors[:3]}" if errors else ""))
    return 0 if not errors else 1


if __name__ == "__main__":
    raise SystemExit(main())
