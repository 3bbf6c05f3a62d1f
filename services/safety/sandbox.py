"""The OS sandbox every agent shell command runs in (bubblewrap), the boundary under Law 1.

A classifier is not a boundary: the gate guesses what a command will do, the sandbox decides what
it can do. Like Claude Code's bubblewrap sandbox and Codex CLI's Linux sandbox, each command gets
its own mount, pid, ipc, uts and network namespaces:

* the system (`/usr`, `/bin`, `/lib*`, `/etc`, …) read-only; secrets in it (`/etc/shadow`, …)
  masked; HOME, `/home`, `/root`, `/var`, `/srv`, `/mnt`, `/opt` simply not there;
* the run's workspace the only writable path, the operator's read roots read-only;
* a private `/tmp` and an empty HOME; artoo's data dir, run dir (ipc sockets), audit log and
  bus key never visible (masked again even when a read root would expose them);
* no network unless the run was granted it (`artoo run --network`, or an approved command);
* a process limit (a pids cgroup where one can be made, RLIMIT_NPROC otherwise), a file-size
  limit, and the time limit of the tool call; the namespace's processes all die with it.

Where the sandbox cannot start, tools refuse to run (fail closed) unless the operator opted out
with `ARTOO_SANDBOX=off`. At the end: what makes a process die with its parent (the kernel's
parent-death signal, and setpriv's for a command), so nothing an effector starts outlives it.
"""
from __future__ import annotations

import ctypes
import functools
import os
import re
import shutil
import signal
import subprocess
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

from protocol.settings import Settings

from .law1 import UNKNOWN

BWRAP = "bwrap"
SYSTEM_RO = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc")
MASKED_FILES = ("/etc/shadow", "/etc/gshadow", "/etc/shadow-", "/etc/gshadow-",
                "/etc/sudoers", "/etc/security/opasswd")
MASKED_DIRS = ("/etc/ssh", "/etc/sudoers.d", "/etc/ssl/private")
SANDBOX_HOME = "/home/agent"
CGROUP_ROOTS = ("/sys/fs/cgroup/pids", "/sys/fs/cgroup")   # v1 pids hierarchy, then v2

# Programs whose point is the network: a run without network asks before running them.
NETWORK_PROGRAMS = frozenset("""
curl wget ssh scp sftp rsync ftp telnet nc ncat netcat socat ping dig nslookup host whois
git-clone pip-install npm-install apt apt-get yum dnf apk brew gem cargo-install go-get
""".split())
_NET_SUBCOMMANDS = {"git": {"clone", "fetch", "pull", "push", "ls-remote", "submodule"},
                    "pip": {"install", "download"}, "pip3": {"install", "download"},
                    "npm": {"install", "i", "ci", "publish", "update"},
                    "yarn": {"add", "install"}, "cargo": {"install", "fetch"},
                    "go": {"get", "install"}, "uv": {"pip", "add", "sync"}}
_WORDS = re.compile(r"[A-Za-z0-9_.+-]+")


@dataclass(frozen=True)
class Status:
    """Whether tool commands can run, and how (`artoo status`, the tool error when not)."""
    mode: str          # "bubblewrap", "off" (operator opted out) or "unavailable"
    detail: str
    process_limit: str = ""

    @property
    def usable(self) -> bool:
        return self.mode in ("bubblewrap", "off")


@functools.lru_cache(maxsize=4)
def _probe(bwrap: str) -> str:
    """'' when bubblewrap can build our sandbox here, else why not."""
    if not bwrap:
        return "bubblewrap (bwrap) is not installed"
    try:
        proc = subprocess.run([bwrap, "--unshare-all", "--cap-drop", "ALL", "--die-with-parent",
                               "--ro-bind", "/", "/",
                               "--proc", "/proc", "--dev", "/dev", "--", "true"],
                              capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.SubprocessError) as exc:
        return f"bwrap failed to start: {exc}"
    if proc.returncode != 0:
        return f"bwrap cannot create namespaces here: {proc.stderr.strip()[:200]}"
    return ""


def status(settings: Settings) -> Status:
    if str(settings.sandbox).lower() in ("off", "0", "false", "no"):
        return Status("off", "ARTOO_SANDBOX=off: agent commands run unconfined (only the Law 1 "
                             "gate stands between them and this machine)")
    bwrap = shutil.which(BWRAP) or ""
    problem = _probe(bwrap)
    if problem:
        return Status("unavailable", f"{problem}; agent shell commands are refused. Install "
                                     f"bubblewrap (apt-get install bubblewrap) or opt out with "
                                     f"ARTOO_SANDBOX=off")
    limit = "pids cgroup" if _cgroup_parent() else \
        ("RLIMIT_NPROC" if os.geteuid() != 0 else "time limit only (root ignores RLIMIT_NPROC)")
    return Status("bubblewrap", f"bubblewrap at {bwrap}", process_limit=limit)


