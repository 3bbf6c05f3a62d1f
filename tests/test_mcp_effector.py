"""MCP tools in a real effector: a spawner process forks the effector, which starts the FastMCP
demo server in its sandbox; the scripted LLM plays the executor and the agent-validator over
HTTP; test clients play the planner, the meta-validator and the operator (who answers the Law 1
approval request over the bus)."""
from __future__ import annotations

import sys

import pytest

import replies_effector as R
from effector_harness import EffectorHarness
from services.runtime import mcpconfig, tasklog
from services.runtime.mcpconfig import ServerSpec
from test_mcp import DEMO


@pytest.fixture(scope="module")
def h():
    harness = EffectorHarness(extra_env={"ARTOO_MCP_TIMEOUT_S": "120",
                                         "ARTOO_MCP_START_TIMEOUT_S": "180"})
    try:
        mcpconfig.save(harness.home, {"demo": ServerSpec(name="demo", command=sys.executable,
                                                         args=[DEMO])})
        harness.start_spawner(timeout=600)     # its zygote: slow on a loaded machine
        yield harness
    finally:
        harness.close()


def script(h, st, executor=(), agentval=()):
    st.deadline_at = max(st.deadline_at, __import__("time").time() + 400)   # a loaded machine
    for reply in executor:
        h.llm.add("executor", reply, task=st.parent_task_id)
    for reply in agentval:
        h.llm.add("agentval", reply, task=st.parent_task_id)


def mcp_call(name: str, **args) -> dict:
    return {"action": "tool", "tool": name, "arguments": args}


def test_read_only_runs_destructive_asks_the_operator_and_both_are_recorded(h):
    (h.workspace / "stale.txt").write_text("old\n")
    crit = "the price is reported and stale.txt is deleted"
    st = h.subtask("look up the widget price, then delete stale.txt", [crit])
    asked = []

    def policy(req):
        asked.append(req)
        return (True, "operator")
    h.approval_policy = policy
    script(h, st, executor=[mcp_call("demo.lookup_price", item="widget"),
                            mcp_call("demo.delete_file", path="stale.txt"),
                            R.result("widget costs 42 EUR; stale.txt deleted")],
           agentval=[R.all_met(crit, evidence="the tool printed widget: 42 EUR; deleted")])
    outcome = h.run(st, timeout=240)
    assert [a.kind for a in asked] == ["mcp"]                  # only the destructive call asked
    assert asked[0].command.startswith("demo.delete_file") and \
        asked[0].classification == "destructive"
    assert not (h.workspace / "stale.txt").exists()
    calls = outcome.tool_calls
    assert [c.tool for c in calls] == ["demo.lookup_price", "demo.delete_file"]
    assert all(c.server == "demo" and c.digest.startswith("sha256:") for c in calls)
    assert calls[0].output == "widget: 42 EUR" and calls[0].arguments == {"item": "widget"}
    # the prompt offered the tools; the task log has every call with its server and digest
    assert "demo.lookup_price" in h.llm.filter("executor", st.parent_task_id)[0].system
    logged = [e for e in tasklog.read(h.settings.tasks_dir, st.parent_task_id)
              if e.get("kind") == "tool_call"]
    assert [e["server"] for e in logged] == ["demo", "demo"]
    assert logged[0]["result_digest"] == calls[0].digest
    mcp_log = [e for e in tasklog.read(h.settings.tasks_dir, st.parent_task_id)
               if e.get("kind") == "mcp_tools"]
    assert mcp_log and mcp_log[0]["tools"] >= 5 and not mcp_log[0].get("problems")
    assert h.exited(st).reason == "completed"


def test_a_denied_approval_is_a_law1_result(h):
    (h.workspace / "keep.txt").write_text("keep\n")
    st = h.subtask("delete keep.txt with the demo tool", ["keep.txt is deleted"])
    h.approval_policy = lambda req: (False, "operator")
    script(h, st, executor=[mcp_call("demo.delete_file", path="keep.txt"),
                            R.result("could not delete: refused", status="failed")],
           agentval=[R.cannot("keep.txt is deleted", "the operator refused")])
    outcome = h.run(st, timeout=240)
    assert (h.workspace / "keep.txt").exists()
    assert outcome.tool_calls[0].law1 and "[LAW1]" in outcome.tool_calls[0].error


def test_a_crashing_server_does_not_hang_the_subtask(h):
    st = h.subtask("ask the demo server to crash, then report", ["the crash is reported"])
    script(h, st, executor=[mcp_call("demo.crash"), mcp_call("demo.lookup_price", item="gizmo"),
                            R.result("the server crashed; gizmo costs 99 EUR")],
           agentval=[R.all_met("the crash is reported", evidence="gizmo: 99 EUR")])
    outcome = h.run(st, timeout=240)
    crash, price = outcome.tool_calls
    assert "exited or closed the connection" in crash.error
    assert price.output == "gizmo: 99 EUR"                   # restarted for the next call
    assert h.exited(st).reason == "completed"
