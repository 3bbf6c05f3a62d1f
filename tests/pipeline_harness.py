"""A module-scoped stack for the pipeline role tests: a temp ARTOO_HOME, a real bus proxy process,
the scripted LLM on loopback, and real role processes (services.roles.perceiver / planner / metaval),
plus bus-level stand-ins for the roles a test does not run (spawner + effector, GGS, user).

Everything is real processes and real sockets; the stand-ins are ordinary BusClients speaking the
catalogue messages, so the roles under test cannot tell them apart from the real ones.
"""
from __future__ import annotations

import os
import queue
import shutil
import signal
import tempfile
import threading
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable

import pytest

from conftest import start_process, stop_process, wait_bus_ready
from protocol.bus import BusClient
from protocol.messages import (EffectorExited, EffectorStarted, SubTaskClaim, SubTaskOutcome,
                               UserRequest, RunOptions)
from protocol.settings import load_settings
from scripted_llm import ScriptedLLM
from waiting import wait_on


class Recorder:
    """Collects (envelope, message) pairs of chosen types; wait_for() blocks on a predicate."""

    def __init__(self):
        self.items: list[tuple[Any, Any]] = []
        self.cond = threading.Condition()

    def __call__(self, env, msg) -> None:
        with self.cond:
            self.items.append((env, msg))
            self.cond.notify_all()

    def of(self, type_name: str | None = None, task: str | None = None) -> list:
        with self.cond:
            return [m for e, m in self.items
                    if (type_name is None or e.type == type_name) and (task is None or e.task == task)]

    def envs(self, type_name: str | None = None, task: str | None = None) -> list:
        with self.cond:
            return [e for e, m in self.items
                    if (type_name is None or e.type == type_name) and (task is None or e.task == task)]

    def wait_for(self, pred: Callable[[], Any], timeout: float = 20.0, what: str = "condition"):
        return wait_on(self.cond, pred, timeout, what, 0.2)

    def wait_type(self, type_name: str, task: str | None = None, n: int = 1,
                  timeout: float = 20.0) -> list:
        return self.wait_for(lambda: (lambda xs: xs if len(xs) >= n else None)(self.of(type_name, task)),
                             timeout, f"{n} x {type_name} for {task}")


class FakeSpawner:
    """Claims every offer, records assignments, and (if `run` is set) plays the effector: it calls
    run(subtask) -> (status, output) or None (no outcome: the effector 'dies')."""

    def __init__(self, stack: "Stack"):
        self.stack = stack
        self.rec = Recorder()
        self.run: Callable | None = None
        self.client = stack.client("spawner", heartbeat=True)
        self.effector = stack.client("agentval")
        c = self.client
        c.on("SubTaskOffer", self._offer)
        c.on("SubTaskAssign", self._assign, ack=True, when=lambda env, m: m.spawner == c.node)
        c.handshake()

    def _offer(self, env, offer) -> None:
        self.rec(env, offer)
        self.client.publish(SubTaskClaim(task_id=offer.task_id, subtask_id=offer.subtask_id,
                                         offer_id=offer.offer_id, spawner=self.client.node,
                                         free_slots=4))

    def _assign(self, env, assign) -> None:
        self.rec(env, assign)
        if self.run is None:
            return
        st = assign.subtask
        self.client.publish(EffectorStarted(task_id=st.parent_task_id, subtask_id=st.subtask_id,
                                            pid=os.getpid(), spawner=self.client.node))
        threading.Thread(target=self._play, args=(st,), daemon=True).start()

    def _play(self, st) -> None:
        result = self.run(st)
        if result is not None:
            status, output = result
            self.outcome(st, status, output)
        self.client.send(EffectorExited(task_id=st.parent_task_id, subtask_id=st.subtask_id,
                                        pid=os.getpid(), spawner=self.client.node, exit_code=0,
                                        reason="completed" if result else "crashed"))

    def outcome(self, st, status: str, output: Any, reason: str | None = None,
                tool_calls: list | None = None) -> None:
        self.effector.send(SubTaskOutcome(tool_calls=tool_calls or [],
            task_id=st.parent_task_id, subtask_id=st.subtask_id, parent_task_id=st.parent_task_id,
            intent=st.intent, success_criteria=st.success_criteria, status=status, output=output,
            failure_reason=reason or (None if status == "matched" else "scripted failure"),
            plan_round=st.plan_round, sequence=st.sequence), consumers=("planner", "metaval"))


