"""Daemon control behind `artoo up / down / status`: supervisord, the expected roles, heartbeats.

The expected roles are read from `supervisord.conf` itself (program name = role name, numprocs =
instances), so adding a role is one [program] section and nothing else. Liveness comes from the
heartbeats on the bus (a role silent for `missing_after_s` is missing); supervisord's own view
(state, pid) is shown next to it.
"""
from __future__ import annotations

import configparser
import os
import signal
import subprocess
import sys
import threading
import time
import xmlrpc.client
from dataclasses import dataclass, field
from pathlib import Path

import psutil

from protocol import curve, signing
from protocol.bus import BusClient, BusTimeout
from protocol.settings import Settings

from . import local_model

REPO_ROOT = Path(__file__).resolve().parents[2]
DEFAULT_SCALE = 2
TAG_VAR = "ARTOO_DAEMON_TAG"      # every daemon process carries it; `down` sweeps by it


def conf_path() -> Path:
    return Path(os.environ.get("ARTOO_SUPERVISORD_CONF", REPO_ROOT / "supervisord.conf"))


def daemon_env(settings: Settings, extra: dict[str, str] | None = None) -> dict[str, str]:
    env = dict(os.environ)
    env.update({
        "ARTOO_HOME": str(settings.home),
        "ARTOO_WORKSPACE": str(settings.workspace),
        "ARTOO_RUN": str(settings.run_dir),
        "ARTOO_RUN_DIR": str(settings.run_dir),
        "ARTOO_PYTHON": sys.executable,
        "ARTOO_SCALE": env.get("ARTOO_SCALE") or str(DEFAULT_SCALE),
        TAG_VAR: str(settings.home),
        "PYTHONUNBUFFERED": "1",
    })
    env.update(extra or {})
    env.update(local_model.llm_env(settings, env))  # [program:llm]: autostart, model, port
    return env


@dataclass(frozen=True)
class Program:
    name: str
    numprocs: int
    autostart: bool
    heartbeats: bool = True        # a bus role; the llm server is watched over HTTP instead


def expected_programs(env: dict[str, str] | None = None) -> list[Program]:
    """Programs of supervisord.conf with their instance counts (ENV_ expansions resolved)."""
    env = env or os.environ
    parser = configparser.RawConfigParser()
    parser.read(conf_path())
    programs = []
    for section in parser.sections():
        if not section.startswith("program:"):
            continue
        def expanded(key: str, default: str) -> str:
            raw = parser.get(section, key, fallback=default)
            for name, value in env.items():
                raw = raw.replace(f"%(ENV_{name})s", value)
            return raw.strip()
        try:
            numprocs = int(expanded("numprocs", "1"))
        except ValueError:
            numprocs = DEFAULT_SCALE
        autostart = expanded("autostart", "true").lower() != "false"
        name = section.split(":", 1)[1]
        programs.append(Program(name, numprocs, autostart, name != local_model.PROGRAM))
    return programs


def expected_instances(env: dict[str, str] | None = None) -> list[tuple[str, int]]:
    return [(p.name, i) for p in expected_programs(env) if p.autostart and p.heartbeats
            for i in range(p.numprocs)]


# ---------------------------------------------------------------------------------------------
# supervisord
# ---------------------------------------------------------------------------------------------

def rpc(settings: Settings):
    from supervisor.xmlrpc import SupervisorTransport
    url = f"unix://{settings.run_dir}/supervisor.sock"
    transport = SupervisorTransport(None, None, serverurl=url)
    return xmlrpc.client.ServerProxy("http://127.0.0.1", transport=transport)


def supervisord_pid(settings: Settings) -> int | None:
    try:
        pid = int((settings.run_dir / "supervisord.pid").read_text().strip())
    except (OSError, ValueError):
        return None
    try:  # a stale pid file may name a pid that now belongs to another program
        proc = psutil.Process(pid)
        if proc.status() == psutil.STATUS_ZOMBIE or \
                not any("supervisord" in part for part in proc.cmdline()):
            return None
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return None
    return pid


