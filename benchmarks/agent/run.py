"""Run the agent benchmark: artoo and the plain ReAct baseline on the same goals and endpoint.

    .venv/bin/python benchmarks/agent/run.py [--half dev|heldout|both] [--systems artoo,react]
        [--only ID,...] [--limit N] [--timeout S] [--out results/FILE.json] [--show-heldout]
        [--resume]

For every goal and system (interleaved per goal, so machine-load drift hits both alike; with
`--half both` the halves alternate goal by goal too, so a run cut short covers both): a fresh
temporary workspace, the goal's setup.sh, the system, its result written to a JSON file, the
goal's check.py. Prints per system and half: passed/total, false success claims (the check
failed but the system said "verified"), LLM calls, prompt/completion tokens and seconds. The
development half also gets one line per goal; the held-out half only aggregates (and its goals'
texts, ids and answers stay out of the output and the results file) unless --show-heldout.
See benchmarks/agent/README.md.
"""
from __future__ import annotations

import argparse
import itertools
import json
import os
import platform
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
sys.path.insert(0, str(HERE))
import react  # noqa: E402

HALVES = ("dev", "heldout")
SYSTEMS = ("artoo", "react")
EXIT_STATUS = {0: "verified", 3: "unverified", 4: "not_possible", 1: "abandoned"}
CANCEL_WAIT_S = 30.0
DIRECTIVE_STATUS = {"success": "verified", "accept": "verified", "abandon": "abandoned"}


def log(msg: str = "") -> None:
    print(msg, flush=True)


# ---------------------------------------------------------------------------------------------
# goals
# ---------------------------------------------------------------------------------------------

def load_goals(half: str, only: set[str] | None, limit: int | None) -> list[dict]:
    goals = []
    for d in sorted((HERE / "goals" / half).iterdir()):
        if not d.is_dir() or (only and d.name not in only):
            continue
        meta = json.loads((d / "goal.json").read_text())
        goals.append({"half": half, "id": d.name, "dir": d, **meta})
    return goals[:limit] if limit else goals


def setup_workspace(goal: dict, ws: Path) -> None:
    subprocess.run(["bash", str(goal["dir"] / "setup.sh")], cwd=ws, check=True, timeout=60,
                   stdout=subprocess.DEVNULL)


def check(goal: dict, ws: Path, result_file: Path) -> tuple[bool, str]:
    proc = subprocess.run([sys.executable, str(goal["dir"] / "check.py"), str(ws), str(result_file)],
                          capture_output=True, text=True, timeout=120)
    reason = (proc.stdout.strip().splitlines() or [proc.stderr.strip()[-200:]])[-1]
    return proc.returncode == 0, reason


# ---------------------------------------------------------------------------------------------
# artoo
# ---------------------------------------------------------------------------------------------

