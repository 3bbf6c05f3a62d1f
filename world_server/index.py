"""What the per-task paths of the world model look up, kept in sub-databases of the world's own
LMDB store so that none of them scans a sub-database that grows with every task (episodes, goals,
entities, facts), and none of it lives in the process's heap.

Before the index, a goal's projection read and unpacked every episode, entity and fact ever
recorded, and closing a task every goal: the perceiver's wait for its projection grew with the
daemon's history (`benchmarks/bench_world.py`: 2.1 ms at 100 tasks, 67 ms at 3,000). Kept in
memory, the index grew the world process by ≈ 2 KB a task (tracemalloc) for as long as the store
kept the task (docs/RELIABILITY.md, "Soak"); kept here it is written in the transaction that writes
the record it indexes (atomic with it, out of an aborted one) and read through the page cache. It
holds ids, words and each fact's few ranking inputs, never whole records: the projection ranks the
facts a lookup gives from those inputs and reads only the chosen ones (and the candidate entities)
from the store — the same projection as ranking everything, as long as no word of the goal is
shared by more than WORD_CANDIDATES facts (or entities). A store written before the index gets
it built from one scan when the world opens it (`WorldIndex.ensure`).
"""
from __future__ import annotations

import hashlib
import struct
from collections import Counter
from itertools import islice
from typing import Any, Callable, Iterable, Iterator, NamedTuple

import msgpack

from protocol.envelope import pack
from services.runtime import worldfacts as X

VERSION = 3
FAILED = ("abandoned", "not_possible")     # a run's outcomes that count as a failure
#  name       key → value (dupsort: one key, many values, kept sorted)
DBS = {
    "ix_ws": False,        # task → its workspace ("": the default one)
    "ix_session": True,    # schedule session → its runs (task ids)
    "ix_goalrun": True,    # run id → the goals it carries out
    "ix_slug": False,      # intent slug → its latest proposal's time
    "ix_entword": True,    # word of a name → (last mention, entity id), in mention order
    "ix_entlast": False,   # entity id → the last mention its ix_entword postings carry
    "ix_factword": True,   # word of a fact → (valid time, fact id), in valid-time order
    "ix_subject": True,    # subject → (valid time, fact id), in valid-time order
    "ix_scope": True,      # workspace → (valid time, fact id), in valid-time order
    "ix_meta": False,      # fact id → its ranking inputs (FactMeta)
    "ix_failed": False,    # b"last" → (end time, task) of the latest run that failed
    "ix_long": False,      # the digest that stands for a string too long to be a key → it
}
MAX_KEY = 400              # LMDB keys (and dupsort values) stop at 511 bytes
# A goal's word or related subject brings at most its latest facts (by valid time) to the ranking:
# a word thousands of facts share ("file", "line") says little about which of them matter, and
# ranking them all made a projection grow with the history (8.7 ms at 3,000 tasks sharing two
# words, bench_world.py). A fact behind that cut still comes through a rarer word it shares.
# Entities likewise, by their last mention: every run's task entity is named by its run id
# (`run-20261201-…`), so "run" in a goal brought every task ever recorded (36 ms and 3.5 MB
# of transient heap for one projection at 4,000 tasks).
WORD_CANDIDATES = 512
_DOUBLE = struct.Struct(">d")


def name_words(name: str) -> set[str]:
    """The words an entity's name is matched on (a path's parts: `a/b.csv` → a, b, csv)."""
    return X.keywords(name.replace("/", " ").replace(".", " "))


def fact_words(f: dict) -> set[str]:
    return X.keywords(" ".join((f["subject"].replace("/", " ").replace(".", " "),
                                f["predicate"], f["object"], f["text"])))


class FactMeta(NamedTuple):
    """What ranks a fact in a projection (model.fact_rank), kept so that ranking the candidates
    reads none of them from the store: only the chosen few are."""
    shown: bool          # a fact, or an answer artoo gave that no check confirmed
    forgotten: bool
    valid_at: float
    invalid_at: float | None
    scope: str
    subject: str


def fact_meta(f: dict) -> FactMeta:
    # facts, and the answers artoo gave that no check confirmed: the user refers to what they
    # were told ("the host you found earlier"), so it is shown, marked as such
    told = f["kind"] == "claim" and f["predicate"] == "answer" and \
        f.get("status") == "unverified"
    return FactMeta(f["kind"] == "fact" or told, bool(f.get("forgotten")), f["valid_at"],
                    f["invalid_at"], f.get("scope", ""), f["subject"])


def sortable(t: float) -> bytes:
    """A float as 8 bytes whose byte order is its numeric order (negative times included)."""
    raw = bytearray(_DOUBLE.pack(t))
    if raw[0] & 0x80:
        return bytes(b ^ 0xFF for b in raw)
    raw[0] |= 0x80
    return bytes(raw)


