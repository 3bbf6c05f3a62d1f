"""The `auditor` process: R6, the independent observer whose principal is the operator (DESIGN §8).

It watches every bus message through a plain SUB socket — a socket that cannot publish, so
non-participation is structural — and its BusClient does nothing but heartbeat (plus the client's
self-addressed readiness probe at start). It reports to the operator only: every
`audit_report_interval_s` to `audit/reports/` (window statistics, then reset) and on demand through
a unix socket in the run dir (mode 0600), which the bus never sees. Findings:

* boundary violations — a message whose (sender role, receiver) pair is not in the catalogue's
  from→to table (protocol/routes.py), an AuditReport on the bus, or the auditor itself publishing;
* convergence failures — a worsening gap (PlanDirective grad_l > ε), GGS thrashing (break_symmetry
  rounds in a row without D improving), correction thrashing (ReplanRequest correction_count);
* role drift — a role's window statistics (validator pass rate, executor tool-failure rate, replan
  rate, LLM latency and error rate) against that role's own rolling baseline of past windows;
* bus gaps — growth of the per-sender gap, lost-work and rejected-frame counters in heartbeats, the
  tap's capture losses, and gaps in the auditor's own view;
* missing roles — expected (supervisord.conf) instances silent for `missing_after_s`, and episodes
  of silence that ended within the window.
* missing hosts — a worker host (heartbeats naming another host) whose every process has been
  silent for `missing_after_s`: its link is down or it died; episodes that ended are kept too.

`AuditState` is the pure logic (no sockets, no clock of its own); `AuditorService` wires it to the
bus, the timers, the operator socket and the report files.
"""
from __future__ import annotations

import json
import logging
import os
import queue
import secrets
import socket
import threading
import time
from collections import Counter, OrderedDict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

import zmq

from protocol import curve
from protocol.bus import BusClient
from protocol.bus.common import Gather
from protocol.envelope import Envelope, ProtocolError, decode, parse_body, stream_of
from protocol.messages import AuditReport
from protocol.routes import ANY, ROLES, ROUTES, SELF, allowed
from protocol.settings import Settings
from protocol.signing import signer_for
from services.runtime.role import run_role

from .operator import socket_path

log = logging.getLogger("artoo.auditor")

EPS = 1e-9
# metric -> (unit, which direction is a degradation)
METRICS = {
    "pass_rate": ("rate", -1),          # agentval: matched / judged subtasks
    "tool_failure_rate": ("rate", +1),  # executor: failed / all tool calls
    "replan_rate": ("rate", +1),        # metaval: ReplanRequest / (ReplanRequest + OutcomeSummary)
    "llm_error_rate": ("rate", +1),     # any LLM role: failed calls / calls
    "llm_latency_ms": ("latency", +1),  # any LLM role: mean latency per call
}
_TASK_TYPES = ("UserRequest", "TaskSpec", "DispatchManifest")
_PARSED = {"PlanDirective", "ReplanRequest", "OutcomeSummary", "SubTaskOutcome", "ExecutionResult",
           "LlmUsage", "Heartbeat", "FinalResult"}


def boundary_problem(env: Envelope) -> Optional[str]:
    """Why this message breaks the catalogue's from→to table, or None when it is allowed."""
    if env.type == "AuditReport":
        return "AuditReport belongs on the operator socket, never on the bus"
    if env.sender == "auditor" and env.type != "Heartbeat" and not (
            env.type == "Hello" and env.to == SELF):
        return f"the auditor published {env.type} (it may only heartbeat)"
    route = ROUTES.get(env.type)
    if route is None:
        return f"{env.type} is not in the catalogue"
    who = env.sender if env.sender in ROLES else f"unknown role {env.sender!r}"
    if env.to is None:
        # a broadcast (or a work message for several consumers): the sender must be one that may
        # send this type at all
        if not any(frm in (env.sender, ANY) for frm, _ in route.pairs):
            senders = sorted({frm for frm, _ in route.pairs})
            return f"{who} may not send {env.type} (allowed senders: {', '.join(senders)})"
        return None
    if not allowed(env.type, env.sender, env.to):
        pairs = ", ".join(f"{f}→{t}" for f, t in route.pairs)
        return f"{who}→{env.to} is not a route for {env.type} (allowed: {pairs})"
    return None


