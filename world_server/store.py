"""The world model's store: one LMDB environment, `$ARTOO_HOME/world.lmdb`, one owner process.

Sub-databases (values are msgpack maps):

  entities   entity id → {id, kind, name, first_mentioned, last_mentioned, mentions, sentiment,
             episodes, forgotten}: the entity state tracker (seed 002 §1.4). Never deleted:
             lifecycle (active/stale) and importance are computed at read time from the clocks.
  facts      fact id → {id, subject, predicate, object, text, kind fact|claim, status,
             valid_at, invalid_at, created_at, expired_at, episodes, invalidated_by, forgotten}
             — bi-temporal, as Graphiti keeps its edges: valid_at/invalid_at is when it held in
             the world, created_at/expired_at when artoo believed it. A fact contradicted by a
             newer one (same subject and predicate, another object) gets invalid_at = the new
             fact's valid_at and expired_at = now; nothing is deleted. Claims (what no checked
             evidence backs) live here too, kind "claim", and never invalidate a fact.
  sp         subject\\0predicate → [fact ids]: the index contradiction checks use
  edges      edge id → {src, label, dst, created_at, episode}: the knowledge graph
  episodes   task id → {task, text, at, session, emotion, slug, workspace, calls, outcome...}
  intents    intent slug → [{at, task, text, workspace}]: the repetition trigger's history
  goals      goal id → {id, type, description, status, priority, trigger, evidence, action,
             created_at, decided_at, decided_by, reason, link, ...} (seed 002 Def. 4)
  deadlines  id → {task, text, deadline, fired}: deadlines users stated (time pressure)
  audit      time-ordered key → {op, at, by, ...}: operator changes (forget, accept, reject)
  meta       schema version, the index's version
  ix_*       the lookups of the per-task paths (index.py), written with the records they index

Concurrency: one process owns the directory (an flock on owner.lock; a second instance refuses to
start). Inside it one lock serialises the write transactions; readers run beside them (each sees
the last commit) and only a map resize waits for them (`ResizeGate`); the world's traffic is a
few messages per task. LMDB's synced commits make every acknowledged
change survive SIGKILL.
"""
from __future__ import annotations

import hashlib
import os
import threading
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

import lmdb
import msgpack

from protocol.envelope import pack
from services.runtime.lmdbstore import OwnedEnv, ResizeGate

from . import index as ix

SCHEMA_VERSION = 1
DBS = ("entities", "facts", "sp", "edges", "episodes", "intents", "goals", "deadlines", "audit",
       "meta") + tuple(ix.DBS)
MAX_EPISODES_PER_ENTITY = 20
MAX_FACT_EPISODES = 20
MAX_INTENT_HISTORY = 50
MAX_TEXT = 400


class WorldError(Exception):
    """A store operation that cannot be done; the message says why."""


class WorldLocked(WorldError):
    """Another process owns this world store."""


def _unpack(raw: bytes | None) -> Any:
    return None if raw is None else msgpack.unpackb(raw, raw=False)


def stable_id(*parts: Any) -> str:
    return hashlib.blake2b("\x00".join(map(str, parts)).encode(), digest_size=10).hexdigest()


