"""Traces of every artoo process: OpenTelemetry spans, exported over OTLP/HTTP (the observation
plane, DESIGN §13; metrics: services/runtime/metrics.py).

Off unless the standard variables ask for it (`export_wanted`): `OTEL_EXPORTER_OTLP_ENDPOINT` or
`OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` set, or `OTEL_TRACES_EXPORTER=otlp|console`;
`OTEL_TRACES_EXPORTER=none` or `OTEL_SDK_DISABLED=true` keep it off. Off, nothing of the SDK is
imported, `span()` returns one shared no-op object and the bus client propagates nothing: the hot
path does not change. The exporter reads the rest of OTEL_* itself (headers, timeout,
OTEL_BSP_SCHEDULE_DELAY, ...).

One trace per task. A span's parent is the context of the message being handled (the envelope's
`trace` field, a W3C traceparent: protocol/tracecontext.py), or the enclosing span in the same
thread; a span with neither (the first of a task) becomes the task's root, its trace id derived
from the task id, so every process lands in the same trace. Each process is its own OpenTelemetry
service: `service.name` = `artoo-<role>` (`artoo-effector` for the forked effectors), with
`service.instance.id` = the bus node and `process.pid`.

The effector is forked per subtask and leaves with os._exit: it calls `shutdown()` first, which
exports what is still batched.
"""
from __future__ import annotations

import atexit
import functools
import logging
import os
import threading
import time
from typing import Any, Callable, Optional

from protocol import tracecontext

log = logging.getLogger("artoo.telemetry")

_state: Any = None          # None: not initialised; False: off; a _Tracing when on
_lock = threading.Lock()
_root = threading.local()   # trace id for the next root span (the id generator reads it)


def export_wanted(environ: Optional[dict] = None) -> bool:
    env = os.environ if environ is None else environ
    if env.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return False
    exporters = [e.strip().lower() for e in env.get("OTEL_TRACES_EXPORTER", "").split(",")
                 if e.strip()]
    if exporters:
        return any(e in ("otlp", "console") for e in exporters)
    return bool(env.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
                or env.get("OTEL_EXPORTER_OTLP_ENDPOINT"))


def enabled() -> bool:
    return bool(_state)


def preload() -> None:
    """Import the SDK now and build an exporter once (its first construction loads what it needs
    lazily: ~100 ms here): the spawner's zygote does it, so its forked effectors start fast. No
    thread is started (that would not survive the fork)."""
    if export_wanted():
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider  # noqa: F401
        Resource.create({})
        if "otlp" in os.environ.get("OTEL_TRACES_EXPORTER", "otlp"):
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
            OTLPSpanExporter()


class _Tracing:
    def __init__(self, role: str, node: str):
        from opentelemetry import trace
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor
        from opentelemetry.sdk.trace.id_generator import RandomIdGenerator
        from . import __version__

        class TaskIds(RandomIdGenerator):
            def generate_trace_id(self) -> int:
                tid = getattr(_root, "trace_id", 0)
                return tid or super().generate_trace_id()

        self.trace = trace
        self.role = role
        resource = Resource.create({
            "service.name": f"artoo-{role}", "service.namespace": "artoo",
            "service.version": __version__, "service.instance.id": node or f"{role}-{os.getpid()}",
            "process.pid": os.getpid(), "artoo.role": role})
        # no exit hook of the SDK's own: its shutdown waits out the exporter's retries when the
        # collector is down; ours (shutdown()) flushes within a bound instead
        self.provider = TracerProvider(resource=resource, id_generator=TaskIds(),
                                       shutdown_on_exit=False)
        exporters = [e.strip().lower() for e in os.environ.get("OTEL_TRACES_EXPORTER", "otlp")
                     .split(",") if e.strip()] or ["otlp"]
        for name in exporters:
            if name == "otlp":
                from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
                self.provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
            elif name == "console":
                from opentelemetry.sdk.trace.export import ConsoleSpanExporter
                self.provider.add_span_processor(BatchSpanProcessor(ConsoleSpanExporter()))
        self.tracer = self.provider.get_tracer("artoo", __version__)
        self.kinds = {"internal": trace.SpanKind.INTERNAL, "client": trace.SpanKind.CLIENT,
                      "server": trace.SpanKind.SERVER, "producer": trace.SpanKind.PRODUCER,
                      "consumer": trace.SpanKind.CONSUMER}

    def context(self, traceparent: Optional[str]):
        ids = tracecontext.parse(traceparent)
        if ids is None:
            return None
        trace = self.trace
        return trace.set_span_in_context(trace.NonRecordingSpan(trace.SpanContext(
            ids[0], ids[1], is_remote=True, trace_flags=trace.TraceFlags(ids[2] & 0xFF))))


