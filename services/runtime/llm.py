"""The one LLM client of artoo (DESIGN §10), over the `openai` SDK.

Tiers: BRAIN (perceiver, planner, metaval) and TOOL (executor, agentval, the Dreamer), configured by
`BRAIN_*` / `TOOL_*` falling back to `OPENAI_*` (`_API_KEY`, `_BASE_URL`, `_MODEL`,
`_ENABLE_THINKING`). With no endpoint configured anywhere, the bundled local model is used.

JSON outputs are requested with the expected pydantic model's JSON schema, parsed tolerantly (code
fences, `<think>` blocks, prose around the first JSON value), validated, and re-asked once with the
validation error when invalid. Transport errors, 429 and 5xx are retried a bounded number of times
with jittered backoff. Every call is accounted (tokens, latency) per role and per task: published
as LlmUsage when a bus client is attached and logged (with the full prompts) to the task log.
"""
from __future__ import annotations

import functools
import json
import logging
import os
import random
import re
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable, TypeVar

import openai
from pydantic import BaseModel, ValidationError

from protocol.messages import LlmUsage
from protocol.settings import Settings, load_settings

from . import llm_http, tasklog, telemetry

log = logging.getLogger("artoo.llm")
T = TypeVar("T", bound=BaseModel)

ROLE_TIERS = {"perceiver": "BRAIN", "planner": "BRAIN", "metaval": "BRAIN",
              "executor": "TOOL", "agentval": "TOOL", "memory": "TOOL", "dreamer": "TOOL",
              "world": "TOOL"}
JSON_MODES = ("json_schema", "json_object_schema", "json_object", "none")
LOCAL_MAX_TOKENS = 384     # default completion budget per call on the bundled local model
LOCAL_TEMPERATURE = 0.0
# A question asked again whose last answer was rejected, sampled so it may take another way (at
# temperature 0 the 1.5B repeated 10 of 11 crashed checking programs verbatim): the checker's
# resample (k-of-N) and repair, and the executor's re-ask after a reply it could not act on.
RESAMPLE_TEMPERATURE = 0.7
ANSWERS_KEPT = 32


class LLMError(Exception):
    """An LLM call that produced no usable answer; the message says why, never the raw reply."""


class BudgetSpent(LLMError):
    """The task's LLM call budget has no call left for this subtask: the call is not made."""


class CallBudget:
    """A bound on the LLM calls of one subtask, shared by its executor and its checkers (the
    dispatcher gives each subtask what is left of the task's budget). A call past it is not made:
    it raises BudgetSpent, and the round ends with what it has. A client may `keep` calls back
    for others: the executor leaves the last call to the independent check, so an answer never
    goes unchecked because the executor spent the whole budget."""

    def __init__(self, limit: int):
        self.limit = max(0, int(limit))
        self.used = 0
        self._lock = threading.Lock()

    def take(self, keep: int = 0) -> None:
        with self._lock:
            # a budget of one call is the executor's: an answer is worth more than a check
            reserve = keep if self.limit > keep else 0
            if self.used >= self.limit - reserve:
                left = "spent" if self.used >= self.limit else \
                    f"spent for this role ({reserve} call(s) kept for the independent check)"
                raise BudgetSpent(f"the task's LLM call budget is {left} ({self.used} call(s) "
                                  f"of this subtask's {self.limit})")
            self.used += 1


class Budgeted:
    """An LLM client whose requests count against a CallBudget (everything else passes
    through). Every request to the model counts, a retry after a time-out and a JSON repair
    re-ask included: the bound is on model calls made, as the task log records them."""

    def __init__(self, llm, budget: CallBudget, keep: int = 0):
        object.__setattr__(self, "_llm", llm)
        llm.budget = budget
        llm.budget_keep = keep

    def __getattr__(self, name):
        return getattr(self._llm, name)

    def __setattr__(self, name, value):
        setattr(self._llm, name, value)


@dataclass(frozen=True)
class TierConfig:
    tier: str
    base_url: str
    api_key: str
    model: str
    thinking: bool
    local: bool            # the bundled llama.cpp server (small budgets, compact prompts)
    json_mode: str

    def describe(self) -> str:
        where = "local llama.cpp" if self.local else self.base_url
        return f"{where} model={self.model}"


def _normalise_base_url(url: str) -> str:
    url = url.strip().rstrip("/")
    if url.endswith("/chat/completions"):
        url = url[: -len("/chat/completions")]
    return url


