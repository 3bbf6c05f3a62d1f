"""The LLM client against a real scripted HTTP server: tiers, tolerant parsing, repair, retries,
accounting."""
from __future__ import annotations

import json

import pytest
from pydantic import BaseModel

from scripted_llm import Delay, Drop, Hangup, Http, ScriptedLLM
from services.runtime import llm_http, tasklog
from services.runtime.llm import (BudgetSpent, Budgeted, CallBudget, LLMClient, LLMError,
                                  extract_json, parse_model, strip_reasoning, tier_config)


class Plan(BaseModel):
    steps: list[str]
    done: bool = False


@pytest.fixture
def llm_server():
    with ScriptedLLM() as server:
        yield server


@pytest.fixture
def client(llm_server, settings, monkeypatch):
    for key, value in llm_server.env().items():
        monkeypatch.setenv(key, value)
    monkeypatch.setenv("ARTOO_LLM_BACKOFF_S", "0.01")
    from protocol.settings import load_settings
    return LLMClient.for_role("planner", load_settings())


def test_strip_reasoning_and_extract():
    assert strip_reasoning("<think>hmm</think> hi") == "hi"
    assert strip_reasoning("ok <think>never closed") == "ok"
    assert extract_json('Sure! ```json\n{"a": 1}\n``` done') == {"a": 1}
    assert extract_json('prefix {"a": {"b": [1, 2]}} trailing {"c": 3}') == {"a": {"b": [1, 2]}}
    assert extract_json("<think>{not json}</think>[1, 2]") == [1, 2]
    with pytest.raises(ValueError):
        extract_json("no json here at all")


def test_extract_json_never_returns_a_fragment_of_broken_json():
    broken = '{"task_criteria": [], "subtasks": [{"intent": "count", "success_criteria": [}'
    with pytest.raises(ValueError):
        extract_json(broken)
    assert extract_json('Here is the plan: {"a": 1}') == {"a": 1}
    assert extract_json('{broken} then {"ok": true}') == {"ok": True}


def test_parse_model_wraps_bare_list_and_reports_schema_errors():
    assert parse_model(Plan, '["a", "b"]').steps == ["a", "b"]
    with pytest.raises(ValueError, match="schema"):
        parse_model(Plan, '{"steps": "not a list"}')


def test_tier_fallback_and_normalisation():
    env = {"OPENAI_BASE_URL": "http://x/v1/chat/completions/", "OPENAI_API_KEY": "k",
           "OPENAI_MODEL": "m", "TOOL_MODEL": "small"}
    brain, tool = tier_config("BRAIN", env=env), tier_config("TOOL", env=env)
    assert brain.base_url == "http://x/v1" and brain.model == "m" and not brain.local
    assert tool.model == "small" and tool.api_key == "k"


def test_the_roles_of_one_process_share_a_connection_per_endpoint(client, llm_server):
    """An effector's executor, validator and checker (and any two roles of one process) call the
    same endpoint over one kept-alive connection, not one each."""
    from protocol.settings import load_settings
    other = LLMClient.for_role("agentval", load_settings())
    for role, c in (("planner", client), ("agentval", other), ("planner", client)):
        llm_server.add(role, "ok")
        assert c.complete_text("sys", "user") == "ok"
    assert len(llm_server.requests) == 3
    assert len({r.peer for r in llm_server.requests}) == 1


def test_calls_take_the_plain_http_path_and_a_connection_the_server_closed_is_replaced(
        client, llm_server):
    """A plain endpoint is called over http.client (llm_http.py) with the SDK's headers; a
    kept-alive connection the server closed while the client was idle (its keep-alive time ran
    out) is found closed before it is reused, so the next call neither fails nor retries."""
    assert client._plain is not None
    seen = []
    client.on_usage = seen.append
    llm_server.add("planner", Hangup("first")).add("planner", "second")
    assert client.complete_text("s", "u") == "first"
    with llm_server._arrived:
        assert llm_server._arrived.wait_for(lambda: llm_server.hangups == 1, 5)
    assert client.complete_text("s", "u") == "second"
    assert [u.ok for u in seen] == [True, True], "no failed attempt before the second answer"
    first, second = llm_server.requests
    assert first.peer != second.peer and first.role == second.role == "planner"


