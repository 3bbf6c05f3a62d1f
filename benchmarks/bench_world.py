"""The world model's per-task cost as its history grows: a goal's projection (what the perceiver
waits for before its model call) and a task's observation (request, spec, outcome, final — the
world process's CPU per task), at 100 … N tasks recorded, on a real LMDB store.

Every recorded task reads a file, is answered (a fact or a claim) and names an entity, so
episodes, goals, entities and facts all grow with the history. Tasks carry run ids as the CLI
gives them (`run-YYYYmmdd-HHMMSS-xxxx`), each answered task an entity named by its id; the second
projection's goal says "run", a word every one of those names has. `--repo PATH` measures another
checkout (e.g. the commit before the index) for a before/after on one machine.
Run: `.venv/bin/python benchmarks/bench_world.py [--tasks 3000] [--repo /tmp/base] [--json]`.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent.parent


def _p50_ms(runs: int, fn) -> float:
    """The median of `runs` timed calls fn(0) … fn(runs - 1), in ms."""
    times = []
    for i in range(runs):
        t0 = time.perf_counter()
        fn(i)
        times.append((time.perf_counter() - t0) * 1000)
    return round(statistics.median(times), 2)


def measure(repo: str, total: int) -> list[dict]:
    sys.path.insert(0, repo)
    from protocol.settings import load_settings
    from world_server.model import WorldModel
    from world_server.store import WorldStore
    tmp = Path(tempfile.mkdtemp(prefix="at-bw-", dir="/tmp"))
    ws = tmp / "ws"
    ws.mkdir()
    settings = load_settings(home=tmp / "home", workspace=ws)
    store = WorldStore(settings.world_path)
    model = WorldModel(store, settings)

    def task(tid: str, i: int) -> None:
        name = f"report{i % 50}.csv"
        model.on_request(tid, f"count the lines of {name}", workspace=str(ws))
        model.on_spec({"task_id": tid, "intent_slug": f"count-{i % 50}", "raw_input":
                       f"count the lines of {name}", "intent": f"count the lines of {name}",
                       "options": {"workspace": str(ws)}})
        model.on_outcome(tid, {"tool_calls": [{"tool": "shell", "arguments": {
            "command": f"wc -l {name}"}, "target": f"wc -l {name}", "output": f"{i} {name}",
            "error": None}]})
        model.on_final({"task_id": tid, "status": "verified" if i % 3 else "unverified",
                        "answer": f"{name} has {i} lines", "summary": "counted"})

    def tid_of(n: int) -> str:
        return f"run-20261201-{n:06d}-{n % 65536:04x}"

    rows, n = [], 0
    steps = [s for s in (100, 300, 1000, 3000, 10000) if s < total] + [total]
    for target in steps:
        while n < target:
            task(tid_of(n), n)
            n += 1
        project = _p50_ms(30, lambda i: model.project(
            f"how many lines has report{i % 50}.csv", workspace=str(ws), task=f"q{i}"))
        project_run = _p50_ms(30, lambda i: model.project(
            f"run the line count of report{i % 50}.csv again", workspace=str(ws), task=f"q{i}"))
        observe = _p50_ms(10, lambda i: task(f"{tid_of(n)}-x{i}", n + i))
        rows.append({"tasks": n, "project_ms_p50": project, "project_run_ms_p50": project_run,
                     "observe_ms_p50": observe,
                     "facts": store.stats().get("facts"),
                     "entities": store.stats().get("entities")})
    store.close()
    return rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repo", default=str(HERE), help="the checkout to measure")
    ap.add_argument("--tasks", type=int, default=3000)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    rows = measure(args.repo, args.tasks)
    if args.json:
        print(json.dumps({"repo": args.repo, "rows": rows}))
        return 0
    print(f"{args.repo}: the world model's cost per task as its history grows")
    for r in rows:
        print(f"  {r['tasks']:>6} tasks ({r['facts']} facts, {r['entities']} entities): "
              f"projection p50 {r['project_ms_p50']:.2f} ms ('run …' goal "
              f"{r['project_run_ms_p50']:.2f} ms), a task's observation p50 "
              f"{r['observe_ms_p50']:.2f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
