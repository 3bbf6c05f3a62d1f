"""One sandbox per subtask attempt (issue 34): a long-lived bubblewrap namespace with a small
command server inside runs each tool command of the attempt, instead of a new bubblewrap per
command (~35 ms each here: bwrap's namespaces and mounts, prlimit, the cgroup, bash).

The namespace is the one `sandbox.command_argv` builds for a single command — same mounts,
masks, network, hostname, dropped capabilities, `--new-session`, `--die-with-parent`, the same
process limits (`sandbox.Limits`: file size, the pids cgroup or RLIMIT_NPROC) — with the server
in place of `bash -c command`. The server is PID 1 of the namespace (`--as-pid-1`), so:

* each command is `bash -c command` forked by the server with the run's environment, in the
  workspace, stdin /dev/null, stdout+stderr one pipe, the signals Python ignores restored;
* when the command's shell exits, or its time limit passes, the server SIGKILLs every other
  process of the namespace (`kill(-1)` from PID 1 reaches all of them, wherever they setsid'd
  or double-forked to) and reaps them, before it reports the exit status: no process of a
  command outlives its call, as when the namespace itself died with each command;
* a command cannot kill or trace the server: PID 1 gets no signal it has no handler for from
  inside its namespace, and it is not dumpable (no ptrace, no /proc/1/mem or environ);
* if the server dies anyway (or stops answering within the time limit + a grace), the client
  kills the whole namespace and the next command gets a fresh one.

Wire between the client (the effector) and the server, on the server's stdin/stdout: per command
`u32be(len)` and NUL-separated fields (`encode_request`); frames `kind(1) len(u32be) data` back:
`r` ready, `o` output bytes, `x` the end `{"code", "timed_out"}`. The client bounds what it keeps
(capture.Capture) exactly as for a one-shot command.
"""
from __future__ import annotations

import json
import os
import select
import shutil
import signal
import struct
import subprocess
import threading
import time
from typing import Callable, Optional

from protocol.settings import Settings

from . import sandbox

SERVER_PYTHON = next((p for p in ("/usr/bin/python3", "/bin/python3") if os.path.exists(p)), "")
READY_TIMEOUT_S = 20.0
GRACE_S = 5.0          # beyond a command's own time limit before the client gives up on it
_HEADER = struct.Struct(">cI")
MAX_FRAME = 1 << 20