def supervisor_processes(settings: Settings) -> dict[tuple[str, int], dict]:
    """supervisord's view: (program, instance) -> {state, pid, start}; empty when not running."""
    try:
        infos = rpc(settings).supervisor.getAllProcessInfo()
    except Exception:
        return {}
    out = {}
    for info in infos:
        name = info["name"]
        program, _, num = name.rpartition("_")
        if not program or not num.isdigit():
            program, num = name, "0"
        out[(program if program == info["group"] else info["group"], int(num))] = info
    return out


class DaemonError(RuntimeError):
    pass


def _describe(settings: Settings, program: str, instance: int, info: dict) -> str:
    """`name[i] STATE (log PATH: last lines)` for an error message the operator can act on."""
    log = info.get("stdout_logfile") or str(settings.logs_dir)
    return (f"{program}[{instance}] {info.get('statename', 'unknown')} "
            f"(log {log}: {_tail(log) or 'empty'})")


def _tail(path: str, lines: int = 3) -> str:
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - 4096))
            text = f.read().decode(errors="replace")
    except OSError:
        return ""
    return " | ".join(line.strip() for line in text.strip().splitlines()[-lines:])


def up(settings: Settings, timeout_s: float = 90.0, extra_env: dict[str, str] | None = None) -> dict:
    """Start supervisord (if not running) and wait until every expected role heartbeats.

    Idempotent: with the daemon already up it only waits for the roles. After a crash it clears
    the stale pid file and sockets and kills role processes the dead supervisord left behind."""
    settings.ensure_dirs()
    if curve.needs_curve(settings):
        curve.ensure_keys(settings)
    if settings.bus_sign:
        signing.ensure_key(settings)  # before any role starts: they all read this one key
    starting = supervisord_pid(settings) is None
    if starting:  # the llm port of a stopped daemon may be taken by now: claim a fresh one
        for stale in ("supervisor.sock", "supervisord.pid", local_model.PORT_FILE):
            try:
                (settings.run_dir / stale).unlink()
            except FileNotFoundError:
                pass
    env = daemon_env(settings, extra_env)
    if starting:
        sweep(settings)  # orphans of a supervisord that died would hold the bus and the llm port
        proc = subprocess.run([sys.executable, "-m", "supervisor.supervisord", "-c",
                               str(conf_path())], env=env, capture_output=True, text=True)
        if proc.returncode != 0:
            raise DaemonError(f"supervisord failed to start: {proc.stderr.strip() or proc.stdout}")
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            rpc(settings).supervisor.getState()
            break
        except Exception:
            if time.monotonic() > deadline:
                raise DaemonError("supervisord did not open its control socket") from None
            time.sleep(0.05)
    expected = expected_instances(env)
    watch: BusClient | None = None
    collector = HeartbeatCollector()
    try:
        while True:
            remaining = deadline - time.monotonic()
            sup = supervisor_processes(settings)
            if remaining <= 0:
                report = status_report(settings, env, collector, sup)
                missing = [(r["role"], r["instance"]) for r in report["roles"] if not r["alive"]]
                raise DaemonError(f"roles not ready after {timeout_s:.0f}s: "
                                  + "; ".join(_describe(settings, p, i, sup.get((p, i), {}))
                                              for p, i in missing))
            # FATAL: supervisord gave up; EXITED: it will not restart it. up cannot finish.
            fatal = [_describe(settings, p, i, info) for (p, i), info in sup.items()
                     if info.get("statename") in ("FATAL", "EXITED")]
            if fatal:
                raise DaemonError("roles failed to start and were given up by supervisord: "
                                  + "; ".join(fatal) + ". Fix the cause, then `artoo down` and "
                                  "`artoo up`.")
            if watch is None:
                try:
                    watch, collector = watch_heartbeats(settings, min(1.0, remaining))
                except BusTimeout:
                    continue  # the bus itself is still starting
            report = status_report(settings, env, collector, sup)
            if ready(report, expected):
                return report
            collector.changed.wait(0.25)  # a new heartbeat, or time to look at supervisord again
            collector.changed.clear()
    finally:
        if watch is not None:
            watch.stop()