class WorldStore:
    """The world store. Every public method is safe from any thread: one writer at a time,
    readers beside it."""

    def __init__(self, path: Path | str, map_size: int = 256 << 20, *, readonly: bool = False):
        self.path = Path(path)
        self._owned = OwnedEnv(self.path, what="world", dbs=DBS, map_size=map_size,
                               error=WorldError, locked=WorldLocked, readonly=readonly,
                               dupsort=[n for n, dup in ix.DBS.items() if dup])
        self.env, self.db = self._owned.env, self._owned.db
        self._lock = threading.RLock()        # one writer at a time
        self._gate = ResizeGate()             # readers run beside it, never beside a resize
        self.commits = 0
        self.resizes = 0
        self.index = ix.WorldIndex(self.db)   # the per-task paths' lookups, in the store
        if not readonly:
            self._owned.check_schema(SCHEMA_VERSION)
            self.transact(lambda txn: self.index.ensure(
                txn, b"index", self.db["meta"], lambda db: self.scan(txn, db)))

    # -- ownership and transactions --------------------------------------------------------------
    def close(self) -> None:
        with self._lock, self._gate.exclusive():
            if self.env is not None:
                self.env.close()
                self.env = None
            self._owned.release()

    @contextmanager
    def read(self) -> Iterator[lmdb.Transaction]:
        """A read transaction: a snapshot of the last commit, taken beside a write in progress
        (a goal's projection is not held up by a task being recorded)."""
        with self._gate.shared():
            if self.env is None:
                raise WorldError("the world store is closed")
            with self.env.begin() as txn:
                yield txn

    @contextmanager
    def write(self) -> Iterator[lmdb.Transaction]:
        """One write transaction (the caller's body may run twice when the map must grow)."""
        with self._lock:
            if self.env is None:
                raise WorldError("the world store is closed")
            with self.env.begin(write=True) as txn:
                yield txn
            self.commits += 1

    def transact(self, fn):
        """Run fn(txn) in a write transaction, growing the map and retrying when it is full."""
        with self._lock:
            for _ in range(8):
                try:
                    with self.write() as txn:
                        return fn(txn)
                except lmdb.MapFullError:
                    with self._gate.exclusive():
                        size = self.env.info()["map_size"]
                        self.env.set_mapsize(size * 2)
                        self.resizes += 1
            raise WorldError("the world store could not grow its map")

    # -- generic access ----------------------------------------------------------------------------
    def get(self, txn, db: str, key: str) -> Any:
        return _unpack(txn.get(self.index.lookup(key), db=self.db[db]))

    def put(self, txn, db: str, key: str, value: Any) -> None:
        if db in ix.WorldIndex.COVERS:           # indexed in the same transaction: atomic
            self.index.put(txn, db, key, value)
        txn.put(self.index.key(txn, key), pack(value), db=self.db[db])   # (a digest if too long)

    def scan(self, txn, db: str) -> Iterator[tuple[str, Any]]:
        for k, v in txn.cursor(db=self.db[db]):
            yield self.index.text(txn, k), _unpack(v)

    def all(self, db: str) -> list[Any]:
        with self.read() as txn:
            return [v for _, v in self.scan(txn, db)]

    def one(self, db: str, key: str) -> Any:
        with self.read() as txn:
            return self.get(txn, db, key)

    def audit(self, txn, op: str, **fields) -> None:
        now = time.time()
        key = f"{int(now * 1e6):020d}-{os.urandom(3).hex()}"
        self.put(txn, "audit", key, {"op": op, "at": now, **fields})

    # -- entities ----------------------------------------------------------------------------------
    def track(self, txn, eid: str, kind: str, name: str, *, at: float, sentiment: float | None,
              episode: str, lam: float) -> dict:
        """One mention of an entity (seed 002 §5.2): count, clocks, sentiment EMA. A mention
        repeated within one episode counts once."""
        ent = self.get(txn, "entities", eid)
        if ent is None:
            ent = {"id": eid, "kind": kind, "name": name, "first_mentioned": at,
                   "last_mentioned": at, "mentions": 0, "sentiment": None, "episodes": [],
                   "forgotten": None}
        if episode and episode in ent["episodes"]:
            return ent
        ent["mentions"] += 1
        ent["last_mentioned"] = max(ent["last_mentioned"], at)
        ent["first_mentioned"] = min(ent["first_mentioned"], at)
        if sentiment is not None:
            prev = ent["sentiment"]
            ent["sentiment"] = sentiment if prev is None else (1 - lam) * prev + lam * sentiment
        if episode:
            ent["episodes"] = (ent["episodes"] + [episode])[-MAX_EPISODES_PER_ENTITY:]
        if ent.get("forgotten"):                 # mentioned again after a forget: known again
            ent["forgotten"] = None
        self.put(txn, "entities", eid, ent)
        return ent

    def edge(self, txn, src: str, label: str, dst: str, *, at: float, episode: str) -> dict:
        eid = stable_id(src, label, dst)
        edge = self.get(txn, "edges", eid)
        if edge is None:
            edge = {"id": eid, "src": src, "label": label, "dst": dst, "created_at": at,
                    "episodes": []}
        if episode and episode not in edge["episodes"]:
            edge["episodes"] = (edge["episodes"] + [episode])[-MAX_FACT_EPISODES:]
        self.put(txn, "edges", eid, edge)
        return edge

    # -- facts and claims --------------------------------------------------------------------------
    def assert_fact(self, txn, subject: str, predicate: str, obj: str, text: str, *,
                    kind: str = "fact", status: str = "verified", valid_at: float,
                    episode: dict, now: float | None = None, scope: str = "") -> dict:
        """Record a fact (or a claim) with its source episode; a fact that contradicts a current
        one (same subject and predicate, another object) invalidates it — never deletes it."""
        now = time.time() if now is None else now
        obj = str(obj)[:MAX_TEXT]
        sp_key = f"{subject}\x00{predicate}" + (f"\x00{scope}" if scope else "")
        ids = self.get(txn, "sp", sp_key) or []
        same = None
        current, later = [], []
        for fid in ids:
            f = self.get(txn, "facts", fid)
            if f is None or f.get("forgotten"):
                continue
            if f["kind"] == kind and f["object"] == obj and f["expired_at"] is None:
                same = f
            elif kind == "fact" and f["kind"] == "fact":
                if f["valid_at"] > valid_at:
                    later.append(f["valid_at"])   # the new fact is older history than this one
                elif f["expired_at"] is None and f["invalid_at"] is None:
                    current.append(f)
        if same is not None:                    # the same fact again: one more source episode
            if episode.get("task") not in [e.get("task") for e in same["episodes"]]:
                same["episodes"] = (same["episodes"] + [episode])[-MAX_FACT_EPISODES:]
                self.put(txn, "facts", same["id"], same)
            return same
        fid = stable_id(subject, predicate, obj, kind, episode.get("task"), valid_at, scope)
        fact = {"id": fid, "subject": subject, "predicate": predicate, "object": obj,
                "text": text[:MAX_TEXT], "kind": kind, "status": status, "valid_at": valid_at,
                "invalid_at": None, "created_at": now, "expired_at": None,
                "episodes": [episode], "invalidated_by": None, "forgotten": None,
                "scope": scope}
        if later:                                # held until the next fact we know of
            fact["invalid_at"] = min(later)
        else:
            for old in current:
                old["invalid_at"] = valid_at
                old["expired_at"] = now
                old["invalidated_by"] = fid
                self.put(txn, "facts", old["id"], old)
        self.put(txn, "facts", fid, fact)
        self.put(txn, "sp", sp_key, ids + [fid])
        return fact

    # -- goals -------------------------------------------------------------------------------------
    def find_goal(self, txn, ref: str) -> dict:
        ref = (ref or "").strip()
        if not ref:
            raise WorldError("give a goal id")
        exact = self.get(txn, "goals", ref)
        if exact is not None:
            return exact
        hits = [g for k, g in self.scan(txn, "goals") if k.startswith(ref)]
        if len(hits) == 1:
            return hits[0]
        if not hits:
            raise WorldError(f"no goal {ref!r} (see `artoo goals ls`)")
        raise WorldError(f"{ref!r} matches {len(hits)} goals; give more of the id")

    def find_entity(self, txn, ref: str) -> dict:
        ref = (ref or "").strip()
        if not ref:
            raise WorldError("give an entity (id such as file:notes.txt, or a name)")
        ent = self.get(txn, "entities", ref)
        if ent is not None:
            return ent
        hits = [e for _, e in self.scan(txn, "entities")
                if e["name"] == ref or e["name"].lower() == ref.lower()
                or e["id"].lower() == ref.lower()]
        if len(hits) == 1:
            return hits[0]
        if not hits:
            raise WorldError(f"no entity {ref!r} (see `artoo world entities`)")
        raise WorldError(f"{ref!r} names {len(hits)} entities: "
                         + ", ".join(e["id"] for e in hits[:5]) + "; give the id")

    # -- listing ----------------------------------------------------------------------------------
    def stats(self) -> dict:
        with self.read() as txn:
            out = {n: txn.stat(self.db[n])["entries"] for n in DBS
                   if n not in ("meta", "sp") and n not in ix.DBS}
        out.update(commits=self.commits, resizes=self.resizes)
        return out


def valid_at(fact: dict, t: float) -> bool:
    """The fact held in the world at time t (valid time)."""
    return held(fact["valid_at"], fact["invalid_at"], t)


def held(valid_from: float, invalid_from: float | None, t: float) -> bool:
    """Valid time [valid_from, invalid_from) contains t (a record, or an index's copy of it)."""
    return valid_from <= t and (invalid_from is None or t < invalid_from)


def known_at(fact: dict, t: float) -> bool:
    """artoo believed the fact at time t (system time)."""
    return fact["created_at"] <= t and (fact["expired_at"] is None or t < fact["expired_at"])
