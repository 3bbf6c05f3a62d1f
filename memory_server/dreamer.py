"""The Dreamer (seeds/000 §4.7): the memory process's background consolidation thread.

Each cycle reads one LMDB snapshot of the whole (space, entity) index into numpy, decides
everything from it, then applies the decisions through the store's single writer:

* GC — M/K Megrams whose own live attention |f|·e^{−kΔt} fell below 0.1 are hard-deleted; C and T
  never are.
* Trust bankruptcy — a C rule is demoted to K (k = 0.05, decay clock restarted at the demotion) when
  the M/K evidence created *after* the rule points the other way (net-negative decision against a
  Best Practice, net-positive against a Constraint). The rule itself and its sources (older than
  the rule) never count, so a freshly promoted Constraint is not demoted by its own weight (the Go
  reference demoted every new Constraint on the next cycle).
* Upward consolidation — a group of unconsolidated M/K Megrams with attention ≥ 5 and
  |decision| ≥ 3 gets ONE LLM call that distils a Best Practice / Absolute Constraint into a new C
  Megram (f 1, σ ±1, k 0); its sources are marked consolidated (lifecycle sub-db + index flag) so
  they are not distilled twice. The LLM call happens between transactions, never inside one. At
  most `dreamer_max_promotions` groups per cycle (the strongest |decision| first; the rest wait for
  the next cycle), so a bulk of qualifying tags cannot turn one cycle into thousands of LLM calls.

Deletes and demotions are exact-match on the index entry read in the snapshot: an entry that
changed meanwhile (recalled, demoted, forgotten) is left alone and reconsidered next cycle. Queries
never wait for the Dreamer: they read their own snapshots. Triggers: every `dreamer_interval_s`,
and `dreamer_after_final_s` after a FinalResult (coalesced), so GGS's terminal write lands first.
"""
from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from protocol.messages import DreamerEvent
from protocol.settings import Settings

from . import mkct
from .mkct import FLAG_CONSOLIDATED, KEY_BYTES, LEVEL_CODE
from .layout import new_id
from .store import MemoryStore

log = logging.getLogger("artoo.memory.dreamer")

_DELETE_CHUNK = 20_000          # deletes per transaction: fewer page copies, ~1 s of writer time
_SOURCE_CHARS = 300
_RULE_CHARS = 600

DISTIL_SYSTEM = (
    "You distil an autonomous agent's repeated experiences into ONE actionable rule for its "
    "planner. Write at most two sentences, concrete (name the tool, command, path or approach), "
    "imperative. Output only the rule text.")


@dataclass
class _Group:
    tag16: bytes
    space: str
    entity: str
    signal: str                                  # best_practice | constraint
    attention: float
    decision: float
    sources: list[bytes] = field(default_factory=list)      # id16 of every eligible Megram
    newest: list[bytes] = field(default_factory=list)       # id16, newest first, for the prompt


@dataclass
class Plan:
    gc: list[tuple[bytes, bytes]] = field(default_factory=list)        # (tag16, entry)
    demote: list[tuple[bytes, bytes, float]] = field(default_factory=list)  # + newer decision
    groups: list[_Group] = field(default_factory=list)
    scanned: int = 0


