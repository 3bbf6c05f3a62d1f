"""The subtask dispatcher (part of the planner process): runs a plan's sequence groups on effectors.

* Groups run in sequence order; the subtasks of one group run in parallel. When a group is done the
  outputs of every earlier group are injected into the next group's contexts (seeds/000 §5.3). If a
  subtask of a group failed, the later groups are not started: they are reported failed ("not run")
  at once, so the meta-validator's hard gate triggers the replan without spending effector time.
* Placement: each subtask of the current group is offered (SubTaskOffer, re-offered every
  `offer_interval_s` until claimed); the first SubTaskClaim wins and gets a SubTaskAssign, acked only
  by that spawner. If the assigned spawner's heartbeats stop, its unfinished subtasks are re-offered.
* Effector death: an EffectorExited with no outcome seen within `effector_exit_grace_s` becomes a
  failed SubTaskOutcome sent by the dispatcher, so the meta-validator never waits for a dead process.
* Every outcome is relayed to the meta-validator (acknowledged), so an outcome survives an effector
  that exited before the meta-validator (maybe restarting) acknowledged it.
* Per-task state is persisted (services/runtime/taskstate.py) at every step, so a SIGKILLed planner resumes
  the task where it was; it is dropped at FinalResult or TaskCancel.
"""
from __future__ import annotations

import json
import logging
import secrets
import threading
import time
from dataclasses import asdict, dataclass, field
from typing import Any, Callable

from protocol.bus import DEFER, BusClient
from protocol.envelope import Envelope
from protocol.messages import (Criterion, DispatchManifest, EffectorExited, EffectorStarted,
                               PlanningFailed, SubTask, SubTaskAssign, SubTaskClaim, SubTaskOffer,
                               SubTaskOutcome, TaskSpec, ToolCallRecord)
from protocol.settings import Settings

from services.roles.executor import signature
from services.runtime import tasklog, telemetry
from services.runtime.taskstate import EXPIRE_AFTER_DEADLINE_S, TaskStateStore
from services.safety.tools import head_tail

log = logging.getLogger("artoo.dispatcher")

PRIOR_OUTPUTS_HEADING = "Outputs from prior steps (use these directly — do not re-run discovery):"
_TOMBSTONES = 20_000


def render_output(output: Any) -> str:
    if output is None:
        return ""
    if isinstance(output, str):
        return output
    try:
        return json.dumps(output, ensure_ascii=False, default=str)
    except (TypeError, ValueError):
        return str(output)


@dataclass
class Placement:
    offer_id: str
    offered_at: float
    last_offer: float
    spawner: str = ""
    assigned_at: float = 0.0
    pid: int = 0
    exited_at: float = 0.0
    exit_reason: str = ""