def asks_operator(verdict, *, confined: bool) -> bool:
    """Law 1 on top of the sandbox: inside it an unknown program (a script, `make`, `pytest`) can
    only touch the workspace, so it runs without asking (after an undo copy); deletes and
    overwrites the gate can see still ask. Unconfined, every gated command asks."""
    if not verdict.needs_approval:
        return False
    return not (confined and verdict.level == UNKNOWN)


def needs_network(command: str) -> str:
    """The network program a command runs ('' when none): such a command asks for approval
    when the run has no network."""
    words = _WORDS.findall(command)
    for i, w in enumerate(words):
        base = w.rsplit("/", 1)[-1]
        if base in NETWORK_PROGRAMS:
            return base
        sub = _NET_SUBCOMMANDS.get(base)
        if sub and i + 1 < len(words) and words[i + 1] in sub:
            return f"{base} {words[i + 1]}"
    return ""


def hidden_paths(settings: Settings) -> list[str]:
    """What must never be visible inside: the data dir, the run dir, the audit log, CURVE keys."""
    paths = [settings.home, settings.run_dir, settings.audit_dir, settings.curve_dir]
    return list(dict.fromkeys(os.path.realpath(str(p)) for p in paths))


# Every agent and check command runs in bash with XSI echo (`echo "red\ngreen"` prints two lines,
# as sh's echo does): models write it expecting that, and bash's own echo printed the backslashes
# (a check's one literal line then contradicted a right three-line file).
BASH_C = ("bash", "-O", "xpg_echo", "-c")


def command_argv(settings: Settings, command: str, *, workspace: str, network: bool,
                 read_roots: list[str], writable: bool = True) -> list[str]:
    """The bwrap command line that runs `bash -c command` confined to `workspace` (mounted
    read-only when not `writable`: a check that must not change what it reads)."""
    return program_argv(settings, [*BASH_C, command], workspace=workspace, network=network,
                        read_roots=read_roots, writable=writable)


def program_argv(settings: Settings, program: list[str], *, workspace: str, network: bool,
                 read_roots: list[str], writable: bool = True,
                 env: dict[str, str] | None = None) -> list[str]:
    """The bwrap command line that runs `program` (an argv) in the sandbox: the workspace
    writable (unless not `writable`), `read_roots` read-only (an MCP server's own install),
    artoo's data hidden; `env` is set inside on top of HOME, TMPDIR and PWD."""
    # --cap-drop ALL: run as root, bwrap would otherwise leave the command every capability
    argv = [shutil.which(BWRAP) or BWRAP, "--die-with-parent", "--new-session", "--unshare-all",
            "--cap-drop", "ALL", "--hostname", "artoo-sandbox"]
    if network:
        argv.append("--share-net")
    for d in SYSTEM_RO:
        if os.path.lexists(d):
            kind = "--ro-bind" if not os.path.islink(d) else "--symlink"
            argv += [kind, os.readlink(d), d] if kind == "--symlink" else [kind, d, d]
    argv += ["--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp", "--tmpfs", "/var/tmp",
             "--tmpfs", "/run", "--dir", SANDBOX_HOME]
    for f in MASKED_FILES:
        if os.path.isfile(f):
            argv += ["--ro-bind", "/dev/null", f]
    for d in MASKED_DIRS:
        if os.path.isdir(d):
            argv += ["--tmpfs", d]
    for root in read_roots:
        if os.path.isdir(root) or os.path.isfile(root):
            argv += ["--ro-bind", root, root]
    argv += ["--bind" if writable else "--ro-bind", workspace, workspace]
    for hidden in hidden_paths(settings):     # after the binds: masks win over any of them
        if os.path.isdir(hidden) and _under_any(hidden, [workspace, *read_roots]):
            argv += ["--tmpfs", hidden]
    key = os.path.realpath(settings.bus_key_file)   # the bus HMAC key, wherever it was put
    if os.path.isfile(key) and _under_any(key, [workspace, *read_roots, *SYSTEM_RO]):
        argv += ["--ro-bind", "/dev/null", key]
    argv += ["--chdir", workspace, "--setenv", "HOME", SANDBOX_HOME, "--setenv", "TMPDIR", "/tmp",
             "--setenv", "PWD", workspace]
    for key, value in (env or {}).items():
        argv += ["--setenv", key, value]
    return argv + ["--", *program]


def _under_any(path: str, roots: list[str]) -> bool:
    return any(path == r or path.startswith(r.rstrip("/") + "/") for r in roots)


# -- process limits ---------------------------------------------------------------------------

