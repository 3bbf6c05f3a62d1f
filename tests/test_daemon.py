"""`artoo up / status / down` through the real CLI on a temporary home: readiness, idempotence,
SIGKILLed roles reported and restarted by supervisord, crash leftovers, FATAL programs, stragglers."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import REPO
from protocol import accel
from scripted_llm import ScriptedLLM
from services.runtime import daemon

ARTOO = str(Path(sys.executable).with_name("artoo"))


def artoo(*args: str, env: dict | None = None, timeout: float = 180) -> subprocess.CompletedProcess:
    return subprocess.run([ARTOO, *args], env={**os.environ, **(env or {})}, cwd=REPO,
                          capture_output=True, text=True, timeout=timeout)


def status_json(env: dict | None = None) -> dict:
    result = artoo("status", "--json", env=env)
    assert result.returncode in (0, 1), result.stderr
    return json.loads(result.stdout)


def rows(report: dict) -> dict[tuple[str, int], dict]:
    return {(r["role"], r["instance"]): r for r in report["roles"]}


def wait_all_alive(settings, env: dict, replaced: dict[tuple[str, int], int],
                   timeout: float = 60) -> dict:
    """Poll heartbeats until every expected instance is alive and each `replaced` one runs under
    a new pid (supervisord restarted it)."""
    deadline = time.monotonic() + timeout
    while True:
        report = daemon.collect_status(settings, env=daemon.daemon_env(settings, env))
        current = rows(report)
        if all(r["alive"] for r in report["roles"]) and all(
                current[key]["pid"] != pid for key, pid in replaced.items()):
            return report
        assert time.monotonic() < deadline, f"not restarted: {report['roles']}"


@pytest.fixture
def llm_env(artoo_env):
    """A scripted OpenAI-compatible endpoint, so no role needs the bundled local model."""
    with ScriptedLLM() as llm:
        yield {**llm.env(), "ARTOO_SCALE": "1"}


@pytest.fixture
def bus_only_conf(artoo_env, tmp_path, monkeypatch):
    """supervisord.conf reduced to its header and [program:bus], plus optional extra programs."""
    text = (REPO / "supervisord.conf").read_text()
    header, _, rest = text.partition("[program:")
    bus = "[program:" + rest.split("\n[program:")[0]
    assert bus.startswith("[program:bus]")

    def make(extra: str = "", with_bus: bool = True) -> Path:
        path = tmp_path / "supervisord.conf"
        path.write_text(f"{header}{bus if with_bus else ''}\n{extra}")
        monkeypatch.setenv("ARTOO_SUPERVISORD_CONF", str(path))
        return path

    return make


def assert_nothing_left(settings) -> None:
    left = daemon.our_processes(settings)
    assert not left, f"processes left: {[(p.pid, p.cmdline()) for p in left]}"


def test_up_status_kill_restart_down(settings, llm_env):
    """The whole life of the daemon, with every program of supervisord.conf."""
    try:
        up = artoo("up", "--json", "--timeout", "150", env=llm_env)
        assert up.returncode == 0, up.stderr + up.stdout
        report = json.loads(up.stdout)
        expected = daemon.expected_instances(daemon.daemon_env(settings, llm_env))
        assert ("bus", 0) in expected
        assert set(expected) <= set(rows(report)) and all(r["alive"] for r in report["roles"])
        supervisord = report["supervisord_pid"]

        again = artoo("up", "--json", env=llm_env)  # idempotent: same daemon, nothing restarted
        assert again.returncode == 0, again.stderr
        report = json.loads(again.stdout)
        assert report["supervisord_pid"] == supervisord
        assert all(r["alive"] and r["pid"] for r in report["roles"])
        for row in report["roles"]:   # every role runs with the allocator settings of the conf
            environ = Path(f"/proc/{row['pid']}/environ").read_bytes().split(b"\0")
            assert b"MALLOC_ARENA_MAX=2" in environ, row
            assert b"MALLOC_MMAP_THRESHOLD_=131072" in environ, row
        roles = [key for key in expected if key[0] != "bus"]

        # SIGKILL one instance of every role at once: each is missing (or already replaced).
        victims = {key: rows(report)[key]["pid"] for key in roles}
        for pid in victims.values():
            os.kill(pid, signal.SIGKILL)
        after = rows(status_json(llm_env))
        for key, pid in victims.items():
            assert not after[key]["alive"] or after[key]["pid"] != pid, after[key]
        wait_all_alive(settings, llm_env, victims)

        # The proxy itself: supervisord restarts it and every role finds its way back.
        bus_pid = rows(status_json(llm_env))[("bus", 0)]["pid"]
        os.kill(bus_pid, signal.SIGKILL)
        after = status_json(llm_env)
        bus_row = rows(after)[("bus", 0)]
        assert not bus_row["alive"] or bus_row["pid"] != bus_pid
        wait_all_alive(settings, llm_env, {("bus", 0): bus_pid})
        assert daemon.supervisord_pid(settings) == supervisord
    finally:
        down = artoo("down", env=llm_env)
    assert down.returncode == 0, down.stderr
    assert_nothing_left(settings)
    assert not (settings.run_dir / "supervisord.pid").exists()


def tagged_sleeper(settings) -> subprocess.Popen:
    """A process carrying this daemon's tag, as a role orphaned by a crash would."""
    return subprocess.Popen(["sleep", "300"], env={**os.environ, daemon.TAG_VAR: str(settings.home)})


