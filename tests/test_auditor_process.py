"""The auditor process on a real bus with the tap: the operator socket, boundary violations in the
next on-demand report, publishing nothing but heartbeats, missing roles, periodic reports on disk.
"""
from __future__ import annotations

import json
import os
import shutil
import signal
import stat
import tempfile
import threading
from pathlib import Path

import pytest
from click.testing import CliRunner

from audit_support import (capture_stats, log_dir, logged_envelopes, start_bus, start_tap,
                           wait_until)
from auditor.operator import query, request_report, socket_path
from conftest import start_process, stop_process
from protocol.bus import BusClient
from protocol.messages import (AuditReport, DispatchManifest, ExecutionResult, FinalResult,
                               LlmUsage, LossBreakdown, Megram, MemoryWrite, OutcomeSummary,
                               PlanDirective, ReplanRequest, SubTask, SubTaskOutcome, TaskSpec,
                               ToolCallRecord)
from protocol.settings import load_settings
from services.cli import main as cli_main


def start_auditor(settings, env: dict | None = None):
    proc = start_process(["-m", "auditor.auditor"], env or {}, "auditor")
    wait_until(lambda: request_report(settings, timeout=3.0)["auditor"]["observing_since"], 20,
               "the auditor to observe the bus")
    return proc


@pytest.fixture(scope="module")
def world():
    """bus + tap + auditor on a private data dir, shared by this module's tests."""
    root = Path(tempfile.mkdtemp(prefix="aud-", dir="/tmp"))
    (root / "home").mkdir()
    with pytest.MonkeyPatch.context() as mp:
        for key, value in {"ARTOO_HOME": str(root / "home"), "ARTOO_WORKSPACE": str(root / "ws"),
                           "ARTOO_RUN_DIR": "", "ARTOO_SCALE": "1",
                           "ARTOO_MISSING_AFTER_S": "1.5"}.items():
            mp.setenv(key, value)
        settings = load_settings()
        settings.ensure_dirs()
        procs = {"bus": start_bus(settings)}
        clients: list[BusClient] = []
        try:
            procs["tap"] = start_tap(settings)
            procs["auditor"] = start_auditor(settings)

            def client(role: str, setup=None) -> BusClient:
                c = BusClient(role, settings=settings, heartbeat=False)
                if setup:
                    setup(c)
                clients.append(c.start())
                return c

            yield settings, procs, client
        finally:
            for c in clients:
                c.stop()
            for name in ("auditor", "tap", "bus"):
                if name in procs:
                    stop_process(procs[name])
            shutil.rmtree(root, ignore_errors=True)


def seen_by(observer_events: dict, msg_id: str):
    return lambda: msg_id in observer_events


def wildcard_observer(client_factory) -> dict:
    seen: dict = {}
    client_factory("user", setup=lambda c: c.on("*", lambda e, _m: seen.setdefault(e.id, e),
                                                 raw=True))
    return seen


def test_operator_socket_is_private_and_answers(world):
    settings, procs, _client = world
    mode = stat.S_IMODE(os.stat(socket_path(settings)).st_mode)
    assert mode == 0o600
    assert stat.S_IMODE(os.stat(settings.run_dir).st_mode) == 0o700
    assert query(settings, "ping", timeout_s=3.0)["info"]["messages"] > 0
    rep = AuditReport.model_validate(request_report(settings, timeout=3.0))
    assert rep.trigger == "on_demand" and rep.window_end >= rep.window_start
    with pytest.raises(RuntimeError, match="unknown command"):
        query(settings, "shutdown", timeout_s=3.0)


