"""The `artoo` command line (click): the only part of artoo that may talk to everything.

One module per command group registers its commands on `main` (see COMMAND_MODULES): daemon
(up/down/status), run (run/repl), gate (gate/undo), ggs, memory, audit (tap/audit), tasks, schedule, web,
keys, metrics, mcp (MCP servers as tools; `artoo mcp serve`). Console
rendering lives apart from the actions: render.py (the live run) and views.py (tables).
"""
from __future__ import annotations

import importlib
import sys

import click
from rich.console import Console
from rich.markup import escape

from protocol.envelope import PROTOCOL_VERSION
from services.runtime import __version__

err_console = Console(stderr=True)

# Modules exposing register(main_group) with their subcommands.
COMMAND_MODULES = [
    "services.cli.daemon",
    "services.cli.audit",
    "services.cli.memory",
    "services.cli.ggs",
    "services.cli.run",
    "services.cli.gate",
    "services.cli.tasks",
    "services.cli.schedule",
    "services.cli.web",
    "services.cli.keys",
    "services.cli.metrics",
    "services.cli.mcp",
    "services.cli.world",
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


for _name in COMMAND_MODULES:
    importlib.import_module(_name).register(main)