class Stack:
    def __init__(self, root: Path, llm: ScriptedLLM):
        self.root = root
        self.llm = llm
        self.settings = load_settings()
        self.settings.ensure_dirs()
        self.procs: dict[str, Any] = {}
        self.clients: list[BusClient] = []
        self.bus = None

    def start_bus(self) -> None:
        self.bus = start_process(["-m", "services.runtime.bus"], {"ARTOO_CAPTURE": "0"}, "bus")
        wait_bus_ready(self.settings)

    def start_role(self, role: str, wait: bool = True) -> None:
        self.procs[role] = start_process(["-m", f"services.roles.{role}"],
                                         {"ARTOO_INSTANCE": "0", "ARTOO_INSTANCES": "1"}, role)
        if wait:
            self.wait_alive(role, after=time.time())

    def wait_alive(self, role: str, after: float = 0.0, timeout: float = 30.0) -> None:
        """A role is up when one of its heartbeats (sent after `after`) reaches us."""
        seen = threading.Event()
        probe = BusClient("user", settings=self.settings, heartbeat=False)
        probe.on("Heartbeat", lambda env, hb: seen.set() if hb.role == role and env.ts >= after else None,
                 task=role)
        probe.start()
        try:
            if not seen.wait(timeout):
                raise AssertionError(f"{role} did not come up")
        finally:
            probe.stop()

    def kill_role(self, role: str) -> None:
        proc = self.procs[role]
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(5)

    def restart_role(self, role: str) -> None:
        self.start_role(role)

    def client(self, role: str, setup: Callable | None = None, heartbeat: bool = False) -> BusClient:
        c = BusClient(role, settings=self.settings, heartbeat=heartbeat)
        if setup:
            setup(c)
        c.start()
        self.clients.append(c)
        return c

    def recorder(self, role: str, types: list[str], ack: tuple[str, ...] = ()) -> Recorder:
        rec = Recorder()

        def setup(c):
            for t in types:
                c.on(t, rec, ack=t in ack)
        self.client(role, setup)
        return rec

    def submit(self, user: BusClient, run_id: str, text: str, interactive: bool = False) -> None:
        user.send(UserRequest(task_id=run_id, text=text,
                              options=RunOptions(interactive=interactive)))

    def stop(self) -> None:
        for c in self.clients:
            c.stop()
        for proc in self.procs.values():
            stop_process(proc)
        if self.bus:
            stop_process(self.bus)


@contextmanager
def pipeline_stack(roles: list[str], env: dict[str, str] | None = None):
    """Temp home + bus + scripted LLM + the given role processes, for one test module."""
    root = Path(tempfile.mkdtemp(prefix="at-", dir="/tmp"))
    (root / "home").mkdir()
    (root / "ws").mkdir()
    with pytest.MonkeyPatch.context() as mp, ScriptedLLM() as llm:
        values = {"ARTOO_HOME": str(root / "home"), "ARTOO_WORKSPACE": str(root / "ws"),
                  "ARTOO_RUN_DIR": "", "ARTOO_LLM_BACKOFF_S": "0.01", "ARTOO_LLM_RETRIES": "1",
                  "ARTOO_REQUEST_TIMEOUT_S": "0.3",  # no memory process: calibration gives up fast
                  **llm.env(), **(env or {})}
        for key, value in values.items():
            mp.setenv(key, value)
        stack = Stack(root, llm)
        try:
            stack.start_bus()
            for role in roles:
                stack.start_role(role, wait=False)
            for role in roles:
                stack.wait_alive(role)
            yield stack
        finally:
            stack.stop()
            shutil.rmtree(root, ignore_errors=True)


def run_id(prefix: str = "run") -> str:
    return f"{prefix}-{os.getpid()}-{time.monotonic_ns() % 10**9}"


__all__ = ["Recorder", "FakeSpawner", "Stack", "pipeline_stack", "run_id", "queue"]