# The command server (runs as PID 1 inside the namespace, under the system Python, -I -S).
SERVER = r'''
import os, select, sys, time
import _signal as signal        # the C module: `signal` imports enum, ~3.5 ms of CPU per start
BASH_C = __BASH_C__
try:                            # ctypes without its Python layer (~2 ms more): libc's prctl
    from _ctypes import call_function, dlopen, dlsym
    call_function(dlsym(dlopen(None), "prctl"), (4, 0, 0, 0, 0))  # PR_SET_DUMPABLE 0: no ptrace
except Exception:
    pass
def send(kind, data):
    buf = kind + len(data).to_bytes(4, "big") + data
    while buf:
        buf = buf[os.write(1, buf):]
def reap_all():
    for _ in range(1000):
        try:
            os.kill(-1, signal.SIGKILL)              # from PID 1: every other process here
        except ProcessLookupError:
            pass
        try:
            while True:
                pid, _ = os.waitpid(-1, os.WNOHANG)
                if pid == 0:
                    time.sleep(0.0005)
                    break
        except ChildProcessError:
            return
wake_r, wake_w = os.pipe()
os.set_blocking(wake_w, False)
signal.set_wakeup_fd(wake_w)
signal.signal(signal.SIGCHLD, lambda *_: None)
send(b"r", b"{}")
pending = [b""]
def stdin_chunk():
    chunk = os.read(0, 65536)
    if not chunk:                                    # the client is gone: so is this sandbox
        reap_all()
        os._exit(0)
    pending[0] += chunk
def next_request():
    while len(pending[0]) < 4:
        stdin_chunk()
    size = int.from_bytes(pending[0][:4], "big")
    while len(pending[0]) < 4 + size:
        stdin_chunk()
    fields = pending[0][4:4 + size].split(b"\0")
    pending[0] = pending[0][4 + size:]
    text = [f.decode("utf-8", "surrogateescape") for f in fields]
    env = dict(kv.split("=", 1) for kv in text[3:])
    return {"cmd": text[0], "timeout": text[1], "cwd": text[2], "env": env}
while True:
    req = next_request()
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.close(r); os.close(wake_r); os.close(wake_w)
            os.dup2(w, 1); os.dup2(w, 2)
            if w > 2: os.close(w)
            null = os.open("/dev/null", os.O_RDONLY); os.dup2(null, 0); os.close(null)
            signal.set_wakeup_fd(-1)
            for s in (signal.SIGPIPE, signal.SIGXFSZ, signal.SIGCHLD):
                signal.signal(s, signal.SIG_DFL)
            os.chdir(req["cwd"])
            # os.execvpe's own walk, without the `warnings` import it makes each time (~1 ms)
            argv, env = [*BASH_C, req["cmd"]], req["env"]
            for d in env.get("PATH", "/bin:/usr/bin").split(":"):
                try:
                    os.execve((d or ".") + "/" + BASH_C[0], argv, env)
                except OSError:
                    pass
        finally:
            os._exit(127)
    os.close(w)
    deadline = time.monotonic() + float(req["timeout"])
    status, timed_out, eof = None, False, False
    while status is None:
        left = deadline - time.monotonic()
        if left <= 0:
            timed_out = True
            break
        ready, _, _ = select.select([wake_r, 0] if eof else [r, wake_r, 0], [], [], left)
        if 0 in ready:
            stdin_chunk()
        if r in ready:
            chunk = os.read(r, 65536)
            if chunk:
                send(b"o", chunk)
            else:
                eof = True
        if wake_r in ready:
            try:
                os.read(wake_r, 512)
            except BlockingIOError:
                pass
        if eof or wake_r in ready:
            done, st = os.waitpid(pid, os.WNOHANG)
            if done:
                status = st
    reap_all()                                       # the command's every process, then reap
    if status is None:
        try:
            _, status = os.waitpid(pid, 0)
        except ChildProcessError:
            status = 9
    while not eof:                                   # what is left in the pipe: writers are gone
        chunk = os.read(r, 65536)
        if not chunk:
            break
        send(b"o", chunk)
    os.close(r)
    code = os.waitstatus_to_exitcode(status) if status is not None else -9
    send(b"x", b'{"code": %d, "timed_out": %s}' % (code, b"true" if timed_out else b"false"))
'''.replace("__BASH_C__", repr(sandbox.BASH_C))   # the one shell command line


def encode_request(command: str, timeout_s: float, cwd: str, env: dict[str, str]) -> bytes:
    """One command for the server: `u32be(len)` then NUL-separated fields — the command, its
    time limit, the working directory, then `KEY=value` per variable (none of them can hold a
    NUL: the kernel's exec takes C strings). No JSON: the server does without `json` and the
    `re` and `enum` it imports, ~5 ms of CPU off every sandbox's start."""
    fields = [command, repr(float(timeout_s)), cwd, *(f"{k}={v}" for k, v in env.items())]
    if any("\0" in f for f in fields) or any("=" in k or not k for k in env):
        raise ValueError("embedded null byte (or '=' in a variable's name)")
    data = b"\0".join(f.encode("utf-8", "surrogateescape") for f in fields)
    return len(data).to_bytes(4, "big") + data


class SandboxGone(Exception):
    """The namespace ended or stopped answering: the caller gets a fresh one next time."""


class NotStarted(SandboxGone):
    """The sandbox could not take the command: nothing of it ran (the caller may use another)."""


