"""MCP servers as artoo's tools (issue 32): mcp.json, the Law 1 gate from annotations and policy,
the bounded tool offer, the executor's parsing, Law 0 provenance of MCP results — and real
servers: the FastMCP demo server (tests/mcp_servers/demo_server.py) and the published
@modelcontextprotocol/server-filesystem, both run by the effector's hub inside the sandbox, and
a real effector (spawner + bus + scripted LLM) calling them."""
from __future__ import annotations

import json
import os
import sys
import time
import types
from pathlib import Path

import pytest

from conftest import REPO
from protocol.messages import ToolCallRecord
from protocol.settings import load_settings
from services.runtime import mcpconfig
from services.runtime.mcpconfig import McpConfigError, ServerSpec
from services.safety import evidence, law1, mcp
from services.safety.mcp import McpTool

DEMO = str(REPO / "tests" / "mcp_servers" / "demo_server.py")
FS_BIN = REPO / ".venv" / "mcp-npm" / "node_modules" / ".bin" / "mcp-server-filesystem"


def demo_spec(**kw) -> ServerSpec:
    return ServerSpec(name="demo", command=sys.executable, args=[DEMO], **kw)


# -- mcp.json -----------------------------------------------------------------------------------

def test_config_is_the_desktop_format_with_an_artoo_key(tmp_path):
    (tmp_path / "mcp.json").write_text(json.dumps({"mcpServers": {
        "fs": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-filesystem",
                                          "${workspace}"], "env": {"A": "1"}},
        "docs": {"url": "http://127.0.0.1:9/mcp", "headers": {"Authorization": "Bearer t"},
                 "artoo": {"policy": "ask", "tools": {"search": "allow"}, "timeout": 5}}},
        "other": {"kept": True}}))
    servers = mcpconfig.load(tmp_path)
    assert servers["fs"].transport == "stdio" and servers["docs"].transport == "http"
    assert servers["fs"].resolved("/w/s").args[-1] == "/w/s"
    assert servers["docs"].policy_for("search") == "allow"
    assert servers["docs"].policy_for("other") == "ask" and servers["fs"].policy_for("x") == ""
    servers["fs"].network = True
    mcpconfig.save(tmp_path, servers)
    data = json.loads((tmp_path / "mcp.json").read_text())
    assert data["other"] == {"kept": True}                    # other keys survive a save
    assert data["mcpServers"]["fs"]["artoo"] == {"network": True}
    assert oct((tmp_path / "mcp.json").stat().st_mode & 0o777) == "0o600"
    assert mcpconfig.load(tmp_path)["fs"].network
    for bad, words in [({"x": {"args": []}}, "either"),
                       ({"a.b": {"command": "c"}}, "server name"),
                       ({"x": {"command": "c", "artoo": {"policy": "maybe"}}}, "policy"),
                       ({"x": {"command": "c", "url": "http://h"}}, "either")]:
        (tmp_path / "mcp.json").write_text(json.dumps({"mcpServers": bad}))
        with pytest.raises(McpConfigError, match=words):
            mcpconfig.load(tmp_path)
    (tmp_path / "mcp.json").write_text("{not json")
    with pytest.raises(McpConfigError, match="not valid JSON"):
        mcpconfig.load(tmp_path)


# -- the gate -----------------------------------------------------------------------------------

def _tool(name="t", **ann) -> McpTool:
    return McpTool(server="demo", name=name, annotations=ann)


def test_law1_from_annotations_and_the_operators_policy():
    stdio, http = demo_spec(), ServerSpec(name="demo", url="http://127.0.0.1:9/mcp")
    assert mcp.classify(_tool(readOnlyHint=True), stdio).action == "run"
    assert mcp.classify(_tool(readOnlyHint=False, destructiveHint=True), stdio).action == "ask"
    v = mcp.classify(_tool(), stdio)                          # no annotations: unknown = ask
    assert (v.action, v.level) == ("ask", law1.UNKNOWN)
    assert mcp.classify(_tool(destructiveHint=False), stdio).action == "run"   # sandboxed, additive
    assert mcp.classify(_tool(destructiveHint=False), http).action == "ask"    # not sandboxed
    assert "no network" in mcp.classify(_tool(readOnlyHint=True, openWorldHint=True), stdio).reason
    # the operator's policy decides over the server's own claims
    assert mcp.classify(_tool(readOnlyHint=True), demo_spec(policy="deny")).action == "deny"
    assert mcp.classify(_tool(destructiveHint=True), demo_spec(policy="allow")).action == "run"
    assert mcp.classify(_tool(readOnlyHint=True), demo_spec(policy="ask")).action == "ask"
    per_tool = demo_spec(policy="deny", tools={"t": "allow"})
    assert mcp.classify(_tool(), per_tool).action == "run"
    assert mcp.classify(_tool("u"), per_tool).action == "deny"
    assert mcp.classify(_tool(readOnlyHint=True), stdio).level == law1.READ_ONLY
    assert _tool(idempotentHint=True).rerun_safe and not _tool(destructiveHint=True).rerun_safe


