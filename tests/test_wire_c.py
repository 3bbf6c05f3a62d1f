"""The bus's frame I/O and HMAC in C (protocol/_wire.c, protocol/accel.py) against the Python
reference paths: the same MACs, the same frames on real ZeroMQ sockets, in both directions, and a
bus where a client on each path hears the other. The forged-message suite (test_signing.py) runs on
both paths too."""
from __future__ import annotations

import hashlib
import hmac
import os
import shutil
import struct
import threading
import time

import pytest
import zmq
from hypothesis import given, settings as hsettings, strategies as st

from protocol import accel, signing
from protocol.messages import ApprovalDecision
from protocol.settings import load_settings
from protocol.signing import Signer

WAIT = 20.0


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