def ready(report: dict, expected: list[tuple[str, int]]) -> bool:
    """Every expected instance heartbeats (extra processes, e.g. effectors, do not count)."""
    alive = {(r["role"], r["instance"]) for r in report["roles"] if r["alive"]}
    return all(key in alive for key in expected) and all(
        r["alive"] for r in report["roles"] if r["role"] == local_model.PROGRAM)


def down(settings: Settings, timeout_s: float = 30.0) -> list[int]:
    """Stop supervisord and everything it started; SIGKILL any straggler. Returns swept pids."""
    pid = supervisord_pid(settings)
    if pid is not None:
        try:
            stopped = stop_programs(settings, supervisor_processes(settings))
            rpc(settings).supervisor.shutdown()
        except Exception:
            stopped = False
            try:
                os.kill(pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
        try:  # with every program stopped, supervisord has nothing left to do but its idle ticks
            psutil.Process(pid).wait(5.0 if stopped else timeout_s)
        except psutil.NoSuchProcess:
            pass
        except psutil.TimeoutExpired:
            os.kill(pid, signal.SIGKILL)
    swept = sweep(settings)
    for stale in ("supervisor.sock", "supervisord.pid", local_model.PORT_FILE):
        try:
            (settings.run_dir / stale).unlink()
        except FileNotFoundError:
            pass
    return swept


def _program_settings() -> dict[str, tuple[int, float]]:
    """program -> (priority, stopwaitsecs) from supervisord.conf (supervisord's defaults)."""
    parser = configparser.RawConfigParser()
    parser.read(conf_path())
    out = {}
    for section in parser.sections():
        if section.startswith("program:"):
            try:
                out[section.split(":", 1)[1]] = (parser.getint(section, "priority", fallback=999),
                                                 parser.getfloat(section, "stopwaitsecs",
                                                                 fallback=10.0))
            except ValueError:
                out[section.split(":", 1)[1]] = (999, 10.0)
    return out


def stop_programs(settings: Settings, programs: dict[tuple[str, int], dict]) -> bool:
    """Stop every program of one priority level at once, highest level first (supervisord's own
    order, which the bus and the tap rely on to see the roles' last words), waiting only as long as
    the processes take. supervisord's shutdown alone stops one level per poll tick. Each stop goes
    through supervisord (one SIGTERM to the group, SIGKILL after stopwaitsecs), so nothing is
    signalled twice. Returns True when every program has ended."""
    server = rpc(settings).supervisor
    conf = _program_settings()
    levels: dict[int, list[tuple[str, psutil.Process, float]]] = {}
    for (program, _), info in programs.items():
        if not info.get("pid"):
            continue
        priority, wait = conf.get(program, (999, 10.0))
        try:
            proc = psutil.Process(info["pid"])
        except psutil.NoSuchProcess:
            continue
        levels.setdefault(priority, []).append((f"{info['group']}:{info['name']}", proc, wait))
    for priority in sorted(levels, reverse=True):
        members = levels[priority]
        for name, _, _ in members:
            try:
                server.stopProcess(name, False)  # returns at once; supervisord escalates
            except xmlrpc.client.Fault:
                pass  # not running any more
        deadline = time.monotonic() + max(wait for _, _, wait in members) + 2.0
        while time.monotonic() < deadline and any(_running(p) for _, p, _ in members):
            time.sleep(0.02)
    return not any(_running(p) for members in levels.values() for _, p, _ in members)


def our_processes(settings: Settings) -> list[psutil.Process]:
    """Every live process started by this data dir's daemon (tagged through its environment)."""
    tag = str(settings.home)
    found = []
    me = os.getpid()
    for proc in psutil.process_iter(["pid"]):
        if proc.pid == me:
            continue
        try:
            if proc.environ().get(TAG_VAR) == tag and proc.status() != psutil.STATUS_ZOMBIE:
                found.append(proc)
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            continue
    return found


def sweep(settings: Settings) -> list[int]:
    procs = our_processes(settings)
    for proc in procs:
        try:
            proc.kill()
        except psutil.NoSuchProcess:
            pass
    # Gone or a zombie (dead, waiting for a parent that is not us to reap it) both count as ended;
    # psutil.wait_procs would sit out its whole timeout on a zombie that is not our child.
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and any(_running(p) for p in procs):
        time.sleep(0.02)
    return [p.pid for p in procs]


def _running(proc: psutil.Process) -> bool:
    try:
        return proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


# ---------------------------------------------------------------------------------------------
# status from heartbeats
# ---------------------------------------------------------------------------------------------

@dataclass
class HeartbeatCollector:
    """Latest heartbeat per (role, instance) seen on the bus."""
    beats: dict[tuple[str, int], tuple[float, dict]] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)
    changed: threading.Event = field(default_factory=threading.Event)

    def __call__(self, env, msg) -> None:
        with self.lock:
            self.beats[(msg.role, msg.instance)] = (time.time(), msg.model_dump())
        self.changed.set()