def test_the_offer_is_bounded_and_ranked_by_the_goal():
    tools = [McpTool(server="s", name=f"tool_{i}", description=f"does thing number {i}",
                     input_schema={"type": "object", "properties": {"x": {"type": "string"}}})
             for i in range(30)]
    tools.insert(17, McpTool(server="weather", name="get_forecast",
                             description="Weather forecast for a city",
                             input_schema={"type": "object", "required": ["city"],
                                           "properties": {"city": {"type": "string"},
                                                          "days": {"type": "integer"}}}))
    picked = mcp.select(tools, "What is the weather forecast for Paris tomorrow?", 4)
    assert len(picked) == 4 and picked[0].full_name == "weather.get_forecast"
    assert mcp.select(tools[:3], "anything", 8) == tools[:3]     # few tools: all of them
    lines = mcp.usage_lines(tools, local=False, budget=600)
    assert sum(len(x) + 1 for x in lines) <= 600 + 1 and 0 < len(lines) < len(tools)
    assert mcp.arg_skeleton(picked[0]) == '{"city":"<string>","days"?:<integer>}'
    assert "TOOL: weather.get_forecast" in mcp.usage_lines(picked, local=True, budget=999)[0]
    assert mcp.check_arguments(picked[0], {}).startswith("weather.get_forecast: missing")
    assert mcp.check_arguments(picked[0], {"city": "Paris"}) == ""


def test_results_render_to_text_and_a_digest():
    out, err = mcp.render_result({"content": [{"type": "text", "text": "a"},
                                              {"type": "image", "mimeType": "image/png"}]}, 100)
    assert out == "a\n[image image/png, not shown]" and err is None
    out, err = mcp.render_result({"content": [], "structuredContent": {"n": 3}}, 100)
    assert json.loads(out) == {"n": 3}
    out, err = mcp.render_result({"content": [{"type": "text", "text": "boom"}],
                                  "isError": True}, 100)
    assert "boom" in err
    assert mcp.digest({"a": 1}) == mcp.digest({"a": 1}) != mcp.digest({"a": 2})


def test_executor_reads_mcp_calls_in_both_forms():
    from services.roles.executor import ExecutorStep, parse_local_step
    for raw in ({"action": "tool", "tool": "demo.lookup_price", "arguments": {"item": "w"}},
                {"action": "tool", "tool": "demo.lookup_price", "item": "w"},
                {"action": "demo.lookup_price", "args": {"item": "w"}}):
        step = ExecutorStep.model_validate(raw)
        assert (step.action, step.tool, step.tool_args()) == ("tool", "demo.lookup_price",
                                                              {"item": "w"})
    step = parse_local_step('TOOL: demo.lookup_price {"item": "widget"}')
    assert step.tool == "demo.lookup_price" and step.tool_args() == {"item": "widget"}
    assert parse_local_step("TOOL: demo.lookup_price widget").tool_args() == {"__text__": "widget"}
    shell = ExecutorStep.model_validate({"action": "tool", "tool": "shell", "command": "ls"})
    assert shell.tool_args() == {"command": "ls"}                 # artoo's own tools unchanged


def test_law0_accepts_values_from_an_mcp_result():
    from services.roles.verifier import _outputs
    rec = ToolCallRecord(tool="demo.lookup_price", arguments={"item": "widget"},
                         target='demo.lookup_price {"item": "widget"}', output="widget: 42 EUR",
                         server="demo", digest="sha256:x")
    goal = "What does a widget cost?"
    assert evidence.unsupported_values("42 EUR", _outputs([rec]), goal) == []
    assert evidence.unsupported_values("43 EUR", _outputs([rec]), goal) == ["43"]
    # the verifier: backed by the MCP result alone -> "unverified" saying so, not a failed
    # workspace check that cannot see the server's data
    why = mcp.backed_by_mcp("42 EUR", [rec], goal)
    assert "demo.lookup_price" in why and "sha256:x" in why
    shell = ToolCallRecord(tool="shell", target="python3 -c 'print(42 * 2)'", output="84")
    assert mcp.backed_by_mcp("84 EUR", [rec, shell], goal)           # computed from MCP data
    assert mcp.backed_by_mcp("43 EUR", [rec], goal) == ""              # from nowhere: not backed
    assert mcp.backed_by_mcp("42 EUR", [shell], goal) == ""            # no MCP call