def init(role: str, *, node: str = "", client: Any = None) -> bool:
    """Turn tracing on for this process when OTEL_* ask for it (idempotent); with `client`, its
    messages carry the trace context. Returns whether tracing is on."""
    global _state
    with _lock:
        if _state is None:
            if not export_wanted():
                _state = False
            else:
                try:
                    _state = _Tracing(role, node)
                    atexit.register(shutdown)
                except Exception as exc:   # a broken exporter setup must not stop the role
                    log.warning("tracing not started: %s", exc)
                    _state = False
    if _state and client is not None:
        client.tracing = True
    return bool(_state)


def shutdown(timeout_ms: int = 2000) -> bool:
    """Export what is batched, waiting at most `timeout_ms` (a forked effector calls this before
    os._exit; with the collector down the export thread, a daemon, is abandoned at exit rather
    than retried for the exporter's whole timeout). Returns False when it gave up waiting."""
    global _state
    with _lock:
        st, _state = _state, None
    if not st:
        return True
    if st:
        # the SDK's flush exports in the calling thread and retries for the exporter's whole
        # timeout (OTEL_EXPORTER_OTLP_TIMEOUT, 10 s) when the collector is down: bound it here
        flusher = threading.Thread(target=_flush, args=(st,), name="otel-flush", daemon=True)
        flusher.start()
        flusher.join(timeout_ms / 1000)
        if flusher.is_alive():
            log.warning("spans not exported within %d ms (collector unreachable?)", timeout_ms)
            return False
    return True


def _flush(st: "_Tracing") -> None:
    try:
        st.provider.force_flush()
    except Exception:
        log.debug("tracing flush failed", exc_info=True)


class _Noop:
    """What span() returns with tracing off: every operation does nothing."""
    __slots__ = ()
    traceparent = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def set(self, key: str, value: Any) -> None:
        pass

    def error(self, message: str, exc: Optional[BaseException] = None) -> None:
        pass

    def end(self, end_ns: Optional[int] = None, **attrs: Any) -> None:
        pass


NOOP = _Noop()


class Span:
    """One span; `with` makes it current in this thread (messages sent inside carry it)."""
    __slots__ = ("_span", "traceparent", "_token", "_trace")

    def __init__(self, st: _Tracing, name: str, task: Optional[str], parent: Optional[str],
                 kind: str, attrs: Optional[dict], start_ns: Optional[int]):
        tp = parent or tracecontext.CURRENT.get() or tracecontext.for_task(task)
        ctx = st.context(tp)
        attributes = {"artoo.role": st.role}
        if task and task != "-":
            attributes["artoo.task.id"] = task
        if attrs:
            attributes.update({k: v for k, v in attrs.items() if v is not None})
        root = ctx is None and bool(task) and task != "-"
        if root:
            _root.trace_id = tracecontext.task_trace_id(task)
        try:
            self._span = st.tracer.start_span(name, context=ctx, kind=st.kinds[kind],
                                              attributes=attributes, start_time=start_ns)
        finally:
            if root:
                _root.trace_id = 0
        sc = self._span.get_span_context()
        self.traceparent = tracecontext.format(sc.trace_id, sc.span_id, int(sc.trace_flags))
        if root:
            tracecontext.remember(task, self.traceparent)
        self._token = None
        self._trace = st.trace

    def __enter__(self) -> "Span":
        self._token = tracecontext.CURRENT.set(self.traceparent)
        return self

    def __exit__(self, et, exc, tb) -> bool:
        if self._token is not None:
            tracecontext.CURRENT.reset(self._token)
            self._token = None
        if exc is not None:
            self.error(f"{et.__name__}: {exc}", exc)
        self._span.end()
        return False

    def set(self, key: str, value: Any) -> None:
        if value is not None:
            self._span.set_attribute(key, value)

    def error(self, message: str, exc: Optional[BaseException] = None) -> None:
        if exc is not None:
            self._span.record_exception(exc)
        self._span.set_attribute("error.type", type(exc).__name__ if exc else "error")
        self._span.set_status(self._trace.Status(self._trace.StatusCode.ERROR, message[:300]))

    def end(self, end_ns: Optional[int] = None, **attrs: Any) -> None:
        for key, value in attrs.items():
            self.set(key, value)
        self._span.end(end_time=end_ns)


