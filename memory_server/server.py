"""The `memory` process (R5): owns `memory.lmdb`, answers the memory bus API, runs the Dreamer.

Bus API:
* MemoryWrite (from GGS or the operator; a work message): the ack is sent only after the Megrams
  are durably committed. Ids are derived from the message id when absent, so a re-delivery after a
  restart writes nothing twice. Invalid Megrams are refused with a clear ack error while the valid
  ones in the same message are written.
* MemoryQuery → MemoryResult (request/reply by correlation id), `op`:
  query_c (C/T rules of a tag; resets their recall clocks), query_mk (attention, decision, action
  and the strongest contributing Megrams), calibrate (both in one round trip, plus the operator's
  global rules), recent, stats, list, show, remember, forget.
* FinalResult (observed, not consumed: the user acknowledges it) schedules a Dreamer cycle.
Handlers run on the bus client's worker threads: reads never wait for writes, writes go to the
store's single writer thread.
"""
from __future__ import annotations

import logging
import sys
import threading
import time
from dataclasses import replace

from protocol.bus import BusClient
from protocol.messages import MemoryQuery, MemoryResult, MemoryWrite, SopRecord
from protocol.settings import Settings, load_settings
from services.runtime import telemetry
from services.runtime.mkct import ENV_LOCAL, GLOBAL_USER

from .dreamer import Dreamer
from .store import MemoryStore, StoreError

log = logging.getLogger("artoo.memory")

_MAX_N = 500
_SHUTDOWN_HOLD_S = 10.0       # upper bound on holding a write while the bus client stops
_TAG_OPS = ("query_c", "query_mk", "calibrate", "recent")