class Session:
    """One long-lived sandbox, then `run` per command. Spawned on a keeper thread that lives as
    long as the sandbox (the kernel's parent-death signal follows the thread that forked), or
    (`keeper=False`) right here, on a thread that lives as long as the process: a spare effector
    (services/roles/zygote.py) starts one on its main thread while it waits for its subtask."""

    def __init__(self, settings: Settings, *, workspace: str, network: bool,
                 read_roots: list[str], writable: bool, env: dict[str, str],
                 wrap: Callable[[list[str]], list[str]], keeper: bool = True):
        self.settings = settings
        self.workspace = workspace
        self.network, self.read_roots, self.writable = network, list(read_roots), writable
        self.env = dict(env, HOME=sandbox.SANDBOX_HOME, TMPDIR="/tmp", PWD=workspace)
        self._wrap = wrap
        self.proc: Optional[subprocess.Popen] = None
        self.limits: Optional[sandbox.Limits] = None
        self.ready = threading.Event()
        self.error = ""
        self.spawn_ms = 0.0
        self._t0 = time.perf_counter()
        self._closed = threading.Event()
        self._lock = threading.Lock()      # one command at a time
        self._keeper: Optional[threading.Thread] = None
        if keeper:
            self._keeper = threading.Thread(target=self._keep, name="sandbox-keeper",
                                            daemon=True)
            self._keeper.start()
        else:
            try:
                self._spawn()
            except Exception as exc:  # noqa: BLE001 - reported to the caller, who falls back
                self.error = f"{type(exc).__name__}: {exc}"
                self.ready.set()
                self._teardown()

    def matches(self, *, workspace: str, network: bool, read_roots: list[str],
                writable: bool) -> bool:
        return (self.workspace, self.network, self.read_roots, self.writable) == \
            (workspace, network, list(read_roots), writable)

    def adopt(self, env: dict[str, str]) -> None:
        """The subtask's toolbox takes the spare over, with its own environment."""
        self.env = dict(env, HOME=sandbox.SANDBOX_HOME, TMPDIR="/tmp", PWD=self.workspace)
        self._lock = threading.Lock()

    # -- lifecycle ---------------------------------------------------------------------------
    def _spawn(self) -> None:
        self.limits = sandbox.Limits(self.settings)
        argv = sandbox.command_argv(self.settings, "", workspace=self.workspace,
                                    network=self.network, read_roots=self.read_roots,
                                    writable=self.writable)
        # the same namespace, with the server (PID 1) where `bash -c command` was
        cut = argv.index("--")
        argv = argv[:cut] + ["--as-pid-1", "--", SERVER_PYTHON, "-I", "-S", "-c", SERVER]
        self.proc = subprocess.Popen(self._wrap(self.limits.prefix() + argv),
                                     cwd=self.workspace, stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                     env=self.env, process_group=0, close_fds=True, bufsize=0)

    def _await_ready(self) -> None:
        """Read the server's first frame (once; under the command lock)."""
        if self.ready.is_set():
            return
        try:
            kind, _ = self._frame(time.monotonic() + READY_TIMEOUT_S)
            if kind != b"r":
                raise SandboxGone(f"unexpected first frame {kind!r}")
            self.spawn_ms = (time.perf_counter() - self._t0) * 1000
        except Exception as exc:  # noqa: BLE001 - reported to the caller, who falls back
            self.error = f"{type(exc).__name__}: {exc}"
            self._teardown()
        self.ready.set()

    def _keep(self) -> None:
        try:
            self._spawn()
            with self._lock:
                self._await_ready()
        except Exception as exc:  # noqa: BLE001 - reported to the caller, who falls back
            self.error = self.error or f"{type(exc).__name__}: {exc}"
            self.ready.set()
            self._teardown()
            return
        self._closed.wait()
        self._teardown()

    def alive(self) -> bool:
        proc = self.proc
        if self._closed.is_set() or self.error or proc is None:
            return False
        return proc.poll() is None

    def close(self) -> None:
        self._closed.set()
        keeper = self._keeper
        if keeper is None or not keeper.is_alive() or threading.current_thread() is keeper:
            self._teardown()
            return
        keeper.join(10)

    def _teardown(self) -> None:
        proc, self.proc = self.proc, None
        if proc is not None:
            try:
                os.killpg(proc.pid, signal.SIGKILL)     # bwrap dies, and PID 1 with it
            except (ProcessLookupError, PermissionError):
                pass
            for f in (proc.stdin, proc.stdout):
                try:
                    f.close()
                except OSError:
                    pass
            try:
                proc.wait(5)
            except (ChildProcessError, subprocess.TimeoutExpired):
                pass
        if self.limits is not None:
            self.limits.cleanup()
            self.limits = None

    # -- commands ----------------------------------------------------------------------------
    def run(self, command: str, timeout_s: float, feed: Callable[[bytes], None]
            ) -> tuple[int, bool]:
        """Run one command; output goes to `feed`; returns (exit code, timed out). Raises
        SandboxGone if the sandbox is unusable (nothing was run) or died under the command."""
        if self._keeper is not None and not self.ready.wait(READY_TIMEOUT_S + 5):
            raise NotStarted("the sandbox did not start")
        with self._lock:
            if self._keeper is None:
                self._await_ready()
            if not self.alive():
                raise NotStarted(self.error or "the sandbox is not running")
            req = encode_request(command, timeout_s, self.workspace, self.env)
            try:
                self.proc.stdin.write(req)
            except (OSError, AttributeError) as exc:   # a pipe write is all or nothing here
                self.close()
                raise NotStarted(f"the sandbox is gone: {exc}") from None
            deadline = time.monotonic() + timeout_s + GRACE_S
            while True:
                try:
                    kind, data = self._frame(deadline)
                except SandboxGone:
                    self.close()
                    raise
                if kind == b"o":
                    feed(data)
                elif kind == b"x":
                    end = json.loads(data)
                    return int(end["code"]), bool(end["timed_out"])
                else:
                    self.close()
                    raise SandboxGone(f"unexpected frame {kind!r}")

    def _frame(self, deadline: float) -> tuple[bytes, bytes]:
        head = self._read(_HEADER.size, deadline)
        kind, size = _HEADER.unpack(head)
        if size > MAX_FRAME:
            raise SandboxGone(f"oversized frame ({size} bytes)")
        return kind, self._read(size, deadline) if size else b""

    def _read(self, n: int, deadline: float) -> bytes:
        proc = self.proc
        if proc is None:
            raise SandboxGone("the sandbox is gone")
        fd = proc.stdout.fileno()
        buf = bytearray()
        while len(buf) < n:
            left = deadline - time.monotonic()
            if left <= 0:
                raise SandboxGone("the sandbox stopped answering")
            ready, _, _ = select.select([fd], [], [], left)
            if not ready:
                continue
            chunk = os.read(fd, n - len(buf))
            if not chunk:
                raise SandboxGone("the sandbox ended")
            buf += chunk
        return bytes(buf)


# The sandbox a spare effector starts before its subtask comes (services/roles/zygote.py); the
# subtask's toolbox adopts it when its workspace and network match.
SPARE: Optional[Session] = None


def take_spare(*, workspace: str, network: bool, read_roots: list[str], writable: bool
               ) -> Optional[Session]:
    global SPARE
    spare, SPARE = SPARE, None
    if spare is None:
        return None
    if spare.matches(workspace=workspace, network=network, read_roots=read_roots,
                     writable=writable) and not spare.error:
        return spare
    spare.close()
    return None


def usable(settings: Settings) -> bool:
    """Reuse one sandbox per attempt (ARTOO_SANDBOX_REUSE, default on) where the system has the
    Python the command server runs under."""
    return bool(settings.sandbox_reuse) and bool(SERVER_PYTHON) and bool(shutil.which("bash"))