def test_artoo_llm_transport_sdk_and_a_proxy_keep_calls_on_the_sdks_own_path(
        llm_server, settings, monkeypatch):
    for key, value in llm_server.env().items():
        monkeypatch.setenv(key, value)
    monkeypatch.setenv("ARTOO_LLM_TRANSPORT", "sdk")
    from protocol.settings import load_settings
    client = LLMClient.for_role("executor", load_settings())
    assert client._plain is None
    llm_server.add("executor", "via the sdk")
    assert client.complete_text("s", "u") == "via the sdk"
    base = llm_server.base_url
    assert llm_http.eligible(base) and not llm_http.eligible(base, "sdk")
    assert not llm_http.eligible("unix:///tmp/x.sock")
    monkeypatch.setenv("HTTP_PROXY", "http://proxy.invalid:3128")
    assert not llm_http.eligible(base)                   # httpx would go through the proxy
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    assert llm_http.eligible(base)                       # ... but not for this host


def test_a_request_given_its_own_time_out_is_bound_by_it():
    """A spare's warm-up GET waits 2 s, not the endpoint's minutes: `timeout_s` bounds the
    connect and each read of that one request."""
    import socket
    import threading
    import openai
    silent = socket.create_server(("127.0.0.1", 0))   # accepts, never answers
    try:
        plain = llm_http.PlainEndpoint(
            openai.OpenAI(base_url=f"http://127.0.0.1:{silent.getsockname()[1]}/v1",
                          api_key="k", max_retries=0), timeout_s=120.0)
        out: list = []

        def ask():
            try:
                plain.call("GET", "/models", timeout_s=0.2)
            except Exception as exc:  # noqa: BLE001 - the test reads it
                out.append(exc)
        worker = threading.Thread(target=ask, daemon=True)
        worker.start()
        worker.join(10)
        assert not worker.is_alive(), "the request waited for the endpoint's own time-out"
        assert isinstance(out[0], openai.APITimeoutError)
    finally:
        silent.close()


def test_json_with_prose_and_schema_requested(client, llm_server):
    llm_server.add("planner", 'Here you go:\n```json\n{"steps": ["ls"], "done": true}\n```')
    plan = client.complete_json(Plan, "sys", "user", task_id="run-1")
    assert plan.steps == ["ls"] and plan.done
    req = llm_server.filter("planner")[0]
    # the body as built reaches the server whole (it goes to the SDK as extra_body)
    assert req.body["model"] == client.config.model
    assert req.body["messages"] == [{"role": "system", "content": "sys"},
                                    {"role": "user", "content": "user"}]
    assert req.body["response_format"]["type"] == "json_schema"
    assert req.body["response_format"]["json_schema"]["schema"]["properties"]["steps"]
    assert req.task == "run-1"


def test_one_repair_reask_then_error(client, llm_server):
    llm_server.add("planner", "I think you should list files.")
    llm_server.add("planner", {"steps": ["ls"]})
    assert client.complete_json(Plan, "s", "u").steps == ["ls"]
    assert "invalid" in llm_server.filter("planner")[-1].user
    llm_server.add("planner", "prose", times=2)
    with pytest.raises(LLMError, match="after one repair"):
        client.complete_json(Plan, "s", "u")


def test_retries_on_5xx_429_and_dropped_connections(client, llm_server):
    llm_server.add("planner", Http(500)).add("planner", Http(429)).add("planner", Drop())
    llm_server.add("planner", {"steps": []})
    assert client.complete_json(Plan, "s", "u").steps == []
    assert llm_server.calls("planner") == 4


