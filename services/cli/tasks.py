"""`artoo tasks`: list, inspect, follow and cancel runs.

The source is the decision log every role appends to (`tasks/<run_id>.jsonl`): it survives the
daemon, holds every run the CLI never saw (other terminals, scripts), and needs no bus. Only
`cancel` talks to the bus. Each run's lifecycle state and trail (pending → in_progress → review →
completed, …) are derived from the same log by services/runtime/lifecycle.py, the one table of
allowed transitions. Reading (`summarize`, `details`) is pure and apart from rendering,
like circus keeps a command's message, execution and rendering apart.
"""
from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any, Iterator

import click
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from protocol.settings import Settings, load_settings

from services.runtime import lifecycle, tasklog

from . import render

LOST_GRACE_S = 60.0        # a run with no task_end this long after its deadline is "lost"
FOLLOW_POLL_S = 0.25


# -- reading ----------------------------------------------------------------------------------

def log_files(settings: Settings) -> list[Path]:
    """Every run's decision log, newest first."""
    try:
        files = [p for p in Path(settings.tasks_dir).glob("*.jsonl") if p.is_file()]
    except OSError:
        return []
    return sorted(files, key=lambda p: p.stat().st_mtime, reverse=True)


def read_events(path: Path) -> list[dict]:
    out = []
    try:
        with open(path, "rb") as fh:
            for raw in fh:
                try:
                    event = json.loads(raw)
                except ValueError:
                    continue          # a damaged line is skipped, as tasklog.read does
                if isinstance(event, dict):
                    out.append(event)
    except OSError:
        pass
    return out


def summarize(events: list[dict], now: float | None = None) -> dict:
    """One run's row: state, Law 0 status, goal, age, cost, workspace (from its events only)."""
    now = time.time() if now is None else now
    begin = next((e for e in events if e.get("kind") == "task_begin"), {})
    end = next((e for e in reversed(events) if e.get("kind") == "task_end"), None)
    started = min((e.get("ts", now) for e in events), default=now)
    deadline = next((e.get("deadline_at") for e in events if e.get("deadline_at")), None)
    if end is not None:
        state = "finished"
        status = end.get("outcome") or end.get("status") or "?"
    elif deadline and now > deadline + LOST_GRACE_S:
        state, status = "lost", "-"
    else:
        state, status = "running", "-"
    usages = [e for e in events if e.get("kind") == "llm_call"]
    life = lifecycle.derive(events)
    return {"id": (events[0].get("task_id") if events else ""), "state": state, "status": status,
            "lifecycle": life.state, "illegal_transitions": len(life.refused),
            "goal": begin.get("raw_input") or begin.get("intent") or "",
            "slug": begin.get("intent_slug", ""), "workspace": begin.get("workspace", ""),
            "started_at": started, "age_s": round(now - started, 1),
            "ended_at": end.get("ts") if end else None,
            "answer": (end or {}).get("answer", ""), "summary": (end or {}).get("summary", ""),
            "cost": render.cost_summary(usages)}


def details(events: list[dict], now: float | None = None) -> dict:
    """`tasks show`: the row plus plan rounds, subtasks, verdicts and GGS rounds."""
    out = summarize(events, now)
    life = lifecycle.derive(events)
    out["trail"], out["refused_transitions"] = life.entries, life.refused
    out["plans"] = [{"round": e.get("plan_round"),
                     "subtasks": [{"id": s.get("subtask_id"), "intent": s.get("intent"),
                                   "sequence": s.get("sequence")} for s in e.get("subtasks", [])]}
                    for e in events if e.get("kind") == "plan"]
    out["subtasks"] = [{k: e.get(k) for k in ("subtask_id", "status", "attempts", "verified",
                                                "not_possible", "checks", "unverified",
                                                "failure_reason", "reason") if e.get(k) is not None}
                       for e in events if e.get("kind") == "subtask_end"]
    out["verdicts"] = [{k: e.get(k) for k in ("subtask_id", "attempt", "criterion", "met",
                                                "evidence") if e.get(k) is not None}
                       for e in events if e.get("kind") == "criterion_verdict"]
    out["ggs"] = [{k: e.get(k) for k in ("replan_round", "directive", "d", "p", "l", "grad_l",
                                           "reason") if e.get(k) is not None}
                  for e in events if e.get("kind") == "ggs_decision"]
    return out


