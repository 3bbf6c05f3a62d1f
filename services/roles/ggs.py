"""R7, the Goal Gradient Solver process (DESIGN §6; seeds/000 §3, §3.6).

GGS closes the medium loop: after each round the meta-validator sends a ReplanRequest (rejected) or
an OutcomeSummary (accepted); GGS computes the loss (services/loss.py), picks the macro-state and
either sends the planner a PlanDirective or delivers the one FinalResult of the task. It also turns
PlanningFailed, TaskCancel and the task deadline into honest abandons, so **every task whose TaskSpec
GGS saw ends with exactly one FinalResult, at the latest at its deadline** (the no-hang guarantee).

How that guarantee survives faults:
* per-task state is written through to `<home>/state/ggs/<task>.json` before a message is
  acknowledged, and reloaded (deadlines re-armed) when the process starts again after a SIGKILL;
* what GGS emits goes to an outbox in that file first and leaves it when its consumer acks; a
  restarted GGS re-sends whatever is still there;
* an ended task leaves a small tombstone (bounded in number, expiring after a TTL, also on disk), so
  late or re-sent messages for it are acknowledged and ignored instead of starting it again.

All handling runs on the bus loop thread: the work per message is arithmetic plus one small file
write, and a single thread makes handlers, ack callbacks and the deadline timer race-free.
Memory writes (one terminal Megram, or one per blocked (tool, target)) are sent before the
FinalResult/PlanDirective they belong to; GGS never waits for them.
"""
from __future__ import annotations

import json
import logging
import os
import sys
import time
from collections import OrderedDict
from typing import Any, Optional

import click
from pydantic import BaseModel, Field

from protocol.bus import DEFER, BusClient
from services.roles.callbudget import ROUND_MIN_CALLS, budget_field
from protocol.messages import (MESSAGE_TYPES, FinalResult, LlmUsage, LossBreakdown, MemoryWrite,
                               Megram, OutcomeSummary, PlanDirective, PlanningFailed, ReplanRequest,
                               SubTaskOutcome, TaskCancel, TaskSpec)
from protocol.settings import Settings, env_name, load_settings

from services.runtime import tasklog, telemetry
from . import loss
from services.runtime.takeover import Takeover
from .ggs_takeover import Takeovers
from services.runtime.taskstate import TaskStateStore
from .loss import GgsParams, RoundResult, Trajectory

log = logging.getLogger("artoo.ggs")

ROLE = "ggs"
HANDLED_IDS_KEPT = 32          # message ids remembered per task (re-delivery after a restart)
SUGGESTION = "Consider breaking the task into smaller steps or retrying with more specific instructions."


class TaskState(BaseModel):
    """Everything GGS knows about a live task; persisted on every change, deleted when it ends."""
    task_id: str
    intent: str = ""
    intent_slug: str = ""
    created_at: float = 0.0              # from the TaskSpec (0 = not seen)
    first_seen: float = 0.0
    deadline_at: float = 0.0
    trajectory: Trajectory = Field(default_factory=Trajectory)
    best_outputs: dict[str, Any] = Field(default_factory=dict)   # subtask intent → last matched output
    completed: list[str] = Field(default_factory=list)
    failed: dict[str, str] = Field(default_factory=dict)         # subtask intent → why
    law1: list[str] = Field(default_factory=list)
    changed: list[str] = Field(default_factory=list)             # files its subtasks left changed
    last_loss: Optional[LossBreakdown] = None
    last_grad: float = 0.0
    last_gap: str = ""
    handled: list[str] = Field(default_factory=list)
    outbox: list[dict] = Field(default_factory=list)             # {"key","type","body"} unacked
    llm_calls: int = 0                   # LlmUsage seen for this task since its TaskSpec
    llm_budget: int = 0                  # no replan once llm_calls reaches it (0 = no budget)


class Tombstone(BaseModel):
    task_id: str
    ended_at: float
    directive: str = ""
    outbox: list[dict] = Field(default_factory=list)


# ------------------------------------------------------------------------------------------------
# the solver
# ------------------------------------------------------------------------------------------------

