"""The `metrics` process: a Prometheus endpoint for the whole daemon (the observation plane;
traces: telemetry.py).

One exporter that derives every metric from what it sees on the bus, rather than a registry in each
process: artoo's processes are many and short-lived (an effector per subtask), and everything worth
counting already crosses the bus — LlmUsage per LLM call, the tool calls in each ExecutionResult
(with their Law 1 class), approvals, FinalResults, and each process's heartbeat with its rejected
frames, sequence gaps and unacknowledged work. So nothing is added to any other process, a crashed
effector loses nothing, and the figures agree with the audit log, which records the same messages.

Endpoint: http://ARTOO_METRICS_ADDR:ARTOO_METRICS_PORT/metrics (127.0.0.1:9464 by default; port 0
takes a free one); the port in use is written to `$ARTOO_RUN/metrics.port` for `artoo metrics`.
Counters count since this process started (Prometheus handles restarts); gauges are recomputed
from the latest heartbeats at each scrape.
"""
from __future__ import annotations

import logging
import os
import threading
import time
from collections import OrderedDict, deque
from pathlib import Path
from typing import Any

from prometheus_client import CollectorRegistry, Counter, generate_latest
from prometheus_client.core import GaugeMetricFamily

from protocol.bus import ALL, BusClient
from protocol.bus.common import Gather
from protocol.settings import Settings, load_settings

log = logging.getLogger("artoo.metrics")

ROLE = "metrics"
PORT_FILE = "metrics.port"
RATE_WINDOW_S = 10.0          # bus messages per second: over this window
FORGET_AFTER_S = 60.0         # a node not heard for this long leaves the gauges
LATE_FACTOR = 2.0             # a heartbeat more than this many intervals after the last is late


def port_file(settings: Settings) -> Path:
    return Path(settings.run_dir) / PORT_FILE


def _outcome(body: dict) -> str:
    status = body.get("status")
    if status:
        return str(status)
    return "unverified" if body.get("directive") in ("accept", "success") else "abandoned"


