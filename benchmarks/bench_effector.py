"""Effector benchmarks (issue 4): spawn-to-ready latency and Law 1 gate classification time.

Spawn-to-ready: a real bus proxy and a real spawner process; a client plays the planner and assigns
N subtasks one after another. `spawn_ms` (EffectorStarted) runs from the spawner's fork request to
the moment the forked effector's bus handshake has come back through the proxy; `assign→started` is
the same seen from the planner (the SubTaskAssign send to the EffectorStarted receipt). Baselines
measured in the same run: a plain `python -c pass` start, and a cold effector (a fresh interpreter
importing the effector stack, i.e. what each spawn would cost without the preloaded zygote).

Gate: `law1.classify` over the Law 1 corpus (destructive + benign + workspace writes), repeated.

Run: `.venv/bin/python benchmarks/bench_effector.py [--spawns 100] [--json]`.
"""
from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests"))

from protocol.messages import SubTaskAssign  # noqa: E402


def pct(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(round(q * (len(values) - 1))))]


def summary(values: list[float]) -> dict:
    return {"n": len(values), "p50": round(pct(values, 0.5), 2), "p95": round(pct(values, 0.95), 2),
            "mean": round(statistics.fmean(values), 2), "max": round(max(values), 2)}


def bench_python_start(n: int) -> list[float]:
    out = []
    for _ in range(n):
        t = time.perf_counter()
        subprocess.run([sys.executable, "-c", "pass"], check=True)
        out.append((time.perf_counter() - t) * 1000)
    return out


def bench_cold_effector(n: int) -> list[float]:
    code = "import services.roles.effector, services.safety.law1; services.safety.law1.classify('ls', workspace='.')"
    out = []
    for _ in range(n):
        t = time.perf_counter()
        subprocess.run([sys.executable, "-c", code], check=True, cwd=REPO)
        out.append((time.perf_counter() - t) * 1000)
    return out


def bench_spawns(n: int) -> dict:
    import replies_effector as R
    from effector_harness import EffectorHarness
    h = EffectorHarness()
    try:
        h.llm.on("executor", lambda req: R.result("benchmark", status="failed",
                                                  uncertainty="benchmark run"))
        node = h.start_spawner()
        spawn_ms, assign_to_started, lifecycle = [], [], []
        for _ in range(n):
            st = h.subtask("benchmark subtask", ["done"])
            t = time.perf_counter()
            h.planner.send(SubTaskAssign(task_id=st.parent_task_id, subtask_id=st.subtask_id,
                                         offer_id=f"of-{st.subtask_id}", spawner=node,
                                         subtask=st), consumers=("spawner",))
            started = h.seen.wait("EffectorStarted", lambda m: m.subtask_id == st.subtask_id)[0]
            assign_to_started.append((time.perf_counter() - t) * 1000)
            spawn_ms.append(started.spawn_ms)
            h.exited(st)
            lifecycle.append((time.perf_counter() - t) * 1000)
        return {"spawn_ms": summary(spawn_ms), "assign_to_started_ms": summary(assign_to_started),
                "assign_to_exited_ms": summary(lifecycle)}
    finally:
        h.close()


def bench_gate(repeat: int) -> dict:
    import law1_corpus as C
    from services.safety import law1
    root = Path(tempfile.mkdtemp(prefix="bg-"))
    ws, data = root / "ws", root / "home"
    data.mkdir()
    for name in C.WORKSPACE_FILES:
        path = ws / name
        if name.endswith("/"):
            path.mkdir(parents=True, exist_ok=True)
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text("x\n")
    commands = C.DESTRUCTIVE + C.BENIGN + C.WORKSPACE_WRITES
    law1.classify("ls", workspace=ws, protected=[data])          # parser tables
    times = []
    for _ in range(repeat):
        for command in commands:
            t = time.perf_counter()
            law1.classify(command, workspace=ws, protected=[data], cwd=ws)
            times.append((time.perf_counter() - t) * 1000)
    return {"commands": len(commands), **summary(times)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--spawns", type=int, default=100)
    parser.add_argument("--gate-repeat", type=int, default=5)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    python = summary(bench_python_start(args.spawns))
    cold = summary(bench_cold_effector(max(5, args.spawns // 10)))
    spawns = bench_spawns(args.spawns)
    gate = bench_gate(args.gate_repeat)
    result = {"python_c_pass_ms": python, "cold_effector_import_ms": cold, **spawns,
              "gate_classify_ms": gate,
              "ratio_spawn_p50_to_python_p50": round(spawns["spawn_ms"]["p50"] / python["p50"], 3),
              "ratio_spawn_p50_to_cold_p50": round(spawns["spawn_ms"]["p50"] / cold["p50"], 3)}
    if args.json:
        print(json.dumps(result, indent=2))
        return
    print(f"python -c pass start         p50 {python['p50']:8.2f} ms  p95 {python['p95']:8.2f} ms")
    print(f"cold effector import         p50 {cold['p50']:8.2f} ms  p95 {cold['p95']:8.2f} ms")
    for key, label in (("spawn_ms", "effector spawn-to-ready"),
                       ("assign_to_started_ms", "assign -> EffectorStarted"),
                       ("assign_to_exited_ms", "assign -> EffectorExited")):
        s = spawns[key]
        print(f"{label:28s} p50 {s['p50']:8.2f} ms  p95 {s['p95']:8.2f} ms  (n={s['n']})")
    print(f"spawn p50 / python -c pass p50 = {result['ratio_spawn_p50_to_python_p50']}x; "
          f"/ cold effector p50 = {result['ratio_spawn_p50_to_cold_p50']}x")
    print(f"gate classification          p50 {gate['p50']:8.3f} ms  p95 {gate['p95']:8.3f} ms  "
          f"max {gate['max']:.2f} ms  ({gate['commands']} commands x {args.gate_repeat})")


if __name__ == "__main__":
    main()
