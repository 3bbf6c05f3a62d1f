"""Test harness for the effector layer: a real bus proxy, real spawner processes (each with its
zygote and forked effectors), the scripted LLM over HTTP, and bus clients playing the planner
(offer/assign, acks EffectorExited and outcomes), the meta-validator (acks outcomes) and the user
(answers approval requests).
"""
from __future__ import annotations

import itertools
import os
import shutil
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, Callable, Optional

from conftest import start_process, stop_process, wait_bus_ready
from protocol.bus import BusClient
from protocol.messages import (ApprovalDecision, ApprovalRequest, Criterion, RunOptions, SubTask,
                               SubTaskAssign, SubTaskOffer)
from protocol.settings import load_settings
from scripted_llm import ScriptedLLM

_ids = itertools.count(1)


class Recorder:
    """Every message of interest, in arrival order, with waiting by predicate."""

    def __init__(self):
        self.items: list[tuple[str, Any, Any]] = []      # (type, envelope, body)
        self.cond = threading.Condition()

    def __call__(self, env, msg) -> None:
        with self.cond:
            self.items.append((env.type, env, msg))
            self.cond.notify_all()

    def of(self, type_name: str, pred: Callable[[Any], bool] = lambda m: True) -> list:
        with self.cond:
            return [m for t, _, m in self.items if t == type_name and pred(m)]

    def envelopes(self, type_name: str) -> list:
        with self.cond:
            return [e for t, e, _ in self.items if t == type_name]

    def wait(self, type_name: str, pred: Callable[[Any], bool] = lambda m: True,
             timeout: float = 30.0, count: int = 1) -> list:
        deadline = time.monotonic() + timeout
        with self.cond:
            while True:
                found = [m for t, _, m in self.items if t == type_name and pred(m)]
                if len(found) >= count:
                    return found
                left = deadline - time.monotonic()
                if left <= 0:
                    seen = sorted({t for t, _, _ in self.items})
                    raise TimeoutError(f"no {count} x {type_name} within {timeout}s; saw {seen}")
                self.cond.wait(left)