class Collector:
    """Turns bus envelopes (raw: bodies as received) into the metrics of one registry."""

    def __init__(self, settings: Settings, clock=time.time):
        self.settings = settings
        self.clock = clock
        self.lock = threading.Lock()
        self.registry = CollectorRegistry(auto_describe=True)
        r = self.registry
        self.tasks = Counter("artoo_tasks", "Tasks ended, by outcome (FinalResult)",
                             ["outcome"], registry=r)
        self.started = Counter("artoo_tasks_started", "Tasks requested (UserRequest)",
                               registry=r)
        self.llm_calls = Counter("artoo_llm_calls", "LLM calls (LlmUsage), by role, model and "
                                 "result", ["role", "model", "ok"], registry=r)
        self.llm_tokens = Counter("artoo_llm_tokens", "LLM tokens, by role, model and direction",
                                  ["role", "model", "direction"], registry=r)
        self.llm_seconds = Counter("artoo_llm_seconds", "Seconds spent in LLM calls, by role "
                                   "and model", ["role", "model"], registry=r)
        self.tools = Counter("artoo_tool_calls", "Tool calls (ExecutionResult), by Law 1 class "
                             "and tool", ["law1_class", "tool"], registry=r)
        self.approval_requests = Counter("artoo_approval_requests", "Law 1 approval requests, "
                                         "by kind and class", ["kind", "classification"],
                                         registry=r)
        self.approvals = Counter("artoo_approvals", "Law 1 approval decisions", ["decision",
                                 "decided_by"], registry=r)
        self.messages = Counter("artoo_bus_messages", "Messages seen on the bus, by type",
                                ["type"], registry=r)
        self.effector_exits = Counter("artoo_effectors_exited", "Effector exits, by reason",
                                      ["reason"], registry=r)
        self.late = Counter("artoo_heartbeats_late", "Heartbeats that came more than twice the "
                            "interval after the previous one (a stalled process)", ["role"],
                            registry=r)
        r.register(_Gauges(self))
        self._seen: OrderedDict[Any, None] = OrderedDict()     # counted once: ids, attempts
        self._beats: dict[str, dict] = {}                       # node -> last heartbeat + when
        self._times: deque[float] = deque()                     # receive times, RATE_WINDOW_S
        self.client: BusClient | None = None

    def _once(self, key: Any) -> bool:
        """True the first time `key` is seen (re-sent work messages are counted once)."""
        if key in self._seen:
            return False
        self._seen[key] = None
        if len(self._seen) > 50_000:
            self._seen.popitem(last=False)
        return True

    def observe(self, env, _msg=None) -> None:
        now = self.clock()
        t = env.type
        body = env.body
        with self.lock:
            self.messages.labels(t).inc()
            self._times.append(now)
            while self._times and self._times[0] < now - RATE_WINDOW_S:
                self._times.popleft()
            if t == "Heartbeat":
                self._beat(body, now)
            elif t == "LlmUsage":
                role, model = str(body.get("role", "")), str(body.get("model", ""))
                self.llm_calls.labels(role, model, str(bool(body.get("ok", True))).lower()).inc()
                self.llm_tokens.labels(role, model, "input").inc(int(body.get("prompt_tokens")
                                                                     or 0))
                self.llm_tokens.labels(role, model, "output").inc(
                    int(body.get("completion_tokens") or 0))
                self.llm_seconds.labels(role, model).inc(float(body.get("latency_ms") or 0)
                                                         / 1000.0)
            elif t == "ExecutionResult":
                if self._once(("exec", env.node, body.get("subtask_id"), body.get("attempt"))):
                    for call in body.get("tool_calls") or ():
                        self.tools.labels(call.get("law1_class") or "not_run",
                                          str(call.get("tool", ""))).inc()
            elif t == "FinalResult":
                if self._once(("final", body.get("task_id"))):
                    self.tasks.labels(_outcome(body)).inc()
            elif t == "UserRequest":
                if self._once(("req", body.get("task_id"))):
                    self.started.inc()
            elif t == "ApprovalRequest":
                if self._once(("areq", body.get("approval_id"))):
                    self.approval_requests.labels(str(body.get("kind", "")),
                                                  str(body.get("classification", ""))).inc()
            elif t == "ApprovalDecision":
                if self._once(("adec", body.get("approval_id"))):
                    self.approvals.labels("approved" if body.get("approved") else "denied",
                                          str(body.get("decided_by", ""))).inc()
            elif t == "EffectorExited":
                if self._once(("exit", body.get("spawner"), body.get("pid"),
                               body.get("subtask_id"))):
                    self.effector_exits.labels(str(body.get("reason") or "unknown")).inc()

    def _beat(self, body: dict, now: float) -> None:
        node = str(body.get("node", ""))
        prev = self._beats.get(node)
        interval = self.settings.heartbeat_interval_s
        if prev is not None and now - prev["at"] > LATE_FACTOR * interval:
            self.late.labels(str(body.get("role", ""))).inc()
        self._beats[node] = {"at": now, "hb": body}

    def snapshot(self) -> tuple[list[dict], int, float]:
        """(live heartbeats with their age, messages in the window, the window's length)."""
        now = self.clock()
        with self.lock:
            for node in [n for n, b in self._beats.items() if now - b["at"] > FORGET_AFTER_S]:
                del self._beats[node]
            beats = [dict(b["hb"], _age=now - b["at"]) for b in self._beats.values()]
            while self._times and self._times[0] < now - RATE_WINDOW_S:
                self._times.popleft()
            count = len(self._times)
        return beats, count, RATE_WINDOW_S

    def render(self) -> bytes:
        return generate_latest(self.registry)


