"""Cross-session benchmark for the world model (seed 002, issue 31): one command.

    .venv/bin/python benchmarks/world/run.py [--modes on,off] [--limit N] [--only ID,...]
        [--timeout S] [--out FILE] [--write-docs] [--root DIR] [--keep] [--parallel]

For each mode (the same build with ARTOO_WORLD=on, then =off), in a fresh ARTOO_HOME of its own:
every pair gets a fresh workspace and its setup; `artoo up`; each pair's FIRST goal; `artoo down`
(the session ends: every process gone); the pairs' `between` changes (a source file removed, so a
value cannot just be found again); `artoo up`; each pair's SECOND goal; `artoo down`. The second
goal is judged by the pair's check on the real outcome (files on disk, or the answer). Goals run
as `artoo run --yes --json --workspace WS GOAL` on the bundled local model (or whatever endpoint
the environment configures; ARTOO_LOCAL_MODEL may point at the GGUF). It prints, per mode, the
second goals passed and the first goals' statuses, one line per pair, and writes a results
JSON (`results/` by default, not committed); `--write-docs` appends the figures to
docs/BENCHMARKS.md.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timezone
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
sys.path.insert(0, str(HERE))
from pairs import PAIRS  # noqa: E402

PY = str(REPO / ".venv" / "bin" / "python") if (REPO / ".venv" / "bin" / "python").exists() \
    else sys.executable


def log(msg: str = "") -> None:
    print(msg, flush=True)


def artoo(env: dict, *args: str, timeout: float = 900.0) -> subprocess.CompletedProcess:
    return subprocess.run([PY, "-m", "services.cli", *args], cwd=REPO, env=env, text=True,
                          capture_output=True, timeout=timeout)


def run_goal(env: dict, ws: Path, goal: str, timeout: float) -> dict:
    t0 = time.monotonic()
    try:
        p = artoo(env, "run", "--yes", "--json", "--workspace", str(ws), goal, timeout=timeout)
    except subprocess.TimeoutExpired:
        cancelled = cancel_running(env)
        return {"status": "timeout", "answer": "", "seconds": round(time.monotonic() - t0, 1),
                "cancelled": cancelled}
    try:
        result = json.loads(p.stdout)
    except ValueError:
        result = {"status": "error", "answer": "", "error": (p.stderr or p.stdout)[-400:]}
    result["seconds"] = round(time.monotonic() - t0, 1)
    return result


def cancel_running(env: dict) -> list[str]:
    """A goal past its time is cancelled, so it does not compete with the next one."""
    try:
        p = artoo(env, "tasks", "ls", "--state", "running", "--json", timeout=120)
        ids = [row["id"] for row in json.loads(p.stdout or "[]")]
    except (subprocess.TimeoutExpired, ValueError, KeyError):
        return []
    for rid in ids:
        try:
            artoo(env, "tasks", "cancel", rid, "--wait", "60", timeout=120)
        except subprocess.TimeoutExpired:
            pass
    return ids


def up(env: dict, tries: int = 3) -> None:
    """`artoo up`, tried again after `artoo down` (on a loaded machine a role may miss its
    start-up time)."""
    for attempt in range(1, tries + 1):
        p = artoo(env, "up", "--timeout", "600")
        if p.returncode == 0:
            return
        log(f"  artoo up failed (attempt {attempt}/{tries}): {(p.stdout + p.stderr)[-300:]}")
        down(env)
    raise SystemExit(f"artoo up failed {tries} times:\n{p.stdout}\n{p.stderr}")


def down(env: dict) -> None:
    artoo(env, "down", timeout=120)


STOP = threading.Event()       # set by SIGTERM: each mode stops after its current goal


def _go_on() -> None:
    if STOP.is_set():
        raise SystemExit(143)


def run_mode(mode: str, pairs: list[dict], timeout: float, root: Path) -> list[dict]:
    home = root / f"home-{mode}"
    home.mkdir(parents=True)
    default_ws = root / f"ws-{mode}-default"
    default_ws.mkdir()
    # its own home, default workspace and a free metrics port: another daemon on this machine
    # is never disturbed
    env = dict(os.environ, ARTOO_HOME=str(home), ARTOO_WORLD=mode, PYTHONPATH=str(REPO),
               ARTOO_WORKSPACE=str(default_ws), ARTOO_METRICS_PORT="0")
    env.pop("ARTOO_RUN_DIR", None)
    model = Path.home() / ".artoo" / "models" / "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf"
    if not any(env.get(k) for k in ("OPENAI_BASE_URL", "BRAIN_BASE_URL", "TOOL_BASE_URL",
                                    "ARTOO_LOCAL_MODEL")) and model.exists():
        env["ARTOO_LOCAL_MODEL"] = str(model)     # the bundled GGUF already assembled
    rows = []
    for pair in pairs:
        ws = root / f"ws-{mode}-{pair['id']}"
        ws.mkdir()
        pair["setup"](ws)
        rows.append({"id": pair["id"], "kind": pair["kind"], "ws": ws})
    log(f"[{mode}] session 1: {len(pairs)} first goal(s)")
    up(env)
    try:
        for pair, row in zip(pairs, rows):
            _go_on()
            row["first"] = run_goal(env, row["ws"], pair["first"], timeout)
            log(f"  {pair['id']:<22} first  {row['first'].get('status')} "
                f"({row['first']['seconds']} s)")
    finally:
        down(env)
    for pair, row in zip(pairs, rows):
        if pair.get("between"):
            pair["between"](row["ws"])
    log(f"[{mode}] session 2 (after artoo down / up): second goals")
    _go_on()
    up(env)
    try:
        for pair, row in zip(pairs, rows):
            _go_on()
            row["second"] = run_goal(env, row["ws"], pair["second"], timeout)
            ok, why = pair["check"](row["ws"], row["second"])
            row.update(passed=bool(ok), why=why)
            log(f"  {pair['id']:<22} second {'PASS' if ok else 'FAIL'} "
                f"{row['second'].get('status')} ({row['second']['seconds']} s): {why}")
    finally:
        down(env)
    for row in rows:
        row["ws"] = str(row["ws"])
    return rows


def summary(mode: str, rows: list[dict]) -> str:
    passed = sum(r["passed"] for r in rows)
    secs = sum(r["first"]["seconds"] + r["second"]["seconds"] for r in rows)
    return (f"world {mode:<3}: second goals passed {passed}/{len(rows)}; first goals verified "
            f"{sum(r['first'].get('status') == 'verified' for r in rows)}/{len(rows)}; "
            f"{secs:.0f} s")


def main() -> int:
    # a SIGTERM (a killed run) unwinds like Ctrl-C, so the `finally` stops the daemon it started
    # (in --parallel mode the modes' threads stop after their current goal and stop their daemons)
    def stop(*_):
        STOP.set()
        sys.exit(143)
    signal.signal(signal.SIGTERM, stop)
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--modes", default="on,off")
    ap.add_argument("--limit", type=int, default=None)
    ap.add_argument("--only", default="")
    ap.add_argument("--timeout", type=float, default=600.0,
                    help="seconds per goal (then it is cancelled)")
    ap.add_argument("--out", default="")
    ap.add_argument("--write-docs", action="store_true")
    ap.add_argument("--root", default=os.environ.get("ARTOO_BENCH_ROOT", "/tmp"),
                    help="where the run's homes and workspaces go (a fresh directory inside)")
    ap.add_argument("--keep", action="store_true", help="keep the homes and workspaces")
    ap.add_argument("--parallel", action="store_true",
                    help="run the modes at the same time (each its own daemon and model server)")
    args = ap.parse_args()
    pairs = [p for p in PAIRS if not args.only or p["id"] in args.only.split(",")]
    pairs = pairs[:args.limit] if args.limit else pairs
    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    Path(args.root).mkdir(parents=True, exist_ok=True)
    root = Path(tempfile.mkdtemp(prefix="at-wb-", dir=args.root))
    commit = subprocess.run(["git", "describe", "--always", "--dirty"], cwd=REPO, text=True,
                            capture_output=True).stdout.strip()
    results = {"started": datetime.now(timezone.utc).isoformat(timespec="seconds"),
               "host": platform.node(), "cpus": os.cpu_count(), "commit": commit,
               "timeout_s": args.timeout, "parallel": args.parallel, "pairs": len(pairs),
               "modes": {}}
    try:
        if args.parallel:          # both modes at once: the same machine load for each
            with ThreadPoolExecutor(len(modes)) as pool:
                futures = {m: pool.submit(run_mode, m, pairs, args.timeout, root) for m in modes}
                results["modes"] = {m: f.result() for m, f in futures.items()}
        else:
            for mode in modes:
                results["modes"][mode] = run_mode(mode, pairs, args.timeout, root)
    finally:
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)
    log()
    lines = [summary(m, rows) for m, rows in results["modes"].items()]
    for line in lines:
        log(line)
    out = Path(args.out) if args.out else HERE / "results" / \
        f"{datetime.now().strftime('%Y-%m-%d-%H%M')}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=1, default=str))
    log(f"results: {out}")
    if args.write_docs:
        with open(REPO / "docs" / "BENCHMARKS.md", "a") as fh:
            fh.write(f"\n### World model, cross-session pairs ({results['started']}, "
                     f"{len(pairs)} pairs, `benchmarks/world/run.py`)\n\n"
                     f"Commit {commit}, host {results['host']} ({results['cpus']} CPUs), "
                     f"{args.timeout:.0f} s per goal, modes "
                     f"{'at the same time' if args.parallel else 'one after the other'}.\n\n")
            fh.writelines(f"- {line}\n" for line in lines)
            for m, rows in results["modes"].items():
                fh.write(f"- {m}: " + ", ".join(f"{r['id']} {'✓' if r['passed'] else '✗'}"
                                               for r in rows) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