class WorldIndex:
    """The lookups, over one transaction of the store each (`txn`): task → workspace; schedule
    session → its runs; run id → the goals it carries out; intent slug → its latest proposal;
    word → entities and facts; subject → facts; workspace → its facts in valid-time order; each
    fact's ranking inputs. Only added to: an entity's name and a fact's words never change once
    written (a fact is invalidated or forgotten by a new value of its record, whose inputs
    replace the old ones). `db` maps each of DBS to its handle."""

    def __init__(self, db: dict[str, Any]) -> None:
        self.db = db

    # -- keys (the store's own too) -----------------------------------------------------------
    def key(self, txn, s: str) -> bytes:
        """`s` as a key or a dupsort value: a digest (remembered in ix_long) when too long."""
        raw = s.encode()
        if len(raw) <= MAX_KEY:
            return raw
        digest = b"\x00" + hashlib.blake2b(raw, digest_size=20).digest()
        if txn is not None:
            txn.put(digest, raw, db=self.db["ix_long"])
        return digest

    def lookup(self, s: str) -> bytes:
        """The key `key` wrote for `s`."""
        return self.key(None, s)

    def text(self, txn, raw: bytes) -> str:
        """The string `key` gave `raw` for."""
        if raw[:1] == b"\x00":
            raw = txn.get(raw, db=self.db["ix_long"]) or raw
        return raw.decode(errors="replace")

    def _values(self, txn, name: str, key: str) -> Iterator[bytes]:
        cur = txn.cursor(db=self.db[name])
        return cur.iternext_dup() if cur.set_key(self.lookup(key)) else iter(())

    # -- writing -------------------------------------------------------------------------------
    def put(self, txn, db: str, key: str, value: Any) -> None:
        """One value the transaction `txn` writes into sub-database `db`."""
        add = self._ADD.get(db)
        if add is not None and isinstance(value, dict):
            add(self, txn, key, value)

    def _add(self, txn, name: str, key: str, value: str) -> None:
        txn.put(self.key(txn, key), self.key(txn, value), db=self.db[name])

    def _episode(self, txn, task: str, ep: dict) -> None:
        txn.put(self.key(txn, task), (ep.get("workspace") or "").encode(), db=self.db["ix_ws"])
        session = ep.get("session") or ""
        if session.startswith("schedule:"):
            self._add(txn, "ix_session", session, task)
        final = ep.get("final") or {}
        if final.get("status") in FAILED:
            posting = sortable(final.get("at") or 0.0) + task.encode()
            if posting > (txn.get(b"last", db=self.db["ix_failed"]) or b""):
                txn.put(b"last", posting, db=self.db["ix_failed"])

    def _goal(self, txn, gid: str, goal: dict) -> None:
        run = (goal.get("link") or {}).get("run_id")
        if run:
            self._add(txn, "ix_goalrun", run, gid)
        slug = (goal.get("action") or {}).get("slug")
        if slug:
            at = goal.get("created_at") or 0.0
            if at > self.slug_proposed(txn, slug):
                txn.put(self.key(txn, slug), _DOUBLE.pack(at), db=self.db["ix_slug"])

    def _entity(self, txn, eid: str, ent: dict) -> None:
        # a name never changes; a new last mention moves the entity's postings to their new time
        ekey = self.key(txn, eid)
        at = sortable(ent.get("last_mentioned") or 0.0)
        old = txn.get(ekey, db=self.db["ix_entlast"])
        if old == at:
            return
        words = self.db["ix_entword"]
        for w in name_words(ent.get("name", "")):
            wkey = self.key(txn, w)
            if old is not None:
                txn.delete(wkey, old + ekey, db=words)
            txn.put(wkey, at + ekey, db=words)
        txn.put(ekey, at, db=self.db["ix_entlast"])

    def _fact(self, txn, fid: str, f: dict) -> None:
        fkey = fid.encode()                      # a fact id: never too long for a key
        known = txn.get(fkey, db=self.db["ix_meta"]) is not None
        txn.put(fkey, pack(tuple(fact_meta(f))), db=self.db["ix_meta"])
        if known:                                # invalidated or forgotten since: current above
            return
        posting = sortable(f["valid_at"]) + fkey
        for w in fact_words(f):
            txn.put(self.key(txn, w), posting, db=self.db["ix_factword"])
        txn.put(self.key(txn, f["subject"]), posting, db=self.db["ix_subject"])
        if f.get("scope"):
            txn.put(self.key(txn, f["scope"]), posting, db=self.db["ix_scope"])

    _ADD: dict[str, Callable] = {"episodes": _episode, "goals": _goal, "entities": _entity,
                                 "facts": _fact}
    COVERS = frozenset(_ADD)                     # the sub-databases whose values it indexes

    def ensure(self, txn, version_key: bytes, meta_db, rows: Callable[[str], Iterable]) -> bool:
        """Build the index from one scan of the store unless it is there (a store written before
        it); `rows(db)` gives a sub-database's (key, value) pairs. True when it was built."""
        if txn.get(version_key, db=meta_db) == pack(VERSION):
            return False
        for name in DBS:
            txn.drop(self.db[name], delete=False)
        for db in self._ADD:
            for key, value in rows(db):
                self.put(txn, db, key, value)
        txn.put(version_key, pack(VERSION), db=meta_db)
        return True

    # -- lookups -------------------------------------------------------------------------------
    def workspace(self, txn, task: str) -> str | None:
        """The workspace a task ran in ("": the default), None for a task the store lacks."""
        raw = txn.get(self.lookup(task), db=self.db["ix_ws"])
        return None if raw is None else raw.decode()

    def session_runs(self, txn, session: str) -> list[str]:
        return [self.text(txn, v) for v in self._values(txn, "ix_session", session)]

    def goal_runs(self, txn, run: str) -> list[str]:
        return [self.text(txn, v) for v in self._values(txn, "ix_goalrun", run)]

    def last_failed(self, txn) -> str | None:
        """The task of the run that failed last (abandoned or not possible), by its end."""
        raw = txn.get(b"last", db=self.db["ix_failed"])
        return None if raw is None else raw[8:].decode()

    def slug_proposed(self, txn, slug: str) -> float:
        raw = txn.get(self.lookup(slug), db=self.db["ix_slug"])
        return 0.0 if raw is None else _DOUBLE.unpack(raw)[0]

    # Facts are looked up by their ids' bytes (`fact key`s: a fact id is never too long for a
    # key): a projection ranks thousands of candidates, and only the chosen few are decoded.
    def meta(self, txn, fkey: bytes) -> FactMeta:
        """A fact's ranking inputs, by its key."""
        return FactMeta(*msgpack.unpackb(txn.get(fkey, db=self.db["ix_meta"])))

    def metas(self, txn, fkeys: Iterable[bytes]) -> dict[bytes, FactMeta]:
        """The ranking inputs of many facts, read in one call."""
        unpack = msgpack.unpackb
        pairs = txn.cursor(db=self.db["ix_meta"]).getmulti(list(fkeys))
        return {k: FactMeta(*unpack(v)) for k, v in pairs}

    def entities_for(self, txn, words: Iterable[str], named: Iterable[str],
                     limit: int | None = None) -> set[str]:
        """The named entities (when known) and, for each word, the latest `limit`
        (WORD_CANDIDATES) entities mentioned whose name has it."""
        entities = self.db["entities"]
        out = {eid for eid in named if txn.get(self.lookup(eid), db=entities) is not None}
        for w in words:
            out.update(self.text(txn, v) for v in
                       islice(self.newest(txn, "ix_entword", w), limit or WORD_CANDIDATES))
        return out

    def facts_for(self, txn, words: Iterable[str], subjects: Iterable[str],
                  limit: int | None = None) -> tuple[Counter, dict[bytes, FactMeta]]:
        """The candidates of a projection and their ranking inputs: fact key → how many of the
        words it shares, for the latest `limit` facts (WORD_CANDIDATES) of each word and of each
        of the subjects (those sharing none: 0). A candidate's count is exact: a word whose
        facts were cut is looked up for the candidates other words brought."""
        limit = limit or WORD_CANDIDATES
        shared: Counter = Counter()
        cut: list[tuple[str, set[bytes]]] = []
        for w in words:
            latest = list(islice(self.newest(txn, "ix_factword", w), limit + 1))
            if len(latest) > limit:
                latest.pop()
                cut.append((w, set(latest)))
            shared.update(latest)
        for s in subjects:
            for fkey in islice(self.newest(txn, "ix_subject", s), limit):
                shared[fkey] += 0
        metas = self.metas(txn, shared)
        for w, seen in cut:
            cur, key = txn.cursor(db=self.db["ix_factword"]), self.lookup(w)
            for fkey in shared.keys() - seen:
                if cur.set_key_dup(key, sortable(metas[fkey].valid_at) + fkey):
                    shared[fkey] += 1
        return shared, metas

    def newest_in(self, txn, scope: str) -> Iterator[bytes]:
        """A workspace's facts (their keys), latest valid time first."""
        return self.newest(txn, "ix_scope", scope)

    def newest(self, txn, name: str, key: str) -> Iterator[bytes]:
        """The keys a time-ordered posting list holds, latest time first."""
        cur = txn.cursor(db=self.db[name])
        if cur.set_key(self.lookup(key)) and cur.last_dup():
            for raw in cur.iterprev_dup(keys=False):
                yield raw[8:]