class Dreamer:
    def __init__(self, store: MemoryStore, settings: Settings,
                 publish: Callable[[DreamerEvent], None] | None = None,
                 llm_factory: Callable[[], object] | None = None):
        self.store = store
        self.settings = settings
        self.publish = publish
        self.llm_factory = llm_factory
        self._llm = None
        self._cond = threading.Condition()
        self._final_due: float | None = None
        self._stop = False
        self._thread: threading.Thread | None = None
        self._cycle_lock = threading.Lock()
        self.cycles = 0
        self.last: dict = {}

    # -- scheduling ------------------------------------------------------------------------------
    def start(self) -> None:
        self._thread = threading.Thread(target=self._main, name="dreamer", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 30.0) -> None:
        with self._cond:
            self._stop = True
            self._cond.notify_all()
        if self._thread:
            self._thread.join(timeout)

    def after_final_result(self) -> None:
        """Schedule a cycle shortly after a FinalResult (coalesced with one already scheduled)."""
        with self._cond:
            if self._final_due is None:
                self._final_due = time.monotonic() + self.settings.dreamer_after_final_s
                self._cond.notify_all()

    def _main(self) -> None:
        next_timer = time.monotonic() + self.settings.dreamer_interval_s
        while True:
            with self._cond:
                while not self._stop:
                    now = time.monotonic()
                    due = min(next_timer, self._final_due or float("inf"))
                    if now >= due:
                        break
                    self._cond.wait(due - now)
                if self._stop:
                    return
                if self._final_due is not None and time.monotonic() >= self._final_due:
                    trigger, self._final_due = "final_result", None
                else:
                    trigger = "timer"
            try:
                self.run_cycle(trigger)
            except Exception as exc:  # a failed cycle must not end the thread; the next retries
                log.exception("dreamer cycle failed")
                if self.publish:
                    try:
                        self.publish(DreamerEvent(trigger=trigger,
                                                  error=f"cycle failed: {type(exc).__name__}: "
                                                        f"{exc}"[:2000]))
                    except Exception:
                        log.exception("could not publish DreamerEvent")
            next_timer = time.monotonic() + self.settings.dreamer_interval_s

    # -- one cycle -------------------------------------------------------------------------------
    def run_cycle(self, trigger: str = "manual", now: float | None = None) -> DreamerEvent:
        with self._cycle_lock:
            started = time.monotonic()
            now = now or time.time()
            errors: list[str] = []
            plan = self.plan(now)
            planned = time.monotonic()
            gc_deleted = self._apply_gc(plan.gc)
            demoted = self._apply_demotions(plan.demote, now)
            applied = time.monotonic()
            promoted: list[str] = []
            groups = sorted(plan.groups, key=lambda g: -abs(g.decision))
            deferred = max(0, len(groups) - self.settings.dreamer_max_promotions)
            for group in groups[: self.settings.dreamer_max_promotions]:
                try:
                    rule_id = self._consolidate(group, now)
                except Exception as exc:  # LLM or store failure skips the group, loudly
                    errors.append(f"{group.space}/{group.entity}: {exc}")
                    log.warning("consolidation of %s/%s skipped: %s", group.space, group.entity,
                                exc)
                    continue
                if rule_id:
                    promoted.append(rule_id)
            event = DreamerEvent(trigger=trigger, gc_deleted=gc_deleted, demoted=demoted,
                                 promoted=promoted,
                                 elapsed_ms=round((time.monotonic() - started) * 1000, 1),
                                 error="; ".join(errors)[:2000])
            self.cycles += 1
            ms = lambda a, b: round((b - a) * 1000, 1)  # noqa: E731
            self.last = {"at": now, "trigger": trigger, "scanned": plan.scanned,
                         "gc_deleted": gc_deleted, "demoted": len(demoted),
                         "promoted": len(promoted), "deferred": deferred,
                         "elapsed_ms": event.elapsed_ms, "plan_ms": ms(started, planned),
                         "apply_ms": ms(planned, applied),
                         "consolidate_ms": ms(applied, time.monotonic()), "error": event.error}
            log.info("dreamer %s: scanned %d, gc %d, demoted %d, promoted %d (%d deferred) in "
                     "%.0f ms%s", trigger, plan.scanned, gc_deleted, len(demoted), len(promoted),
                     deferred, event.elapsed_ms, f" ({event.error})" if event.error else "")
            if self.publish:
                try:
                    self.publish(event)
                except Exception:
                    log.exception("could not publish DreamerEvent")
            return event

    def plan(self, now: float) -> Plan:
        """Read one snapshot and decide GC, demotions and consolidation groups (no writes)."""
        s = self.settings
        plan = Plan()
        with self.store.read() as txn:
            for chunk in self.store.scan(txn):
                plan.scanned += len(chunk)
                att, dec = mkct.contributions(chunk, now)
                gc = mkct.gc_mask(chunk, att, s.dreamer_gc_threshold)
                if gc.any():
                    raw = chunk[gc].tobytes()
                    step = chunk.dtype.itemsize
                    plan.gc.extend((raw[i:i + KEY_BYTES], raw[i + KEY_BYTES:i + step])
                                   for i in range(0, len(raw), step))
                tags = chunk["tag"]
                starts = np.flatnonzero(np.r_[True, tags[1:] != tags[:-1]])
                ends = np.r_[starts[1:], len(chunk)]
                eligible = (np.isin(chunk["level"], mkct.DECAYING_LEVELS)
                            & ((chunk["flags"] & FLAG_CONSOLIDATED) == 0) & ~gc)
                group_att = np.add.reduceat(np.where(eligible, att, 0.0), starts)
                group_dec = np.add.reduceat(np.where(eligible, dec, 0.0), starts)
                candidates = np.flatnonzero((group_att >= s.dreamer_promote_attention - 1e-9)
                                            & (np.abs(group_dec) >= s.dreamer_promote_decision
                                               - 1e-9))
                for g in candidates:
                    self._add_group(txn, plan, chunk, eligible, starts[g], ends[g],
                                    float(group_att[g]), float(group_dec[g]))
                for i in np.flatnonzero(chunk["level"] == LEVEL_CODE["C"]):
                    g = np.searchsorted(starts, i, side="right") - 1
                    lo, hi = starts[g], ends[g]
                    newer = mkct.newer_evidence_decision(chunk[lo:hi], dec[lo:hi], i - lo)
                    if mkct.contradicts(float(chunk["sigma"][i]), newer,
                                        s.dreamer_bankruptcy_tolerance):
                        raw = chunk[i].tobytes()
                        plan.demote.append((raw[:KEY_BYTES], raw[KEY_BYTES:], newer))
        return plan

    def _add_group(self, txn, plan: Plan, chunk: np.ndarray, eligible: np.ndarray, lo: int,
                   hi: int, attention: float, decision: float) -> None:
        signal = mkct.consolidation_signal(attention, decision,
                                           self.settings.dreamer_promote_attention - 1e-9,
                                           self.settings.dreamer_promote_decision - 1e-9)
        if signal is None:
            return
        tag16 = bytes(chunk["tag"][lo])
        names = self.store.tag_names(txn, tag16)
        if names is None:
            return
        rows = chunk[lo:hi][eligible[lo:hi]]
        order = np.argsort(-rows["created"], kind="stable")
        plan.groups.append(_Group(
            tag16=tag16, space=names[0], entity=names[1], signal=signal, attention=attention,
            decision=decision, sources=[bytes(x) for x in rows["id"]],
            newest=[bytes(rows["id"][j]) for j in order[: self.settings.dreamer_prompt_sources]]))

    # -- applying decisions (through the single writer) ------------------------------------------
    def _apply_gc(self, items: list[tuple[bytes, bytes]]) -> int:
        deleted = 0
        for i in range(0, len(items), _DELETE_CHUNK):
            chunk = items[i:i + _DELETE_CHUNK]

            def delete(txn, chunk=chunk):
                return sum(self.store._delete(txn, tag16, entry) for tag16, entry in chunk)
            deleted += self.store.call(delete, weight=len(chunk))
        return deleted

    def _apply_demotions(self, items: list[tuple[bytes, bytes, float]], now: float) -> list[str]:
        if not items:
            return []
        k = self.settings.dreamer_demote_k
        store = self.store

        def demote(txn):
            return [entry[:KEY_BYTES] for tag16, entry, newer in items
                    if store._demote(txn, tag16, entry, k, now, "trust_bankruptcy",
                                     newer_decision=round(newer, 6))]

        demoted = store.call(demote, weight=len(items))
        with store.read() as txn:
            return [m.id for m in (store.record(txn, id16) for id16 in demoted) if m]

    def _consolidate(self, group: _Group, now: float) -> str | None:
        with self.store.read() as txn:
            experiences = [m for m in (self.store.record(txn, id16) for id16 in group.newest) if m]
        if not experiences:
            return None
        rule = self._distil(group, experiences)
        sigma = 1.0 if group.signal == "best_practice" else -1.0
        rule_id = new_id()
        store = self.store

        def promote(txn):
            rec = [rule_id, "C", now, group.space, group.entity, rule, group.signal, 1.0, sigma,
                   0.0]
            store._put(txn, rec, 0.0, lifecycle={
                "distilled_at": now, "attention": round(group.attention, 6),
                "decision": round(group.decision, 6), "source_count": len(group.sources),
                "sources": [s.hex() for s in group.sources[:1000]]})
            return sum(store._mark_consolidated(txn, group.tag16, id16, rule_id)
                       for id16 in group.sources)

        store.call(promote, weight=len(group.sources) + 1)
        return rule_id

    def _distil(self, group: _Group, experiences: list) -> str:
        """One LLM call; raises when no LLM is available or the reply is unusable."""
        if self._llm is None:
            if self.llm_factory is None:
                raise RuntimeError("no LLM configured for the Dreamer")
            self._llm = self.llm_factory()
        kind = ("Best Practice — these approaches kept succeeding"
                if group.signal == "best_practice"
                else "Absolute Constraint — these approaches kept failing")
        lines = "\n".join(f"- [{m.state or m.level}] {m.content[:_SOURCE_CHARS]}"
                          for m in experiences)
        user = (f"Space: {group.space}\nEntity: {group.entity}\nSignal: {kind} "
                f"(attention {group.attention:.2f}, decision {group.decision:+.2f})\n"
                f"Experiences, newest first:\n{lines}\n\nThe rule:")
        text = self._llm.complete_text(DISTIL_SYSTEM, user, max_tokens=160)
        rule = " ".join(text.strip().strip('"').split())
        if not rule:
            raise RuntimeError("the LLM returned an empty rule")
        return rule[:_RULE_CHARS]
