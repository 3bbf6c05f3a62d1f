"""The bus's frame I/O and HMAC in C (protocol/_wire.c, protocol/accel.py) against the Python
reference paths: the same MACs, the same frames on real ZeroMQ sockets, in both directions, and a
bus where a client on each path hears the other. The forged-message suite (test_signing.py) runs on
both paths too."""
from __future__ import annotations

import functools
import gc
import hashlib
import hmac
import os
import shutil
import struct
import subprocess
import sys
import threading
import time

import msgpack
import msgspec
import pytest
import zmq
from hypothesis import given, settings as hsettings, strategies as st

from catalogue_samples import all_samples
from protocol import accel, envelope, fastpath, signing
from protocol.envelope import (MAX_TOPIC_BYTES, Envelope, ProtocolError, decode, encode,
                               parse_body, topic_for)
from protocol.messages import ApprovalDecision
from protocol.messages import MESSAGE_TYPES
from protocol.settings import load_settings
from protocol.signing import Signer

WAIT = 20.0
MAX_FRAME = 1 << 20


@pytest.fixture
def python_wire(monkeypatch):
    """Clients made while this is active run the pure-Python frame I/O and MAC."""
    monkeypatch.setattr(accel, "WIRE", None)


def test_the_c_module_is_built_and_used():
    """`pip install` builds it wherever a C compiler is present (setup.py); a silent fallback
    would keep the bus correct but cost it its speed, so a missing module fails here."""
    if os.environ.get("ARTOO_WIRE_C") == "0":
        pytest.skip("ARTOO_WIRE_C=0 turns the C paths off")
    if shutil.which("cc") is None and shutil.which("gcc") is None:
        pytest.skip("no C compiler: the bus runs its Python paths")
    assert accel.WIRE is not None, "protocol/_wire.c is not built: run bash scripts/setup"
    assert type(signing.new_signer(b"k" * 32)) is accel.WIRE.Mac


def _reference(key: bytes, topic: bytes, payload: bytes) -> bytes:
    return hmac.digest(key, struct.pack(">H", len(topic)) + topic + payload, hashlib.sha256)


@pytest.mark.skipif(accel.WIRE is None, reason="protocol/_wire.c not built")
@hsettings(max_examples=300, deadline=None)
@given(key=st.binary(max_size=200), topic=st.binary(max_size=300),
       payload=st.binary(max_size=5000))
def test_the_c_mac_is_the_reference_hmac(key, topic, payload):
    c, py = accel.WIRE.Mac(key), Signer(key)
    mac = c.mac(topic, payload)
    assert mac == py.mac(topic, payload) == _reference(key, topic, payload)
    assert c.sign(topic, payload) == [topic, payload, mac]
    assert c.verify(topic, payload, mac) and py.verify(topic, payload, mac)
    # any bytes-like object, as hashlib takes
    assert c.mac(memoryview(topic), bytearray(payload)) == mac


@pytest.mark.skipif(accel.WIRE is None, reason="protocol/_wire.c not built")
def test_the_c_check_refuses_every_wrong_mac():
    key = os.urandom(32)
    c = accel.WIRE.Mac(key)
    topic, payload = b"ApprovalDecision/t1", b"\x81\xa1v\x01"
    mac = c.mac(topic, payload)
    assert c.verify(topic, payload, mac)
    flipped = bytes([mac[0] ^ 1]) + mac[1:]
    for wrong in (flipped, mac[:16], mac + b"\0", b"", bytes(32)):
        assert not c.verify(topic, payload, wrong)
    assert not c.verify(topic + b"x", payload, mac)            # the topic is inside the MAC
    assert not c.verify(topic, payload + b"\0", mac)
    assert not accel.WIRE.Mac(os.urandom(32)).verify(topic, payload, mac)
    with pytest.raises(TypeError):
        c.verify(topic, "not bytes", mac)
    with pytest.raises(TypeError):
        c.mac(topic)
    with pytest.raises(ValueError):       # the length prefix is 16 bits, as in the reference
        c.mac(b"t" * 65536, payload)
    with pytest.raises(struct.error):
        Signer(key).mac(b"t" * 65536, payload)


