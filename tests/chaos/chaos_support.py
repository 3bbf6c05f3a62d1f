"""The chaos/soak driver: the full daemon (`artoo up` on a temp home) with the scripted LLM, a test
client that submits tasks as the operator would (role "user": UserRequest, acked FinalResult), and
fault injectors (SIGKILL / SIGSTOP of a role's process, bursts, a slow subscriber, malformed frames,
invalid LLM replies).

Nothing here decides an outcome by time: a task is *finished* when its FinalResult arrived, *late*
when that was after its deadline (+ the watchdog's grace), *lost* when none arrived at all by the
time the run gave up on it (deadline + a generous margin), *duplicated* when more than one distinct
FinalResult envelope id arrived for it (a GGS re-send after a restart re-uses the id: one).
"""
from __future__ import annotations

import json
import os
import random
import shutil
import signal
import tempfile
import threading
import time
import uuid
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgpack
import psutil
import zmq

from protocol.bus import BusClient
from protocol.messages import Megram, MemoryWrite, RunOptions, UserRequest
from protocol.settings import load_settings
from replies_pipeline import (INVALID_JSON, PROSE, accept, effector_responder, perception, plan,
                              subtask)
from scripted_llm import Delay, Http, ScriptedLLM
from services.runtime.taskstate import EXPIRE_AFTER_DEADLINE_S

DEADLINE_S = float(os.environ.get("ARTOO_CHAOS_DEADLINE_S", "45"))
LATE_GRACE_S = 10.0        # FinalResult may trail deadline_at by a watchdog tick + delivery
GIVE_UP_MARGIN_S = 60.0    # after deadline + this, a task with no FinalResult is counted lost
LLM_TIMEOUT_S = 5.0

LLM_FAULTS = {
    "prose": PROSE,
    "truncated_json": INVALID_JSON,
    "wrong_schema": {"answer": 42, "note": "not the schema you asked for"},
    "http_500": Http(500),
    "timeout": Delay(LLM_TIMEOUT_S + 2.0, "late"),
}


@dataclass
class Task:
    task_id: str
    phase: str
    submitted: float
    request_id: str = ""
    finals: dict = field(default_factory=dict)      # FinalResult envelope id -> (arrived, directive)

    @property
    def first_final(self) -> float | None:
        return min((t for t, _ in self.finals.values()), default=None)


