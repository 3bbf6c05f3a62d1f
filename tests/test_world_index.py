"""The world model's in-memory index (world_server/index.py) on a real LMDB store: the projection
it finds from candidates is the one scoring every entity and fact of the store gives, it reads
only candidates however long the history, it stays current across commits (and out of an aborted
one), and a store opened again rebuilds it."""
from __future__ import annotations

import random

import pytest

from world_server.index import fact_meta, fact_words, name_words
from world_server.model import WorldModel, fact_rank
from world_server.store import WorldStore
from test_world_model import world  # noqa: F401 - the fixture: a model on a real store

DAY = 86400.0
WORDS = ["port", "report", "csv", "staging", "host", "disk", "usage", "backup", "config", "yaml"]


def reference(m: WorldModel, text: str, now: float, ws: str, task: str = "") -> dict:
    """The projection by scoring everything in the store (what project() did before the index)."""
    import os
    from services.runtime import worldfacts as X
    kws, named = X.keywords(text), {x.id for x in X.mentions(text)}
    where = {e["task"]: os.path.realpath(e.get("workspace") or str(m.ws))
             for e in m.store.all("episodes")}
    ents = []
    for e in m.store.all("entities"):
        if e.get("forgotten") or (e["kind"] in ("file", "folder", "task") and e["episodes"]
                                  and ws not in {where.get(t) for t in e["episodes"]}) or \
                (task and e["episodes"] and set(e["episodes"]) <= {task}):
            continue
        rel = (1.0 if e["id"] in named else 0.0) + 0.5 * len(kws & name_words(e["name"]))
        ents.append((rel + m.weight(e, now), rel, e))
    ents.sort(key=lambda x: -x[0])
    chosen = [(r, e) for _, r, e in ents if r > 0][:m.s.world_projection_entities]
    ids = {e["id"]: min(1.0, r) for r, e in chosen}
    facts = [(sc, f) for f in m.store.all("facts") if (sc := fact_rank(
        fact_meta(f), len(kws & fact_words(f)), ids, ws, now)) is not None]
    facts.sort(key=lambda x: -x[0])
    return {"entities": [e["id"] for _, e in chosen],
            "facts": [f["id"] for _, f in facts[:m.s.world_projection_facts]]}


def fill(m: WorldModel, rng: random.Random, n: int, now: float, other: str) -> None:
    st = m.store
    for i in range(n):
        task, ws = f"t{i}", rng.choice([str(m.ws), other])
        m.on_request(task, f"task {i}", workspace=ws)
        words = rng.sample(WORDS, 2)
        name = f"{words[0]}-{i % 7}.{rng.choice(['csv', 'yaml', 'txt'])}"
        # valid times from now back to years ago: old recency underflows to 0.0 (ties)
        at = now - rng.choice([0, 60, 3600, DAY, 30 * DAY, 3 * 365 * DAY]) - i
        scope = rng.choice([ws, ws, ""])

        def tx(txn, i=i, task=task, name=name, words=words, at=at, scope=scope):
            st.track(txn, f"file:{name}", "file", name, at=at, sentiment=None, episode=task,
                     lam=0.3)
            kind = rng.choice(["fact", "fact", "claim"])
            st.assert_fact(txn, f"file:{name}", rng.choice(["port", "size", "answer"]),
                           str(rng.randint(1, 5)), f"{name} {' '.join(words)} {i}", kind=kind,
                           status=rng.choice(["verified", "unverified"]), valid_at=at,
                           episode={"task": task, "at": at}, scope=scope, now=at)
        st.transact(tx)
        if i % 11 == 0:
            m.forget(f"file:{name}", "test", "gone")


def test_the_indexed_projection_is_the_one_a_full_scan_gives(world):
    rng, now = random.Random(7), 1_800_000_000.0
    fill(world, rng, 160, now, other=str(world.ws) + "-other")
    import os
    ws = os.path.realpath(str(world.ws))
    goals = ["what port does staging use", "the disk usage report csv", "backup the config.yaml",
             "port-3.csv and host-2.yaml", "nothing related at all", "report", ""]
    checked = 0
    for text in goals:
        for when in (now, now - 40 * DAY):
            got = world.project(text, now=when, workspace=str(world.ws), task="t3")
            want = reference(world, text, when, ws, task="t3")
            assert [e["id"] for e in got["entities"]] == want["entities"], text
            assert [f["id"] for f in got["facts"]] == want["facts"], (text, when)
            checked += bool(want["facts"] or want["entities"])
    assert checked >= 8                  # the goals do find things: the comparison means something


