"""Traces in Arize Phoenix (opt-in: `bash scripts/test-phoenix`, marker `phoenix`): a real
`phoenix serve` from PyPI takes artoo's spans over OTLP/HTTP, and the test reads them back through
Phoenix's REST API (`GET /v1/projects/default/spans`): one trace for the task, the role steps from
the processes, the LLM spans with their GenAI attributes and Phoenix's LLM span kind.

Phoenix lives in its own virtualenv (`.venv-phoenix`, made by scripts/test-phoenix), so its pins
never move the main one's; `ARTOO_PHOENIX` names its `phoenix` executable, or `ARTOO_PHOENIX_URL`
points at a Phoenix already serving (then none is started)."""
from __future__ import annotations

import io
import json
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import urllib.request
from pathlib import Path
from types import SimpleNamespace

import pytest

from conftest import REPO, scripted_daemon
from protocol import tracecontext
from replies_effector import check, reads
from replies_pipeline import accept, perception, plan, subtask
from scripted_llm import ScriptedLLM
from test_pipeline_e2e import Router, new_rid, run_task

pytestmark = pytest.mark.phoenix
PHOENIX = os.environ.get("ARTOO_PHOENIX") or str(REPO / ".venv-phoenix" / "bin" / "phoenix")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _get(url: str, timeout: float = 10.0):
    with urllib.request.urlopen(url, timeout=timeout) as resp:
        return json.loads(resp.read() or b"null") if resp.status == 200 else None


@pytest.fixture(scope="module")
def phoenix():
    running = os.environ.get("ARTOO_PHOENIX_URL", "").rstrip("/")
    if running:                         # a Phoenix already serving (its spans stay there)
        yield SimpleNamespace(base=running, traces=f"{running}/v1/traces")
        return
    if not Path(PHOENIX).exists():
        pytest.skip(f"Phoenix is not installed ({PHOENIX}): run bash scripts/test-phoenix")
    work = Path(tempfile.mkdtemp(prefix="at-phx-", dir="/tmp"))
    port = _free_port()
    env = {**os.environ, "PHOENIX_WORKING_DIR": str(work), "PHOENIX_PORT": str(port),
           "PHOENIX_GRPC_PORT": str(_free_port()), "PHOENIX_HOST": "127.0.0.1"}
    log = open(work / "phoenix.log", "wb")
    proc = subprocess.Popen([PHOENIX, "serve"], env=env, stdout=log, stderr=subprocess.STDOUT,
                            start_new_session=True)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 600          # it imports a lot: minutes on a busy machine
        while True:
            if proc.poll() is not None:
                raise AssertionError(f"phoenix serve exited: {(work / 'phoenix.log').read_text()[-2000:]}")
            try:
                urllib.request.urlopen(f"{base}/healthz", timeout=2).close()
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise AssertionError("phoenix serve did not answer /healthz")
                time.sleep(0.5)   # polling a server that gives no readiness signal of its own
        yield SimpleNamespace(base=base, traces=f"{base}/v1/traces")
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)
        log.close()
        shutil.rmtree(work, ignore_errors=True)


def _spans(phoenix, trace_id: str) -> list[dict]:
    out, cursor = [], None
    while True:
        url = f"{phoenix.base}/v1/projects/default/spans?limit=1000&trace_id={trace_id}"
        if cursor:
            url += f"&cursor={cursor}"
        try:
            body = _get(url) or {}
        except OSError:
            return out                     # the project appears with its first span
        out += body.get("data") or []
        cursor = body.get("next_cursor")
        if not cursor:
            return out


def test_a_task_is_one_trace_in_phoenix(phoenix):
    from rich.console import Console
    from services.cli.run import RunSession
    env = {"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": phoenix.traces, "OTEL_BSP_SCHEDULE_DELAY": "200"}
    with ScriptedLLM() as llm, scripted_daemon(llm, prefix="at-phx-", scale=1,
                                               extra_env=env) as (settings, _root):
        session = RunSession(settings, Console(file=io.StringIO(), width=160), interactive=False)
        ctx = SimpleNamespace(settings=settings, llm=llm, session=session,
                              router=Router(llm, settings.workspace))
        try:
            rid = new_rid("phx")
            intent = f"print the date {rid}"
            ctx.router.simple(intent, "2026-11-22", ["date printed"])
            data = ctx.router.data("2026-11-22")
            ctx.router.script.verifier(intent, check(data), reads(data))
            llm.add("perceiver", perception("print the date"), task=rid)
            llm.add("planner", plan(subtask(intent, ["date printed"])), task=rid)
            llm.add("metaval", accept("printed", merged_output="2026-11-22"), task=rid)
            final = run_task(ctx, rid, "print the date")
            assert final.directive == "accept", final.summary
        finally:
            session.close()
    trace_id = f"{tracecontext.task_trace_id(rid):032x}"
    want = {"perceive", "plan", "dispatch", "spawn", "subtask", "attempt", "check", "merge",
            "ggs round"}
    deadline = time.monotonic() + 120
    while True:                              # Phoenix ingests asynchronously: poll its API
        spans = _spans(phoenix, trace_id)
        names = {s.get("name") for s in spans}
        if want <= names and any(n.startswith("chat ") for n in names):
            break
        assert time.monotonic() < deadline, f"Phoenix has {sorted(names)} for {trace_id}"
        time.sleep(1.0)
    ids = {s["context"]["span_id"] for s in spans}
    roots = [s for s in spans if not s.get("parent_id")]
    assert [r["name"] for r in roots] == ["perceive"]
    assert all(s["parent_id"] in ids for s in spans if s.get("parent_id"))
    chats = [s for s in spans if s["name"].startswith("chat ")]
    for s in chats:
        attrs = s.get("attributes") or {}
        assert attrs.get("gen_ai.operation.name") == "chat"
        assert attrs.get("gen_ai.usage.input_tokens", 0) > 0
        assert s.get("span_kind") in ("LLM", "llm")
    tool = next(s for s in spans if s["name"] == "execute_tool shell")
    assert (tool.get("attributes") or {}).get("artoo.law1.class") == "read-only"