@dataclass
class _Metric:
    total: float = 0.0
    n: int = 0

    def add(self, value: float) -> None:
        self.total += value
        self.n += 1

    @property
    def mean(self) -> float:
        return self.total / self.n if self.n else 0.0


@dataclass
class _TaskTrack:
    losses: list = field(default_factory=list)   # (round, L, D, grad_l, directive)
    last_d: Optional[float] = None
    thrash_streak: int = 0
    touched: float = 0.0


@dataclass
class _Window:
    start: float
    messages: int = 0
    tasks: set = field(default_factory=set)
    by_role: dict = field(default_factory=dict)          # role -> Counter(type)
    invalid: Counter = field(default_factory=Counter)    # sender role -> bodies failing schema
    violations: list = field(default_factory=list)
    convergence: list = field(default_factory=list)
    episodes: list = field(default_factory=list)         # missing-role episodes that ended
    host_episodes: list = field(default_factory=list)    # missing-host episodes that ended
    gaps: dict = field(default_factory=dict)             # (kind, receiver, sender) -> entry
    metrics: dict = field(default_factory=dict)          # (role, metric) -> _Metric
    trends: Counter = field(default_factory=Counter)
    corrections: int = 0
    restarts: Counter = field(default_factory=Counter)
    finals: Counter = field(default_factory=Counter)
    omitted: Counter = field(default_factory=Counter)


