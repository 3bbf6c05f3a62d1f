"""The `spawner` process (DESIGN §3): places subtasks on this host, one effector per subtask.

Placement is the observable offer/claim/assign exchange: the dispatcher publishes SubTaskOffer, a
spawner with a free slot answers SubTaskClaim (and holds the slot for `claim_hold_s`), the
dispatcher sends SubTaskAssign to one spawner (acknowledged by that spawner only). Concurrency is
capped at `max_concurrent_effectors`: no claim without a free slot.

Fast start: at startup the spawner launches a *zygote* (zygote.py), a single-threaded child process
that imports the effector stack (pydantic models, zmq, openai, bashlex) and builds the LLM clients
once. Each effector is an `os.fork()` of the zygote, forked ahead of its subtask (the spare: its
sandbox and bus connection are up before the subtask comes). The zygote reports fork, ready (the
effector's subscriptions are live) and exit over a socketpair; the spawner turns these into
EffectorStarted / EffectorExited.

No orphans: each effector calls setsid() (its own session and process group) and
prctl(PR_SET_PDEATHSIG, SIGKILL) against the zygote. The zygote gets SIGTERM when the spawner dies
(and sees its socket close): it then SIGKILLs every effector's whole session — tool processes
included — and exits. The spawner kills an effector's session at its deadline, on TaskCancel and at
shutdown, and at startup sweeps processes left by a spawner that died (marked in their environment)
in case the zygote itself was SIGKILLed.
"""
from __future__ import annotations

import logging
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections import deque
from dataclasses import dataclass
from typing import Any, Callable, Optional

import psutil

from protocol.bus import BusClient
from protocol.messages import (EffectorExited, EffectorStarted, SubTask, SubTaskAssign,
                               SubTaskClaim, SubTaskOffer, TaskCancel)
from protocol.settings import Settings

from services.runtime import journal, telemetry
from services.runtime.daemon import REPO_ROOT
from services.safety.sandbox import SETPRIV, die_with_parent
from .zygote import MARKER_ENV, FrameReader, kill_session, send_frame, zygote_main

log = logging.getLogger("artoo.spawner")

EXIT_REASONS = {0: "completed", 1: "crashed", 3: "unacknowledged", 4: "deadline"}
SWEEP_EVERY_S = 30.0       # orphans of a live spawner's effectors are swept this often


def _process_marker(pid: int, home: str) -> str:
    """Identifies a spawner process (pid + start time, so a reused pid does not match) and its
    data dir (a sweep only touches its own installation's effectors)."""
    return f"{pid}:{psutil.Process(pid).create_time():.2f}:{home}"


def sweep_orphans(home: str) -> list[int]:
    """Kill effectors (and their tool processes) of this data dir whose spawner is gone, and any
    of its processes whose parent is gone (`_orphaned`: a sandbox's first process whose starter
    was killed while bubblewrap set it up waits on that setup for ever)."""
    killed = []
    for proc in psutil.process_iter(["pid"]):
        try:
            marker = proc.environ().get(MARKER_ENV)
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess, OSError):
            continue
        if not marker:
            continue
        pid_text, _, rest = marker.partition(":")
        if rest.partition(":")[2] != home:
            continue
        try:
            alive = _process_marker(int(pid_text), home) == marker
        except (psutil.NoSuchProcess, ValueError):
            alive = False
        if not alive or _orphaned(proc, int(pid_text)):
            try:
                log.warning("killing %d (%s): left by dead spawner %s", proc.pid,
                            " ".join(proc.cmdline())[:120], marker)
                proc.kill()
                killed.append(proc.pid)
            except psutil.NoSuchProcess:
                pass
    return killed


def _orphaned(proc: psutil.Process, spawner: int) -> bool:
    """Its parent is neither the spawner nor a process of its (reparented to init or a
    subreaper): every process a spawner starts is its child or a marked process's child."""
    try:
        parent = proc.ppid()
        if parent == spawner:
            return False
        return MARKER_ENV not in psutil.Process(parent).environ()
    except psutil.AccessDenied:
        return True              # a parent we may not read (init) is none of ours
    except (psutil.Error, OSError):
        return False             # gone meanwhile: the next sweep sees where it went


# ---------------------------------------------------------------------------------------------
# the spawner role
# ---------------------------------------------------------------------------------------------

@dataclass
class Effector:
    key: str
    subtask: SubTask
    offer_id: str
    requested: float                       # monotonic time of the spawn request
    started_wall: float
    deadline_at: float
    pid: Optional[int] = None
    ready: bool = False
    spawn_ms: float = 0.0
    kill_reason: Optional[str] = None
    span: Any = telemetry.NOOP             # "spawn": from the assignment to the effector's ready

    @property
    def task_id(self) -> str:
        return self.subtask.parent_task_id


