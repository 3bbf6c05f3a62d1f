"""`artoo gate` and `artoo undo`: the operator's view of Law 1.

`artoo gate -- COMMAND` shows how the effector's shell tool would classify a command (and so
whether it would need approval) without running it; `artoo undo RUN_ID` puts back what approved
deletes and overwrites of that run removed from the workspace.
"""
from __future__ import annotations

import json
import shlex
import sys

import click

from protocol.settings import load_settings

from services.safety import law1


def register(main: click.Group) -> None:
    main.add_command(gate)
    main.add_command(undo)


@click.command(context_settings={"ignore_unknown_options": True})
@click.option("--json", "as_json", is_flag=True, help="machine-readable output")
@click.option("--cwd", default=None, help="working directory (default: the workspace)")
@click.argument("command", nargs=-1, required=True, type=click.UNPROCESSED)
def gate(as_json: bool, cwd: str | None, command: tuple[str, ...]) -> None:
    """Classify a shell command as the Law 1 gate would: artoo gate -- 'rm -rf build'."""
    settings = load_settings()
    text = command[0] if len(command) == 1 else shlex.join(command)
    result = law1.classify_for(settings, text, cwd=cwd)
    if as_json:
        click.echo(json.dumps(result.to_dict(), indent=2))
        return
    click.echo(f"{result.level}: {result.reason}")
    if result.protected:
        click.echo("refused: touches artoo's data dir (never approvable)")
    else:
        click.echo(f"needs approval: {'yes' if result.needs_approval else 'no'}")
    for path in result.paths:
        click.echo(f"  affects {path}")


@click.command()
@click.argument("run_id")
@click.option("--list", "list_only", is_flag=True, help="show what would be restored")
def undo(run_id: str, list_only: bool) -> None:
    """Restore the workspace files that approved deletes/overwrites of RUN_ID removed."""
    settings = load_settings()
    entries = law1.undo_entries(settings, run_id)
    if not entries:
        click.echo(f"nothing to undo for {run_id}", err=True)
        sys.exit(1)
    if list_only:
        for entry in entries:
            click.echo(f"{entry.get('command', '')!r}")
            for item in entry.get("items", []):
                click.echo(f"  {item['kind']}: {item['original']}")
        return
    restored = law1.restore(settings, run_id)
    for path in restored:
        click.echo(f"restored {path}")
    click.echo(f"{len(restored)} path(s) restored from {len(entries)} approved action(s)")
