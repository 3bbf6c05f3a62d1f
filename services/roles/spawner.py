"""The `spawner` process (DESIGN §3): places subtasks on this host, one effector per subtask.

Placement is the observable offer/claim/assign exchange: the dispatcher publishes SubTaskOffer, a
spawner with a free slot answers SubTaskClaim (and holds the slot for `claim_hold_s`), the
dispatcher sends SubTaskAssign to one spawner (acknowledged by that spawner only). Concurrency is
capped at `max_concurrent_effectors`: no claim without a free slot.

Fast start: at startup the spawner launches a *zygote*, a single-threaded child process that imports
the effector stack (pydantic models, zmq, openai, bashlex) and builds the LLM clients once. Each
effector is an `os.fork()` of the zygote — a fork of a single-threaded process, so no lock of a
bus thread is inherited; the child opens its own ZeroMQ context and never touches a parent socket.
The zygote reports fork, ready (the effector's bus handshake came back) and exit over a socketpair;
the spawner turns these into EffectorStarted / EffectorExited.

No orphans: each effector calls setsid() (its own session and process group) and
prctl(PR_SET_PDEATHSIG, SIGKILL) against the zygote. The zygote gets SIGTERM when the spawner dies
(and sees its socket close): it then SIGKILLs every effector's whole session — tool processes
included — and exits. The spawner kills an effector's session at its deadline, on TaskCancel and at
shutdown, and at startup sweeps processes left by a spawner that died (marked in their environment)
in case the zygote itself was SIGKILLed.
"""
from __future__ import annotations

import gc
import json
import logging
import os
import select
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
import traceback
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Callable, Optional

import psutil

from protocol.bus import BusClient
from protocol.messages import (EffectorExited, EffectorStarted, SubTask, SubTaskAssign,
                               SubTaskClaim, SubTaskOffer, TaskCancel)
from protocol.settings import Settings, load_settings

from services.runtime import journal, telemetry
from services.runtime.daemon import REPO_ROOT
from services.safety.tools import SETPRIV, die_with_parent

log = logging.getLogger("artoo.spawner")

MARKER_ENV = "ARTOO_EFFECTOR_SPAWNER"     # "<spawner pid>:<start time>:<data dir>" on effectors
SUBTASK_ENV = "ARTOO_EFFECTOR_SUBTASK"
EXIT_REASONS = {0: "completed", 1: "crashed", 3: "unacknowledged", 4: "deadline"}
_HEADER = struct.Struct("!I")


# ---------------------------------------------------------------------------------------------
# framing over the spawner <-> zygote socketpair
# ---------------------------------------------------------------------------------------------

def send_frame(sock: socket.socket, obj: dict) -> None:
    data = json.dumps(obj, separators=(",", ":")).encode()
    sock.sendall(_HEADER.pack(len(data)) + data)


class FrameReader:
    def __init__(self, sock: socket.socket):
        self.sock = sock
        self.buf = bytearray()

    def read(self) -> Optional[list[dict]]:
        """Frames available now; None at EOF."""
        try:
            chunk = self.sock.recv(1 << 16)
        except BlockingIOError:
            return []
        except OSError:
            return None
        if not chunk:
            return None
        self.buf += chunk
        frames = []
        while len(self.buf) >= _HEADER.size:
            (size,) = _HEADER.unpack_from(self.buf)
            if len(self.buf) < _HEADER.size + size:
                break
            raw = bytes(self.buf[_HEADER.size:_HEADER.size + size])
            del self.buf[:_HEADER.size + size]
            try:
                frames.append(json.loads(raw))
            except ValueError:
                log.error("dropping an undecodable zygote frame")
        return frames


# ---------------------------------------------------------------------------------------------
# the zygote (a separate, single-threaded process)
# ---------------------------------------------------------------------------------------------

