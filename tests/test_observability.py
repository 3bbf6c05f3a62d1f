"""The observation plane: OpenTelemetry traces from every process to a real OTLP/HTTP receiver, and
the Prometheus endpoint checked against the task log, on the real daemon with the scripted LLM."""
from __future__ import annotations

import io
import os
import subprocess
import sys
from collections import Counter
from types import SimpleNamespace

import pytest

from conftest import REPO, scripted_daemon
from otlp_receiver import OtlpReceiver
from protocol import tracecontext
from protocol.envelope import Envelope
from replies_effector import check, reads
from replies_pipeline import accept, perception, plan, subtask
from scripted_llm import ScriptedLLM
from services.cli.metrics import endpoint, parse, scrape
from services.runtime import metrics as metrics_mod
from services.runtime import tasklog, telemetry
from test_pipeline_e2e import Router, new_rid, run_task

ROLE_STEPS = {"perceive", "plan", "dispatch", "spawn", "subtask", "attempt", "check", "merge",
              "ggs round"}


# ---------------------------------------------------------------------------------------------
# off by default, and what turns it on (pure)
# ---------------------------------------------------------------------------------------------

def test_export_follows_the_standard_variables():
    assert not telemetry.export_wanted({})
    assert telemetry.export_wanted({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"})
    assert telemetry.export_wanted({"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://h/v1/traces"})
    assert telemetry.export_wanted({"OTEL_TRACES_EXPORTER": "console"})
    assert not telemetry.export_wanted({"OTEL_TRACES_EXPORTER": "none",
                                        "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"})
    assert not telemetry.export_wanted({"OTEL_SDK_DISABLED": "true",
                                        "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"})


def test_tracing_off_imports_no_sdk_and_spans_are_the_shared_noop():
    """Off, a role process never imports OpenTelemetry, and the bus client propagates nothing."""
    code = ("import sys\n"
            "from services.runtime import telemetry\n"
            "import services.roles.planner, services.roles.effector, services.roles.ggs\n"
            "from protocol.bus import BusClient\n"
            "c = BusClient('planner', heartbeat=False)\n"
            "assert telemetry.init('planner', client=c) is False and c.tracing is False\n"
            "assert telemetry.span('plan', task='t') is telemetry.NOOP\n"
            "with telemetry.span('x') as sp: sp.set('k', 1)\n"
            "bad = sorted(m for m in sys.modules if m.startswith('opentelemetry'))\n"
            "assert not bad, bad\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    proc = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr


def test_traceparent_format_and_the_task_trace_id():
    tid = tracecontext.task_trace_id("run-1")
    tp = tracecontext.format(tid, 0xABC)
    assert tracecontext.parse(tp) == (tid, 0xABC, 1) and len(tp) == 55
    assert tracecontext.task_trace_id("run-1") == tid != tracecontext.task_trace_id("run-2")
    for bad in (None, "", "00-0-0-01", "ff-" + "1" * 32 + "-" + "1" * 16 + "-01",
                "00-" + "0" * 32 + "-" + "1" * 16 + "-01", "00-" + "g" * 32 + "-" + "1" * 16 + "-01"):
        assert tracecontext.parse(bad) is None


def test_collector_counts_each_message_once(artoo_env):
    from protocol.settings import load_settings
    c = metrics_mod.Collector(load_settings())

    def env(type_name, body, node="n1", msg_id=None):
        return Envelope(type=type_name, body=body, sender="x", node=node, task="t",
                        **({"id": msg_id} if msg_id else {}))
    usage = {"role": "planner", "model": "m", "prompt_tokens": 10, "completion_tokens": 3,
             "latency_ms": 500.0, "ok": True}
    c.observe(env("LlmUsage", usage))
    c.observe(env("LlmUsage", usage))
    result = {"task_id": "t", "subtask_id": "s", "attempt": 1, "tool_calls": [
        {"tool": "shell", "law1_class": "read-only"}, {"tool": "write_file",
                                                       "law1_class": "workspace-write"}]}
    c.observe(env("ExecutionResult", result))
    c.observe(env("ExecutionResult", result))            # re-published: counted once
    final = {"task_id": "t", "directive": "accept", "status": "verified"}
    c.observe(env("FinalResult", final, msg_id="f1"))
    c.observe(env("FinalResult", final, msg_id="f1"))    # re-sent
    c.observe(env("Heartbeat", {"role": "spawner", "node": "sp", "instance": 0,
                                "rejected": {"bad_signature": 2}, "unacked": 1,
                                "info": {"running": 3}}))
    got = {(n, tuple(sorted(l.items()))): v for n, l, v in parse(c.render().decode())}
    assert got[("artoo_llm_calls_total", (("model", "m"), ("ok", "true"), ("role", "planner")))] == 2
    assert got[("artoo_llm_tokens_total", (("direction", "input"), ("model", "m"),
                                           ("role", "planner")))] == 20
    assert got[("artoo_llm_seconds_total", (("model", "m"), ("role", "planner")))] == 1.0
    assert got[("artoo_tool_calls_total", (("law1_class", "read-only"), ("tool", "shell")))] == 1
    assert got[("artoo_tasks_total", (("outcome", "verified"),))] == 1
    assert got[("artoo_bus_rejected_frames", (("reason", "bad_signature"), ("role", "spawner")))] == 2
    assert got[("artoo_bus_unacked", (("role", "spawner"),))] == 1
    assert got[("artoo_effectors_alive", ())] == 3
    assert got[("artoo_bus_messages_total", (("type", "LlmUsage"),))] == 2
    assert got[("artoo_bus_messages_per_second", ())] > 0


# ---------------------------------------------------------------------------------------------
# end to end: one task on the real daemon, traced to a real receiver, then scraped
# ---------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def traced():
    from rich.console import Console
    from services.cli.run import RunSession
    with OtlpReceiver() as receiver, ScriptedLLM() as llm, \
            scripted_daemon(llm, prefix="at-obs-", scale=1, extra_env=receiver.env()) \
            as (settings, root):
        session = RunSession(settings, Console(file=io.StringIO(), width=160), interactive=False)
        try:
            yield SimpleNamespace(settings=settings, llm=llm, session=session, root=root,
                                  router=Router(llm, settings.workspace), receiver=receiver)
        finally:
            session.close()


def _tree(spans):
    by_id = {s.span_id: s for s in spans}

    def chain(s):
        names = []
        while s is not None:
            names.append(s.name)
            s = by_id.get(s.parent_id)
        return names
    return by_id, chain


def test_one_trace_per_task_across_the_processes_and_metrics_match_the_task_log(traced):
    rid = new_rid("obs")
    intent = f"print the date {rid}"
    traced.router.simple(intent, "2026-11-22", ["date printed"])
    data = traced.router.data("2026-11-22")
    traced.router.script.verifier(intent, check(data), reads(data))
    traced.llm.add("perceiver", perception("print the date"), task=rid)
    traced.llm.add("planner", plan(subtask(intent, ["date printed"])), task=rid)
    traced.llm.add("metaval", accept("printed", merged_output="2026-11-22"), task=rid)
    final = run_task(traced, rid, "print the date")
    assert final.directive == "accept", final.summary

    # -- the trace: every step, one trace id, one root, every parent present -------------------
    rx = traced.receiver
    log = list(tasklog.read(traced.settings.tasks_dir, rid))
    llm_events = [e for e in log if e["kind"] == "llm_call"]

    def complete():
        spans = rx.of_task(rid)
        names = {s.name for s in spans}
        chats = [s for s in spans if s.name.startswith("chat ")]
        return spans if ROLE_STEPS <= names and len(chats) >= len(llm_events) else None
    spans = rx.wait_for(complete, 30, f"the spans of {rid}")
    trace_ids = {s.trace_id for s in spans}
    assert len(trace_ids) == 1, trace_ids
    assert trace_ids == {f"{tracecontext.task_trace_id(rid):032x}"}
    everything = [s for s in rx.spans if s.trace_id in trace_ids]
    assert {s.span_id for s in everything} == {s.span_id for s in spans}  # all carry the task
    by_id, chain = _tree(spans)
    roots = [s for s in spans if not s.parent_id]
    assert [r.name for r in roots] == ["perceive"], [(r.name, r.service) for r in roots]
    orphans = [(s.name, s.service) for s in spans if s.parent_id and s.parent_id not in by_id]
    assert not orphans, orphans
    services = {s.service for s in spans}
    assert {"artoo-perceiver", "artoo-planner", "artoo-spawner", "artoo-effector",
            "artoo-metaval", "artoo-ggs"} <= services, services
    assert len({s.pid for s in spans}) >= 5

    # the causal chain across the processes
    tool = next(s for s in spans if s.name == "execute_tool shell")
    assert chain(tool)[:6] == ["execute_tool shell", "attempt", "subtask", "spawn", "dispatch",
                               "plan"] and chain(tool)[-1] == "perceive"
    assert tool.attrs["artoo.law1.class"] == "read-only" and tool.attrs["gen_ai.tool.name"] == "shell"
    assert tool.attrs["artoo.sandbox"] in ("bubblewrap", "off")
    check_span = next(s for s in spans if s.name == "check")
    assert chain(check_span)[1] == "subtask"      # R4a judges each attempt's published result
    assert check_span.start_ns >= next(s for s in spans if s.name == "attempt").end_ns
    merge = next(s for s in spans if s.name == "merge")
    ggs = next(s for s in spans if s.name == "ggs round")
    assert by_id[ggs.parent_id] is merge and merge.service == "artoo-metaval"
    by_service = {s.name: s.service for s in spans}
    assert by_service["spawn"] == "artoo-spawner" and by_service["subtask"] == "artoo-effector"

    # LLM spans: the GenAI conventions, one per logged call, in the right process
    chats = [s for s in spans if s.name.startswith("chat ")]
    assert len(chats) == len(llm_events)
    assert Counter(s.attrs["artoo.llm.role"] for s in chats) == \
        Counter(e["role"] for e in llm_events)
    for s in chats:
        a = s.attrs
        assert s.name == f"chat {a['gen_ai.request.model']}" and s.kind == 3  # CLIENT
        assert a["gen_ai.operation.name"] == "chat"
        assert a["gen_ai.usage.input_tokens"] > 0 and a["gen_ai.usage.output_tokens"] > 0
        assert a["gen_ai.response.finish_reasons"] == ["stop"]
    assert {by_service.get(by_id[s.parent_id].name) for s in chats} <= \
        {"artoo-perceiver", "artoo-planner", "artoo-effector", "artoo-metaval"}

    # -- the metrics endpoint, against the task log ----------------------------------------
    tools = [e for e in log if e["kind"] == "tool_call" and e.get("executed") is not False]

    def samples():
        got = parse(scrape(traced.settings))
        done = sum(v for n, l, v in got if n == "artoo_tasks_total")
        calls = sum(v for n, l, v in got if n == "artoo_llm_calls_total")
        return got if done >= 1 and calls >= len(llm_events) else None
    got = rx.wait_for(samples, 20, "the metrics of the run")

    def total(name, **match):
        return sum(v for n, l, v in got if n == name and all(l.get(k) == w for k, w in match.items()))
    assert total("artoo_tasks_total", outcome=final.status) == 1
    assert total("artoo_tasks_started_total") == 1
    for role, n in Counter(e["role"] for e in llm_events).items():
        assert total("artoo_llm_calls_total", role=role) == n, role
        assert total("artoo_llm_tokens_total", role=role, direction="input") == \
            sum(e["prompt_tokens"] for e in llm_events if e["role"] == role)
        assert total("artoo_llm_tokens_total", role=role, direction="output") == \
            sum(e["completion_tokens"] for e in llm_events if e["role"] == role)
        assert total("artoo_llm_seconds_total", role=role) == pytest.approx(
            sum(e["latency_ms"] for e in llm_events if e["role"] == role) / 1000, abs=1e-3)
    assert total("artoo_tool_calls_total") == len(tools) >= 1
    for cls, n in Counter(e.get("law1_class") or "not_run" for e in tools).items():
        assert total("artoo_tool_calls_total", law1_class=cls) == n
    up = {(l["role"], v) for n, l, v in got if n == "artoo_role_up"}
    assert {(r, 1.0) for r in ("perceiver", "planner", "metaval", "ggs", "spawner", "memory",
                               "auditor", "tap", "metrics")} <= up
    assert total("artoo_bus_messages_total") > 0 and total("artoo_effectors_alive") >= 0
    assert any(n == "artoo_bus_unacked" for n, _, _ in got)

    # `artoo metrics` prints the same
    proc = subprocess.run([sys.executable, "-m", "services.cli", "metrics", "--grep",
                           "artoo_tasks_total"], cwd=REPO, env=dict(os.environ),
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert f'artoo_tasks_total{{outcome="{final.status}"}} 1.0' in proc.stdout
    assert endpoint(traced.settings).startswith("http://127.0.0.1:")


def test_a_collector_that_is_down_does_not_hold_an_exit():
    """The SDK's flush retries for the exporter's whole timeout (10 s) when the collector is
    down; ours gives up after its bound and leaves the retries to a daemon thread."""
    code = ("import threading\n"
            "from services.runtime import telemetry\n"
            "assert telemetry.init('effector')\n"
            "with telemetry.span('subtask', task='run-x'): pass\n"
            "flushed = telemetry.shutdown(500)\n"
            "still = [t.name for t in threading.enumerate() if t.name == 'otel-flush']\n"
            "print(flushed, still)\n")
    env = {**os.environ, "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:9"}  # refused
    proc = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split()[0] == "False" and "otel-flush" in proc.stdout