class AuditState:
    """Everything the auditor knows; fed envelopes and clock ticks, asked for reports."""

    def __init__(self, settings: Settings, expected: list[tuple[str, int]], now: float,
                 baseline: dict | None = None, node: str = ""):
        self.s = settings
        self.signer = signer_for(settings)  # unsigned and forged frames are counted, not observed
        self.expected = list(expected)
        self.started_at = now
        self.node = node
        self.window = _Window(start=now)
        self.baseline: dict[str, dict[str, list]] = baseline or {}   # role -> metric -> [means]
        self.tasks: OrderedDict[str, _TaskTrack] = OrderedDict()
        self.beats: dict[tuple[str, int], tuple[float, str]] = {}    # (role, inst) -> (t, node)
        self.missing: dict[tuple[str, int], dict] = {}
        self.host = settings.host
        self.hosts: dict[str, dict] = {}      # worker host -> {"last", "roles", "nodes"}
        self.missing_hosts: dict[str, dict] = {}
        self.counters: dict[tuple[str, str, str], int] = {}          # last cumulative values
        self.seqs: OrderedDict[tuple[str, bytes], int] = OrderedDict()
        self.total_messages = 0
        self.errors = 0
        self.first_message_at: Optional[float] = None

    # -- intake ---------------------------------------------------------------------------------
    def observe_frames(self, frames: list[bytes], now: float) -> None:
        """One raw bus message; never raises (a bad frame is counted, not fatal)."""
        try:
            topic, env = decode(frames, self.s.max_frame_bytes, self.signer)
        except ProtocolError as exc:  # a frame nobody on the bus can read (or may: unsigned)
            self._gap("undecodable", self.node or "auditor", exc.reason, 1, now)
            return
        try:
            self._own_gap_check(topic, env, now)
            self.observe(env, now)
        except Exception:
            self.errors += 1
            log.exception("auditor failed on a %s from %s", env.type, env.sender)

    def _own_gap_check(self, topic: bytes, env: Envelope, now: float) -> None:
        key = (env.node, stream_of(topic))
        last = self.seqs.get(key)
        if last is not None and env.seq > last + 1:
            self._gap("seq_gap", self.node or "auditor", env.node, env.seq - last - 1, now)
        if last is None or env.seq > last:
            self.seqs[key] = env.seq
            self.seqs.move_to_end(key)
            if len(self.seqs) > 20_000:
                self.seqs.popitem(last=False)

    def observe(self, env: Envelope, now: float) -> None:
        w = self.window
        w.messages += 1
        self.total_messages += 1
        if self.first_message_at is None:
            self.first_message_at = now
        role = env.sender if env.sender in w.by_role or len(w.by_role) < 256 else "(other)"
        w.by_role.setdefault(role, Counter())[env.type] += 1
        problem = boundary_problem(env)
        if problem:
            self._finding(w.violations, "boundary_violations", {
                "time": env.ts, "observed_at": now, "type": env.type, "sender": env.sender,
                "node": env.node, "to": env.to, "task": env.task, "id": env.id,
                "reason": problem})
        if env.type in _TASK_TYPES and env.task not in ("-", ""):
            w.tasks.add(env.task)
        if env.type not in _PARSED:
            return
        try:
            msg = parse_body(env)
        except ProtocolError:
            w.invalid[env.sender] += 1
            return
        handler = getattr(self, f"_on_{env.type}", None)
        if handler:
            handler(env, msg, now)

    # -- per type -------------------------------------------------------------------------------
    def _task(self, task_id: str, now: float) -> _TaskTrack:
        track = self.tasks.get(task_id)
        if track is None:
            track = self.tasks[task_id] = _TaskTrack()
            if len(self.tasks) > 10_000:
                self.tasks.popitem(last=False)
        track.touched = now
        self.tasks.move_to_end(task_id)
        return track

    def _on_PlanDirective(self, env, msg, now) -> None:
        eps = self.s.ggs_epsilon
        track = self._task(msg.task_id, now)
        d = msg.loss.D
        track.losses.append((msg.replan_round, msg.loss.L, d, msg.grad_l, msg.directive))
        del track.losses[:-20]
        trend = "worsening" if msg.grad_l > eps else "improving" if msg.grad_l < -eps else "stable"
        self.window.trends[trend] += 1
        base = {"time": env.ts, "task": msg.task_id, "round": msg.replan_round,
                "directive": msg.directive, "grad_l": round(msg.grad_l, 4),
                "L": round(msg.loss.L, 4), "D": round(d, 4),
                "trend": [round(x[1], 4) for x in track.losses]}
        if trend == "worsening":
            self._finding(self.window.convergence, "convergence_failures",
                          {"kind": "worsening_gap", **base,
                           "detail": f"∇L = {msg.grad_l:+.3f} > ε = {eps}: the gap grew this round"})
        if msg.directive == "break_symmetry" and (track.last_d is None or d >= track.last_d - EPS):
            track.thrash_streak += 1
        else:
            track.thrash_streak = 0
        if track.thrash_streak >= self.s.audit_thrash_rounds:
            self._finding(self.window.convergence, "convergence_failures",
                          {"kind": "ggs_thrashing", **base, "streak": track.thrash_streak,
                           "detail": f"{track.thrash_streak} break_symmetry rounds in a row "
                                     f"without D improving"})
        track.last_d = d

    def _on_ReplanRequest(self, env, msg, now) -> None:
        self.window.corrections += msg.correction_count
        self._metric(env.sender, "replan_rate", 1.0)
        if msg.correction_count >= self.s.audit_correction_threshold:
            self._finding(self.window.convergence, "convergence_failures", {
                "kind": "correction_thrashing", "time": env.ts, "task": msg.task_id,
                "round": msg.plan_round, "correction_count": msg.correction_count,
                "detail": f"{msg.correction_count} corrections in one round "
                          f"(threshold {self.s.audit_correction_threshold})"})

    def _on_OutcomeSummary(self, env, msg, now) -> None:
        self._metric(env.sender, "replan_rate", 0.0)

    def _on_SubTaskOutcome(self, env, msg, now) -> None:
        if env.sender == "agentval":   # the dispatcher's failed outcomes for dead effectors
            self._metric("agentval", "pass_rate", 1.0 if msg.status == "matched" else 0.0)

    def _on_ExecutionResult(self, env, msg, now) -> None:
        for call in msg.tool_calls:
            self._metric(env.sender, "tool_failure_rate", 1.0 if call.error else 0.0)

    def _on_LlmUsage(self, env, msg, now) -> None:
        role = msg.role or env.sender
        self._metric(role, "llm_latency_ms", float(msg.latency_ms))
        self._metric(role, "llm_error_rate", 0.0 if msg.ok else 1.0)

    def _on_FinalResult(self, env, msg, now) -> None:
        self.window.finals[msg.directive] += 1
        self.tasks.pop(msg.task_id, None)

    def _on_Heartbeat(self, env, hb, now) -> None:
        if hb.host and hb.host != self.host:
            self._remote_beat(hb, now)
        else:
            self._local_beat(hb, now)
        # cumulative counters in the heartbeat: count only growth since we last looked
        fresh = hb.started_at >= self.started_at
        for sender, total in hb.gaps.items():
            self._counter("seq_gap", hb.node, sender, total, fresh, now)
        self._counter("work_lost", hb.node, "", hb.lost, fresh, now)
        rejected = sum(hb.rejected.values())
        self._counter("rejected", hb.node, "", rejected, fresh, now)
        lost = hb.info.get("capture_lost") if hb.role == "tap" else None
        if isinstance(lost, int):
            self._counter("capture_lost", hb.node, "", lost, fresh, now)

    def _remote_beat(self, hb, now: float) -> None:
        """A worker host's process: the host is what is expected, learnt from its first beat."""
        h = self.hosts.setdefault(hb.host, {"last": now, "roles": set(), "first_seen": now})
        h["last"] = now
        h["roles"].add(f"{hb.role}[{hb.instance}]")
        episode = self.missing_hosts.pop(hb.host, None)
        if episode is not None:
            episode.update(state="recovered", back_at=now,
                           silent_s=round(now - episode["last_seen"], 3))
            self._finding(self.window.host_episodes, "missing_hosts", episode)

    def _local_beat(self, hb, now: float) -> None:
        key = (hb.role, hb.instance)
        prev = self.beats.get(key)
        if prev is not None and prev[1] != hb.node:
            self.window.restarts[hb.role] += 1
        self.beats[key] = (now, hb.node)
        episode = self.missing.pop(key, None)
        if episode is not None:
            episode.update(state="recovered", back_at=now,
                           silent_s=round(now - (episode["last_seen"] or self.started_at), 3),
                           restarted=episode["node"] != hb.node, new_node=hb.node)
            self._finding(self.window.episodes, "missing_roles", episode)

    # -- helpers --------------------------------------------------------------------------------
    def _counter(self, kind: str, receiver: str, sender: str, total: int, fresh: bool,
                 now: float) -> None:
        key = (kind, receiver, sender)
        prev = self.counters.get(key)
        self.counters[key] = total
        if prev is None:
            delta = total if fresh else 0   # counted before we were watching: not this window
        else:
            delta = total - prev if total >= prev else total
        if delta > 0:
            self._gap(kind, receiver, sender, delta, now)
        if len(self.counters) > 50_000:
            self.counters.clear()

    def _gap(self, kind: str, receiver: str, sender: str, count: int, now: float) -> None:
        key = (kind, receiver, sender)
        entry = self.window.gaps.get(key)
        if entry is None:
            if len(self.window.gaps) >= self.s.audit_max_findings:
                self.window.omitted["bus_gaps"] += 1
                return
            entry = self.window.gaps[key] = {"kind": kind, "receiver": receiver,
                                             "sender": sender or None, "count": 0,
                                             "first_at": now, "last_at": now}
        entry["count"] += count
        entry["last_at"] = now

    def _metric(self, role: str, metric: str, value: float) -> None:
        m = self.window.metrics.get((role, metric))
        if m is None:
            m = self.window.metrics[(role, metric)] = _Metric()
        m.add(value)

    def _finding(self, target: list, name: str, entry: dict) -> None:
        if len(target) >= self.s.audit_max_findings:
            self.window.omitted[name] += 1
        else:
            target.append(entry)

    # -- clock ----------------------------------------------------------------------------------
    def tick(self, now: float) -> None:
        """Open a missing-role episode for every expected instance silent too long."""
        limit = self.s.missing_after_s
        for key in self.expected:
            if key in self.missing:
                continue
            seen = self.beats.get(key)
            last = seen[0] if seen else None
            if now - (last if last is not None else self.started_at) > limit:
                self.missing[key] = {"role": key[0], "instance": key[1], "state": "missing",
                                     "last_seen": last, "detected_at": now,
                                     "node": seen[1] if seen else None}
        for host, h in self.hosts.items():
            if host not in self.missing_hosts and now - h["last"] > limit:
                self.missing_hosts[host] = {"host": host, "state": "missing",
                                            "last_seen": h["last"], "detected_at": now,
                                            "roles": sorted(h["roles"])}
        for task_id in [t for t, tr in self.tasks.items()
                        if now - tr.touched > max(3600.0, self.s.task_deadline_s * 2)]:
            del self.tasks[task_id]

    # -- reporting ------------------------------------------------------------------------------
    def _drift(self) -> tuple[list, dict]:
        alerts, stats = [], {}
        s = self.s
        for (role, metric), m in sorted(self.window.metrics.items()):
            history = self.baseline.get(role, {}).get(metric, [])
            base = sum(history) / len(history) if history else None
            stats.setdefault(role, {})[metric] = {
                "value": round(m.mean, 4), "samples": m.n,
                "baseline": round(base, 4) if base is not None else None,
                "baseline_windows": len(history)}
            if base is None or m.n < s.audit_drift_min_samples:
                continue
            unit, worse = METRICS[metric]
            if unit == "rate":
                drifted = (m.mean - base) * worse >= s.audit_drift_rate_delta
            else:
                drifted = m.mean >= base * s.audit_drift_latency_ratio and m.mean - base >= 1.0
            if drifted:
                alerts.append({"role": role, "metric": metric, "value": round(m.mean, 4),
                               "baseline": round(base, 4), "samples": m.n,
                               "baseline_windows": len(history),
                               "direction": "up" if m.mean > base else "down"})
        return alerts, stats

    def report(self, trigger: str, now: float) -> AuditReport:
        w = self.window
        alerts, metric_stats = self._drift()
        role_stats: dict[str, Any] = {}
        for role, counts in sorted(w.by_role.items()):
            role_stats[role] = {"messages": sum(counts.values()), "by_type": dict(counts)}
        for role, metrics in metric_stats.items():
            role_stats.setdefault(role, {"messages": 0, "by_type": {}})["metrics"] = metrics
        for role, n in w.restarts.items():
            role_stats.setdefault(role, {"messages": 0, "by_type": {}})["restarts"] = n
        for sender, n in w.invalid.items():
            role_stats.setdefault(sender, {"messages": 0, "by_type": {}})["invalid"] = n
        missing = [dict(e) for e in self.missing.values()] + [dict(e) for e in w.episodes]
        return AuditReport(
            report_id=secrets.token_hex(6), trigger=trigger, window_start=w.start,
            window_end=now, tasks_observed=len(w.tasks), messages_observed=w.messages,
            boundary_violations=list(w.violations), convergence_failures=list(w.convergence),
            drift_alerts=alerts, bus_gaps=sorted(w.gaps.values(), key=lambda g: g["first_at"]),
            missing_roles=missing, role_stats=role_stats, gap_trends=dict(w.trends),
            missing_hosts=[dict(e) for e in self.missing_hosts.values()] +
            [dict(e) for e in w.host_episodes],
            corrections=w.corrections, final_results=dict(w.finals), omitted=dict(w.omitted),
            auditor={"node": self.node, "pid": os.getpid(), "started_at": self.started_at,
                     "messages_total": self.total_messages, "errors": self.errors,
                     "observing_since": self.first_message_at})

    def roll(self, now: float) -> AuditReport:
        """The periodic report: snapshot the window, fold it into the baselines, start anew."""
        rep = self.report("periodic", now)
        keep = max(1, self.s.audit_baseline_windows)
        for (role, metric), m in self.window.metrics.items():
            if m.n >= self.s.audit_drift_min_samples:
                history = self.baseline.setdefault(role, {}).setdefault(metric, [])
                history.append(m.mean)
                del history[:-keep]
        self.window = _Window(start=now)
        return rep