class Chaos:
    """One daemon + the test-side clients. Thread-safe counters; everything measured, not assumed."""

    def __init__(self, root: Path, llm: ScriptedLLM, settings):
        self.root = root
        self.llm = llm
        self.settings = settings
        self.lock = threading.Condition()
        self.tasks: dict[str, Task] = {}
        self.faults: list[dict] = []
        self.effector_pids: list[int] = []
        self.memory_acked: list[str] = []
        self.memory_failed = 0
        self.llm_fault_plan: dict[tuple[str, str], Any] = {}   # (role, task) -> fault reply
        self.llm_faults_served: list[tuple[str, str, str]] = []
        self._script_llm()
        self.user = BusClient("user", settings=settings, heartbeat=False)
        self.user.on("FinalResult", self._final, ack=True,
                     when=lambda env, _m: env.task in self.tasks)
        self.user.on("EffectorStarted", self._effector_started)
        self.user.start(timeout=30)
        # GGS is the one role that writes memory; this client speaks as it for the write checks
        self.writer = BusClient("ggs", settings=settings, heartbeat=False)
        self.writer.start(timeout=30)

    # -- scripted LLM --------------------------------------------------------------------------
    def _script_llm(self) -> None:
        executor, agentval = effector_responder("echo chaos-ok", "chaos-ok", "printed ok")
        replies = {
            "perceiver": lambda req: perception("print ok for the chaos run", ["ok printed"]),
            "planner": lambda req: plan(subtask(f"print ok {req.task}", ["printed ok"])),
            "metaval": lambda req: accept("ok printed", merged_output="chaos-ok"),
            "executor": executor, "agentval": agentval,
        }
        for role, fn in replies.items():
            self.llm.on(role, self._faulty(role, self._paced(fn)))

    @staticmethod
    def _paced(fn):
        """Replies take 0.1–0.6 s, like a (fast) model: tasks stay in flight long enough for a
        fault injected at a random moment to land in the middle of one."""
        def respond(req):
            return Delay(random.uniform(0.1, 0.6), fn(req))
        return respond

    def _faulty(self, role: str, fn):
        def respond(req):
            with self.lock:
                fault = self.llm_fault_plan.pop((role, req.task), None)
            if fault is not None:
                name, reply = fault
                self.llm_faults_served.append((role, req.task, name))
                return reply
            return fn(req)
        return respond

    # -- bus handlers --------------------------------------------------------------------------
    def _final(self, env, msg) -> None:
        with self.lock:
            task = self.tasks.get(env.task)
            if task is not None and env.id not in task.finals:
                task.finals[env.id] = (time.time(), msg.directive)
            self.lock.notify_all()

    def _effector_started(self, env, msg) -> None:
        with self.lock:
            self.effector_pids.append(msg.pid)
            self.lock.notify_all()

    # -- submitting ----------------------------------------------------------------------------
    def submit(self, phase: str, llm_fault: tuple[str, str] | None = None) -> Task:
        task_id = f"chaos-{phase}-{uuid.uuid4().hex[:8]}"
        task = Task(task_id, phase, time.time())
        with self.lock:
            self.tasks[task_id] = task
            if llm_fault is not None:
                role, name = llm_fault
                self.llm_fault_plan[(role, task_id)] = (name, LLM_FAULTS[name])
        task.request_id = self.user.send(UserRequest(
            task_id=task_id, text=f"print ok ({phase})",
            options=RunOptions(deadline_s=DEADLINE_S)))
        self.write_memory(task_id)
        return task

    def write_memory(self, task_id: str) -> None:
        """One acknowledged MemoryWrite per task: its Megram must be in LMDB afterwards."""
        megram = Megram(id=uuid.uuid4().hex, space="intent:chaos", entity="env:chaos",
                        content=f"chaos write for {task_id}", state="chaos", f=0.5, sigma=1.0,
                        k=1.0, created_at=time.time())

        def done(ok: bool, mid=megram.id) -> None:
            with self.lock:
                if ok:
                    self.memory_acked.append(mid)
                else:
                    self.memory_failed += 1
        self.writer.send(MemoryWrite(task_id=task_id, megrams=[megram]), on_done=done)

    def in_flight(self, phase: str | None = None) -> int:
        with self.lock:
            return sum(1 for t in self.tasks.values()
                       if not t.finals and (phase is None or t.phase == phase)
                       and time.time() < t.submitted + DEADLINE_S + GIVE_UP_MARGIN_S)

    def run_batch(self, phase: str, n: int, concurrency: int, on_submitted=None,
                  llm_faults: list | None = None) -> list[Task]:
        """Submit n tasks keeping at most `concurrency` in flight; return when all have ended or
        been given up on. on_submitted(i) runs after the i-th submission (fault triggers)."""
        tasks = []
        for i in range(n):
            with self.lock:
                self.lock.wait_for(lambda: self.in_flight() < concurrency, timeout=DEADLINE_S
                                   + GIVE_UP_MARGIN_S)
            fault = llm_faults[i] if llm_faults and i < len(llm_faults) else None
            tasks.append(self.submit(phase, fault))
            if on_submitted:
                on_submitted(i)
        self.wait_ended(tasks)
        return tasks

    def wait_ended(self, tasks: list[Task]) -> None:
        with self.lock:
            while True:
                now = time.time()
                open_ = [t for t in tasks if not t.finals
                         and now < t.submitted + DEADLINE_S + GIVE_UP_MARGIN_S]
                if not open_:
                    return
                self.lock.wait(1.0)

    # -- faults --------------------------------------------------------------------------------
    def record_fault(self, kind: str, target: str, **extra) -> dict:
        fault = {"kind": kind, "target": target, "at": time.time(),
                 "tasks_in_flight": self.in_flight(), **extra}
        with self.lock:
            self.faults.append(fault)
        return fault

    def processes(self) -> dict:
        from services.runtime import daemon
        return daemon.supervisor_processes(self.settings)

    def pick(self, program: str) -> tuple[tuple[str, int], int] | None:
        live = [(key, info["pid"]) for key, info in self.processes().items()
                if key[0] == program and info.get("statename") == "RUNNING" and info.get("pid")]
        return random.choice(live) if live else None

    def pick_running(self, program: str, timeout: float = 60.0):
        """A RUNNING process of the program; waits while a previous kill's restart is under way
        (two faults in a row on a one-process program must both land)."""
        deadline = time.monotonic() + timeout
        while True:
            picked = self.pick(program)
            if picked is not None or time.monotonic() > deadline:
                return picked
            time.sleep(0.2)  # polling supervisord's view; nothing to wait on instead

    def kill(self, program: str) -> dict | None:
        """SIGKILL one process of a program and measure how long supervisord takes to replace it."""
        if program == "effector":
            return self.kill_effector()
        picked = self.pick_running(program)
        if picked is None:
            return None
        key, pid = picked
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            return None
        fault = self.record_fault("sigkill", program, instance=key[1], pid=pid)
        t0 = time.monotonic()
        while time.monotonic() - t0 < 60:
            info = self.processes().get(key, {})
            if info.get("statename") == "RUNNING" and info.get("pid") not in (None, 0, pid):
                fault["restart_s"] = round(time.monotonic() - t0, 2)
                break
            time.sleep(0.2)
        return fault

    def kill_effector(self) -> dict | None:
        """SIGKILL a live effector (waiting for the next one to start if none is running)."""
        with self.lock:
            self.lock.wait_for(lambda: any(psutil.pid_exists(p) for p in self.effector_pids[-8:]),
                               timeout=30)
            candidates = [p for p in reversed(self.effector_pids) if psutil.pid_exists(p)]
        for pid in candidates:
            try:
                if "python" not in psutil.Process(pid).name().lower():
                    continue
                os.kill(pid, signal.SIGKILL)
            except (psutil.Error, ProcessLookupError):
                continue
            return self.record_fault("sigkill", "effector", pid=pid)
        return None

    def stop_cont(self, program: str, seconds: float = 5.0) -> dict | None:
        picked = self.pick_running(program)
        if picked is None:
            return None
        key, pid = picked
        os.kill(pid, signal.SIGSTOP)
        try:
            time.sleep(seconds)   # the fault itself is a pause of this length, not a handshake
        finally:
            os.kill(pid, signal.SIGCONT)
        return self.record_fault("sigstop", program, instance=key[1], pid=pid, paused_s=seconds)

    def garbage_frames(self) -> list[dict]:
        """Malformed and oversized frames straight onto the proxy's XSUB side."""
        ctx = zmq.Context.instance()
        sock = ctx.socket(zmq.PUB)
        sock.setsockopt(zmq.LINGER, 1000)
        sock.connect(self.settings.endpoint("xsub"))
        big = self.settings.max_frame_bytes + 1024
        good = {"v": 1, "id": uuid.uuid4().hex, "ts": time.time(), "type": "UserRequest",
                "from": "user", "node": "chaos-raw", "seq": 1, "task": "chaos-raw", "to": None,
                "corr": None, "reply_to": None, "trace": None, "body": {"text": 7}}
        cases = {
            "one_frame": [b"UserRequest/chaos-raw"],
            "three_frames": [b"UserRequest/x", b"a", b"b"],
            "not_msgpack": [b"UserRequest/x", b"\xc1\xc1 definitely not msgpack"],
            "wrong_version": [b"FinalResult/x", msgpack.packb({**good, "v": 99})],
            "unknown_type": [b"Nope/x", msgpack.packb({**good, "type": "Nope"})],
            "schema_invalid_body": [b"UserRequest/chaos-raw", msgpack.packb(good)],
            "oversized_envelope": [b"UserRequest/x", b"\x00" * big],
            "oversized_topic": [b"U" * 5000, msgpack.packb(good)],
        }
        time.sleep(0.3)  # PUB slow joiner: frames sent before the connect completes are dropped
        out = []
        for name, frames in cases.items():
            sock.send_multipart(frames)
            out.append(self.record_fault("bad_frame", name))
        sock.close()
        return out

    # -- end-of-run checks -----------------------------------------------------------------------
    def ggs_live_tasks(self) -> dict:
        """GGS heartbeats: live tasks per instance (0 everywhere once every task ended)."""
        seen: dict[int, dict] = {}
        got = threading.Event()
        probe = BusClient("user", settings=self.settings, heartbeat=False)

        def hb(env, m):
            if m.role == "ggs":
                seen[m.instance] = m.info
                if len(seen) >= self.settings_scale():
                    got.set()
        probe.on("Heartbeat", hb, task="ggs")
        probe.start(timeout=30)
        try:
            got.wait(30)
        finally:
            probe.stop()
        return seen

    def settings_scale(self) -> int:
        return int(os.environ.get("ARTOO_SCALE", "2"))

    def close(self) -> None:
        self.user.stop(drain_s=0.5)
        self.writer.stop(drain_s=0.5)