def find_run(settings: Settings, ref: str) -> Path:
    """The log of the run `ref` names: its id, or a unique part of it (`last` = the newest)."""
    files = log_files(settings)
    if ref == "last" and files:
        return files[0]
    exact = [p for p in files if p.stem == ref]
    if exact:
        return exact[0]
    hits = [p for p in files if ref in p.stem]
    if len(hits) == 1:
        return hits[0]
    if not hits:
        raise click.ClickException(f"no run matches {ref!r} in {settings.tasks_dir}")
    raise click.ClickException(f"{ref!r} matches {len(hits)} runs "
                               f"({', '.join(p.stem for p in hits[:4])}, …); give more of the id")


def event_line(e: dict) -> str:
    """One decision-log event as one plain line (`tasks logs`): time, kind, the telling fields."""
    ts = time.strftime("%H:%M:%S", time.localtime(e.get("ts", 0)))
    kind = e.get("kind", "?")
    if kind == "llm_call":
        body = (f"{e.get('role')} {e.get('prompt_tokens') or 0}+{e.get('completion_tokens') or 0} "
                f"tokens {float(e.get('latency_ms') or 0) / 1000:.1f}s"
                + ("" if e.get("ok", True) else f" error: {e.get('error')}"))
    elif kind == "tool_call":
        out = str(e.get("tool_output") if e.get("tool_output") is not None else e.get("error", ""))
        body = (f"{e.get('tool')} {json.dumps(e.get('tool_input'), ensure_ascii=False)[:160]} → "
                f"{out.strip().replace(chr(10), ' ⏎ ')[:160]}")
    else:
        skip = {"kind", "ts", "task_id", "messages", "response"}
        body = " ".join(f"{k}={_short(v)}" for k, v in e.items() if k not in skip)
    return f"{ts} {kind:18} {body}"


def _short(value: Any, limit: int = 120) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def follow_events(path: Path, *, follow: bool, poll_s: float = FOLLOW_POLL_S) -> Iterator[dict]:
    """The log's events; with `follow`, keep reading new lines until the run's task_end."""
    pos = 0
    buf = b""
    while True:
        try:
            with open(path, "rb") as fh:
                fh.seek(pos)
                chunk = fh.read()
                pos = fh.tell()
        except FileNotFoundError:
            chunk = b""
        buf += chunk
        *lines, buf = buf.split(b"\n")
        ended = False
        for raw in lines:
            try:
                event = json.loads(raw)
            except ValueError:
                continue
            if isinstance(event, dict):
                ended = ended or event.get("kind") == "task_end"
                yield event
        if not follow or ended:
            return
        time.sleep(poll_s)   # polling a file for growth; no handshake exists to wait on


# -- rendering --------------------------------------------------------------------------------

def _age(seconds: float) -> str:
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds / size:.0f}{unit}"
    return f"{seconds:.0f}s"


STATUS_COLOUR = {"verified": "green", "unverified": "yellow", "not_possible": "blue",
                 "abandoned": "red"}


