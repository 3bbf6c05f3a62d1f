"""The MKCT store: one LMDB environment with named sub-databases (seeds/000 §4.6) and one writer.

Sub-databases (keys are 16 bytes: a Megram key `id16`, a tag key `tag16` = hash(space, entity)):

  megrams    id16 → msgpack record, immutable once written (event sourcing: history is appended,
             never edited; a correction is a new negative-σ Megram)
  tags       tag16 → 64-byte packed entries, dupsort+dupfixed: the (space, entity) index. Each entry
             carries the Megram's *effective* (created, recalled, f, σ, k, level, flags), so the
             potentials of a 100k-Megram tag are one GET_MULTIPLE read into numpy, no record reads
  levels     level letter → created_µs(8, big-endian)+id16+tag16, dupsort+dupfixed: the level
             index (counts, rule scans); time first so new Megrams append instead of touching a
             random page each
  recall     id16 → last_recalled_at (f8): the only clock a query moves
  lifecycle  id16 → msgpack of state changes: demotion (level, k, when, why), consolidation (the
             rule a source was distilled into), a rule's sources. Kept apart from the record so the
             record stays the immutable event while the Dreamer's decisions are still recorded
  tagnames   tag16 → msgpack [space, entity]
  meta       name → msgpack (schema version)

Concurrency: every write goes through one writer thread that batches queued operations into one
transaction (group commit, fsync'd by LMDB's default sync mode before anyone is told "done"), so an
acknowledged write survives SIGKILL and a killed write leaves nothing half-written. Readers use LMDB
snapshots and never wait for the writer; the only exclusive moment is growing the map on
MapFullError (LMDB requires no live transaction in the process while it resizes).

Large tags' packed entries are cached in memory (LRU, bounded in bytes), so the planner's repeated
QueryMK on a 100k-Megram tag is one numpy pass: after each commit the writer re-reads the cached tags
it touched before acknowledging anything, and a query's read that raced a commit to its tag is not
cached.

This module is the environment, the writer and the transaction helpers; the key and entry codec is
layout.py, the queries and operator operations are queries.py (mixed into MemoryStore).
"""
from __future__ import annotations

import logging
import math
import queue
import threading
import time
from collections import OrderedDict, deque
from concurrent.futures import Future
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Iterator

import lmdb
import msgpack
import numpy as np

from protocol.envelope import pack
from protocol.messages import Megram
from services.runtime.lmdbstore import OwnedEnv, ResizeGate

from . import mkct
from .layout import (DBS, F8, FLAGS_AT, FUTURE_SKEW_S, LEVEL_AT, MAX_ID_CHARS, MAX_TAG_CHARS,
                     SCHEMA_VERSION, StoreError, StoreLocked, id_key, is_hex, level_value, new_id,
                     pack_entry, tag_key, unpack_entry)
from .mkct import (ENTRY_BYTES, FLAG_CONSOLIDATED, FLAG_LIFECYCLE, KEY_BYTES, KEYED_ENTRY_DTYPE,
                   LEVEL_CODE, LEVELS)
from .queries import Queries

log = logging.getLogger("artoo.memory.store")


class _Op:
    __slots__ = ("fn", "weight", "future")

    def __init__(self, fn: Callable[[Any], Any], weight: int):
        self.fn = fn
        self.weight = weight
        self.future: Future = Future()


_STOP = object()


# ---------------------------------------------------------------------------------------------
# the store
# ---------------------------------------------------------------------------------------------

