"""The `world` process (seed 002): owns `world.lmdb`, observes the bus, answers WorldQuery.

Observed (not consumed; the owners of these messages acknowledge them): UserRequest, TaskSpec,
SubTaskOutcome, FinalResult — see model.py for what each teaches the world model. A proposal the
goal generator makes is published as GoalProposed (telemetry) and waits for the operator.

WorldQuery → WorldResult (request/reply), `op`:
  project   the bounded projection for a goal (`text`): the perceiver puts it in the TaskSpec
  entities  tracked entities by weight (importance, halved once stale)
  facts     facts valid `at` (default now), as known `as_of`; `claims` lists claims apart
  show      one entity: its state, every fact and claim about it (history included), its edges
  forget    mark an entity and its facts forgotten (kept, audited, out of every projection)
  goals / goal   the goal table (proposals first) / one goal
  decide    the operator accepts or rejects a proposal (Law 1): only a BLOCKED one
  link      what an accepted goal became (a schedule id, a run id)
  stats     counts
Missed messages (the process was down or restarting) are read back from the audit log after the
last position this store processed (replay.py), at start-up and every `world_replay_interval_s`.
One process per data dir (an flock on world.lmdb/owner.lock); every change is a synced LMDB
commit, so it survives kill -9 of the whole tree.
"""
from __future__ import annotations

import logging
import sys
import threading

from protocol.bus import BusClient
from protocol.bus.common import LRU_CAP, SeenSet
from protocol.messages import GoalProposed, WorldQuery, WorldResult
from protocol.settings import Settings, load_settings

from .extract import Extractor
from .model import WorldModel
from .replay import Replayer
from .store import WorldError, WorldStore

log = logging.getLogger("artoo.world")
DEADLINE_CHECK_S = 15.0
REPLAY_TICK_S = 1.0            # how often the loop asks whether a replay pass is due
LIVE_IDS = LRU_CAP             # ids handled live (4 a task) that a replay pass skips: a pass
                               # every 30 s meets far fewer; ≤ 2 × 8,192 ids (≈ 2.3 MB)
_MAX_N = 500