class Artoo:
    def __init__(self, exe: Path, timeout: float):
        self.exe, self.timeout = str(exe), timeout
        self.shared_ws: Path | None = None
        self.started = False       # by prepare(): a daemon on a fresh home is stopped at the end

    def prepare(self) -> None:
        """The daemon up (started if it is not running; one started on a fresh home is stopped
        at the end), and --workspace supported or the daemon's own workspace used instead."""
        proc = subprocess.run([self.exe, "status", "--json"], capture_output=True, text=True,
                              timeout=120)
        try:
            report = json.loads(proc.stdout)
        except ValueError:
            report = {}
        if proc.returncode != 0 and (not report.get("supervisord_pid")
                                     or report.get("bus") == "unreachable"):
            log("artoo daemon not running: starting it with `artoo up`")
            up = subprocess.run([self.exe, "up"], capture_output=True, text=True, timeout=900)
            if up.returncode != 0:
                raise SystemExit(f"`artoo up` failed:\n{up.stdout[-2000:]}{up.stderr[-2000:]}")
            self.started = True
        elif proc.returncode != 0:
            missing = [f"{r['role']}/{r['instance']}" for r in report.get("roles", [])
                       if not r.get("alive")]
            log(f"warning: artoo status reports roles without a heartbeat: {', '.join(missing)}")
        helptext = subprocess.run([self.exe, "run", "--help"], capture_output=True, text=True,
                                  timeout=60).stdout
        if "--workspace" not in helptext:
            out = subprocess.run([str(REPO / ".venv/bin/python"), "-c",
                                  "from protocol.settings import load_settings; "
                                  "print(load_settings().workspace)"],
                                 capture_output=True, text=True, cwd=REPO, timeout=60)
            ws = Path(out.stdout.strip()).expanduser().resolve()
            if not out.stdout.strip() or len(ws.parts) < 3 or ws == Path.home().resolve():
                raise SystemExit(f"refusing to use {ws!s} as the benchmark workspace")
            self.shared_ws = ws
            log(f"warning: `artoo run` has no --workspace option; using the daemon's workspace "
                f"{ws}, CLEARED before each goal")

    def workspace(self, fresh: Path) -> Path:
        if self.shared_ws is None:
            return fresh
        self.shared_ws.mkdir(parents=True, exist_ok=True)
        for p in self.shared_ws.iterdir():
            shutil.rmtree(p) if p.is_dir() and not p.is_symlink() else p.unlink()
        return self.shared_ws

    def run(self, goal: str, ws: Path) -> dict:
        cmd = [self.exe, "run", "--yes", "--json"]
        if self.shared_ws is None:
            cmd += ["--workspace", str(ws)]
        cmd.append(goal)
        started = time.monotonic()
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                stdin=subprocess.DEVNULL)
        try:
            stdout, stderr = proc.communicate(timeout=self.timeout)
        except KeyboardInterrupt:
            proc.kill()            # the run itself is interrupted: no client left behind
            proc.communicate()
            raise
        except subprocess.TimeoutExpired:
            # like Ctrl+C: the CLI cancels the run in the daemon, so it does not load the next goal
            proc.send_signal(signal.SIGINT)
            try:
                proc.communicate(timeout=CANCEL_WAIT_S)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.communicate()
            return {"answer": "", "status": "error", "error": f"timeout after {self.timeout:.0f} s",
                    "seconds": round(time.monotonic() - started, 2)}
        seconds = round(time.monotonic() - started, 2)
        final = None
        for line in reversed(stdout.strip().splitlines()):
            try:
                final = json.loads(line)
                break
            except ValueError:
                continue
        if not isinstance(final, dict):
            return {"answer": "", "status": "error", "exit_code": proc.returncode,
                    "error": (stderr.strip() or stdout.strip())[-500:], "seconds": seconds}
        status = final.get("status") or EXIT_STATUS.get(proc.returncode) \
            or DIRECTIVE_STATUS.get(final.get("directive"), "error")
        total = ((final.get("cost") or {}).get("total") or {})
        return {"answer": str(final.get("answer") or final.get("summary") or ""), "status": status,
                "exit_code": proc.returncode, "llm_calls": total.get("calls"),
                "prompt_tokens": total.get("prompt_tokens"),
                "completion_tokens": total.get("completion_tokens"),
                "reported_seconds": total.get("seconds"), "seconds": seconds,
                "task_llm_calls": final.get("llm_calls"), "llm_budget": final.get("llm_budget"),
                "per_role": (final.get("cost") or {}).get("per_role")}


# ---------------------------------------------------------------------------------------------
# aggregates
# ---------------------------------------------------------------------------------------------

def summarize(records: list[dict]) -> dict:
    n = len(records)
    passed = sum(r["passed"] for r in records)

    def stat(key):
        vals = [r[key] for r in records if isinstance(r.get(key), (int, float))]
        if not vals:
            return {"total": None, "mean": None, "n": 0}
        return {"total": round(sum(vals), 2), "mean": round(statistics.mean(vals), 2),
                "n": len(vals)}

    statuses: dict[str, int] = {}
    for r in records:
        statuses[r["status"]] = statuses.get(r["status"], 0) + 1
    by_kind: dict[str, list[int]] = {}
    for r in records:
        k = by_kind.setdefault(r["kind"], [0, 0])
        k[0] += r["passed"]
        k[1] += 1
    verified_right = sum(1 for r in records if r["passed"] and r["status"] == "verified")
    return {"goals": n, "passed": passed,
            "false_success": sum(1 for r in records if not r["passed"] and r["status"] == "verified"),
            # what a user feels: a wrong result reported as done, and how many right ones were
            # confirmed
            "wrong_but_done": sum(1 for r in records if not r["passed"]
                                  and r["status"] == "unverified"),
            "verified_recall": f"{verified_right}/{passed}",
            # the labels that claim certainty: "verified", and "not possible" (for artoo a
            # confirmed absence, FinalResult.verified true; for ReAct its own claim) — a wrong
            # one of either is a false confirmation, a right one a confirmed right answer
            "false_confirmed": sum(1 for r in records if not r["passed"]
                                   and r["status"] in CONFIRMED),
            "confirmed_recall": f"{sum(1 for r in records if r['passed'] and r['status'] in CONFIRMED)}"
                                f"/{passed}",
            "over_budget": sum(1 for r in records if r.get("llm_budget") and
                               (r.get("task_llm_calls") or 0) > r["llm_budget"]),
            "statuses": statuses, "by_kind": {k: f"{p}/{t}" for k, (p, t) in sorted(by_kind.items())},
            "llm_calls": stat("llm_calls"), "prompt_tokens": stat("prompt_tokens"),
            "completion_tokens": stat("completion_tokens"), "seconds": stat("seconds")}