@pytest.fixture
def pair(tmp_path):
    """Two connected PAIR sockets over ipc (the frame I/O does not care about the pattern)."""
    ctx = zmq.Context()
    a, b = ctx.socket(zmq.PAIR), ctx.socket(zmq.PAIR)
    for s in (a, b):
        s.setsockopt(zmq.LINGER, 0)
    endpoint = f"ipc://{tmp_path}/pair.sock"
    a.bind(endpoint)
    b.connect(endpoint)
    b.setsockopt(zmq.RCVTIMEO, int(WAIT * 1000))
    a.send(b"connected")              # blocking: returns once the pipe exists (the bus's PUB
    assert b.recv() == b"connected"   # never waits; a PAIR without its peer would refuse)
    yield a, b
    a.close(0)
    b.close(0)
    ctx.term()


MESSAGES = [[b"only"], [b"", b""], [b"LlmUsage/t", b"\x80", b"m" * 32],
            [bytes([i]) * i for i in range(12)], [b"big", os.urandom(1 << 20)]]


def _paths():
    paths = [("python", "python")]
    if accel.WIRE is not None:
        paths += [("c", "python"), ("python", "c"), ("c", "c")]
    return paths


@pytest.mark.parametrize("send_path,recv_path", _paths())
def test_frames_cross_unchanged_between_the_paths(pair, monkeypatch, send_path, recv_path):
    a, b = pair
    wire = accel.WIRE

    def made(path, factory, sock):
        monkeypatch.setattr(accel, "WIRE", wire if path == "c" else None)
        return factory(sock)
    send = made(send_path, accel.sender, a)
    recv = made(recv_path, accel.receiver, b)
    assert recv() is None                       # nothing queued: None, not an exception
    for frames in MESSAGES:
        send(frames)
        assert b.poll(int(WAIT * 1000))
        got = recv()
        assert got == frames
        assert all(type(f) is bytes for f in got)
    assert recv() is None


@pytest.mark.skipif(accel.WIRE is None, reason="protocol/_wire.c not built")
def test_the_c_send_checks_every_frame_before_the_first_leaves(pair):
    a, b = pair
    send, recv = accel.sender(a), accel.receiver(b)
    for bad in ([b"topic", "text"], [b"topic", None], [], "frames"):
        with pytest.raises((TypeError, ValueError)):
            send(bad)
    send([b"after"])
    assert b.poll(int(WAIT * 1000))
    assert recv() == [b"after"]                 # nothing of the refused messages came first


@pytest.mark.skipif(accel.WIRE is None, reason="protocol/_wire.c not built")
def test_a_c_client_and_a_python_client_hear_each_other(bus_process, settings, bus_clients,
                                                       monkeypatch, tmp_path):
    """Signed, through a real proxy: each hears the other, and both refuse a message signed
    with another key."""
    heard: dict[str, list[str]] = {"c": [], "python": []}
    cond = threading.Condition()

    def listener(name):
        def on(env, msg):
            with cond:
                heard[name].append(msg.approval_id)
                cond.notify_all()
        return lambda c: c.on("ApprovalDecision", on)
    wire = accel.WIRE
    monkeypatch.setattr(accel, "WIRE", None)
    py = bus_clients("user", setup=listener("python"))
    monkeypatch.setattr(accel, "WIRE", wire)
    c = bus_clients("planner", setup=listener("c"))
    assert type(py._signer) is Signer and type(c._signer) is wire.Mac
    for client in (py, c):
        client.handshake()           # each one's subscription is live at the proxy
    rogue = bus_clients("user", settings=load_settings(
        bus_key_file_override=str(tmp_path / "other.key")))
    rogue.publish(ApprovalDecision(task_id="t", approval_id="forged", approved=True))
    py.publish(ApprovalDecision(task_id="t", approval_id="from-python", approved=True))
    c.publish(ApprovalDecision(task_id="t", approval_id="from-c", approved=True))
    with cond:
        assert cond.wait_for(lambda: all({"from-python", "from-c"} <= set(v)
                                          for v in heard.values()), WAIT), heard
    deadline = time.monotonic() + WAIT
    while py.rejected["bad_signature"] < 1 or c.rejected["bad_signature"] < 1:
        assert time.monotonic() < deadline, (dict(py.rejected), dict(c.rejected))
        threading.Event().wait(0.02)
    assert all("forged" not in v for v in heard.values())