class Solver(Takeovers):
    def __init__(self, client: BusClient, settings: Settings, clock=time.time):
        self.client = client
        self.settings = settings
        self.params = GgsParams.from_settings(settings)
        self.clock = clock
        # Records keep deadline_at inside "task", so the store never sweeps a task GGS must
        # still end: a deadline that passed while GGS was down is enforced on the first tick.
        self.store = TaskStateStore(settings, ROLE)
        self.tasks: dict[str, TaskState] = {}
        self.tombstones: OrderedDict[str, Tombstone] = OrderedDict()
        self.watchdog_at = 0.0
        self.decisions = 0
        self.final_results = 0
        self._recovered = False
        self._key = 0
        # Several instances (maybe on several hosts): the tasks of a dead instance are ended here
        # (services/runtime/takeover.py); a task held but no longer owned is a backup only.
        self.takeover = Takeover(client, settings, begins=("TaskSpec",), ends=("FinalResult",),
                                 holds=lambda t: t in self.tasks or t in self.tombstones,
                                 take_over=self.take_over)
        self.backup_grace_s = self.takeover.settle_s + settings.missing_after_s

    # -- wiring --------------------------------------------------------------------------------
    def attach(self) -> "Solver":
        c = self.client
        c.on("TaskSpec", self.on_task_spec, ack=True, partition=True)
        c.on("ReplanRequest", self.on_replan, ack=True, partition=True)
        c.on("OutcomeSummary", self.on_summary, ack=True, partition=True)
        c.on("PlanningFailed", self.on_planning_failed, ack=True, partition=True)
        c.on("TaskLost", self.on_task_lost, ack=True, partition=True)
        c.on("LlmUsage", self.on_usage, partition=True)
        c.on("TaskCancel", self.on_cancel, partition=True,
             when=lambda env, _msg: env.sender != ROLE)
        c.add_timer(self.settings.ggs_watchdog_interval_s, self.tick)
        c.heartbeat_info = self.heartbeat_info
        if self.takeover.active:
            c.on("FinalResult", self.on_final_elsewhere, when=lambda env, _m: env.node != c.node)
        self.takeover.attach()
        self.load()
        return self

    def heartbeat_info(self) -> dict:
        return {"tasks": len(self.tasks), "tombstones": len(self.tombstones),
                "watchdog_at": self.watchdog_at, "decisions": self.decisions,
                "final_results": self.final_results, **self.takeover.info()}

    def load(self) -> None:
        """Reload the tasks this instance owns (after a crash), deadlines included."""
        for task_id, record in self.store.load_all(self.client.owns).items():
            try:
                if record.get("kind") == "ended":
                    self.tombstones[task_id] = Tombstone.model_validate(record)
                else:
                    self.tasks[task_id] = TaskState.model_validate(record["task"])
            except Exception as exc:  # noqa: BLE001 - a bad file must not stop the role
                log.error("unreadable GGS state for %s skipped: %s", task_id, exc)
        self.tombstones = OrderedDict(sorted(self.tombstones.items(),
                                             key=lambda kv: kv[1].ended_at))
        if self.tasks or self.tombstones:
            log.info("recovered %d live task(s) and %d tombstone(s)", len(self.tasks),
                     len(self.tombstones))
        if self.takeover.active:
            others = self.store.load_all(lambda t: not self.client.owns(t))
            self.takeover.register_files({
                t: {"deadline_at": (r.get("task") or {}).get("deadline_at", 0)}
                for t, r in others.items() if r.get("kind") != "ended"})

    # -- state helpers -------------------------------------------------------------------------
    def ended(self, task_id: str) -> bool:
        return task_id in self.tombstones

    def task(self, task_id: str, intent: str = "", slug: str = "") -> TaskState:
        st = self.tasks.get(task_id)
        if st is None:
            now = self.clock()
            begun = self.takeover.registry.get(task_id)   # its TaskSpec went to another instance
            st = TaskState(task_id=task_id, first_seen=now,
                           deadline_at=begun.deadline_at if begun else
                           now + self.settings.task_deadline_s)
            self.tasks[task_id] = st
        st.intent = st.intent or intent
        st.intent_slug = st.intent_slug or slug
        return st

    def persist(self, st: TaskState) -> None:
        self.store.save(st.task_id, {"kind": "active", "task_id": st.task_id,
                                     "task": st.model_dump(mode="json")})

    def persist_tombstone(self, tomb: Tombstone) -> None:
        self.store.save(tomb.task_id, {"kind": "ended", **tomb.model_dump(mode="json")})

    def seen(self, st: TaskState, msg_id: str) -> bool:
        """True for a message already applied (re-delivered after a restart lost its ack)."""
        if msg_id in st.handled:
            return True
        st.handled = (st.handled + [msg_id])[-HANDLED_IDS_KEPT:]
        return False

    def elapsed_ms(self, st: TaskState, reported: float = 0.0) -> float:
        """Task time for Ω: what R4b reports, or the time since the TaskSpec if that is longer."""
        since = (self.clock() - st.created_at) * 1000 if st.created_at else 0.0
        return max(reported or 0.0, since)

    def log(self, task_id: str, kind: str, **fields) -> None:
        tasklog.append(self.settings.tasks_dir, task_id, kind, **fields)

    def record_outcomes(self, st: TaskState, outcomes: list[SubTaskOutcome]) -> None:
        """Keep every matched output across rounds (partial results on abandon) and what failed."""
        for o in outcomes:
            key = loss.outcome_key(o)
            if o.status == "matched":
                if o.output is not None:
                    st.best_outputs[key] = o.output
                if key not in st.completed:
                    st.completed.append(key)
                st.failed.pop(key, None)
            elif key not in st.completed:
                st.failed[key] = (o.failure_reason or loss.failed_criterion([o]) or "failed")
            st.changed += [p for p in o.changed if p not in st.changed]
            for c in o.tool_calls:
                if c.law1:
                    note = f"[LAW1] {c.tool} {c.target}".strip() + (f": {c.error}" if c.error else "")
                    if note not in st.law1:
                        st.law1.append(note)

    # -- outbox ----------------------------------------------------------------------------------
    def entry(self, msg) -> dict:
        """An outbox entry; its message id is fixed here and persisted, so a restarted GGS re-sends
        under the same id and consumers de-dup the copy (no second FinalResult/PlanDirective)."""
        self._key += 1
        return {"key": f"{time.time_ns():x}-{self._key}", "type": type(msg).__name__,
                "id": self.client.new_id(), "body": msg.model_dump(mode="json")}

    def emit(self, task_id: str, entries: list[dict]) -> None:
        """Send outbox entries in order (memory first); each leaves the outbox when acked."""
        for e in entries:
            msg = MESSAGE_TYPES[e["type"]].model_validate(e["body"])
            self.client.send(msg, msg_id=e.get("id"),
                             on_done=lambda ok, k=e["key"], t=e["type"]:
                             self.delivered(task_id, k, t, ok))

    def delivered(self, task_id: str, key: str, type_name: str, ok: bool) -> None:
        if not ok:
            log.error("%s for %s was never acknowledged", type_name, task_id)
        holder = self.tasks.get(task_id) or self.tombstones.get(task_id)
        if holder is None:
            return
        before = len(holder.outbox)
        holder.outbox = [e for e in holder.outbox if e["key"] != key]
        if len(holder.outbox) != before:
            if isinstance(holder, TaskState):
                self.persist(holder)
            else:
                self.persist_tombstone(holder)

    # -- handlers --------------------------------------------------------------------------------
    def ignore(self, env, msg) -> bool:
        """Messages GGS must not act on: no task id, or a task that already ended."""
        if not msg.task_id or msg.task_id == "-":
            log.warning("%s from %s without a task id ignored", env.type, env.sender)
            return True
        if self.ended(msg.task_id):
            log.info("late %s for ended task %s ignored", env.type, msg.task_id)
            return True
        return False

    def on_task_spec(self, env, msg: TaskSpec) -> None:
        if self.ignore(env, msg):
            return
        st = self.task(msg.task_id, msg.intent, msg.intent_slug)
        st.intent, st.intent_slug = msg.intent or st.intent, msg.intent_slug or st.intent_slug
        st.created_at = msg.created_at or st.first_seen
        st.deadline_at = msg.deadline_at or (st.created_at + self.settings.task_deadline_s)
        budget = msg.options.max_llm_calls
        st.llm_budget = max(0, self.default_llm_budget() if budget is None else budget)
        self.persist(st)
        self.log(msg.task_id, "ggs_armed", deadline_at=st.deadline_at, intent_slug=st.intent_slug)

    def default_llm_budget(self) -> int:
        """The task's LLM call budget when the run names none. On the bundled 1.5B model a task is
        one subtask of 2-4 calls a round, and a third round did not turn a failure into a pass
        in the benchmark's dev half (it cost 10-25 s per such goal); a remote model with
        multi-subtask plans spends more calls per round and gets more from a replan."""
        return getattr(self.settings, budget_field(os.environ))

    @staticmethod
    def budget_setting() -> str:
        return env_name(budget_field(os.environ))

    def score_round(self, env, msg: ReplanRequest | OutcomeSummary):
        """The common start of a round: (task state, loss step) or None when the message is late,
        foreign or a re-delivery already scored."""
        if self.ignore(env, msg):
            return None
        st = self.task(msg.task_id, msg.intent, msg.intent_slug)
        if self.seen(st, env.id):
            return None
        self.record_outcomes(st, msg.outcomes)
        st.llm_calls = self.logged_calls(st)
        elapsed = self.elapsed_ms(st, msg.elapsed_ms)
        res = loss.step(st.trajectory, msg, self.params, elapsed_ms=elapsed,
                        calls_spent=self.calls_spent(st))
        self.apply(st, res, msg, elapsed)
        return st, res

    def on_usage(self, env, msg: LlmUsage) -> None:
        """Count the task's LLM calls (kept in memory; persisted with the task's next change)."""
        st = self.tasks.get(msg.task_id)
        if st is not None:
            st.llm_calls += 1

    def logged_calls(self, st: TaskState) -> int:
        """The task's LLM calls: the task log holds every one, also those whose LlmUsage has
        not reached us yet."""
        return max(st.llm_calls, tasklog.count(self.settings.tasks_dir, st.task_id, "llm_call"))

    @staticmethod
    def calls_spent(st: TaskState) -> str:
        """A cost cap, like an agent SDK's max_turns: "used of budget" once the task's calls
        reached it (no further round: it would re-run the executor and every check) — or came
        so close that a further round could not be checked: a round needs an executor call and
        an independent check (ROUND_MIN_CALLS), and an unchecked answer from a starved round is
        what a user must not get as "done"."""
        left = st.llm_budget - st.llm_calls
        spent = bool(st.llm_budget) and left < min(ROUND_MIN_CALLS, st.llm_budget)
        if not spent:
            return ""
        return f"{st.llm_calls} of {st.llm_budget}" + (
            f", {left} left, fewer than a checked round needs" if left > 0 else "")

    @telemetry.traced("ggs round", task=lambda self, env, msg: msg.task_id)
    def on_replan(self, env, msg: ReplanRequest) -> None:
        if self.deferred(msg.task_id):
            return DEFER
        scored = self.score_round(env, msg)
        if scored is None:
            return
        st, res = scored
        absent = [o for o in msg.outcomes if o.not_possible]
        if absent:
            # Law 0: the executor and an independent check agree the thing asked for does not
            # exist; replanning cannot create it. The task ends as "not possible", with why.
            why = "; ".join(o.failure_reason or o.answer for o in absent)
            self.finish(st, "abandon", res, f"Not possible: {why.removeprefix('not possible: ')}",
                        self.partial_output(st), msg.outcomes, msg.gap_summary,
                        reason="not_possible", status="not_possible")
        elif res.directive in loss.ACTION_STATES:
            self.direct(st, res, msg)
        elif res.directive == "success":
            self.finish(st, "success", res, self.success_summary(st, res, msg),
                        self.success_output(st, msg.outcomes), msg.outcomes, msg.gap_summary)
        else:
            self.finish(st, "abandon", res, self.abandon_summary(st, res, msg.gap_summary),
                        self.partial_output(st), msg.outcomes, msg.gap_summary)

    @telemetry.traced("ggs round", task=lambda self, env, msg: msg.task_id)
    def on_summary(self, env, msg: OutcomeSummary) -> None:
        if self.deferred(msg.task_id):
            return DEFER
        scored = self.score_round(env, msg)
        if scored is None:
            return
        st, res = scored
        output = msg.merged_output
        if output is None:
            output = self.success_output(st, msg.outcomes)
        summary = msg.summary or "The meta-validator accepted the merged result."
        self.finish(st, "accept", res, summary, output, msg.outcomes, msg.summary)

    @telemetry.traced("ggs round", task=lambda self, env, msg: msg.task_id)
    def on_planning_failed(self, env, msg: PlanningFailed) -> None:
        if self.deferred(msg.task_id):
            return DEFER
        if self.ignore(env, msg):
            return
        st = self.task(msg.task_id, msg.intent, msg.intent_slug)
        why = f"planning failed ({msg.error})" if msg.error else "planning failed"
        self.abandon_now(st, why, "planning_failed")

    def on_cancel(self, env, msg: TaskCancel) -> None:
        if self.ignore(env, msg):
            return
        st = self.task(msg.task_id)
        self.abandon_now(st, msg.reason or "cancelled by operator", "cancelled")

    def tick(self) -> None:
        """Timer: re-send what a previous life left unacknowledged, enforce deadlines, expire
        tombstones."""
        now = self.clock()
        if not self._recovered:
            self._recovered = True
            for st in list(self.tasks.values()):
                self.emit(st.task_id, list(st.outbox))
            for tomb in list(self.tombstones.values()):
                self.emit(tomb.task_id, list(tomb.outbox))
        owns = self.client.owns
        for st in [s for s in self.tasks.values() if s.deadline_at and s.deadline_at <= now
                   and (owns(s.task_id) or s.deadline_at + self.backup_grace_s <= now)]:
            # Tell every role to stop work on it, then deliver the honest abandon.
            self.client.publish(TaskCancel(task_id=st.task_id, reason="deadline exceeded"))
            limit = st.deadline_at - (st.created_at or st.first_seen)
            try:
                self.abandon_now(st, f"the deadline passed ({limit:.0f} s) before the task "
                                     f"converged; the round in flight was lost", "deadline")
            except Exception:  # noqa: BLE001 - the last line of the no-hang guarantee
                log.exception("abandoning %s failed; sending a bare FinalResult", st.task_id)
                self.tasks.pop(st.task_id, None)
                self.tombstones[st.task_id] = Tombstone(task_id=st.task_id, ended_at=now,
                                                        directive="abandon")
                self.client.send(FinalResult(
                    task_id=st.task_id, intent_slug=st.intent_slug, directive="abandon",
                    summary="Task abandoned: the deadline passed (GGS could not summarise it)."))
        ttl, cap = self.settings.ggs_tombstone_ttl_s, self.settings.ggs_tombstone_max
        while self.tombstones:
            task_id, tomb = next(iter(self.tombstones.items()))
            if now - tomb.ended_at < ttl and len(self.tombstones) <= cap:
                break
            self.tombstones.popitem(last=False)
            self.store.delete(task_id)
        self.watchdog_at = now

    # -- decisions -------------------------------------------------------------------------------
    def apply(self, st: TaskState, res: RoundResult, msg, elapsed: float) -> None:
        st.trajectory = res.trajectory
        st.last_loss, st.last_grad = res.loss, res.grad
        gap = getattr(msg, "gap_summary", "")
        st.last_gap = gap or st.last_gap
        self.decisions += 1
        self.log(st.task_id, "ggs_decision", d=res.D, p=res.P, omega=res.omega, l=res.L,
                 grad_l=res.grad, directive=res.directive, cell=res.cell, reason=res.reason,
                 urgency=res.urgency, rationale=self.rationale(res, gap),
                 prev_directive=res.prev_directive, replan_round=res.replans,
                 elapsed_ms=round(elapsed, 3))

    @staticmethod
    def rationale(res: RoundResult, gap: str) -> str:
        return res.rationale + (f" Gap: {gap}" if gap else "")

    def direct(self, st: TaskState, res: RoundResult, msg: ReplanRequest) -> None:
        now = self.clock()
        megrams = loss.action_megrams(res.directive, st.task_id, res.replans, msg.outcomes, now)
        directive = PlanDirective(
            task_id=st.task_id, loss=res.loss, prev_directive=res.prev_directive,
            directive=res.directive, blocked_tools=res.blocked_tools,
            blocked_targets=res.blocked_targets,
            must_not=loss.must_not(res.blocked_tools, res.blocked_targets),
            failed_criterion=res.failed_criterion, failure_class=res.failure_class,
            budget_pressure=res.omega, grad_l=res.grad, urgency=res.urgency,
            rationale=self.rationale(res, msg.gap_summary), replan_round=res.replans)
        entries = ([self.entry(MemoryWrite(task_id=st.task_id, megrams=megrams))] if megrams
                   else []) + [self.entry(directive)]
        st.outbox.extend(entries)
        self.persist(st)
        self.log_megrams(st.task_id, megrams)
        self.log(st.task_id, "plan_directive", directive=res.directive,
                 blocked_tools=res.blocked_tools, blocked_targets=res.blocked_targets,
                 failure_class=res.failure_class, failed_criterion=res.failed_criterion,
                 urgency=res.urgency, rationale=directive.rationale, replan_round=res.replans)
        self.emit(st.task_id, entries)

    def log_megrams(self, task_id: str, megrams: list[Megram]) -> None:
        for m in megrams:
            self.log(task_id, "memory_write", state=m.state, level=m.level, space=m.space,
                     entity=m.entity, f=m.f, sigma=m.sigma, k=m.k, megram_id=m.id)

    def finish(self, st: TaskState, directive: str, res: RoundResult | None, summary: str,
               output: Any, outcomes: list[SubTaskOutcome], gap: str,
               reason: str = "", status: str = "") -> None:
        """Deliver the task's one FinalResult (after its terminal Megram) and drop its state."""
        now = self.clock()
        honest = law0_outcome(directive, outcomes, output, status)
        if honest["status"] == "unverified" and honest["unverified"]:
            summary += " Not verified: " + "; ".join(honest["unverified"][:3]) + "."
        megrams: list[Megram] = []
        # Only rounds the loss judged teach memory anything, and a success only when code
        # verified it: an unverified "success" taught the next run to repeat a wrong approach.
        if res is not None and honest["status"] != "unverified":
            content = loss.terminal_content(directive, outcomes, gap or summary)
            megrams = [loss.terminal_megram(directive, st.task_id, st.intent_slug, content, now)]
        if st.law1:
            summary += " [LAW1] refused: " + "; ".join(st.law1) + "."
        traj = st.trajectory
        final = FinalResult(
            task_id=st.task_id, intent_slug=st.intent_slug, directive=directive, **honest,
            prev_directive=res.prev_directive if res else traj.prev_directive,
            summary=summary, output=output, loss=res.loss if res else st.last_loss,
            grad_l=res.grad if res else st.last_grad, replans=traj.directives,
            completed=list(st.completed),
            failed=[f"{k}: {v}" for k, v in st.failed.items()], law1=list(st.law1),
            changed=list(st.changed),
            elapsed_ms=round((now - (st.created_at or st.first_seen)) * 1000, 3),
            llm_calls=self.logged_calls(st), llm_budget=st.llm_budget)
        entries = ([self.entry(MemoryWrite(task_id=st.task_id, megrams=megrams))] if megrams
                   else []) + [self.entry(final)]
        # Memory writes still unacknowledged stay in the outbox; a stale PlanDirective does not.
        carried = [e for e in st.outbox if e["type"] == "MemoryWrite"]
        tomb = Tombstone(task_id=st.task_id, ended_at=now, directive=directive,
                         outbox=carried + entries)
        self.tasks.pop(st.task_id, None)
        self.tombstones[st.task_id] = tomb
        self.persist_tombstone(tomb)
        self.log_megrams(st.task_id, megrams)
        status = {"accept": "accepted", "success": "success", "abandon": "abandoned"}[directive]
        self.log(st.task_id, "task_end", status=status, reason=reason or (res.reason if res else ""),
                 replans=final.replans, elapsed_ms=final.elapsed_ms, outcome=final.status,
                 answer=final.answer or None, summary=final.summary[:500])
        self.final_results += 1
        self.emit(st.task_id, entries)

    def abandon_now(self, st: TaskState, why: str, reason: str) -> None:
        """Abandon outside a judged round (deadline, planning failure, cancel)."""
        last = st.last_loss
        self.decisions += 1
        self.log(st.task_id, "ggs_decision", d=last.D if last else None,
                 p=last.P if last else None, omega=last.Omega if last else None,
                 l=last.L if last else None, grad_l=st.last_grad, directive="abandon",
                 reason=reason, urgency="normal", rationale=f"Abandon: {why}.",
                 prev_directive=st.trajectory.prev_directive,
                 replan_round=st.trajectory.replans)
        summary = (f"Task abandoned: {why}. " + self.progress(st)).strip()
        self.finish(st, "abandon", None, summary, self.partial_output(st), [], st.last_gap,
                    reason=reason)

    # -- summaries and outputs -------------------------------------------------------------------
    @staticmethod
    def progress(st: TaskState) -> str:
        parts = []
        parts.append(f"Completed: {'; '.join(st.completed)}." if st.completed
                     else "Nothing was completed.")
        if st.changed:
            # not done is not untouched: the work of failed subtasks may have stayed
            shown = ", ".join(st.changed[:10]) + (" …" if len(st.changed) > 10 else "")
            parts.append(f"The work left these workspace files changed: {shown}.")
        if st.failed:
            parts.append("Failed: " + "; ".join(f"{k} ({v})" for k, v in st.failed.items()) + ".")
        n = len([v for v in st.best_outputs.values() if v is not None])
        parts.append(f"The output holds every result obtained ({n})." if n
                     else "No usable output was obtained.")
        return " ".join(parts)

    def abandon_summary(self, st: TaskState, res: RoundResult, gap: str) -> str:
        p = self.params
        why = {
            "budget": f"the budget is exhausted (Ω={res.omega:.2f} ≥ θ={p.theta} after "
                      f"{res.replans} replan request(s) and {res.elapsed_ms / 1000:.0f} s)",
            "kill_switch": f"the loss worsened on {res.trajectory.worsening} consecutive rounds "
                           f"(Law 2 kill switch, ∇L={res.grad:+.2f})",
            "metaval_abandon": "the meta-validator's replan budget is spent",
            "replan_budget": f"the replan budget is spent ({res.replans} of "
                             f"{p.max_replans} replan requests)",
            "llm_budget": f"the LLM call budget is spent ({self.calls_spent(st)} calls; "
                          f"raise it with --max-llm-calls or {self.budget_setting()})",
        }.get(res.reason, res.reason)
        text = f"Task abandoned: {why}. {self.progress(st)}"
        if gap:
            text += f" Gap: {gap}"
        return f"{text} {SUGGESTION}"

    def success_summary(self, st: TaskState, res: RoundResult, msg: ReplanRequest) -> str:
        matched = [o for o in msg.outcomes if o.status == "matched"]
        failed = [o for o in msg.outcomes if o.status == "failed"]
        text = (f"Task completed within the convergence threshold (D={res.D:.2f} ≤ "
                f"δ={self.params.delta}). {len(matched)} subtask(s) completed.")
        if failed:
            text += (f" {len(failed)} subtask(s) failed but the gap is within the threshold: "
                     + "; ".join(f"{loss.outcome_key(o)} ({o.failure_reason or 'failed'})"
                                 for o in failed) + ".")
        if msg.gap_summary:
            text += f" Gap: {msg.gap_summary}"
        return text

    @staticmethod
    def success_output(st: TaskState, outcomes: list[SubTaskOutcome]) -> Any:
        """This round's outputs (matched first, then failed ones within the threshold); if the
        round carried none, the best outputs of earlier rounds."""
        merged = loss.merge_outputs([o.output for o in outcomes if o.status == "matched"]
                                    + [o.output for o in outcomes if o.status == "failed"])
        return merged if merged is not None else loss.merge_outputs(list(st.best_outputs.values()))

    @staticmethod
    def partial_output(st: TaskState) -> Any:
        return loss.merge_outputs(list(st.best_outputs.values()))