def watch_heartbeats(settings: Settings, timeout_s: float) -> tuple[BusClient, HeartbeatCollector]:
    """A started bus client recording every heartbeat (raises BusTimeout without a bus)."""
    collector = HeartbeatCollector()
    client = BusClient("user", settings=settings, heartbeat=False)
    client.on("Heartbeat", collector)
    client.start(timeout=timeout_s)
    return client, collector


def collect_status(settings: Settings, env: dict[str, str] | None = None,
                   window_s: float = 1.5) -> dict:
    """Listen to heartbeats until every expected instance is heard or window_s passes."""
    env = env or daemon_env(settings)
    expected = expected_instances(env)
    client, collector = watch_heartbeats(settings, min(window_s, 2.0) + 1.0)
    try:
        deadline = time.monotonic() + window_s
        while time.monotonic() < deadline:
            with collector.lock:
                if all(key in collector.beats for key in expected):
                    break
            collector.changed.wait(max(0.0, min(0.1, deadline - time.monotonic())))
            collector.changed.clear()
    finally:
        client.stop()
    return status_report(settings, env, collector, supervisor_processes(settings))


def status_report(settings: Settings, env: dict[str, str], collector: HeartbeatCollector,
                  sup: dict[tuple[str, int], dict]) -> dict:
    """One row per expected instance (and any other heartbeating process) from the beats so far."""
    expected = expected_instances(env)
    rows = []
    now = time.time()
    with collector.lock:
        seen = dict(collector.beats)
    keys = list(expected) + sorted(k for k in seen if k not in expected)
    for role, inst in keys:
        beat = seen.get((role, inst))
        info = sup.get((role, inst), {})
        hb = beat[1] if beat else {}
        rows.append({
            "role": role, "instance": inst,
            "alive": beat is not None and now - beat[0] <= settings.missing_after_s,
            "pid": hb.get("pid") or info.get("pid") or None,
            "node": hb.get("node", ""),
            "uptime_s": round(hb.get("uptime_s", 0.0), 1),
            "supervisor_state": info.get("statename", ""),
            "gaps": sum(hb.get("gaps", {}).values()),
            "rejected": sum(hb.get("rejected", {}).values()),
            "unacked": hb.get("unacked", 0),
            "lost": hb.get("lost", 0),
            "in_flight": hb.get("in_flight", 0),
            "info": hb.get("info", {}),
        })
    rows += local_model.status_rows(settings, env, sup)  # llm: alive = its HTTP API answers
    return {"home": str(settings.home), "supervisord_pid": supervisord_pid(settings),
            "roles": rows, "llm_backends": local_model.backend_description(settings, env),
            "bus_signing": signing_state(settings)}


def signing_state(settings: Settings) -> str:
    """For `artoo status`: are bus messages signed, and with which key file."""
    if not settings.bus_sign:
        return "off (ARTOO_BUS_SIGN=0: messages are neither signed nor checked)"
    return f"on (HMAC-SHA256, key {settings.bus_key_file})"
