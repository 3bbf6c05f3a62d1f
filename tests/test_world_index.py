"""The world model's index (world_server/index.py, sub-databases of the real LMDB store): the
projection it finds from candidates is the one scoring every entity and fact of the store gives,
it reads only candidates however long the history, it is written with the commits it indexes (and
not by an aborted one), a store written before it gets it built on open, and keys longer than
LMDB allows are indexed by digest."""
from __future__ import annotations

import random

import pytest

from world_server import index as ix
from world_server.index import fact_meta, fact_words, name_words
from world_server.model import WorldModel, fact_rank
from world_server.store import WorldStore, valid_at
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


def lookups(st, fn):
    with st.read() as txn:
        return fn(st.index, txn)


def test_the_index_follows_commits_skips_aborted_ones_and_survives_reopening(world, tmp_path):
    st = world.store
    world.on_request("a1", "check the staging port", workspace=str(world.ws))
    assert lookups(st, lambda ix, txn: ix.workspace(txn, "a1")) == str(world.ws)

    def boom(txn):
        st.track(txn, "file:ghost.csv", "file", "ghost.csv", at=1.0, sentiment=None,
                 episode="a1", lam=0.3)
        raise RuntimeError("aborted")
    with pytest.raises(RuntimeError):
        st.transact(boom)
    assert "file:ghost.csv" not in lookups(st, lambda ix, txn: ix.entities_for(txn, {"ghost"}, ()))
    st.transact(lambda txn: st.track(txn, "file:real.csv", "file", "real.csv", at=1.0,
                                     sentiment=None, episode="a1", lam=0.3))
    assert lookups(st, lambda ix, txn: ix.entities_for(txn, {"real"}, ())) == {"file:real.csv"}
    st.close()                           # (closing it again at teardown does nothing)
    again = WorldStore(st.path)
    try:
        assert lookups(again, lambda ix, txn: ix.workspace(txn, "a1")) == str(world.ws)
        assert lookups(again, lambda ix, txn: ix.entities_for(txn, {"real", "ghost"}, ())) == \
            {"file:real.csv"}
    finally:
        again.close()


def test_a_store_written_before_the_index_gets_it_built_once_on_open(world, tmp_path):
    """A store of an older artoo has the records and no index: opening it builds the index from
    one scan, and the projections it gives are the full scan's; a second open builds nothing."""
    import os
    now = 1_800_000_000.0
    fill(world, random.Random(5), 80, now, other=str(world.ws) + "-other")
    for task, at in (("late-fail", now - 5), ("early-fail", now - 50)):
        world.on_request(task, "a failing job", workspace=str(world.ws))
        world.on_final({"task_id": task, "status": "abandoned", "summary": ""}, at=at)
    st = world.store
    with st.write() as txn:                          # the store as an older artoo left it
        for name in ix.DBS:
            txn.drop(st.db[name], delete=False)
        txn.delete(b"index", db=st.db["meta"])
    st.close()
    again = WorldStore(st.path)
    try:
        world.store = again
        with again.read() as txn:
            assert txn.get(b"index", db=again.db["meta"]) is not None
            assert txn.stat(again.db["ix_meta"])["entries"] == again.stats()["facts"]
            assert again.index.last_failed(txn) == "late-fail"
        ws = os.path.realpath(str(world.ws))
        for text in ("what port does staging use", "the disk usage report csv"):
            got = world.project(text, now=now, workspace=str(world.ws))
            want = reference(world, text, now, ws)
            assert [e["id"] for e in got["entities"]] == want["entities"], text
            assert [f["id"] for f in got["facts"]] == want["facts"], text
        with again.write() as txn:
            assert not again.index.ensure(txn, b"index", again.db["meta"],
                                          lambda db: pytest.fail("scanned again"))
    finally:
        again.close()


