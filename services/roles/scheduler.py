"""The scheduler role: starts each scheduled goal's run as a normal task (`artoo schedule`).

One process (supervisord `[program:scheduler]`). Schedules live in `$ARTOO_HOME/schedules.json`
(services/runtime/schedules.py: format, due-time math, and why the CLI talks to the scheduler
through that file rather than over the bus). Every `ARTOO_SCHEDULER_TICK_S` the scheduler re-reads
the file if it changed and, for each schedule that is due:

* **fires**: picks a run id (`run-YYYYmmdd-HHMMSS-xxxx`), records it in the file (the schedule's
  `running` list and `open_runs`, with the UserRequest's message id) and only then sends the
  `UserRequest` (options: the schedule's workspace and `yes`, `interactive=False`) to the perceiver,
  exactly as `artoo run` does; it is re-sent until the perceiver acks it. A scheduler restarted
  before that ack re-sends it under the same message id, so the perceiver de-duplicates it;
* **skips** the slot (history: "skipped: previous run still running") while the schedule's previous
  run has no FinalResult, unless the schedule allows overlap;
* **reports missed slots** (the daemon was down, the host asleep) in the schedule's history and
  counters, and runs once for all of them, never once per slot.

A run ends with its FinalResult (or ConversationalReply): the scheduler stands in for the operator
of the runs it started and acknowledges those as `user`, the consumer GGS and the perceiver wait
for (nobody else follows a scheduled run). Should it miss one (it was down and GGS gave up
re-sending), the run's decision log (`task_end`) or its deadline passing settles it.
"""
from __future__ import annotations

import copy
import logging
import time

from protocol.bus import BusClient
from protocol.messages import RunOptions, UserRequest
from protocol.settings import Settings

from services.runtime import schedules, tasklog
from services.runtime.role import run_role
from services.runtime.taskstate import STALE_AFTER_DEADLINE_S

ROLE = "scheduler"
log = logging.getLogger("artoo.scheduler")
CHECK_LOGS_EVERY_S = 15.0    # how often open runs are checked against their decision logs
LOCK_WAIT_S = 2.0            # the file lock is held for milliseconds; busy longer = next tick