CONFIRMED = ("verified", "not_possible")


def fmt_stat(s: dict, digits: int = 1) -> str:
    if s["mean"] is None:
        return "n/a"
    return f"{s['mean']:.{digits}f} mean / {s['total']:.{digits}f} total"


def print_summary(summary: dict) -> None:
    for half, systems in summary.items():
        log(f"\n== {half} half ==")
        for system, s in systems.items():
            log(f"  {system:6} passed {s['passed']}/{s['goals']}   false success claims "
                f"{s['false_success']}   wrong but done {s['wrong_but_done']}   verified "
                f"recall {s['verified_recall']}   over budget {s['over_budget']}   statuses "
                f"{s['statuses']}")
            log(f"         false confirmations (verified or not possible, wrong) "
                f"{s.get('false_confirmed', 'n/a')}   confirmed recall "
                f"{s.get('confirmed_recall', 'n/a')}")
            log(f"         by kind {s['by_kind']}")
            log(f"         LLM calls {fmt_stat(s['llm_calls'])}   prompt tokens "
                f"{fmt_stat(s['prompt_tokens'], 0)}   completion tokens "
                f"{fmt_stat(s['completion_tokens'], 0)}")
            log(f"         seconds {fmt_stat(s['seconds'])}")


# ---------------------------------------------------------------------------------------------
# main
# ---------------------------------------------------------------------------------------------

def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="Run the agent benchmark (artoo vs plain ReAct).")
    ap.add_argument("--half", choices=("dev", "heldout", "both"), default="dev")
    ap.add_argument("--systems", default="artoo,react", help="comma list of artoo,react")
    ap.add_argument("--only", default="", help="comma list of goal ids")
    ap.add_argument("--limit", type=int, default=None, help="first N goals of each half")
    ap.add_argument("--timeout", type=float, default=600.0, help="seconds per artoo goal")
    ap.add_argument("--out", type=Path, default=None,
                    help="results JSON (default results/<date>-<half>.json)")
    ap.add_argument("--show-heldout", action="store_true",
                    help="print and record the held-out goals' texts and per-goal results")
    ap.add_argument("--artoo", type=Path, default=REPO / ".venv" / "bin" / "artoo")
    ap.add_argument("--home", type=Path, default=None,
                    help="ARTOO_HOME for the run (default: a fresh one, so that no memory, world "
                         "fact or task of an earlier run of the same goals is recalled)")
    ap.add_argument("--base-url", default=None, help="ReAct endpoint (default: as artoo's)")
    ap.add_argument("--model", default=None, help="ReAct model id (default: the endpoint's first)")
    ap.add_argument("--resume", action="store_true",
                    help="go on with the unfinished run in --out (same checkout, goals, systems "
                         "and ARTOO_HOME), from the first goal it has not recorded")
    args = ap.parse_args(argv)

    systems = [s.strip() for s in args.systems.split(",") if s.strip()]
    if not systems or any(s not in SYSTEMS for s in systems):
        ap.error(f"--systems takes a comma list of {', '.join(SYSTEMS)}")
    halves = HALVES if args.half == "both" else (args.half,)
    only = {s.strip() for s in args.only.split(",") if s.strip()} or None
    per_half = [load_goals(h, only, args.limit) for h in halves]
    # halves alternate goal by goal, so a run cut short still measures both halves alike
    goals = [g for group in itertools.zip_longest(*per_half) for g in group if g is not None]
    if not goals:
        ap.error("no goal selected")
    stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
    out = args.out or HERE / "results" / f"{stamp}-{args.half}.json"
    if not out.is_absolute() and not out.parent.exists() and (HERE / out).parent.exists():
        out = HERE / out   # "results/x.json" relative to benchmarks/agent/
    prior = None
    if args.resume:
        try:
            prior = resumable(out, args)
        except ValueError as exc:
            ap.error(str(exc))
        args.home = Path(prior["artoo_home"])

    signal.signal(signal.SIGTERM, _interrupted)   # as Ctrl+C: the daemon it started is stopped
    home, fresh_home = use_home(args.home)
    if prior is not None:
        fresh_home = prior["fresh_home"]      # the run's own home: stop what this part started
    log(f"ARTOO_HOME {home}" + (" (fresh: no memory of earlier runs)" if fresh_home else ""))
    artoo = Artoo(args.artoo, args.timeout) if "artoo" in systems else None
    try:
        if artoo:
            artoo.prepare()
        return run_goals(args, systems, halves, goals, out, artoo, prior)
    finally:
        if fresh_home and artoo and artoo.started:
            subprocess.run([str(args.artoo), "down"], capture_output=True, timeout=300)
            log(f"stopped the daemon it started; its task logs stay in {home / 'tasks'}")