def tier_config(tier: str, settings: Settings | None = None,
                env: dict[str, str] | None = None) -> TierConfig:
    """Resolve a tier's endpoint: `<TIER>_*` then `OPENAI_*`, else the bundled local model."""
    env = env if env is not None else os.environ

    def get(name: str) -> str:
        return env.get(f"{tier}_{name}") or env.get(f"OPENAI_{name}") or ""

    base_url = _normalise_base_url(get("BASE_URL"))
    json_mode = env.get("ARTOO_LLM_JSON_MODE", "")
    if base_url:
        return TierConfig(tier, base_url, get("API_KEY") or "none", get("MODEL") or "default",
                          get("ENABLE_THINKING").lower() == "true", False,
                          json_mode or "json_schema")
    settings = settings or load_settings()
    try:
        from . import local_model
        local_url = local_model.local_base_url(settings)
        model = local_model.served_model_name(settings)
    except (ImportError, AttributeError, OSError) as exc:
        raise LLMError(f"no LLM endpoint configured for tier {tier} (set OPENAI_BASE_URL or "
                       f"{tier}_BASE_URL) and the bundled local model is unavailable: {exc}") from exc
    return TierConfig(tier, local_url, "local", model, False, True,
                      json_mode or "json_object_schema")


# ---------------------------------------------------------------------------------------------
# tolerant parsing
# ---------------------------------------------------------------------------------------------

_THINK = re.compile(r"<think>.*?</think>", re.S | re.I)
_FENCE = re.compile(r"```[a-zA-Z0-9_-]*\s*\n?(.*?)```", re.S)


def strip_reasoning(text: str) -> str:
    """Remove <think> blocks (an unclosed one swallows the rest) and surrounding whitespace."""
    text = _THINK.sub("", text or "")
    lower = text.lower()
    if "<think>" in lower:
        text = text[: lower.index("<think>")]
    return text.strip()


def extract_json(text: str) -> Any:
    """The first JSON value in an LLM reply: fenced blocks first, then the first decodable
    object/array anywhere in the prose. Raises ValueError when there is none."""
    text = strip_reasoning(text)
    candidates = [m.group(1) for m in _FENCE.finditer(text)] + [text]
    decoder = json.JSONDecoder()
    for chunk in candidates:
        for i, ch in enumerate(chunk):
            if ch in "{[" and not _nested(chunk, i):
                try:
                    value, _ = decoder.raw_decode(chunk, i)
                    return value
                except ValueError:
                    continue
    raise ValueError("no JSON value found in the reply")


_NESTED_BEFORE = re.compile(r'(?:"\s*:|[,\[{])\s*$')


def _nested(chunk: str, i: int) -> bool:
    """True when position i is a value inside a (broken) outer JSON document — after `"key":`, a
    comma or an opening bracket — so a truncated reply never yields one of its inner fragments."""
    return bool(_NESTED_BEFORE.search(chunk[max(0, i - 40):i]))


def parse_model(model: type[T], text: str) -> T:
    """Tolerant parse + validation; raises ValueError with a short reason."""
    value = extract_json(text)
    # A model with one list field may come back as a bare list.
    if isinstance(value, list):
        list_fields = [n for n, f in model.model_fields.items()
                       if getattr(f.annotation, "__origin__", None) is list]
        if len(list_fields) == 1:
            value = {list_fields[0]: value}
    try:
        return model.model_validate(value)
    except ValidationError as exc:
        errs = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors()[:5])
        raise ValueError(f"reply does not match the schema: {errs}") from None


@functools.lru_cache(maxsize=64)
def _schema_for(model: type[BaseModel]) -> dict:
    """A model's JSON schema, built once per process (pydantic takes ~25 ms the first time)."""
    return model.model_json_schema()


@functools.lru_cache(maxsize=64)
def _grammar_schema_for(model: type[BaseModel]) -> dict:
    return grammar_safe_schema(_schema_for(model))


_ANY_JSON = {"anyOf": [{"type": "string"}, {"type": "number"}, {"type": "boolean"},
                      {"type": "null"}, {"type": "array"}, {"type": "object"}]}
_SCHEMA_KEYS = ("type", "$ref", "anyOf", "oneOf", "allOf", "enum", "const", "properties", "items")