def span(name: str, *, task: Optional[str] = None, parent: Optional[str] = None,
         kind: str = "internal", attrs: Optional[dict] = None,
         start_ns: Optional[int] = None):
    """A span for one step of a role: `with telemetry.span("plan", task=tid) as sp: ...`.
    Parent: `parent` (a traceparent), else the current context, else the task's. With tracing
    off: the shared no-op (nothing allocated). Not entered, it is started and ended by hand
    (`sp.end()`), without becoming current (the spawner's span from assign to effector ready)."""
    st = _state
    if not st:
        return NOOP
    return Span(st, name, task, parent, kind, attrs, start_ns)


def llm_span(*, role: str, tier: str, model: str, task: Optional[str], latency_ms: float,
             input_tokens: int, output_tokens: int, ok: bool, error: str = "",
             finish_reason: Optional[str] = None, response_model: Optional[str] = None,
             server: str = "", max_tokens: Optional[int] = None,
             temperature: Optional[float] = None) -> None:
    """One LLM call, recorded when it returned, by the GenAI semantic conventions (span
    `chat {model}`, kind CLIENT, gen_ai.* attributes) plus OpenInference's names for Phoenix."""
    st = _state
    if not st:
        return
    end = time.time_ns()
    attrs: dict[str, Any] = {
        "gen_ai.operation.name": "chat", "gen_ai.provider.name": "openai",
        "gen_ai.system": "openai", "gen_ai.request.model": model,
        "gen_ai.usage.input_tokens": int(input_tokens),
        "gen_ai.usage.output_tokens": int(output_tokens),
        "gen_ai.request.max_tokens": max_tokens, "gen_ai.request.temperature": temperature,
        "gen_ai.response.model": response_model,
        "openinference.span.kind": "LLM", "llm.model_name": model,
        "llm.token_count.prompt": int(input_tokens),
        "llm.token_count.completion": int(output_tokens),
        "llm.token_count.total": int(input_tokens) + int(output_tokens),
        "artoo.llm.role": role, "artoo.llm.tier": tier,
    }
    if finish_reason:
        attrs["gen_ai.response.finish_reasons"] = [finish_reason]
    if server:
        host, _, port = server.partition(":")
        attrs["server.address"] = host
        if port.isdigit():
            attrs["server.port"] = int(port)
    sp = Span(st, f"chat {model}", task, None, "client", attrs,
              end - int(max(0.0, latency_ms) * 1e6))
    if not ok:
        sp.error(error or "LLM call failed")
        sp.set("error.type", (error or "error").split(":", 1)[0][:60])
    sp.end(end)


def traced(name: str, task: Callable[..., Optional[str]] | None = None,
           attrs: Callable[..., Optional[dict]] | None = None):
    """Decorator: the function runs in a span (one attribute test when tracing is off).
    `task(*args)` names the span's task; `attrs(*args)` adds attributes."""
    def deco(fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            if not _state:
                return fn(*args, **kwargs)
            try:
                tid = task(*args, **kwargs) if task else None
                extra = attrs(*args, **kwargs) if attrs else None
            except Exception:
                tid, extra = None, None
            with span(name, task=tid, attrs=extra):
                return fn(*args, **kwargs)
        return wrapper
    return deco
