"""`artoo schedule`: recurring goals (add, ls, rm, pause, resume).

The commands only edit `$ARTOO_HOME/schedules.json` under its lock (services/runtime/schedules.py
says why the file is the channel); the scheduler role picks every change up within a tick. So
`add` works with the daemon down: the schedule is stored and runs once the daemon is up.
"""
from __future__ import annotations

import json
import os
import sys
import time

import click
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from protocol.settings import Settings, load_settings, workspace_problem

from services.runtime import daemon, schedules


def _settings() -> Settings:
    try:
        return load_settings()
    except ValueError as exc:
        raise click.ClickException(str(exc)) from None


def _store(settings: Settings) -> schedules.ScheduleStore:
    return schedules.ScheduleStore(settings.schedules_file)


def _when(ts: float | None) -> str:
    if not ts:
        return "-"
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(ts))


def _daemon_note(settings: Settings) -> str:
    if daemon.supervisord_pid(settings) is None:
        return ("the daemon is not running: the schedule is stored and runs once it is up "
                "(`artoo up`)")
    return "the daemon is running: the scheduler picks it up within a tick"


def row(sched: dict) -> dict:
    """`schedule ls --json`: the record plus a readable state."""
    out = dict(sched)
    out["when"] = schedules.describe(sched)
    out["state"] = ("paused" if sched.get("paused")
                    else "running" if sched.get("running") else "waiting")
    return out


@click.group()
def schedule() -> None:
    """Recurring goals: each due run starts as a normal task (`artoo tasks ls` shows them)."""


@schedule.command("add")
@click.argument("goal", nargs=-1, required=True)
@click.option("--every", default=None, help="interval: 30s, 15m, 1h, 1h30m, 1d")
@click.option("--cron", "cron", default=None,
              help='5-field cron, local time: "0 9 * * 1-5" (minute hour day month weekday)')
@click.option("--workspace", default=None, type=click.Path(file_okay=False),
              help="the runs' workspace (default: the daemon's)")
@click.option("--yes", is_flag=True, help="pre-approve Law 1 actions (no operator will be asked)")
@click.option("--overlap", is_flag=True, help="start a run even while the previous one is going")
@click.option("--json", "as_json", is_flag=True, help="print the new schedule as JSON")
def add(goal: tuple[str, ...], every: str | None, cron: str | None, workspace: str | None,
        yes: bool, overlap: bool, as_json: bool) -> None:
    """Add a schedule: GOAL runs --every INTERVAL or on --cron "m h dom mon dow"."""
    settings = _settings()
    ws = ""
    if workspace:
        problem = workspace_problem(workspace, settings)
        if problem:
            raise click.UsageError(f"--workspace: {problem}")
        ws = os.path.realpath(os.path.expanduser(workspace))
    try:
        sched = schedules.new_schedule(" ".join(goal), every=every, cron=cron, workspace=ws,
                                       yes=yes, overlap=overlap)
    except schedules.ScheduleError as exc:
        raise click.UsageError(str(exc)) from None
    schedules.note(sched, "added", sched["created_at"], detail=schedules.describe(sched))
    store = _store(settings)
    try:
        with store.edit() as data:
            while any(s["id"] == sched["id"] for s in data["schedules"]):
                sched["id"] = schedules.new_id()
            data["schedules"].append(sched)
    except (schedules.ScheduleError, TimeoutError) as exc:
        raise click.ClickException(str(exc)) from None
    if as_json:
        click.echo(json.dumps(row(sched), indent=2, ensure_ascii=False))
        return
    click.echo(f"schedule {sched['id']} added: {schedules.describe(sched)}, next run "
               f"{_when(sched['next_due'])}")
    click.echo(_daemon_note(settings))


@schedule.command("ls")
@click.option("--json", "as_json", is_flag=True, help="every schedule with its history, as JSON")
def ls(as_json: bool) -> None:
    """Schedules: when, state, next run, runs / skipped / missed, last run and its outcome."""
    settings = _settings()
    try:
        scheds = [row(s) for s in _store(settings).read()["schedules"]]
    except schedules.ScheduleError as exc:
        raise click.ClickException(str(exc)) from None
    if as_json:
        click.echo(json.dumps(scheds, indent=2, ensure_ascii=False))
        return
    if not scheds:
        click.echo(f"no schedules (in {settings.schedules_file})")
        return
    table = Table(show_edge=False)
    for col in ("id", "when", "state", "next run", "runs", "skipped", "missed", "last run",
                "outcome", "goal"):
        table.add_column(col, justify="right" if col in ("runs", "skipped", "missed") else "left",
                         overflow="fold" if col == "goal" else "ellipsis")
    for s in scheds:
        flags = " ".join(f for f, on in (("yes", s.get("yes")), ("overlap", s.get("overlap")))
                         if on)
        table.add_row(s["id"], escape(s["when"]) + (f" [dim]({flags})[/dim]" if flags else ""),
                      s["state"], "-" if s.get("paused") else _when(s.get("next_due")),
                      str(s.get("runs", 0)), str(s.get("skipped", 0)),
                      f"[yellow]{s['missed']}[/yellow]" if s.get("missed") else "0",
                      s.get("last_run_id") or "-", s.get("last_outcome") or "-",
                      escape(s["goal"][:80]))
    Console(width=None if sys.stdout.isatty() else 200).print(table)


def change(ref: str, what: str) -> dict:
    """rm, pause or resume one schedule (also what accepting a SYSTEM goal to pause one does)."""
    settings = _settings()
    try:
        with _store(settings).edit() as data:
            sched = schedules.find(data, ref)
            now = time.time()
            if what == "rm":
                data["schedules"].remove(sched)
            elif what == "pause":
                sched["paused"] = True
                schedules.note(sched, "paused", now)
            elif what == "resume":
                if sched.get("paused"):
                    sched["paused"] = False
                    sched["next_due"] = schedules.next_slot(sched, now)
                    schedules.note(sched, "resumed", now)
    except (schedules.ScheduleError, TimeoutError) as exc:
        raise click.ClickException(str(exc)) from None
    return sched


@schedule.command("rm")
@click.argument("schedule_id")
def rm(schedule_id: str) -> None:
    """Remove a schedule (a run it started goes on to its end)."""
    sched = change(schedule_id, "rm")
    click.echo(f"schedule {sched['id']} removed")


@schedule.command("pause")
@click.argument("schedule_id")
def pause(schedule_id: str) -> None:
    """Stop a schedule from firing (slots while paused are not caught up)."""
    sched = change(schedule_id, "pause")
    click.echo(f"schedule {sched['id']} paused")


@schedule.command("resume")
@click.argument("schedule_id")
def resume(schedule_id: str) -> None:
    """Resume a paused schedule from its next slot."""
    sched = change(schedule_id, "resume")
    click.echo(f"schedule {sched['id']} resumed; next run {_when(sched['next_due'])}")


def register(main: click.Group) -> None:
    main.add_command(schedule)