class Scheduler:
    def __init__(self, client: BusClient, settings: Settings):
        self.client = client
        self.settings = settings
        self.store = schedules.ScheduleStore(settings.schedules_file)
        self.tick_s = max(0.05, settings.scheduler_tick_s)
        # a slot seen later than this is missed, not late (one tick plus time to read the file)
        self.grace_s = max(2.0, 2 * self.tick_s + 1.0)
        self.data = schedules.empty()
        self.stamp: tuple[int, int] | None = None
        self.ended: dict[str, dict] = {}        # run id -> end record not yet written to the file
        self.acked: set[str] = set()            # runs whose UserRequest the perceiver acked
        self.resubmitted = False
        self.checked_logs_at = 0.0
        self.ticks = 0
        self.ticked_at = 0.0
        self.fired = 0

    def register(self) -> None:
        c = self.client
        c.on("FinalResult", self.on_end, ack="user", when=self.mine)
        c.on("ConversationalReply", self.on_end, ack="user", when=self.mine)
        c.add_timer(self.tick_s, self.tick)
        c.heartbeat_info = self.info

    def info(self) -> dict:
        scheds = self.data.get("schedules", [])
        return {"schedules": len(scheds), "active": sum(not s.get("paused") for s in scheds),
                "open_runs": len(self.data.get("open_runs", {})), "fired": self.fired,
                "ticks": self.ticks, "ticked_at": self.ticked_at}

    def mine(self, env, msg) -> bool:
        return env.task in self.data.get("open_runs", {})

    # -- bus handlers (loop thread) ---------------------------------------------------------------
    def on_end(self, env, msg) -> None:
        outcome = ("conversational" if env.type == "ConversationalReply"
                   else str(msg.status or msg.directive))
        self.ended.setdefault(env.task, {"outcome": outcome, "how": env.type, "ts": time.time()})
        self.tick(reason="end")

    def on_submitted(self, run_id: str, ok: bool) -> None:
        if ok:
            self.acked.add(run_id)
        else:
            log.error("the perceiver never acknowledged the UserRequest of %s", run_id)
            self.ended.setdefault(run_id, {"outcome": "not_started", "how": "no ack",
                                           "ts": time.time()})

    # -- the tick (loop thread) -----------------------------------------------------------------
    def tick(self, reason: str = "tick") -> None:
        now = time.time()
        if reason == "tick":
            self.ticks += 1
            self.ticked_at = now
        self._reload()
        if now - self.checked_logs_at >= CHECK_LOGS_EVERY_S:
            self.checked_logs_at = now
            self._check_logs(now)
        first = not self.resubmitted
        due = [s["id"] for s in self.data["schedules"]
               if not s.get("paused") and float(s.get("next_due", 0)) <= now]
        acked = [r for r in self.acked if not self.data["open_runs"].get(r, {}).get("submitted")]
        if not (due or self.ended or acked or first):
            return
        try:
            sends = self._apply(now, set(due), acked, first)
        except TimeoutError as exc:
            log.warning("%s; trying again next tick", exc)
            return
        except schedules.ScheduleError as exc:
            log.error("cannot use the schedule file: %s", exc)
            return
        for item in sends:
            self._send(item)

    def _reload(self) -> None:
        stamp = self.store.stamp()
        if stamp == self.stamp:
            return
        try:
            self.data = self.store.read()
            self.stamp = stamp
        except schedules.ScheduleError as exc:
            log.error("%s (keeping the schedules read before)", exc)

    def _apply(self, now: float, due: set[str], acked: list[str], first: bool) -> list[dict]:
        """One locked read-modify-write: runs that ended, UserRequests acked, slots due."""
        sends: list[dict] = []
        with self.store.edit(timeout_s=LOCK_WAIT_S) as data:
            runs = data["open_runs"]
            by_id = {s["id"]: s for s in data["schedules"]}
            for run_id, end in list(self.ended.items()):
                rec = runs.pop(run_id, None)
                sched = by_id.get(rec["schedule"]) if rec else None
                if sched is not None:
                    sched["running"] = [r for r in sched.get("running", []) if r != run_id]
                    sched["last_outcome"] = end["outcome"]
                    schedules.note(sched, "ended", end["ts"], run_id=run_id,
                                   outcome=end["outcome"], detail=end["how"])
            for run_id in acked:
                if run_id in runs:
                    runs[run_id]["submitted"] = True
            if first:   # UserRequests a previous instance recorded but never saw acked
                sends += [dict(rec, run_id=run_id) for run_id, rec in runs.items()
                          if not rec.get("submitted")]
            for sched in data["schedules"]:
                if sched["id"] in due:
                    sends += self._decide(sched, runs, now)
        self.ended.clear()
        self.acked.difference_update(acked)
        self.resubmitted = True
        self.data = copy.deepcopy(data)
        self.stamp = self.store.stamp()
        return sends

    def _decide(self, sched: dict, runs: dict, now: float) -> list[dict]:
        sched["running"] = [r for r in sched.get("running", []) if r in runs]
        d = schedules.evaluate(sched, now, grace_s=self.grace_s)
        if not (d.fire or d.skip):
            return []
        slot = sched["next_due"]
        sched["next_due"] = d.next_due
        if d.missed:
            sched["missed"] = sched.get("missed", 0) + d.missed
            schedules.note(sched, "missed", now, slots=d.missed, since=slot,
                           detail=f"{d.missed} slot(s) went by unrun (daemon down?); "
                                  f"{'caught up by one run' if d.fire else 'not run'}")
        if d.skip:
            sched["skipped"] = sched.get("skipped", 0) + 1
            schedules.note(sched, "skipped", now, slot=slot, run_id=sched["running"][-1],
                           detail="skipped: previous run still running")
            log.info("schedule %s: skipped, %s still running", sched["id"], sched["running"][-1])
            return []
        run_id = tasklog.new_run_id()
        while run_id in runs:
            run_id = tasklog.new_run_id()
        deadline_at = now + self.settings.task_deadline_s
        rec = {"schedule": sched["id"], "started_at": now, "deadline_at": deadline_at,
               "msg_id": self.client.new_id(), "submitted": False, "goal": sched["goal"],
               "workspace": sched.get("workspace", ""), "yes": bool(sched.get("yes")),
               "slot": slot, "catch_up": bool(d.missed)}
        runs[run_id] = rec
        sched["running"].append(run_id)
        sched["runs"] = sched.get("runs", 0) + 1
        sched["last_run_id"] = run_id
        sched["last_fired_at"] = now
        schedules.note(sched, "fired", now, run_id=run_id, slot=slot,
                       detail="catch-up run for missed slots" if d.missed else None)
        log.info("schedule %s: started %s (%s)", sched["id"], run_id, sched["goal"][:80])
        return [dict(rec, run_id=run_id)]

    def _send(self, item: dict) -> None:
        run_id = item["run_id"]
        self.fired += 1
        tasklog.append(self.settings.tasks_dir, run_id, "schedule_fired",
                       schedule_id=item["schedule"], slot=item.get("slot"),
                       catch_up=item.get("catch_up") or None)
        options = RunOptions(yes=item["yes"], interactive=False, workspace=item["workspace"])
        self.client.send(UserRequest(task_id=run_id, text=item["goal"], options=options,
                                     session_id=f"schedule:{item['schedule']}"),
                         msg_id=item["msg_id"],
                         on_done=lambda ok, r=run_id: self.on_submitted(r, ok))

    def _check_logs(self, now: float) -> None:
        """Open runs whose end the bus did not bring: a task_end in the log, or long past due."""
        for run_id, rec in self.data.get("open_runs", {}).items():
            if run_id in self.ended:
                continue
            end = None
            for event in tasklog.read(self.settings.tasks_dir, run_id):
                if event.get("kind") == "task_end":
                    end = {"outcome": str(event.get("outcome") or event.get("status") or "ended"),
                           "how": "decision log", "ts": event.get("ts", now)}
            if end is None and now > float(rec.get("deadline_at", now)) + STALE_AFTER_DEADLINE_S:
                end = {"outcome": "lost", "how": "no FinalResult by its deadline", "ts": now}
            if end is not None:
                self.ended[run_id] = end


def setup(client: BusClient, settings: Settings) -> Scheduler:
    scheduler = Scheduler(client, settings)
    scheduler.register()
    return scheduler


def main() -> int:
    return run_role(ROLE, setup)


if __name__ == "__main__":
    raise SystemExit(main())