def test_a_200_that_is_not_a_chat_completion_is_retried_then_a_clear_error(client, llm_server):
    """The reply is read as plain JSON (llm.post_chat): a proxy's HTML page, a completion with
    no choices or a body cut short is an error of that request, retried like a 5xx."""
    llm_server.add("planner", Http(200, "<html>gateway</html>"))
    llm_server.add("planner", Http(200, '{"object": "chat.completion", "choices": []}'))
    llm_server.add("planner", {"steps": ["ls"]})
    assert client.complete_json(Plan, "s", "u").steps == ["ls"]
    assert llm_server.calls("planner") == 3
    llm_server.add("planner", Http(200, '{"choices": [{"message": {"con'),
                   times=client.settings.llm_retries + 1)
    with pytest.raises(LLMError, match="not a chat completion"):
        client.complete_text("s", "u")
    assert llm_server.calls("planner") == 3 + client.settings.llm_retries + 1
    assert client.last_usage.latency_ms > 0
    parts = {"choices": [{"message": {"content": [{"type": "text", "text": '{"steps": '},
                                                  {"type": "text", "text": '["ls"]}'}]}}]}
    llm_server.add("planner", Http(200, json.dumps(parts)))
    assert client.complete_json(Plan, "s", "u").steps == ["ls"]     # content parts are joined


def test_the_budget_counts_every_request_retries_and_repairs_included(client, llm_server):
    """A retry after a failed request and a JSON repair re-ask are model calls like any other:
    a budget of 3 lets exactly 3 requests reach the server, the 4th is never made."""
    budget = CallBudget(3)
    budgeted = Budgeted(client, budget)
    llm_server.add("planner", Http(500)).add("planner", "prose, not JSON")
    llm_server.add("planner", {"steps": ["ls"]}, times=5)
    assert budgeted.complete_json(Plan, "s", "u").steps == ["ls"]   # 500, prose, repair
    assert llm_server.calls("planner") == 3 and budget.used == 3
    with pytest.raises(BudgetSpent):
        budgeted.complete_text("s", "u")
    assert llm_server.calls("planner") == 3


def test_calls_kept_back_for_the_checks_are_not_the_executors():
    """The executor leaves the calls it `keep`s to the checkers: with 3 calls and 1 kept, it
    makes 2 and the checker the third; a budget of one call stays the executor's."""
    budget = CallBudget(3)
    budget.take(keep=1)
    budget.take(keep=1)
    with pytest.raises(BudgetSpent, match="kept for the independent check"):
        budget.take(keep=1)
    budget.take()                      # the checker's call
    with pytest.raises(BudgetSpent, match="is spent"):
        budget.take()
    single = CallBudget(1)
    single.take(keep=1)
    assert single.used == 1


def test_bounded_retries_then_clear_error(client, llm_server):
    llm_server.add("planner", Http(503), times=10)
    with pytest.raises(LLMError, match="503"):
        client.complete_text("s", "u")
    assert llm_server.calls("planner") == client.settings.llm_retries + 1


def test_client_error_is_not_retried(client, llm_server):
    llm_server.add("planner", Http(401, '{"error": {"message": "bad key"}}'), times=5)
    with pytest.raises(LLMError, match="401"):
        client.complete_text("s", "u")
    assert llm_server.calls("planner") == 1


def test_timeout_is_an_error(llm_server, settings, monkeypatch):
    for key, value in llm_server.env().items():
        monkeypatch.setenv(key, value)
    monkeypatch.setenv("ARTOO_LLM_TIMEOUT_S", "0.3")
    monkeypatch.setenv("ARTOO_LLM_RETRIES", "0")
    from protocol.settings import load_settings
    client = LLMClient.for_role("executor", load_settings())
    llm_server.add("executor", Delay(1.0, "late"))
    with pytest.raises(LLMError, match="Timeout"):
        client.complete_text("s", "u")