class MemoryService:
    """The bus-facing side of the store; one per memory process."""

    def __init__(self, store: MemoryStore, dreamer: Dreamer, settings: Settings,
                 client: BusClient | None = None):
        self.client = client
        self.store = store
        self.dreamer = dreamer
        self.settings = settings
        self.writes = 0
        self.write_errors = 0
        self.queries = 0
        self._closing = threading.Event()

    # -- handlers --------------------------------------------------------------------------------
    @telemetry.traced("memory write", task=lambda self, env, msg: env.task)
    def on_write(self, env, msg: MemoryWrite) -> None:
        try:
            if self._closing.is_set():
                raise StoreError("memory is shutting down")
            ids, errors = self.store.write(msg.megrams, default_ts=env.ts, seed=env.id)
        except StoreError:
            if self._closing.is_set() and self.client is not None:
                # Shutting down: hold the message until the bus loop has stopped, so no ack (not
                # even a failed one) leaves and the sender re-sends it to the next memory process.
                self.client.wait_stopped(_SHUTDOWN_HOLD_S)
            raise
        self.writes += len(ids)
        if errors:
            self.write_errors += len(errors)
            log.warning("MemoryWrite %s from %s: %d refused: %s", env.id, env.sender, len(errors),
                        "; ".join(errors[:3]))
            raise ValueError(f"{len(errors)} Megram(s) refused, {len(ids)} written: "
                             + "; ".join(errors[:5]))

    @telemetry.traced("memory query", task=lambda self, env, msg: env.task)
    def on_query(self, env, msg: MemoryQuery) -> MemoryResult:
        self.queries += 1
        try:
            return self.answer(msg)
        except (StoreError, ValueError) as exc:
            return MemoryResult(op=msg.op, ok=False, error=str(exc))
        except Exception as exc:  # never crash on a query, never answer with silence
            log.exception("memory query %s failed", msg.op)
            return MemoryResult(op=msg.op, ok=False, error=f"{type(exc).__name__}: {exc}")

    def on_final_result(self, env, msg) -> None:
        self.dreamer.after_final_result()

    # -- the operations --------------------------------------------------------------------------
    def answer(self, q: MemoryQuery) -> MemoryResult:
        store, now = self.store, time.time()
        n = max(0, min(q.n, _MAX_N))
        space, entity = q.space.strip(), q.entity.strip()
        if q.op in _TAG_OPS and not (space and entity):
            raise ValueError(f"{q.op} needs both space and entity")
        if q.op == "query_c":
            return MemoryResult(op=q.op, sops=store.query_c(space, entity, now))
        top_n = n or self.settings.memory_query_top_n
        if q.op == "query_mk":
            pot, top = store.query_mk(space, entity, now, top_n)
            return MemoryResult(op=q.op, attention=pot.attention, decision=pot.decision,
                                action=pot.action, megrams=top)
        if q.op == "calibrate":
            sops = store.query_c(space, entity, now)
            if (space, entity) != (GLOBAL_USER, ENV_LOCAL):
                sops += store.query_c(GLOBAL_USER, ENV_LOCAL, now)
            pot, top = store.query_mk(space, entity, now, top_n)
            return MemoryResult(op=q.op, sops=sops, attention=pot.attention,
                                decision=pot.decision, action=pot.action, megrams=top)
        if q.op == "recent":
            return MemoryResult(op=q.op, megrams=store.recent(space, entity, n, now))
        if q.op == "stats":
            stats = store.stats()
            stats["dreamer"] = {"cycles": self.dreamer.cycles, "last": self.dreamer.last}
            stats["service"] = {"writes": self.writes, "write_errors": self.write_errors,
                                "queries": self.queries}
            return MemoryResult(op=q.op, stats=stats, sops=[
                _sop(m) for m in store.rules(now, limit=n or _MAX_N)])
        if q.op == "list":
            groups, total = store.groups(now, space, entity, q.level, n or 50)
            megrams = []
            if space and entity:
                megrams = store.tag_megrams(space, entity, n or 50, now)
            return MemoryResult(op=q.op, groups=groups, megrams=megrams,
                                stats={"groups": total})
        if q.op == "show":
            m, detail = store.show(q.id, now)
            return MemoryResult(op=q.op, megrams=[m], stats=detail,
                                attention=detail["group"]["attention"],
                                decision=detail["group"]["decision"],
                                action=detail["group"]["action"])
        if q.op == "remember":
            level = q.level or "C"
            m = store.remember(q.text, level=level, space=space or GLOBAL_USER,
                               entity=entity or ENV_LOCAL, sigma=q.sigma)
            return MemoryResult(op=q.op, megrams=[m])
        if q.op == "forget":
            return MemoryResult(op=q.op, megrams=[store.forget(q.id)])
        raise ValueError(f"unknown memory op {q.op!r}")

    def heartbeat_info(self) -> dict:
        stats = self.store.stats()
        return {"megrams": stats["megrams"], "levels": stats["levels"],
                "dreamer_cycles": self.dreamer.cycles, "writes": self.writes}

    def close(self) -> None:
        """Stop the Dreamer, stop taking writes (they stay unacknowledged: the sender re-sends
        them after the restart), drain the writer and close the store."""
        self.dreamer.stop()
        self._closing.set()
        self.store.close()


def _sop(m) -> SopRecord:
    return SopRecord(id=m.id, space=m.space, entity=m.entity, content=m.content, sigma=m.sigma,
                     state=m.state, level=m.level)


def setup(client: BusClient, settings: Settings) -> MemoryService:
    store = MemoryStore(settings.memory_path, settings.memory_map_size,
                        write_batch=settings.memory_write_batch,
                        max_content_chars=settings.memory_max_content_chars,
                        ignore_below=settings.memory_ignore_attention,
                        band=settings.memory_decision_band,
                        cache_bytes=settings.memory_tag_cache_mb << 20)

    def llm_factory():
        from services.runtime.llm import LLMClient
        return LLMClient.for_role("memory", settings, bus=client)

    dreamer = Dreamer(store, settings, publish=client.publish, llm_factory=llm_factory)
    service = MemoryService(store, dreamer, settings, client)
    client.on("MemoryWrite", service.on_write, ack=True, threaded=True)
    client.on("MemoryQuery", service.on_query, request=True, threaded=True)
    client.on("FinalResult", service.on_final_result)
    client.heartbeat_info = service.heartbeat_info
    dreamer.start()
    return service


def main() -> int:
    from services.runtime.role import run_role
    settings = load_settings()
    # Write handlers hold a worker thread until their commit; give queries threads of their own.
    settings = replace(settings, handler_threads=max(settings.handler_threads, 32))
    try:
        return run_role("memory", setup, settings)
    except StoreError as exc:
        log.error("memory store unavailable: %s", exc)
        return 1


if __name__ == "__main__":
    sys.exit(main())