def grammar_safe_schema(schema: Any) -> Any:
    """A copy of a JSON schema that llama.cpp's schema-to-grammar converter accepts: a field typed
    `Any` (pydantic emits `{}` or only a title/default) makes the converter give up and the server
    silently falls back to "any JSON object", so such nodes become an explicit any-JSON anyOf."""
    if isinstance(schema, list):
        return [grammar_safe_schema(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out = {}
    for key, value in schema.items():
        if key in ("properties", "$defs", "definitions") and isinstance(value, dict):
            out[key] = {k: grammar_safe_schema(v) for k, v in value.items()}
        elif key in ("items", "anyOf", "oneOf", "allOf", "additionalProperties") \
                and isinstance(value, (dict, list)):
            out[key] = grammar_safe_schema(value)
        else:
            out[key] = value
    if not any(k in out for k in _SCHEMA_KEYS):
        out.update(_ANY_JSON)
    return out


# ---------------------------------------------------------------------------------------------
# the client
# ---------------------------------------------------------------------------------------------

@dataclass
class Usage:
    prompt_tokens: int = 0
    completion_tokens: int = 0
    latency_ms: float = 0.0


class BadReply(Exception):
    """An endpoint's HTTP 200 whose body is not a chat completion (retried like a 5xx)."""


@dataclass
class ChatReply:
    """What a call reads from a chat completion."""
    text: str
    prompt_tokens: int
    completion_tokens: int
    finish: str | None
    model: str | None


def post_chat(sdk: "openai.OpenAI", body: dict, headers: dict,
              plain: "llm_http.PlainEndpoint | None" = None) -> ChatReply:
    """POST /chat/completions with `body` sent as it is and the reply read as plain JSON: on the
    endpoint's plain HTTP path when it has one (llm_http.py), else through the SDK's request
    path (auth, timeouts, its typed HTTP errors either way). `chat.completions.create` would walk
    the body through its typed transform and build its pydantic reply models to be read once:
    ~0.25 ms of CPU per call warm, ~1 ms on a forked effector's first call."""
    if plain is not None:
        raw = plain.call("POST", "/chat/completions", body, headers)
    else:
        raw = sdk.post("/chat/completions", cast_to=bytes, body=body,
                       options={"headers": headers})
    try:
        data = json.loads(raw)
        choice = data["choices"][0]
        text = choice["message"].get("content") or ""
        if isinstance(text, list):      # content parts: [{"type": "text", "text": ...}, ...]
            text = "".join(p.get("text") or "" for p in text if isinstance(p, dict))
        usage = data.get("usage") or {}
        return ChatReply(text if isinstance(text, str) else json.dumps(text),
                         int(usage.get("prompt_tokens") or 0),
                         int(usage.get("completion_tokens") or 0),
                         choice.get("finish_reason"), data.get("model"))
    except (ValueError, TypeError, KeyError, IndexError, AttributeError) as exc:
        raise BadReply(f"not a chat completion ({type(exc).__name__}): "
                       f"{bytes(raw[:120])!r}") from None


_warm_lock = threading.Lock()
_warmed = False


def warm_sdk() -> None:
    """Pay the openai SDK's lazy first-call cost (imports, request building, response parsing,
    ~120 ms) once per process and offline: one structured-output call through an in-memory
    transport answering a canned completion. A process that forks workers (the spawner's zygote)
    does this before forking, so no effector pays it on its first real call."""
    global _warmed
    with _warm_lock:
        if _warmed:
            return
        _warmed = True
    try:
        try:
            import httpx2 as httpx_mod  # the HTTP client this openai build uses
        except ImportError:
            import httpx as httpx_mod
        canned = json.dumps({
            "id": "warm", "object": "chat.completion", "created": 0, "model": "warm",
            "choices": [{"index": 0, "finish_reason": "stop",
                         "message": {"role": "assistant", "content": "{}"}}],
            "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}}).encode()
        transport = httpx_mod.MockTransport(
            lambda request: httpx_mod.Response(200, content=canned,
                                               headers={"content-type": "application/json"}))
        with httpx_mod.Client(transport=transport) as http:
            probe = openai.OpenAI(base_url="http://warm.invalid/v1", api_key="warm",
                                  max_retries=0, http_client=http)
            reply = post_chat(probe, {  # the way LLMClient._chat calls it
                "model": "warm", "messages": [{"role": "user", "content": "."}],
                "response_format": {"type": "json_schema", "json_schema": {
                    "name": "Warm", "schema": {"type": "object"}, "strict": False}}},
                {"X-Artoo-Role": "warm"})
            extract_json(reply.text or "{}")
    except Exception:  # warming is an optimisation; never fail a role over it
        log.debug("SDK warm-up failed", exc_info=True)


def warm_fork(timeout_s: float = 2.0) -> None:
    """Ready a forked process's first model call before it is needed (a spare effector does
    this while it waits for its subtask): one `GET /models` per endpoint this process has a
    client for, on the connection the first call takes — the plain HTTP path's connection of
    this thread (the subtask's calls run on it), or the SDK pool's — and copies from the zygote
    now the pages that path touches. Measured in a forked child against the scripted server:
    the first call ~6–7 ms of CPU and of wall time without it, ~2–3 after it (the GET 4–6 ms of
    CPU, off the subtask's path; the SDK's path). Errors are ignored: the call then opens its
    own connection as before."""
    with _SDKS_LOCK:
        sdks = list(_SDKS.values())
    for sdk, plain in sdks:
        try:
            if plain is not None:
                plain.call("GET", "/models", timeout_s=timeout_s)
            else:
                sdk.get("/models", cast_to=bytes,
                        options={"timeout": timeout_s, "max_retries": 0})
        except Exception as exc:  # noqa: BLE001 - an endpoint without /models, or down
            log.debug("pre-connect to %s failed: %s", sdk.base_url, exc)


_RECENT_MS: dict[str, float] = {}    # endpoint -> its last answered call's latency, this process
# endpoint -> its SDK client and its plain HTTP path (None: the SDK's path only)
_SDKS: dict[tuple, tuple["openai.OpenAI", "llm_http.PlainEndpoint | None"]] = {}
_SDKS_LOCK = threading.Lock()


def _sdk_for(base_url: str, api_key: str, timeout_s: float, transport: str = "auto"
             ) -> tuple["openai.OpenAI", "llm_http.PlainEndpoint | None"]:
    """One SDK client (one connection pool) and one plain HTTP path (a connection per thread)
    per endpoint in a process: the effector's executor, validator and checker share a kept-alive
    connection instead of opening one each (~0.6 ms on each first call here). A zygote's,
    built before it forks, has no connection open yet."""
    key = (base_url, api_key, timeout_s)
    with _SDKS_LOCK:
        pair = _SDKS.get(key)
        if pair is None:
            sdk = openai.OpenAI(base_url=base_url, api_key=api_key, timeout=timeout_s,
                                max_retries=0)
            pair = _SDKS[key] = (sdk, llm_http.PlainEndpoint(sdk, timeout_s)
                                 if llm_http.eligible(str(sdk.base_url), transport) else None)
        return pair


class LLMClient:
    """One role's access to its tier. Thread-safe enough for concurrent calls (the SDK is)."""

    def __init__(self, role: str, config: TierConfig, settings: Settings, bus=None,
                 on_usage: Callable[[LlmUsage], None] | None = None):
        self.role = role
        self.config = config
        self.settings = settings
        self.bus = bus
        self.on_usage = on_usage
        self.budget: CallBudget | None = None     # set by Budgeted: each request takes one
        self.budget_keep = 0                      # calls of it this client leaves to others
        self.last_usage = Usage()
        self._answers: dict[tuple, str] = {}      # complete_text at temperature 0 (see there)
        self._sdk, self._plain = _sdk_for(config.base_url, config.api_key,
                                          settings.llm_timeout_s, settings.llm_transport)

    @classmethod
    def for_role(cls, role: str, settings: Settings | None = None, bus=None,
                 **kwargs) -> "LLMClient":
        settings = settings or load_settings()
        tier = ROLE_TIERS.get(role, "TOOL")
        client = cls(role, tier_config(tier, settings), settings, bus=bus, **kwargs)
        warm_sdk()
        return client

    @property
    def local(self) -> bool:
        return self.config.local

    # -- public API --------------------------------------------------------------------------
    def complete_text(self, system: str, user: str, *, task_id: str = "",
                      max_tokens: int | None = None, temperature: float | None = None) -> str:
        """`temperature` overrides the tier's (a second sample of the same question that may
        take another way: k-of-N on the checker). At temperature 0 a question asked again gets
        the answer it got, without a model call: the checker, standing in a form for one that
        derived nothing, asked again the very question whose program had crashed (~16 s)."""
        effective = temperature if temperature is not None else \
            LOCAL_TEMPERATURE if self.config.local else None
        key = (system, user, max_tokens) if effective == 0 else None
        if key in self._answers:
            return self._answers[key]
        messages = [{"role": "system", "content": system}, {"role": "user", "content": user}]
        text = strip_reasoning(self._chat(messages, None, task_id, max_tokens, temperature))
        if key is not None:
            if len(self._answers) >= ANSWERS_KEPT:       # long-lived roles: the oldest goes
                self._answers.pop(next(iter(self._answers)))
            self._answers[key] = text
        return text

    def complete_json(self, model: type[T], system: str, user: str, *, task_id: str = "",
                      max_tokens: int | None = None) -> T:
        """Ask for a JSON value matching `model`; one repair re-ask on invalid output."""
        messages = [{"role": "system", "content": system}, {"role": "user", "content": user}]
        text = self._chat(messages, model, task_id, max_tokens)
        try:
            return parse_model(model, text)
        except ValueError as first:
            log.info("%s: invalid JSON reply (%s); asking once to repair", self.role, first)
            messages += [{"role": "assistant", "content": text[:4000]},
                         {"role": "user", "content":
                          f"That reply was invalid: {first}. Reply with only the JSON value that "
                          f"matches the schema, no prose."}]
            text = self._chat(messages, model, task_id, max_tokens)
            try:
                return parse_model(model, text)
            except ValueError as second:
                raise LLMError(f"{self.role}: invalid LLM output after one repair: {second}") from None

    # -- transport ---------------------------------------------------------------------------
    def _response_format(self, model: type[BaseModel] | None) -> dict | None:
        if model is None or self.config.json_mode == "none":
            return None
        schema = _schema_for(model)
        if self.config.json_mode == "json_schema":
            return {"type": "json_schema",
                    "json_schema": {"name": model.__name__, "schema": schema, "strict": False}}
        if self.config.json_mode == "json_object_schema":
            return {"type": "json_object", "schema": _grammar_schema_for(model)}
        return {"type": "json_object"}

    def _chat(self, messages: list[dict], model: type[BaseModel] | None, task_id: str,
              max_tokens: int | None, temperature: float | None = None) -> str:
        kwargs: dict[str, Any] = {"model": self.config.model, "messages": messages}
        fmt = self._response_format(model)
        if fmt:
            kwargs["response_format"] = fmt
        if self.config.local:
            # The bundled 1.5B model: a request keeps the one-at-a-time server busy after its
            # client gave up, so every call is bounded; a low temperature keeps it on the rails.
            max_tokens = max_tokens or LOCAL_MAX_TOKENS
            kwargs["temperature"] = LOCAL_TEMPERATURE
        if temperature is not None:
            kwargs["temperature"] = temperature
        if max_tokens:
            kwargs["max_tokens"] = max_tokens
        headers = {"X-Artoo-Role": self.role, "X-Artoo-Task": task_id or "-"}
        attempts = max(1, self.settings.llm_retries + 1)
        last_error = "unknown error"
        for attempt in range(attempts):
            if self.budget is not None:
                self.budget.take(self.budget_keep)    # BudgetSpent: this request is not made
            body = dict(kwargs)
            if self.config.thinking:
                body["enable_thinking"] = True
            started = time.monotonic()
            try:
                reply = post_chat(self._sdk, body, headers, self._plain)
                self._account(task_id, messages, reply.text,
                              (time.monotonic() - started) * 1000, reply.prompt_tokens,
                              reply.completion_tokens, True, "", finish=reply.finish,
                              kwargs=kwargs, response_model=reply.model)
                return reply.text
            except openai.BadRequestError as exc:
                # An endpoint that rejects the structured-output request: degrade once, keep going.
                if fmt and "response_format" in kwargs and self._degrade_json_mode(exc):
                    fmt = self._response_format(model)
                    kwargs.pop("response_format", None)
                    if fmt:
                        kwargs["response_format"] = fmt
                    continue
                last_error = f"HTTP 400: {_short(exc)}"
                self._account(task_id, messages, "", (time.monotonic() - started) * 1000,
                              0, 0, False, last_error)
                break
            except openai.InternalServerError as exc:
                # llama.cpp's server refuses `json_schema` with HTTP 500 (a pydantic error naming
                # response_format): degrade like a 400, do not retry the same request.
                if fmt and "response_format" in kwargs and self._degrade_json_mode(exc, 500):
                    fmt = self._response_format(model)
                    kwargs.pop("response_format", None)
                    if fmt:
                        kwargs["response_format"] = fmt
                    continue
                last_error = f"{type(exc).__name__}: {_short(exc)}"
            except (openai.APIConnectionError, openai.APITimeoutError,
                    openai.RateLimitError, BadReply) as exc:
                last_error = f"{type(exc).__name__}: {_short(exc)}"
            except openai.APIStatusError as exc:
                if exc.status_code >= 500 or exc.status_code == 429:
                    last_error = f"HTTP {exc.status_code}: {_short(exc)}"
                else:
                    last_error = f"HTTP {exc.status_code}: {_short(exc)}"
                    self._account(task_id, messages, "", (time.monotonic() - started) * 1000,
                                  0, 0, False, last_error)
                    break
            self._account(task_id, messages, "", (time.monotonic() - started) * 1000, 0, 0,
                          False, last_error)
            if attempt + 1 < attempts:
                delay = self.settings.llm_backoff_s * (2 ** attempt)
                time.sleep(delay * (0.5 + random.random()))  # jittered backoff between retries
        raise LLMError(f"{self.role}: LLM call failed: {last_error}")

    def _degrade_json_mode(self, exc: Exception, status: int = 400) -> bool:
        text = str(exc).lower()
        if status >= 500:
            # A 5xx is only a refusal of the format when it names it; anything else is retried.
            if not any(k in text for k in ("response_format", "json_schema", "'json_object'")):
                return False
        elif "response_format" not in text and "json" not in text and "schema" not in text:
            return False
        order = list(JSON_MODES)
        idx = order.index(self.config.json_mode)
        if idx + 1 >= len(order):
            return False
        self.config = TierConfig(**{**self.config.__dict__, "json_mode": order[idx + 1]})
        log.warning("%s: endpoint rejected response_format; falling back to %s", self.role,
                    self.config.json_mode)
        return True

    def recent_latency_ms(self) -> float | None:
        """How long this endpoint's last answered call took in this process (any role's)."""
        return _RECENT_MS.get(self.config.base_url)

    def _account(self, task_id: str, messages: list[dict], response: str, latency_ms: float,
                 prompt_tokens: int, completion_tokens: int, ok: bool, error: str,
                 finish: str | None = None, kwargs: dict | None = None,
                 response_model: str | None = None) -> None:
        self.last_usage = Usage(prompt_tokens, completion_tokens, latency_ms)
        if ok:
            _RECENT_MS[self.config.base_url] = latency_ms
        if telemetry.enabled():   # the GenAI span of this call (tracing on only)
            telemetry.llm_span(
                role=self.role, tier=self.config.tier, model=self.config.model,
                task=task_id or None, latency_ms=latency_ms, input_tokens=prompt_tokens,
                output_tokens=completion_tokens, ok=ok, error=error, finish_reason=finish,
                response_model=response_model, server=_netloc(self.config.base_url),
                max_tokens=(kwargs or {}).get("max_tokens"),
                temperature=(kwargs or {}).get("temperature"))
        usage = LlmUsage(task_id=task_id, role=self.role, tier=self.config.tier,
                         model=self.config.model, prompt_tokens=prompt_tokens,
                         completion_tokens=completion_tokens, latency_ms=round(latency_ms, 1),
                         ok=ok, error=error)
        if self.bus is not None:
            try:
                self.bus.publish(usage, task=task_id or None)
            except Exception:  # accounting must never break a call
                log.debug("could not publish LlmUsage", exc_info=True)
        if self.on_usage:
            self.on_usage(usage)
        if task_id:
            tasklog.append(self.settings.tasks_dir, task_id, "llm_call", role=self.role,
                           tier=self.config.tier, model=self.config.model,
                           messages=messages, response=response, ok=ok, error=error or None,
                           prompt_tokens=prompt_tokens, completion_tokens=completion_tokens,
                           latency_ms=round(latency_ms, 1))


def _netloc(url: str) -> str:
    return url.split("://", 1)[-1].split("/", 1)[0] if url else ""


def _short(exc: Exception, limit: int = 200) -> str:
    text = str(exc).replace("\n", " ")
    return text if len(text) <= limit else text[:limit] + "…"