RESUME_ARGS = ("half", "systems", "only", "limit", "show_heldout")


def commit() -> str:
    """The checkout's commit (a run's figures belong to one), or '' outside git."""
    try:
        return subprocess.run(["git", "rev-parse", "HEAD"], cwd=REPO, capture_output=True,
                              text=True, timeout=30).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ""


# what a resumed run may differ in: docs, tests, results, and this runner (it summarises every
# record again at each save, so a change to it applies to the whole run alike)
NOT_CODE = (":!docs", ":!*.md", ":!tests", ":!benchmarks/agent/results",
            ":!benchmarks/agent/run.py")


def same_code(base: str) -> bool:
    """This checkout runs the code of commit `base`: nothing but docs, tests, results and the
    runner differs, in later commits or uncommitted."""
    spec = ["--", ".", *NOT_CODE]
    try:
        return all(subprocess.run(["git", "diff", "--quiet", *rev, *spec], cwd=REPO,
                                  timeout=60).returncode == 0 for rev in ([base], [base, "HEAD"]))
    except (OSError, subprocess.SubprocessError):
        return False


def resumable(out: Path, args) -> dict:
    """The unfinished results file `out`, if this invocation can go on with it: the same goal
    selection and systems, and the same checkout. A run of the whole benchmark takes longer than
    some sessions on a 2-core machine; resumed, it is the same run — same home (memory, world
    facts and task logs of the goals before), same order — with a daemon restart in between."""
    try:
        prior = json.loads(out.read_text())
    except (OSError, ValueError) as exc:
        raise ValueError(f"--resume: cannot read {out}: {exc}") from exc
    if prior.get("finished"):
        raise ValueError(f"--resume: {out} is a finished run")
    changed = [k for k in RESUME_ARGS if prior.get("args", {}).get(k) != getattr(args, k)]
    if changed:
        raise ValueError(f"--resume: {out} was run with other {', '.join(changed)}")
    if prior.get("commit") and not same_code(prior["commit"]):
        raise ValueError(f"--resume: {out} was run at {prior['commit'][:12]}; this checkout's "
                         f"code differs from it (only docs, tests, results and this runner may)")
    if not prior.get("artoo_home") or not Path(prior["artoo_home"]).is_dir():
        raise ValueError(f"--resume: the run's ARTOO_HOME {prior.get('artoo_home')} is gone")
    return prior


def _interrupted(signum, frame):
    raise KeyboardInterrupt(f"signal {signum}")


def use_home(home: Path | None) -> tuple[Path, bool]:
    """The run's ARTOO_HOME (exported to every artoo command it runs): the one given, or a
    fresh one. A goal nobody tuned for must not meet the memory of an earlier run of itself:
    recalled SOPs carry that run's commands and values (a `printf 250.0 > total.txt`) into both
    the executor's and the checker's prompts. The fresh home shares the bundled model and the
    user's `.env` (the LLM endpoint) with the default one."""
    if home is not None:
        os.environ["ARTOO_HOME"] = str(home.expanduser().resolve())
        return Path(os.environ["ARTOO_HOME"]), False
    default = Path(os.environ.get("ARTOO_HOME") or Path.home() / ".artoo").expanduser()
    fresh = Path(tempfile.mkdtemp(prefix="artoo-bench-home-"))
    if (default / "models").is_dir():
        (fresh / "models").symlink_to((default / "models").resolve(), target_is_directory=True)
    if (default / ".env").is_file():
        shutil.copy2(default / ".env", fresh / ".env")
    os.environ["ARTOO_HOME"] = str(fresh)
    return fresh, True