def zygote_main(fd: int) -> int:
    """Preload the effector stack, then fork one effector per spawn request."""
    from services.runtime.role import configure_logging
    configure_logging("effector")
    # SIGTERM, not SIGKILL, when the spawner dies: the zygote then kills every effector's whole
    # session (tool processes included) before it exits. A socket EOF does the same.
    die_with_parent(signal.SIGTERM)
    spawner_pid = int(os.environ.get(MARKER_ENV, "0:0").split(":")[0])
    if spawner_pid and os.getppid() != spawner_pid:
        return 1                                   # the spawner died before we armed the signal
    sock = socket.socket(fileno=fd)
    settings = load_settings()
    from . import effector                         # the preload: everything an effector imports
    from services.safety import law1
    from protocol.messages import SubTask as _SubTask
    law1.classify("ls | wc -l > /dev/null", workspace=settings.workspace)  # warm bashlex tables
    from services.safety import sandbox_session
    from services.safety.tools import Toolbox

    def new_spare() -> None:
        """The next effector's sandbox, started now (it adopts it if its workspace and network
        match): spawn-to-ready off the subtask's path."""
        try:
            sandbox_session.SPARE = Toolbox.spare(settings)
        except Exception as exc:  # noqa: BLE001 - the effector starts its own then
            log.warning("no spare sandbox: %s", exc)
            sandbox_session.SPARE = None
    new_spare()
    telemetry.preload()                            # the tracing SDK, when OTEL_* turn it on
    try:
        llms = effector.build_llms(settings)
    except Exception as exc:                       # the effector reports it as its outcome
        log.warning("LLM clients not prebuilt: %s", exc)
        llms = None
    effector.warm_schemas()                        # R3's and R4a's reply schemas: ~1 ms each
    for client in (llms or {}).values():          # the SDK's lazily built resource objects
        try:
            client._sdk.chat.completions
        except Exception:  # noqa: BLE001 - built on the first call then
            pass
    import encodings.idna  # noqa: F401  - httpx encodes the LLM host with it on a first connect
    # Every object preloaded so far is permanent: a child's collections never walk (and so never
    # copy-on-write) the zygote's heap. ~15 ms off each effector's first LLM call.
    gc.collect()
    gc.freeze()
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    signal.signal(signal.SIGTERM, _raise_exit)
    reader = FrameReader(sock)
    children: dict[int, dict] = {}                 # pid -> {key, ready_fd, t0}
    ready_fds: dict[int, int] = {}                 # read fd -> pid
    send_frame(sock, {"ev": "hello", "pid": os.getpid()})
    me = os.getpid()

    def spawn(frame: dict) -> None:
        key = frame["key"]
        try:
            subtask = _SubTask.model_validate(frame["subtask"])
        except Exception as exc:
            send_frame(sock, {"ev": "error", "key": key, "error": f"invalid subtask: {exc}"})
            return
        r, w = os.pipe()
        t0 = time.monotonic()
        pid = os.fork()
        if pid == 0:                               # ---- the effector ----
            code = 1
            try:
                os.setsid()
                die_with_parent()
                if os.getppid() != me:
                    os._exit(1)
                os.close(r)
                sock.close()
                for fd_ in list(ready_fds):
                    try:
                        os.close(fd_)
                    except OSError:
                        pass
                signal.set_wakeup_fd(-1)
                os.close(wake_r)
                os.close(wake_w)
                for sig in (signal.SIGCHLD, signal.SIGTERM, signal.SIGINT):
                    signal.signal(sig, signal.SIG_DFL)
                os.environ[SUBTASK_ENV] = subtask.subtask_id

                def ready() -> None:
                    os.write(w, b"r")
                    os.close(w)

                code = effector.run_effector(subtask, settings, ready=ready, llms=llms,
                                             trace=frame.get("trace"))
            except BaseException:
                traceback.print_exc()
            finally:
                sys.stdout.flush()
                os._exit(code)
        os.close(w)
        if sandbox_session.SPARE is not None:      # the child has it now: start the next one
            sandbox_session.SPARE.detach()
            new_spare()
        children[pid] = {"key": key, "fd": r, "t0": t0}
        ready_fds[r] = pid
        send_frame(sock, {"ev": "forked", "key": key, "pid": pid})

    def reap() -> None:
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            info = children.pop(pid, None)
            if info is None:
                continue
            if info["fd"] in ready_fds:
                ready_fds.pop(info["fd"], None)
                os.close(info["fd"])
            code = os.waitstatus_to_exitcode(status)
            send_frame(sock, {"ev": "exited", "key": info["key"], "pid": pid,
                              "code": code if code >= 0 else None,
                              "signal": -code if code < 0 else None})

    try:
        while True:
            readable, _, _ = select.select([sock, wake_r, *ready_fds], [], [], 1.0)
            for fd_ in readable:
                if fd_ is sock:
                    frames = reader.read()
                    if frames is None:                 # the spawner is gone
                        for pid in list(children):
                            _kill_session(pid)
                        return 0
                    for frame in frames:
                        if frame.get("op") == "spawn":
                            spawn(frame)
                        elif frame.get("op") == "exit":
                            return 0
                elif fd_ == wake_r:
                    try:
                        os.read(wake_r, 512)
                    except BlockingIOError:
                        pass
                else:
                    pid = ready_fds.pop(fd_)
                    try:
                        data = os.read(fd_, 16)
                    except OSError:
                        data = b""
                    os.close(fd_)
                    info = children.get(pid)
                    if info is not None:
                        info["fd"] = -1
                        if data:
                            send_frame(sock, {"ev": "ready", "key": info["key"], "pid": pid,
                                              "ms": round((time.monotonic() - info["t0"]) * 1000,
                                                          2)})
            reap()
    finally:
        for pid in list(children):
            _kill_session(pid)
        if sandbox_session.SPARE is not None:
            sandbox_session.SPARE.close()


# ---------------------------------------------------------------------------------------------
# process helpers
# ---------------------------------------------------------------------------------------------

def _raise_exit(*_):
    raise SystemExit(0)


def _session_members(sid: int) -> list[int]:
    members = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        pid = int(entry)
        try:
            if os.getsid(pid) == sid:
                members.append(pid)
        except OSError:
            continue
    return members


def _kill_session(sid: int) -> None:
    """SIGKILL an effector's process group and anything else left in its session (tool
    processes that started their own process group)."""
    try:
        os.killpg(sid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    for pid in _session_members(sid):
        try:
            os.kill(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


def _process_marker(pid: int, home: str) -> str:
    """Identifies a spawner process (pid + start time, so a reused pid does not match) and its
    data dir (a sweep only touches its own installation's effectors)."""
    return f"{pid}:{psutil.Process(pid).create_time():.2f}:{home}"


def sweep_orphans(home: str) -> list[int]:
    """Kill effectors (and their tool processes) of this data dir whose spawner is gone."""
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
        if not alive:
            try:
                log.warning("killing %d (%s): left by dead spawner %s", proc.pid,
                            " ".join(proc.cmdline())[:120], marker)
                proc.kill()
                killed.append(proc.pid)
            except psutil.NoSuchProcess:
                pass
    return killed


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
                    _kill_session(pid)
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
                    _kill_session(eff.pid)
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
                _kill_session(eff.pid)                 # tool processes left in its session
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
            _kill_session(eff.pid)

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


def setup(client: BusClient, settings: Settings) -> Spawner:
    return Spawner(client, settings).setup()


def main() -> int:
    if len(sys.argv) >= 3 and sys.argv[1] == "--zygote":
        return zygote_main(int(sys.argv[2]))
    from services.runtime.role import run_role
    return run_role("spawner", setup)


if __name__ == "__main__":
    sys.exit(main())
