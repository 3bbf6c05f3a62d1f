"""The versioned envelope, the msgpack codec and the topic scheme (DESIGN §4).

Wire format: ZeroMQ frames `[topic, msgpack(envelope), mac]` — the third, an HMAC over the first
two, only with signing on (protocol/signing.py; off: `[topic, msgpack(envelope)]`). Topics are
prefix-matchable: `<Type>/<task_id>` for task traffic, `<Type>/-` without a task, and
`@<node>/<Type>` for messages directed at one process (acks, replies, the readiness probe).

On the hot path msgspec decodes the envelope and validates the body in C against Structs derived
from the pydantic catalogue (protocol/fastpath.py); the hand-written reference decoder
(`_decode_slow`) and the pydantic models decide everything the fast path does not accept, so what
is accepted and the reason a frame is refused are the same either way.
"""
from __future__ import annotations

import functools
import hashlib
import threading
import time
import uuid
from typing import Any, Collection

import msgpack
import msgspec
from pydantic import ValidationError

from . import accel
from .fastpath import WireEnvelope, body_codecs
from .messages import MESSAGE_TYPES, Body
from .signing import Signer

PROTOCOL_VERSION = 1
NO_TASK = "-"
MAX_TOPIC_BYTES = 1024
_unpackb = msgpack.unpackb


class ProtocolError(Exception):
    """A frame that cannot be accepted; `reason` is the counter it is reported under."""

    def __init__(self, reason: str, detail: str = ""):
        super().__init__(f"{reason}: {detail}" if detail else reason)
        self.reason = reason
        self.detail = detail


class Envelope:
    """One bus message: the header fields and the body (a map).

    A received envelope keeps its body as the raw msgpack bytes it arrived in (`_raw`, a slice of
    the payload, never copied) and, on the fast path, the body already decoded and validated by
    msgspec (`_parsed`): `body` (the plain dict) is only built if someone reads it, and
    `parse_body` turns the validated Struct into the pydantic model without validating twice."""

    __slots__ = ("type", "_body", "sender", "node", "seq", "task", "id", "ts", "to", "corr",
                 "reply_to", "trace", "v", "_raw", "_parsed", "_model")

    def __init__(self, type: str, body: dict | None, sender: str, node: str, seq: int = 0,
                 task: str = NO_TASK, id: str | None = None, ts: float | None = None,
                 to: str | None = None, corr: str | None = None, reply_to: str | None = None,
                 trace: str | None = None, v: int = PROTOCOL_VERSION):
        self.type = type
        self._body = body
        self.sender = sender             # role
        self.node = node                 # unique process id, e.g. planner-1-4711-ab12
        self.seq = seq                   # per (node, stream) sequence number
        self.task = task
        self.id = uuid.uuid4().hex if id is None else id
        self.ts = time.time() if ts is None else ts
        self.to = to                     # receiver role (None = observers)
        self.corr = corr                 # correlation id (reply to / ack of)
        self.reply_to = reply_to         # node that wants the reply
        self.trace = trace
        self.v = v
        self._raw = None                 # the body's msgpack bytes, as received
        self._parsed = None              # the body validated by msgspec (fastpath.py)
        self._model = None               # the body as its pydantic model (parse_body)

    @property
    def body(self) -> dict:
        body = self._body
        if body is None:
            raw = self._raw
            body = self._body = _unpackb(raw, raw=False, strict_map_key=True) \
                if raw is not None else {}
        return body

    @body.setter
    def body(self, value: dict) -> None:
        self._body, self._raw, self._parsed, self._model = value, None, None, None

    def to_wire(self) -> dict:
        return {"v": self.v, "id": self.id, "ts": self.ts, "type": self.type, "from": self.sender,
                "node": self.node, "seq": self.seq, "task": self.task, "to": self.to,
                "corr": self.corr, "reply_to": self.reply_to, "trace": self.trace, "body": self.body}

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Envelope):
            return NotImplemented
        return self.to_wire() == other.to_wire()

    __hash__ = None  # type: ignore[assignment]  # mutable, like the dataclass it replaced

    def __repr__(self) -> str:
        return (f"Envelope(type={self.type!r}, sender={self.sender!r}, node={self.node!r}, "
                f"seq={self.seq}, task={self.task!r}, id={self.id!r}, to={self.to!r}, "
                f"corr={self.corr!r}, body={self.body!r})")


_STR_FIELDS = ("id", "type", "from", "node", "task")
_OPT_STR_FIELDS = ("to", "corr", "reply_to", "trace")


# Caches keyed by a task or a process (topics, rendezvous rankings, a signer's topic prefixes) hold
# what is live at once — a few hundred tasks — not the history: each task brings new keys, so a
# cache sized for history fills for hours on a long-lived role (16,384 topics ≈ 3.6 MB) and its
# memory grows all that time.
LIVE_KEYS = 1024


@functools.lru_cache(maxsize=LIVE_KEYS)
def topic_for(type_name: str, task: str | None = None, node: str | None = None) -> bytes:
    if node:
        return f"@{node}/{type_name}".encode()
    return f"{type_name}/{task or NO_TASK}".encode()


