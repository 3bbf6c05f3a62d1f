"""The LMDB MKCT store and the Dreamer on a real LMDB file in a temporary directory (in-process:
the bus-level behaviour is in test_memory_server.py). The Dreamer's LLM is an in-process stand-in
here; the scripted-HTTP path is exercised against the real process."""
from __future__ import annotations

import tempfile
import threading
import time
from pathlib import Path

import pytest

from memory_server import mkct
from services.runtime import mkct as tags
from memory_server.dreamer import Dreamer
from memory_server.store import MemoryStore, StoreError, StoreLocked
from protocol.messages import Megram
from protocol.settings import load_settings

DAY = mkct.SECONDS_PER_DAY
TAG = ("intent:count-files", "env:local")


@pytest.fixture
def store():
    root = Path(tempfile.mkdtemp(prefix="mem-", dir="/tmp"))
    s = MemoryStore(root / "memory.lmdb", cache_min_entries=1)   # every tag goes through the cache
    yield s
    s.close()
    import shutil
    shutil.rmtree(root, ignore_errors=True)


def mg(state="accept", *, tag=TAG, age_days=0.0, level="M", content=None, **kw) -> Megram:
    f, sigma, k = tags.QUANTIZATION.get(state, (1.0, 1.0, 0.0))
    values = dict(f=f, sigma=sigma, k=0.0 if level in "CT" else k,
                  created_at=time.time() - age_days * DAY)
    values.update(kw)
    return Megram(space=tag[0], entity=tag[1], state=state, level=level,
                  content=content or f"{state} {age_days}d", **values)


class FakeLLM:
    def __init__(self, reply="Use `find . -type f | wc -l` to count files."):
        self.reply = reply
        self.calls: list[str] = []

    def complete_text(self, system, user, **_):
        self.calls.append(user)
        if isinstance(self.reply, Exception):
            raise self.reply
        return self.reply


def dreamer(store, llm=None, events=None, **overrides):
    return Dreamer(store, load_settings(**overrides),
                   publish=(events.append if events is not None else None),
                   llm_factory=(lambda: llm) if llm else None)


def test_write_query_roundtrip_and_invalid_megrams_are_refused_not_lost(store):
    ids, errors = store.write([mg(f=0.6, sigma=1, k=0), mg(f=0.4, sigma=-1, k=0),
                               mg(f=1.5), mg(sigma=-3), mg(tag=("", "env:local"))])
    assert len(ids) == 2 and len(errors) == 3
    assert "f=1.5" in errors[0] and "sigma=-3" in errors[1] and "non-empty" in errors[2]
    pot, top = store.query_mk(*TAG)
    assert (round(pot.attention, 9), round(pot.decision, 9), pot.action) == (1.0, 0.2, "Caution")
    assert [m.live_attention for m in top] == [0.6, 0.4]
    assert [m.live_decision for m in top] == [0.6, -0.4]
    assert store.verify() == []


def test_rewriting_the_same_message_is_idempotent(store):
    batch = [mg(), mg("abandon")]
    first, _ = store.write(batch, seed="env-1")
    again, _ = store.write(batch, seed="env-1")
    assert first == again
    assert store.stats()["megrams"] == 2 and store.verify() == []
    explicit = mg(id="ggs-run-7-terminal")
    store.write([explicit])
    store.write([explicit])
    assert store.stats()["megrams"] == 3


def test_query_c_returns_rules_and_resets_their_recall_clock(store):
    old = time.time() - 7 * DAY
    ids, _ = store.write([mg(level="C", k=0.2, f=0.9, sigma=1, content="rule", created_at=old),
                          mg(content="episode")])
    before, _ = store.query_mk(*TAG)
    sops = store.query_c(*TAG)
    assert [s.content for s in sops] == ["rule"] and sops[0].level == "C"
    after, _ = store.query_mk(*TAG)
    assert after.attention - before.attention == pytest.approx(0.9 - 0.9 * 2.718281828 ** -1.4,
                                                               rel=1e-3)
    shown, _ = store.show(ids[0])
    assert shown.last_recalled_at == pytest.approx(time.time(), abs=5)
    assert store.verify() == []


def test_recent_lists_newest_unconsolidated_episodes(store):
    store.write([mg(age_days=3, content="old"), mg(age_days=1, content="new"),
                 mg(level="C", content="rule")])
    assert [m.content for m in store.recent(*TAG, n=5)] == ["new", "old"]
    assert [m.content for m in store.recent(*TAG, n=1)] == ["new"]