class Zygote:
    """The spawner's handle on its zygote process (started, watched and restarted here)."""

    def __init__(self, settings: Settings, on_event: Callable[[dict], None]):
        self.settings = settings
        self.on_event = on_event
        self.proc: Optional[subprocess.Popen] = None
        self.sock: Optional[socket.socket] = None
        self._send_lock = threading.Lock()
        self._hello = threading.Event()
        self.stopping = False
        self.marker = _process_marker(os.getpid(), str(settings.home))

    def start(self, timeout: float = 60.0) -> None:
        """Launch the zygote (from the spawner's main thread) and the thread that watches it."""
        self._launch()
        threading.Thread(target=self._watch, name="zygote-watch", daemon=True).start()
        if not self._hello.wait(timeout):
            raise RuntimeError(f"the effector zygote did not start within {timeout:.0f}s")

    def _launch(self) -> None:
        # PR_SET_PDEATHSIG fires when the *thread* that forked the child ends: the zygote is
        # only ever launched from threads that live as long as the spawner (main, zygote-watch).
        parent, child = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        env = dict(os.environ, **{MARKER_ENV: self.marker, "PYTHONUNBUFFERED": "1"})
        argv = [sys.executable, "-m", "services.roles.spawner", "--zygote", str(child.fileno())]
        kwargs: dict[str, Any] = {}
        if SETPRIV:
            argv = [SETPRIV, "--pdeathsig", "TERM", "--", *argv]
        else:  # pragma: no cover
            kwargs["preexec_fn"] = lambda: die_with_parent(signal.SIGTERM)
        self._hello.clear()
        self.proc = subprocess.Popen(argv, pass_fds=[child.fileno()], env=env, close_fds=True,
                                     cwd=REPO_ROOT, **kwargs)   # -m finds this checkout
        child.close()
        self.sock = parent

    def _watch(self) -> None:
        while True:
            reader = FrameReader(self.sock)
            while True:
                frames = reader.read()
                if frames is None:
                    break
                for frame in frames:
                    if frame.get("ev") == "hello":
                        self._hello.set()
                        continue
                    try:
                        self.on_event(frame)
                    except Exception:
                        log.exception("zygote event handler failed")
            if self.proc is not None:
                try:
                    self.proc.wait(5)
                except subprocess.TimeoutExpired:
                    self.proc.kill()
            if self.stopping:
                return
            log.error("the effector zygote died; its effectors died with it; restarting it")
            try:
                self.on_event({"ev": "zygote-died"})
            except Exception:
                log.exception("zygote-died handler failed")
            delay = 0.5
            while not self.stopping:
                try:
                    self._launch()
                    break
                except Exception as exc:
                    log.error("zygote restart failed: %s", exc)
                    time.sleep(delay)
                    delay = min(delay * 2, 10.0)
            if self.stopping:
                return

    def spawn(self, key: str, subtask: SubTask, trace: Optional[str] = None) -> None:
        with self._send_lock:
            send_frame(self.sock, {"op": "spawn", "key": key, "trace": trace,
                                   "subtask": subtask.model_dump(mode="json")})

    def stop(self) -> None:
        self.stopping = True
        try:
            with self._send_lock:
                send_frame(self.sock, {"op": "exit"})
        except (OSError, AttributeError):
            pass
        if self.proc is not None:
            try:
                self.proc.wait(3)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(3)