def test_up_recovers_from_a_crash_and_down_sweeps_stragglers(settings, bus_only_conf):
    bus_only_conf()
    run = settings.run_dir
    run.mkdir(parents=True, exist_ok=True)
    # A crash leaves: a pid file naming a pid now used by another program, socket files, and a
    # role process whose supervisord is gone.
    (run / "supervisord.pid").write_text(str(os.getpid()))
    for name in ("supervisor.sock", "xsub.sock", "xpub.sock", "control.sock"):
        (run / name).write_text("stale")
    orphan = tagged_sleeper(settings)
    straggler = None
    try:
        up = artoo("up", "--json", "--timeout", "60")
        assert up.returncode == 0, up.stderr + up.stdout
        report = json.loads(up.stdout)
        assert report["supervisord_pid"] not in (None, os.getpid())
        assert rows(report)[("bus", 0)]["alive"]
        assert orphan.wait(10) == -signal.SIGKILL  # swept before the fresh start

        straggler = tagged_sleeper(settings)  # not supervisord's child: only the sweep finds it
        down = artoo("down")
        assert down.returncode == 0, down.stderr
        assert "killed 1 straggler" in down.stdout
        assert straggler.wait(10) == -signal.SIGKILL
    finally:
        artoo("down")
        for proc in (orphan, straggler):
            if proc is not None and proc.poll() is None:
                proc.kill()
                proc.wait()
    assert_nothing_left(settings)


def test_up_reports_a_fatal_program_with_its_log(settings, bus_only_conf):
    bus_only_conf("""
[program:broken]
command=%(ENV_ARTOO_PYTHON)s -c "print('broken on purpose'); raise SystemExit(3)"
startsecs=10
startretries=0
autorestart=false
redirect_stderr=true
stdout_logfile=%(ENV_ARTOO_HOME)s/logs/%(program_name)s.log
""", with_bus=False)
    try:
        up = artoo("up", "--timeout", "60")
        assert up.returncode == 1
        message = up.stderr
        assert "broken[0]" in message and "broken on purpose" in message
        assert str(settings.logs_dir / "broken.log") in message
    finally:
        down = artoo("down")
    assert down.returncode == 0
    assert_nothing_left(settings)


def test_status_without_a_daemon_reports_every_role_missing(settings, bus_only_conf):
    bus_only_conf()
    result = artoo("status", "--json", "--window", "0.5")
    assert result.returncode == 1
    report = json.loads(result.stdout)
    assert report["supervisord_pid"] is None
    assert [(r["role"], r["alive"]) for r in report["roles"]] == [("bus", False)]
    assert report["bus_hot_path"] == accel.STATE     # which path the bus runs, and why
    assert_nothing_left(settings)


def test_expected_instances_follow_supervisord_conf(tmp_path, monkeypatch):
    conf = tmp_path / "supervisord.conf"
    conf.write_text("[supervisord]\nlogfile=x\n\n[program:bus]\ncommand=x\n\n"
                    "[program:planner]\ncommand=x\nnumprocs=%(ENV_ARTOO_SCALE)s\n"
                    "process_name=%(program_name)s_%(process_num)d\n\n"
                    "[program:llm]\ncommand=x\nautostart=%(ENV_ARTOO_LLM_AUTOSTART)s\n\n"
                    "[program:manual]\ncommand=x\nautostart=false\n")
    monkeypatch.setenv("ARTOO_SUPERVISORD_CONF", str(conf))
    env = {"ARTOO_SCALE": "3", "ARTOO_LLM_AUTOSTART": "true"}
    assert daemon.expected_instances(env) == [("bus", 0), ("planner", 0), ("planner", 1),
                                              ("planner", 2)]  # llm is watched over HTTP
    programs = {p.name: p for p in daemon.expected_programs(env)}
    assert programs["planner"].numprocs == 3 and not programs["manual"].autostart