class EffectorHarness:
    def __init__(self, extra_env: Optional[dict[str, str]] = None):
        self.root = Path(tempfile.mkdtemp(prefix="ae-", dir="/tmp"))
        self.home, self.workspace = self.root / "home", self.root / "ws"
        self.home.mkdir()
        self.workspace.mkdir()
        self.llm = ScriptedLLM().start()
        self.env = {"ARTOO_HOME": str(self.home), "ARTOO_WORKSPACE": str(self.workspace),
                    "ARTOO_RUN_DIR": "", "ARTOO_CAPTURE": "0", **self.llm.env(),
                    "ARTOO_APPROVAL_TIMEOUT_S": "20", "ARTOO_LLM_RETRIES": "0",
                    **(extra_env or {})}
        saved = {k: os.environ.get(k) for k in self.env}
        os.environ.update(self.env)
        try:
            self.settings = load_settings()
        finally:
            for k, v in saved.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v
        self.settings.ensure_dirs()
        self.bus = start_process(["-m", "services.runtime.bus"], self.env, "bus")
        self.spawners: dict[str, Any] = {}                 # node id -> Popen
        self.clients: list[BusClient] = []
        self.seen = Recorder()
        self.approval_policy: Callable[[ApprovalRequest], Optional[tuple[bool, str]]] = \
            lambda req: (False, "operator")
        try:
            wait_bus_ready(self.settings)
            self._start_clients()
        except Exception:
            self.close()
            raise

    # -- clients ------------------------------------------------------------------------------
    def _client(self, role: str, setup) -> BusClient:
        client = BusClient(role, settings=self.settings, heartbeat=False)
        setup(client)
        client.start()
        self.clients.append(client)
        return client

    def _start_clients(self) -> None:
        rec = self.seen

        def planner(c: BusClient) -> None:
            for t in ("SubTaskClaim", "EffectorStarted", "Heartbeat", "LlmUsage"):
                c.on(t, rec)
            # R3 and R4a send these directed at the effector's node (and a client's handshake
            # probe at its own): seen by observing everything
            directed = ("ExecutionResult", "CorrectionSignal", "Hello")
            c.on("*", lambda env, msg: rec(env, msg) if env.type in directed else None)
            c.on("EffectorExited", rec, ack=True)
            c.on("SubTaskOutcome", rec, ack=True)

        def metaval(c: BusClient) -> None:
            c.on("SubTaskOutcome", lambda env, msg: None, ack=True)

        def user(c: BusClient) -> None:
            c.on("ApprovalRequest", self._on_approval, ack=True)

        self.planner = self._client("planner", planner)
        self.metaval = self._client("metaval", metaval)
        self.user = self._client("user", user)

    def _on_approval(self, env, req: ApprovalRequest) -> None:
        self.seen(env, req)
        answer = self.approval_policy(req)
        if answer is None:
            return                                       # nobody answers: the effector times out
        approved, by = answer
        self.user.send(ApprovalDecision(task_id=req.task_id, approval_id=req.approval_id,
                                        approved=approved, decided_by=by), consumers=("executor",))

    # -- spawners -----------------------------------------------------------------------------
    def start_spawner(self, extra_env: Optional[dict[str, str]] = None, timeout: float = 60.0
                      ) -> str:
        """Start a spawner process; returns its node id once it heartbeats (zygote ready)."""
        known = set(self.spawners)
        proc = start_process(["-m", "services.roles.spawner"], {**self.env, **(extra_env or {})},
                             f"spawner-{len(self.spawners)}")
        hb = self.seen.wait("Heartbeat", lambda m: m.role == "spawner" and m.pid == proc.pid,
                            timeout=timeout)[0]
        assert hb.node not in known
        self.spawners[hb.node] = proc
        return hb.node

    def stop_spawner(self, node: str) -> None:
        stop_process(self.spawners.pop(node), timeout=10)

    # -- the planner's side of placement -------------------------------------------------------
    def subtask(self, intent: str, criteria: list[str] = (), *, yes: bool = False,
                interactive: bool = True, deadline_s: float = 120.0, task_id: str = "",
                **fields) -> SubTask:
        n = next(_ids)
        return SubTask(subtask_id=f"st-{n}", parent_task_id=task_id or f"run-eff-{n}",
                       intent=intent, success_criteria=[Criterion(text=c) for c in criteria],
                       deadline_at=time.time() + deadline_s,
                       options=RunOptions(yes=yes, interactive=interactive), **fields)

    def place(self, subtask: SubTask, spawner: Optional[str] = None, timeout: float = 30.0) -> str:
        """Offer until claimed (by `spawner` if given), then assign; returns the spawner node."""
        offer_id = f"of-{subtask.subtask_id}-{next(_ids)}"
        offer = SubTaskOffer(task_id=subtask.parent_task_id, subtask_id=subtask.subtask_id,
                             offer_id=offer_id, subtask=subtask)
        deadline = time.monotonic() + timeout
        while True:
            self.planner.publish(offer)
            try:
                claims = self.seen.wait("SubTaskClaim", lambda m: m.offer_id == offer_id and
                                        (spawner is None or m.spawner == spawner), timeout=0.5)
                break
            except TimeoutError:
                if time.monotonic() > deadline:
                    raise
        node = claims[0].spawner
        self.planner.send(SubTaskAssign(task_id=subtask.parent_task_id,
                                        subtask_id=subtask.subtask_id, offer_id=offer_id,
                                        spawner=node, subtask=subtask), consumers=("spawner",))
        return node

    def outcome(self, subtask: SubTask, timeout: float = 60.0):
        return self.seen.wait("SubTaskOutcome", lambda m: m.subtask_id == subtask.subtask_id,
                              timeout=timeout)[0]

    def exited(self, subtask: SubTask, timeout: float = 30.0):
        return self.seen.wait("EffectorExited", lambda m: m.subtask_id == subtask.subtask_id,
                              timeout=timeout)[0]

    def run(self, subtask: SubTask, timeout: float = 60.0):
        self.place(subtask)
        return self.outcome(subtask, timeout)

    # -- teardown -----------------------------------------------------------------------------
    def close(self) -> None:
        for node in list(self.spawners):
            try:
                self.stop_spawner(node)
            except Exception:
                pass
        for client in self.clients:
            client.stop()
        stop_process(self.bus)
        self.llm.stop()
        shutil.rmtree(self.root, ignore_errors=True)
