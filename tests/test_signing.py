"""Signed envelopes (issue 15, protocol/signing.py): the HMAC itself, the key file, and a forged-
message suite on a real proxy process — a raw PUB socket on the proxy's XSUB side sends unsigned
frames, frames signed with a wrong key, replays of a valid frame, oversized frames, tampered bodies
and topics, and stale envelopes. None of them is acted on; each is counted under its reason."""
from __future__ import annotations

import hashlib
import hmac
import multiprocessing
import os
import stat
import threading
import time
from collections import Counter

import msgpack
import pytest

from services.runtime.capture import classify
from auditor.log import MSG, RAW, SUB
from catalogue_samples import build
from protocol import accel, signing
from protocol.bus import BusClient
from protocol.envelope import Envelope, ProtocolError, decode, dump_body, encode, topic_for
from protocol.messages import ApprovalDecision, SubTaskAssign
from protocol.settings import load_settings
from protocol.signing import Signer
from test_bus import RawPublisher

WAIT = 20.0
MAX = 1 << 20


# ----------------------------------------------------------------------------------------------
# the MAC and the decoder
# ----------------------------------------------------------------------------------------------

def test_mac_is_hmac_sha256_over_length_prefixed_topic_and_payload():
    key = os.urandom(32)
    s = Signer(key)
    topic, payload = b"ApprovalDecision/t1", b"\x81\xa1a\x01" * 50
    expected = hmac.digest(key, len(topic).to_bytes(2, "big") + topic + payload, hashlib.sha256)
    assert s.mac(topic, payload) == expected
    assert s.sign(topic, payload) == [topic, payload, expected]
    assert s.verify(topic, payload, expected)
    assert not s.verify(topic, payload + b"x", expected)
    assert not s.verify(b"ApprovalDecision/t2", payload, expected)
    assert not s.verify(topic, payload, expected[:-1])
    assert not Signer(os.urandom(32)).verify(topic, payload, expected)
    # the length prefix: moving bytes between topic and payload changes the MAC
    assert s.mac(b"ab", b"c") != s.mac(b"a", b"bc")
    long_key = os.urandom(100)  # longer than a SHA-256 block: hashed first, as RFC 2104 says
    assert Signer(long_key).mac(topic, payload) == hmac.digest(
        long_key, len(topic).to_bytes(2, "big") + topic + payload, hashlib.sha256)


def _approval(task="t1", **kw) -> Envelope:
    return Envelope(type="ApprovalDecision", sender="user", node="forger-0-1-aaaa", seq=1,
                    task=task, **kw,
                    body=dump_body(ApprovalDecision(task_id=task, approval_id="a1", approved=True)))


def test_decode_checks_the_signature_before_anything_else():
    s = Signer(os.urandom(32))
    env = _approval()
    topic, payload = topic_for(env.type, env.task), encode(env)
    got_topic, back = decode(s.sign(topic, payload), MAX, s)
    assert got_topic == topic and back == env

    def reason(frames):
        with pytest.raises(ProtocolError) as err:
            decode(frames, MAX, s)
        return err.value.reason

    assert reason([topic, payload]) == "unsigned"
    assert reason([topic, payload, s.mac(topic, payload), b""]) == "frames"
    assert reason([topic]) == "frames"
    assert reason(Signer(os.urandom(32)).sign(topic, payload)) == "bad_signature"
    assert reason([topic, payload, b""]) == "bad_signature"
    assert reason([b"ApprovalDecision/t2", payload, s.mac(topic, payload)]) == "bad_signature"
    assert reason([topic, b"\xc1", s.mac(topic, payload)]) == "bad_signature"  # not parsed at all
    assert reason(s.sign(topic, b"\xc1")) == "msgpack"                          # signed garbage
    assert reason(s.sign(topic, b"x" * (MAX + 1))) == "oversized"
    # signing off: the two-frame format of before, and a third frame is not accepted either
    assert decode([topic, payload], MAX)[1] == env
    with pytest.raises(ProtocolError, match="frames"):
        decode(s.sign(topic, payload), MAX)


def test_capture_logs_only_validly_signed_messages_as_messages():
    s = Signer(os.urandom(32))
    topic, payload = b"ApprovalDecision/t1", encode(_approval())
    assert classify(s.sign(topic, payload), s) == (MSG, topic, payload)
    kind, _, raw = classify([topic, payload], s)                     # unsigned: evidence, RAW
    assert kind == RAW and msgpack.unpackb(raw) == [topic, payload]
    forged = Signer(os.urandom(32)).sign(topic, payload)
    kind, _, raw = classify(forged, s)
    assert kind == RAW and msgpack.unpackb(raw) == forged
    assert classify([b"\x01ApprovalDecision/"], s)[0] == SUB
    assert classify([topic, payload], None) == (MSG, topic, payload)  # signing off: as before


