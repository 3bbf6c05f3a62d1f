"""`artoo keys`: CURVE keys for hosts that share one bus over tcp (protocol/curve.py).

The main host writes an invitation (its proxy's public key and the bus signing key), the worker
host accepts it (and makes its own keypair), the main host allows the worker's public key. A host
whose key is not allowed is refused by the proxy and counted (`artoo status`, CURVE line).
"""
from __future__ import annotations

import json
import shlex
from pathlib import Path

import click

from protocol import curve, signing
from protocol.settings import load_settings

from . import fail


def register(main: click.Group) -> None:
    main.add_command(keys)


def _settings():
    try:
        settings = load_settings()
    except ValueError as exc:
        fail(str(exc))
    settings.ensure_dirs()
    return settings


@click.group()
def keys() -> None:
    """CURVE keys of the hosts that share this bus over tcp."""


@keys.command()
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path), default="artoo-invite.json",
              show_default=True, help="where to write the invitation (mode 0600)")
def invite(out: Path) -> None:
    """Main host: write what a worker host needs to join (copy it like a private key)."""
    settings = _settings()
    try:
        key = signing.ensure_key(settings) if settings.bus_sign else None
        curve.write_invitation(settings, out, key)
    except (OSError, curve.CurveError, signing.BusKeyError) as exc:
        fail(str(exc), 1)
    click.echo(f"invitation written to {out} (secret: it holds the bus signing key).\n"
               f"On the worker host: artoo keys accept {out.name}")


@keys.command()
@click.argument("invitation", type=click.Path(exists=True, dir_okay=False, path_type=Path))
def accept(invitation: Path) -> None:
    """Worker host: install an invitation; prints this host's public key for `keys allow`."""
    settings = _settings()
    try:
        public, bus_key = curve.accept_invitation(settings, invitation)
        if bus_key:
            signing.install_key(settings, bus_key)
    except (OSError, curve.CurveError, signing.BusKeyError) as exc:
        fail(str(exc), 1)
    click.echo(f"this host's public key: {public}\n"
               f"On the main host: artoo keys allow {settings.host} -- {shlex.quote(public)}")


@keys.command(context_settings={"ignore_unknown_options": True})
@click.argument("name")
@click.argument("public_key")
def allow(name: str, public_key: str) -> None:
    """Main host: admit the host NAME with PUBLIC_KEY (takes effect without a restart).

    A Z85 key may begin with '-': it is taken as the key, not as an option."""
    settings = _settings()
    try:
        path = curve.allow(settings, name, public_key)
    except curve.CurveError as exc:
        fail(str(exc), 2)
    click.echo(f"{name} allowed ({path})")


@keys.command()
@click.argument("name")
def revoke(name: str) -> None:
    """Main host: stop admitting NAME's key (new connections are refused at once)."""
    settings = _settings()
    try:
        removed = curve.revoke(settings, name)
    except curve.CurveError as exc:
        fail(str(exc), 2)
    if not removed:
        fail(f"no allowed key named {name}", 1)
    click.echo(f"{name} revoked")


@keys.command("list")
@click.option("--json", "as_json", is_flag=True)
def list_keys(as_json: bool) -> None:
    """This host's keys and the hosts it admits."""
    settings = _settings()
    base = settings.curve_dir
    out = {"curve_dir": str(base), "server_key": "", "client_key": "",
           "allowed": curve.authorized(settings)}
    for name in ("server", "client"):
        try:
            out[f"{name}_key"] = curve.public_key(base / f"{name}.key")
        except curve.CurveError:
            pass
    if as_json:
        click.echo(json.dumps(out, indent=1))
        return
    click.echo(f"keys in {base}")
    click.echo(f"  proxy (server) public key: {out['server_key'] or '-'}")
    click.echo(f"  this host's public key:    {out['client_key'] or '-'}")
    for name, key in out["allowed"].items():
        click.echo(f"  allowed: {name} {key}")
