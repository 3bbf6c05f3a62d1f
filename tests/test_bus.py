"""The bus on real processes: first messages of new publishers, malformed input, acknowledged work
across a proxy restart, gap counting and de-duplication, no outbox file left by an acked message,
one proxy per data dir, CURVE on tcp."""
from __future__ import annotations

import dataclasses
import gc
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path

import msgpack
import pytest
import zmq

from catalogue_samples import build
from audit_support import wait_until
from conftest import REPO, start_process, stop_process, wait_bus_ready
from protocol import curve
from protocol.bus import BusClient, BusTimeout
from protocol.bus.common import DEFER, ReplyCache, SeenSet
from protocol.bus.outbox import Outbox
from protocol.envelope import Envelope, encode, topic_for
from protocol.messages import (EffectorStarted, MemoryQuery, MemoryResult, PlanningFailed,
                               SubTaskAssign)
from protocol.settings import load_settings
from protocol.signing import signer_for

WAIT = 20.0

PROBE = [str(REPO / "tests" / "probe_role.py")]


def probe_stats(client: BusClient, timeout: float = 15.0) -> dict:
    """Ask the probe role for its live counters (request/reply re-sends until it answers)."""
    _, reply = client.request(MemoryQuery(op="stats"), to="probe", timeout=timeout)
    return reply.stats


@pytest.fixture
def probe(bus_process, artoo_env):
    """The probe role process (tests/probe_role.py) on the fixture's bus; stopped at teardown."""
    procs = []

    def start(**env):
        proc = start_process(PROBE, env, "probe")
        procs.append(proc)
        return proc

    yield start
    for proc in procs:
        stop_process(proc)


def effector_started(subtask_id: str, node: str = "raw-node", seq: int = 1, **body) -> bytes:
    fields = {"task_id": "mal", "subtask_id": subtask_id, "pid": 1, "spawner": "raw"}
    fields.update(body)
    return encode(Envelope(type="EffectorStarted", body=fields, sender="spawner", node=node,
                           seq=seq, task="mal"))


class RawPublisher:
    """A bare PUB socket on the proxy: sends any bytes at all, outside BusClient's checks.
    Two-frame messages are signed with the bus key (so they get past the MAC check to the
    decoder's), unless `sign=False` (tests/test_signing.py sends forgeries)."""

    def __init__(self, settings, sign: bool = True):
        self.signer = signer_for(settings) if sign else None
        self.ctx = zmq.Context()
        self.sock = self.ctx.socket(zmq.PUB)
        self.sock.setsockopt(zmq.SNDHWM, 0)
        self.sock.setsockopt(zmq.LINGER, 2000)
        self.sock.connect(settings.endpoint("xsub"))

    def send(self, *frames: bytes) -> None:
        if self.signer is not None and len(frames) == 2:
            frames = tuple(self.signer.sign(*frames))
        self.sock.send_multipart(list(frames))

    def sync_with_probe(self, client: BusClient) -> int:
        """Re-send a valid message until the probe has handled one: our pipe carries its
        subscription from then on (PUB/SUB drops everything before). Returns handled so far."""
        for attempt in range(200):
            self.send(b"EffectorStarted/mal", effector_started(f"sync-{attempt}", node="sync"))
            stats = probe_stats(client)
            if stats["handled"] > 0:
                return stats["handled"]
        raise TimeoutError("raw publisher never reached the probe")

    def end(self, client: BusClient, node: str, seq: int) -> dict:
        """Send a last message (subtask "end") and return the probe's counters once it has
        handled it: everything sent before has been through the probe."""
        self.send(b"EffectorStarted/mal", effector_started("end", node=node, seq=seq))
        deadline = time.monotonic() + 30
        while (stats := probe_stats(client))["last"] != "end":
            assert time.monotonic() < deadline
        return stats

    def close(self) -> None:
        self.sock.close()
        self.ctx.term()


# ----------------------------------------------------------------------------------------------
# first message of a new publisher
# ----------------------------------------------------------------------------------------------

def test_new_publisher_never_loses_its_first_message(bus_process, settings, bus_clients):
    trials, workers = 1000, 4
    seen: set[str] = set()
    lock = threading.Lock()
    all_seen = threading.Event()

    def collect(env, msg):
        with lock:
            seen.add(msg.subtask_id)
            if len(seen) >= trials:
                all_seen.set()

    bus_clients("planner", lambda c: c.on("EffectorStarted", collect, task="first-message"))
    share = trials // workers
    procs = [start_process([str(REPO / "tests" / "spawn_publisher.py"), str(w * share),
                            str(share)], log_name=f"spawn-{w}") for w in range(workers)]
    try:
        codes = [p.wait(120) for p in procs]
    finally:
        for p in procs:
            stop_process(p)
    assert codes == [0] * workers
    all_seen.wait(10)
    lost = sorted({f"trial-{i}" for i in range(trials)} - seen, key=lambda s: int(s[6:]))
    assert not lost, f"{len(lost)} first messages lost, e.g. {lost[:5]}"


