"""`artoo world …` and `artoo goals …`: the operator's view of the world model (seed 002).

Every command is a WorldQuery request to the running `world` process over the bus (it owns
world.lmdb; nothing here opens it), so the tap records each one, `forget`, `accept` and `reject`
included.

  artoo world entities                tracked entities by weight: kind, mentions, state, importance
  artoo world facts [--at T] [--as-of T] [--claims]   facts valid at T (default now)
  artoo world show ENTITY             an entity, every fact and claim about it, its edges
  artoo world forget ENTITY           mark it forgotten (kept, audited, out of every projection)
  artoo goals ls [--all] / show ID    proposals (AUTO, SYSTEM, REACTIVE) first, with what fired them
  artoo goals accept ID [--every D]   Law 1: only now does a proposal become a schedule, a run
                                      or its upkeep (a SYSTEM one: pause a schedule; a report)
  artoo goals reject ID               it never runs
"""
from __future__ import annotations

import sys
import time
from datetime import datetime

import click
from rich.table import Table

from protocol.messages import WorldQuery, WorldResult
from protocol.settings import load_settings
from services.runtime import schedules

from . import storequery
from .storequery import clip, console, echo_json, err_console


def ask(query: WorldQuery, timeout: float | None = None) -> WorldResult:
    return storequery.ask(query, "world", timeout)


def parse_time(text: str | None) -> float | None:
    """`--at`: epoch seconds, ISO date/time (local), or an age such as 2h / 3d (that long ago)."""
    if not text:
        return None
    raw = text.strip()
    try:
        return float(raw)
    except ValueError:
        pass
    try:
        return time.time() - schedules.parse_every(raw)
    except schedules.ScheduleError:
        pass
    try:
        return datetime.fromisoformat(raw).timestamp()
    except ValueError:
        raise click.UsageError(f"bad time {text!r}: give epoch seconds, an ISO date/time "
                               f"(2026-11-25T10:00) or an age (2h, 3d)") from None


def _when(ts) -> str:
    return datetime.fromtimestamp(ts).strftime("%Y-%m-%d %H:%M:%S") if ts else "-"


def _fact_table(rows: list[dict], title: str) -> Table:
    table = Table(title=title, title_justify="left")
    for col in ("id", "subject", "predicate", "object", "status", "valid", "invalid", "source"):
        table.add_column(col, overflow="fold" if col in ("object",) else "ellipsis")
    for f in rows:
        src = ", ".join(e.get("task", "") for e in f.get("episodes", [])[-2:])
        table.add_row(f["id"][:8], clip(f["subject"], 30), f["predicate"], clip(f["object"], 40),
                      f["status"] + (" (forgotten)" if f.get("forgotten") else ""),
                      _when(f["valid_at"]), _when(f["invalid_at"]), clip(src, 30))
    return table


# ---------------------------------------------------------------------------------------------
# artoo world
# ---------------------------------------------------------------------------------------------

@click.group("world")
def world() -> None:
    """The world model: entities, facts (bi-temporal), the knowledge graph."""


@world.command("entities")
@click.option("-n", "--limit", default=50, show_default=True)
@click.option("--json", "as_json", is_flag=True)
def entities_cmd(limit: int, as_json: bool) -> None:
    """Tracked entities, most important first (importance halved once stale)."""
    res = ask(WorldQuery(op="entities", n=limit))
    if as_json:
        echo_json(res.entities)
        return
    table = Table(title=f"world: {len(res.entities)} entit(ies)", title_justify="left")
    for col in ("id", "kind", "mentions", "state", "importance", "sentiment", "last mentioned"):
        table.add_column(col)
    for e in res.entities:
        sent = "-" if e.get("sentiment") is None else f"{e['sentiment']:+.2f}"
        table.add_row(clip(e["id"], 50), e["kind"], str(e["mentions"]), e["state"],
                      f"{e['importance']:.3f}", sent, _when(e["last_mentioned"]))
    console.print(table)


