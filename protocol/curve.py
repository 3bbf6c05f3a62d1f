"""CURVE security for tcp:// bus endpoints (DESIGN §4).

ipc:// endpoints are protected by the 0700 run directory and need nothing here. Any tcp:// endpoint
is encrypted and authenticated: the proxy is a CURVE server whose ZAP handler admits only the client
public keys in an allow-list directory; every client proves a keypair. Key layout under
`settings.curve_dir` (zmq.auth certificate files):

    server.key, server.key_secret     the proxy's keypair (clients need server.key)
    client.key, client.key_secret     this host's client keypair (all roles of the host share it)
    authorized/*.key                  allow-list: public keys the proxy admits

A worker host (`artoo up --join`) gets `server.key` and the bus signing key from an invitation
written on the main host (`artoo keys invite`), makes its own client keypair (`artoo keys accept`)
and is admitted once the main host authorizes its public key (`artoo keys allow NAME KEY`). The
proxy re-reads `authorized/` when it changes (no restart; `revoke` takes effect for new
connections) and counts every refused handshake.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import threading
import time
from pathlib import Path

import zmq
import zmq.auth
import zmq.utils.z85

from .settings import Settings

BUS_ENDPOINTS = ("xsub", "xpub", "capture", "control")
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")


class CurveError(RuntimeError):
    """A tcp:// endpoint is configured but its keys are missing or unreadable."""


def is_tcp(endpoint: str) -> bool:
    return endpoint.startswith("tcp://")


def needs_curve(settings: Settings) -> bool:
    return bool(settings.bus_listen) or any(is_tcp(settings.endpoint(name))
                                            for name in BUS_ENDPOINTS)


def authorized_dir(settings: Settings) -> Path:
    return settings.curve_dir / "authorized"


def ensure_keys(settings: Settings) -> None:
    """Create the server and client keypairs if missing and authorize this host's client key.

    Idempotent; `artoo up` calls it whenever a bus endpoint is tcp://. A worker host serves
    nothing: it needs the invitation's server key and its own keypair (`artoo keys accept`)."""
    base = settings.curve_dir
    if settings.bus_join:
        missing = [n for n in ("server.key", "client.key_secret") if not (base / n).exists()]
        if missing:
            raise CurveError(f"this host joins {settings.bus_join} but has no {missing[0]} in "
                             f"{base}: run `artoo keys accept INVITATION` with the file "
                             f"`artoo keys invite` wrote on the main host")
        return
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


class AllowList:
    """The ZAP credentials provider: the public keys in `authorized/`, re-read when the directory
    changes (so `artoo keys allow/revoke` need no restart), and a count of refused keys."""

    def __init__(self, directory: Path):
        self.directory = directory
        self.lock = threading.Lock()
        self.keys: dict[bytes, str] = {}      # z85 public key -> name
        self.stamp: tuple = ()
        self.admitted = 0
        self.refused = 0
        self.refused_keys: dict[str, int] = {}  # first 8 chars of a refused key -> handshakes
        self.reload()

    def reload(self) -> None:
        try:
            entries = sorted(self.directory.glob("*.key"))
            stamp = tuple((p.name, p.stat().st_mtime_ns) for p in entries)
        except OSError:
            entries, stamp = [], ()
        if stamp == self.stamp:
            return
        keys = {}
        for path in entries:
            try:
                public, _ = zmq.auth.load_certificate(path)
                keys[public] = path.stem
            except (OSError, ValueError):
                continue
        self.keys, self.stamp = keys, stamp

    def callback(self, domain: str, z85_key: bytes) -> bool:
        with self.lock:
            self.reload()
            if z85_key in self.keys:
                self.admitted += 1
                return True
            self.refused += 1
            short = z85_key[:8].decode(errors="replace")
            if short in self.refused_keys or len(self.refused_keys) < 100:
                self.refused_keys[short] = self.refused_keys.get(short, 0) + 1
            return False

    def stats(self) -> dict:
        with self.lock:
            return {"authorized": sorted(self.keys.values()), "admitted": self.admitted,
                    "refused": self.refused, "refused_keys": dict(self.refused_keys)}