def law0_outcome(directive: str, outcomes: list[SubTaskOutcome], output: Any,
                 status: str = "") -> dict:
    """The honest outcome of a terminal round (Law 0): verified only when every matched subtask
    was verified by code and none failed; not possible when an absence was verified."""
    checks = [c for o in outcomes for c in o.checks][:20]
    if status == "not_possible":
        absent = [o for o in outcomes if o.not_possible]
        return {"status": "not_possible", "verified": True, "checks": checks, "unverified": [],
                "answer": "; ".join(o.failure_reason or o.answer for o in absent)[:2000]}
    if directive not in ("accept", "success"):
        return {"status": "abandoned", "verified": False, "checks": checks, "unverified": [],
                "answer": ""}
    matched = [o for o in outcomes if o.status == "matched"]
    unverified = [u for o in matched for u in (o.unverified or
                                               ([] if o.verified else ["not checked by code"]))]
    unverified += [f"{o.intent or o.subtask_id} failed: {o.failure_reason or 'failed'}"
                   for o in outcomes if o.status == "failed"]
    verified = bool(matched) and not unverified
    if len(matched) == 1 and matched[0].answer:
        answer = matched[0].answer
    else:
        answer = output if isinstance(output, str) else json.dumps(output, ensure_ascii=False,
                                                                   default=str)
    return {"status": "verified" if verified else "unverified", "verified": verified,
            "checks": checks, "unverified": list(dict.fromkeys(unverified))[:10],
            "answer": (answer or "")[:4000]}