# ----------------------------------------------------------------------------------------------
# the decoder's fast path in C: the same outcome as the Python decoder for any frames
# ----------------------------------------------------------------------------------------------

_KEY = os.urandom(32)
_SAMPLES = sorted(all_samples().items())


def _outcome(frames, signer, max_bytes=MAX_FRAME):
    """What decoding and validating these frames comes to: the envelope and the model as plain
    values, or the reason each step refused them."""
    try:
        topic, env = decode(list(frames), max_bytes, signer)
    except ProtocolError as exc:
        return ("refused", exc.reason)
    try:
        body = ("model", type(parse_body(env)).__name__, parse_body(env).model_dump())
    except ProtocolError as exc:
        body = ("schema", exc.reason)
    return ("accepted", topic, env.to_wire(), body)


def _mutate(payload: bytes, how: str, value) -> bytes:
    if how == "field":                   # one header field set to an odd value
        d = msgpack.unpackb(payload)
        d[value[0]] = value[1]
        return msgpack.packb(d, use_bin_type=True)
    if how == "flip":
        i = value % max(1, len(payload))
        return payload[:i] + bytes([payload[i] ^ 0x41]) + payload[i + 1:]
    if how == "cut":
        return payload[: value % max(1, len(payload))]
    return payload


_ODD = st.sampled_from([
    ("v", 2), ("v", True), ("v", 1.0), ("seq", -1), ("seq", 2 ** 64 - 1), ("seq", 1.5),
    ("type", "NoSuchType"), ("type", 7), ("ts", 5), ("ts", "now"), ("id", 3), ("to", 5),
    ("corr", b"x"), ("trace", None), ("body", []), ("body", {"x": 1}), ("body", None),
    ("from", None), ("node", ""), ("extra", {"k": [1, 2]}), ("task", "t" * 300)])


@pytest.mark.skipif(accel.WIRE is None, reason="protocol/_wire.c not built")
@hsettings(max_examples=400, deadline=None)
@given(sample=st.sampled_from(_SAMPLES), signed=st.booleans(),
       how=st.sampled_from(["none", "field", "flip", "cut"]), value=st.data(),
       frames_edit=st.sampled_from(["none", "drop_mac", "short_mac", "wrong_mac", "extra_frame",
                                    "big_topic"]),
       small=st.booleans())
def test_the_c_decoder_decides_as_the_python_one(sample, signed, how, value,
                                                 frames_edit, small):
    name, model = sample
    env = Envelope(type=name, body=model.model_dump(), sender="user", node="user-0-1-ab", seq=3,
                   task="t1")
    topic, payload = topic_for(name, "t1"), encode(env)
    arg = value.draw(_ODD) if how == "field" else value.draw(st.integers(0, 10_000))
    payload = _mutate(payload, how, arg)
    c_signer, py_signer = (accel.WIRE.Mac(_KEY), Signer(_KEY)) if signed else (None, None)
    frames = [topic, payload] + ([py_signer.mac(topic, payload)] if signed else [])
    if frames_edit == "drop_mac":
        frames = frames[:2]
    elif frames_edit == "short_mac" and signed:
        frames[2] = frames[2][:16]
    elif frames_edit == "wrong_mac" and signed:
        frames[2] = Signer(os.urandom(32)).mac(topic, payload)
    elif frames_edit == "extra_frame":
        frames.append(b"x")
    elif frames_edit == "big_topic":
        frames[0] = b"T" * (MAX_TOPIC_BYTES + 1)
    max_bytes = len(payload) - 1 if small else MAX_FRAME
    if (how, frames_edit, small) == ("none", "none", False) and name in fastpath.fast_types()[0]:
        assert envelope._C_DECODE(list(frames), max_bytes, c_signer) is not None  # C decided
    c = _outcome(frames, c_signer, max_bytes)
    with pytest.MonkeyPatch.context() as m:
        m.setattr(accel, "WIRE", None)
        py = _outcome(frames, py_signer, max_bytes)
    assert c == py