def test_boundary_violation_is_in_the_next_on_demand_report(world):
    settings, _procs, client = world
    seen = wildcard_observer(client)
    effector = client("executor")
    write = MemoryWrite(task_id="run-bv", megrams=[Megram(space="s", entity="e", f=1.0,
                                                          sigma=-1.0, k=0.1)])
    msg_id = effector.publish(write, to="memory")
    wait_until(seen_by(seen, msg_id), 10, "the MemoryWrite to cross the bus")
    result = CliRunner().invoke(cli_main,
                                ["audit", "--json"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    rep = json.loads(result.output)
    found = [v for v in rep["boundary_violations"] if v["id"] == msg_id]
    assert len(found) == 1
    v = found[0]
    assert (v["sender"], v["type"], v["to"], v["task"]) == ("executor", "MemoryWrite", "memory",
                                                            "run-bv")
    assert v["time"] == seen[msg_id].ts and v["node"] == effector.node
    pretty = CliRunner().invoke(cli_main,
                                ["audit", "--strict"], catch_exceptions=False)
    assert pretty.exit_code == 1 and "Boundary violations" in pretty.output
    assert "executor" in pretty.output and "MemoryWrite" in pretty.output


def test_auditor_publishes_nothing_but_its_heartbeat(world):
    """Pipeline-like traffic (work messages with acks, telemetry, a worsening round), an on-demand
    report in the middle; then everything the auditor ever sent, per the tap's log, is its
    heartbeat (plus the bus client's self-addressed readiness probe at start)."""
    settings, procs, client = world
    task = "run-burst"
    acks = threading.Semaphore(0)
    consumer = lambda c, t: c.on(t, lambda e, m: None, ack=True)  # noqa: E731
    perceiver = client("perceiver")
    planner = client("planner", setup=lambda c: (consumer(c, "TaskSpec"),
                                                 consumer(c, "PlanDirective")))
    metaval = client("metaval", setup=lambda c: (consumer(c, "DispatchManifest"),
                                                 consumer(c, "SubTaskOutcome")))
    ggs = client("ggs", setup=lambda c: (consumer(c, "TaskSpec"), consumer(c, "ReplanRequest"),
                                         consumer(c, "OutcomeSummary")))
    executor, agentval, user = client("executor"), client("agentval"), client("user")
    user.on("FinalResult", lambda e, m: None, ack=True)
    done = lambda ok: acks.release()  # noqa: E731
    sent = 0
    for r in range(20):
        tid = f"{task}-{r}"
        perceiver.send(TaskSpec(task_id=tid, intent_slug="burst", intent="x", raw_input="x"),
                       on_done=done)
        planner.send(DispatchManifest(task_id=tid, subtask_ids=["s1"]), on_done=done)
        planner.publish(SubTask(subtask_id="s1", parent_task_id=tid, intent="x"), to="executor")
        executor.publish(ExecutionResult(task_id=tid, subtask_id="s1", status="completed",
                                         tool_calls=[ToolCallRecord(tool="shell")]),
                         to="agentval")
        agentval.publish(LlmUsage(role="agentval", tier="TOOL", latency_ms=50, task_id=tid))
        agentval.send(SubTaskOutcome(task_id=tid, subtask_id="s1", parent_task_id=tid,
                                     status="failed"), to="metaval", on_done=done)
        metaval.send(ReplanRequest(task_id=tid, correction_count=1), on_done=done)
        ggs.send(PlanDirective(task_id=tid, directive="refine", grad_l=0.25,
                               loss=LossBreakdown(D=0.6, P=0.3, Omega=0.1, L=0.5)),
                 on_done=done)
        metaval.send(OutcomeSummary(task_id=tid), on_done=done)
        ggs.send(FinalResult(task_id=tid, directive="success", summary="ok"), on_done=done)
        sent += 6
        if r == 10:
            mid = request_report(settings, timeout=3.0)
            assert mid["trigger"] == "on_demand"
    for _ in range(sent):
        assert acks.acquire(timeout=20), "a work message was not acknowledged"

    def worsening(report: dict) -> list[dict]:
        return [c for c in report["convergence_failures"] if c["task"].startswith(task)]

    # the consumers' acks say their copies arrived; the auditor's own copies travel on its own
    # pipe from the proxy and may still be on the way: the report converges on all 20
    rep = wait_until(lambda: (r := request_report(settings, timeout=3.0)) and
                     len(worsening(r)) >= 20 and r, 15, "the burst's 20 rounds in the report")
    ours = [v for v in rep["boundary_violations"] if v["task"].startswith(task)]
    assert ours == [], ours                       # legitimate traffic is not a violation
    assert len(worsening(rep)) == 20 and all(c["kind"] == "worsening_gap"
                                             for c in worsening(rep))
    # the tap's log, until the auditor has heartbeated twice since the burst ended
    node = rep["auditor"]["node"]
    burst_end = rep["window_end"]
    envs = wait_until(lambda: (es := logged_envelopes(settings)) and sum(
        1 for e in es if e["node"] == node and e["type"] == "Heartbeat" and e["ts"] > burst_end
    ) >= 2 and es, 20, "two auditor heartbeats after the burst in the audit log")
    from_auditor = [e for e in envs if e["from"] == "auditor" or e["node"] == node]
    kinds = {(e["type"], e["to"]) for e in from_auditor}
    assert kinds <= {("Heartbeat", None), ("Hello", "self")}, kinds
    assert sum(1 for e in envs if e["task"].startswith(task)) >= 20 * 10


def test_missing_role_reported_then_recovered(world):
    settings, procs, _client = world
    before = capture_stats(settings)["tap_connections"]
    procs["tap"].send_signal(signal.SIGKILL)
    procs["tap"].wait(10)
    try:
        wait_until(lambda: any(m["role"] == "tap" and m["state"] == "missing"
                               for m in request_report(settings, timeout=3.0)["missing_roles"]),
                   15, "the tap to be reported missing")
    finally:
        procs["tap"] = start_tap(settings, connected_before=before)
    rep = wait_until(lambda: (r := request_report(settings, timeout=3.0)) and any(
        m["role"] == "tap" and m["state"] == "recovered" for m in r["missing_roles"]) and r, 15,
        "the tap's recovery")
    ep = next(m for m in rep["missing_roles"] if m["role"] == "tap")
    assert ep["restarted"] and ep["silent_s"] >= 1.5
    assert rep["role_stats"]["tap"]["restarts"] >= 1, rep["role_stats"].get("tap")
    # still exactly one chain: the restarted tap continued it
    from auditor.log import verify
    assert verify(log_dir(settings)).ok


def test_periodic_reports_are_persisted_and_reset_the_window(settings):
    procs = [start_bus(settings)]
    try:
        procs.append(start_auditor(settings, {"ARTOO_AUDIT_REPORT_INTERVAL_S": "1.0"}))
        reports = settings.audit_dir / "reports"
        files = wait_until(lambda: (f := sorted(reports.glob("*-periodic-*.json"))) and
                           len(f) >= 2 and f, 20, "two periodic reports")
        first, second = (AuditReport.model_validate_json(p.read_text()) for p in files[:2])
        assert first.trigger == second.trigger == "periodic"
        assert second.window_start == pytest.approx(first.window_end)
        assert first.messages_observed > 0          # heartbeats at least
        assert stat.S_IMODE(files[0].stat().st_mode) == 0o600
        assert (reports / "baseline.json").exists()
    finally:
        for proc in reversed(procs):
            stop_process(proc)