def test_a_directed_handler_needs_no_subscription_of_its_own(bus_process, bus_clients):
    """`on(directed=True)` on a running client: no handshake (nothing is sent), and it sees what
    is published to its node only — not the type's own topic, even where a wildcard on the same
    client brings that copy in."""
    got: list[str] = []
    arrived = threading.Event()
    everything: list[str] = []
    a = bus_clients("executor", lambda c: c.on("*", lambda e, m: everything.append(e.type)))
    sender = bus_clients("planner")
    sent_before = a.sent

    def directed(env, msg):
        got.append(msg.subtask_id)
        arrived.set()

    a.on("EffectorStarted", directed, directed=True)
    assert a.sent == sent_before                 # no Hello: no handshake to wait for

    def started(sid: str) -> EffectorStarted:
        return EffectorStarted(task_id="t-directed", subtask_id=sid, pid=1, spawner="s")

    sender.publish(started("broadcast"))
    sender.publish(started("direct"), node=a.node)
    assert arrived.wait(10)
    wait_until(lambda: everything.count("EffectorStarted") == 2, 10, "both copies at the wildcard")
    assert got == ["direct"]


# ----------------------------------------------------------------------------------------------
# malformed input
# ----------------------------------------------------------------------------------------------

PROBE_MAX_FRAME = 4096


def malformed_frames() -> tuple[list[list[bytes]], Counter]:
    """10,000 malformed messages of assorted kinds and the reason each must be counted under."""
    topic = b"EffectorStarted/mal"
    good = msgpack.unpackb(effector_started("x"))

    def env(**changes):
        raw = dict(good)
        raw.update(changes)
        return msgpack.packb(raw, use_bin_type=True)

    def without(key):
        raw = dict(good)
        del raw[key]
        return msgpack.packb(raw, use_bin_type=True)

    kinds: list[tuple[str, int, list[list[bytes]]]] = [
        ("msgpack", 2000, [[topic, b"\xc1"], [topic, b"\x85\xa1"], [topic, b"\xdf\xff\xff\xff\xff"],
                           [topic, msgpack.packb(1) + b"\x00"], [topic, b"\xa2\xff\xfe"],
                           [topic, b""]]),
        ("envelope", 1000, [[topic, msgpack.packb([1, 2])], [topic, msgpack.packb("text")],
                            [topic, msgpack.packb(None)], [topic, msgpack.packb(3.5)]]),
        ("envelope", 1500, [[topic, env(id=5)], [topic, env(seq=-1)], [topic, env(ts="now")],
                            [topic, env(body=[1])], [topic, env(to=7)], [topic, without("node")],
                            [topic, env(seq=True)]]),
        ("version", 1000, [[topic, env(v=2)], [topic, env(v=None)], [topic, without("v")],
                           [topic, env(v="1")]]),
        ("unknown_type", 1000, [[topic, env(type="NoSuchType")], [topic, env(type="")]]),
        ("frames", 1000, [[topic], [topic, env(), b"mac", b"extra"], [topic, b"", b"", b""]]),
        ("oversized", 500, [[topic, env(body={**good["body"], "pad": "x" * PROBE_MAX_FRAME})]]),
        ("schema", 2000, [[topic, env(body={**good["body"], "pid": "not-a-number"})],
                          [topic, env(body={"subtask_id": "s", "pid": 1, "spawner": "x"})],
                          [topic, env(body={**good["body"], "subtask_id": None})],
                          [topic, env(body={**good["body"], "spawn_ms": [1]})]]),
    ]
    frames, expected = [], Counter()
    for reason, count, variants in kinds:
        for i in range(count):
            frames.append(variants[i % len(variants)])
        expected[reason] += count
    return frames, expected


def test_a_role_process_keeps_its_start_up_heap_out_of_full_collections(probe, bus_clients):
    """run_role freezes what setup built (services/runtime/role.py `settle_heap`): a full
    collection in a live role walks only what it made since, not its ~30k start-up objects."""
    probe()
    stats = probe_stats(bus_clients("planner"))
    assert stats["gc_frozen"] > 20_000, stats
    assert stats["gc_tracked"] < stats["gc_frozen"] // 4, stats