def test_accounting_in_task_log(client, llm_server, settings):
    seen = []
    client.on_usage = seen.append
    llm_server.add("planner", "hello there")
    assert client.complete_text("system prompt", "user prompt", task_id="run-42") == "hello there"
    assert seen and seen[0].role == "planner" and seen[0].tier == "BRAIN" and seen[0].ok
    events = [e for e in tasklog.read(settings.tasks_dir, "run-42") if e["kind"] == "llm_call"]
    assert events and events[0]["messages"][0]["content"] == "system prompt"
    assert events[0]["response"] == "hello there" and events[0]["completion_tokens"] >= 1


def test_degrades_json_mode_when_endpoint_rejects_schema(client, llm_server):
    llm_server.add("planner", Http(400, json.dumps({"error": {"message": "response_format json_schema unsupported"}})))
    llm_server.add("planner", {"steps": ["x"]})
    assert client.complete_json(Plan, "s", "u").steps == ["x"]
    assert llm_server.filter("planner")[-1].body["response_format"]["type"] == "json_object"


def test_degrades_json_mode_when_endpoint_refuses_schema_with_500(client, llm_server):
    """llama.cpp's server answers `json_schema` with HTTP 500 and a pydantic error naming
    response_format: degrade at once instead of retrying the same request."""
    refusal = json.dumps({"error": {"message": "1 validation error for CreateChatCompletionRequest "
                                    "response_format.type: Input should be 'text' or "
                                    "'json_object'", "type": "internal_server_error"}})
    llm_server.add("planner", Http(500, refusal))
    llm_server.add("planner", {"steps": ["x"]})
    assert client.complete_json(Plan, "s", "u").steps == ["x"]
    sent = llm_server.filter("planner")
    assert len(sent) == 2
    assert sent[0].body["response_format"]["type"] == "json_schema"
    assert sent[1].body["response_format"] == {"type": "json_object", "schema": Plan.model_json_schema()}


def test_plain_500_is_retried_not_degraded(client, llm_server):
    llm_server.add("planner", Http(500))
    llm_server.add("planner", {"steps": ["y"]})
    assert client.complete_json(Plan, "s", "u").steps == ["y"]
    assert [r.body["response_format"]["type"] for r in llm_server.filter("planner")] == \
        ["json_schema", "json_schema"]


def test_grammar_safe_schema_types_every_any_field():
    """llama.cpp cannot compile an untyped node (a pydantic `Any`) and then constrains nothing."""
    from typing import Any, Optional

    from services.runtime.llm import grammar_safe_schema

    class Step(BaseModel):
        action: str
        output: Any = None
        items: list[Any] = []
        note: Optional[str] = None

    safe = grammar_safe_schema(Step.model_json_schema())
    props = safe["properties"]
    assert {"type": "string"} in props["output"]["anyOf"] and props["output"]["default"] is None
    assert {"type": "object"} in props["items"]["items"]["anyOf"]
    assert props["note"] == Step.model_json_schema()["properties"]["note"]   # typed: untouched
    assert props["action"] == {"title": "Action", "type": "string"}
    grammar = pytest.importorskip("llama_cpp.llama_grammar")
    grammar.json_schema_to_gbnf(json.dumps(safe))   # raises on a node it cannot compile


def test_a_question_asked_again_at_temperature_0_costs_no_call(client, llm_server):
    """Same system, user and limit at temperature 0: the answer it got, no request, no budget;
    another question, or a sample at a higher temperature, goes to the model."""
    budgeted = Budgeted(client, CallBudget(5))
    llm_server.add("planner", "first", times=1).add("planner", "second", times=3)
    assert budgeted.complete_text("s", "u", temperature=0) == "first"
    assert budgeted.complete_text("s", "u", temperature=0) == "first"
    assert llm_server.calls("planner") == 1 and budgeted.budget.used == 1
    assert budgeted.complete_text("s", "other", temperature=0) == "second"
    assert budgeted.complete_text("s", "u", temperature=0.7) == "second"
    assert budgeted.complete_text("s", "u", temperature=0.7) == "second"
    assert llm_server.calls("planner") == 4
