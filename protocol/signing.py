"""Signed envelopes: an HMAC-SHA256 over every bus message with a per-daemon key (issue 15).

Like the Jupyter wire protocol, every message carries an HMAC of its serialized parts, so only a
holder of the key can put a message on the bus that anyone acts on. Wire format with signing on
(`ARTOO_BUS_SIGN`, the default): three ZeroMQ frames

    [topic, payload, mac]   mac = HMAC-SHA256(key, u16be(len(topic)) + topic + payload)

`payload` is the msgpack envelope exactly as sent (header fields and body), so the MAC is computed
over the bytes on the wire, never over a re-serialization; the topic is inside the MAC (length-
prefixed, so no topic/payload split is ambiguous), so a signed payload cannot be re-topic'd.
With signing off the format is the plain `[topic, payload]` of before; nothing is made or checked.

The key is 32 random bytes in the data dir (`$ARTOO_HOME/bus.key`, or `ARTOO_BUS_KEY_FILE`), mode
0600: tool sandboxes never see the data dir. `ensure_key` creates it atomically if it is missing
(write to a private temp file, then link(2) into place, which fails if another process won the
race, whose key is then read) — `artoo up`, the test harnesses and any bus client call it, so the
first of them creates it and every other one reads the same key.

Receivers (protocol.bus.inbound, the auditor, the capture relay that feeds the audit log) verify
with a constant-time compare before parsing anything: an unsigned frame is rejected as `unsigned`,
a wrong MAC as `bad_signature`. Replays of a valid frame: see protocol/bus/inbound.py (a frame is
acted on once: id de-dup for work messages, MAC de-dup for everything else, and an age limit).
"""
from __future__ import annotations

import hashlib
import hmac
import os
import stat
import struct
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

from . import accel

if TYPE_CHECKING:
    from .settings import Settings

KEY_BYTES = 32
MAC_BYTES = 32
_TOPIC_LEN = struct.Struct(">H")
_BLOCK = 64  # SHA-256 block size


class BusKeyError(RuntimeError):
    """The bus key file is unusable (wrong mode, wrong size, not ours)."""


class Signer:
    """HMAC-SHA256 with the key's inner and outer pads hashed once, and the inner hash of each
    recent topic's prefix (`u16be(len) + topic`) kept: per message only two hashlib copies, one
    update over the payload as built and the outer digest (RFC 2104, bit-for-bit what
    hmac.digest computes)."""

    __slots__ = ("_inner", "_outer", "_topics")

    TOPIC_CACHE = 1024   # topics carry task ids: what is live at once (envelope.LIVE_KEYS)

    def __init__(self, key: bytes):
        if len(key) > _BLOCK:
            key = hashlib.sha256(key).digest()
        key = key.ljust(_BLOCK, b"\0")
        self._inner = hashlib.sha256(bytes(b ^ 0x36 for b in key))
        self._outer = hashlib.sha256(bytes(b ^ 0x5C for b in key))
        self._topics: dict[bytes, "hashlib._Hash"] = {}

    def mac(self, topic: bytes, payload: bytes) -> bytes:
        head = self._topics.get(topic)
        if head is None:
            if len(self._topics) >= self.TOPIC_CACHE:
                self._topics.clear()
            head = self._inner.copy()
            head.update(_TOPIC_LEN.pack(len(topic)))
            head.update(topic)
            self._topics[bytes(topic)] = head
        inner = head.copy()
        inner.update(payload)             # the payload as built (or received): never copied
        outer = self._outer.copy()
        outer.update(inner.digest())
        return outer.digest()

    def sign(self, topic: bytes, payload: bytes) -> list[bytes]:
        """The three frames of a signed message."""
        return [topic, payload, self.mac(topic, payload)]

    def verify(self, topic: bytes, payload: bytes, mac: bytes) -> bool:
        return hmac.compare_digest(mac, self.mac(topic, payload))


def key_path(settings: "Settings") -> Path:
    return settings.bus_key_file


def ensure_key(settings: "Settings") -> bytes:
    """The daemon's bus key, created (32 random bytes, mode 0600) if it does not exist yet.

    Atomic: the key is written to a temp file in the same directory and linked into place;
    link(2) fails if the name exists, so concurrent callers all end up with the one key."""
    path = key_path(settings)
    try:
        return read_key(path)
    except FileNotFoundError:
        pass
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    fd, tmp = tempfile.mkstemp(prefix=".bus.key.", dir=path.parent)  # mode 0600
    try:
        os.write(fd, os.urandom(KEY_BYTES))
        os.fsync(fd)
        os.close(fd)
        fd = -1
        try:
            os.link(tmp, path)
        except FileExistsError:
            pass  # another process created it first: use theirs
    finally:
        if fd >= 0:
            os.close(fd)
        os.unlink(tmp)
    return read_key(path)


def read_key(path: Path) -> bytes:
    """Read and check a key file: ours, not readable by group or others, exactly 32 bytes."""
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise BusKeyError(f"bus key {path} is not a regular file")
        if st.st_uid != os.getuid():
            raise BusKeyError(f"bus key {path} belongs to uid {st.st_uid}, not to us")
        if st.st_mode & 0o077:
            raise BusKeyError(f"bus key {path} has mode {stat.S_IMODE(st.st_mode):04o}; "
                            f"it must be readable by its owner only (chmod 600)")
        key = os.read(fd, KEY_BYTES + 1)
    finally:
        os.close(fd)
    if len(key) != KEY_BYTES:
        raise BusKeyError(f"bus key {path} has {len(key)} bytes, expected {KEY_BYTES}")
    return key


def new_signer(key: bytes) -> Signer:
    """A signer for `key`: the C one (protocol/_wire.c, the same MACs from one call instead of
    four hashlib objects) where it is built and on, else the Python `Signer` above."""
    fast = accel.mac_type()
    return Signer(key) if fast is None else fast(key)


def signer_for(settings: "Settings") -> Signer | None:
    """The signer every bus process uses: None when signing is off (ARTOO_BUS_SIGN=0)."""
    if not settings.bus_sign:
        return None
    return new_signer(ensure_key(settings))


def install_key(settings: "Settings", key: bytes) -> None:
    """Use `key` (a main host's, from its invitation) as this host's bus key: a worker host must
    sign with the key every other process of the bus checks."""
    if len(key) != KEY_BYTES:
        raise BusKeyError(f"an invited bus key has {len(key)} bytes, expected {KEY_BYTES}")
    path = key_path(settings)
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    fd, tmp = tempfile.mkstemp(prefix=".bus.key.", dir=path.parent)  # mode 0600
    try:
        os.write(fd, key)
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
