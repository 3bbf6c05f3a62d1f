"""The `artoo` command line (click). Daemon control lives here; each capability registers its own
commands from its module (see COMMAND_MODULES) so the CLI grows without one file owning it all.
"""
from __future__ import annotations

import importlib
import json
import sys

import click
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from protocol.bus import BusTimeout
from protocol.envelope import PROTOCOL_VERSION
from protocol.settings import load_settings

from . import __version__, daemon

console = Console()
err_console = Console(stderr=True)

# Modules exposing register(main_group) with their subcommands.
COMMAND_MODULES = [
    "auditor.cli",
    "memory_server.cli",
    "services.ggs",
    "services.cli_run",
    "services.cli_effector",
    "services.cli_tasks",
]


def fail(message: str, code: int = 2) -> None:
    # no wrapping (paths stay copyable) and no markup parsing of the message (it quotes paths/logs)
    err_console.print(f"[red]error:[/red] {escape(message)}", soft_wrap=True)
    sys.exit(code)


@click.group()
@click.version_option(__version__, prog_name="artoo",
                      message=f"%(prog)s %(version)s (bus protocol v{PROTOCOL_VERSION})")
def main() -> None:
    """artoo: a hierarchical multi-agent runtime on a ZeroMQ bus."""


def _settings():
    try:
        return load_settings()
    except ValueError as exc:
        fail(str(exc))


def print_status(report: dict, as_json: bool) -> None:
    if as_json:
        click.echo(json.dumps(report, indent=2, default=str))
        return
    table = Table(title=f"artoo daemon — {report['home']}", title_justify="left")
    for col in ("role", "inst", "state", "pid", "uptime", "supervisor", "gaps", "rejected",
                "unacked", "lost", "in-flight"):
        table.add_column(col, justify="right" if col not in ("role", "state", "supervisor") else "left")
    for r in report["roles"]:
        state = "[green]alive[/green]" if r["alive"] else "[red]missing[/red]"
        table.add_row(r["role"], str(r["instance"]), state, str(r["pid"] or "-"),
                      f"{r['uptime_s']:.0f}s" if r["alive"] else "-", r["supervisor_state"] or "-",
                      str(r["gaps"]), str(r["rejected"]), str(r["unacked"]), str(r["lost"]),
                      str(r["in_flight"]))
    # piped output (no terminal) gets room for every column instead of 80-column truncation
    (console if console.is_terminal else Console(width=160)).print(table)
    backends = report.get("llm_backends")
    if backends:
        console.print("LLM backends: " + ", ".join(f"{k}={v}" for k, v in backends.items()))
    if report.get("bus_signing"):
        console.print(f"Bus signing: {report['bus_signing']}")


@main.command()
@click.option("--timeout", default=90.0, show_default=True, help="seconds to wait for every role")
@click.option("--json", "as_json", is_flag=True, help="print the status as JSON")
def up(timeout: float, as_json: bool) -> None:
    """Start the daemon detached and wait until every role is ready."""
    settings = _settings()
    try:
        report = daemon.up(settings, timeout_s=timeout)
    except daemon.DaemonError as exc:
        fail(str(exc), 1)
    print_status(report, as_json)


@main.command()
def down() -> None:
    """Stop the daemon; no process of ours remains afterwards."""
    settings = _settings()
    swept = daemon.down(settings)
    left = daemon.our_processes(settings)
    if left:
        fail(f"processes still running: {[p.pid for p in left]}", 1)
    click.echo("artoo stopped" + (f" (killed {len(swept)} straggler(s))" if swept else ""))


@main.command()
@click.option("--json", "as_json", is_flag=True, help="machine-readable output")
@click.option("--window", default=1.5, show_default=True, help="seconds to listen for heartbeats")
def status(as_json: bool, window: float) -> None:
    """Every role and instance: alive or missing, pid, uptime, gap and loss counters."""
    settings = _settings()
    try:
        report = daemon.collect_status(settings, window_s=window)
    except BusTimeout:
        report = {"home": str(settings.home), "supervisord_pid": daemon.supervisord_pid(settings),
                  "bus": "unreachable", "bus_signing": daemon.signing_state(settings),
                  "roles": [{"role": r, "instance": i, "alive": False, "pid": None, "node": "",
                             "uptime_s": 0.0, "supervisor_state": "", "gaps": 0, "rejected": 0,
                             "unacked": 0, "lost": 0, "in_flight": 0, "info": {}}
                            for r, i in daemon.expected_instances(daemon.daemon_env(settings))]}
    print_status(report, as_json)
    if not daemon.ready(report, daemon.expected_instances(daemon.daemon_env(settings))):
        sys.exit(1)  # an expected role is missing


for _name in COMMAND_MODULES:
    importlib.import_module(_name).register(main)

if __name__ == "__main__":
    main(prog_name="artoo")