def stream_of(topic: bytes) -> bytes:
    """Sequence numbers count per stream: the first topic segment (a type, or `@node`)."""
    return topic.split(b"/", 1)[0]


@functools.lru_cache(maxsize=LIVE_KEYS)
def ranking(task_id: str, instances: int) -> tuple[int, ...]:
    """The instances 0..N-1 in a task's rendezvous (highest-random-weight) order, first = owner.

    Each (task, instance) pair gets an independent 64-bit weight, so when an instance is skipped
    (missing) only the tasks it ranked first move, each to its own next-ranked instance: the others
    keep their owner, and every process computes the same order without talking to the others."""
    weights = [(int.from_bytes(hashlib.blake2b(f"{i}\0{task_id}".encode(), digest_size=8)
                                .digest(), "big"), i) for i in range(instances)]
    return tuple(i for _, i in sorted(weights, reverse=True))


def owner(task_id: str, instances: int, alive: Collection[int] | None = None) -> int:
    """The instance of a scalable role that owns a task (DESIGN §3): the first instance of the
    task's rendezvous ranking that is alive (`alive` None = all). With nobody alive it is the
    first-ranked one, so the answer is always an instance number."""
    if instances <= 1:
        return 0
    order = ranking(task_id, instances)
    if alive is not None:
        for i in order:
            if i in alive:
                return i
    return order[0]


_encoders = threading.local()
_wire_decoder = msgspec.msgpack.Decoder(WireEnvelope)
_BODY_CODECS = body_codecs()      # type name -> msgspec decoder + converter (fastpath.py)
_DecodeError = (msgspec.ValidationError, msgspec.DecodeError)
# The fast path below in C (protocol/_wire.c): for a regular frame it returns what the Python
# fast path would; for anything else None, and the Python code decides as it always has.
_C_DECODE = None if accel.WIRE is None else accel.WIRE.Decoder(
    _wire_decoder.decode, {name: codec.decoder.decode for name, codec in _BODY_CODECS.items()},
    Envelope, WireEnvelope, MAX_TOPIC_BYTES).decode


def pack(value: Any) -> bytes:
    """Any plain value as msgpack: the bytes `msgpack.packb(value, use_bin_type=True)` writes,
    built by msgspec's encoder, which sizes its buffer to the value (packb allocates and frees a
    256 KiB buffer per call: 0.74 against 0.19 µs for an outbox record). A float subclass
    (numpy's float64) is written as the float it is, as packb does."""
    return _pack(value, enc_hook=_plain)


def _plain(value: Any) -> Any:
    if isinstance(value, float):
        return float(value)
    raise TypeError(f"cannot pack a {type(value).__name__}")


_pack = msgspec.msgpack.encode


def encode(env: Envelope) -> bytes:
    """The envelope as msgpack: msgspec's encoder (C; byte-for-byte what msgpack's Packer with
    use_bin_type writes for these values), one per thread."""
    try:
        encoder = _encoders.encoder
    except AttributeError:
        encoder = _encoders.encoder = msgspec.msgpack.Encoder()
    return encoder.encode(env.to_wire())


def decode(frames: list[bytes], max_bytes: int, signer: Signer | None = None
           ) -> tuple[bytes, Envelope]:
    """Frames → (topic, envelope) with the envelope checked; raises ProtocolError.

    The fast path: msgspec decodes and checks the header and decodes + validates the body against
    the type's Struct (fastpath.py), all in C. Anything it refuses, and every type pydantic keeps,
    goes through `_decode_slow`, the reference decoder, which accepts or names the reason exactly
    as before (a non-Python sender sees the same protocol either way)."""
    fast = _C_DECODE if accel.WIRE is not None else None
    if fast is not None:            # the same fast path in C, for the regular case only
        got = fast(frames, max_bytes, signer)
        if got is not None:
            return got
    n = len(frames)
    if signer is None:
        if n != 2:
            return _decode_slow(frames, max_bytes, signer)
        topic, payload = frames
    else:
        if n != 3:
            return _decode_slow(frames, max_bytes, signer)
        topic, payload, mac = frames
    if len(payload) > max_bytes or len(topic) > MAX_TOPIC_BYTES:
        return _decode_slow(frames, max_bytes, signer)
    if signer is not None and not signer.verify(topic, payload, mac):
        raise ProtocolError("bad_signature", f"wrong MAC on {topic[:64]!r}")
    try:
        w = _wire_decoder.decode(payload)
    except _DecodeError:
        return _decode_slow([topic, payload], max_bytes)  # the MAC is checked already
    if w.v != PROTOCOL_VERSION or w.seq < 0 or w.type not in MESSAGE_TYPES:
        return _decode_slow([topic, payload], max_bytes)
    codec = _BODY_CODECS.get(w.type)
    raw = w.body
    parsed = None
    try:
        if codec is not None:
            parsed = codec.decoder.decode(raw)
            body = None
        else:                                              # pydantic's type: check the map now
            body = _unpackb(raw, raw=False, strict_map_key=True)
            if type(body) is not dict:
                raise ValueError
    except Exception:  # noqa: BLE001 - any refusal: the reference decoder names the reason
        return _decode_slow([topic, payload], max_bytes)
    env = Envelope(w.type, body, w.from_, w.node, w.seq, w.task, w.id, w.ts, w.to, w.corr,
                   w.reply_to, w.trace, PROTOCOL_VERSION)
    env._raw = raw
    env._parsed = parsed
    return topic, env