# ----------------------------------------------------------------------------------------------
# the process
# ----------------------------------------------------------------------------------------------

def reports_dir(settings: Settings) -> Path:
    return settings.audit_dir / "reports"


class AuditorService:
    """Observer thread (SUB socket, timers, report requests) + operator socket thread."""

    def __init__(self, settings: Settings, expected: list[tuple[str, int]], node: str = ""):
        self.s = settings
        self.reports = reports_dir(settings)
        self.reports.mkdir(parents=True, exist_ok=True, mode=0o700)
        baseline = self._load_baseline()
        self.state = AuditState(settings, expected, time.time(), baseline, node)
        self._requests: queue.SimpleQueue = queue.SimpleQueue()
        self._wake_r, self._wake_w = os.pipe()
        os.set_blocking(self._wake_r, False)
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._ctx = zmq.Context()
        self._sub = self._ctx.socket(zmq.SUB)
        self._sub.setsockopt(zmq.RCVHWM, settings.hwm)
        self._sub.setsockopt(zmq.LINGER, 0)
        self._sub.setsockopt(zmq.RECONNECT_IVL, 50)
        self._sub.setsockopt(zmq.RECONNECT_IVL_MAX, 1000)
        if curve.is_tcp(settings.endpoint("xpub")):
            curve.apply_client(self._sub, settings)
        self._sub.setsockopt(zmq.SUBSCRIBE, b"")
        self._sub.connect(settings.endpoint("xpub"))
        self._server: socket.socket | None = None
        self.reports_written = 0

    # -- lifecycle ------------------------------------------------------------------------------
    def start(self) -> "AuditorService":
        self._server = self._listen()
        for target, name in ((self._observe_loop, "auditor-observe"),
                             (self._serve_operator, "auditor-operator")):
            t = threading.Thread(target=target, name=name, daemon=True)
            t.start()
            self._threads.append(t)
        return self

    def close(self) -> None:
        self._stop.set()
        os.write(self._wake_w, b"x")
        if self._server is not None:
            try:
                self._server.close()
            except OSError:
                pass
        for t in self._threads:
            t.join(5)
        try:
            socket_path(self.s).unlink()
        except FileNotFoundError:
            pass
        self._sub.close(0)
        self._ctx.term()
        os.close(self._wake_r)
        os.close(self._wake_w)

    def info(self) -> dict:
        st = self.state
        return {"messages": st.total_messages, "window_messages": st.window.messages,
                "missing": len(st.missing), "reports": self.reports_written,
                "errors": st.errors}

    # -- the observer ---------------------------------------------------------------------------
    def _observe_loop(self) -> None:
        poller = zmq.Poller()
        poller.register(self._sub, zmq.POLLIN)
        poller.register(self._wake_r, zmq.POLLIN)
        next_tick = time.monotonic() + 0.25
        next_report = time.monotonic() + self.s.audit_report_interval_s
        gather = Gather(self.s.observer_gather_ms / 1000)   # off every task's path
        while not self._stop.is_set():
            now_m = time.monotonic()
            timeout = max(0.0, min(next_tick, next_report) - now_m)
            events = dict(poller.poll(int(timeout * 1000) + 1))
            if self._sub in events:
                gather.before_drain()
                gather.after_drain(self._drain(limit=2000) >= 2000)
            if self._wake_r in events:
                try:
                    os.read(self._wake_r, 4096)
                except BlockingIOError:
                    pass
            self._answer_requests()
            now_m = time.monotonic()
            if now_m >= next_tick:
                self.state.tick(time.time())
                next_tick = now_m + 0.25
            if now_m >= next_report:
                next_report = now_m + self.s.audit_report_interval_s
                self._periodic()

    def _drain(self, limit: int, deadline: float | None = None) -> int:
        n = 0
        recv = self._sub.recv_multipart
        while n < limit:
            try:
                frames = recv(zmq.NOBLOCK)
            except zmq.Again:
                break
            self.state.observe_frames(frames, time.time())
            n += 1
            if deadline is not None and n % 1000 == 0 and time.monotonic() > deadline:
                break
        return n

    def _answer_requests(self) -> None:
        while True:
            try:
                done, holder = self._requests.get_nowait()
            except queue.Empty:
                return
            try:
                # barrier: everything already delivered to us is in the report
                self._drain(limit=500_000, deadline=time.monotonic() + 1.5)
                now = time.time()
                self.state.tick(now)
                rep = self.state.report("on_demand", now)
                self._persist(rep)
                holder.append(rep)
            except Exception as exc:
                log.exception("on-demand report failed")
                holder.append(exc)
            finally:
                done.set()

    def _periodic(self) -> None:
        try:
            now = time.time()
            self.state.tick(now)
            rep = self.state.roll(now)
            self._persist(rep)
            self._save_baseline()
            log.info("periodic report %s: %d messages, %d violations, %d convergence, %d drift, "
                     "%d gaps, %d missing", rep.report_id, rep.messages_observed,
                     len(rep.boundary_violations), len(rep.convergence_failures),
                     len(rep.drift_alerts), len(rep.bus_gaps), len(rep.missing_roles))
        except Exception:
            log.exception("periodic report failed")

    def request_report(self, timeout: float = 2.5) -> AuditReport:
        done, holder = threading.Event(), []
        self._requests.put((done, holder))
        os.write(self._wake_w, b"r")
        if not done.wait(timeout):
            raise TimeoutError("the auditor did not build a report in time")
        if isinstance(holder[0], Exception):
            raise holder[0]
        return holder[0]

    # -- files ----------------------------------------------------------------------------------
    def _persist(self, rep: AuditReport) -> Path:
        stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime(rep.window_end))
        path = self.reports / f"{stamp}-{rep.trigger}-{rep.report_id}.json"
        tmp = path.with_suffix(".tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(rep.model_dump_json(indent=1))
        os.replace(tmp, path)
        self.reports_written += 1
        return path

    def _load_baseline(self) -> dict:
        try:
            data = json.loads((self.reports / "baseline.json").read_text())
            return data if isinstance(data, dict) else {}
        except (OSError, ValueError):
            return {}

    def _save_baseline(self) -> None:
        tmp = self.reports / "baseline.json.tmp"
        tmp.write_text(json.dumps(self.state.baseline))
        os.replace(tmp, self.reports / "baseline.json")

    # -- the operator socket --------------------------------------------------------------------
    def _listen(self) -> socket.socket:
        path = socket_path(self.s)
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        try:
            path.unlink()
        except FileNotFoundError:
            pass
        server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        old = os.umask(0o177)
        try:
            server.bind(str(path))
        finally:
            os.umask(old)
        os.chmod(path, 0o600)
        server.listen(8)
        server.settimeout(0.5)
        return server

    def _serve_operator(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self._server.accept()
            except socket.timeout:
                continue
            except OSError:
                if self._stop.is_set():
                    return
                continue
            with conn:
                try:
                    self._handle_operator(conn)
                except Exception as exc:
                    log.warning("operator request failed: %s", exc)

    def _handle_operator(self, conn: socket.socket) -> None:
        conn.settimeout(2.0)
        raw = b""
        while not raw.endswith(b"\n") and len(raw) < 4096:
            chunk = conn.recv(4096)
            if not chunk:
                break
            raw += chunk
        try:
            cmd = json.loads(raw or b"{}").get("cmd", "report")
        except (ValueError, AttributeError):
            cmd = None
        if cmd == "report":
            try:
                reply = {"ok": True, "report": self.request_report().model_dump(mode="json")}
            except Exception as exc:
                reply = {"ok": False, "error": str(exc)}
        elif cmd == "ping":
            reply = {"ok": True, "info": self.info()}
        else:
            reply = {"ok": False, "error": f"unknown command {raw[:40]!r}; try report or ping"}
        conn.sendall(json.dumps(reply).encode() + b"\n")


def setup(client: BusClient, settings: Settings) -> AuditorService:
    from services.runtime.daemon import expected_instances
    service = AuditorService(settings, expected_instances(), node=client.node).start()
    client.heartbeat_info = service.info
    return service


def main() -> int:
    return run_role("auditor", setup)


if __name__ == "__main__":
    raise SystemExit(main())
