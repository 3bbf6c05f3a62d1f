"""Run the MCP benchmark: goals that only an MCP tool can answer, on the running artoo daemon.

    .venv/bin/python benchmarks/mcp/run.py [--only ID,...] [--limit N] [--timeout S]
        [--out FILE.json] [--keep-servers] [--write-benchmarks]

The goals' servers are added to `$ARTOO_HOME/mcp.json` for the run (and removed afterwards
unless --keep-servers): `shop` (benchmarks/mcp/servers/shop.py, FastMCP: catalogue, stock,
issue tracker, exchange rates) and `docs` (the published @modelcontextprotocol/server-filesystem,
installed by scripts/setup, serving benchmarks/mcp/data/handbook read-only; goals that need it
are skipped when it is not installed). Their data is nowhere in the workspace and the sandbox
has no network, so only the MCP tool can answer.

For each goal: a fresh workspace, setup.sh, `artoo run --yes --json --workspace WS GOAL`, and
check.py (the agent benchmark's checkers, benchmarks/agent/lib/check_util.py). Prints one line
per goal (PASS/FAIL, status, whether an MCP tool was called, the checker's reason) and the
aggregates of the agent benchmark (passed, false success claims, LLM calls, tokens, seconds);
`--write-benchmarks` appends them to docs/BENCHMARKS.md. See benchmarks/mcp/README.md.
"""
from __future__ import annotations

import argparse
import json
import platform
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks" / "agent"))
from run import Artoo, check, log, print_summary, setup_workspace, summarize  # noqa: E402

FS_BIN = REPO / ".venv" / "mcp-npm" / "node_modules" / ".bin" / "mcp-server-filesystem"


def servers() -> dict[str, dict]:
    """The benchmark's mcp.json entries (desktop format + artoo's key)."""
    out = {"shop": {"command": sys.executable, "args": [str(HERE / "servers" / "shop.py")],
                    "artoo": {"timeout": 60}}}
    if FS_BIN.exists():
        out["docs"] = {"command": str(FS_BIN), "args": [str(HERE / "data" / "handbook")],
                       "artoo": {"timeout": 60, "tools": {"write_file": "deny",
                                                          "edit_file": "deny",
                                                          "move_file": "deny"}}}
    return out


class McpArtoo(Artoo):
    """The agent benchmark's artoo runner; `artoo run` here always has --workspace."""

    def prepare(self) -> None:
        import subprocess
        proc = subprocess.run([self.exe, "status", "--json"], capture_output=True, text=True,
                              timeout=600)
        if proc.returncode != 0:
            log("artoo daemon not (fully) up: `artoo up` (it is left running)")
            up = subprocess.run([self.exe, "up"], capture_output=True, text=True, timeout=900)
            if up.returncode != 0:
                raise SystemExit(f"`artoo up` failed:\n{up.stdout[-2000:]}{up.stderr[-2000:]}")


def install_servers(home: Path) -> dict | None:
    """Add the benchmark's servers to mcp.json; returns the file's former content (None: none)."""
    from services.runtime import mcpconfig
    path = mcpconfig.config_path(home)
    before = json.loads(path.read_text()) if path.exists() else None
    current = mcpconfig.load(home)
    for name, entry in servers().items():
        current[name] = mcpconfig.parse_entry(name, entry)
    mcpconfig.save(home, current)
    return before


def restore_servers(home: Path, before: dict | None) -> None:
    from services.runtime import mcpconfig
    path = mcpconfig.config_path(home)
    if before is None:
        path.unlink(missing_ok=True)
    else:
        path.write_text(json.dumps(before, indent=2) + "\n")


def load_goals(only: set[str], limit: int | None) -> list[dict]:
    goals = []
    for d in sorted((HERE / "goals").iterdir()):
        if d.is_dir() and (not only or d.name in only):
            goals.append({"half": "mcp", "id": d.name, "dir": d,
                          **json.loads((d / "goal.json").read_text())})
    return goals[:limit] if limit else goals