def test_malformed_frames_crash_or_stall_nothing_and_are_all_counted(probe, settings,
                                                                      bus_clients, bus_process):
    frames, expected = malformed_frames()
    assert sum(expected.values()) == 10_000
    role = probe(ARTOO_MAX_FRAME_BYTES=str(PROBE_MAX_FRAME))
    beats: list = []
    beat_seen = threading.Event()

    def on_beat(env, msg):
        beats.append(msg)
        beat_seen.set()

    client = bus_clients("planner", lambda c: c.on("Heartbeat", on_beat, task="probe"))
    raw = RawPublisher(settings)
    try:
        handled = raw.sync_with_probe(client)
        for f in frames:
            raw.send(*f)
        raw.send(b"EffectorStarted/mal", effector_started("end", node="sync"))
        # A frame above the proxy's own limit makes it drop that publisher, nothing more.
        huge = RawPublisher(settings)
        huge.send(b"EffectorStarted/mal", b"\x00" * (settings.proxy_max_frame_bytes + 1))
        huge.close()
        deadline = time.monotonic() + 60
        while (stats := probe_stats(client))["last"] != "end":
            assert time.monotonic() < deadline, f"probe stalled: {stats}"
    finally:
        raw.close()
    assert role.poll() is None and bus_process.poll() is None
    assert Counter(stats["rejected"]) == expected
    assert stats["handled"] > handled  # the valid "end" message went through (late syncs may too)
    assert stats["handler_errors"] == 0
    # The counts are published in the role's heartbeat too.
    deadline = time.monotonic() + 10
    while not beats or sum(beats[-1].rejected.values()) < 10_000:
        assert time.monotonic() < deadline, "no heartbeat with the rejection counts"
        beat_seen.clear()
        beat_seen.wait(1)
    assert Counter(beats[-1].rejected) == expected
    # ... and the role still does its work: an acknowledged message is handled and acked.
    done = threading.Event()
    result = []
    client.send(build(SubTaskAssign), to="probe", on_done=lambda ok: (result.append(ok), done.set()))
    assert done.wait(10) and result == [True]


# ----------------------------------------------------------------------------------------------
# sequence gaps and de-duplication
# ----------------------------------------------------------------------------------------------

def test_gaps_are_counted_and_duplicate_work_is_handled_once(probe, settings, bus_clients,
                                                             artoo_env):
    probe()
    client = bus_clients("planner")
    raw = RawPublisher(settings)
    try:
        raw.sync_with_probe(client)
        for seq in (1, 2, 5, 6, 9):  # 3, 4, 7, 8 never arrive
            raw.send(b"EffectorStarted/mal", effector_started(f"g{seq}", node="gappy", seq=seq))
        assign = Envelope(type="SubTaskAssign", body=build(SubTaskAssign).model_dump(),
                          sender="planner", node="dup-node", seq=1, task="t-dup", to="probe")
        payload = encode(assign)
        for _ in range(3):  # a re-sent work message: same id three times
            raw.send(b"SubTaskAssign/t-dup", payload)
        stats = raw.end(client, node="gappy", seq=10)
    finally:
        raw.close()
    assert stats["gaps"].get("gappy") == 4
    lines = (Path(artoo_env["ARTOO_HOME"]) / "handled.log").read_text().splitlines()
    assert [line.split()[0] for line in lines].count(assign.id) == 1


def test_the_senders_a_receiver_counts_gaps_for_are_bounded(probe, settings, bus_clients):
    """Every subtask's effector is a new sender: a long-lived receiver keeps at most
    2 × SENDERS_CAP senders' last sequence numbers, and still counts a gap after dropping some."""
    from protocol.bus.common import SENDERS_CAP
    probe()
    client = bus_clients("planner")
    raw = RawPublisher(settings)
    try:
        raw.sync_with_probe(client)
        for i in range(2 * SENDERS_CAP + 100):           # short-lived senders, one message each
            raw.send(b"EffectorStarted/mal", effector_started(f"s{i}", node=f"eff-{i}"))
        for seq in (1, 4):                                # 2 and 3 never arrive
            raw.send(b"EffectorStarted/mal", effector_started(f"late{seq}", node="late",
                                                              seq=seq))
        stats = raw.end(client, node="late", seq=5)
    finally:
        raw.close()
    assert SENDERS_CAP < stats["senders"] <= 2 * SENDERS_CAP
    assert stats["gaps"].get("late") == 2


# ----------------------------------------------------------------------------------------------
# acknowledged work across a proxy restart
# ----------------------------------------------------------------------------------------------

def test_acked_work_survives_proxy_restart_exactly_once(settings, artoo_env):
    bus_env = {"ARTOO_CAPTURE": "0"}
    proxy = start_process(["-m", "services.runtime.bus"], bus_env, "bus")
    role = sender = None
    try:
        wait_bus_ready(settings)
        role = start_process(PROBE, log_name="probe")
        sender = BusClient("planner", settings=settings, heartbeat=False).start()
        probe_stats(sender, timeout=30)
        total, acked, lock, first_acked = 300, [], threading.Lock(), threading.Event()
        all_acked = threading.Event()

        def done(ok, sid):
            with lock:
                acked.append((sid, ok))
                if len(acked) >= 50:
                    first_acked.set()
                if len(acked) == total:
                    all_acked.set()

        def send(i):
            msg = build(SubTaskAssign).model_copy(update={"subtask_id": f"s{i:03d}",
                                                          "task_id": f"t{i % 7}"})
            sender.send(msg, to="probe", on_done=lambda ok, sid=msg.subtask_id: done(ok, sid))

        for i in range(150):
            send(i)
        assert first_acked.wait(30)
        proxy.send_signal(signal.SIGKILL)  # mid-stream: part acked, part in flight
        proxy.wait(10)
        for i in range(150, total):
            send(i)  # sent while there is no proxy at all
        proxy = start_process(["-m", "services.runtime.bus"], bus_env, "bus")
        assert all_acked.wait(60), f"only {len(acked)} of {total} acknowledged"
        assert all(ok for _, ok in acked) and sender.stats()["lost"] == 0
        assert sorted(sid for sid, _ in acked) == [f"s{i:03d}" for i in range(total)]
        # this thread's reply socket (opened before the restart) reconnected and subscribed again
        assert probe_stats(sender, timeout=30)["node"].startswith("probe-")
        handled = (Path(artoo_env["ARTOO_HOME"]) / "handled.log").read_text().split("\n")
        subtasks = Counter(line.split()[1] for line in handled if line)
        assert set(subtasks) == {f"s{i:03d}" for i in range(total)}
        twice = {s for s, n in subtasks.items() if n > 1}
        assert not twice, [line for line in handled if line and line.split()[1] in twice][:6]
    finally:
        if sender:
            sender.stop()
        if role:
            stop_process(role)
        stop_process(proxy)