class MemoryStore(Queries):
    """The LMDB MKCT store. Public methods are safe from any thread."""

    def __init__(self, path: Path | str, map_size: int = 1 << 30, *, readonly: bool = False,
                 write_batch: int = 20_000, max_content_chars: int = 4000,
                 ignore_below: float = mkct.IGNORE_BELOW, band: float = mkct.DECISION_BAND,
                 cache_bytes: int = 64 << 20, cache_min_entries: int = 2048):
        self.path = Path(path)
        self.readonly = readonly
        self.write_batch = max(1, write_batch)
        self.max_content_chars = max_content_chars
        self.ignore_below = ignore_below
        self.band = band
        self._owned = OwnedEnv(self.path, what="memory", dbs=DBS, map_size=map_size,
                               error=StoreError, locked=StoreLocked, readonly=readonly,
                               dup=("tags", "levels"), max_readers=512)
        self.env, self.db = self._owned.env, self._owned.db
        self._gate = ResizeGate()
        self._queue: queue.SimpleQueue = queue.SimpleQueue()
        self._writer: threading.Thread | None = None
        self._closed = False
        self.commits = 0
        self.megrams_written = 0
        self.resizes = 0
        # tag cache: tag16 -> read-only entries; see the module docstring
        self.cache_bytes = cache_bytes
        self.cache_min_entries = cache_min_entries
        self._cache: OrderedDict[bytes, np.ndarray] = OrderedDict()
        self._cache_used = 0
        self._cache_lock = threading.Lock()
        self._epoch = 0                                    # commits so far
        self._recent_touches: deque = deque(maxlen=256)    # (epoch, tags touched by that commit)
        self._touched: set[bytes] = set()                  # writer thread: tags of this batch
        self.cache_hits = 0
        if not readonly:
            self._check_schema()
            self._writer = threading.Thread(target=self._writer_main, name="memory-writer",
                                            daemon=True)
            self._writer.start()

    # -- lifecycle -------------------------------------------------------------------------------
    def _check_schema(self) -> None:
        self._owned.check_schema(SCHEMA_VERSION)

    def close(self) -> None:
        """Finish queued writes, then close the environment and release the owner lock."""
        if self._closed:
            return
        self._closed = True
        if self._writer is not None:
            self._queue.put(_STOP)
            self._writer.join(60)
        self.env.close()
        self._owned.release()

    # -- reading -------------------------------------------------------------------------------
    @contextmanager
    def read(self) -> Iterator[lmdb.Transaction]:
        with self._gate.shared():
            txn = self.env.begin()
            try:
                yield txn
            finally:
                txn.abort()

    def entries(self, txn, tag16: bytes) -> np.ndarray:
        """All index entries of one tag as a structured array (KEYED_ENTRY_DTYPE)."""
        cur = txn.cursor(db=self.db["tags"])
        buf = cur.getmulti([tag16], dupdata=True, dupfixed_bytes=ENTRY_BYTES, keyfixed=True)
        return np.frombuffer(buf, dtype=KEYED_ENTRY_DTYPE) if len(buf) else \
            np.empty(0, dtype=KEYED_ENTRY_DTYPE)

    def tag_entries(self, tag16: bytes) -> np.ndarray:
        """One tag's entries, from the cache when no commit has touched the tag since."""
        with self._cache_lock:
            epoch = self._epoch
            cached = self._cache.get(tag16)
            if cached is not None:
                self._cache.move_to_end(tag16)
                self.cache_hits += 1
                return cached
        with self.read() as txn:
            arr = self.entries(txn, tag16)
        if len(arr) >= self.cache_min_entries and arr.nbytes <= self.cache_bytes // 4:
            with self._cache_lock:
                if not self._touched_since(epoch, tag16) and tag16 not in self._cache:
                    self._cache_put(tag16, arr)
        return arr

    def _cache_put(self, tag16: bytes, arr: np.ndarray) -> None:
        """Cache a tag's entries read-only, evicting the oldest beyond the budget (lock held)."""
        arr.flags.writeable = False
        self._cache[tag16] = arr
        self._cache_used += arr.nbytes
        while self._cache_used > self.cache_bytes:
            _, old = self._cache.popitem(last=False)
            self._cache_used -= old.nbytes

    def _touched_since(self, epoch: int, tag16: bytes) -> bool:
        """Whether a commit after `epoch` touched the tag (True when that is no longer known)."""
        if self._epoch == epoch:
            return False
        if not self._recent_touches or self._recent_touches[0][0] > epoch + 1:
            return True
        return any(e > epoch and tag16 in tags for e, tags in self._recent_touches)

    def _after_commit(self, tags: set[bytes]) -> None:
        """Writer thread, after a commit: cached tags it touched are re-read now, off the queries'
        path, so the planner's next QueryMK on a large tag GGS just wrote to stays a cache hit."""
        with self._cache_lock:
            self._epoch += 1
            self._recent_touches.append((self._epoch, frozenset(tags)))
            stale = [t for t in tags if t in self._cache]
            for tag16 in stale:
                self._cache_used -= self._cache.pop(tag16).nbytes
        if not stale:
            return
        with self.read() as txn:                 # no other commit can happen meanwhile
            fresh = [(t, self.entries(txn, t)) for t in stale]
        with self._cache_lock:
            for tag16, arr in fresh:
                if len(arr) and tag16 not in self._cache:
                    self._cache_put(tag16, arr)

    def scan(self, txn, keys_per_chunk: int = 4096) -> Iterator[np.ndarray]:
        """Every index entry of the store, in tag order, in chunks of whole tags (the Dreamer)."""
        keys_cur = txn.cursor(db=self.db["tags"])
        data_cur = txn.cursor(db=self.db["tags"])
        batch: list[bytes] = []
        for key in keys_cur.iternext_nodup(keys=True, values=False):
            batch.append(key)
            if len(batch) >= keys_per_chunk:
                yield self._multi(data_cur, batch)
                batch = []
        if batch:
            yield self._multi(data_cur, batch)

    @staticmethod
    def _multi(cur, keys: list[bytes]) -> np.ndarray:
        buf = cur.getmulti(keys, dupdata=True, dupfixed_bytes=ENTRY_BYTES, keyfixed=True)
        return np.frombuffer(buf, dtype=KEYED_ENTRY_DTYPE)

    def tag_names(self, txn, tag16: bytes) -> tuple[str, str] | None:
        raw = txn.get(tag16, db=self.db["tagnames"])
        if raw is None:
            return None
        space, entity = msgpack.unpackb(raw)
        return space, entity

    def record(self, txn, id16: bytes, entry: np.void | None = None, now: float | None = None
               ) -> Megram | None:
        """The Megram as it is now: the immutable record with the effective level/k, its recall
        clock, consolidation and (when `entry` and `now` are given) its live contributions."""
        raw = txn.get(id16, db=self.db["megrams"])
        if raw is None:
            return None
        mid, level, created, space, entity, content, state, f, sigma, k = msgpack.unpackb(raw)
        life = self.lifecycle(txn, id16)
        recalled = txn.get(id16, db=self.db["recall"])
        m = Megram(id=mid, level=life.get("level", level), created_at=created,
                   last_recalled_at=F8.unpack(recalled)[0] if recalled else None, space=space,
                   entity=entity, content=content, state=state, f=f, sigma=sigma,
                   k=life.get("k", k), consolidated_into=life.get("consolidated_into", ""))
        if entry is not None and now is not None:
            w = math.exp(-float(entry["k"]) * max(0.0, now - max(float(entry["created"]),
                                                                  float(entry["recalled"])))
                         / mkct.SECONDS_PER_DAY)
            m.live_attention = round(abs(float(entry["f"])) * w, 6)
            m.live_decision = round(float(entry["sigma"]) * float(entry["f"]) * w, 6)
        return m

    def lifecycle(self, txn, id16: bytes) -> dict:
        raw = txn.get(id16, db=self.db["lifecycle"])
        return msgpack.unpackb(raw) if raw else {}

    def find_entry(self, txn, tag16: bytes, id16: bytes) -> bytes | None:
        cur = txn.cursor(db=self.db["tags"])
        if cur.set_range_dup(tag16, id16):
            value = cur.value()
            if value[:KEY_BYTES] == id16:
                return value
        return None

    def resolve(self, txn, ref: str, limit: int = 5) -> list[bytes]:
        """Keys matching an exact id, or the ids starting with a hex prefix (at most `limit`)."""
        ref = ref.strip().lower()
        if not ref:
            return []
        exact = id_key(ref)
        if txn.get(exact, db=self.db["megrams"]) is not None:
            return [exact]
        if not is_hex(ref) or len(ref) >= 32:
            return []
        start = bytes.fromhex(ref[: len(ref) // 2 * 2])
        cur = txn.cursor(db=self.db["megrams"])
        found: list[bytes] = []
        if cur.set_range(start):
            for key in cur.iternext(keys=True, values=False):
                if not key.hex().startswith(ref):
                    if key[: len(start)] != start:
                        break
                    continue
                found.append(key)
                if len(found) >= limit:
                    break
        return found

    # -- writing -------------------------------------------------------------------------------
    def submit(self, fn: Callable[[Any], Any], weight: int = 1) -> Future:
        """Queue `fn(txn)` for the writer thread; the future resolves after the commit."""
        if self.readonly:
            raise StoreError("the store is open read-only")
        if self._closed:
            raise StoreError("the store is closed")
        op = _Op(fn, weight)
        self._queue.put(op)
        return op.future

    def call(self, fn: Callable[[Any], Any], weight: int = 1, timeout: float | None = 60.0):
        return self.submit(fn, weight).result(timeout)

    def _writer_main(self) -> None:
        stopping = False
        while not stopping:
            first = self._queue.get()
            if first is _STOP:
                break
            batch, weight = [first], first.weight
            while weight < self.write_batch:
                try:
                    nxt = self._queue.get_nowait()
                except queue.Empty:
                    break
                if nxt is _STOP:
                    stopping = True
                    break
                batch.append(nxt)
                weight += nxt.weight
            self._commit(batch)

    def _commit(self, batch: list[_Op]) -> None:
        while True:
            results: list[tuple[bool, Any]] = []
            self._touched = set()
            txn = self.env.begin(write=True)
            try:
                for op in batch:
                    child = self.env.begin(write=True, parent=txn)
                    try:
                        value = op.fn(child)
                        child.commit()
                        results.append((True, value))
                    except lmdb.MapFullError:
                        child.abort()
                        raise
                    except Exception as exc:  # one bad operation must not sink the batch
                        child.abort()
                        results.append((False, exc))
                txn.commit()
            except lmdb.MapFullError:
                txn.abort()
                self._grow()
                continue
            except Exception as exc:  # the commit itself failed (disk error): fail the batch
                txn.abort()
                log.exception("memory commit failed")
                for op in batch:
                    op.future.set_exception(StoreError(f"commit failed: {exc}"))
                return
            break
        self.commits += 1
        self._after_commit(self._touched)     # before anyone hears "done": read-your-writes
        for op, (ok, value) in zip(batch, results):
            if ok:
                op.future.set_result(value)
            else:
                op.future.set_exception(value)

    def _grow(self) -> None:
        with self._gate.exclusive():
            size = self.env.info()["map_size"]
            self.env.set_mapsize(size * 2)
            self.resizes += 1
            log.info("memory map grown to %d MiB", size * 2 >> 20)

    # -- transaction-level mutations (run on the writer thread) --------------------------------
    def _put(self, txn, rec: list, recalled: float, lifecycle: dict | None = None) -> bool:
        """Insert one record and its index entries; False (nothing changed) if the id exists."""
        mid, level, created, space, entity, _content, _state, f, sigma, k = rec
        id16 = id_key(mid)
        if not txn.put(id16, pack(rec), overwrite=False, db=self.db["megrams"]):
            return False
        tag16 = tag_key(space, entity)
        self._touched.add(tag16)
        flags = 0
        if lifecycle:
            flags |= FLAG_LIFECYCLE
            txn.put(id16, pack(lifecycle), db=self.db["lifecycle"])
        txn.put(tag16, pack_entry(id16, created, recalled, f, sigma, k, LEVEL_CODE[level], flags),
                dupdata=True, db=self.db["tags"])
        txn.put(level.encode(), level_value(created, id16, tag16), dupdata=True,
                db=self.db["levels"])
        txn.put(tag16, pack([space, entity]), overwrite=False, db=self.db["tagnames"])
        if recalled:
            txn.put(id16, F8.pack(recalled), db=self.db["recall"])
        return True

    def _delete(self, txn, tag16: bytes, entry: bytes) -> bool:
        """Delete one Megram given its exact index entry. If the entry changed since it was read
        (recalled, demoted...), nothing is deleted: the caller's decision was made on stale data."""
        if not txn.delete(tag16, entry, db=self.db["tags"]):
            return False
        self._touched.add(tag16)
        id16 = entry[:KEY_BYTES]
        level = LEVELS[entry[LEVEL_AT]]
        txn.delete(level.encode(), level_value(unpack_entry(entry)[1], id16, tag16),
                   db=self.db["levels"])
        txn.delete(id16, db=self.db["megrams"])
        if unpack_entry(entry)[2]:                       # recalled: a recall key exists
            txn.delete(id16, db=self.db["recall"])
        if entry[FLAGS_AT] & FLAG_LIFECYCLE:
            txn.delete(id16, db=self.db["lifecycle"])
        if txn.get(tag16, db=self.db["tags"]) is None:
            txn.delete(tag16, db=self.db["tagnames"])
        return True

    def _rewrite(self, txn, tag16: bytes, entry: bytes, **changes) -> bytes | None:
        """Replace an index entry with changed fields (exact-match, like _delete)."""
        fields = list(unpack_entry(entry))
        names = ("id", "created", "recalled", "f", "sigma", "k", "level", "flags")
        for key, value in changes.items():
            fields[names.index(key)] = value
        new = pack_entry(*fields)
        if not txn.delete(tag16, entry, db=self.db["tags"]):
            return None
        self._touched.add(tag16)
        txn.put(tag16, new, dupdata=True, db=self.db["tags"])
        old_level, new_level = entry[LEVEL_AT], new[LEVEL_AT]
        if old_level != new_level:
            value = level_value(fields[1], entry[:KEY_BYTES], tag16)
            txn.delete(LEVELS[old_level].encode(), value, db=self.db["levels"])
            txn.put(LEVELS[new_level].encode(), value, dupdata=True, db=self.db["levels"])
        return new

    def _touch_recall(self, txn, id16: bytes, ts: float) -> None:
        txn.put(id16, F8.pack(ts), db=self.db["recall"])

    def _annotate(self, txn, tag16: bytes, entry: bytes, record: dict, **entry_changes
                  ) -> bytes | None:
        """Record a state change of a Megram: merge `record` into its lifecycle record and rewrite
        its index entry (exact-match) with `entry_changes` and the lifecycle flag. The immutable
        Megram record itself is never touched."""
        flags = entry[FLAGS_AT] | FLAG_LIFECYCLE | entry_changes.pop("flags", 0)
        new = self._rewrite(txn, tag16, entry, flags=flags, **entry_changes)
        if new is None:
            return None
        id16 = entry[:KEY_BYTES]
        life = self.lifecycle(txn, id16) if entry[FLAGS_AT] & FLAG_LIFECYCLE else {}
        life.update(record)
        txn.put(id16, pack(life), db=self.db["lifecycle"])
        return new

    def _demote(self, txn, tag16: bytes, entry: bytes, k: float, now: float, why: str,
                **detail) -> bool:
        """Trust bankruptcy: a C rule becomes K with a decay rate, its decay clock restarted now
        (else a long-lived rule would vanish at once instead of decaying from its demotion)."""
        new = self._annotate(txn, tag16, entry, {"level": "K", "k": k, "demoted_at": now,
                                                 "demoted_by": why, **detail},
                             level=LEVEL_CODE["K"], k=k, recalled=now)
        if new is None:
            return False
        self._touch_recall(txn, entry[:KEY_BYTES], now)
        return True

    def _mark_consolidated(self, txn, tag16: bytes, id16: bytes, rule_id: str) -> bool:
        current = self.find_entry(txn, tag16, id16)
        if current is None or current[FLAGS_AT] & FLAG_CONSOLIDATED:
            return False
        return self._annotate(txn, tag16, current, {"consolidated_into": rule_id},
                              flags=FLAG_CONSOLIDATED) is not None

    # -- validation ------------------------------------------------------------------------------
    def prepare(self, m: Megram, default_ts: float, seed: bytes | None = None) -> tuple[list, float]:
        """Validate a Megram for writing; returns (record, recalled). Raises ValueError."""
        now = time.time()
        space, entity = m.space.strip(), m.entity.strip()
        if not space or not entity:
            raise ValueError("space and entity must be non-empty")
        if len(space) > MAX_TAG_CHARS or len(entity) > MAX_TAG_CHARS:
            raise ValueError(f"space/entity longer than {MAX_TAG_CHARS} characters")
        for name, value, lo, hi in (("f", m.f, 0.0, 1.0), ("sigma", m.sigma, -1.0, 1.0),
                                    ("k", m.k, 0.0, 1000.0)):
            if not math.isfinite(value) or not lo <= value <= hi:
                raise ValueError(f"{name}={value} outside [{lo}, {hi}]")
        created = m.created_at or default_ts
        if not math.isfinite(created) or created < 0:
            raise ValueError(f"created_at={m.created_at} is not a valid time")
        if created > now + FUTURE_SKEW_S:
            raise ValueError(f"created_at={m.created_at} is in the future")
        recalled = m.last_recalled_at or 0.0
        if not math.isfinite(recalled) or recalled < 0 or recalled > now + FUTURE_SKEW_S:
            raise ValueError(f"last_recalled_at={m.last_recalled_at} is not a valid time")
        mid = m.id.strip() or new_id(seed)
        if len(mid) > MAX_ID_CHARS:
            raise ValueError(f"id longer than {MAX_ID_CHARS} characters")
        content = m.content
        if len(content) > self.max_content_chars:
            content = content[: self.max_content_chars - 1] + "…"
        rec = [mid, m.level, float(created), space, entity, content, m.state, float(m.f),
               float(m.sigma), float(m.k)]
        return rec, float(recalled)

    # -- public operations -------------------------------------------------------------------------
    def write(self, megrams: list[Megram], *, default_ts: float | None = None,
              seed: str = "") -> tuple[list[str], list[str]]:
        """Durably write Megrams (returns after the commit). Returns (ids, errors): invalid Megrams
        are reported, the valid ones are written. Re-writing an existing id changes nothing."""
        default_ts = default_ts or time.time()
        prepared, errors, ids = [], [], []
        for i, m in enumerate(megrams):
            try:
                rec, recalled = self.prepare(m, default_ts,
                                             f"{seed}:{i}".encode() if seed else None)
            except ValueError as exc:
                errors.append(f"megram {i} ({m.space}/{m.entity}): {exc}")
                continue
            prepared.append((rec, recalled))
            ids.append(rec[0])
        if prepared:
            def apply(txn):
                return sum(self._put(txn, rec, recalled) for rec, recalled in prepared)
            self.megrams_written += self.call(apply, weight=len(prepared))
        return ids, errors
