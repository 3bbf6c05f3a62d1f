"""Which hot path the bus runs in this process: the C module or the pure-Python reference.

`protocol/_wire.c` (built by `pip install`, see setup.py) takes a message's frames off a socket
and puts them on in one call each (pyzmq's sockets, driven through the libzmq pyzmq loaded),
computes and checks MACs, decodes a regular frame into its Envelope, builds a validated flat
body's model and writes a published envelope's msgpack — the same bytes, MACs and decisions as
the Python code. Where it is missing (no compiler at install time) or `ARTOO_WIRE_C=0` turns it
off, the bus runs the Python paths it always had; `WIRE` is None then. A client picks its path
when it connects; the tests hold the two to the same results (tests/test_wire_c.py).
"""
from __future__ import annotations

import functools
import logging
import os
from typing import Callable

import zmq

log = logging.getLogger("artoo.bus")
ABI = 1   # = WIRE_ABI in _wire.c: the functions and types this module expects of it


def _load():
    """(the C module or None, a line for `artoo status` saying which path runs and why)."""
    if os.environ.get("ARTOO_WIRE_C", "1") == "0":
        return None, "Python (ARTOO_WIRE_C=0)"
    try:
        from . import _wire
    except ImportError:
        return None, "Python (protocol/_wire.c is not built: no C compiler at install time?)"
    if getattr(_wire, "ABI", None) != ABI:
        log.warning("protocol/_wire.c was built from another version of its source: the bus "
                    "runs its Python paths until `bash scripts/setup` rebuilds it")
        return None, "Python (protocol/_wire.c built from another source: bash scripts/setup)"
    path = _libzmq_path()
    if path is None:
        return None, "Python (pyzmq's libzmq not found among the loaded libraries)"
    try:
        _wire.bind(path)
    except OSError as exc:   # a pyzmq built against a system libzmq elsewhere: stay in Python
        log.warning("bus frame I/O stays in Python: %s", exc)
        return None, f"Python ({exc})"
    return _wire, "C (protocol/_wire.c)"


def _libzmq_path() -> str | None:
    """The libzmq file mapped into this process by pyzmq (its backend is imported by `zmq`)."""
    zmq.zmq_version()  # the backend (and with it libzmq) is loaded
    try:
        with open("/proc/self/maps") as maps:   # address perms offset dev inode [path]
            for line in maps:
                fields = line.split(None, 5)
                path = fields[5].strip() if len(fields) == 6 else ""
                name = os.path.basename(path)
                if name.startswith("libzmq") and ".so" in name:
                    return path
    except OSError:
        return None
    return None


WIRE, STATE = _load()


# What a send raises when libzmq refuses it: pyzmq's error, or the C module's OSError (errno set)
SEND_ERRORS = (zmq.ZMQError, OSError)
_NOBLOCK = int(zmq.NOBLOCK)
_SNDMORE = int(zmq.SNDMORE)
# pyzmq's backend recv/send, under its Python-level sugar (which only adds routing_id/group
# handling the bus never uses): the Python paths' cheapest per-frame calls
_RAW_RECV = next((c.__dict__["recv"] for c in zmq.Socket.__mro__ if "recv" in c.__dict__),
                 zmq.Socket.recv)
_RAW_SEND = next((c.__dict__["send"] for c in zmq.Socket.__mro__[1:] if "send" in c.__dict__),
                 zmq.Socket.send)


def receiver(sock: zmq.Socket) -> Callable[[], list[bytes] | None]:
    """recv() -> the frames of the next message queued on `sock`, or None when there is none."""
    if WIRE is not None:
        return functools.partial(WIRE.recv, sock.underlying)

    def recv() -> list[bytes] | None:
        # Frame.more is a third cheaper than getsockopt(RCVMORE) per frame
        try:
            frame = _RAW_RECV(sock, _NOBLOCK, False)
        except zmq.Again:
            return None
        frames = [frame.bytes]
        while frame.more:
            frame = _RAW_RECV(sock, _NOBLOCK, False)
            frames.append(frame.bytes)
        return frames
    return recv


def sender(sock: zmq.Socket) -> Callable[[list[bytes]], None]:
    """send(frames): one message of these frames on `sock` (a PUB: it never blocks). Raises one
    of SEND_ERRORS when libzmq refuses it."""
    if WIRE is not None:
        return functools.partial(WIRE.send, sock.underlying)

    def send(frames: list[bytes]) -> None:
        for frame in frames[:-1]:
            _RAW_SEND(sock, frame, _SNDMORE)
        _RAW_SEND(sock, frames[-1])
    return send


def envelope_packer() -> Callable[..., bytes] | None:
    """pack(id, ts, type, from, node, seq, task, to, corr, reply_to, trace, body_msgpack) -> the
    envelope's msgpack, the bytes msgspec writes for its wire map; None: encode the map."""
    return None if WIRE is None else WIRE.pack_envelope


def mac_type():
    """The HMAC implementation signing.Signer uses: the C one, or None for the Python reference."""
    return None if WIRE is None else WIRE.Mac
