"""The spawner's zygote (services/roles/spawner.py): a single-threaded process that preloads the
effector stack once and forks one effector per subtask.

A fork of a single-threaded process inherits no lock of a bus thread; each child opens its own
ZeroMQ context and never touches a parent socket. The zygote reports fork, ready (the effector's
bus subscriptions are live) and exit over its socketpair with the spawner.

The spare: one effector is forked *ahead* of its subtask. While it waits it starts the attempt's
sandbox and connects to the bus (the handshake through the proxy), so neither is on a subtask's
path; a spawn request hands it the subtask over its own socketpair, it registers the subtask's
handlers (none needs a handshake: effector.py) and runs. The next spare is forked once the spawn
requests read so far are served: the rest of a burst is forked on request, as is a subtask that
finds no spare (one died waiting). Each effector, spare or not, runs exactly one subtask and exits.
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
import sys
import time
import traceback
from typing import Optional

log = logging.getLogger("artoo.spawner")

MARKER_ENV = "ARTOO_EFFECTOR_SPAWNER"     # "<spawner pid>:<start time>:<data dir>" on effectors
SUBTASK_ENV = "ARTOO_EFFECTOR_SUBTASK"
_HEADER = struct.Struct("!I")


# ---------------------------------------------------------------------------------------------
# framing over the spawner <-> zygote (and zygote <-> spare) socketpairs
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

    def next(self) -> Optional[dict]:
        """Block until one whole frame has come (a blocking socket); None at EOF."""
        while True:
            frames = self.read()
            if frames is None:
                return None
            if frames:
                return frames[0]


# ---------------------------------------------------------------------------------------------
# the zygote process
# ---------------------------------------------------------------------------------------------

def zygote_main(fd: int) -> int:
    """Preload the effector stack, then fork one effector per spawn request (a spare ahead)."""
    from services.runtime.role import configure_logging
    from services.safety.sandbox import die_with_parent
    configure_logging("effector")
    # SIGTERM, not SIGKILL, when the spawner dies: the zygote then kills every effector's whole
    # session (tool processes included) before it exits. A socket EOF does the same.
    die_with_parent(signal.SIGTERM)
    spawner_pid = int(os.environ.get(MARKER_ENV, "0:0").split(":")[0])
    if spawner_pid and os.getppid() != spawner_pid:
        return 1                                   # the spawner died before we armed the signal
    sock = socket.socket(fileno=fd)
    from protocol.settings import load_settings
    settings = load_settings()
    from . import effector                         # the preload: everything an effector imports
    from services.safety import law1
    from services.runtime import telemetry
    from protocol.messages import SubTask as _SubTask
    law1.classify("ls | wc -l > /dev/null", workspace=settings.workspace)  # warm bashlex tables
    from services.safety import sandbox
    sandbox.status(settings)      # bubblewrap's probe (a trial sandbox): once, for every fork
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
    children: dict[int, dict] = {}                 # pid -> {key, fd (its ready pipe), t0}
    ready_fds: dict[int, int] = {}                 # read fd -> pid
    spare: dict = {}                               # the spare: {pid, conn, fd} until handed one
    send_frame(sock, {"ev": "hello", "pid": os.getpid()})
    me = os.getpid()

    def fork_effector(run) -> tuple[int, int]:
        """Fork a child that runs `run(ready)` and exits with its code; (pid, ready pipe)."""
        r, w = os.pipe()
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
                for fd_ in (*ready_fds, *([spare["fd"]] if spare else [])):
                    try:
                        os.close(fd_)
                    except OSError:
                        pass
                signal.set_wakeup_fd(-1)
                os.close(wake_r)
                os.close(wake_w)
                for sig in (signal.SIGCHLD, signal.SIGTERM, signal.SIGINT):
                    signal.signal(sig, signal.SIG_DFL)

                def ready() -> None:
                    os.write(w, b"r")
                    os.close(w)

                code = run(ready)
            except BaseException:
                traceback.print_exc()
            finally:
                sys.stdout.flush()
                os._exit(code)
        os.close(w)
        return pid, r

    def run_subtask(subtask, trace, ready, client=None) -> int:
        os.environ[SUBTASK_ENV] = subtask.subtask_id
        return effector.run_effector(subtask, settings, ready=ready, llms=llms, trace=trace,
                                     client=client)

    def new_spare() -> None:
        conn, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)

        def wait_for_subtask(ready) -> int:
            conn.close()
            client = effector.connect_early(settings)
            frame = FrameReader(theirs).next()
            if frame is None:                      # the zygote is going: nothing to do
                return 0
            theirs.close()                         # checked by the zygote; sent as JSON
            return run_subtask(_SubTask.model_validate(frame["subtask"]), frame.get("trace"),
                               ready, client)

        pid, r = fork_effector(wait_for_subtask)
        theirs.close()
        spare.update(pid=pid, conn=conn, fd=r)
        children[pid] = {"key": None, "fd": -1, "t0": 0.0}

    def spawn(frame: dict) -> None:
        key = frame["key"]
        try:
            subtask = _SubTask.model_validate(frame["subtask"])
        except Exception as exc:
            send_frame(sock, {"ev": "error", "key": key, "error": f"invalid subtask: {exc}"})
            return
        t0 = time.monotonic()
        pid = spare.get("pid")
        if pid is not None:                        # hand it to the spare, already connected
            conn, r = spare["conn"], spare["fd"]
            spare.clear()
            try:
                send_frame(conn, frame)
            except OSError:                        # it died just now: reaped as a spare
                pid = None
                os.close(r)
            conn.close()
        if pid is None:
            pid, r = fork_effector(lambda ready: run_subtask(subtask, frame.get("trace"), ready))
        children[pid] = {"key": key, "fd": r, "t0": t0}
        ready_fds[r] = pid
        send_frame(sock, {"ev": "forked", "key": key, "pid": pid})
        want_spare[0] = True

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
            if spare.get("pid") == pid:            # died waiting: the next spawn forks anew
                log.warning("the spare effector %d exited (status %d) before its subtask",
                            pid, status)
                spare["conn"].close()
                os.close(spare["fd"])
                spare.clear()
                continue
            if info["fd"] in ready_fds:
                ready_fds.pop(info["fd"], None)
                os.close(info["fd"])
            if info["key"] is None:
                continue
            code = os.waitstatus_to_exitcode(status)
            send_frame(sock, {"ev": "exited", "key": info["key"], "pid": pid,
                              "code": code if code >= 0 else None,
                              "signal": -code if code < 0 else None})

    want_spare = [True]      # after start and after each spawn; not after a spare died waiting
    try:
        while True:
            if want_spare[0] and not spare:
                # once the frames read so far are served: a burst of spawns is forked on request
                # (each effector then starts its sandbox beside its bus connection), not handed
                # one by one to spares that are still starting both in turn
                want_spare[0] = False
                new_spare()
            readable, _, _ = select.select([sock, wake_r, *ready_fds], [], [], 1.0)
            for fd_ in readable:
                if fd_ is sock:
                    frames = reader.read()
                    if frames is None:                 # the spawner is gone
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
            kill_session(pid)


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


def kill_session(sid: int) -> None:
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