def mcp_calls(home: Path, since: float) -> dict[str, list[str]]:
    """The MCP tools each run called, from the decision logs (run id -> tool names)."""
    out: dict[str, list[str]] = {}
    for f in (home / "tasks").glob("*.jsonl"):
        if f.stat().st_mtime < since:
            continue
        for line in f.read_text(errors="replace").splitlines():
            try:
                ev = json.loads(line)
            except ValueError:
                continue
            if ev.get("kind") == "tool_call" and ev.get("server"):
                out.setdefault(ev.get("task_id", f.stem), []).append(ev.get("tool"))
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="Run the MCP benchmark on the artoo daemon.")
    ap.add_argument("--only", default="", help="comma list of goal ids")
    ap.add_argument("--limit", type=int, default=None, help="the first N goals")
    ap.add_argument("--timeout", type=float, default=600.0, help="seconds per goal")
    ap.add_argument("--out", type=Path, default=None, help="results JSON (default: "
                    "benchmarks/mcp/results/<date>.json)")
    ap.add_argument("--artoo", type=Path, default=REPO / ".venv" / "bin" / "artoo")
    ap.add_argument("--keep-servers", action="store_true",
                    help="leave the benchmark's servers in mcp.json")
    ap.add_argument("--write-benchmarks", action="store_true",
                    help="append the figures to docs/BENCHMARKS.md")
    args = ap.parse_args(argv)
    from protocol.settings import load_settings
    home = Path(load_settings().home)
    goals = load_goals({g for g in args.only.split(",") if g}, args.limit)
    available = set(servers())
    skipped = [g for g in goals if not set(g.get("servers", [])) <= available]
    goals = [g for g in goals if g not in skipped]
    for g in skipped:
        log(f"skip {g['id']}: needs {', '.join(g['servers'])} (server-filesystem is not "
            f"installed: bash scripts/setup installs it when npm exists)")
    if not goals:
        log("no goals to run")
        return 2
    before = install_servers(home)
    artoo = McpArtoo(args.artoo, args.timeout)
    records: list[dict] = []
    started = time.time()
    try:
        artoo.prepare()
        for goal in goals:
            with tempfile.TemporaryDirectory(prefix="mcpbench-") as tmp:
                ws = artoo.workspace(Path(tmp) / "ws")
                ws.mkdir(parents=True, exist_ok=True)
                setup_workspace(goal, ws)
                t0 = time.time()
                result = artoo.run(goal["goal"], ws)
                result_file = Path(tmp) / "result.json"
                result_file.write_text(json.dumps(result))
                passed, reason = check(goal, ws, result_file)
                called = sorted({t for ts in mcp_calls(home, t0).values() for t in ts})
                rec = {"id": goal["id"], "kind": goal["kind"], "system": "artoo",
                       "passed": passed, "reason": reason, "mcp_tools_called": called,
                       **result}
                records.append(rec)
                log(f"{goal['id']:20} {goal['kind']:10} {'PASS' if passed else 'FAIL'} "
                    f"{rec['status']:12} mcp={','.join(called) or '-'}  {reason}")
    finally:
        if not args.keep_servers:
            restore_servers(home, before)
    summary = {"mcp": {"artoo": summarize(records)}}
    print_summary(summary)
    used = sum(1 for r in records if r["mcp_tools_called"])
    log(f"  goals whose run called an MCP tool: {used}/{len(records)}")
    out = args.out or HERE / "results" / f"{datetime.now(timezone.utc):%Y-%m-%d-%H%M}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"started": started, "host": platform.node(),
                               "summary": summary, "records": records}, indent=2, default=str))
    log(f"results: {out}")
    if args.write_benchmarks:
        s = summary["mcp"]["artoo"]
        line = (f"| {datetime.now(timezone.utc):%Y-%m-%d} | {s['passed']}/{s['goals']} | "
                f"{s['false_success']} | {used}/{len(records)} | "
                f"{s['llm_calls']['mean']} | {s['seconds']['mean']} |")
        with open(REPO / "docs" / "BENCHMARKS.md", "a", encoding="utf-8") as fh:
            fh.write(f"\nMCP benchmark (benchmarks/mcp): date | passed | false success | "
                     f"called MCP | LLM calls/goal | s/goal\n{line}\n")
    return 0 if all(r["passed"] for r in records) else 1


if __name__ == "__main__":
    sys.exit(main())