def test_a_first_request_without_a_proxy_fails_in_its_time_and_the_next_proves_again(
        settings, artoo_env):
    """A thread's first request while the proxy is down: its reply address cannot be proven,
    so the request fails with BusTimeout (within its own time-out, not the handshake's)
    and keeps no unproven channel; once a proxy is back, the thread's next request proves a
    fresh one and is answered."""
    bus_env = {"ARTOO_CAPTURE": "0"}
    proxy = start_process(["-m", "services.runtime.bus"], bus_env, "bus")
    clients = []
    try:
        wait_bus_ready(settings)
        replier = BusClient("memory", settings=settings, heartbeat=False)
        replier.on("MemoryQuery", lambda env, msg: MemoryResult(op=msg.op), request=True)
        clients.append(replier.start())
        # a handshake time-out far past the test's wait: only the request's own bounds the probe
        asker = BusClient("planner", settings=dataclasses.replace(settings, ready_timeout_s=600.0),
                          heartbeat=False).start()
        clients.append(asker)
        proxy.send_signal(signal.SIGKILL)
        proxy.wait(10)
        failed, back, got = threading.Event(), threading.Event(), []

        def ask() -> None:           # one thread: a first request that fails, then the next
            try:
                asker.request(MemoryQuery(op="stats"), to="memory", timeout=1.0)
            except BusTimeout:
                failed.set()
            back.wait(60)
            got.append(asker.request(MemoryQuery(op="stats"), to="memory", timeout=30)[1].op)

        thread = threading.Thread(target=ask, daemon=True)
        thread.start()
        assert failed.wait(60), "the first request neither failed nor returned"
        assert asker._channels._by_thread == {}
        proxy = start_process(["-m", "services.runtime.bus"], bus_env, "bus")
        wait_bus_ready(settings)
        back.set()
        thread.join(60)
        assert got == ["stats"] and len(asker._channels._by_thread) == 1
    finally:
        for client in clients:
            client.stop()
        stop_process(proxy)


# ----------------------------------------------------------------------------------------------
# one proxy per data dir
# ----------------------------------------------------------------------------------------------

def test_second_proxy_refuses_and_first_keeps_serving(bus_process, settings, artoo_env):
    second = subprocess.run([sys.executable, "-m", "services.runtime.bus"], cwd=REPO, timeout=30,
                            env={**os.environ, "ARTOO_CAPTURE": "0"}, capture_output=True,
                            text=True)
    assert second.returncode == 1
    assert "another bus proxy" in second.stdout + second.stderr
    wait_bus_ready(settings, timeout=5)
    assert bus_process.poll() is None
    # ipc endpoints are protected by the file system: a private run dir, owner-only sockets
    assert settings.run_dir.stat().st_mode & 0o777 == 0o700
    for name in ("xsub", "xpub", "control"):
        assert (settings.run_dir / f"{name}.sock").stat().st_mode & 0o777 == 0o600


# ----------------------------------------------------------------------------------------------
# CURVE on tcp
# ----------------------------------------------------------------------------------------------