def rows_table(rows: list[dict]) -> Table:
    table = Table(show_edge=False, title_justify="left")
    for col in ("run", "state", "status", "age", "calls", "tokens", "llm s", "workspace", "goal"):
        # state: the lifecycle state (services/runtime/lifecycle.py); "lost" when no FinalResult
        # came long after the deadline
        table.add_column(col, justify="right" if col in ("age", "calls", "tokens", "llm s")
                         else "left", overflow="fold" if col == "goal" else "ellipsis")
    for r in rows:
        tot = r["cost"]["total"]
        colour = STATUS_COLOUR.get(r["status"])
        status = f"[{colour}]{r['status']}[/{colour}]" if colour else r["status"]
        state = r["lifecycle"] or "-"
        if r["state"] == "lost":
            state += " (lost)"
        table.add_row(r["id"], state, status, _age(r["age_s"]), str(tot["calls"]),
                      str(tot["prompt_tokens"] + tot["completion_tokens"]),
                      f"{tot['seconds']:.0f}", escape(r["workspace"] or "-"),
                      escape(r["goal"][:80]))
    return table


def print_details(console: Console, d: dict) -> None:
    say = lambda text: console.print(text, highlight=False, soft_wrap=True)  # noqa: E731
    say(f"[bold]{escape(d['id'])}[/bold]  {d['lifecycle']}  {d['status']}  "
        f"({_age(d['age_s'])} ago)")
    if d["trail"]:
        say("lifecycle: " + " → ".join([d["trail"][0]["to"]] + [t["to"] for t in d["trail"][1:]]))
        for t in d["trail"]:
            say(f"  {time.strftime('%H:%M:%S', time.localtime(t['ts']))} "
                f"{t['from'] or '-'} → {t['to']}  [dim]{escape(t['actor'])}: "
                f"{escape(str(t['reason'])[:160])}[/dim]")
    for t in d["refused_transitions"]:
        say(f"  [red]refused[/red] {t['from']} → {t['to']} ({escape(t['actor'])}: "
            f"{escape(str(t['reason'])[:160])})")
    say(f"goal: {escape(d['goal'])}")
    if d["workspace"]:
        say(f"workspace: {escape(d['workspace'])}")
    for p in d["plans"]:
        say(f"plan round {p['round']}:")
        for s in p["subtasks"]:
            say(f"  {s['sequence']}. {escape(str(s['intent']))}  [dim]{s['id']}[/dim]")
    for s in d["subtasks"]:
        mark = "verified" if s.get("verified") else ("not possible" if s.get("not_possible")
                                                    else "unverified")
        say(f"subtask {s['subtask_id']}: {s.get('status')} after {s.get('attempts', '?')} "
            f"attempt(s), {mark}")
        for c in s.get("checks") or []:
            say(f"  ✓ {escape(str(c))}")
        for u in s.get("unverified") or []:
            say(f"  ? {escape(str(u))}")
        if s.get("failure_reason") or s.get("reason"):
            say(f"  ✗ {escape(str(s.get('failure_reason') or s.get('reason')))}")
    for v in d["verdicts"]:
        say(f"verdict (attempt {v.get('attempt', '?')}): {'met' if v.get('met') else 'not met'} — "
            f"{escape(str(v.get('evidence', ''))[:200])}")
    for g in d["ggs"]:
        say(f"GGS round {g.get('replan_round', '?')}: {g.get('directive')} "
            f"D={g.get('d')} P={g.get('p')} L={g.get('l')} ∇L={g.get('grad_l')}")
    if d["answer"]:
        say(f"answer: {escape(d['answer'])}")
    if d["summary"]:
        say(f"summary: {escape(d['summary'])}")
    console.print(_cost_table(d["cost"]))


def _cost_table(cost: dict) -> Table:
    table = Table(title="Cost", title_justify="left", show_edge=False)
    for col in ("role", "calls", "prompt tok", "completion tok", "seconds"):
        table.add_column(col, justify="left" if col == "role" else "right")
    for role, c in list(cost["per_role"].items()) + [("total", cost["total"])]:
        table.add_row(role, str(c["calls"]), str(c["prompt_tokens"]),
                      str(c["completion_tokens"]), f"{c['seconds']:.1f}")
    return table


# -- commands ---------------------------------------------------------------------------------

def _settings() -> Settings:
    try:
        return load_settings()
    except ValueError as exc:
        raise click.ClickException(str(exc)) from None


