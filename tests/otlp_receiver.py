"""A light OTLP/HTTP trace receiver for the tests: a real HTTP server on loopback that decodes each
POST /v1/traces body (protobuf `ExportTraceServiceRequest`, opentelemetry-proto) into plain span
records, and lets a test wait for the spans it expects."""
from __future__ import annotations

import gzip
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest, ExportTraceServiceResponse)
from waiting import wait_on


def _value(v) -> Any:
    kind = v.WhichOneof("value")
    if kind == "array_value":
        return [_value(x) for x in v.array_value.values]
    if kind == "kvlist_value":
        return {kv.key: _value(kv.value) for kv in v.kvlist_value.values}
    return getattr(v, kind) if kind else None


@dataclass
class SpanRecord:
    name: str
    trace_id: str
    span_id: str
    parent_id: str
    kind: int
    start_ns: int
    end_ns: int
    attrs: dict = field(default_factory=dict)
    resource: dict = field(default_factory=dict)
    status_code: int = 0

    @property
    def service(self) -> str:
        return self.resource.get("service.name", "")

    @property
    def pid(self) -> int:
        return int(self.resource.get("process.pid", 0))


class OtlpReceiver:
    def __init__(self):
        self.spans: list[SpanRecord] = []
        self.requests = 0
        self.cond = threading.Condition()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                if self.headers.get("Content-Encoding") == "gzip":
                    body = gzip.decompress(body)
                if self.path.rstrip("/") != "/v1/traces":
                    self.send_response(404)
                    self.end_headers()
                    return
                req = ExportTraceServiceRequest()
                req.ParseFromString(body)
                receiver._add(req)
                out = ExportTraceServiceResponse().SerializeToString()
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(out)))
                self.end_headers()
                self.wfile.write(out)

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def env(self) -> dict[str, str]:
        """What a process needs to export here (the standard variables)."""
        return {"OTEL_EXPORTER_OTLP_ENDPOINT": self.endpoint,
                "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf",
                "OTEL_BSP_SCHEDULE_DELAY": "200"}

    def _add(self, req: ExportTraceServiceRequest) -> None:
        got = []
        for rs in req.resource_spans:
            resource = {kv.key: _value(kv.value) for kv in rs.resource.attributes}
            for ss in rs.scope_spans:
                for s in ss.spans:
                    got.append(SpanRecord(
                        s.name, s.trace_id.hex(), s.span_id.hex(), s.parent_span_id.hex(),
                        s.kind, s.start_time_unix_nano, s.end_time_unix_nano,
                        {kv.key: _value(kv.value) for kv in s.attributes}, resource,
                        s.status.code))
        with self.cond:
            self.requests += 1
            self.spans.extend(got)
            self.cond.notify_all()

    def of_task(self, task: str) -> list[SpanRecord]:
        with self.cond:
            return [s for s in self.spans if s.attrs.get("artoo.task.id") == task]

    def wait_for(self, pred: Callable[[], Any], timeout: float = 30.0, what: str = "spans"):
        return wait_on(self.cond, pred, timeout, what, 0.5)

    def __enter__(self) -> "OtlpReceiver":
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()
