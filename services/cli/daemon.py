"""`artoo up`, `artoo down`, `artoo status`: the daemon (services.runtime.daemon) from the console."""
from __future__ import annotations

import dataclasses
import sys

import click

from protocol.bus import BusTimeout
from protocol.curve import CurveError
from protocol.settings import (HOST_FIELDS, load_settings, parse_hostport, parse_instances,
                               write_host_file)

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
@click.option("--listen", metavar="HOST:PORT", default=None,
              help="main host: also serve the bus on tcp HOST:PORT and PORT+1 (CURVE) for "
                   "worker hosts")
@click.option("--join", metavar="HOST:PORT", default=None,
              help="worker host: join the bus a main host serves with --listen")
@click.option("--roles", metavar="ROLE[,ROLE...]", default=None,
              help="run only these programs on this host (a worker: spawner, llm and the "
                   "partitioned roles perceiver, planner, metaval, ggs)")
@click.option("--instances", metavar="FIRST/TOTAL", default=None,
              help="this host's instances of each partitioned role are numbered from FIRST, out "
                   "of TOTAL across all hosts (every host gives the same TOTAL)")
@click.option("--host-name", default=None, help="this host's name in status and audit reports "
                                                "(default: the hostname)")
@click.option("--standalone", is_flag=True,
              help="forget a saved --listen/--join/--roles/--host-name: one host again")
def up(timeout: float, as_json: bool, listen: str | None, join: str | None, roles: str | None,
       instances: str | None, host_name: str | None, standalone: bool) -> None:
    """Start the daemon detached and wait until every role is ready.

    The host options are saved in the data dir (host.json): later `up`, `run`, `status` and
    `down` on this host use them until `--standalone`."""
    settings = _settings()
    given = {"bus_listen": listen, "bus_join": join, "host_roles": roles, "host_name": host_name,
             "host_instances": instances}
    if standalone or any(v is not None for v in given.values()):
        settings = dataclasses.replace(settings, **{
            name: "" if standalone else (given[name] if given[name] is not None
                                         else getattr(settings, name))
            for name in HOST_FIELDS})
        try:
            for hostport in (settings.bus_listen, settings.bus_join):
                if hostport:
                    parse_hostport(hostport)
            parse_instances(settings.host_instances)
        except ValueError as exc:
            raise click.UsageError(str(exc))
        if settings.bus_listen and settings.bus_join:
            raise click.UsageError("--listen (a main host) and --join (a worker host) exclude "
                                   "each other")
        settings.ensure_dirs()
        write_host_file(settings)
    try:
        report = daemon.up(settings, timeout_s=timeout)
    except (daemon.DaemonError, CurveError) as exc:
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
    except daemon.DaemonError as exc:
        fail(str(exc), 2)
    except BusTimeout:
        report = daemon.unreachable_report(settings)
    print_status(with_sandbox(report, settings), as_json)
    if not daemon.ready(report, daemon.expected_instances(daemon.daemon_env(settings))):
        sys.exit(1)  # an expected role is missing


def with_sandbox(report: dict, settings) -> dict:
    """The tool sandbox's state in a status report (checked here: same machine, same settings)."""
    box = sandbox.status(settings)
    report["sandbox"] = {"mode": box.mode, "detail": box.detail,
                         "process_limit": box.process_limit}
    return report