def setup(client: BusClient, settings: Settings) -> Solver:
    return Solver(client, settings).attach()


def main() -> int:
    from services.runtime.role import run_role
    return run_role(ROLE, setup)


# ------------------------------------------------------------------------------------------------
# CLI: artoo ggs explain
# ------------------------------------------------------------------------------------------------

PARAM_FIELDS = {f: f"ggs_{f}" for f in ("alpha", "beta", "lambda", "w1", "w2", "epsilon", "delta",
                                         "rho", "theta", "time_budget_ms", "max_replans",
                                         "kill_threshold")}


def _params_with(overrides: tuple[str, ...]) -> GgsParams:
    extra = {}
    for item in overrides:
        name, sep, value = item.partition("=")
        name = name.strip().removeprefix("ggs_")
        if not sep or name not in PARAM_FIELDS:
            raise click.BadParameter(f"{item!r}: expected NAME=VALUE with NAME one of "
                                     f"{', '.join(PARAM_FIELDS)}", param_hint="--param")
        try:
            extra[PARAM_FIELDS[name]] = (int if name in ("max_replans", "kill_threshold")
                                         else float)(value)
        except ValueError:
            raise click.BadParameter(f"{item!r}: {value!r} is not a number",
                                     param_hint="--param") from None
    return GgsParams.from_settings(load_settings(**extra))


