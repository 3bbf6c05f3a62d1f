"""`artoo web [--port N]`: the read-only web console, in the foreground until Ctrl+C.

It serves on 127.0.0.1 only and prints `http://127.0.0.1:PORT/?token=…`: every request needs that
token (or the cookie the first visit sets), as Jupyter does. The pages and the JSON API read the
decision logs, the audit log and the daemon's heartbeats; `/events` streams the bus live. It
never publishes a work message and writes nothing. Ctrl+C (or SIGTERM) stops it; it starts no
process, so none is left behind.
"""
from __future__ import annotations

import signal
import sys

import click

from protocol.settings import load_settings

from . import fail


@click.command()
@click.option("--port", default=0, show_default=True, type=click.IntRange(0, 65535),
              help="TCP port on 127.0.0.1 (0 = pick a free one)")
@click.option("--token", default="", envvar="ARTOO_WEB_TOKEN",
              help="use this token instead of a random one (env ARTOO_WEB_TOKEN)")
def web(port: int, token: str) -> None:
    """Serve the read-only web console (tasks, GGS charts, daemon, audit log, memory)."""
    from .webconsole import WebConsole
    try:
        settings = load_settings()
    except ValueError as exc:
        fail(str(exc))
    try:
        console = WebConsole(settings, port=port, token=token or None)
    except OSError as exc:
        fail(f"cannot listen on 127.0.0.1:{port}: {exc}")
    click.echo(f"artoo web console (read-only) for {settings.home}")
    click.echo(f"    {console.url}")
    click.echo("Ctrl+C stops it.")
    sys.stdout.flush()

    def _term(_sig, _frame):
        raise KeyboardInterrupt
    signal.signal(signal.SIGTERM, _term)
    # Ctrl+C stops it even when started from a background job, which inherits SIGINT ignored
    # (Python then installs no KeyboardInterrupt handler of its own)
    signal.signal(signal.SIGINT, _term)
    try:
        console.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        console.close()
    click.echo("artoo web stopped")


def register(main: click.Group) -> None:
    main.add_command(web)