@pytest.mark.skipif(accel.WIRE is None, reason="protocol/_wire.c not built")
def test_the_c_model_builder_builds_what_the_python_converter_builds():
    """For every flat fast-path type: the same instance state as fastpath's Python converter,
    equal to pydantic's own validation, and an ordinary model afterwards (its own fields set,
    assignment, copies, JSON)."""
    built = 0
    for name, sample in _SAMPLES:
        mirror = fastpath.mirror_of(MESSAGE_TYPES[name])
        if mirror is None or not mirror.flat:
            continue
        struct = msgspec.msgpack.decode(msgspec.msgpack.encode(sample.model_dump()),
                                        type=mirror.struct)
        with pytest.MonkeyPatch.context() as m:
            m.setattr(accel, "WIRE", None)
            python = fastpath._converter(mirror.model, list(mirror.names), [])
        c = fastpath._converter(mirror.model, list(mirror.names), [])
        assert isinstance(c, functools.partial)          # the C builder is what runs here
        a, b = c(struct), python(struct)
        assert type(a) is type(b) is mirror.model
        assert a.__dict__ == b.__dict__ and a == b == sample, name
        assert a.__pydantic_fields_set__ == b.__pydantic_fields_set__ == set(mirror.names)
        assert a.__pydantic_extra__ is None and a.__pydantic_private__ is None
        again = c(struct)
        again.__pydantic_fields_set__.discard(mirror.names[0])   # each its own set and dict
        assert mirror.names[0] in a.__pydantic_fields_set__ and again.__dict__ is not a.__dict__
        assert a.model_copy().model_dump() == sample.model_dump()
        assert mirror.model.model_validate_json(a.model_dump_json()) == sample
        built += 1
    assert built >= 10


_TEXT = st.text(max_size=40) | st.text(min_size=250, max_size=300) | st.sampled_from(
    ["", "a" * 31, "a" * 32, "é" * 200, "x" * 65535, "y" * 65536])
_OPT = st.none() | _TEXT


@pytest.mark.skipif(accel.WIRE is None, reason="protocol/_wire.c not built")
@hsettings(max_examples=300, deadline=None)
@given(mid=_TEXT, ts=st.floats(), tname=_TEXT, sender=_TEXT, node=_TEXT,
       seq=st.integers(-2 ** 63, 2 ** 64 - 1) | st.sampled_from(
           [0, 127, 128, 255, 256, 65535, 65536, 2 ** 32 - 1, 2 ** 32, -32, -33]),
       task=_TEXT, to=_OPT, corr=_OPT, reply_to=_OPT, trace=_OPT,
       body=st.dictionaries(st.text(max_size=8), st.integers() | st.text() | st.none(),
                            max_size=5))
def test_the_c_envelope_writer_writes_what_msgspec_writes(mid, ts, tname, sender, node, seq,
                                                         task, to, corr, reply_to, trace, body):
    """publish()'s payload on the C path is byte for byte the wire map's msgspec encoding."""
    wire = {"v": 1, "id": mid, "ts": ts, "type": tname, "from": sender, "node": node,
            "seq": seq, "task": task, "to": to, "corr": corr, "reply_to": reply_to,
            "trace": trace, "body": body}
    try:
        want = msgspec.msgpack.encode(wire)
    except (OverflowError, msgspec.EncodeError):
        return
    assert accel.WIRE.pack_envelope(mid, ts, tname, sender, node, seq, task, to, corr, reply_to,
                                    trace, msgspec.msgpack.encode(body)) == want


