"""`artoo ggs`: the Goal Gradient Solver's offline tools (`artoo ggs explain` replays rounds through
the pure loss and decision table). The commands are defined beside the controller in
services.roles.ggs, on its pure loss module; this module puts them on the `artoo` command."""
from __future__ import annotations

import click

from services.roles.ggs import ggs_group


def register(main: click.Group) -> None:
    main.add_command(ggs_group)