def test_names_subjects_and_workspaces_longer_than_an_lmdb_key_are_indexed(world, tmp_path):
    """LMDB keys stop at 511 bytes; a deep workspace or a long name is indexed by its digest and
    found again by the same lookups."""
    deep = tmp_path / ("d" * 200) / ("e" * 200) / ("f" * 200)
    deep.mkdir(parents=True)
    st, now = world.store, 1_800_000_000.0
    long_task = "t-" + "x" * 600
    world.on_request(long_task, "count the lines", workspace=str(deep))
    subject = "file:" + "q" * 600 + ".csv"
    st.transact(lambda txn: st.assert_fact(
        txn, subject, "lines", "12", "the long csv has 12 lines", valid_at=now - 5,
        episode={"task": long_task, "at": now}, scope=str(deep), now=now))
    with st.read() as txn:
        assert st.index.workspace(txn, long_task) == str(deep)
        (fid,) = st.index.facts_for(txn, set(), {subject})[0]
        assert st.index.meta(txn, fid).subject == subject
        assert list(st.index.newest_in(txn, str(deep))) == [fid]
    got = world.project("how many lines", now=now, workspace=str(deep))
    assert [f["subject"] for f in got["facts"]] == [subject]


def test_valid_times_sort_as_numbers_in_the_workspace_order():
    times = [-1e9, -3.5, -0.0, 0.0, 1e-9, 2.5, 1_800_000_000.0, 1e12]
    keys = [ix.sortable(t) for t in times]
    assert keys == sorted(keys) and len(set(keys[4:])) == len(keys) - 4   # -0.0 == 0.0 aside


def test_a_common_word_brings_only_its_latest_facts_to_the_ranking(world, monkeypatch):
    """Past WORD_CANDIDATES facts sharing a word, the word brings the latest of them; an older
    fact still comes through a rarer word it shares, and the projection is the full scan's."""
    import os
    monkeypatch.setattr(ix, "WORD_CANDIDATES", 20)
    st, now = world.store, 1_800_000_000.0
    ws = os.path.realpath(str(world.ws))
    for i in range(60):
        st.transact(lambda txn, i=i: st.assert_fact(
            txn, f"file:d{i}.log", "usage", str(i), f"disk usage of d{i}.log is {i}",
            valid_at=now - 3600 * (60 - i), episode={"task": f"d{i}", "at": now}, scope=ws,
            now=now))
    old = st.transact(lambda txn: st.assert_fact(
        txn, "file:zebra.log", "usage", "7", "disk usage of zebra.log is 7",
        valid_at=now - 90 * DAY, episode={"task": "z", "at": now}, scope=ws, now=now))
    with st.read() as txn:
        disk, metas = st.index.facts_for(txn, {"disk"}, ())
        assert len(disk) == 20 and old["id"].encode() not in disk
        assert {m.subject for m in metas.values()} == {f"file:d{i}.log" for i in range(40, 60)}
        both, _ = st.index.facts_for(txn, {"disk", "zebra"}, ())
        assert both[old["id"].encode()] == 2       # its count is exact, "disk" counted too
    for text in ("disk usage", "disk usage of zebra"):
        got = world.project(text, now=now, workspace=str(world.ws))
        want = reference(world, text, now, ws)
        assert [f["id"] for f in got["facts"]] == want["facts"], text


def test_a_common_word_brings_only_its_latest_mentioned_entities_to_the_ranking(world,
                                                                             monkeypatch):
    """Past WORD_CANDIDATES entities whose names share a word (every run's task entity is named
    by its run id: `run-…`), the word brings the latest mentioned of them; a new mention brings an
    old one back, a rarer word or its name still find it, and the projection is the full scan's
    while the ones it would choose are among the latest."""
    import os
    monkeypatch.setattr(ix, "WORD_CANDIDATES", 20)
    st, now = world.store, 1_800_000_000.0
    ws = os.path.realpath(str(world.ws))
    for i in range(60):
        world.on_request(f"run-{i}", f"task {i}", workspace=str(world.ws), at=now - 60 * (60 - i))
        st.transact(lambda txn, i=i: st.track(
            txn, f"task:run-{i}", "task", f"run-{i:03d}", at=now - 60 * (60 - i),
            sentiment=None, episode=f"run-{i}", lam=0.3))
    st.transact(lambda txn: st.track(txn, "file:zebra-run.csv", "file", "zebra-run.csv",
                                     at=now - 90 * DAY, sentiment=None, episode="run-0", lam=0.3))
    with st.read() as txn:
        got = st.index.entities_for(txn, {"run"}, ())
        assert got == {f"task:run-{i}" for i in range(40, 60)}
        assert "file:zebra-run.csv" in st.index.entities_for(txn, {"run", "zebra"}, ())
        assert "file:zebra-run.csv" in st.index.entities_for(txn, {"run"}, {"file:zebra-run.csv"})
    st.transact(lambda txn: st.track(txn, "task:run-3", "task", "run-003", at=now,
                                     sentiment=None, episode="again", lam=0.3))
    with st.read() as txn:
        got = st.index.entities_for(txn, {"run"}, ())
        assert "task:run-3" in got and "task:run-40" not in got and len(got) == 20
    for text in ("run it again", "the zebra run"):
        got = world.project(text, now=now, workspace=str(world.ws))
        want = reference(world, text, now, ws)
        assert [e["id"] for e in got["entities"]] == want["entities"], text