@world.command("facts")
@click.option("--at", "at", default=None, help="valid at this time (epoch, ISO, or an age: 2h)")
@click.option("--as-of", "as_of", default=None, help="as artoo knew them at this time")
@click.option("--claims", is_flag=True, help="also list claims (never shown as facts)")
@click.option("-n", "--limit", default=50, show_default=True)
@click.option("--json", "as_json", is_flag=True)
def facts_cmd(at: str | None, as_of: str | None, claims: bool, limit: int, as_json: bool) -> None:
    """Facts valid now (or --at a time), each with its source episode."""
    res = ask(WorldQuery(op="facts", at=parse_time(at), as_of=parse_time(as_of), claims=claims,
                         n=limit))
    if as_json:
        echo_json({"facts": res.facts, "claims": res.claims})
        return
    when = f" at {_when(parse_time(at))}" if at else ""
    console.print(_fact_table(res.facts, f"facts valid{when}: {len(res.facts)}"))
    if claims:
        console.print(_fact_table(res.claims, f"claims (not facts): {len(res.claims)}"))


@world.command("show")
@click.argument("entity")
@click.option("--json", "as_json", is_flag=True)
def show_cmd(entity: str, as_json: bool) -> None:
    """One entity: its state, every fact and claim about it (history too), its edges."""
    res = ask(WorldQuery(op="show", entity=entity))
    if as_json:
        echo_json({"entity": res.entities[0], "facts": res.facts, "claims": res.claims,
               "edges": res.edges})
        return
    e = res.entities[0]
    console.print(f"[bold]{e['id']}[/bold]  kind {e['kind']}  {e['state']}  mentions "
                  f"{e['mentions']}  importance {e['importance']:.3f}  first "
                  f"{_when(e['first_mentioned'])}  last {_when(e['last_mentioned'])}"
                  + (f"  [yellow]forgotten {_when(e['forgotten']['at'])}[/yellow]"
                     if e.get("forgotten") else ""), highlight=False)
    console.print(_fact_table(res.facts, f"facts (history included): {len(res.facts)}"))
    if res.claims:
        console.print(_fact_table(res.claims, f"claims: {len(res.claims)}"))
    for edge in res.edges:
        console.print(f"  {edge['src']} —{edge['label']}→ {edge['dst']}", highlight=False)


@world.command("forget")
@click.argument("entity")
@click.option("--reason", default="operator", help="recorded in the audit")
def forget_cmd(entity: str, reason: str) -> None:
    """Mark ENTITY forgotten: kept in the store, out of every projection, audited."""
    e = ask(WorldQuery(op="forget", entity=entity, text=reason)).entities[0]
    click.echo(f"forgot {e['id']} ({e.get('facts_forgotten', 0)} fact(s) with it)")


@world.command("stats")
def stats_cmd() -> None:
    echo_json(ask(WorldQuery(op="stats")).stats)


# ---------------------------------------------------------------------------------------------
# artoo goals
# ---------------------------------------------------------------------------------------------

@click.group("goals")
def goals() -> None:
    """Goals (seed 002): proposals from the goal generator wait for the operator (Law 1)."""


@goals.command("ls")
@click.option("--all", "show_all", is_flag=True, help="USER goals (every task) as well")
@click.option("--status", default="", help="BLOCKED (proposed), PENDING, ACTIVE, REJECTED, …")
@click.option("--json", "as_json", is_flag=True)
def goals_ls(show_all: bool, status: str, as_json: bool) -> None:
    """Goals: proposals (BLOCKED on the operator) first."""
    res = ask(WorldQuery(op="goals", claims=show_all, status=status))
    if as_json:
        echo_json(res.goals)
        return
    table = Table(title=f"goals: {len(res.goals)}", title_justify="left")
    for col in ("id", "type", "status", "priority", "created", "goal", "trigger"):
        table.add_column(col, overflow="fold" if col in ("goal",) else "ellipsis")
    for g in res.goals:
        status_txt = "proposed" if g["status"] == "BLOCKED" else g["status"]
        table.add_row(g["id"], g["type"], status_txt, f"{g['priority']:.2f}",
                      _when(g["created_at"]), clip(g["description"], 70),
                      clip(g["trigger"], 50))
    console.print(table)