# -- real servers, through the Toolbox (the effector's gates), no bus ------------------------------

@pytest.fixture
def mcp_env(tmp_path, monkeypatch):
    home, ws = tmp_path / "home", tmp_path / "ws"
    home.mkdir()
    ws.mkdir()
    for k, v in {"ARTOO_HOME": str(home), "ARTOO_WORKSPACE": str(ws), "ARTOO_RUN_DIR": "",
                 "ARTOO_MCP_TIMEOUT_S": "120", "ARTOO_MCP_START_TIMEOUT_S": "180"}.items():
        monkeypatch.setenv(k, v)
    settings = load_settings()
    settings.ensure_dirs()
    return settings


def _toolbox(settings, servers: dict[str, ServerSpec], answer=True):
    from services.safety.mcpclient import McpHub
    from services.safety.tools import Toolbox
    mcpconfig.save(settings.home, servers)
    hub = McpHub.from_settings(settings, workspace=str(settings.workspace))
    hub.discover()
    asked: list[dict] = []

    def approve(**kw):
        asked.append(kw)
        return law1.Decision(answer, "operator", "test")
    box = Toolbox(settings, approve=approve, undo=law1.UndoStore(settings, "run-mcp"),
                  subtask_id="st1", mcp_hub=hub)
    return box, hub, asked


def test_demo_server_read_only_runs_destructive_asks_and_it_is_sandboxed(mcp_env):
    ws = Path(mcp_env.workspace)
    (ws / "old.txt").write_text("bye\n")
    box, hub, asked = _toolbox(mcp_env, {"demo": demo_spec(tools={"list_items": "deny"})})
    try:
        assert not hub.problems and "demo.lookup_price" in hub.tools
        out = box.run("demo.lookup_price", {"item": "widget"})
        assert out.output == "widget: 42 EUR" and out.error is None and not asked
        assert out.server == "demo" and out.digest.startswith("sha256:")
        who = box.run("demo.whoami", {}).output               # the sandbox: workspace, no HOME,
        assert f"cwd={ws}" in who and "home=/home/agent" in who and "no network" in who
        out = box.run("demo.delete_file", {"path": "old.txt"})
        assert asked and asked[0]["kind"] == "mcp" and asked[0]["classification"] == "destructive"
        assert out.error is None and not (ws / "old.txt").exists()
        assert law1.undo_entries(mcp_env, "run-mcp")            # an undo copy was kept first
        assert law1.restore(mcp_env, "run-mcp") and (ws / "old.txt").read_text() == "bye\n"
        denied = box.run("demo.list_items", {})
        assert denied.law1 and "[LAW1]" in denied.error and len(asked) == 1   # nobody asked
        assert "missing argument" in box.run("demo.lookup_price", {}).error
        # the cache: a second hub asks no server
        from services.safety.mcpclient import McpHub
        again = McpHub.from_settings(mcp_env, workspace=str(ws))
        assert "demo.lookup_price" in again.discover() and not again._servers
    finally:
        hub.close()
    box2, hub2, asked2 = _toolbox(mcp_env, {"demo": demo_spec()}, answer=False)
    try:
        out = box2.run("demo.add_note", {"text": "x"})         # no annotations: asks; declined
        assert asked2 and out.law1 and not (ws / "notes.txt").exists()
    finally:
        hub2.close()


