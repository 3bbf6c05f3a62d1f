"""artoo as an MCP server, end to end: a real daemon (`artoo up`: bus, tap, every role, spawner +
effectors) with the scripted LLM, the FastMCP demo server configured as artoo's tool, and the
SDK's own client talking to `artoo mcp serve` over stdio (and over streamable HTTP with its
bearer token). The goal's executor calls the demo server's read-only and destructive tools; the
destructive one is put to the MCP client as an elicitation; every call is in the audit log."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
from collections import defaultdict, deque
from contextlib import asynccontextmanager
from datetime import timedelta

import anyio
import msgpack
import pytest

from audit_support import logged_envelopes, wait_until
from conftest import REPO, scripted_daemon
from replies_effector import SubtaskScript, all_met, result
from replies_pipeline import accept, perception, plan, subtask
from scripted_llm import ScriptedLLM
from services.runtime import mcpconfig
from services.runtime.mcpconfig import ServerSpec
from test_mcp import DEMO


class GoalScript:
    """Perceiver/planner/metaval replies keyed by a tag in the goal's words (the run id is made
    by the server, so the test cannot key on it)."""

    def __init__(self, llm):
        self.queues: dict[tuple[str, str], deque] = defaultdict(deque)
        self.lock = threading.Lock()
        for role in ("perceiver", "planner", "metaval"):
            llm.on(role, self._respond(role))

    def add(self, tag: str, role: str, *replies) -> None:
        with self.lock:
            self.queues[(role, tag)].extend(replies)

    def _respond(self, role):
        def respond(req):
            with self.lock:
                for (r, tag), q in self.queues.items():
                    if r == role and tag in req.prompt and q:
                        return q.popleft()
            raise LookupError(f"no scripted {role} reply")
        return respond


@pytest.fixture(scope="module")
def stack():
    def before_up(settings):
        mcpconfig.save(settings.home, {"demo": ServerSpec(name="demo", command=sys.executable,
                                                          args=[DEMO])})
    with ScriptedLLM() as llm, scripted_daemon(llm, prefix="at-mcps-", scale=1,
                                               extra_env={"ARTOO_MCP_TIMEOUT_S": "120",
                                                          "ARTOO_MCP_START_TIMEOUT_S": "180"},
                                               before_up=before_up,
                                               up_timeout_s=600) as (settings, root):
        script = SubtaskScript().install(llm)
        yield settings, root, llm, GoalScript(llm), script


def scripted_goal(stack, tag: str, *, delete: str) -> str:
    settings, root, llm, goals, script = stack
    intent = f"look up the widget price and delete {delete} {tag}"
    crit = "the price is given and the file is deleted"
    goals.add(tag, "perceiver", perception(intent, [crit]))
    goals.add(tag, "planner", plan(subtask(intent, [crit])))
    goals.add(tag, "metaval", accept("widget costs 42 EUR", merged_output="42 EUR"))
    script.executor(intent, {"action": "tool", "tool": "demo.lookup_price",
                             "arguments": {"item": "widget"}},
                    {"action": "tool", "tool": "demo.delete_file", "arguments": {"path": delete}},
                    result("42 EUR"))
    script.agentval(intent, all_met(crit, evidence="the tool printed widget: 42 EUR"))
    return f"Look up the price of a widget with the catalogue tool and delete {delete} {tag}"


@asynccontextmanager
async def client(elicit=None):
    from mcp import ClientSession, StdioServerParameters, types
    from mcp.client.stdio import stdio_client
    params = StdioServerParameters(command=sys.executable, args=["-m", "services.cli", "mcp",
                                                                 "serve"],
                                   env=dict(os.environ), cwd=str(REPO))
    callback = None
    if elicit is not None:
        async def callback(context, params: types.ElicitRequestParams):
            elicit.append(params.message)
            return types.ElicitResult(action="accept", content={"approve": True})
    with open(os.devnull, "w") as devnull:
        async with stdio_client(params, errlog=devnull) as (read, write):
            async with ClientSession(read, write, elicitation_callback=callback,
                                     read_timeout_seconds=timedelta(seconds=120)) as session:
                await session.initialize()
                yield session


def call(session, tool, **args):
    async def go():
        res = await session.call_tool(tool, args)
        assert not res.isError, res.content
        if res.structuredContent is None:
            return json.loads(res.content[0].text)
        return res.structuredContent.get("result", res.structuredContent)
    return go()


def test_a_client_runs_a_goal_and_approves_by_elicitation(stack):
    settings, root, *_ = stack
    ws = root / "ws"
    (ws / "stale1.txt").write_text("old\n")
    goal = scripted_goal(stack, "[e1]", delete="stale1.txt")
    asked: list[str] = []

    async def main():
        async with client(elicit=asked) as session:
            tools = {t.name: t for t in (await session.list_tools()).tools}
            assert {"run_goal", "task_status", "list_tasks", "cancel_task"} <= set(tools)
            assert tools["task_status"].annotations.readOnlyHint
            out = await call(session, "run_goal", goal=goal, workspace=str(ws))
            status = await call(session, "task_status", run_id=out["run_id"])
            listed = await call(session, "list_tasks", limit=5)
            again = await call(session, "cancel_task", run_id=out["run_id"])
            return out, status, listed, again

    out, status, listed, again = anyio.run(main)
    assert out["status"] in ("verified", "unverified"), out
    assert "42" in out["answer"] or "42" in out["summary"]
    assert out["cost"]["total"]["calls"] >= 4 and out["workspace"] == str(ws)
    assert len(asked) == 1 and "demo.delete_file" in asked[0]       # only the destructive call
    assert not (ws / "stale1.txt").exists() and out["changed"] == ["stale1.txt"], out
    assert status["id"] == out["run_id"] and status["state"] == "finished"
    assert listed[0]["id"] == out["run_id"]
    assert again["cancelled"] is False                              # it had already ended
    # every MCP call is in the audit log: the tool-call records in the bus messages the tap kept
    def logged_calls():                      # the tap writes behind the bus: wait for the log
        return [c for env in logged_envelopes(settings)
                if env.get("type") == "ExecutionResult" and env.get("task") == out["run_id"]
                for c in env["body"].get("tool_calls", [])]
    calls = wait_until(lambda: len(c := logged_calls()) >= 2 and c, 30, "the tool calls logged")
    assert [(c["tool"], c["server"]) for c in calls] == [("demo.lookup_price", "demo"),
                                                        ("demo.delete_file", "demo")]
    assert all(c["digest"].startswith("sha256:") for c in calls)
    assert calls[0]["output"] == "widget: 42 EUR"


def test_a_client_that_cannot_be_asked_gets_needs_approval(stack):
    settings, root, *_ = stack
    ws = root / "ws"
    (ws / "stale2.txt").write_text("old\n")
    goal = scripted_goal(stack, "[e2]", delete="stale2.txt")

    async def main():
        async with client() as session:
            return await call(session, "run_goal", goal=goal, workspace=str(ws))
    out = anyio.run(main)
    assert out["status"] == "needs_approval", out
    assert (ws / "stale2.txt").exists()                              # not done
    need = out["needs_approval"][0]
    assert "demo.delete_file" in need["action"] and "artoo gate" in need["check"]
    assert "artoo gate" in out["summary"] and "yes=true" in out["summary"]


def test_streamable_http_needs_the_token(stack):
    settings, root, *_ = stack
    proc = subprocess.Popen([sys.executable, "-m", "services.cli", "mcp", "serve", "--http",
                             "--port", "0", "--token", "s3cret"], cwd=REPO, env=dict(os.environ),
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        line = proc.stderr.readline()
        url = re.search(r"(http://127\.0\.0\.1:\d+/mcp)", line).group(1)
        import httpx
        denied = httpx.post(url, json={}, timeout=10)
        assert denied.status_code == 401

        async def main():
            from mcp import ClientSession
            from mcp.client.streamable_http import streamable_http_client
            from mcp.shared._httpx_utils import create_mcp_http_client
            async with create_mcp_http_client(headers={"Authorization": "Bearer s3cret"}) as http, \
                    streamable_http_client(url, http_client=http) as (read, write, _):
                async with ClientSession(read, write) as session:
                    await session.initialize()
                    names = [t.name for t in (await session.list_tools()).tools]
                    listed = await call(session, "list_tasks", limit=3)
                    return names, listed
        names, listed = anyio.run(main)
        assert "run_goal" in names and isinstance(listed, list)
        # artoo's own MCP client reaches a streamable-HTTP server with the entry's headers
        from services.safety.mcpclient import McpHub
        hub = McpHub(settings, {"self": ServerSpec(name="self", url=url, headers={
            "Authorization": "Bearer s3cret"})}, workspace=str(root / "ws"))
        try:
            assert "self.list_tasks" in hub.discover(refresh=True), hub.problems
            out = hub.call("self.list_tasks", {"limit": 2})
            assert out.error is None and out.digest
            wrong = McpHub(settings, {"bad": ServerSpec(name="bad", url=url)},
                           workspace=str(root / "ws"))
            assert not wrong.discover(refresh=True) and "bad" in wrong.problems
            wrong.close()
        finally:
            hub.close()
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)


def test_the_mcp_benchmark_runner_end_to_end(stack, tmp_path):
    """benchmarks/mcp/run.py on the scripted daemon: it adds its servers to mcp.json, runs the
    goal with `artoo run`, the executor calls the benchmark's own FastMCP server, the checker
    passes, and mcp.json is put back."""
    settings, root, llm, goals, script = stack
    before = (settings.home / "mcp.json").read_text()
    tag = "sprocket in the shop catalogue"
    intent = f"find the unit price of a {tag}"
    goals.add(tag, "perceiver", perception(intent, ["the price is given"]))
    goals.add(tag, "planner", plan(subtask(intent, ["the price is given"])))
    goals.add(tag, "metaval", accept("a sprocket costs 13 EUR", merged_output="13 EUR"))
    script.executor(intent, {"action": "tool", "tool": "shop.catalogue_price",
                             "arguments": {"item": "sprocket"}}, result("13 EUR"))
    script.agentval(intent, all_met("the price is given", evidence="sprocket: 13 EUR per unit"))
    out = tmp_path / "res.json"
    proc = subprocess.run([sys.executable, str(REPO / "benchmarks" / "mcp" / "run.py"),
                           "--only", "price-sprocket", "--timeout", "400", "--out", str(out),
                           "--artoo", str(REPO / ".venv" / "bin" / "artoo")],
                          cwd=REPO, env=dict(os.environ), capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    rec = json.loads(out.read_text())["records"][0]
    assert rec["passed"] and rec["mcp_tools_called"] == ["shop.catalogue_price"], rec
    assert (settings.home / "mcp.json").read_text() == before


def test_mcp_benchmark_checkers_accept_the_references_and_reject_distractors(tmp_path):
    sys.path.insert(0, str(REPO / "benchmarks" / "agent" / "lib"))
    import importlib.util
    import check_util
    goals = sorted(p for p in (REPO / "benchmarks" / "mcp" / "goals").iterdir() if p.is_dir())
    assert len(goals) >= 6
    for g in goals:
        meta = json.loads((g / "goal.json").read_text())
        assert meta["servers"] and meta["kind"] in ("question", "file", "multistep", "impossible")
        ws = tmp_path / g.name
        ws.mkdir()
        subprocess.run(["bash", str(g / "setup.sh")], cwd=ws, check=True, timeout=60)
        subprocess.run(["bash", str(g / "reference.sh"), str(ws / "result.json")], cwd=ws,
                       check=True, timeout=60)
        spec_mod = importlib.util.spec_from_file_location(f"mcpcheck_{g.name}".replace("-", "_"),
                                                          g / "check.py")
        mod = importlib.util.module_from_spec(spec_mod)
        spec_mod.loader.exec_module(mod)
        result = json.loads((ws / "result.json").read_text())
        ok, why = check_util.judge(mod.SPEC, ws, result, g / "setup.sh")
        assert ok, (g.name, why)
        for wrong in getattr(mod.SPEC, "distractors", []):
            bad = {"answer": f"The answer is {wrong}.", "status": "verified"}
            assert not check_util.judge(mod.SPEC, ws, bad, g / "setup.sh")[0], (g.name, wrong)
        if meta["kind"] != "impossible":
            assert not check_util.judge(mod.SPEC, ws, {"answer": "", "status": "not_possible"},
                                        g / "setup.sh")[0]