def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_tcp_endpoints_require_an_allowed_curve_key(artoo_env, monkeypatch, tmp_path):
    for name in ("XSUB", "XPUB", "CONTROL"):
        monkeypatch.setenv(f"ARTOO_BUS_{name}", f"tcp://127.0.0.1:{free_port()}")
    monkeypatch.setenv("ARTOO_CURVE_DIR", str(tmp_path / "curve"))
    settings = load_settings()
    settings.ensure_dirs()
    curve.ensure_keys(settings)  # what `artoo up` does for a tcp configuration
    proxy = start_process(["-m", "services.runtime.bus"], {"ARTOO_CAPTURE": "0"}, "bus")
    clients = []
    try:
        wait_bus_ready(settings)
        got = threading.Event()
        listener = BusClient("metaval", settings=settings, heartbeat=False)
        listener.on("EffectorStarted", lambda env, msg: got.set())
        listener.on("MemoryQuery", lambda env, msg: MemoryResult(op=msg.op), request=True)
        clients.append(listener.start())
        talker = BusClient("spawner", settings=settings, heartbeat=False).start()
        clients.append(talker)
        talker.publish(build(EffectorStarted))
        assert got.wait(10), "an allowed client's message did not arrive"
        # a request's reply comes back on the asking thread's own socket, under CURVE too
        assert talker.request(MemoryQuery(op="stats"), to="metaval", timeout=10)[1].op == "stats"
        from services.runtime.bus import query_control
        assert query_control(settings)["ok"] is True

        # A stranger who even knows the server's public key is refused at the ZAP allow-list.
        rogue_dir = tmp_path / "rogue"
        rogue_dir.mkdir()
        (rogue_dir / "server.key").write_bytes((settings.curve_dir / "server.key").read_bytes())
        zmq.auth.create_certificates(rogue_dir, "client")
        rogue = BusClient("user", settings=load_settings(curve_dir_override=str(rogue_dir)),
                          heartbeat=False)
        with pytest.raises(BusTimeout):
            rogue.start(timeout=1)
        # ... and so is a client without CURVE at all.
        ctx = zmq.Context()
        plain = ctx.socket(zmq.SUB)
        plain.setsockopt(zmq.SUBSCRIBE, b"")
        plain.connect(settings.endpoint("xpub"))
        assert plain.poll(1500) == 0  # heartbeats flow on the bus, none reach it
        plain.close(0)
        ctx.term()
        assert proxy.poll() is None
    finally:
        for c in clients:
            c.stop()
        stop_process(proxy)


def test_a_tcp_capture_endpoint_admits_only_allowed_keys(artoo_env, monkeypatch, tmp_path):
    # The audit feed on tcp (a tap on another host): before issue 18 a CURVE server with no ZAP
    # handler admitted any key. Now the tap's key gets the feed, a stranger's is refused, counted.
    from auditor.log import iter_records
    from services.runtime.bus import query_control
    from services.runtime.capture import FROM, POS
    monkeypatch.setenv("ARTOO_BUS_CAPTURE", f"tcp://127.0.0.1:{free_port()}")
    monkeypatch.setenv("ARTOO_CURVE_DIR", str(tmp_path / "curve"))
    settings = load_settings()
    settings.ensure_dirs()
    curve.ensure_keys(settings)
    proxy = start_process(["-m", "services.runtime.bus"], {}, "bus")
    tap = start_process(["-m", "auditor.tap"], {}, "tap")
    ctx = zmq.Context()
    try:
        wait_bus_ready(settings)
        talker = BusClient("spawner", settings=settings, heartbeat=False).start()
        talker.publish(build(EffectorStarted))
        talker.stop()
        wait_until(lambda: any(r.topic.startswith(b"EffectorStarted") for r in
                               iter_records(settings.audit_dir / "log")), 20,
                   "the message in the audit log, fed over tcp")
        rogue_dir = tmp_path / "rogue"
        rogue_dir.mkdir()
        public, secret = zmq.auth.load_certificate(
            zmq.auth.create_certificates(rogue_dir, "client")[1])
        rogue = ctx.socket(zmq.DEALER)
        rogue.curve_publickey, rogue.curve_secretkey = public, secret
        rogue.curve_serverkey = zmq.auth.load_certificate(settings.curve_dir / "server.key")[0]
        rogue.connect(settings.endpoint("capture"))
        rogue.send_multipart([FROM, POS.pack(0, 0)])
        assert rogue.poll(1500) == 0          # nothing of the audit feed reaches it
        rogue.close(0)
        stats = wait_until(lambda: (lambda c: c if c["refused"] >= 1 else None)(
            query_control(settings)["stats"]["curve"]), 10, "the refusal counted")
        assert stats["authorized"] == ["client"] and stats["admitted"] >= 1
    finally:
        ctx.destroy(linger=0)
        stop_process(tap)
        stop_process(proxy)


def test_tcp_without_keys_fails_clearly(artoo_env, monkeypatch, tmp_path):
    monkeypatch.setenv("ARTOO_BUS_XSUB", f"tcp://127.0.0.1:{free_port()}")
    monkeypatch.setenv("ARTOO_CURVE_DIR", str(tmp_path / "none"))
    client = BusClient("user", settings=load_settings(), heartbeat=False)
    with pytest.raises(BusTimeout, match="CURVE keys"):
        client.start(timeout=2)


# ----------------------------------------------------------------------------------------------
# request/reply
# ----------------------------------------------------------------------------------------------