@dataclass
class TaskPlan:
    spec: TaskSpec
    round: int
    task_criteria: list[Criterion] = field(default_factory=list)
    subtasks: dict[str, SubTask] = field(default_factory=dict)
    groups: list[int] = field(default_factory=list)
    group_idx: int = 0
    outcomes: dict[str, SubTaskOutcome] = field(default_factory=dict)
    placements: dict[str, Placement] = field(default_factory=dict)
    blocked_tools: list[str] = field(default_factory=list)
    blocked_targets: list[str] = field(default_factory=list)
    must_not: list[str] = field(default_factory=list)
    memory_text: str = ""
    handled: list[str] = field(default_factory=list)   # ids of TaskSpec/PlanDirective acted on
    status: str = "running"                             # running / finished / planning_failed
    error: str = ""                                     # why planning failed

    @property
    def task_id(self) -> str:
        return self.spec.task_id

    def group(self, idx: int | None = None) -> list[SubTask]:
        idx = self.group_idx if idx is None else idx
        if idx >= len(self.groups):
            return []
        return [st for st in self.subtasks.values() if st.sequence == self.groups[idx]]

    def tried_calls(self, keep: int = 12, output_chars: int = 300) -> list[ToolCallRecord]:
        """The calls of this round's failed subtasks, and those earlier rounds had tried, one per
        distinct call (newest kept), for the next round's executor not to run again."""
        calls = [c for st in self.subtasks.values() for c in st.tried_calls]
        calls += [c for out in self.outcomes.values() if out.status == "failed"
                  for c in out.tool_calls if not c.law1]
        seen: dict[str, ToolCallRecord] = {}
        for c in calls:
            key = signature(c.tool, c.arguments)    # the identity the executor refuses by
            seen.pop(key, None)
            seen[key] = c.model_copy(update={"output": head_tail(c.output, output_chars)})
        return list(seen.values())[-keep:]

    def describe_outcomes(self) -> str:
        """A compact account of the last round for the replan prompt."""
        lines = []
        for sid, st in self.subtasks.items():
            out = self.outcomes.get(sid)
            if out is None:
                lines.append(f"- [not finished] {st.intent}")
                continue
            detail = out.failure_reason or head_tail(render_output(out.output), 300)
            failed = [v.criterion for v in out.criteria_verdicts if v.verdict == "fail"]
            tools = ", ".join(f"{t.tool}({t.target})" for t in out.tool_calls[:5])
            line = f"- [{out.status}] {st.intent}: {detail}"
            if failed:
                line += f" | failed criteria: {'; '.join(failed)}"
            if tools:
                line += f" | tools: {tools}"
            lines.append(line)
        return "\n".join(lines)

    def to_dict(self) -> dict:
        return {
            "task_id": self.task_id, "deadline_at": self.spec.deadline_at,
            "spec": self.spec.model_dump(), "round": self.round,
            "task_criteria": [c.model_dump() for c in self.task_criteria],
            "subtasks": [st.model_dump() for st in self.subtasks.values()],
            "groups": self.groups, "group_idx": self.group_idx,
            "outcomes": [o.model_dump() for o in self.outcomes.values()],
            "placements": {k: asdict(v) for k, v in self.placements.items()},
            "blocked_tools": self.blocked_tools, "blocked_targets": self.blocked_targets,
            "must_not": self.must_not, "memory_text": self.memory_text,
            "handled": self.handled[-20:], "status": self.status, "error": self.error,
        }

    @classmethod
    def from_dict(cls, data: dict) -> "TaskPlan":
        subtasks = [SubTask.model_validate(s) for s in data.get("subtasks", [])]
        outcomes = [SubTaskOutcome.model_validate(o) for o in data.get("outcomes", [])]
        return cls(
            spec=TaskSpec.model_validate(data["spec"]), round=data.get("round", 0),
            task_criteria=[Criterion.model_validate(c) for c in data.get("task_criteria", [])],
            subtasks={s.subtask_id: s for s in subtasks}, groups=list(data.get("groups", [])),
            group_idx=data.get("group_idx", 0),
            outcomes={o.subtask_id: o for o in outcomes},
            placements={k: Placement(**v) for k, v in data.get("placements", {}).items()},
            blocked_tools=data.get("blocked_tools", []),
            blocked_targets=data.get("blocked_targets", []),
            must_not=data.get("must_not", []), memory_text=data.get("memory_text", ""),
            handled=data.get("handled", []), status=data.get("status", "running"),
            error=data.get("error", ""))