class WorldService:
    def __init__(self, model: WorldModel, client: BusClient | None = None):
        self.model = model
        self.client = client
        self.observed = 0
        self.queries = 0
        self.errors = 0
        self.proposed = 0
        self.replayer: Replayer | None = None
        self.extractor: Extractor | None = None
        self._system_busy = threading.Lock()
        # what the live path handled: a replay pass reads it back from the audit log (its
        # position is saved at the end of each pass) and need not handle it again; kept for two
        # passes' time (one forgotten is only handled again: the handlers are idempotent)
        self.live = SeenSet(LIVE_IDS, max_age_s=2 * max(30.0, model.s.world_replay_interval_s))

    def observe(self, handler):
        """The live path's `handler` for the bus, noting each message it handled."""
        def on_message(env, msg) -> None:
            if handler(env, msg):
                self.live.add(env.id)
        return on_message

    def _guard(self, what: str, fn, *args, count: bool = True) -> bool:
        """An observation must never take the process down; count and log the failure. True
        when it was handled (a failed one is tried again when a replay pass reads it back)."""
        self.observed += count
        try:
            self._announce(fn(*args) or [])
            return True
        except Exception:
            self.errors += 1
            log.exception("world: %s failed", what)
            return False

    def _announce(self, goals) -> None:
        if isinstance(goals, dict):              # on_final's summary carries its proposals
            goals = goals.get("proposed") or []
        if not isinstance(goals, list):
            return
        for g in goals:
            self.proposed += 1
            log.info("proposed %s goal %s: %s (%s)", g["type"], g["id"], g["description"],
                     g["trigger"])
            if self.client is not None:
                self.client.publish(GoalProposed(goal_id=g["id"], goal_type=g["type"],
                                                 description=g["description"],
                                                 trigger=g["trigger"], priority=g["priority"]))

    # -- observed messages -----------------------------------------------------------------------
    def on_request(self, env, msg) -> bool:
        return self._guard("UserRequest", lambda: self.model.on_request(
            msg.task_id, msg.text, session=msg.session_id, workspace=msg.options.workspace,
            at=env.ts))

    def on_spec(self, env, msg) -> bool:
        return self._guard("TaskSpec", self.model.on_spec, msg.model_dump())

    def on_outcome(self, env, msg) -> bool:
        return self._guard("SubTaskOutcome", self.model.on_outcome,
                           msg.parent_task_id or msg.task_id, msg.model_dump(), env.id)

    def on_final(self, env, msg) -> bool:
        ok = self._guard("FinalResult", self.model.on_final, msg.model_dump(), env.ts)
        if self.extractor is not None and msg.answer and \
                msg.status in ("verified", "unverified"):
            self.extractor.submit(msg.task_id)      # later, on its own thread (extract.py)
        return ok

    def dispatch(self, env, msg) -> None:
        """A message read back from the audit log (replay.py): the live path's handler."""
        handler = {"UserRequest": self.on_request, "TaskSpec": self.on_spec,
                   "SubTaskOutcome": self.on_outcome, "FinalResult": self.on_final}.get(env.type)
        if handler is not None:
            handler(env, msg)

    def tick(self) -> None:
        self._guard("deadline check", self.model.check_deadlines, count=False)

    def system_tick(self) -> None:
        """The storage check walks ARTOO_HOME: on a thread of its own, never two at once, so the
        bus loop (heartbeats, observations) is never held up by a large audit log."""
        if self._system_busy.acquire(blocking=False):
            def run():
                try:
                    self._guard("storage check", self.model.check_storage, count=False)
                finally:
                    self._system_busy.release()
            threading.Thread(target=run, name="world-system", daemon=True).start()

    # -- queries -----------------------------------------------------------------------------------
    def on_query(self, env, q: WorldQuery) -> WorldResult:
        self.queries += 1
        try:
            return self.answer(q, env.sender)
        except (WorldError, ValueError) as exc:
            return WorldResult(op=q.op, ok=False, error=str(exc))
        except Exception as exc:
            self.errors += 1
            log.exception("world query %s failed", q.op)
            return WorldResult(op=q.op, ok=False, error=f"{type(exc).__name__}: {exc}")

    def answer(self, q: WorldQuery, sender: str = "") -> WorldResult:
        m, n = self.model, max(1, min(q.n or 50, _MAX_N))
        if q.op == "project":
            if not m.s.world_on:
                return WorldResult(op=q.op, stats={"world": "off"})
            p = m.project(q.text, workspace=q.workspace, task=q.task_id)
            return WorldResult(op=q.op, text=p["text"], entities=p["entities"], facts=p["facts"])
        if q.op == "entities":
            return WorldResult(op=q.op, entities=m.entities(n))
        if q.op == "facts":
            facts, claims = m.facts(at=q.at, as_of=q.as_of, claims=q.claims, n=n)
            return WorldResult(op=q.op, facts=facts, claims=claims)
        if q.op == "show":
            d = m.show(q.entity)
            facts = [f for f in d["facts"] if f["kind"] == "fact"]
            claims = [f for f in d["facts"] if f["kind"] == "claim"]
            return WorldResult(op=q.op, entities=[d["entity"]], facts=facts, claims=claims,
                               edges=d["edges"])
        if q.op == "forget":
            return WorldResult(op=q.op, entities=[m.forget(q.entity, sender or "user",
                                                           q.text or "operator")])
        if q.op == "goals":
            return WorldResult(op=q.op, goals=m.goals(q.status, n, include_user=q.claims))
        if q.op == "goal":
            return WorldResult(op=q.op, goals=[m.goal(q.id)])
        if q.op == "decide":
            if q.decision not in ("accept", "reject"):
                raise ValueError("decide needs decision accept or reject")
            return WorldResult(op=q.op, goals=[m.decide(q.id, q.decision, sender or "user",
                                                        q.text)])
        if q.op == "link":
            return WorldResult(op=q.op, goals=[m.link(q.id, q.link)])
        if q.op == "stats":
            return WorldResult(op=q.op, stats={**m.stats(), "service": self.info()})
        raise ValueError(f"unknown world op {q.op!r}")

    def info(self) -> dict:
        out = {"observed": self.observed, "queries": self.queries, "errors": self.errors,
               "proposed": self.proposed}
        if self.replayer is not None:
            out.update(self.replayer.info())
        if self.extractor is not None and self.extractor.enabled:
            out.update(self.extractor.info())
        return out

    def close(self) -> None:
        if self.replayer is not None:
            self.replayer.stop()
        if self.extractor is not None:
            self.extractor.stop()
        self.model.store.close()


def setup(client: BusClient, settings: Settings) -> WorldService:
    store = WorldStore(settings.world_path, settings.world_map_size)
    service = WorldService(WorldModel(store, settings), client)
    client.on("UserRequest", service.observe(service.on_request))
    client.on("TaskSpec", service.observe(service.on_spec))
    client.on("SubTaskOutcome", service.observe(service.on_outcome))
    client.on("FinalResult", service.observe(service.on_final))
    client.on("WorldQuery", service.on_query, request=True, threaded=True)
    client.add_timer(DEADLINE_CHECK_S, service.tick)
    service.replayer = Replayer(service, settings.audit_dir / "log",
                                settings.world_replay_interval_s)
    client.add_timer(REPLAY_TICK_S, service.replayer.due)
    def llm_factory():
        from services.runtime.llm import LLMClient
        return LLMClient.for_role("world", settings, bus=client)

    def extract_failed():
        service.errors += 1
    service.extractor = Extractor(service.model, llm_factory, settings.world_extract_per_hour,
                                  on_error=extract_failed)
    service.extractor.start()
    if settings.world_system_check_s > 0:
        client.add_timer(settings.world_system_check_s, service.system_tick)
    client.heartbeat_info = service.info
    return service


def main() -> int:
    from services.runtime.role import run_role
    settings = load_settings()
    try:
        return run_role("world", setup, settings)
    except WorldError as exc:
        log.error("world store unavailable: %s", exc)
        return 1


if __name__ == "__main__":
    sys.exit(main())
