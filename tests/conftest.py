"""Shared fixtures: temporary data dirs, a real bus proxy process, bus clients, the full daemon.

Everything runs on real processes with ipc endpoints under a temporary directory; nothing uses a
fixed port or the user's ~/.artoo. Fixtures stop what they start.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Callable

import psutil
import pytest

from protocol import signing
from protocol.bus import BusClient
from protocol.settings import load_settings

REPO = Path(__file__).resolve().parent.parent
# Every daemon a test starts takes a free port for its metrics endpoint (never a fixed one).
os.environ.setdefault("ARTOO_METRICS_PORT", "0")
sys.path.insert(0, str(REPO / "tests"))
# Helpers of the opt-in suites; they have no conftest.py of their own because a second module
# named `conftest` would shadow this one for every `from conftest import ...`.
sys.path.insert(0, str(REPO / "tests" / "chaos"))


@pytest.fixture
def artoo_env(monkeypatch):
    """A fresh ARTOO_HOME / workspace (short paths so ipc:// fits) exported to the environment."""
    root = Path(tempfile.mkdtemp(prefix="at-", dir="/tmp"))
    home, workspace = root / "home", root / "ws"
    home.mkdir()
    workspace.mkdir()
    env = {"ARTOO_HOME": str(home), "ARTOO_WORKSPACE": str(workspace), "ARTOO_RUN_DIR": "",
           "ARTOO_SCALE": os.environ.get("ARTOO_SCALE", "2")}
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    for key in ("OPENAI_BASE_URL", "OPENAI_API_KEY", "OPENAI_MODEL", "ARTOO_LOCAL_MODEL",
                "BRAIN_BASE_URL", "TOOL_BASE_URL", "BRAIN_API_KEY", "TOOL_API_KEY",
                "BRAIN_MODEL", "TOOL_MODEL"):
        monkeypatch.delenv(key, raising=False)
    yield env
    import shutil
    shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def settings(artoo_env):
    s = load_settings()
    s.ensure_dirs()
    if s.bus_sign:
        signing.ensure_key(s)  # as `artoo up` does (a bus client would create it too)
    return s


# a process a test starts ends with the test run, even a killed one: the kernel signals it when
# the thread that started it dies — so only for pytest's main thread (a tap a test restarts from
# a helper thread must outlive that thread)
_PDEATHSIG = [shutil.which("setpriv"), "--pdeathsig", "TERM", "--"] if shutil.which("setpriv") \
    else []


def start_process(args: list[str], env: dict | None = None, log_name: str = "proc") -> subprocess.Popen:
    """Start `python -m ...` in its own session with output to a log file in ARTOO_HOME; one
    started from the main thread is sent SIGTERM if the test run dies without stopping it."""
    full_env = dict(os.environ)
    full_env.update(env or {})
    full_env["PYTHONUNBUFFERED"] = "1"
    logs = Path(full_env.get("ARTOO_HOME", tempfile.gettempdir())) / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    out = open(logs / f"{log_name}.log", "ab")
    main = threading.current_thread() is threading.main_thread()
    return subprocess.Popen([*(_PDEATHSIG if main else []), sys.executable, *args], env=full_env,
                            stdout=out, stderr=subprocess.STDOUT, cwd=REPO,
                            start_new_session=True)


def stop_process(proc: subprocess.Popen, timeout: float = 5.0) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout)


def wait_bus_ready(settings, timeout: float = 15.0) -> None:
    """The bus is ready when a probe client completes its handshake through it."""
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        probe = BusClient("user", settings=settings, heartbeat=False)
        try:
            probe.start(timeout=1.0)
            probe.stop()
            return
        except Exception as exc:  # noqa: BLE001 - retried until the deadline
            last = exc
    raise TimeoutError(f"bus not ready: {last}")


@pytest.fixture
def bus_process(settings, artoo_env):
    """A real `services.runtime.bus` proxy process (capture off unless a test starts a tap)."""
    proc = start_process(["-m", "services.runtime.bus"], {"ARTOO_CAPTURE": "0"}, "bus")
    try:
        wait_bus_ready(settings)
        yield proc
    finally:
        stop_process(proc)


@pytest.fixture
def bus_clients(settings):
    """Factory for started BusClients; all are stopped at teardown."""
    made: list[BusClient] = []

    def make(role: str, setup=None, **kwargs) -> BusClient:
        kwargs.setdefault("heartbeat", False)
        kwargs.setdefault("settings", settings)
        client = BusClient(role, **kwargs)
        if setup:
            setup(client)
        client.start()
        made.append(client)
        return client

    yield make
    for client in made:
        client.stop()


@pytest.fixture
def daemon(artoo_env, settings):
    """The full daemon via `artoo up`; `artoo down` at teardown, asserting nothing is left."""
    from services.runtime import daemon as d
    report = d.up(settings, timeout_s=120)
    try:
        yield report
    finally:
        d.down(settings)
        left = d.our_processes(settings)
        assert not left, f"processes left after down: {[p.pid for p in left]}"


@contextmanager
def scripted_daemon(llm, *, prefix: str, scale: int = 2, extra_env: dict | None = None,
                    before_up: Callable | None = None, up_timeout_s: float = 120):
    """A real daemon (`artoo up`) in a temporary ARTOO_HOME and workspace, its LLM endpoint the
    scripted one; yields (settings, root). `before_up(settings)` runs with the environment set
    and the daemon still down. Afterwards: down, the temp dir removed, and no process left."""
    from services.runtime import daemon
    root = Path(tempfile.mkdtemp(prefix=prefix, dir="/tmp"))
    (root / "home").mkdir()
    (root / "ws").mkdir()
    with pytest.MonkeyPatch.context() as mp:
        for key, value in {"ARTOO_HOME": str(root / "home"), "ARTOO_WORKSPACE": str(root / "ws"),
                           "ARTOO_SCALE": str(scale), "ARTOO_LLM_BACKOFF_S": "0.01",
                           "ARTOO_LLM_RETRIES": "0", **llm.env(), **(extra_env or {})}.items():
            mp.setenv(key, value)
        mp.delenv("ARTOO_RUN_DIR", raising=False)
        settings = load_settings()
        settings.ensure_dirs()
        try:
            if before_up is not None:
                before_up(settings)
            daemon.up(settings, timeout_s=up_timeout_s)
            yield settings, root
        finally:
            daemon.down(settings)
            left = daemon.our_processes(settings)
            shutil.rmtree(root, ignore_errors=True)
            assert not left, f"processes left after down: {[p.pid for p in left]}"
