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
"""
from __future__ import annotations

import fcntl
import hashlib
import logging
import math
import os
import queue
import struct
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

from protocol.messages import Megram, SopRecord
from services.runtime.mkct import ENV_LOCAL, GLOBAL_USER

from . import mkct
from .mkct import (ENTRY_BYTES, ENTRY_DTYPE, FLAG_CONSOLIDATED, FLAG_LIFECYCLE, KEY_BYTES,
                   KEYED_ENTRY_DTYPE, LEVEL_CODE, LEVELS)

log = logging.getLogger("artoo.memory.store")

SCHEMA_VERSION = 2
_ENTRY = struct.Struct("<16sdddddBB6x")
_LEVEL_AT = 56            # byte offsets of the level code and the flags inside a packed entry
_FLAGS_AT = 57
assert _ENTRY.size == ENTRY_BYTES
_F8 = struct.Struct("<d")
_MAX_TAG_CHARS = 1000
_MAX_ID_CHARS = 128
_FUTURE_SKEW_S = 300.0
_DBS = ("megrams", "tags", "levels", "recall", "lifecycle", "tagnames", "meta")


class StoreError(Exception):
    """A store operation that cannot be done; the message says why."""


class StoreLocked(StoreError):
    """Another process owns this memory store."""


# ---------------------------------------------------------------------------------------------
# ids and keys
# ---------------------------------------------------------------------------------------------

def new_id(seed: bytes | None = None) -> str:
    """A 32-hex id: random, or derived from a seed so that a work message re-delivered after a
    restart writes the same Megrams instead of new copies. Random bits first keep short prefixes
    (as the CLI shows them) unique."""
    raw = hashlib.blake2b(seed, digest_size=16).digest() if seed is not None else os.urandom(16)
    return raw.hex()


def _is_hex(text: str) -> bool:
    try:
        int(text, 16)
        return True
    except ValueError:
        return False


def id_key(megram_id: str) -> bytes:
    """The 16-byte key of an id: its bytes for 32-hex ids, a hash for any other string."""
    if len(megram_id) == 32 and _is_hex(megram_id):
        return bytes.fromhex(megram_id)
    return hashlib.blake2b(megram_id.encode(), digest_size=KEY_BYTES).digest()


def tag_key(space: str, entity: str) -> bytes:
    return hashlib.blake2b(f"{space}\x00{entity}".encode(), digest_size=KEY_BYTES).digest()


_US = struct.Struct(">Q")


def level_value(created: float, id16: bytes, tag16: bytes) -> bytes:
    return _US.pack(max(0, int(created * 1e6))) + id16 + tag16


def pack_entry(id16: bytes, created: float, recalled: float, f: float, sigma: float, k: float,
               level: int, flags: int) -> bytes:
    return _ENTRY.pack(id16, created, recalled, f, sigma, k, level, flags)


def unpack_entry(raw: bytes) -> tuple:
    return _ENTRY.unpack(raw)



# ---------------------------------------------------------------------------------------------
# a gate that lets readers share the environment and a map resize have it alone
# ---------------------------------------------------------------------------------------------

class _ResizeGate:
    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._readers = 0
        self._resizing = False

    @contextmanager
    def shared(self):
        with self._cond:
            while self._resizing:
                self._cond.wait()
            self._readers += 1
        try:
            yield
        finally:
            with self._cond:
                self._readers -= 1
                if not self._readers:
                    self._cond.notify_all()

    @contextmanager
    def exclusive(self):
        with self._cond:
            while self._resizing:
                self._cond.wait()
            self._resizing = True
            while self._readers:
                self._cond.wait()
        try:
            yield
        finally:
            with self._cond:
                self._resizing = False
                self._cond.notify_all()


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

class MemoryStore:
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
        self._lock_fd: int | None = None
        if not readonly:
            self.path.mkdir(parents=True, exist_ok=True)
            self._lock_fd = self._acquire_owner_lock()
        elif not (self.path / "data.mdb").exists():
            raise StoreError(f"no memory store at {self.path}")
        try:
            self.env = lmdb.open(str(self.path), map_size=map_size, max_dbs=len(_DBS) + 1,
                                 subdir=True, readonly=readonly, sync=True, metasync=True,
                                 max_readers=512, lock=True)
        except lmdb.Error as exc:
            self._release_owner_lock()
            raise StoreError(f"cannot open the memory store at {self.path}: {exc}") from exc
        dup = {"tags", "levels"}
        self.db = {name: self.env.open_db(name.encode(), create=not readonly,
                                          dupsort=name in dup, dupfixed=name in dup)
                   for name in _DBS}
        self._gate = _ResizeGate()
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
    def _acquire_owner_lock(self) -> int:
        fd = os.open(self.path / "owner.lock", os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise StoreLocked(f"another memory process owns {self.path}; "
                              f"stop it first (artoo down) or use another ARTOO_HOME") from None
        return fd

    def _release_owner_lock(self) -> None:
        if self._lock_fd is not None:
            os.close(self._lock_fd)
            self._lock_fd = None

    def _check_schema(self) -> None:
        with self.env.begin(write=True, db=self.db["meta"]) as txn:
            raw = txn.get(b"schema")
            if raw is None:
                txn.put(b"schema", msgpack.packb(SCHEMA_VERSION))
            elif msgpack.unpackb(raw) != SCHEMA_VERSION:
                raise StoreError(f"memory store schema {msgpack.unpackb(raw)} is not "
                                 f"{SCHEMA_VERSION}")

    def close(self) -> None:
        """Finish queued writes, then close the environment and release the owner lock."""
        if self._closed:
            return
        self._closed = True
        if self._writer is not None:
            self._queue.put(_STOP)
            self._writer.join(60)
        self.env.close()
        self._release_owner_lock()

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
                   last_recalled_at=_F8.unpack(recalled)[0] if recalled else None, space=space,
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
        if not _is_hex(ref) or len(ref) >= 32:
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
        if not txn.put(id16, msgpack.packb(rec), overwrite=False, db=self.db["megrams"]):
            return False
        tag16 = tag_key(space, entity)
        self._touched.add(tag16)
        flags = 0
        if lifecycle:
            flags |= FLAG_LIFECYCLE
            txn.put(id16, msgpack.packb(lifecycle), db=self.db["lifecycle"])
        txn.put(tag16, pack_entry(id16, created, recalled, f, sigma, k, LEVEL_CODE[level], flags),
                dupdata=True, db=self.db["tags"])
        txn.put(level.encode(), level_value(created, id16, tag16), dupdata=True,
                db=self.db["levels"])
        txn.put(tag16, msgpack.packb([space, entity]), overwrite=False, db=self.db["tagnames"])
        if recalled:
            txn.put(id16, _F8.pack(recalled), db=self.db["recall"])
        return True

    def _delete(self, txn, tag16: bytes, entry: bytes) -> bool:
        """Delete one Megram given its exact index entry. If the entry changed since it was read
        (recalled, demoted...), nothing is deleted: the caller's decision was made on stale data."""
        if not txn.delete(tag16, entry, db=self.db["tags"]):
            return False
        self._touched.add(tag16)
        id16 = entry[:KEY_BYTES]
        level = LEVELS[entry[_LEVEL_AT]]
        txn.delete(level.encode(), level_value(unpack_entry(entry)[1], id16, tag16),
                   db=self.db["levels"])
        txn.delete(id16, db=self.db["megrams"])
        if unpack_entry(entry)[2]:                       # recalled: a recall key exists
            txn.delete(id16, db=self.db["recall"])
        if entry[_FLAGS_AT] & FLAG_LIFECYCLE:
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
        old_level, new_level = entry[_LEVEL_AT], new[_LEVEL_AT]
        if old_level != new_level:
            value = level_value(fields[1], entry[:KEY_BYTES], tag16)
            txn.delete(LEVELS[old_level].encode(), value, db=self.db["levels"])
            txn.put(LEVELS[new_level].encode(), value, dupdata=True, db=self.db["levels"])
        return new

    def _touch_recall(self, txn, id16: bytes, ts: float) -> None:
        txn.put(id16, _F8.pack(ts), db=self.db["recall"])

    def _annotate(self, txn, tag16: bytes, entry: bytes, record: dict, **entry_changes
                  ) -> bytes | None:
        """Record a state change of a Megram: merge `record` into its lifecycle record and rewrite
        its index entry (exact-match) with `entry_changes` and the lifecycle flag. The immutable
        Megram record itself is never touched."""
        flags = entry[_FLAGS_AT] | FLAG_LIFECYCLE | entry_changes.pop("flags", 0)
        new = self._rewrite(txn, tag16, entry, flags=flags, **entry_changes)
        if new is None:
            return None
        id16 = entry[:KEY_BYTES]
        life = self.lifecycle(txn, id16) if entry[_FLAGS_AT] & FLAG_LIFECYCLE else {}
        life.update(record)
        txn.put(id16, msgpack.packb(life), db=self.db["lifecycle"])
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
        if current is None or current[_FLAGS_AT] & FLAG_CONSOLIDATED:
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
        if len(space) > _MAX_TAG_CHARS or len(entity) > _MAX_TAG_CHARS:
            raise ValueError(f"space/entity longer than {_MAX_TAG_CHARS} characters")
        for name, value, lo, hi in (("f", m.f, 0.0, 1.0), ("sigma", m.sigma, -1.0, 1.0),
                                    ("k", m.k, 0.0, 1000.0)):
            if not math.isfinite(value) or not lo <= value <= hi:
                raise ValueError(f"{name}={value} outside [{lo}, {hi}]")
        created = m.created_at or default_ts
        if not math.isfinite(created) or created < 0:
            raise ValueError(f"created_at={m.created_at} is not a valid time")
        if created > now + _FUTURE_SKEW_S:
            raise ValueError(f"created_at={m.created_at} is in the future")
        recalled = m.last_recalled_at or 0.0
        if not math.isfinite(recalled) or recalled < 0 or recalled > now + _FUTURE_SKEW_S:
            raise ValueError(f"last_recalled_at={m.last_recalled_at} is not a valid time")
        mid = m.id.strip() or new_id(seed)
        if len(mid) > _MAX_ID_CHARS:
            raise ValueError(f"id longer than {_MAX_ID_CHARS} characters")
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

    def query_c(self, space: str, entity: str, now: float | None = None,
                recall: bool = True) -> list[SopRecord]:
        """C/T rules on one tag pair; each returned rule's recall clock is reset (seeds/000 §4.5)."""
        now = now or time.time()
        tag16 = tag_key(space, entity)
        sops: list[tuple[bytes, SopRecord]] = []
        with self.read() as txn:
            arr = self.entries(txn, tag16)
            rules = arr[np.isin(arr["level"], mkct.RULE_LEVELS)]
            for row in rules[np.argsort(-rules["created"], kind="stable")]:
                m = self.record(txn, bytes(row["id"]))
                if m is not None:
                    sops.append((bytes(row["id"]), SopRecord(
                        id=m.id, space=m.space, entity=m.entity, content=m.content,
                        sigma=m.sigma, state=m.state, level=m.level)))
        if recall and sops:
            def reset(txn):
                for id16, _ in sops:
                    if self._rewrite_current(txn, tag16, id16, recalled=now) is not None:
                        self._touch_recall(txn, id16, now)
            self.call(reset, weight=len(sops))
        return [sop for _, sop in sops]

    def _rewrite_current(self, txn, tag16: bytes, id16: bytes, **changes) -> bytes | None:
        current = self.find_entry(txn, tag16, id16)
        return self._rewrite(txn, tag16, current, **changes) if current else None

    def query_mk(self, space: str, entity: str, now: float | None = None,
                 top_n: int = 10) -> tuple[mkct.Potentials, list[Megram]]:
        """Live dual-channel potentials of a tag pair and its strongest contributing Megrams."""
        now = now or time.time()
        arr = self.tag_entries(tag_key(space, entity))
        if not len(arr):
            return mkct.Potentials(0.0, 0.0, "Ignore"), []
        att, dec = mkct.contributions(arr, now)
        attention, decision = float(att.sum()), float(dec.sum())
        pot = mkct.Potentials(attention, decision,
                              mkct.classify(attention, decision, self.ignore_below, self.band))
        with self.read() as txn:
            top = [self.record(txn, bytes(arr[i]["id"]), arr[i], now)
                   for i in mkct.strongest(att, top_n)]
        return pot, [m for m in top if m is not None]

    def recent(self, space: str, entity: str, n: int = 10, now: float | None = None) -> list[Megram]:
        """Newest unconsolidated M/K Megrams of a tag pair (does not touch recall clocks)."""
        now = now or time.time()
        with self.read() as txn:
            arr = self.entries(txn, tag_key(space, entity))
            keep = arr[np.isin(arr["level"], mkct.DECAYING_LEVELS)
                       & ((arr["flags"] & FLAG_CONSOLIDATED) == 0)]
            order = np.argsort(-keep["created"], kind="stable")[: max(0, n)]
            out = [self.record(txn, bytes(keep[i]["id"]), keep[i], now) for i in order]
        return [m for m in out if m is not None]

    def tag_megrams(self, space: str, entity: str, n: int = 50,
                    now: float | None = None) -> list[Megram]:
        """Every level of one tag pair, newest first, with live contributions."""
        now = now or time.time()
        with self.read() as txn:
            arr = self.entries(txn, tag_key(space, entity))
            order = np.argsort(-arr["created"], kind="stable")[: max(0, n)]
            out = [self.record(txn, bytes(arr[i]["id"]), arr[i], now) for i in order]
        return [m for m in out if m is not None]

    def rules(self, now: float | None = None, limit: int = 1000) -> list[Megram]:
        """All C/T rules (for stats and the CLI)."""
        out: list[Megram] = []
        with self.read() as txn:
            cur = txn.cursor(db=self.db["levels"])
            for letter in (b"C", b"T"):
                if not cur.set_key(letter):
                    continue
                for value in cur.iternext_dup():
                    m = self.record(txn, value[8:8 + KEY_BYTES])
                    if m is not None:
                        out.append(m)
                    if len(out) >= limit:
                        return out
        return out

    def groups(self, now: float | None = None, space: str = "", entity: str = "",
               level: str | None = None, limit: int = 50) -> tuple[list[dict], int]:
        """Per (space, entity): counts per level, potentials and action, strongest first.
        `space`/`entity` filter by prefix. Returns (groups, total matching groups). Vectorised
        over chunks of whole tags (like the Dreamer's scan), names looked up for the rows shown."""
        now = now or time.time()
        parts: list[tuple] = []
        with self.read() as txn:
            if space or entity:
                keys = []
                for tag16, raw in txn.cursor(db=self.db["tagnames"]).iternext():
                    sp, ent = msgpack.unpackb(raw)
                    if sp.startswith(space) and ent.startswith(entity):
                        keys.append(tag16)
                cur = txn.cursor(db=self.db["tags"])
                chunks = (self._multi(cur, keys[i:i + 4096]) for i in range(0, len(keys), 4096))
            else:
                chunks = self.scan(txn)
            for chunk in chunks:
                if level is not None:
                    chunk = chunk[chunk["level"] == LEVEL_CODE[level]]
                if not len(chunk):
                    continue
                att, dec = mkct.contributions(chunk, now)
                tags = chunk["tag"]
                starts = np.flatnonzero(np.r_[True, tags[1:] != tags[:-1]])
                counts = np.stack([np.add.reduceat((chunk["level"] == code).astype(np.int64),
                                                   starts) for code in range(len(LEVELS))], 1)
                parts.append((tags[starts], np.add.reduceat(att, starts),
                              np.add.reduceat(dec, starts), counts,
                              np.maximum.reduceat(chunk["created"], starts)))
            if not parts:
                return [], 0
            tags, att_g, dec_g, counts, newest = (np.concatenate(x) for x in zip(*parts))
            order = np.argsort(-att_g, kind="stable")[: max(0, limit)]
            found = []
            for i in order:
                sp, ent = self.tag_names(txn, bytes(tags[i])) or ("?", "?")
                attention, decision = float(att_g[i]), float(dec_g[i])
                found.append({"space": sp, "entity": ent, "count": int(counts[i].sum()),
                              "levels": {LEVELS[j]: int(c) for j, c in enumerate(counts[i]) if c},
                              "attention": round(attention, 6), "decision": round(decision, 6),
                              "action": mkct.classify(attention, decision, self.ignore_below,
                                                      self.band),
                              "newest": float(newest[i])})
        return found, int(len(att_g))

    def show(self, ref: str, now: float | None = None) -> tuple[Megram, dict]:
        """One Megram by id or unique id prefix, with its lifecycle and its tag's potentials."""
        now = now or time.time()
        with self.read() as txn:
            keys = self.resolve(txn, ref)
            if not keys:
                raise StoreError(f"no Megram with id {ref!r}")
            if len(keys) > 1:
                raise StoreError(f"id prefix {ref!r} is ambiguous: "
                                 + ", ".join(k.hex()[:12] for k in keys))
            id16 = keys[0]
            base = self.record(txn, id16)
            tag16 = tag_key(base.space, base.entity)
            raw = self.find_entry(txn, tag16, id16)
            entry = np.frombuffer(raw, dtype=ENTRY_DTYPE)[0] if raw else None
            m = self.record(txn, id16, entry, now)
            arr = self.entries(txn, tag16)
            pot = mkct.potentials(arr, now, self.ignore_below, self.band)
            detail = {"lifecycle": self.lifecycle(txn, id16), "key": id16.hex(),
                      "group": {"space": m.space, "entity": m.entity, "count": int(len(arr)),
                                "attention": round(pot.attention, 6),
                                "decision": round(pot.decision, 6), "action": pot.action}}
        return m, detail

    def forget(self, ref: str) -> Megram:
        """Hard-delete one Megram (the operator's explicit removal; GC is the Dreamer's)."""
        m, _ = self.show(ref)
        id16 = id_key(m.id)
        tag16 = tag_key(m.space, m.entity)

        def delete(txn):
            current = self.find_entry(txn, tag16, id16)
            if current is None or not self._delete(txn, tag16, current):
                raise StoreError(f"Megram {m.id} disappeared before it could be forgotten")
            return True
        self.call(delete)
        return m

    def stats(self) -> dict:
        with self.read() as txn:
            cur = txn.cursor(db=self.db["levels"])
            levels = {}
            for letter in LEVELS:
                levels[letter] = cur.count() if cur.set_key(letter.encode()) else 0
            total = txn.stat(self.db["megrams"])["entries"]
            tags = txn.stat(self.db["tagnames"])["entries"]
        info = self.env.info()
        try:
            file_bytes = (self.path / "data.mdb").stat().st_size
        except OSError:
            file_bytes = 0
        return {"megrams": total, "levels": levels, "tags": tags, "path": str(self.path),
                "file_bytes": file_bytes, "map_size": info["map_size"],
                "commits": self.commits, "written": self.megrams_written,
                "resizes": self.resizes, "cache": {"tags": len(self._cache),
                                                   "bytes": self._cache_used,
                                                   "hits": self.cache_hits}}

    def verify(self) -> list[str]:
        """Cross-check every sub-database against the others; returns the problems found."""
        problems: list[str] = []
        with self.read() as txn:
            indexed: set[bytes] = set()
            for chunk in self.scan(txn):
                for row in chunk:
                    id16, tag16 = bytes(row["id"]), bytes(row["tag"])
                    if id16 in indexed:
                        problems.append(f"{id16.hex()} indexed twice")
                    indexed.add(id16)
                    raw = txn.get(id16, db=self.db["megrams"])
                    if raw is None:
                        problems.append(f"{id16.hex()} indexed but has no record")
                        continue
                    rec = msgpack.unpackb(raw)
                    if tag_key(rec[3], rec[4]) != tag16:
                        problems.append(f"{id16.hex()} indexed under the wrong tag")
                    if txn.get(tag16, db=self.db["tagnames"]) is None:
                        problems.append(f"tag of {id16.hex()} has no name")
                    level = LEVELS[int(row["level"])].encode()
                    value = level_value(float(row["created"]), id16, tag16)
                    if not txn.cursor(db=self.db["levels"]).set_key_dup(level, value):
                        problems.append(f"{id16.hex()} missing from the level index")
            records = txn.stat(self.db["megrams"])["entries"]
            levels = txn.stat(self.db["levels"])["entries"]
            if records != len(indexed):
                problems.append(f"{records} records but {len(indexed)} index entries")
            if levels != len(indexed):
                problems.append(f"{levels} level entries but {len(indexed)} index entries")
        return problems

    def remember(self, text: str, *, level: str = "C", space: str = GLOBAL_USER,
                 entity: str = ENV_LOCAL, sigma: float | None = None) -> Megram:
        """An operator-injected Megram: C and T are timeless rules, M and K decay like GGS's."""
        text = text.strip()
        if not text:
            raise StoreError("nothing to remember: the text is empty")
        f, k, state = {"T": (1.0, 0.0, "persona"), "C": (1.0, 0.0, "user-injected"),
                       "K": (0.9, 0.05, "user-injected"), "M": (0.9, 0.05, "user-injected")}[level]
        m = Megram(level=level, space=space or GLOBAL_USER, entity=entity or ENV_LOCAL,
                   content=text, state=state, f=f, sigma=1.0 if sigma is None else sigma, k=k)
        ids, errors = self.write([m])
        if errors:
            raise StoreError(errors[0])
        return self.show(ids[0])[0]