class Spawner:
    def __init__(self, client: BusClient, settings: Settings):
        self.client = client
        self.settings = settings
        self.cap = max(1, settings.max_concurrent_effectors)
        self.lock = threading.RLock()
        self.running: dict[str, Effector] = {}         # key -> effector
        self.claims: dict[str, tuple[float, str]] = {}  # subtask id -> (hold expiry, task id)
        self.queue: deque[SubTaskAssign] = deque()     # assigned while no slot was free
        self.cancelled: dict[str, float] = {}          # task id -> when (recent cancels)
        self.stopping = False
        self.spawned = 0
        self.zygote = Zygote(settings, self.on_zygote_event)

    # -- setup --------------------------------------------------------------------------------
    def setup(self) -> "Spawner":
        swept = sweep_orphans(str(self.settings.home))
        if swept:
            log.warning("killed %d effector process(es) left by a dead spawner: %s",
                        len(swept), swept)
        journal.sweep(self.settings)        # tool records of tasks that ended while we were down
        self.zygote.start()
        c = self.client
        c.on("SubTaskOffer", self.on_offer)
        c.on("SubTaskAssign", self.on_assign, ack=True,
             when=lambda env, msg: msg.spawner == c.node)
        c.on("TaskCancel", self.on_cancel)
        c.on("FinalResult", lambda env, msg: journal.drop(self.settings, msg.task_id))
        c.add_timer(0.2, self.tick)
        c.add_timer(SWEEP_EVERY_S, lambda: sweep_orphans(str(self.settings.home)))
        c.heartbeat_info = self.info
        return self

    def free_slots(self) -> int:
        return self.cap - len(self.running) - len(self.queue) - len(self.claims)

    def _busy_with(self, subtask_id: str) -> bool:
        return any(e.subtask.subtask_id == subtask_id for e in self.running.values()) or \
            any(a.subtask_id == subtask_id for a in self.queue)

    # -- placement ----------------------------------------------------------------------------
    def on_offer(self, env, offer: SubTaskOffer) -> None:
        with self.lock:
            if self.stopping or offer.task_id in self.cancelled or \
                    self._busy_with(offer.subtask_id):
                return
            now = time.monotonic()
            if offer.subtask_id not in self.claims:
                if self.free_slots() <= 0:
                    return
            self.claims[offer.subtask_id] = (now + self.settings.claim_hold_s, offer.task_id)
            free = self.free_slots()
        self.client.publish(SubTaskClaim(task_id=offer.task_id, subtask_id=offer.subtask_id,
                                         offer_id=offer.offer_id, spawner=self.client.node,
                                         free_slots=max(0, free)), to="planner")

    def on_assign(self, env, assign: SubTaskAssign) -> None:
        with self.lock:
            self.claims.pop(assign.subtask_id, None)
            if self.stopping or assign.task_id in self.cancelled or \
                    self._busy_with(assign.subtask_id):
                return
            if len(self.running) < self.cap:
                self._start(assign)
            else:
                self.queue.append(assign)

    def _start(self, assign: SubTaskAssign) -> None:
        subtask = assign.subtask
        now = time.time()
        deadline = subtask.deadline_at or now + self.settings.subtask_deadline_s
        if not subtask.deadline_at:
            subtask = subtask.model_copy(update={"deadline_at": deadline})
        self.spawned += 1
        key = f"{assign.subtask_id}#{assign.offer_id}#{self.spawned}"
        eff = self.running[key] = Effector(key, subtask, assign.offer_id, time.monotonic(), now,
                                           deadline)
        eff.span = telemetry.span("spawn", task=eff.task_id,
                                  attrs={"artoo.subtask.id": assign.subtask_id})
        try:
            self.zygote.spawn(key, subtask, eff.span.traceparent)
        except OSError as exc:   # the zygote is restarting: report it as a crashed effector
            log.error("spawn of %s failed: %s", assign.subtask_id, exc)
            self._exited(key, None, None, "crashed")

    # -- zygote events ------------------------------------------------------------------------
    def on_zygote_event(self, frame: dict) -> None:
        ev = frame.get("ev")
        if ev == "zygote-died":
            with self.lock:
                victims = [(key, eff.pid) for key, eff in self.running.items()]
            # PDEATHSIG kills them asynchronously: make sure they are gone before we say so.
            procs = []
            for _, pid in victims:
                if pid:
                    kill_session(pid)
                    try:
                        procs.append(psutil.Process(pid))
                    except psutil.NoSuchProcess:
                        pass
            psutil.wait_procs(procs, timeout=5)
            for key, _ in victims:
                self._exited(key, None, signal.SIGKILL, "crashed")
            return
        key = frame.get("key", "")
        with self.lock:
            eff = self.running.get(key)
            if eff is None:
                return
            if ev == "forked":
                eff.pid = frame["pid"]
                if eff.kill_reason:                      # cancelled while being forked
                    kill_session(eff.pid)
            elif ev == "ready":
                eff.ready = True
                eff.spawn_ms = round((time.monotonic() - eff.requested) * 1000, 2)
                started = EffectorStarted(task_id=eff.task_id, subtask_id=eff.subtask.subtask_id,
                                          pid=eff.pid or frame.get("pid", 0),
                                          spawner=self.client.node, spawn_ms=eff.spawn_ms)
                eff.span.set("artoo.effector.pid", started.pid)
                eff.span.end()
            elif ev in ("exited", "error"):
                pass
        if ev == "ready":
            self.client.publish(started)
        elif ev == "exited":
            self._exited(key, frame.get("code"), frame.get("signal"), None)
        elif ev == "error":
            log.error("zygote could not start %s: %s", key, frame.get("error"))
            self._exited(key, None, None, "crashed")

    def _exited(self, key: str, code: Optional[int], sig: Optional[int],
                reason: Optional[str]) -> None:
        with self.lock:
            eff = self.running.pop(key, None)
            if eff is None:
                return
            if eff.pid:
                kill_session(eff.pid)                 # tool processes left in its session
            reason = eff.kill_reason or reason or EXIT_REASONS.get(code, "crashed")
            if not eff.ready:                          # it never came up: the spawn failed
                eff.span.error(f"effector {reason} before it was ready")
                eff.span.end()
            msg = EffectorExited(task_id=eff.task_id, subtask_id=eff.subtask.subtask_id,
                                 pid=eff.pid or 0, spawner=self.client.node, exit_code=code,
                                 signal=sig, reason=reason,
                                 elapsed_s=round(time.time() - eff.started_wall, 3))
            self._drain_queue()
        self.client.send(msg, consumers=("planner",))

    def _drain_queue(self) -> None:
        """Start queued subtasks while there are slots: the highest priority p(g, t) first
        (seed 002 Def. 5: an angry user's goal, a reactive goal, a near deadline), first come
        first served among equals."""
        while self.queue and len(self.running) < self.cap and not self.stopping:
            self._start(self._pop_next())

    def _pop_next(self) -> SubTaskAssign:
        best = max(range(len(self.queue)), key=lambda i: (self.queue[i].subtask.priority, -i))
        assign = self.queue[best]
        del self.queue[best]
        return assign

    # -- deadlines and cancellation -----------------------------------------------------------
    def kill(self, eff: Effector, reason: str) -> None:
        if eff.kill_reason is None:
            eff.kill_reason = reason
        if eff.pid:
            kill_session(eff.pid)

    def on_cancel(self, env, msg: TaskCancel) -> None:
        with self.lock:
            self.cancelled[msg.task_id] = time.monotonic()
            for eff in list(self.running.values()):
                if eff.task_id == msg.task_id:
                    self.kill(eff, "cancelled")
            self.queue = deque(a for a in self.queue if a.task_id != msg.task_id)
            for sid, (_, task) in list(self.claims.items()):
                if task == msg.task_id:
                    del self.claims[sid]
        journal.drop(self.settings, msg.task_id)
        log.info("task %s cancelled: its effectors were killed", msg.task_id)

    def tick(self) -> None:
        now_m, now = time.monotonic(), time.time()
        with self.lock:
            for sid, (expiry, _) in list(self.claims.items()):
                if expiry <= now_m:
                    del self.claims[sid]
            for task, when in list(self.cancelled.items()):
                if now_m - when > 600:
                    del self.cancelled[task]
            for eff in list(self.running.values()):
                if now >= eff.deadline_at and eff.kill_reason is None:
                    log.warning("effector %s of %s passed its deadline: killed", eff.pid,
                                eff.subtask.subtask_id)
                    self.kill(eff, "deadline")
            self._drain_queue()

    # -- introspection and shutdown -----------------------------------------------------------
    def info(self) -> dict:
        with self.lock:
            return {"cap": self.cap, "running": len(self.running), "queued": len(self.queue),
                    "claims": len(self.claims), "spawned": self.spawned,
                    "zygote_pid": self.zygote.proc.pid if self.zygote.proc else None,
                    "effectors": [{"subtask_id": e.subtask.subtask_id, "task_id": e.task_id,
                                   "pid": e.pid, "age_s": round(time.time() - e.started_wall, 1)}
                                  for e in self.running.values()]}

    def close(self) -> None:
        self.zygote.stopping = True              # its exit from now on is expected: no restart
        with self.lock:
            self.stopping = True
            effectors = list(self.running.values())
            for eff in effectors:
                self.kill(eff, "spawner-stopped")
        deadline = time.monotonic() + 3.0
        while time.monotonic() < deadline:
            with self.lock:
                if not self.running:
                    break
            time.sleep(0.02)
        self.zygote.stop()
        sweep_orphans(str(self.settings.home))   # what its effectors' deaths left behind


def setup(client: BusClient, settings: Settings) -> Spawner:
    return Spawner(client, settings).setup()


def main() -> int:
    if len(sys.argv) >= 3 and sys.argv[1] == "--zygote":
        return zygote_main(int(sys.argv[2]))
    from services.runtime.role import run_role
    return run_role("spawner", setup)


if __name__ == "__main__":
    sys.exit(main())
