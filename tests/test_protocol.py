"""The protocol: envelope codec, catalogue round trip across processes, partitioning, routes,
settings, and the generated docs table."""
from __future__ import annotations

import hashlib
import os
import threading
from pathlib import Path

import msgpack
import pytest

from catalogue_samples import all_samples
from conftest import REPO, start_process, stop_process
from protocol import routes
from protocol.bus import BusClient
from protocol.envelope import (MAX_TOPIC_BYTES, PROTOCOL_VERSION, Envelope, ProtocolError, decode,
                               encode, owner, parse_body, topic_for)
from protocol.messages import MESSAGE_TYPES, MemoryQuery
from protocol.settings import load_settings

MAX = 1 << 20


def wire(**changes) -> dict:
    env = Envelope(type="TaskCancel", body={"task_id": "t1"}, sender="user", node="user-0-1-ab",
                   seq=3, task="t1")
    raw = env.to_wire()
    raw.update(changes)
    return raw


def frames_of(raw) -> list[bytes]:
    return [b"TaskCancel/t1", msgpack.packb(raw, use_bin_type=True)]


# ----------------------------------------------------------------------------------------------
# envelope codec
# ----------------------------------------------------------------------------------------------

def test_encode_decode_keeps_every_envelope_field():
    env = Envelope(type="SubTaskClaim", body={"task_id": "t", "subtask_id": "s", "offer_id": "o",
                                              "spawner": "n"},
                   sender="spawner", node="spawner-0-9-ff", seq=41, task="t", to="planner",
                   corr="c1", reply_to="r1", trace="tr")
    topic, back = decode([topic_for(env.type, env.task), encode(env)], MAX)
    assert topic == b"SubTaskClaim/t"
    assert back == env
    assert parse_body(back).spawner == "n"


@pytest.mark.parametrize("frames, reason", [
    ([b"TaskCancel/t1"], "frames"),
    ([b"TaskCancel/t1", b"", b""], "frames"),
    ([b"TaskCancel/t1", b"\xc1"], "msgpack"),                                  # never-used byte
    ([b"TaskCancel/t1", b"\x85\xa1"], "msgpack"),                              # truncated map
    ([b"TaskCancel/t1", msgpack.packb(1) + msgpack.packb(2)], "msgpack"),      # trailing data
    ([b"TaskCancel/t1", msgpack.packb([1, 2, 3])], "envelope"),                # not a map
    ([b"TaskCancel/t1", msgpack.packb("text")], "envelope"),
    ([b"TaskCancel/t1", b"x" * (MAX + 1)], "oversized"),
    ([b"T" * (MAX_TOPIC_BYTES + 1), msgpack.packb({})], "oversized"),
])
def test_decode_rejects_bad_frames(frames, reason):
    with pytest.raises(ProtocolError) as err:
        decode(frames, MAX)
    assert err.value.reason == reason


@pytest.mark.parametrize("changes, reason", [
    ({"v": 2}, "version"),
    ({"v": "1"}, "version"),
    ({"v": True}, "version"),
    ({"v": None}, "version"),
    ({"id": 5}, "envelope"),
    ({"type": None}, "envelope"),
    ({"from": b"user"}, "envelope"),
    ({"to": 3}, "envelope"),
    ({"seq": -1}, "envelope"),
    ({"seq": True}, "envelope"),
    ({"seq": 1.5}, "envelope"),
    ({"ts": "now"}, "envelope"),
    ({"body": [1]}, "envelope"),
    ({"type": "NoSuchType"}, "unknown_type"),
])
def test_decode_rejects_bad_envelopes(changes, reason):
    with pytest.raises(ProtocolError) as err:
        decode(frames_of(wire(**changes)), MAX)
    assert err.value.reason == reason


def test_decode_rejects_non_string_map_keys():
    raw = wire()
    raw["body"] = {1: "x"}
    with pytest.raises(ProtocolError) as err:
        decode(frames_of(raw), MAX)
    assert err.value.reason == "msgpack"


def test_schema_errors_name_the_type_and_field():
    _, env = decode(frames_of(wire(body={"task_id": 12})), MAX)
    with pytest.raises(ProtocolError) as err:
        parse_body(env)
    assert err.value.reason == "schema"
    assert "TaskCancel.task_id" in str(err.value)