class Dispatcher:
    """Plan state of the tasks this planner instance owns, and the effector placement protocol."""

    def __init__(self, client: BusClient, settings: Settings):
        self.client = client
        self.settings = settings
        self.store = TaskStateStore(settings, "planner")
        self.plans: dict[str, TaskPlan] = {}
        self.lock = threading.RLock()
        self.spawner_seen: dict[str, float] = {}
        self.started = time.time()
        self._ended: dict[str, float] = {}
        self.takeover = None   # the planner's Takeover (services/runtime/takeover.py)

    def _defer(self, task_id: str) -> bool:
        """An outcome or exit for a task whose plan another (missing) instance holds."""
        return (self.takeover is not None and task_id not in self.plans
                and not self.ended(task_id) and self.takeover.defer(task_id))

    # -- wiring --------------------------------------------------------------------------------
    def register(self) -> None:
        c = self.client
        c.on("SubTaskClaim", self.on_claim, partition=True)
        c.on("SubTaskOutcome", self.on_outcome, ack=True, partition=True,
             when=lambda env, _m: env.node != c.node)
        c.on("EffectorStarted", self.on_started, partition=True)
        c.on("EffectorExited", self.on_exited, ack=True, partition=True)
        c.on("Heartbeat", self.on_spawner_heartbeat, task="spawner")
        c.add_timer(0.2, self.tick)
        c.heartbeat_info = lambda: {"tasks": len(self.plans),
                                    "open_offers": sum(1 for p in self.plans.values()
                                                       for pl in p.placements.values()
                                                       if not pl.spawner)}

    def resume(self) -> None:
        """Reload the plans a killed predecessor of this instance was running."""
        for task_id, data in self.store.load_all(self.client.owns).items():
            try:
                plan = TaskPlan.from_dict(data)
            except Exception as exc:  # a damaged file must not stop the role
                log.warning("dropping unreadable plan state of %s: %s", task_id, exc)
                self.store.delete(task_id)
                continue
            self.plans[task_id] = plan
            tasklog.append(self.settings.tasks_dir, task_id, "planner_resumed", plan_round=plan.round,
                           group_idx=plan.group_idx)
            log.info("resumed plan of %s (round %d, group %d)", task_id, plan.round, plan.group_idx)
            self._redeliver(plan)

    def resume_one(self, task_id: str) -> bool:
        """Take over one task's plan from its state file on this machine (its holder ran here)."""
        data = self.store.load(task_id)
        if not data:
            return False
        try:
            plan = TaskPlan.from_dict(data)
        except Exception as exc:  # noqa: BLE001 - then it is ended instead
            log.warning("unreadable plan state of %s: %s", task_id, exc)
            return False
        with self.lock:
            self.plans[task_id] = plan
        tasklog.append(self.settings.tasks_dir, task_id, "planner_resumed", plan_round=plan.round,
                       group_idx=plan.group_idx, taken_over=True)
        self._redeliver(plan)
        return True

    def _redeliver(self, plan: TaskPlan) -> None:
        """A resumed plan sends the meta-validator again what its predecessor had sent it: the
        round's manifest and the outcomes relayed so far. Each was persisted here before it left,
        but the re-sending until acknowledged died with that process, so a crash between the two
        left the fan-in without its manifest (its outcomes wait as early ones for ever) or
        without an outcome. The meta-validator takes a copy it holds as a no-op. A round that
        could not be planned sends GGS its PlanningFailed again, for the same reason."""
        if plan.status == "planning_failed":
            self._send_planning_failed(plan)    # GGS ends the task (a copy it ignores)
            return
        if not plan.subtasks:
            return
        self._manifest(plan)
        for outcome in plan.outcomes.values():
            self.client.send(outcome, consumers=("metaval",))

    def get(self, task_id: str) -> TaskPlan | None:
        with self.lock:
            return self.plans.get(task_id)

    def ended(self, task_id: str) -> bool:
        return task_id in self._ended

    def drop(self, task_id: str) -> None:
        with self.lock:
            self.plans.pop(task_id, None)
            self._ended[task_id] = time.time()
            if len(self._ended) > _TOMBSTONES:
                for old in sorted(self._ended, key=self._ended.get)[: _TOMBSTONES // 2]:
                    del self._ended[old]
        self.store.delete(task_id)

    def _save(self, plan: TaskPlan) -> None:
        self.store.save(plan.task_id, plan.to_dict())

    # -- starting a round ----------------------------------------------------------------------
    def start_round(self, spec: TaskSpec, round_: int, reply, blocked_tools: list[str],
                    blocked_targets: list[str], must_not: list[str], memory_text: str,
                    handled: str, previous: TaskPlan | None = None) -> TaskPlan:
        """Turn a validated PlanReply into subtasks with code-assigned ids and dispatch group 1."""
        task = spec.task_id
        suffix = secrets.token_hex(2)
        subtasks: dict[str, SubTask] = {}
        tried = previous.tried_calls() if previous else []
        for i, planned in enumerate(reply.subtasks, 1):
            sid = f"st{round_}.{i}-{suffix}"
            context = planned.context.strip()
            if memory_text.strip():  # effectors get memory only through the planner (§5.4)
                context = (context + "\n\n" if context else "") + memory_text.strip()
            if spec.world and spec.world not in context:   # seed 002: the world's projection
                context = (context + "\n\n" if context else "") + spec.world
            subtasks[sid] = SubTask(
                subtask_id=sid, parent_task_id=task, intent=planned.intent.strip(),
                success_criteria=[Criterion(text=c.text.strip(), mode=c.mode)
                                  for c in planned.success_criteria if c.text.strip()],
                context=context, sequence=planned.sequence or 1, plan_round=round_,
                blocked_tools=blocked_tools, blocked_targets=blocked_targets,
                deadline_at=spec.deadline_at, options=spec.options,
                goal=spec.raw_input if len(reply.subtasks) == 1 else "", tried_calls=tried,
                referents=spec.referents, priority=spec.priority)
        plan = TaskPlan(spec=spec, round=round_,
                        task_criteria=[Criterion(text=c.text.strip(), mode=c.mode)
                                       for c in reply.task_criteria if c.text.strip()],
                        subtasks=subtasks, groups=sorted({s.sequence for s in subtasks.values()}),
                        blocked_tools=blocked_tools, blocked_targets=blocked_targets,
                        must_not=must_not, memory_text=memory_text,
                        handled=(previous.handled if previous else []) + [handled])
        tasklog.append(self.settings.tasks_dir, task, "plan", plan_round=round_,
                       task_criteria=[c.model_dump() for c in plan.task_criteria],
                       subtasks=[{"subtask_id": s.subtask_id, "intent": s.intent,
                                  "sequence": s.sequence,
                                  "criteria": [c.model_dump() for c in s.success_criteria]}
                                 for s in subtasks.values()],
                       must_not=must_not or None)
        with self.lock:
            if self.ended(task):
                return plan
            self.plans[task] = plan
            # persisted (with its first group's placements) before anything leaves: a restart
            # resumes this round; then the manifest, then the offers
            self._dispatch_group(plan, first=lambda: self._manifest(plan))
        return plan

    def _manifest(self, plan: TaskPlan) -> None:
        self.client.send(DispatchManifest(
            task_id=plan.task_id, plan_round=plan.round, subtask_ids=list(plan.subtasks),
            task_criteria=plan.task_criteria, task_spec=plan.spec, dispatched_at=time.time()))

    def planning_failed(self, spec: TaskSpec, round_: int, error: str) -> None:
        """Record that this round could not be planned, then tell GGS (it ends the task)."""
        with self.lock:
            plan = self.plans.get(spec.task_id) or TaskPlan(spec=spec, round=round_)
            plan.status = "planning_failed"
            plan.round = round_
            plan.error = error
            self.plans[spec.task_id] = plan
            self._save(plan)
        self._send_planning_failed(plan)

    def _send_planning_failed(self, plan: TaskPlan) -> None:
        spec = plan.spec
        self.client.send(PlanningFailed(task_id=spec.task_id, intent=spec.intent,
                                        intent_slug=spec.intent_slug, error=plan.error,
                                        plan_round=plan.round))

    # -- groups --------------------------------------------------------------------------------
    @telemetry.traced("dispatch", task=lambda self, plan, *a, **k: plan.task_id,
                      attrs=lambda self, plan, *a, **k: {"artoo.plan_round": plan.round,
                                                         "artoo.group": plan.group_idx})
    def _dispatch_group(self, plan: TaskPlan, first: Callable[[], None] | None = None) -> None:
        """Offer every subtask of the current group, with earlier outputs in its context.
        `first`: what is sent once the plan is persisted, before the offers (the manifest)."""
        group = plan.group()
        if not group:
            plan.status = "finished"
            self._save(plan)
            if first is not None:
                first()
            return
        prior = self._prior_outputs(plan)
        now = time.time()
        left = self._calls_left(plan)
        for st in group:
            st.llm_calls_left = None if left is None else left // len(group)
            if prior and PRIOR_OUTPUTS_HEADING not in st.context:
                st.context = (st.context + "\n\n" if st.context else "") + prior
            st.deadline_at = min(plan.spec.deadline_at or now + self.settings.task_deadline_s,
                                 now + self.settings.subtask_deadline_s)
            plan.placements[st.subtask_id] = Placement(offer_id=secrets.token_hex(6),
                                                       offered_at=now, last_offer=now)
        self._save(plan)
        if first is not None:
            first()
        tasklog.append(self.settings.tasks_dir, plan.task_id, "dispatch", plan_round=plan.round,
                       sequence=plan.groups[plan.group_idx],
                       subtask_ids=[st.subtask_id for st in group])
        for st in group:
            self._offer(plan, st)
            self.client.publish(st)  # observability copy with the final context

    def _calls_left(self, plan: TaskPlan) -> int | None:
        from .callbudget import calls_left
        return calls_left(self.settings, plan.task_id, plan.spec.options.max_llm_calls)

    def _prior_outputs(self, plan: TaskPlan) -> str:
        if plan.group_idx == 0:
            return ""
        budget = self.settings.tool_output_chars
        chunks = []
        for idx in range(plan.group_idx):
            for st in plan.group(idx):
                out = plan.outcomes.get(st.subtask_id)
                text = render_output(out.output if out else None).strip()
                if text:
                    chunks.append(f"[{st.intent}]\n{head_tail(text, budget)}")
        return PRIOR_OUTPUTS_HEADING + "\n" + "\n---\n".join(chunks) if chunks else ""

    def _offer(self, plan: TaskPlan, st: SubTask) -> None:
        pl = plan.placements[st.subtask_id]
        pl.last_offer = time.time()
        self.client.publish(SubTaskOffer(task_id=plan.task_id, subtask_id=st.subtask_id,
                                         offer_id=pl.offer_id, subtask=st), to="spawner")

    def _group_done(self, plan: TaskPlan) -> None:
        group = plan.group()
        if any(st.subtask_id not in plan.outcomes for st in group):
            return
        failed = [plan.outcomes[st.subtask_id] for st in group
                  if plan.outcomes[st.subtask_id].status == "failed"]
        plan.group_idx += 1
        if failed and plan.group_idx < len(plan.groups):
            reason = "; ".join(f"{o.intent or o.subtask_id}: {o.failure_reason or 'failed'}"
                               for o in failed)
            for idx in range(plan.group_idx, len(plan.groups)):
                for st in plan.group(idx):
                    self._fail(plan, st, f"not run: an earlier step failed ({reason})"[:600])
            plan.group_idx = len(plan.groups)
        self._dispatch_group(plan)

    def _fail(self, plan: TaskPlan, st: SubTask, reason: str) -> None:
        """A failed outcome emitted by the dispatcher itself (dead effector, skipped step)."""
        outcome = SubTaskOutcome(task_id=plan.task_id, subtask_id=st.subtask_id,
                                 parent_task_id=plan.task_id, intent=st.intent,
                                 success_criteria=st.success_criteria, status="failed",
                                 failure_reason=reason, plan_round=plan.round,
                                 sequence=st.sequence)
        plan.outcomes[st.subtask_id] = outcome
        tasklog.append(self.settings.tasks_dir, plan.task_id, "subtask_end",
                       subtask_id=st.subtask_id, status="failed", reason=reason,
                       source="dispatcher")
        self.client.send(outcome, consumers=("metaval",))

    # -- placement handlers (loop thread: quick) -----------------------------------------------
    def on_claim(self, env: Envelope, claim: SubTaskClaim) -> None:
        self.spawner_seen[claim.spawner] = time.time()
        with self.lock:
            plan = self.plans.get(claim.task_id)
            pl = plan.placements.get(claim.subtask_id) if plan else None
            st = plan.subtasks.get(claim.subtask_id) if plan else None
            if (pl is None or st is None or pl.offer_id != claim.offer_id or pl.spawner
                    or claim.subtask_id in plan.outcomes):
                return  # another spawner won, or the offer is stale
            pl.spawner = claim.spawner
            pl.assigned_at = time.time()
            self._save(plan)
            self.client.send(SubTaskAssign(task_id=plan.task_id, subtask_id=st.subtask_id,
                                           offer_id=pl.offer_id, spawner=claim.spawner,
                                           subtask=st), consumers=("spawner",))
        tasklog.append(self.settings.tasks_dir, claim.task_id, "subtask_assigned",
                       subtask_id=claim.subtask_id, spawner=claim.spawner)

    def on_started(self, env: Envelope, msg: EffectorStarted) -> None:
        self.spawner_seen[msg.spawner] = time.time()
        with self.lock:
            plan = self.plans.get(msg.task_id)
            pl = plan.placements.get(msg.subtask_id) if plan else None
            if pl is not None and pl.spawner == msg.spawner:
                pl.pid = msg.pid

    def on_exited(self, env: Envelope, msg: EffectorExited) -> None:
        self.spawner_seen[msg.spawner] = time.time()
        if self._defer(msg.task_id):
            return DEFER
        with self.lock:
            plan = self.plans.get(msg.task_id)
            pl = plan.placements.get(msg.subtask_id) if plan else None
            if pl is None or msg.subtask_id in plan.outcomes or pl.spawner != msg.spawner:
                return
            pl.exited_at = time.time()
            detail = msg.reason or "exited"
            if msg.exit_code not in (None, 0):
                detail += f", exit code {msg.exit_code}"
            if msg.signal:
                detail += f", signal {msg.signal}"
            pl.exit_reason = detail
            self._save(plan)

    def on_spawner_heartbeat(self, env: Envelope, beat) -> None:
        self.spawner_seen[beat.node] = time.time()

    def on_outcome(self, env: Envelope, outcome: SubTaskOutcome) -> None:
        if self._defer(outcome.task_id):
            return DEFER
        with self.lock:
            plan = self.plans.get(outcome.task_id)
            if (plan is None or outcome.subtask_id not in plan.subtasks
                    or outcome.subtask_id in plan.outcomes):
                return  # stale round, finished task or duplicate
            plan.outcomes[outcome.subtask_id] = outcome
            # Relay: the meta-validator gets it even if the effector is gone before it acked.
            self.client.send(outcome, consumers=("metaval",))
            self._group_done(plan)
            self._save(plan)

    # -- the timer: re-offers, lost spawners, dead effectors -----------------------------------
    def tick(self) -> None:
        now = time.time()
        s = self.settings
        with self.lock:
            expired = [p.task_id for p in self.plans.values()
                       if p.spec.deadline_at and now > p.spec.deadline_at + EXPIRE_AFTER_DEADLINE_S]
        for task_id in expired:  # its FinalResult went by while this instance was down/stopped
            log.info("dropping the plan of %s: its deadline passed", task_id)
            self.drop(task_id)
        with self.lock:
            for plan in list(self.plans.values()):
                if plan.status != "running":
                    continue
                if plan.group() and not any(st.subtask_id in plan.placements or
                                            st.subtask_id in plan.outcomes for st in plan.group()):
                    # saved, then killed before its group was offered (a crash of everything
                    # right after planning): offer it now (resume sent the manifest again)
                    self._dispatch_group(plan)
                    continue
                changed = False
                for st in plan.group():
                    sid = st.subtask_id
                    pl = plan.placements.get(sid)
                    if pl is None or sid in plan.outcomes:
                        continue
                    if pl.exited_at and now - pl.exited_at >= s.effector_exit_grace_s:
                        self._fail(plan, st, f"the effector ended without an outcome ({pl.exit_reason})")
                        changed = True
                    elif not pl.spawner:
                        if now - pl.last_offer >= s.offer_interval_s:
                            self._offer(plan, st)
                    elif not pl.exited_at:
                        seen = max(self.spawner_seen.get(pl.spawner, 0.0), self.started,
                                   pl.assigned_at)
                        if now - seen > s.missing_after_s:
                            log.warning("spawner %s lost; re-offering %s", pl.spawner, sid)
                            tasklog.append(s.tasks_dir, plan.task_id, "subtask_reoffered",
                                           subtask_id=sid, lost_spawner=pl.spawner)
                            plan.placements[sid] = Placement(offer_id=secrets.token_hex(6),
                                                             offered_at=now, last_offer=now)
                            self._offer(plan, st)
                            changed = True
                if changed:
                    self._group_done(plan)
                    self._save(plan)