def test_facts_tied_at_the_cut_are_chosen_as_a_full_scan_chooses_them(world, tmp_path):
    """Years-old facts all rank 0.0 by recency: which of them make the cut is the store's key
    order, as a full scan gives it, not their valid time."""
    import os
    old_ws = tmp_path / "old"
    old_ws.mkdir()
    ws, st, now = os.path.realpath(old_ws), world.store, 1_800_000_000.0
    for i in range(world.s.world_projection_facts + 6):
        at = now - 3 * 365 * DAY - 97 * i
        st.transact(lambda txn, i=i, at=at: st.assert_fact(
            txn, f"file:n{i}.txt", "size", str(i), f"n{i}.txt has {i} lines", valid_at=at,
            episode={"task": f"o{i}", "at": at}, scope=ws, now=at))
    got = world.project("anything", now=now, workspace=str(old_ws))
    want = reference(world, "anything", now, ws)
    assert len(want["facts"]) == world.s.world_projection_facts
    assert [f["id"] for f in got["facts"]] == want["facts"]


def counting(store, monkeypatch) -> list[str]:
    """The sub-database of every record the store decodes from now on (by key or by scan)."""
    reads: list[str] = []
    get, scan = store.get, store.scan

    def counted_scan(txn, db):
        for row in scan(txn, db):
            reads.append(db)
            yield row

    def counted_all(db):
        with store.read() as txn:
            return [v for _, v in counted_scan(txn, db)]
    monkeypatch.setattr(store, "get", lambda txn, db, key: reads.append(db) or get(txn, db, key))
    monkeypatch.setattr(store, "scan", counted_scan)
    monkeypatch.setattr(store, "all", counted_all)
    return reads


def test_a_projection_reads_only_candidates_however_long_the_history(world, monkeypatch):
    now = 1_800_000_000.0
    fill(world, random.Random(3), 60, now, other=str(world.ws) + "-other")
    with monkeypatch.context() as mp:
        reads = counting(world.store, mp)
        world.project("the disk usage report csv", now=now, workspace=str(world.ws))
        first = len(reads)
    for i in range(300):                 # a long history of unrelated tasks in the workspace
        world.on_request(f"u{i}", "list the files", workspace=str(world.ws))
        world.on_spec({"task_id": f"u{i}", "intent_slug": "ls", "intent": "list the files",
                       "raw_input": "list the files", "options": {"workspace": str(world.ws)}})
        world.on_final({"task_id": f"u{i}", "status": "unverified", "summary": "listed"})
    with monkeypatch.context() as mp:
        reads = counting(world.store, mp)
        world.project("the disk usage report csv", now=now, workspace=str(world.ws))
    assert "episodes" not in reads and "goals" not in reads
    assert len(reads) <= first + world.s.world_projection_facts + 2, (first, len(reads))


def test_the_index_follows_commits_skips_aborted_ones_and_is_rebuilt_on_open(world, tmp_path):
    st = world.store
    world.on_request("a1", "check the staging port", workspace=str(world.ws))
    assert st.index.workspace["a1"] == str(world.ws)

    def boom(txn):
        st.track(txn, "file:ghost.csv", "file", "ghost.csv", at=1.0, sentiment=None,
                 episode="a1", lam=0.3)
        raise RuntimeError("aborted")
    with pytest.raises(RuntimeError):
        st.transact(boom)
    assert "file:ghost.csv" not in st.index.entities_for({"ghost"}, ())
    st.transact(lambda txn: st.track(txn, "file:real.csv", "file", "real.csv", at=1.0,
                                     sentiment=None, episode="a1", lam=0.3))
    assert st.index.entities_for({"real"}, ()) == {"file:real.csv"}
    st.close()                           # (closing it again at teardown does nothing)
    again = WorldStore(st.path)
    try:
        assert again.index.workspace["a1"] == str(world.ws)
        assert again.index.entities_for({"real", "ghost"}, ()) == {"file:real.csv"}
    finally:
        again.close()