def test_integer_timestamp_is_accepted_as_float():
    _, env = decode(frames_of(wire(ts=1700000000)), MAX)
    assert env.ts == 1700000000.0 and isinstance(env.ts, float)
    assert env.v == PROTOCOL_VERSION


def test_topics():
    assert topic_for("TaskSpec", "t9") == b"TaskSpec/t9"
    assert topic_for("TaskSpec") == b"TaskSpec/-"
    assert topic_for("Ack", "t9", node="planner-1-2-ab") == b"@planner-1-2-ab/Ack"


# ----------------------------------------------------------------------------------------------
# partitioning
# ----------------------------------------------------------------------------------------------

GOLDEN_3 = [0, 0, 1, 0, 2, 2, 1, 2]


def test_owner_is_stable_and_in_range():
    assert owner("anything", 1) == 0 and owner("anything", 0) == 0
    for n in (2, 3, 5):
        for i in range(200):
            task = f"task-{i}"
            assert 0 <= owner(task, n) < n
    # the same in every process and every run (no per-process hash seed): rendezvous weights
    # from blake2b, so these are fixed values (tests/test_partitions.py: the failover properties)
    assert [owner(f"task-{i}", 3) for i in range(8)] == GOLDEN_3


def test_owner_spreads_tasks_and_exactly_one_instance_owns_each():
    n = 3
    clients = [BusClient("planner", instance=i, instances=n, heartbeat=False) for i in range(n)]
    counts = [0] * n
    for i in range(3000):
        task = f"run-{i:05d}"
        owners = [c.instance for c in clients if c.owns(task)]
        assert owners == [owner(task, n)]
        counts[owners[0]] += 1
    assert min(counts) > 3000 / n * 0.8, counts


# ----------------------------------------------------------------------------------------------
# routes
# ----------------------------------------------------------------------------------------------

@pytest.mark.parametrize("type_name, sender, receiver, expected", [
    ("TaskSpec", "perceiver", "planner", True),
    ("TaskSpec", "perceiver", "ggs", True),
    ("TaskSpec", "planner", "perceiver", False),
    ("FinalResult", "ggs", "user", True),
    ("FinalResult", "planner", "user", False),            # only GGS delivers a FinalResult
    ("Heartbeat", "memory", None, True),                  # broadcast from anyone
    ("LlmUsage", "planner", None, True),
    ("LlmUsage", "ggs", None, False),                     # GGS makes no LLM calls
    ("Hello", "executor", "self", True),
    ("Hello", "executor", "executor", True),
    ("Hello", "executor", "planner", False),
    ("TaskCancel", "user", "planner", True),
    ("TaskCancel", "planner", "executor", False),
    ("NoSuchType", "user", "perceiver", False),
])
def test_allowed(type_name, sender, receiver, expected):
    assert routes.allowed(type_name, sender, receiver) is expected


def test_consumers_and_work_types():
    assert routes.consumers("TaskSpec", "perceiver") == ("planner", "ggs")
    assert routes.consumers("Heartbeat", "planner") == ()
    assert routes.consumers("NoSuchType", "planner") == ()
    assert set(routes.ROUTES) == set(MESSAGE_TYPES)
    assert {"TaskSpec", "SubTaskAssign", "SubTaskOutcome", "FinalResult", "MemoryWrite",
            "ApprovalRequest", "ApprovalDecision"} <= routes.WORK_TYPES
    for type_name in routes.WORK_TYPES:  # every work message has someone to acknowledge it
        senders = {frm for frm, _ in routes.ROUTES[type_name].pairs}
        assert any(routes.consumers(type_name, s) for s in senders), type_name


def test_protocol_doc_is_generated_from_routes():
    doc = (REPO / "docs" / "PROTOCOL.md").read_text()
    assert doc == routes.render_markdown(), \
        "docs/PROTOCOL.md is stale: run `.venv/bin/python -m protocol.routes > docs/PROTOCOL.md`"


# ----------------------------------------------------------------------------------------------
# settings
# ----------------------------------------------------------------------------------------------

