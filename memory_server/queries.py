"""The MKCT store's read side and operator operations, as methods of MemoryStore (store.py): C/T
rule and M/K potential queries on a tag pair, recent Megrams, rules and consolidation groups, show,
forget, stats, verify and remember. They read through LMDB snapshots and write through the store's
one writer (`self.call`)."""
from __future__ import annotations

import time

import msgpack
import numpy as np

from protocol.messages import Megram, SopRecord
from services.runtime.mkct import ENV_LOCAL, GLOBAL_USER

from . import mkct
from .layout import StoreError, id_key, level_value, tag_key
from .mkct import ENTRY_DTYPE, FLAG_CONSOLIDATED, KEY_BYTES, LEVEL_CODE, LEVELS


class Queries:
    """Mixed into MemoryStore; see the module docstring."""

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