def test_show_forget_by_prefix_and_clear_errors(store):
    ids, _ = store.write([mg(content="keep"), mg(content="drop")])
    m, detail = store.show(ids[1][:10])
    assert m.content == "drop" and detail["group"]["count"] == 2
    assert store.forget(ids[1][:10]).id == ids[1]
    with pytest.raises(StoreError, match="no Megram"):
        store.show(ids[1])
    with pytest.raises(StoreError, match="no Megram"):
        store.forget("zz-not-an-id")
    assert store.stats()["megrams"] == 1 and store.verify() == []


def test_a_second_owner_is_refused(store):
    with pytest.raises(StoreLocked, match="another memory process"):
        MemoryStore(store.path)


def test_map_grows_on_map_full(tmp_path):
    small = MemoryStore(tmp_path / "m.lmdb", map_size=256 * 1024)
    try:
        for i in range(10):
            small.write([mg(content="x" * 200, tag=(f"intent:t{i % 7}", "env:local"))
                         for _ in range(300)])
        stats = small.stats()
        assert stats["megrams"] == 3000 and stats["resizes"] >= 1
        assert small.verify() == []
    finally:
        small.close()


def test_tag_cache_serves_repeats_and_stays_current_across_writes(store):
    store.write([mg()])
    first, _ = store.query_mk(*TAG)
    again, _ = store.query_mk(*TAG)
    assert again.attention == pytest.approx(first.attention) and store.stats()["cache"]["hits"] >= 1
    store.write([mg("abandon")])
    hits = store.stats()["cache"]["hits"]
    after, _ = store.query_mk(*TAG)          # refreshed by the writer: a hit, and current
    assert after.attention == pytest.approx(first.attention + 0.95)
    assert store.stats()["cache"]["hits"] == hits + 1
    store.query_c(*TAG)                      # recall resets touch the tag too
    other = ("intent:other", "env:local")
    store.write([mg(tag=other)])            # a commit elsewhere keeps this tag cached
    hits = store.stats()["cache"]["hits"]
    store.query_mk(*TAG)
    store.query_mk(*TAG)
    assert store.stats()["cache"]["hits"] >= hits + 1


def test_readers_are_not_blocked_by_a_long_write(store):
    store.write([mg()])
    entered, release = threading.Event(), threading.Event()

    def slow(txn):
        entered.set()
        release.wait(10)
    fut = store.submit(slow)
    assert entered.wait(5)
    pot, _ = store.query_mk(*TAG)           # a snapshot read while the writer holds its txn
    assert pot.attention > 0
    release.set()
    fut.result(5)


# ---------------------------------------------------------------------------------------------
# the Dreamer
# ---------------------------------------------------------------------------------------------

def test_gc_deletes_decayed_episodes_never_rules(store):
    store.write([mg("refine", age_days=30, content="gone"),
                 mg("change_path", age_days=30, level="K", content="gone too"),
                 mg(level="C", f=0.01, age_days=365, content="tiny old rule"),
                 mg(level="T", f=0.01, age_days=365, content="law"),
                 mg("accept", content="fresh")])
    event = dreamer(store).run_cycle("test")
    assert event.gc_deleted == 2
    left = {m.content for m in store.tag_megrams(*TAG)}
    assert left == {"tiny old rule", "law", "fresh"}
    assert store.verify() == []


def test_best_practice_demoted_only_by_newer_contradicting_evidence(store):
    older_failures = [mg("abandon", age_days=20) for _ in range(3)]
    rule_ids, _ = store.write([mg(level="C", content="BP", age_days=10)] + older_failures)
    event = dreamer(store).run_cycle("test")
    assert event.demoted == []                       # contradicting, but older than the rule
    store.write([mg("success", age_days=1)])         # newer, agreeing
    assert dreamer(store).run_cycle("test").demoted == []
    store.write([mg("abandon", age_days=0.5), mg("abandon", age_days=0.2)])  # newer, contradicting
    event = dreamer(store).run_cycle("test")
    assert event.demoted == [rule_ids[0]]
    m, detail = store.show(rule_ids[0])
    assert (m.level, m.k) == ("K", 0.05)
    assert detail["lifecycle"]["demoted_by"] == "trust_bankruptcy"
    assert m.live_attention == pytest.approx(0.9, abs=1e-3)   # decays from the demotion on
    assert store.verify() == []