def test_slow_request_is_answered_once_despite_resends(bus_process, bus_clients):
    release, calls, replies = threading.Event(), [], []

    def answer(env, msg):
        calls.append(env.id)
        release.wait(30)
        return MemoryResult(op=msg.op, stats={"calls": len(calls)})

    replier = bus_clients("memory",
                          lambda c: c.on("MemoryQuery", answer, request=True, threaded=True))
    asker = bus_clients("planner")
    thread = threading.Thread(target=lambda: replies.append(
        asker.request(MemoryQuery(op="stats"), to="memory", timeout=30)))
    thread.start()
    deadline = time.monotonic() + 20
    while replier.received < 3:  # the asker re-sent its request at least twice meanwhile
        assert time.monotonic() < deadline, replier.stats()
        time.sleep(0.05)
    release.set()
    thread.join(30)
    assert len(calls) == 1 and replies and replies[0][1].stats == {"calls": 1}


@pytest.mark.parametrize("keep_s, handled", [(60.0, 1), (0.0, 2)])
def test_a_re_sent_request_is_answered_from_the_reply_cache_only_while_it_is_kept(
        bus_process, settings, bus_clients, keep_s, handled):
    """A copy of a request re-sent within `reply_keep_s` gets the reply already sent, without
    the handler; past it (0 here: kept for no time) the replier holds nothing and handles it
    again, so a replier of large results does not keep thousands of them."""
    calls = []
    replier = bus_clients("memory", lambda c: c.on(
        "MemoryQuery", lambda env, msg: calls.append(env.id) or MemoryResult(op=msg.op),
        request=True), settings=dataclasses.replace(settings, reply_keep_s=keep_s))
    asker = bus_clients("planner")
    channel, mid = asker._channels.mine(WAIT), asker.new_id()
    sent = replier.sent
    for copy in (1, 2):                         # as request() re-sends: the same id
        asker.publish(MemoryQuery(op="stats"), to="memory", reply_to=channel.name, msg_id=mid)
        assert channel.wait_reply(mid, 10)[1].op == "stats"    # each copy is answered
    # the replier counts a send after it returns: the asker can hold the answer a moment before
    wait_until(lambda: replier.sent >= sent + 2, 10, "both replies counted")
    assert len(calls) == handled and replier.sent == sent + 2
    assert len(replier._replies) == (1 if keep_s else 0)