def run_goals(args, systems: list[str], halves: tuple[str, ...], goals: list[dict], out: Path,
              artoo: "Artoo | None", prior: dict | None = None) -> int:
    endpoint = None
    if "react" in systems:
        endpoint = react.resolve_endpoint(args.base_url, args.model)
        log(f"react endpoint {endpoint[0]} model {endpoint[2]}")
    log(f"{len(goals)} goals ({', '.join(halves)}), systems {', '.join(systems)}, "
        f"results -> {out}")

    now = datetime.now(timezone.utc).isoformat(timespec="seconds")
    records: list[dict] = list(prior["results"]) if prior else []
    started_at = prior["date"] if prior else now
    resumed = (prior.get("resumed", []) + [now]) if prior else []
    done = len(records)            # (goal, system) pairs recorded, in this order, before
    if prior:
        log(f"resuming: {done} results recorded since {started_at}")

    def public(rec: dict) -> dict:
        if rec["half"] == "dev" or args.show_heldout:
            return rec
        return {k: rec[k] for k in ("half", "kind", "system", "passed", "status", "llm_calls",
                                    "prompt_tokens", "completion_tokens", "seconds",
                                    "task_llm_calls", "llm_budget")}

    def save(final: bool) -> dict:
        """Write the results file (after every goal, so an interrupted run keeps what it did)."""
        summary = {h: {s: summarize([r for r in records if r["half"] == h and r["system"] == s])
                       for s in systems} for h in halves}
        data = {"date": started_at, "finished": final, "commit": commit(), "resumed": resumed,
                "machine": {"host": socket.gethostname(), "platform": platform.platform(),
                            "cpus": os.cpu_count(), "python": platform.python_version()},
                "react_endpoint": {"base_url": endpoint[0], "model": endpoint[2]} if endpoint else None,
                "args": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()},
                "artoo_home": os.environ.get("ARTOO_HOME"), "fresh_home": args.home is None,
                "summary": summary, "results": [public(r) for r in records]}
        out.parent.mkdir(parents=True, exist_ok=True)
        partial = out.with_suffix(".partial")
        partial.write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n")
        partial.replace(out)
        return summary

    counters = {h: 0 for h in halves}
    totals = {h: sum(1 for g in goals if g["half"] == h) for h in halves}
    for goal in goals:
        half = goal["half"]
        counters[half] += 1
        visible = half == "dev" or args.show_heldout
        for system in systems:
            if done:
                done -= 1
                continue
            with tempfile.TemporaryDirectory(prefix="agent-bench-") as tmp:
                fresh = Path(tmp) / "ws"
                fresh.mkdir()
                ws = artoo.workspace(fresh) if system == "artoo" else fresh
                setup_workspace(goal, ws)
                text = goal["goal"].replace("{workspace}", str(ws))   # absolute paths
                if system == "artoo":
                    res = artoo.run(text, ws)
                else:
                    t0 = time.monotonic()
                    res = react.react(text, ws, base_url=endpoint[0], api_key=endpoint[1],
                                      model=endpoint[2])
                    res["seconds"] = round(time.monotonic() - t0, 2)
                result_file = Path(tmp) / "result.json"
                result_file.write_text(json.dumps({"answer": res.get("answer", ""),
                                                   "status": res.get("status", "error")}))
                passed, reason = check(goal, ws, result_file)
            rec = {"half": half, "id": goal["id"], "kind": goal["kind"], "system": system,
                   "passed": passed, "status": res.get("status"), "reason": reason,
                   "answer": res.get("answer", ""), "goal": goal["goal"],
                   **{k: res.get(k) for k in ("llm_calls", "prompt_tokens", "completion_tokens",
                                              "seconds", "exit_code", "error", "task_llm_calls",
                                              "llm_budget")}}
            if system == "react":
                rec["steps"] = res.get("steps")
            elif res.get("per_role") is not None:
                rec["per_role"] = res.get("per_role")
            records.append(rec)
            calls = rec["llm_calls"] if rec["llm_calls"] is not None else "?"
            if visible:
                log(f"[{half} {counters[half]}/{totals[half]}] {goal['id']:24} {goal['kind']:10} "
                    f"{system:6} {'PASS' if passed else 'FAIL'}  {rec['status']:12} "
                    f"calls {calls:>3}  {rec['seconds'] or 0:6.1f}s  {reason}")
            else:
                log(f"[{half} {counters[half]}/{totals[half]}] {system} done")
            save(final=False)

    summary = save(final=True)
    print_summary(summary)
    log(f"\nresults written to {out}")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:
        log("interrupted: the results file keeps the goals done so far")
        sys.exit(130)