def _decode_slow(frames: list[bytes], max_bytes: int, signer: Signer | None = None
                 ) -> tuple[bytes, Envelope]:
    """Frames → (topic, envelope) with the envelope checked; raises ProtocolError.

    With a signer the frames are `[topic, payload, mac]` and the MAC is checked (constant time)
    before the payload is parsed: `unsigned` for a plain two-frame message, `bad_signature` for a
    wrong MAC. Without one they are `[topic, payload]` (signing off, or a record of the audit log).

    Written for the hot path: exact type checks on locals, one dict lookup per field."""
    if signer is None:
        if len(frames) != 2:
            raise ProtocolError("frames", f"expected 2 frames, got {len(frames)}")
        topic, payload = frames
    else:
        if len(frames) != 3:
            if len(frames) == 2:
                raise ProtocolError("unsigned", "a message without a signature frame")
            raise ProtocolError("frames", f"expected 3 frames, got {len(frames)}")
        topic, payload, mac = frames
    if len(payload) > max_bytes or len(topic) > MAX_TOPIC_BYTES:
        raise ProtocolError("oversized", f"{len(payload)} bytes > {max_bytes} "
                            f"(or topic {len(topic)} > {MAX_TOPIC_BYTES})")
    if signer is not None and not signer.verify(topic, payload, mac):
        raise ProtocolError("bad_signature", f"wrong MAC on {topic[:64]!r}")
    try:
        raw = _unpackb(payload, raw=False, strict_map_key=True)
    except Exception as exc:  # msgpack raises several unrelated exception types
        raise ProtocolError("msgpack", type(exc).__name__) from None
    if type(raw) is not dict:
        raise ProtocolError("envelope", "not a map")
    get = raw.get
    version = get("v")
    if version != PROTOCOL_VERSION or type(version) is not int:
        raise ProtocolError("version", f"unsupported protocol version {version!r}")
    msg_id, type_name, sender, node, task = (get("id"), get("type"), get("from"), get("node"),
                                             get("task"))
    if not (type(msg_id) is str and type(type_name) is str and type(sender) is str
            and type(node) is str and type(task) is str):
        for key in _STR_FIELDS:
            if not isinstance(get(key), str):
                raise ProtocolError("envelope", f"field {key!r} missing or not a string")
    to, corr, reply_to, trace = get("to"), get("corr"), get("reply_to"), get("trace")
    for key, value in (("to", to), ("corr", corr), ("reply_to", reply_to), ("trace", trace)):
        if value is not None and type(value) is not str:
            raise ProtocolError("envelope", f"field {key!r} not a string")
    seq, ts, body = get("seq"), get("ts"), get("body")
    if type(seq) is not int or seq < 0:
        raise ProtocolError("envelope", "field 'seq' not a non-negative integer")
    if type(ts) is not float:
        if type(ts) is not int:
            raise ProtocolError("envelope", "field 'ts' not a number")
        ts = float(ts)
    if type(body) is not dict:
        raise ProtocolError("envelope", "field 'body' not a map")
    if type_name not in MESSAGE_TYPES:
        raise ProtocolError("unknown_type", type_name[:64])
    return topic, Envelope(type_name, body, sender, node, seq, task, msg_id, ts, to, corr,
                           reply_to, trace, version)


def parse_body(env: Envelope) -> Body:
    """Validate the body against its type's model; raises ProtocolError('schema').

    On the fast path the body was validated by msgspec when it was decoded: the model is built
    from it without a second validation. Otherwise (a pydantic-only type, a body msgspec refused,
    an envelope built in this process) pydantic validates, as the reference."""
    model = env._model
    if model is not None:
        return model
    parsed = env._parsed
    if parsed is not None:
        model = env._model = _BODY_CODECS[env.type].convert(parsed)
        return model
    try:
        # the model's validator itself: what model_validate runs, minus its Python wrapper
        model = env._model = MESSAGE_TYPES[env.type].__pydantic_validator__.validate_python(
            env.body)
        return model
    except ValidationError as exc:
        first = exc.errors()[0] if exc.errors() else {}
        loc = ".".join(str(p) for p in first.get("loc", ()))
        raise ProtocolError("schema", f"{env.type}.{loc}: {first.get('msg', 'invalid')}") from None


def dump_body(msg: Body) -> dict[str, Any]:
    """The body as plain msgpack-able values (= model_dump(), without its Python wrapper)."""
    return msg.__pydantic_serializer__.to_python(msg)