def test_a_crashing_hanging_or_garbled_server_is_a_bounded_tool_error(mcp_env):
    # `slow` is the same server with a 3 s bound per call (mcp.json's timeout)
    box, hub, _ = _toolbox(mcp_env, {"demo": demo_spec(),
                                     "slow": ServerSpec(name="slow", command=sys.executable,
                                                        args=[DEMO], timeout=3)})
    try:
        out = box.run("demo.crash", {})          # noticed when the pipe closes, not by a timeout
        assert "exited or closed the connection during crash" in out.error, out.error
        assert box.run("demo.lookup_price", {"item": "gizmo"}).output == "gizmo: 99 EUR"
        out = box.run("slow.hang", {})
        assert "did not answer hang within 3s" in out.error and "stopped" in out.error
        out = box.run("slow.garbage", {})
        assert "not JSON-RPC" in out.error
        assert box.run("demo.stock_level", {"item": "widget"}).output == "widget: 17 in stock"
    finally:
        hub.close()
    bad = {"demo": ServerSpec(name="demo", command=sys.executable, args=["-c", "print('hi')"])}
    box, hub, _ = _toolbox(mcp_env, bad)
    try:
        assert "demo" in hub.problems and not hub.tools          # never started: no tools
    finally:
        hub.close()


@pytest.mark.skipif(not FS_BIN.exists(), reason="@modelcontextprotocol/server-filesystem is not "
                    "installed (scripts/setup installs it when npm exists)")
def test_the_published_filesystem_server(mcp_env):
    ws = Path(mcp_env.workspace)
    (ws / "hello.txt").write_text("hello world\n")
    spec = ServerSpec(name="fs", command=str(FS_BIN), args=["${workspace}"])
    box, hub, asked = _toolbox(mcp_env, {"fs": spec}, answer=False)
    try:
        assert not hub.problems, hub.problems
        out = box.run("fs.read_text_file", {"path": str(ws / "hello.txt")})
        assert out.output == "hello world\n" and not asked
        out = box.run("fs.write_file", {"path": str(ws / "hello.txt"), "content": "gone"})
        assert asked and out.law1 and (ws / "hello.txt").read_text() == "hello world\n"
        out = box.run("fs.read_text_file", {"path": "/etc/hostname"})
        assert out.error                                         # outside its allowed dir
    finally:
        hub.close()


def test_mcp_calls_are_journaled_like_shell_calls(mcp_env):
    """A re-run after a crash reuses a finished MCP call's record (server and digest included)
    and never repeats a half-run call of a tool that may act outside the workspace."""
    from protocol.messages import SubTask
    from services.roles.executor import Executor, signature
    from services.runtime.journal import ToolJournal
    from services.safety.tools import ToolOutput

    class Box:
        workspace = str(mcp_env.workspace)
        ran: list = []
        sandbox = types.SimpleNamespace(mode="bubblewrap")   # what the tool span records
        network = False

        def rerun_safe(self, tool):
            return tool != "remote.send"

        def may_change(self, tool, args):
            return True                     # an MCP tool (Toolbox.may_change)

        def run(self, tool, args):
            self.ran.append(tool)
            return ToolOutput(output="fresh", target=tool, server=tool.split(".")[0],
                              digest="sha256:new")

    st = SubTask(subtask_id="st-j", parent_task_id="run-j", intent="x")
    journal = ToolJournal(mcp_env, "run-j", "st-j")
    lines = [
        {"key": ToolJournal.key(1, 1, signature("demo.lookup_price", {"item": "w"})),
         "state": "finished", "output": "widget: 42 EUR", "error": None, "target": "t",
         "server": "demo", "result_digest": "sha256:old", "by": "earlier"},
        {"key": ToolJournal.key(1, 2, signature("remote.send", {"to": "a"})),
         "state": "started", "tool": "remote.send", "args": {"to": "a"}, "by": "earlier",
         "digest": __import__("services.safety.evidence", fromlist=["x"]).digest(
             str(mcp_env.workspace))}]
    journal.dir.mkdir(parents=True, exist_ok=True)
    journal.path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    box = Box()
    ex = Executor(st, None, box, mcp_env, journal=ToolJournal(mcp_env, "run-j", "st-j"))
    reused = ex._run_once(1, 1, "demo.lookup_price", {"item": "w"},
                          signature("demo.lookup_price", {"item": "w"}))
    assert (reused.output, reused.server, reused.digest) == ("widget: 42 EUR", "demo",
                                                             "sha256:old")
    held = ex._run_once(1, 2, "remote.send", {"to": "a"}, signature("remote.send", {"to": "a"}))
    assert held.output.startswith("NOT RUN AGAIN") and box.ran == []
    fresh = ex._run_once(1, 3, "demo.stock_level", {"item": "w"},
                         signature("demo.stock_level", {"item": "w"}))
    assert fresh.digest == "sha256:new" and box.ran == ["demo.stock_level"]
    last = json.loads(journal.path.read_text().splitlines()[-1])
    assert last["state"] == "finished" and last["result_digest"] == "sha256:new"