def test_each_requesting_thread_gets_its_replies_at_its_own_address(bus_process, bus_clients):
    """Replies go to the requesting thread's own reply address and socket (bus/replies.py), not
    through the loop thread: threads asking at once each get their own answers in order, each
    on an address of its own, and the loop thread takes none of them."""
    bus_clients("memory", lambda c: c.on(
        "MemoryQuery", lambda env, msg: MemoryResult(op=msg.op, stats={"n": msg.n}),
        request=True, threaded=True))
    asker = bus_clients("planner")
    by_loop = asker.received
    got: dict[int, list] = {}

    def ask(k: int) -> None:
        got[k] = [asker.request(MemoryQuery(op="stats", n=100 * k + i), to="memory",
                                timeout=WAIT)[1].stats["n"] for i in range(20)]

    threads = [threading.Thread(target=ask, args=(k,)) for k in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert got == {k: [100 * k + i for i in range(20)] for k in range(4)}
    names = {channel.name for channel in asker._channels._by_thread.values()}
    assert len(names) == 4 and all(name.startswith(f"{asker.node}~") for name in names)
    assert asker.received == by_loop
    assert asker.stats()["received"] >= by_loop + 80      # the channels' frames still count


def test_a_reply_address_drops_what_is_not_its_answer(bus_process, bus_clients):
    """Ahead of the answer, on the same connection (so in that order), the replier sends the
    requester's address a frame that is not an envelope and a well-formed reply to another
    request: the first is counted as rejected, the second dropped, the answer returned."""
    def answer(env, msg):
        replier._send_frames([topic_for("MemoryResult", node=env.reply_to), b"\xc1 no"])
        replier.publish(MemoryResult(op="stale"), node=env.reply_to, corr="an-earlier-request")
        return MemoryResult(op=msg.op)

    replier = bus_clients("memory", lambda c: c.on("MemoryQuery", answer, request=True))
    asker = bus_clients("planner")
    rejected = sum(asker.rejected.values())
    env, reply = asker.request(MemoryQuery(op="stats"), to="memory", timeout=WAIT)
    assert reply.op == "stats" and env.sender == "memory"
    assert sum(asker.rejected.values()) == rejected + 1


def test_stop_ends_a_request_waiting_for_its_reply(bus_process, bus_clients):
    """Nobody answers; stop() from another thread ends the wait (60 s otherwise) with
    BusTimeout, the loop closes the reply socket and terminates, and a later request fails."""
    asker = bus_clients("planner")
    errors: list[BaseException] = []

    def ask() -> None:
        try:
            asker.request(MemoryQuery(op="stats"), to="memory", timeout=60)
        except BusTimeout as exc:
            errors.append(exc)

    thread = threading.Thread(target=ask)
    thread.start()
    wait_until(lambda: any(ch.lock.locked() for ch in asker._channels._by_thread.values()),
               WAIT, "the request waiting on its channel")
    asker.stop()
    thread.join(20)
    assert not thread.is_alive() and len(errors) == 1 and "stopped" in str(errors[0])
    assert asker.wait_stopped(10) and asker._channels.closed
    with pytest.raises(BusTimeout):
        asker.request(MemoryQuery(op="stats"), to="memory", timeout=1)


def test_the_reply_sockets_of_ended_threads_are_closed(bus_process, bus_clients):
    """17 threads ask and stay alive, then end; the next new asker's channel is the only one
    left open: a client serving requests from short-lived threads keeps a socket per live one."""
    bus_clients("memory", lambda c: c.on(
        "MemoryQuery", lambda env, msg: MemoryResult(op=msg.op), request=True))
    asker = bus_clients("planner")
    release = threading.Event()

    def ask_and_stay() -> None:
        asker.request(MemoryQuery(op="stats"), to="memory", timeout=WAIT)
        release.wait(60)

    threads = [threading.Thread(target=ask_and_stay) for _ in range(17)]
    for thread in threads:
        thread.start()
    wait_until(lambda: len(asker._channels._by_thread) == 17, WAIT, "17 channels")
    earlier = list(asker._channels._by_thread.values())
    release.set()
    for thread in threads:
        thread.join(30)
    counted = asker.stats()["received"]
    asker.request(MemoryQuery(op="stats"), to="memory", timeout=WAIT)   # this thread's first
    assert len(asker._channels._by_thread) == 1
    assert all(channel.closed and channel.sock.closed for channel in earlier)
    assert asker.stats()["received"] > counted     # the closed channels' frames still count


def test_the_reply_cache_forgets_by_age_and_by_count():
    cache = ReplyCache(keep_s=30.0, cap=3)
    cache.put("a", [b"A"], now=0.0)
    cache.put("b", [b"B"], now=10.0)
    assert cache.get("a", now=29.0) == [b"A"] and cache.get("a", now=30.0) is None
    cache.put("c", [b"C"], now=31.0)          # a put drops what has outlived its time
    assert len(cache) == 2 and cache.get("b", now=31.0) == [b"B"]
    for key in "def":
        cache.put(key, [key.encode()], now=32.0)
    assert len(cache) == 3 and cache.get("b", now=32.0) is None     # the count bound


def test_a_seen_set_keeps_keys_for_its_count_and_with_an_age_for_that_long():
    counted = SeenSet(4)
    for key in range(9):
        counted.add(key)
    assert all(k in counted for k in range(4, 9)) and 0 not in counted   # the last 4 at least
    aged = SeenSet(1000, max_age_s=60.0)
    aged.add("first")
    aged._born -= 59.0                       # 59 s on: still the young generation
    aged.add("second")
    assert "first" in aged and "second" in aged and len(aged.old) == 0
    aged._born -= 2.0                        # past 60 s: the next key starts a new generation
    aged.add("third")
    assert {"first", "second", "third"} <= aged.young | aged.old and len(aged.young) == 0
    aged._born -= 61.0
    aged.add("fourth")                       # over 60 s later, the keys before it are gone
    assert "first" not in aged and "third" not in aged and "fourth" in aged


def test_resends_survive_senders_on_other_threads(bus_process, settings, bus_clients):
    """Work sent from other threads lands in the pending table while the loop walks it to re-send;
    the loop must keep running, and every message is acked once a consumer appears."""
    acked: list[bool] = []
    lock = threading.Lock()
    # re-sends fall due at once, so the loop walks the table all the while the threads insert
    sender = BusClient("planner", settings=dataclasses.replace(settings, ack_initial_s=0.001,
                                                                ack_max_backoff_s=0.05),
                       heartbeat=False).start()
    per_thread, threads = 1500, 4

    def burst(t: int) -> None:
        for i in range(per_thread):
            sender.send(EffectorStarted(task_id="race", subtask_id=f"race-{t}-{i}", pid=1,
                                        spawner="s"), task="race",
                        consumers=("auditor",),
                        on_done=lambda ok: (lock.acquire(), acked.append(ok), lock.release()))

    # The loop copies the table in one C call; only a garbage collection inside it (a callback,
    # a finalizer) lets another thread run there. Collect often, and yield in every collection.
    yield_in_gc = lambda phase, info: time.sleep(0)  # noqa: E731
    threshold = gc.get_threshold()
    try:
        gc.callbacks.append(yield_in_gc)
        gc.set_threshold(2)
        try:
            workers = [threading.Thread(target=burst, args=(t,)) for t in range(threads)]
            for w in workers:
                w.start()
            for w in workers:
                w.join(60)
        finally:
            gc.callbacks.remove(yield_in_gc)
            gc.set_threshold(*threshold)
        assert sender.stats()["unacked"] == per_thread * threads
        bus_clients("auditor", lambda c: c.on("EffectorStarted", lambda env, msg: None, ack=True,
                                              task="race"))
        wait_until(lambda: len(acked) == per_thread * threads, 60,
                   what=f"acks ({len(acked)} of {per_thread * threads}; stats {sender.stats()})")
        assert all(acked) and not sender._stopped.is_set()
    finally:
        sender.stop()


def test_an_idle_loop_sleeps_until_it_has_work_and_still_re_sends_on_time(
        bus_process, settings, bus_clients, monkeypatch):
    """The loop sleeps until its next deadline (no 50 ms polling: an idle daemon's CPU). A work
    message sent from another thread while it sleeps must wake it, or its re-send would wait
    out the sleep: here the idle wait is a minute, and the consumer ignores the first copy."""
    from protocol.bus import client as client_mod
    monkeypatch.setattr(client_mod, "IDLE_WAIT_MS", 60_000.0)
    seen: list[str] = []
    bus_clients("ggs", setup=lambda c: c.on(
        "PlanningFailed", lambda env, msg: (seen.append(env.id),
                                            DEFER if len(seen) == 1 else None)[1], ack=True))
    sender = BusClient("planner", settings=dataclasses.replace(settings, ack_initial_s=0.2),
                       heartbeat=False).start()
    try:
        assert client_mod.BusClient._run_timers(sender, time.monotonic()) == 60_000
        acked = threading.Event()
        msg_id = sender.send(PlanningFailed(task_id="t-idle", error="x"),
                             on_done=lambda ok: acked.set())
        assert acked.wait(20), f"not re-sent while the loop slept (copies seen: {len(seen)})"
        assert seen == [msg_id, msg_id]
    finally:
        sender.stop()


def test_work_acked_before_its_outbox_file_is_written_leaves_no_file(bus_process, bus_clients,
                                                                      tmp_path, monkeypatch):
    """A handler thread sends and writes the outbox file; the loop thread takes the acks and
    removes the file at the last one. When every ack comes first, that removal finds no file:
    the file written after it must go too, or a restarted sender re-sends a message its
    consumers finished with (a TaskSpec of an ended run would be planned and run again)."""
    acked = threading.Event()
    write = Outbox.put

    def put_after_the_ack(self, msg_id, *args):    # this interleaving, every time
        assert acked.wait(15), "the consumer never acknowledged"
        write(self, msg_id, *args)

    monkeypatch.setattr(Outbox, "put", put_after_the_ack)
    handled: list[str] = []
    bus_clients("ggs", setup=lambda c: c.on("PlanningFailed",
                                            lambda env, msg: handled.append(env.id), ack=True))
    outbox = tmp_path / "outbox"
    sender = bus_clients("planner", outbox=outbox)
    msg_id = sender.send(PlanningFailed(task_id="t-outbox", error="x"),
                         on_done=lambda ok: acked.set())
    assert acked.is_set() and handled == [msg_id]
    assert not list(outbox.iterdir()), "an acknowledged message was left in the outbox"


def test_a_restarted_sender_re_sends_only_what_its_predecessor_left(bus_process, settings,
                                                                  bus_clients, tmp_path):
    """A role's resume sends before its client starts (the planner's re-sent round); those are
    this process's own and already pending. Start re-sends only the entries a predecessor left —
    read before anything of its own is written; reading them after, the planner found one of its
    own files gone (its ack had come) and died with "could not join the bus"."""
    outbox = tmp_path / "outbox"
    gone = BusClient("planner", settings=settings, heartbeat=False, outbox=outbox).start()
    left_id = gone.send(PlanningFailed(task_id="t-left", error="x"))   # nobody acks it yet
    wait_until(lambda: len(list(outbox.iterdir())) == 1, 10, "the predecessor's outbox entry")
    gone.stop()
    handled: list[str] = []
    bus_clients("ggs", setup=lambda c: c.on("PlanningFailed",
                                            lambda env, msg: handled.append(env.id), ack=True))
    heir = BusClient("planner", settings=settings, heartbeat=False, outbox=outbox)
    done = threading.Event()
    own_id = heir.send(PlanningFailed(task_id="t-own", error="y"), on_done=lambda ok: done.set())
    heir.start()
    try:
        assert done.wait(WAIT)
        wait_until(lambda: left_id in handled, WAIT, "the predecessor's message re-sent")
        assert sorted(handled) == sorted([left_id, own_id])
        wait_until(lambda: not list(outbox.iterdir()), WAIT, "the outbox emptied by the acks")
    finally:
        heir.stop()


def test_an_outbox_entry_acked_while_it_is_read_is_skipped(tmp_path, monkeypatch):
    """Pure logic: a file that goes between the listing and the read (its ack came) is skipped,
    the others are loaded."""
    box = Outbox(tmp_path / "ob")
    box.put("a", b"topic", b"pa", {"ggs"})
    box.put("b", b"topic", b"pb", {"ggs"})
    read = Path.read_bytes

    def vanishing(self):
        if self.name == "a":
            self.unlink()
        return read(self)
    monkeypatch.setattr(Path, "read_bytes", vanishing)
    assert [payload for _, payload, _, _ in box.load()] == [b"pb"]