# ----------------------------------------------------------------------------------------------
# the key file
# ----------------------------------------------------------------------------------------------

def _ensure_in_child(home: str, out) -> None:
    out.put(signing.ensure_key(load_settings(home=home)))


def test_key_is_created_once_0600_in_the_data_dir_even_under_a_race(settings, tmp_path):
    assert settings.bus_key_file == settings.home / "bus.key"
    key = signing.ensure_key(settings)
    assert len(key) == 32 and signing.ensure_key(settings) == key
    assert stat.S_IMODE(settings.bus_key_file.stat().st_mode) == 0o600
    # eight processes racing to create a fresh key all end up with the same one
    home = tmp_path / "race"
    ctx = multiprocessing.get_context("spawn")
    out = ctx.Queue()
    procs = [ctx.Process(target=_ensure_in_child, args=(str(home), out)) for _ in range(8)]
    for p in procs:
        p.start()
    keys = {out.get(timeout=60) for _ in procs}
    for p in procs:
        p.join(30)
    assert len(keys) == 1
    assert sorted(os.listdir(home)) == ["bus.key"]  # no temp files left behind
    assert stat.S_IMODE((home / "bus.key").stat().st_mode) == 0o600


def test_a_key_others_can_read_is_refused(settings):
    signing.ensure_key(settings)
    os.chmod(settings.bus_key_file, 0o644)
    with pytest.raises(signing.BusKeyError, match="chmod 600"):
        signing.ensure_key(settings)
    with pytest.raises(signing.BusKeyError):
        BusClient("user", settings=settings)
    os.chmod(settings.bus_key_file, 0o600)
    settings.bus_key_file.write_bytes(b"short")
    with pytest.raises(signing.BusKeyError, match="5 bytes"):
        signing.ensure_key(settings)


def test_signing_off_needs_no_key(artoo_env):
    s = load_settings(bus_sign=False)
    assert signing.signer_for(s) is None
    assert not s.bus_key_file.exists()


# ----------------------------------------------------------------------------------------------
# the forged-message suite, on a real proxy
# ----------------------------------------------------------------------------------------------

class Receiver:
    """A started BusClient that records every ApprovalDecision (an observer, as the effector
    waiting for one is) and every SubTaskAssign (a work message: acked and de-duplicated)."""

    def __init__(self, bus_clients):
        self.handled: list[tuple[str, str, str]] = []   # (type, id, approval_id or subtask_id)
        self.cond = threading.Condition()

        def seen(env, msg):
            with self.cond:
                key = msg.approval_id if env.type == "ApprovalDecision" else msg.subtask_id
                self.handled.append((env.type, env.id, key))
                self.cond.notify_all()

        def setup(c):
            c.on("ApprovalDecision", seen)
            c.on("SubTaskAssign", seen, ack=True)
        self.client = bus_clients("effector", setup=setup)

    def wait_for(self, key: str, timeout: float = WAIT) -> None:
        with self.cond:
            assert self.cond.wait_for(lambda: any(h[2] == key for h in self.handled), timeout), \
                f"{key} never handled"

    def keys(self) -> list[str]:
        with self.cond:
            return [h[2] for h in self.handled]


def approval_frames(approval_id: str, task: str = "t-forge", **env_fields) -> tuple[bytes, bytes]:
    env = Envelope(type="ApprovalDecision", sender="user", node="raw-0-1-ffff", task=task,
                   body=dump_body(ApprovalDecision(task_id=task, approval_id=approval_id,
                                                   approved=True)), **env_fields)
    return topic_for(env.type, task), encode(env)


def sync(raw: RawPublisher, signer: Signer, receiver: Receiver) -> None:
    """Send valid signed approvals until one is handled: from then on our PUB pipe carries the
    receiver's subscription (PUB/SUB drops whatever is sent before)."""
    for attempt in range(300):
        raw.send(*signer.sign(*approval_frames(f"sync-{attempt}")))
        with receiver.cond:
            if receiver.cond.wait_for(lambda: any(h[2].startswith("sync-")
                                                  for h in receiver.handled), 0.1):
                return
    raise TimeoutError("raw publisher never reached the receiver")


@pytest.fixture(params=["c", "python"])
def wire_path(request, monkeypatch):
    """The suite below runs with the C frame I/O and MAC (protocol/_wire.c) and without."""
    if request.param == "python":
        monkeypatch.setattr(accel, "WIRE", None)
    elif accel.WIRE is None:
        pytest.skip("protocol/_wire.c not built")
    return request.param


