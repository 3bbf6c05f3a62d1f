"""CURVE security for tcp:// bus endpoints (DESIGN §4).

ipc:// endpoints are protected by the 0700 run directory and need nothing here. Any tcp:// endpoint
is encrypted and authenticated: the proxy is a CURVE server whose ZAP handler admits only the client
public keys in an allow-list directory; every client proves a keypair. Key layout under
`settings.curve_dir` (zmq.auth certificate files):

    server.key, server.key_secret     the proxy's keypair (clients need server.key)
    client.key, client.key_secret     this host's client keypair (all roles of the host share it)
    authorized/*.key                  allow-list: public keys the proxy admits

For a second host, copy `server.key` and a client keypair to its curve dir and put that client's
`.key` into `authorized/` on the proxy host (then restart the proxy).
"""
from __future__ import annotations

import os
import shutil
from pathlib import Path

import zmq
import zmq.auth

from .settings import Settings

BUS_ENDPOINTS = ("xsub", "xpub", "control")


class CurveError(RuntimeError):
    """A tcp:// endpoint is configured but its keys are missing or unreadable."""


def is_tcp(endpoint: str) -> bool:
    return endpoint.startswith("tcp://")


def needs_curve(settings: Settings) -> bool:
    return any(is_tcp(settings.endpoint(name)) for name in BUS_ENDPOINTS)


def authorized_dir(settings: Settings) -> Path:
    return settings.curve_dir / "authorized"


def ensure_keys(settings: Settings) -> None:
    """Create the server and client keypairs if missing and authorize this host's client key.

    Idempotent; `artoo up` calls it whenever a bus endpoint is tcp://."""
    base = settings.curve_dir
    base.mkdir(parents=True, exist_ok=True, mode=0o700)
    os.chmod(base, 0o700)
    for name in ("server", "client"):
        if not (base / f"{name}.key_secret").exists():
            zmq.auth.create_certificates(base, name)
            os.chmod(base / f"{name}.key_secret", 0o600)
    allowed = authorized_dir(settings)
    allowed.mkdir(exist_ok=True, mode=0o700)
    if not (allowed / "client.key").exists():
        shutil.copy(base / "client.key", allowed / "client.key")


def _load(path: Path, secret: bool) -> tuple[bytes, bytes | None]:
    try:
        public, secret_key = zmq.auth.load_certificate(path)
    except (OSError, ValueError) as exc:
        raise CurveError(f"tcp:// bus endpoints need CURVE keys: cannot read {path} ({exc}); "
                         f"`artoo up` creates them under {path.parent}") from None
    if secret and not secret_key:
        raise CurveError(f"{path} holds no secret key")
    return public, secret_key


def apply_client(sock: zmq.Socket, settings: Settings) -> None:
    """Make `sock` a CURVE client of the proxy (call before connect)."""
    base = settings.curve_dir
    public, secret = _load(base / "client.key_secret", secret=True)
    server_public, _ = _load(base / "server.key", secret=False)
    sock.curve_publickey = public
    sock.curve_secretkey = secret
    sock.curve_serverkey = server_public


def apply_server(sock: zmq.Socket, settings: Settings) -> None:
    """Make `sock` a CURVE server (call before bind); pair with start_authenticator()."""
    public, secret = _load(settings.curve_dir / "server.key_secret", secret=True)
    sock.curve_publickey = public
    sock.curve_secretkey = secret
    sock.curve_server = True


def start_authenticator(ctx: zmq.Context, settings: Settings):
    """A ZAP handler on `ctx` that admits only the public keys in `authorized/`."""
    from zmq.auth.thread import ThreadAuthenticator
    allowed = authorized_dir(settings)
    if not allowed.is_dir():
        raise CurveError(f"CURVE allow-list directory {allowed} is missing")
    auth = ThreadAuthenticator(ctx)
    auth.start()
    auth.configure_curve(domain="*", location=str(allowed))
    return auth
