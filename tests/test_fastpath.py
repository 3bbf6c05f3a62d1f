"""The codec's C fast path (issue 34): msgspec Structs derived from the pydantic catalogue accept
exactly what the reference decoder + pydantic accept, give handlers the same models, and a new
catalogue type gets the fast path without any code of its own."""
from __future__ import annotations

from typing import Any, Literal, Optional

import msgpack
import numpy as np
import pytest
from pydantic import Field, field_validator

from catalogue_samples import all_samples
from protocol import fastpath, signing
from protocol.envelope import (Envelope, ProtocolError, _decode_slow, decode, encode, pack,
                               parse_body, topic_for)
from protocol.messages import MESSAGE_TYPES, Body, RunOptions
from protocol.signing import Signer

MAX = 1 << 20


def frames(type_name: str, body: dict, signer: Signer | None = None) -> list[bytes]:
    env = Envelope(type=type_name, body=body, sender="user", node="user-0-1-ab", seq=1, task="t1")
    topic, payload = topic_for(type_name, "t1"), encode(env)
    return [topic, payload] + ([signer.mac(topic, payload)] if signer else [])


def reference(frames_: list[bytes]) -> Body:
    """What the decoder did before the fast path: hand checks, then pydantic."""
    _, env = _decode_slow(frames_[:2], MAX)
    return MESSAGE_TYPES[env.type].model_validate(env.body)


def test_most_of_the_catalogue_has_the_fast_path_and_every_type_is_accounted_for():
    fast, slow = fastpath.fast_types()
    assert set(fast) | set(slow) == set(MESSAGE_TYPES) and not set(fast) & set(slow)
    assert {"LlmUsage", "Ack", "Hello", "TaskSpec", "MemoryQuery", "UserRequest"} <= set(fast)
    assert "FinalResult" in slow          # a model validator: pydantic runs it


@pytest.mark.parametrize("signed", [False, True])
def test_every_sample_decodes_to_the_model_pydantic_builds(signed):
    signer = signing.new_signer(b"k" * 32) if signed else None   # the one the bus uses
    for type_name, sample in all_samples().items():
        f = frames(type_name, sample.model_dump(), signer)
        _, env = decode(f, MAX, signer)
        got = parse_body(env)
        want = reference(f)
        assert type(got) is type(want) is MESSAGE_TYPES[type_name]
        assert got.model_dump() == want.model_dump() == sample.model_dump(), type_name
        assert got == want, type_name
        assert env.body == sample.model_dump()      # the plain map, built when asked for
        if type_name in fastpath.fast_types()[0]:
            assert env._parsed is not None, type_name


def test_defaults_and_nested_models_match_pydantic():
    f = frames("UserRequest", {"task_id": "r1", "text": "hi"})
    got = parse_body(decode(f, MAX)[1])
    assert got == reference(f)
    assert isinstance(got.options, RunOptions) and got.options.yes is False
    got.options.yes = True                # a fresh default per message, never shared
    again = parse_body(decode(f, MAX)[1])
    assert again.options.yes is False and again.history == []
    f = frames("TaskSpec", {"task_id": "t", "intent": "x", "intent_slug": "x", "raw_input": "x",
                            "referents": [
        {"text": "a.txt", "kind": "file"}], "constraints": {"other": ["c"]}})
    got = parse_body(decode(f, MAX)[1])
    assert got == reference(f)
    assert type(got.referents[0]).__name__ == "Referent" and got.constraints.other == ["c"]


@pytest.mark.parametrize("body", [
    {"role": "r", "tier": "T", "prompt_tokens": 3.0},      # pydantic's lax int: 3.0 -> 3
    {"role": "r", "tier": "T", "ok": 1},                   # lax bool
    {"role": "r", "tier": "T", "latency_ms": True},        # bool where a float is expected
    {"role": "r", "tier": "T", "prompt_tokens": "12"},     # numeric string
])
def test_what_msgspec_refuses_pydantic_still_decides(body):
    f = frames("LlmUsage", body)
    _, env = decode(f, MAX)
    try:
        want = reference(f)
    except Exception:  # noqa: BLE001 - pydantic refuses: so must we, as a schema error
        with pytest.raises(ProtocolError) as err:
            parse_body(env)
        assert err.value.reason == "schema"
        return
    assert parse_body(env) == want


