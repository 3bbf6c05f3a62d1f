"""GGS with several instances (issue 18): the part of the Solver that takes over the tasks of a
dead GGS instance (services/runtime/takeover.py has the design) and turns TaskLost into the
honest abandon. A mixin of services/roles/ggs.py's Solver, which owns all the state it uses."""
from __future__ import annotations

import logging

from protocol.bus import DEFER
from protocol.messages import FinalResult, TaskCancel, TaskLost

from services.runtime.takeover import Begun

log = logging.getLogger("artoo.ggs")


class Takeovers:
    def resume_file(self, task_id: str) -> bool:
        """Take over a task from its state file on this machine (the instance that held it ran
        here): its trajectory, deadline and unacknowledged outbox carry on."""
        record = self.store.load(task_id)
        if not record:
            return False
        try:
            if record.get("kind") == "ended":
                tomb = _models().Tombstone.model_validate(record)
                self.tombstones[task_id] = tomb
                self.emit(task_id, list(tomb.outbox))
                return True
            st = _models().TaskState.model_validate(record["task"])
        except Exception as exc:  # noqa: BLE001 - then it is ended instead
            log.error("unreadable GGS state for %s: %s", task_id, exc)
            return False
        self.tasks[task_id] = st
        self.log(task_id, "ggs_resumed", deadline_at=st.deadline_at, replans=st.trajectory.replans)
        self.emit(task_id, list(st.outbox))
        return True

    def deferred(self, task_id: str) -> bool:
        """A message for a task another (missing) instance holds: not ours until taken over."""
        return (task_id not in self.tasks and task_id not in self.tombstones
                and self.takeover.defer(task_id))

    def on_task_lost(self, env, msg: TaskLost) -> None:
        """Another role's instance took over this task without its state: end it now."""
        if self.deferred(msg.task_id):
            return DEFER
        if self.ignore(env, msg):
            return
        begun = self.takeover.registry.get(msg.task_id)
        spec = begun.msg if begun else None
        st = self.task(msg.task_id, getattr(spec, "intent", ""), getattr(spec, "intent_slug", ""))
        self.client.publish(TaskCancel(task_id=st.task_id, reason=f"{msg.role} state lost"))
        self.abandon_now(st, msg.reason, "lost")

    def take_over(self, begun: Begun) -> None:
        """The GGS instance that held this task is gone: resume it from its state file if that is
        on this machine; else its loss trajectory and outbox are lost with it, and the task ends
        now, honestly, rather than run on unwatched."""
        if self.resume_file(begun.task_id):
            return
        spec = begun.msg
        st = self.task(begun.task_id, getattr(spec, "intent", ""), getattr(spec, "intent_slug", ""))
        st.created_at = getattr(spec, "created_at", 0.0) or st.first_seen
        st.deadline_at = begun.deadline_at
        where = self.takeover.where(begun.holder)
        self.log(st.task_id, "ggs_takeover", lost_instance=begun.holder, lost_where=where)
        self.client.publish(TaskCancel(task_id=st.task_id, reason="ggs state lost"))
        self.abandon_now(st, f"the GGS instance {begun.holder} ({where}) that held this task "
                             f"stopped heartbeating; its loss trajectory and pending decisions were "
                             f"lost with it", "lost")

    def on_final_elsewhere(self, env, msg: FinalResult) -> None:
        """Another instance delivered this task's FinalResult (it owns the task now): a task held
        here as a backup ends silently, so only one FinalResult is ever delivered."""
        st = self.tasks.pop(msg.task_id, None)
        if st is None:
            return
        log.info("%s ended by %s; dropped here", msg.task_id, env.node)
        tomb = _models().Tombstone(task_id=st.task_id, ended_at=self.clock(), directive=msg.directive)
        self.tombstones[st.task_id] = tomb
        self.persist_tombstone(tomb)



def _models():
    from . import ggs   # the Solver's models (ggs imports this module at its top)
    return ggs