@contextmanager
def chaos_daemon(extra_env: dict[str, str] | None = None):
    """A temp home, the scripted LLM and `artoo up`; `artoo down` on exit (orphans reported)."""
    from services.runtime import daemon
    root = Path(tempfile.mkdtemp(prefix="at-chaos-", dir="/tmp"))
    (root / "home").mkdir()
    (root / "ws").mkdir()
    import pytest
    with pytest.MonkeyPatch.context() as mp, ScriptedLLM() as llm:
        values = {"ARTOO_HOME": str(root / "home"), "ARTOO_WORKSPACE": str(root / "ws"),
                  "ARTOO_SCALE": "2", "ARTOO_LLM_BACKOFF_S": "0.05", "ARTOO_LLM_RETRIES": "1",
                  "ARTOO_LLM_TIMEOUT_S": str(LLM_TIMEOUT_S),
                  "ARTOO_TASK_DEADLINE_S": str(DEADLINE_S),
                  "ARTOO_SUBTASK_DEADLINE_S": str(DEADLINE_S),
                  **llm.env(), **(extra_env or {})}
        for key, value in values.items():
            mp.setenv(key, value)
        mp.delenv("ARTOO_RUN_DIR", raising=False)
        settings = load_settings()
        settings.ensure_dirs()
        t0 = time.monotonic()
        daemon.up(settings, timeout_s=180)
        up_s = time.monotonic() - t0
        chaos = None
        result: dict = {"up_s": round(up_s, 1)}
        try:
            chaos = Chaos(root, llm, settings)
            yield chaos, result
        finally:
            if chaos is not None:
                chaos.close()
            t0 = time.monotonic()
            result["down_at"] = time.time()
            daemon.down(settings)
            result["down_s"] = round(time.monotonic() - t0, 1)
            result["orphans"] = [p.pid for p in daemon.our_processes(settings)]
            result["post_down"] = (post_down_checks(settings, chaos, result["down_at"])
                                   if chaos else {})
            if os.environ.get("ARTOO_CHAOS_KEEP") != "1":
                shutil.rmtree(root, ignore_errors=True)