def test_six_accepts_promote_one_best_practice_five_do_not(store):
    store.write([mg() for _ in range(6)])
    store.write([mg(tag=("intent:five", "env:local")) for _ in range(5)])
    llm = FakeLLM()
    d = dreamer(store, llm)
    event = d.run_cycle("test")
    assert len(event.promoted) == 1 and len(llm.calls) == 1
    rule, detail = store.show(event.promoted[0])
    assert (rule.level, rule.sigma, rule.k, rule.f) == ("C", 1.0, 0.0, 1.0)
    assert (rule.space, rule.entity, rule.state) == (*TAG, "best_practice")
    assert rule.content == llm.reply
    assert detail["lifecycle"]["source_count"] == 6
    assert "intent:count-files" in llm.calls[0] and "accept" in llm.calls[0]
    sources = [m for m in store.tag_megrams(*TAG) if m.level == "M"]
    assert all(m.consolidated_into == rule.id for m in sources) and len(sources) == 6
    second = d.run_cycle("test")
    assert second.promoted == [] and second.demoted == [] and len(llm.calls) == 1
    assert store.verify() == []


def test_fresh_constraint_is_not_demoted_by_its_own_sources(store):
    store.write([mg("abandon") for _ in range(6)])
    d = dreamer(store, FakeLLM("Never run the script without --dry-run."))
    first = d.run_cycle("test")
    assert len(first.promoted) == 1
    rule, _ = store.show(first.promoted[0])
    assert (rule.level, rule.sigma, rule.state) == ("C", -1.0, "constraint")
    assert d.run_cycle("test").demoted == []
    store.write([mg("success", created_at=time.time() + 1)])   # newer evidence that it works
    assert d.run_cycle("test").demoted == [rule.id]


def test_llm_failure_skips_the_group_and_says_so(store):
    store.write([mg() for _ in range(6)])
    events = []
    d = dreamer(store, FakeLLM(RuntimeError("endpoint down")), events)
    event = d.run_cycle("test")
    assert event.promoted == [] and "endpoint down" in event.error
    assert events == [event]
    assert all(not m.consolidated_into for m in store.tag_megrams(*TAG))
    no_llm = dreamer(store).run_cycle("test")
    assert no_llm.promoted == [] and "no LLM" in no_llm.error


def test_promotions_per_cycle_are_capped_strongest_first(store):
    for n, name in ((6, "six"), (8, "eight"), (7, "seven")):
        store.write([mg(tag=(f"intent:{name}", "env:local")) for _ in range(n)])
    llm = FakeLLM()
    d = dreamer(store, llm, dreamer_max_promotions=2)
    first = d.run_cycle("test")
    spaces = {store.show(i)[0].space for i in first.promoted}
    assert spaces == {"intent:eight", "intent:seven"} and d.last["deferred"] == 1
    second = d.run_cycle("test")
    assert [store.show(i)[0].space for i in second.promoted] == ["intent:six"]
    assert len(llm.calls) == 3


def test_groups_rank_tags_and_filter_by_prefix_and_level(store):
    store.write([mg() for _ in range(3)]
                + [mg("abandon", tag=("intent:other", "env:local"), level="K")]
                + [mg("change_path", tag=("tool:shell", "target:/tmp/x"))]
                + [mg(level="C", tag=("global:user", "env:local"), content="rule")])
    groups, total = store.groups()
    assert total == 4
    assert [(g["space"], g["action"]) for g in groups] == [
        (TAG[0], "Exploit"), ("intent:other", "Avoid"), ("global:user", "Exploit"),
        ("tool:shell", "Ignore")]
    assert groups[0]["count"] == 3 and groups[0]["levels"] == {"M": 3}
    assert groups[0]["attention"] == pytest.approx(2.7, rel=1e-6)
    only_intents, total = store.groups(space="intent:")
    assert total == 2 and {g["space"] for g in only_intents} == {TAG[0], "intent:other"}
    assert [g["space"] for g in store.groups(level="K")[0]] == ["intent:other"]
    top, total = store.groups(limit=1)
    assert len(top) == 1 and total == 4
    assert store.groups(space="nothing:")[1] == 0


def test_a_failed_cycle_is_reported_and_the_thread_survives(tmp_path):
    broken = MemoryStore(tmp_path / "m.lmdb")
    broken.close()                           # every read now fails
    got = threading.Event()
    events = []

    def publish(event):
        events.append(event)
        got.set()
    d = Dreamer(broken, load_settings(dreamer_after_final_s=0.0), publish=publish)
    d.start()
    try:
        d.after_final_result()
        assert got.wait(10)
        assert events[0].trigger == "final_result" and "cycle failed" in events[0].error
        got.clear()
        d.after_final_result()               # the thread is still there for the next trigger
        assert got.wait(10)
    finally:
        d.stop()