def test_forged_frames_are_never_acted_on_and_are_counted(wire_path, bus_process, settings,
                                                          bus_clients):
    receiver = Receiver(bus_clients)
    client = receiver.client
    right = signing.signer_for(settings)
    wrong = Signer(os.urandom(32))
    raw = RawPublisher(settings, sign=False)  # sends exactly the frames given
    try:
        sync(raw, right, receiver)
        before = Counter(client.rejected)
        dup_before = client.duplicates
        # Everything goes down one pipe, so the closing marker proves all of it was processed.
        # (a) unsigned
        raw.send(*approval_frames("unsigned-1"))
        raw.send(*approval_frames("unsigned-2"))
        # (b) signed with a wrong key
        raw.send(*wrong.sign(*approval_frames("wrong-key")))
        # (c) a valid frame, then replayed three times; likewise a work message
        valid = right.sign(*approval_frames("valid-1"))
        for _ in range(4):
            raw.send(*valid)
        assign = Envelope(type="SubTaskAssign", body=build(SubTaskAssign).model_dump(),
                          sender="planner", node="raw-0-1-ffff", seq=1, task="t-forge",
                          to="effector")
        work = right.sign(topic_for("SubTaskAssign", "t-forge"), encode(assign))
        for _ in range(3):
            raw.send(*work)
        # (d) oversized, validly signed
        topic, payload = approval_frames("big", trace="x" * (settings.max_frame_bytes + 10))
        raw.send(*right.sign(topic, payload))
        # (e) tampered: body changed under the original MAC; topic changed under it
        topic, payload = approval_frames("tamper")
        mac = right.mac(topic, payload)
        tampered = payload.replace(b"tamper", b"tamp3r")
        assert tampered != payload
        raw.send(topic, tampered, mac)
        raw.send(b"ApprovalDecision/t-other", payload, mac)
        raw.send(topic, payload, mac[:16])                          # truncated MAC
        raw.send(topic, payload, mac, b"extra")                     # frames
        # (f) stale: validly signed, but older than the replay window
        old = time.time() - settings.bus_max_age_s - settings.ack_give_up_s - 3600
        raw.send(*right.sign(*approval_frames("stale", ts=old)))
        # the marker: valid, after everything else on the same pipe
        raw.send(*right.sign(*approval_frames("end")))
        receiver.wait_for("end")
    finally:
        raw.close()

    keys = receiver.keys()
    forged = {"unsigned-1", "unsigned-2", "wrong-key", "big", "tamper", "stale"}
    assert not forged & set(keys), f"forged messages handled: {forged & set(keys)}"
    assert keys.count("valid-1") == 1                     # replays are not acted on again
    assert [h for h in receiver.handled if h[0] == "SubTaskAssign"] == [
        ("SubTaskAssign", assign.id, assign.body["subtask_id"])]
    assert client.duplicates - dup_before >= 3            # three byte-identical approvals
    got = Counter(client.rejected) - before
    assert got == Counter({"unsigned": 2, "bad_signature": 4, "oversized": 1, "frames": 1,
                           "stale": 1}), got
    assert client.stats()["signed"] is True


def test_a_client_with_another_key_or_unsigned_is_not_heard(wire_path, bus_process, settings,
                                                            bus_clients, tmp_path):
    receiver = Receiver(bus_clients)
    other_key = load_settings(bus_key_file_override=str(tmp_path / "other.key"))
    unsigned = load_settings(bus_sign=False)
    # Both start: a client's own handshake loops its own (self-signed) probe back to it.
    rogue = BusClient("user", settings=other_key, heartbeat=False).start()
    plain = BusClient("user", settings=unsigned, heartbeat=False).start()
    try:
        for i in range(3):
            rogue.publish(ApprovalDecision(task_id="t", approval_id=f"rogue-{i}", approved=True))
            plain.publish(ApprovalDecision(task_id="t", approval_id=f"plain-{i}", approved=True))
        deadline = time.monotonic() + WAIT
        while (receiver.client.rejected["bad_signature"] < 3
               or receiver.client.rejected["unsigned"] < 3):
            assert time.monotonic() < deadline, dict(receiver.client.rejected)
            threading.Event().wait(0.02)
        # a legitimate client is heard, after all of that
        bus_clients("user").publish(ApprovalDecision(task_id="t", approval_id="legit",
                                                     approved=True))
        receiver.wait_for("legit")
        assert receiver.keys() == ["legit"]
        assert rogue.stats()["signed"] and not plain.stats()["signed"]
    finally:
        rogue.stop()
        plain.stop()
