"""One request from the CLI to a process that owns a store (`memory`, `world`), and the output
helpers their commands share. The CLI never opens those stores itself: the owning process answers
over the bus, so the tap records every query and change."""
from __future__ import annotations

import json
import sys

import click
from rich.console import Console

from protocol.bus import BusClient, BusTimeout
from protocol.messages import Body
from protocol.settings import load_settings

from .render import clip  # noqa: F401  (re-exported: the commands' tables clip with it)

console = Console()
err_console = Console(stderr=True)


def fail(message: str, code: int = 1) -> None:
    err_console.print(f"[red]error:[/red] {message}", soft_wrap=True)
    sys.exit(code)


def ask(query: Body, to: str, timeout: float | None = None):
    """One request to the `to` process; exits with a clear message when it cannot be had."""
    try:
        settings = load_settings()
    except ValueError as exc:
        fail(str(exc), 2)
    client = BusClient("user", settings=settings, heartbeat=False)
    try:
        client.start(timeout=5.0)
    except BusTimeout:
        fail(f"the bus is not reachable at {settings.endpoint('xpub')} (is the daemon up? "
             f"`artoo up`)")
    try:
        _, result = client.request(query, to=to, timeout=timeout or settings.request_timeout_s)
    except BusTimeout:
        fail(f"the {to} process did not answer (see `artoo status`)")
    finally:
        client.stop()
    if not result.ok:
        fail(result.error or f"{to} refused {query.op}")
    return result


def echo_json(value) -> None:
    click.echo(json.dumps(value, indent=2, default=str, ensure_ascii=False))