@functools.lru_cache(maxsize=1)
def _cgroup_parent() -> str:
    """A writable cgroup directory whose children can have `pids.max` (the v1 pids hierarchy, or
    v2 with the pids controller delegated), for per-command cgroups; '' when there is none."""
    for root in CGROUP_ROOTS:
        parent = os.path.join(root, "artoo-sandbox")
        probe = os.path.join(parent, f"probe-{os.getpid()}")
        try:
            os.makedirs(parent, exist_ok=True)
            if not root.endswith("pids"):      # v2: delegate the controller to our children
                Path(parent, "cgroup.subtree_control").write_text("+pids")
            os.mkdir(probe)
            try:
                Path(probe, "pids.max").write_text("1")
            finally:
                os.rmdir(probe)
            return parent
        except OSError:
            continue
    return ""


class Limits:
    """One command's process limits, as a command prefix (no preexec_fn in a threaded effector):
    `prlimit` caps file size (and processes where no cgroup can be made), a small `sh` joins the
    per-command pids cgroup before it execs bubblewrap. `cleanup()` kills what is left and
    removes the cgroup."""

    def __init__(self, settings: Settings):
        self.max_procs = int(settings.sandbox_max_procs)
        self.max_file = int(settings.sandbox_max_file_bytes)
        self.cgroup = ""
        parent = _cgroup_parent()
        if parent:
            _sweep_stale(parent)
            path = os.path.join(parent, uuid.uuid4().hex[:12])
            try:
                os.mkdir(path)
                Path(path, "pids.max").write_text(str(self.max_procs))
                self.cgroup = path
            except OSError:
                self.cleanup()

    def prefix(self) -> list[str]:
        limits = [f"--fsize={self.max_file}"]
        if not self.cgroup:
            # RLIMIT_NPROC counts every process of the user: leave room for the ones running
            limits.append(f"--nproc={self.max_procs + _user_processes()}")
        out = ["prlimit", *limits, "--"] if shutil.which("prlimit") else []
        if self.cgroup:
            out += ["sh", "-c", 'echo $$ > "$0/cgroup.procs" && exec "$@"', self.cgroup]
        return out

    def kill_all(self) -> None:
        if not self.cgroup:
            return
        try:
            pids = Path(self.cgroup, "cgroup.procs").read_text().split()
        except OSError:
            return
        for pid in pids:
            try:
                os.kill(int(pid), signal.SIGKILL)
            except (OSError, ValueError):
                pass

    def cleanup(self) -> None:
        """Kill any process left in the cgroup and remove it (an rmdir fails while it is busy)."""
        if not self.cgroup:
            return
        deadline = time.monotonic() + 5.0
        pause = 0.001
        while time.monotonic() < deadline:
            try:
                os.rmdir(self.cgroup)
                break
            except FileNotFoundError:
                break
            except OSError:
                self.kill_all()
                time.sleep(pause)    # the kernel reaps killed processes asynchronously: most
                pause = min(pause * 2, 0.05)   # are gone within a millisecond or two
        self.cgroup = ""


STALE_CGROUP_S = 60.0


def _sweep_stale(parent: str) -> None:
    """Remove per-command cgroups left empty by an effector killed mid-command (its `finally`
    never ran). A fresh one may be empty for a moment before its command joins it: only those
    older than a minute go."""
    now = time.time()
    try:
        entries = list(os.scandir(parent))
    except OSError:
        return
    for entry in entries:
        try:
            if entry.is_dir() and now - entry.stat().st_mtime > STALE_CGROUP_S and \
                    not Path(entry.path, "cgroup.procs").read_text().strip():
                os.rmdir(entry.path)
        except OSError:
            continue


def _user_processes() -> int:
    uid = os.getuid()
    n = 0
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                n += entry.stat().st_uid == uid
            except OSError:
                pass
    return n


# -- a process that dies with its parent -------------------------------------------------------
_PR_SET_PDEATHSIG = 1
try:
    _prctl = ctypes.CDLL(None, use_errno=True).prctl
except (OSError, AttributeError):  # pragma: no cover - not Linux
    _prctl = None
SETPRIV = shutil.which("setpriv")
# setpriv asks for the signal after the fork: an owner that died in between is never signalled
# for, so the next link goes on only while its parent is still the owner (else an orphaned
# sandbox would wait forever on a setup nobody finishes).
_OWNER_ALIVE = '[ "$PPID" = "$0" ] && exec "$@"; exit 125'


def die_with_parent(sig: int = signal.SIGKILL) -> None:
    """Ask the kernel to send `sig` to this process when the thread that forked it dies, so no
    child of ours outlives a SIGKILLed parent (Linux prctl PR_SET_PDEATHSIG)."""
    if _prctl is not None:
        _prctl(_PR_SET_PDEATHSIG, sig, 0, 0, 0)


def with_pdeathsig(argv: list[str]) -> list[str]:
    """The command killed by the kernel if the thread that started it dies (setpriv), and never
    started once this process is gone."""
    if not SETPRIV:
        return argv
    return [SETPRIV, "--pdeathsig", "KILL", "--", "sh", "-c", _OWNER_ALIVE, str(os.getpid()),
            *argv]