@pytest.mark.skipif(accel.WIRE is None, reason="protocol/_wire.c not built")
def test_the_c_envelope_writer_refuses_wrong_types():
    pack = accel.WIRE.pack_envelope
    good = ["i", 1.0, "T", "r", "n", 1, "t", None, None, None, None, b"\x80"]
    assert msgspec.msgpack.decode(pack(*good))["body"] == {}
    for i, bad in ((0, 5), (1, "now"), (2, None), (5, 1.5), (5, 2 ** 64), (7, b"x"), (11, {})):
        args = list(good)
        args[i] = bad
        with pytest.raises((TypeError, OverflowError)):
            pack(*args)
    with pytest.raises(TypeError):
        pack(*good[:-1])


def test_artoo_wire_c_0_turns_the_c_paths_off_in_a_process():
    """The switch a user (or a bug report) needs: the whole process runs the Python paths."""
    code = ("from protocol import accel, envelope, signing; "
            "print(accel.WIRE is None, envelope._C_DECODE is None, "
            "type(signing.new_signer(b'k' * 32)).__name__, accel.STATE)")
    out = subprocess.run([sys.executable, "-c", code], env={**os.environ, "ARTOO_WIRE_C": "0"},
                         capture_output=True, text=True, timeout=60, check=True).stdout.split()
    assert out == ["True", "True", "Signer", "Python", "(ARTOO_WIRE_C=0)"]


def test_a_build_from_another_source_is_not_used(monkeypatch, caplog):
    """A .so left from an older _wire.c (new code pulled, no re-install) would lack what the
    code calls: the bus runs its Python paths instead, and says why."""
    if accel.WIRE is None:
        pytest.skip("protocol/_wire.c not built")
    monkeypatch.setattr(accel, "ABI", accel.ABI + 1)
    with caplog.at_level("WARNING", logger="artoo.bus"):
        wire, state = accel._load()
    assert wire is None and "scripts/setup" in caplog.text and "scripts/setup" in state
    monkeypatch.undo()
    assert accel._load() == (accel.WIRE, "C (protocol/_wire.c)")


@pytest.mark.skipif(accel.WIRE is None, reason="protocol/_wire.c not built")
def test_the_c_calls_keep_no_reference_they_should_not(pair):
    """Every entry point, on its good and its refusing path, 20,000 times: the interpreter's
    count of allocated blocks does not grow (a leaked object per call would add 20,000)."""
    a, b = pair
    send, recv, pack = accel.sender(a), accel.receiver(b), accel.envelope_packer()
    mac = signing.new_signer(os.urandom(32))
    sample = dict(_SAMPLES)["LlmUsage"]
    env = Envelope(type="LlmUsage", body=sample.model_dump(), sender="u", node="n", seq=1,
                   task="t")
    topic, payload = topic_for("LlmUsage", "t"), encode(env)
    good = [topic, payload, mac.mac(topic, payload)]
    cut = [topic, payload[:-3], mac.mac(topic, payload[:-3])]
    body = msgspec.msgpack.encode(sample.model_dump())

    def once(i):
        parse_body(decode(good, MAX_FRAME, mac)[1])
        with pytest.raises(ProtocolError):
            decode(cut, MAX_FRAME, mac)
        assert mac.verify(topic, payload, good[2]) and len(mac.sign(topic, payload)) == 3
        pack("i", 1.0, "T", "f", "n", i, "t", None, "c", None, None, body)
        with pytest.raises(TypeError):
            pack("i", 1.0, None, "f", "n", i, "t", None, "c", None, None, body)
        send(good)
        assert b.poll(int(WAIT * 1000)) and recv() == good and recv() is None
        with pytest.raises(TypeError):
            send([b"x", "y"])
    for i in range(2000):
        once(i)
    gc.collect()
    before = sys.getallocatedblocks()
    for i in range(20000):
        once(i)
    gc.collect()
    assert sys.getallocatedblocks() - before < 2000
