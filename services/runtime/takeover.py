"""Taking over the tasks of a dead instance of a partitioned role (issue 18: "partitioning by task
keeps working when instances of a role are on different hosts").

Ownership follows liveness (protocol/bus/membership.py): when instance d stops heartbeating, the
tasks it owned move to their next-ranked live instance. New messages about them then reach the new
owner, which holds no state for them. The design, the simplest that leaves no task hanging:

* **A registry of begun tasks.** Every instance watches its role's *begin* messages for all tasks
  (not only its own: TaskSpec for the planner and GGS, DispatchManifest for the meta-validator,
  ClarificationRequest for the perceiver) until the task's *end* messages (FinalResult, TaskCancel,
  ...). An entry is *mine* when a copy of its begin message reached this instance while it owned
  the task (then this instance handled it itself).
* **Defer, then take over.** A message about a task this instance does not hold, whose begin went
  to another instance, is left unacknowledged (the handler returns DEFER): its sender re-sends it
  (at most `ack_max_backoff_s` apart), so if the holder comes back in time (a supervisord restart
  on the same host, which resumes from its state files) the holder gets it. A task this instance has
  owned without holding it for `settle_s` = ack_max_backoff_s + missing_after_s was acknowledged
  by an instance that is gone — any unacknowledged begin message would have been re-delivered here
  by then (a begin message fenced for a peer that may only be slow, protocol/bus/membership.py,
  is handled at its first re-send after the fence: the registry waits for that too) — so this
  instance takes it over.
* **Taking over resumes the task if its state is here, else ends it honestly.** The role's state
  for a task (a plan, a round's fan-in, a loss trajectory, a pending question) is in the holder's
  memory and in its state file (services/runtime/taskstate.py) on the holder's machine. When that
  file is on this machine (several instances of a role on one host share `$ARTOO_HOME/state/`),
  the new owner loads it and carries on. Otherwise (the holder was on another host) it ends the
  task at once with the reason: GGS abandons it; the other roles send TaskLost, which GGS turns
  into the abandon. Either way the task moves on ~missing_after_s + settle_s (≈ 10 s) after its
  holder died, not at its deadline. At start an instance also registers the state files on its
  machine of tasks it does not own, so a task it had taken over before a restart of its own is
  not forgotten.
* **Handing back.** When a missing instance comes back, the tasks it ranks first move back to it.
  A live instance holding a task it no longer owns releases it (forgets it, keeps the state file:
  on the same host the returning instance reloaded it when it started). GGS instead keeps such a task as a
  backup: it acts on no message for it, drops it when another instance's FinalResult for it goes by,
  and enforces its deadline only `settle_s + missing_after_s` late — the no-hang guarantee holds
  even when the returning instance has no state for it.
"""
from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Any, Callable, Iterable

from protocol.bus import BusClient
from protocol.messages import TaskLost
from protocol.settings import Settings

log = logging.getLogger("artoo.takeover")
REGISTRY_MAX = 50_000


@dataclass
class Begun:
    task_id: str
    msg: Any                 # the latest begin message seen (TaskSpec, DispatchManifest, ...);
                             # None for a task registered from a state file
    deadline_at: float
    holder: int              # the instance that owned the task when its begin message went by
    mine: bool               # a begin message reached this instance while it owned the task
    sent_at: float = 0.0     # when its begin message was first sent (re-sends keep it)
    orphan_since: float = 0.0


