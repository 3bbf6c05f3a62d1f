"""The versioned envelope, the msgpack codec and the topic scheme (DESIGN §4).

Wire format: ZeroMQ frames `[topic, msgpack(envelope), mac]` — the third, an HMAC over the first
two, only with signing on (protocol/signing.py; off: `[topic, msgpack(envelope)]`). Topics are
prefix-matchable: `<Type>/<task_id>` for task traffic, `<Type>/-` without a task, and
`@<node>/<Type>` for messages directed at one process (acks, replies, the readiness probe). The
envelope is checked by hand (it is on the hot path); the body is validated with the type's pydantic
model.
"""
from __future__ import annotations

import functools
import hashlib
import threading
import time
import uuid
from dataclasses import dataclass, field
from typing import Any, Collection

import msgpack
from pydantic import ValidationError

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


@dataclass(slots=True)
class Envelope:
    type: str
    body: dict
    sender: str                    # role
    node: str                      # unique process id, e.g. planner-1-4711-ab12
    seq: int = 0                   # per (node, stream) sequence number
    task: str = NO_TASK
    id: str = field(default_factory=lambda: uuid.uuid4().hex)
    ts: float = field(default_factory=time.time)
    to: str | None = None          # receiver role (None = observers)
    corr: str | None = None        # correlation id (reply to / ack of)
    reply_to: str | None = None    # node that wants the reply
    trace: str | None = None
    v: int = PROTOCOL_VERSION

    def to_wire(self) -> dict:
        return {"v": self.v, "id": self.id, "ts": self.ts, "type": self.type, "from": self.sender,
                "node": self.node, "seq": self.seq, "task": self.task, "to": self.to,
                "corr": self.corr, "reply_to": self.reply_to, "trace": self.trace, "body": self.body}


_STR_FIELDS = ("id", "type", "from", "node", "task")
_OPT_STR_FIELDS = ("to", "corr", "reply_to", "trace")


def topic_for(type_name: str, task: str | None = None, node: str | None = None) -> bytes:
    if node:
        return f"@{node}/{type_name}".encode()
    return f"{type_name}/{task or NO_TASK}".encode()


def stream_of(topic: bytes) -> bytes:
    """Sequence numbers count per stream: the first topic segment (a type, or `@node`)."""
    return topic.split(b"/", 1)[0]


@functools.lru_cache(maxsize=1 << 16)
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


_packers = threading.local()


def encode(env: Envelope) -> bytes:
    try:
        packer = _packers.packer
    except AttributeError:  # a Packer is reused per thread: a third cheaper than packb
        packer = _packers.packer = msgpack.Packer(use_bin_type=True)
    return packer.pack(env.to_wire())


def decode(frames: list[bytes], max_bytes: int, signer: Signer | None = None
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
    """Validate the body against its type's model; raises ProtocolError('schema')."""
    try:
        # the model's validator itself: what model_validate runs, minus its Python wrapper
        return MESSAGE_TYPES[env.type].__pydantic_validator__.validate_python(env.body)
    except ValidationError as exc:
        first = exc.errors()[0] if exc.errors() else {}
        loc = ".".join(str(p) for p in first.get("loc", ()))
        raise ProtocolError("schema", f"{env.type}.{loc}: {first.get('msg', 'invalid')}") from None


def dump_body(msg: Body) -> dict[str, Any]:
    """The body as plain msgpack-able values (= model_dump(), without its Python wrapper)."""
    return msg.__pydantic_serializer__.to_python(msg)