def test_listings_keep_only_what_they_show_and_order_as_a_full_sort(world, monkeypatch):
    """entities / facts / goals read the store once and keep the n they show: the same rows, in
    the same order (ties in scan order), as sorting every record; none loads a whole table."""
    now = 1_800_000_000.0
    fill(world, random.Random(11), 120, now, other=str(world.ws) + "-other")
    st = world.store
    for i in range(12):                  # proposals and others, created at tied times
        st.transact(lambda txn, i=i: st.put(txn, "goals", f"g{i:02d}", {
            "id": f"g{i:02d}", "type": ("USER", "AUTO")[i % 2],
            "status": ("BLOCKED", "ACTIVE", "COMPLETED")[i % 3], "created_at": now - i // 4}))
    ents, facts, goals = st.all("entities"), st.all("facts"), st.all("goals")
    want_e = sorted((e for e in ents if not e.get("forgotten")),
                    key=lambda e: -world.weight(e, now))[:7]
    want_f = sorted((f for f in facts if not f.get("forgotten") and f["kind"] == "fact"
                     and valid_at(f, now)), key=lambda f: -f["valid_at"])[:9]
    want_c = sorted((f for f in facts if not f.get("forgotten") and f["kind"] == "claim"),
                    key=lambda f: -f["created_at"])[:9]
    want_g = sorted(goals, key=lambda g: (g["status"] != "BLOCKED", -g["created_at"]))[:5]
    monkeypatch.setattr(st, "all", lambda db: pytest.fail(f"loaded every {db}"))
    assert [e["id"] for e in world.entities(7, now=now)] == [e["id"] for e in want_e]
    got_f, got_c = world.facts(at=now, claims=True, n=9)
    assert [f["id"] for f in got_f] == [f["id"] for f in want_f]
    assert [f["id"] for f in got_c] == [f["id"] for f in want_c] and want_c
    assert [g["id"] for g in world.goals(n=5, include_user=True)] == [g["id"] for g in want_g]
    assert [g["id"] for g in world.goals(n=5)] == [g["id"] for g in sorted(
        (g for g in goals if g["type"] != "USER"),
        key=lambda g: (g["status"] != "BLOCKED", -g["created_at"]))[:5]]


def test_a_projection_reads_beside_a_write_in_progress_and_a_resize_waits_for_readers(world):
    """LMDB readers see the last commit without waiting for the writer (the world's queries run
    beside the observation being recorded); growing the map waits until no reader is open."""
    import threading
    st, now = world.store, 1_800_000_000.0
    fill(world, random.Random(1), 20, now, other=str(world.ws) + "-other")
    writing, release = threading.Event(), threading.Event()

    def slow(txn):
        st.put(txn, "audit", "k", {"op": "x"})
        writing.set()
        assert release.wait(20)
    writer = threading.Thread(target=lambda: st.transact(slow))
    writer.start()
    try:
        assert writing.wait(20)
        got = world.project("the disk usage report csv", now=now, workspace=str(world.ws))
        assert got["facts"] and not release.is_set()      # answered while the commit waits
    finally:
        release.set()
        writer.join(20)
    grown = threading.Event()

    def resize():
        with st._gate.exclusive():          # what transact() holds to grow the map
            grown.set()
    with st.read():
        resize = threading.Thread(target=resize)
        resize.start()
        assert not grown.wait(0.3)                        # a reader is open: the resize waits
    resize.join(20)
    assert grown.is_set()