def post_down_checks(settings, chaos: Chaos, down_at: float) -> dict:
    """After `artoo down`: memory writes in LMDB, audit log chain and coverage, state left over."""
    from auditor import log as audit_log
    from auditor.tap import log_dir
    from memory_server.layout import id_key
    from memory_server.store import MemoryStore
    out: dict = {}
    store = MemoryStore(settings.memory_path, readonly=True)
    try:
        with store.read() as txn:
            missing = [m for m in chaos.memory_acked
                       if txn.get(id_key(m), db=store.db["megrams"]) is None]
    finally:
        store.close()
    out["memory_acked"] = len(chaos.memory_acked)
    out["memory_missing"] = len(missing)
    out["memory_unacked"] = chaos.memory_failed
    res = audit_log.verify(log_dir(settings))
    out["audit_ok"], out["audit_records"], out["audit_reason"] = res.ok, res.records, res.reason
    ids, gaps = set(), 0
    for rec in audit_log.iter_records(log_dir(settings)):
        if rec.kind_name.upper() == "GAP":
            gaps += 1
            continue
        try:
            env = msgpack.unpackb(rec.payload, raw=False)
            ids.add(env.get("id"))
        except Exception:  # noqa: BLE001 - REPAIR records and the like carry no envelope
            continue
    expected = {t.request_id for t in chaos.tasks.values() if t.request_id}
    expected |= {fid for t in chaos.tasks.values() for fid in t.finals}
    out["audit_expected_ids"] = len(expected)
    out["audit_missing_ids"] = len(expected - ids)
    out["audit_gap_records"] = gaps
    state = Path(settings.home) / "state"
    leftover = {}
    for d in sorted(p for p in state.glob("*") if p.is_dir()):
        files = list(d.glob("*.json"))
        live = pending = 0
        for f in files:
            try:
                data = json.loads(f.read_text())
            except (OSError, ValueError):
                live += 1
                continue
            if data.get("kind") == "ended":
                continue       # a GGS tombstone: bounded, expires by TTL
            deadline = data.get("deadline_at") or (data.get("task") or {}).get("deadline_at") or 0
            if deadline and down_at < deadline + EXPIRE_AFTER_DEADLINE_S + 2.0:
                pending += 1   # still within its task's deadline when the daemon went down
            else:
                live += 1
        leftover[d.name] = {"files": len(files), "live": live, "pending_expiry": pending}
    out["state_files"] = leftover
    return out