@click.group("ggs")
def ggs_group() -> None:
    """The Goal Gradient Solver (R7)."""


@ggs_group.command("explain")
@click.argument("source", type=click.File("r"))
@click.option("--json", "as_json", is_flag=True, help="print the rounds as JSON")
@click.option("--param", "params", multiple=True, metavar="NAME=VALUE",
              help="override a hyper-parameter, e.g. --param theta=0.7 (repeatable)")
def explain(source, as_json: bool, params: tuple[str, ...]) -> None:
    """Replay a JSON list of rounds (FILE, or - for stdin) through the loss and the decision
    table: D, P, Ω, L, ∇L and the macro-state of each round."""
    try:
        rounds = json.load(source)
    except ValueError as exc:
        raise click.ClickException(f"{source.name}: not valid JSON ({exc})") from None
    if not isinstance(rounds, list):
        raise click.ClickException(f"{source.name}: expected a JSON list of rounds")
    p = _params_with(params)
    try:
        rows = loss.replay(rounds, p)
    except ValueError as exc:
        raise click.ClickException(str(exc)) from None
    if as_json:
        click.echo(json.dumps(rows, indent=2, ensure_ascii=False))
        return
    from rich.console import Console
    from rich.table import Table
    table = Table(title=f"GGS replay (α={p.alpha} β={p.beta} λ={p.lam} ε={p.epsilon} "
                        f"δ={p.delta} ρ={p.rho} θ={p.theta})", title_justify="left")
    for col in ("round", "D", "P", "Ω", "L", "∇L", "macro-state", "cell", "urgency", "why"):
        table.add_column(col, justify="right" if col in ("round", "D", "P", "Ω", "L", "∇L")
                         else "left", overflow="fold")
    for r in rows:
        if "ignored" in r:
            table.add_row(str(r["round"]), *[""] * 5, "(ignored)", "", "", r["ignored"])
            continue
        table.add_row(str(r["round"]), f"{r['D']:.3f}", f"{r['P']:.3f}", f"{r['Omega']:.3f}",
                      f"{r['L']:.3f}", f"{r['grad_l']:+.3f}", r["directive"], r["cell"],
                      r["urgency"], r["rationale"])
    Console(width=max(120, Console().width)).print(table)


def register(main_group: click.Group) -> None:
    main_group.add_command(ggs_group)


if __name__ == "__main__":
    sys.exit(main())
