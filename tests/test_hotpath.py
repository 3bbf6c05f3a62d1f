"""The bus hot path's shortcuts keep the contract (issue 34): the MAC's per-topic prefix cache is
still HMAC-SHA256 past its bound, and the one replay filter (`Inbound._first_copy`) drops a
byte-identical frame for a plain observer and for a filtered one alike, counting it once; the
caches keyed by a task or a process keep what is live, not the history."""
from __future__ import annotations

import hashlib
import hmac
import os

from protocol.bus import BusClient
from protocol.envelope import LIVE_KEYS, Envelope, dump_body, encode, owner, ranking, topic_for
from protocol.messages import LlmUsage
from protocol.settings import load_settings
from protocol.signing import Signer


def test_topic_prefix_cache_is_hmac_past_its_bound():
    key = os.urandom(32)
    s = Signer(key)
    for i in range(Signer.TOPIC_CACHE + 50):      # the cache is cleared once on the way
        topic = f"LlmUsage/t-{i % (Signer.TOPIC_CACHE + 7)}".encode()
        payload = os.urandom(i % 300)
        expected = hmac.digest(key, len(topic).to_bytes(2, "big") + topic + payload,
                               hashlib.sha256)
        assert s.mac(topic, payload) == expected
        assert s.verify(topic, payload, expected)
        assert not s.verify(topic + b"x", payload, expected)


def test_caches_keyed_by_task_or_process_stay_bounded_over_many_tasks(tmp_path, monkeypatch):
    # a long-lived role hears from thousands of tasks and effectors: what each one leaves in a
    # cache must go, or the role's memory grows with its history (docs/RELIABILITY.md, "Soak")
    monkeypatch.setenv("ARTOO_HOME", str(tmp_path / "home"))
    settings = load_settings()
    settings.ensure_dirs()
    client = BusClient("planner", settings=settings, heartbeat=False)   # not started: no socket
    signer = Signer(os.urandom(32))
    tasks = [f"t-{i}" for i in range(4 * LIVE_KEYS)]
    for task in tasks:
        client.publish(LlmUsage(task_id=task, role="planner", tier="BRAIN", model="m"))
        signer.mac(topic_for("TaskSpec", task), b"x")
        topic_for("Ack", node=f"effector-{task}")
        owner(task, 3)
    assert topic_for.cache_info().currsize <= LIVE_KEYS
    assert ranking.cache_info().currsize <= LIVE_KEYS
    assert len(client._topics) <= LIVE_KEYS
    assert len(signer._topics) <= Signer.TOPIC_CACHE <= LIVE_KEYS
    # and what they return is still right past the bound
    assert topic_for("TaskSpec", tasks[0]) == f"TaskSpec/{tasks[0]}".encode()
    assert ranking(tasks[0], 3) == ranking.__wrapped__(tasks[0], 3)


def test_a_replayed_frame_reaches_each_kind_of_handler_once(tmp_path, monkeypatch):
    monkeypatch.setenv("ARTOO_HOME", str(tmp_path / "home"))
    settings = load_settings()
    settings.ensure_dirs()
    client = BusClient("metaval", settings=settings, heartbeat=False)   # not started: no socket
    plain, filtered, every = [], [], []
    client.on("LlmUsage", lambda env, m: plain.append(m.completion_tokens))
    client.on("LlmUsage", lambda env, m: filtered.append(m.completion_tokens),
              when=lambda env, m: True)
    client.on("LlmUsage", lambda env, m: every.append(m.completion_tokens), every_copy=True)
    body = dump_body(LlmUsage(task_id="t1", role="planner", tier="BRAIN", model="m",
                              prompt_tokens=1, completion_tokens=7, latency_ms=1.0))
    env = Envelope(type="LlmUsage", body=body, sender="planner", node="planner-0-1-abcd",
                   seq=1, task="t1", id="m1")
    topic, payload = b"LlmUsage/t1", encode(env)
    frames = client._signer.sign(topic, payload)
    client._on_frames(list(frames))
    client._on_frames(list(frames))               # the replay: byte-identical
    assert plain == [7] and filtered == [7]
    assert every == [7, 7]                        # asked for every copy
    assert client.duplicates == 1                 # one frame seen again, counted once
    assert not client.rejected