@pytest.mark.parametrize("body, reason", [
    ({"role": "r", "tier": 5}, "schema"),
    ({"tier": "T"}, "schema"),                              # a required field missing
    ({"role": "r", "tier": "T", "prompt_tokens": 1.5}, "schema"),
    ({"role": "r", "tier": "T", "model": None}, "schema"),
])
def test_schema_errors_are_the_same(body, reason):
    _, env = decode(frames("LlmUsage", body), MAX)
    with pytest.raises(ProtocolError) as err:
        parse_body(env)
    assert err.value.reason == reason
    assert "LlmUsage." in str(err.value)


def test_non_string_keys_anywhere_are_refused_as_msgpack():
    for type_name, body in (("Heartbeat", {"role": "r", "node": "n", "pid": 1,
                                           "info": {"x": {1: 2}}}),
                            ("LlmUsage", {"role": "r", "tier": "T", 7: "x"}),
                            ("TaskSpec", {"task_id": "t", "intent": "i",
                                          "constraints": {1: ["c"]}})):
        raw = Envelope(type=type_name, body={}, sender="u", node="n", task="t1").to_wire()
        raw["body"] = body
        with pytest.raises(ProtocolError) as err:
            decode([b"x/t1", msgpack.packb(raw, use_bin_type=True)], MAX)
        assert err.value.reason == "msgpack", type_name


def test_the_wire_is_what_msgpack_writes():
    env = Envelope(type="LlmUsage", body=all_samples()["LlmUsage"].model_dump(), sender="planner",
                   node="n", seq=9, task="t", to="x", corr=None, trace="tr")
    assert encode(env) == msgpack.packb(env.to_wire(), use_bin_type=True)


@pytest.mark.parametrize("value", [
    None, True, 0, -1, 127, 128, -33, 2**16, 2**32, -2**31 - 1, 2**63, -2**63, 1.5, -0.0,
    "", "é" * 40, "x" * 300, "y" * 70_000, b"", b"\x00" * 300, b"z" * 70_000,
    [], (1, "a", None), [list(range(20))], {"topic": b"T/t", "payload": b"\x81", "n": [1, 2.5]},
    {f"k{i}": i for i in range(40)}, {"nested": {"deep": [{"a": b"b"}, ()]}},
    [np.float64(0.25), {"k": np.float64(-3.5)}],
])
def test_stored_records_are_the_bytes_msgpack_writes(value):
    # LMDB records, outbox files and audit notes written by `pack` read back as before, by anyone
    assert pack(value) == msgpack.packb(value, use_bin_type=True)
    assert msgpack.unpackb(pack(value), raw=False) == msgpack.unpackb(
        msgpack.packb(value, use_bin_type=True), raw=False)


def test_a_new_catalogue_type_gets_the_fast_path_with_no_code_of_its_own():
    class Probe(Body):
        name: str
        count: int = 0
        tags: list[str] = Field(default_factory=list)
        opts: RunOptions = Field(default_factory=RunOptions)
        mode: Literal["a", "b"] = "a"
        maybe: Optional[float] = None

    class Loose(Body):
        anything: Any = None

    class Checked(Body):
        name: str

        @field_validator("name")
        @classmethod
        def _upper(cls, v: str) -> str:
            return v.upper()

    mirror = fastpath.mirror_of(Probe)
    assert mirror is not None
    body = {"name": "p", "count": 2, "tags": ["x"], "opts": {"yes": True}, "mode": "b",
            "maybe": 1}
    got = mirror.convert(msgpack_decode(mirror.struct, body))
    assert got == Probe.model_validate(body) and isinstance(got.opts, RunOptions)
    assert fastpath.mirror_of(Loose) is None and fastpath.mirror_of(Checked) is None


def msgpack_decode(struct, body: dict):
    import msgspec
    return msgspec.msgpack.decode(msgpack.packb(body), type=struct)


def test_flat_bodies_are_the_models_own_fields():
    samples = all_samples()
    flat = fastpath.flat_types()
    assert "LlmUsage" in flat and "TaskSpec" not in flat
    for name in flat:
        sample = samples[name]
        assert dict(sample.__dict__) == sample.model_dump(), name