class Takeover:
    def __init__(self, client: BusClient, settings: Settings, *, begins: Iterable[str],
                 ends: Iterable[str], holds: Callable[[str], bool],
                 take_over: Callable[[Begun], None],
                 held: Callable[[], Iterable[str]] | None = None,
                 release: Callable[[str], None] | None = None):
        self.client, self.settings = client, settings
        self.begins, self.ends = tuple(begins), tuple(ends)
        self.holds, self.take_over = holds, take_over
        self.held, self.release = held, release
        self.registry: dict[str, Begun] = {}
        self.settle_s = settings.ack_max_backoff_s + settings.missing_after_s
        # a fenced begin message (membership.py) is handled at its first re-send after the fence
        self.redelivered_by_s = (settings.missing_after_s + 2 * settings.ack_max_backoff_s + 1.0)
        self.taken = 0
        self.released = 0

    @property
    def active(self) -> bool:
        return self.client.instances > 1

    def attach(self) -> "Takeover":
        """Subscribe and start the timer (nothing to do for a role with one instance)."""
        if not self.active:
            return self
        for type_name in self.begins:   # re-sent copies too: one may arrive once we own the task
            self.client.on(type_name, self._begin, every_copy=True)
        for type_name in self.ends:
            self.client.on(type_name, self._end, every_copy=True)
        self.client.add_timer(1.0, self.tick)
        return self

    # -- the registry (loop thread) --------------------------------------------------------------
    def _begin(self, env, msg) -> None:
        task = getattr(msg, "task_id", "") or ""
        if not task or task == "-":
            return
        spec = getattr(msg, "task_spec", None)
        deadline = (getattr(msg, "deadline_at", 0.0) or (spec.deadline_at if spec else 0.0)
                    or time.time() + self.settings.task_deadline_s)
        holder = self.client.owner_of(task)
        mine = holder == self.client.instance
        slow = self.client.membership.fenced_by(task, env.ts) if mine else None
        if slow is not None:   # fenced off for a peer that may only be slow (membership.py)
            mine, holder = False, slow
        entry = self.registry.get(task)
        if entry is None:
            if len(self.registry) >= REGISTRY_MAX:
                oldest = min(self.registry.values(), key=lambda e: e.deadline_at)
                del self.registry[oldest.task_id]
            self.registry[task] = Begun(task, msg, deadline, holder, mine, env.ts)
        else:
            entry.msg, entry.deadline_at = msg, deadline
            entry.mine = entry.mine or mine
            if not mine:
                entry.holder = holder

    def register_files(self, states: dict[str, dict]) -> None:
        """At start: state files on this machine of tasks another instance owns now (a sibling
        instance's, or tasks this instance had taken over before it restarted): if their owner
        turns out to be missing, they are taken over like any other."""
        if not self.active:
            return
        for task, data in states.items():
            if task not in self.registry:
                deadline = float(data.get("deadline_at") or 0) or \
                    time.time() + self.settings.task_deadline_s
                self.registry[task] = Begun(task, None, deadline, self.client.owner_of(task), False)

    def _end(self, env, msg) -> None:
        self.registry.pop(getattr(msg, "task_id", ""), None)

    def defer(self, task_id: str) -> bool:
        """True for a message about a task this instance does not hold that began at another
        instance not yet taken over: leave it unacknowledged (return DEFER)."""
        entry = self.registry.get(task_id)
        return entry is not None and not entry.mine

    def where(self, instance: int) -> str:
        return self.client.membership.where.get(instance, "never heard here")

    def lost(self, entry: Begun, role: str, what: str) -> TaskLost:
        """The TaskLost a role sends for a task it took over: `what` says which state was lost."""
        where = self.where(entry.holder)
        return TaskLost(task_id=entry.task_id, role=role, lost_instance=entry.holder,
                        lost_where=where,
                        reason=f"{role} instance {entry.holder} ({where}) stopped heartbeating "
                               f"while it held this task; {what} died with it, so the task "
                               f"cannot continue")

    # -- the timer --------------------------------------------------------------------------------
    def tick(self) -> None:
        now = time.time()
        c = self.client
        for task, entry in list(self.registry.items()):
            if now > entry.deadline_at + self.settle_s:
                del self.registry[task]         # GGS ends every task by its deadline
                continue
            if entry.mine or not c.owns(task) or c.busy.get(task) or self.holds(task):
                entry.orphan_since = 0.0
                continue
            if not entry.orphan_since:
                entry.orphan_since = now
                continue
            if now - entry.orphan_since < self.settle_s or \
                    now - entry.sent_at < self.redelivered_by_s:
                continue
            del self.registry[task]
            self.taken += 1
            log.warning("%s: taking over %s from %s instance %d (%s), missing",
                        c.node, task, c.role, entry.holder, self.where(entry.holder))
            try:
                self.take_over(entry)
            except Exception:  # noqa: BLE001 - never take the role down
                log.exception("%s: taking over %s failed", c.node, task)
        if self.held is None or self.release is None:
            return
        for task in list(self.held()):
            if c.owns(task) or c.busy.get(task):
                continue
            entry = self.registry.get(task)
            if entry is not None:
                entry.mine, entry.holder = False, c.owner_of(task)
            self.released += 1
            log.info("%s: %s moved back to %s instance %d; released", c.node, task, c.role,
                     c.owner_of(task))
            try:
                self.release(task)
            except Exception:  # noqa: BLE001
                log.exception("%s: releasing %s failed", c.node, task)

    def info(self) -> dict:
        return {"taken_over": self.taken, "released": self.released, "instances":
                self.client.instances, "alive": sorted(self.client.membership.alive()),
                "misconfigured": sorted(self.client.membership.misconfigured)} \
            if self.active else {}