@click.group()
def tasks() -> None:
    """List, inspect, follow and cancel runs (from the decision logs in $ARTOO_HOME/tasks)."""


@tasks.command("ls")
@click.option("--state", type=click.Choice(["all", "running", "finished", "lost",
                                           *lifecycle.STATES]),
              default="all", show_default=True,
              help="running / finished / lost, or a lifecycle state (pending, in_progress, …)")
@click.option("--status", default=None,
              help="only runs that ended so: verified, unverified, not_possible, abandoned, …")
@click.option("--limit", "-n", default=20, show_default=True, help="newest N runs (0 = all)")
@click.option("--json", "as_json", is_flag=True, help="one JSON array")
def ls(state: str, status: str | None, limit: int, as_json: bool) -> None:
    """Runs, newest first: state, status, age, cost, workspace, goal."""
    settings = _settings()
    rows: list[dict] = []
    now = time.time()
    for path in log_files(settings):
        row = summarize(read_events(path), now)
        if not row["id"] or (state != "all" and state not in (row["state"], row["lifecycle"])) or \
                (status and row["status"] != status):
            continue
        rows.append(row)
        if limit and len(rows) >= limit:
            break
    if as_json:
        click.echo(json.dumps(rows, indent=2, ensure_ascii=False))
    elif not rows:
        click.echo("no runs" + ("" if state == "all" and not status else " match"))
    else:
        Console(width=None if sys.stdout.isatty() else 200).print(rows_table(rows))


@tasks.command()
@click.argument("run")
@click.option("--json", "as_json", is_flag=True, help="the details as JSON")
def show(run: str, as_json: bool) -> None:
    """One run: goal, plan, subtasks with their checks, verdicts, GGS rounds, cost, result.
    RUN is its id, a unique part of it, or `last`."""
    d = details(read_events(find_run(_settings(), run)))
    if as_json:
        click.echo(json.dumps(d, indent=2, ensure_ascii=False))
    else:
        print_details(Console(), d)


@tasks.command()
@click.argument("run")
@click.option("--follow", "-f", is_flag=True, help="keep printing until the run ends")
@click.option("--json", "as_json", is_flag=True, help="the raw events, one JSON object a line")
def logs(run: str, follow: bool, as_json: bool) -> None:
    """A run's decision log, one line per event (LLM calls without their prompts)."""
    path = find_run(_settings(), run)
    try:
        for event in follow_events(path, follow=follow):
            click.echo(json.dumps(event, ensure_ascii=False) if as_json else event_line(event))
    except KeyboardInterrupt:
        pass


@tasks.command()
@click.argument("run")
@click.option("--wait", default=30.0, show_default=True, help="seconds to wait for the result")
@click.option("--json", "as_json", is_flag=True, help="the FinalResult as JSON")
def cancel(run: str, wait: float, as_json: bool) -> None:
    """Cancel a running run: every role drops it, its effectors are killed, GGS ends it."""
    from .run import ConfigError, RunSession, exit_code, terminal_json
    settings = _settings()
    path = find_run(settings, run)
    row = summarize(read_events(path))
    if row["state"] == "finished":
        click.echo(f"{row['id']} already finished ({row['status']})")
        return
    err = Console(stderr=True)
    try:
        session = RunSession(settings, err, quiet=True, interactive=False)
    except ConfigError as exc:
        raise click.ClickException(str(exc)) from None
    try:
        final = session.cancel(row["id"], wait)
    finally:
        session.close()
    if final is None:
        err.print(f"[red]error:[/red] no result for {row['id']} within {wait:.0f} s", highlight=False)
        sys.exit(1)
    if as_json:
        click.echo(terminal_json(final, session.usage_of(row["id"])))
    else:
        click.echo(f"{row['id']} cancelled: {getattr(final, 'summary', '')}")
    sys.exit(0 if exit_code(final) in (0, 1) else exit_code(final))


def register(main: click.Group) -> None:
    main.add_command(tasks)