class _Gauges:
    """The gauges, computed at scrape time from the latest heartbeat of every process."""

    def __init__(self, collector: Collector):
        self.c = collector

    def describe(self):
        return []

    def collect(self):
        beats, count, window = self.c.snapshot()
        missing = self.c.settings.missing_after_s
        rate = GaugeMetricFamily("artoo_bus_messages_per_second",
                                 f"Bus messages per second over the last {window:g} s")
        rate.add_metric([], count / window)
        up = GaugeMetricFamily("artoo_role_up", "1 when the process's heartbeat is recent",
                               labels=["role", "instance", "host"])
        age = GaugeMetricFamily("artoo_heartbeat_age_seconds", "Seconds since the process's "
                                "last heartbeat", labels=["role", "instance", "host"])
        rejected = GaugeMetricFamily("artoo_bus_rejected_frames", "Frames refused, by the "
                                     "receiving role and reason (counts of the live processes)",
                                     labels=["role", "reason"])
        unacked = GaugeMetricFamily("artoo_bus_unacked", "Work messages waiting for their acks",
                                    labels=["role"])
        lost = GaugeMetricFamily("artoo_bus_lost", "Work messages never acknowledged (given up)",
                                 labels=["role"])
        gaps = GaugeMetricFamily("artoo_bus_sequence_gaps", "Messages missed per sequence "
                                 "numbers, as seen by each role", labels=["role"])
        in_flight = GaugeMetricFamily("artoo_handlers_in_flight", "Handlers running",
                                      labels=["role"])
        alive = GaugeMetricFamily("artoo_effectors_alive", "Effector processes running "
                                  "(the spawners' heartbeats)")
        sums: dict[str, dict] = {}
        reasons: dict[tuple[str, str], int] = {}
        effectors = 0
        for hb in beats:
            role = str(hb.get("role", ""))
            labels = [role, str(hb.get("instance", 0)), str(hb.get("host", ""))]
            up.add_metric(labels, 1.0 if hb["_age"] <= missing else 0.0)
            age.add_metric(labels, round(hb["_age"], 3))
            s = sums.setdefault(role, {"unacked": 0, "lost": 0, "gaps": 0, "in_flight": 0})
            s["unacked"] += int(hb.get("unacked") or 0)
            s["lost"] += int(hb.get("lost") or 0)
            s["gaps"] += sum(int(v) for v in (hb.get("gaps") or {}).values())
            s["in_flight"] += int(hb.get("in_flight") or 0)
            for reason, n in (hb.get("rejected") or {}).items():
                reasons[(role, reason)] = reasons.get((role, reason), 0) + int(n)
            if role == "spawner" and hb["_age"] <= missing:
                effectors += int((hb.get("info") or {}).get("running") or 0)
        for role, s in sorted(sums.items()):
            unacked.add_metric([role], s["unacked"])
            lost.add_metric([role], s["lost"])
            gaps.add_metric([role], s["gaps"])
            in_flight.add_metric([role], s["in_flight"])
        for (role, reason), n in sorted(reasons.items()):
            rejected.add_metric([role, reason], n)
        alive.add_metric([], effectors)
        yield from (rate, up, age, rejected, unacked, lost, gaps, in_flight, alive)


def serve(collector: Collector, settings: Settings):
    """Start the HTTP endpoint; returns (server, port). The port goes to $ARTOO_RUN/metrics.port."""
    from prometheus_client import start_http_server
    server, _thread = start_http_server(settings.metrics_port, addr=settings.metrics_addr,
                                        registry=collector.registry)
    port = server.server_address[1]
    path = port_file(settings)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(f"{settings.metrics_addr}:{port}\n")
    os.replace(tmp, path)
    return server, port


class _Service:
    def __init__(self, collector: Collector, server, settings: Settings):
        self.collector, self.server, self.settings = collector, server, settings

    def close(self) -> None:
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()
        try:
            port_file(self.settings).unlink()
        except OSError:
            pass


def setup(client: BusClient, settings: Settings) -> _Service:
    collector = Collector(settings)
    collector.client = client
    client.on(ALL, collector.observe, raw=True)
    client.gather = Gather(settings.observer_gather_ms / 1000)   # off every task's path
    try:
        server, port = serve(collector, settings)
    except OSError as exc:   # the port is taken: keep counting, say so in the heartbeat
        log.error("metrics endpoint not started on %s:%s: %s", settings.metrics_addr,
                  settings.metrics_port, exc)
        server, port = None, None
    client.heartbeat_info = lambda: {"port": port, "addr": settings.metrics_addr}
    if port:
        log.info("metrics on http://%s:%d/metrics", settings.metrics_addr, port)
    return _Service(collector, server, settings)


def main() -> int:
    from .role import run_role
    return run_role(ROLE, setup, load_settings())


if __name__ == "__main__":
    raise SystemExit(main())