def test_settings_env_overrides(artoo_env, monkeypatch):
    monkeypatch.setenv("ARTOO_HWM", "123")
    monkeypatch.setenv("ARTOO_CAPTURE", "off")
    monkeypatch.setenv("ARTOO_HEARTBEAT_INTERVAL_S", "0.5")
    monkeypatch.setenv("ARTOO_BUS_XSUB", "tcp://127.0.0.1:5555")
    s = load_settings()
    assert s.hwm == 123 and s.bus_capture is False and s.heartbeat_interval_s == 0.5
    assert s.endpoint("xsub") == "tcp://127.0.0.1:5555"
    assert s.endpoint("xpub") == f"ipc://{s.run_dir}/xpub.sock"
    assert s.home == Path(artoo_env["ARTOO_HOME"]).resolve()
    assert load_settings(hwm=7).hwm == 7  # explicit overrides win over the environment


def test_settings_reject_bad_values_clearly(artoo_env, monkeypatch):
    monkeypatch.setenv("ARTOO_HWM", "lots")
    with pytest.raises(ValueError, match="ARTOO_HWM"):
        load_settings()


def test_dotenv_in_home_fills_gaps_but_never_overrides(artoo_env, monkeypatch):
    # .env values land in os.environ (children inherit them): keep them out of later tests
    monkeypatch.setattr(os, "environ", os.environ.copy())
    home = Path(artoo_env["ARTOO_HOME"])
    (home / ".env").write_text("# comment\nARTOO_DEDUP_CAPACITY=77\nexport ARTOO_HWM='5'\n")
    monkeypatch.setenv("ARTOO_HWM", "9")
    monkeypatch.delenv("ARTOO_DEDUP_CAPACITY", raising=False)
    s = load_settings()
    assert s.dedup_capacity == 77 and s.hwm == 9


def test_ipc_paths_fit_sun_path(monkeypatch, tmp_path):
    monkeypatch.delenv("ARTOO_RUN_DIR", raising=False)
    short = load_settings(home=tmp_path / "h")
    if len(str(tmp_path / "h" / "run")) <= 80:
        assert short.run_dir == (tmp_path / "h" / "run").resolve()
    deep = tmp_path.joinpath(*["very-long-directory-name"] * 6)
    s = load_settings(home=deep)
    digest = hashlib.sha1(str(deep.resolve()).encode()).hexdigest()[:10]
    assert s.run_dir == Path("/tmp") / f"artoo-{digest}"
    for name in ("xsub", "xpub", "capture", "control"):
        assert len(s.endpoint(name)) - len("ipc://") < 108
    assert load_settings(home=deep, run_dir_override="/tmp/x").run_dir == Path("/tmp/x")


# ----------------------------------------------------------------------------------------------
# every catalogue type across processes
# ----------------------------------------------------------------------------------------------

def test_every_message_type_round_trips_between_processes(bus_process, settings, bus_clients,
                                                          artoo_env):
    samples = all_samples()
    assert set(samples) == set(MESSAGE_TYPES)
    back: dict[str, object] = {}
    all_back = threading.Event()

    def collect(env, msg):
        back[env.type] = msg
        if len(back) == len(samples):
            all_back.set()

    def setup(client):
        for type_name in samples:
            client.on(type_name, collect, task="rt-back")

    client = bus_clients("user", setup)
    probe = start_process([str(REPO / "tests" / "probe_role.py")], log_name="probe")
    try:
        # request/reply retries until the probe answers: it is ready and its subscriptions are live
        _, reply = client.request(MemoryQuery(op="stats"), to="probe", timeout=30)
        assert reply.stats["role"] == "probe"
        for sample in samples.values():
            client.publish(sample, task="rt-out")
        assert all_back.wait(15), f"missing: {sorted(set(samples) - set(back))}"
        for type_name, sample in samples.items():
            assert type(back[type_name]) is MESSAGE_TYPES[type_name]
            assert back[type_name].model_dump() == sample.model_dump(), type_name
        _, reply = client.request(MemoryQuery(op="stats"), to="probe", timeout=10)
        assert reply.stats["rejected"] == {} and reply.stats["handler_errors"] == 0
        assert client.rejected == {}
    finally:
        probe.terminate()
        code = probe.wait(10)
        stop_process(probe)
    assert code == 0, "a role must exit cleanly on SIGTERM"