def start_authenticator(ctx: zmq.Context, settings: Settings):
    """A ZAP handler on `ctx` that admits only the public keys in `authorized/` (its AllowList is
    `auth.allow_list`)."""
    from zmq.auth.thread import ThreadAuthenticator
    allowed = authorized_dir(settings)
    if not allowed.is_dir():
        raise CurveError(f"CURVE allow-list directory {allowed} is missing")
    auth = ThreadAuthenticator(ctx)
    auth.start()
    auth.allow_list = AllowList(allowed)
    auth.configure_curve_callback(domain="*", credentials_provider=auth.allow_list)
    return auth


# -- `artoo keys`: invitations and the allow-list --------------------------------------------------

def public_key(path: Path) -> str:
    return _load(path, secret=False)[0].decode()


def _check_name(name: str) -> str:
    if not _NAME.match(name or ""):
        raise CurveError(f"{name!r} is not a host name for a key (letters, digits, . _ -; "
                         f"at most 64)")
    return name


def _check_key(key: str) -> bytes:
    key = (key or "").strip()
    try:
        if len(key) != 40 or len(zmq.utils.z85.decode(key)) != 32:
            raise ValueError
    except ValueError:
        raise CurveError(f"{key[:50]!r} is not a CURVE public key (40 Z85 characters, as "
                         f"`artoo keys accept` prints)") from None
    return key.encode()


def allow(settings: Settings, name: str, key: str) -> Path:
    """Authorize a host's public key under `name` (replacing that name's old key)."""
    public = _check_key(key)
    directory = authorized_dir(settings)
    directory.mkdir(parents=True, exist_ok=True, mode=0o700)
    path = directory / f"{_check_name(name)}.key"
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text("#   artoo: authorized host public key\nmetadata\ncurve\n"
                   f"    public-key = \"{public.decode()}\"\n")
    os.replace(tmp, path)
    return path


def revoke(settings: Settings, name: str) -> bool:
    try:
        (authorized_dir(settings) / f"{_check_name(name)}.key").unlink()
        return True
    except FileNotFoundError:
        return False


def authorized(settings: Settings) -> dict[str, str]:
    """name -> public key of every authorized host."""
    out = {}
    for path in sorted(authorized_dir(settings).glob("*.key")):
        try:
            out[path.stem] = public_key(path)
        except CurveError:
            out[path.stem] = "(unreadable)"
    return out


def write_invitation(settings: Settings, path: Path, bus_key: bytes | None) -> None:
    """What a worker host needs to join: the proxy's public key and the bus signing key (a
    secret: the file is mode 0600 and must travel like an SSH private key)."""
    ensure_keys(settings)
    body = {"artoo_invitation": 1, "server_key": public_key(settings.curve_dir / "server.key"),
            "bus_key": bus_key.hex() if bus_key else "", "created_at": time.time()}
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as fh:
        json.dump(body, fh)


def accept_invitation(settings: Settings, path: Path) -> tuple[str, bytes]:
    """Install an invitation on a worker host: the server key, and a client keypair of its own
    (made once). Returns (this host's public key, the bus signing key or b"")."""
    try:
        body = json.loads(Path(path).read_text())
        server = _check_key(body["server_key"]).decode()
        bus_key = bytes.fromhex(body.get("bus_key") or "")
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        raise CurveError(f"{path} is not an artoo invitation ({exc})") from None
    base = settings.curve_dir
    base.mkdir(parents=True, exist_ok=True, mode=0o700)
    os.chmod(base, 0o700)
    (base / "server.key").write_text("#   artoo: the main host's bus proxy\nmetadata\ncurve\n"
                                     f"    public-key = \"{server}\"\n")
    if not (base / "client.key_secret").exists():
        zmq.auth.create_certificates(base, "client")
        os.chmod(base / "client.key_secret", 0o600)
    return public_key(base / "client.key"), bus_key