@goals.command("show")
@click.argument("goal_id")
def goals_show(goal_id: str) -> None:
    """One goal with the pattern that fired it and its evidence."""
    echo_json(ask(WorldQuery(op="goal", id=goal_id)).goals[0])


@goals.command("reject")
@click.argument("goal_id")
@click.option("--reason", default="", help="recorded with the decision")
def goals_reject(goal_id: str, reason: str) -> None:
    """Reject a proposal: it never runs."""
    g = ask(WorldQuery(op="decide", id=goal_id, decision="reject", text=reason)).goals[0]
    click.echo(f"goal {g['id']} rejected: it will not run")


@goals.command("accept")
@click.argument("goal_id")
@click.option("--every", default=None, help="a schedule proposal: run at this interval instead")
@click.option("--yes", is_flag=True, help="pre-approve the runs' Law 1 actions")
@click.option("--detach", is_flag=True, help="a run: start it and do not follow it")
@click.option("--reason", default="", help="recorded with the decision")
def goals_accept(goal_id: str, every: str | None, yes: bool, detach: bool, reason: str) -> None:
    """Accept a proposal: a schedule proposal becomes a schedule, a reactive one a run, a SYSTEM
    one its upkeep (pause the failing schedule; the storage report)."""
    settings = load_settings()
    if every:
        try:
            schedules.parse_every(every)
        except schedules.ScheduleError as exc:
            raise click.UsageError(str(exc)) from None
    g = ask(WorldQuery(op="decide", id=goal_id, decision="accept", text=reason)).goals[0]
    action = g.get("action") or {}
    if action.get("kind") == "schedule":
        sched = schedules.new_schedule(action["goal"], every=every or action.get("every", "1d"),
                                       workspace=action.get("workspace", ""), yes=yes)
        schedules.note(sched, "added", sched["created_at"],
                       detail=f"{schedules.describe(sched)} (accepted goal {g['id']})")
        with schedules.ScheduleStore(settings.schedules_file).edit() as data:
            while any(s["id"] == sched["id"] for s in data["schedules"]):
                sched["id"] = schedules.new_id()
            data["schedules"].append(sched)
        ask(WorldQuery(op="link", id=g["id"], link={"schedule_id": sched["id"]}))
        click.echo(f"goal {g['id']} accepted: schedule {sched['id']} "
                   f"({schedules.describe(sched)}): {action['goal']}")
        return
    if action.get("kind") == "pause_schedule":              # SYSTEM: a failing schedule
        from .schedule import change
        sched = change(action["schedule_id"], "pause")
        ask(WorldQuery(op="link", id=g["id"], link={"schedule_id": sched["id"], "done": True}))
        click.echo(f"goal {g['id']} accepted: schedule {sched['id']} paused "
                   f"(`artoo schedule resume {sched['id']}` undoes it)")
        return
    if action.get("kind") == "storage":                     # SYSTEM: a report, nothing deleted
        ask(WorldQuery(op="link", id=g["id"], link={"reported": True, "done": True}))
        click.echo(f"goal {g['id']} accepted: {action.get('home')} holds "
                   f"{action.get('total', 0) / 2**20:.0f} MiB; largest parts:")
        for name, size in (action.get("parts") or {}).items():
            click.echo(f"  {name:<24} {size / 2**20:10.1f} MiB")
        click.echo("artoo deletes nothing by itself: archive or remove what you no longer need "
                   "(stop it first: artoo down; `artoo tap verify` before archiving audit/)")
        return
    from .run import RunSession, _use_workspace, exit_code
    session = RunSession(settings, console, yes=yes)
    try:
        if action.get("workspace"):
            _use_workspace(session, action["workspace"], err_console)
        rid = session.submit(action.get("goal") or g["description"], session_id=f"goal:{g['id']}")
        ask(WorldQuery(op="link", id=g["id"], link={"run_id": rid}))
        click.echo(f"goal {g['id']} accepted: run {rid}")
        if detach:
            return
        final = session.follow(rid)
        if final is not None:
            session.report(rid, final)
            sys.exit(exit_code(final))
    finally:
        session.close()


def register(main: click.Group) -> None:
    main.add_command(world)
    main.add_command(goals)
