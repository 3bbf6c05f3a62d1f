"""`artoo up`, `artoo down`, `artoo status`: the daemon (services.runtime.daemon) from the console."""
from __future__ import annotations

import sys

import click

from protocol.bus import BusTimeout
from protocol.settings import load_settings

from services.runtime import daemon
from services.safety import sandbox

from . import fail
from .views import print_status


def register(main: click.Group) -> None:
    main.add_command(up)
    main.add_command(down)
    main.add_command(status)


def _settings():
    try:
        return load_settings()
    except ValueError as exc:
        fail(str(exc))


@click.command()
@click.option("--timeout", default=90.0, show_default=True, help="seconds to wait for every role")
@click.option("--json", "as_json", is_flag=True, help="print the status as JSON")
def up(timeout: float, as_json: bool) -> None:
    """Start the daemon detached and wait until every role is ready."""
    settings = _settings()
    try:
        report = daemon.up(settings, timeout_s=timeout)
    except daemon.DaemonError as exc:
        fail(str(exc), 1)
    print_status(with_sandbox(report, settings), as_json)


@click.command()
def down() -> None:
    """Stop the daemon; no process of ours remains afterwards."""
    settings = _settings()
    swept = daemon.down(settings)
    left = daemon.our_processes(settings)
    if left:
        fail(f"processes still running: {[p.pid for p in left]}", 1)
    click.echo("artoo stopped" + (f" (killed {len(swept)} straggler(s))" if swept else ""))


@click.command()
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
    print_status(with_sandbox(report, settings), as_json)
    if not daemon.ready(report, daemon.expected_instances(daemon.daemon_env(settings))):
        sys.exit(1)  # an expected role is missing


def with_sandbox(report: dict, settings) -> dict:
    """The tool sandbox's state in a status report (checked here: same machine, same settings)."""
    box = sandbox.status(settings)
    report["sandbox"] = {"mode": box.mode, "detail": box.detail,
                         "process_limit": box.process_limit}
    return report
