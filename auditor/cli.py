"""`artoo tap`: a live view of the bus (the bus inspector of DESIGN §8 grows from here)."""
from __future__ import annotations

import json
import threading
import time

import click

from protocol.bus import BusClient
from protocol.settings import load_settings


def format_line(env) -> str:
    t = time.strftime("%H:%M:%S", time.localtime(env.ts)) + f".{int(env.ts * 1000) % 1000:03d}"
    to = f"→{env.to}" if env.to else ""
    return f"{t} {env.type:<18} {env.sender}{to} task={env.task} seq={env.seq} node={env.node}"


@click.command()
@click.option("--json", "as_json", is_flag=True, help="one JSON object per message")
@click.option("--count", type=int, default=0, help="exit after N messages")
@click.option("--type", "types", multiple=True, help="only these message types")
def tap(as_json: bool, count: int, types: tuple[str, ...]) -> None:
    """Live tail of every message on the bus."""
    settings = load_settings()
    done = threading.Event()
    seen = 0

    def show(env, _msg):
        nonlocal seen
        if types and env.type not in types:
            return
        seen += 1
        if as_json:
            click.echo(json.dumps(env.to_wire(), default=str))
        else:
            click.echo(format_line(env))
        if count and seen >= count:
            done.set()

    client = BusClient("user", settings=settings, heartbeat=False)
    client.on("*", show, raw=False)
    client.start()
    try:
        while not done.wait(0.2):
            pass
    except KeyboardInterrupt:
        pass
    finally:
        client.stop()


def register(main: click.Group) -> None:
    main.add_command(tap)
