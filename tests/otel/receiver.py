"""A real OTLP/HTTP trace receiver for the trace tests: it accepts `POST /v1/traces` with an
`ExportTraceServiceRequest` in protobuf (what every OpenTelemetry SDK's HTTP exporter sends),
decodes it with the OpenTelemetry protocol's own definitions (PyPI `opentelemetry-proto`), and
keeps each span as a plain dict: ids in lowercase hex, kind, attributes, event names, links, and
the exporting process's `service.name`.

Used in-process (`Receiver()` as a context manager) or standing alone
(`python tests/otel/receiver.py PORT` prints one JSON line per span).
"""

from __future__ import annotations

import gzip
import json
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue

KINDS = {0: "unspecified", 1: "internal", 2: "server", 3: "client", 4: "producer", 5: "consumer"}


def _value(value: AnyValue) -> Any:
    field = value.WhichOneof("value")
    if field == "array_value":
        return [_value(v) for v in value.array_value.values]
    if field == "kvlist_value":
        return {kv.key: _value(kv.value) for kv in value.kvlist_value.values}
    return getattr(value, field) if field else None


def decode(body: bytes) -> list[dict[str, Any]]:
    """The spans of one OTLP/protobuf export request."""
    request = ExportTraceServiceRequest()
    request.ParseFromString(body)
    spans = []
    for resource_spans in request.resource_spans:
        resource = {kv.key: _value(kv.value) for kv in resource_spans.resource.attributes}
        for scope_spans in resource_spans.scope_spans:
            for span in scope_spans.spans:
                spans.append({
                    "trace_id": span.trace_id.hex(),
                    "span_id": span.span_id.hex(),
                    "parent_span_id": span.parent_span_id.hex() or None,
                    "name": span.name,
                    "kind": KINDS.get(span.kind, str(span.kind)),
                    "attributes": {kv.key: _value(kv.value) for kv in span.attributes},
                    "events": [event.name for event in span.events],
                    "links": [{"trace_id": l.trace_id.hex(), "span_id": l.span_id.hex()} for l in span.links],
                    "status": span.status.code,
                    "service": resource.get("service.name"),
                    "start_ns": span.start_time_unix_nano,
                    "end_ns": span.end_time_unix_nano,
                })
    return spans


class Receiver:
    """An OTLP/HTTP receiver on 127.0.0.1 (`endpoint` is what OTEL_EXPORTER_OTLP_ENDPOINT takes)."""

    def __init__(self, port: int = 0, on_span: Callable[[dict[str, Any]], None] | None = None) -> None:
        self.spans: list[dict[str, Any]] = []
        self.requests = 0
        self.lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def body(self) -> bytes:
                """The request body, chunked or not, gzip-decoded (exporters send both ways)."""
                if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
                    data = b""
                    while size := int(self.rfile.readline().split(b";")[0].strip() or b"0", 16):
                        data += self.rfile.read(size)
                        self.rfile.readline()
                    self.rfile.readline()
                else:
                    data = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                return gzip.decompress(data) if self.headers.get("Content-Encoding") == "gzip" else data

            def do_POST(self) -> None:  # noqa: N802 (the http.server API)
                body = self.body()
                if self.path != "/v1/traces" or self.headers.get("Content-Type") != "application/x-protobuf":
                    self.send_response(404 if self.path != "/v1/traces" else 415)
                    self.end_headers()
                    return
                spans = decode(body)
                with receiver.lock:
                    receiver.requests += 1
                    receiver.spans.extend(spans)
                for span in spans:
                    if on_span:
                        on_span(span)
                answer = ExportTraceServiceResponse().SerializeToString()
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self.endpoint = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> Receiver:
        self.thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.server.shutdown()
        self.server.server_close()

    def wait_for(self, predicate: Callable[[list[dict[str, Any]]], bool], seconds: float = 20) -> list[dict[str, Any]]:
        """The spans received once `predicate` holds for them (within `seconds`, else an error
        listing what came)."""
        deadline = time.monotonic() + seconds
        while True:
            with self.lock:
                spans = list(self.spans)
            if predicate(spans):
                return spans
            if time.monotonic() > deadline:
                names = [(s["name"], s["service"], s["trace_id"][:8]) for s in spans]
                raise AssertionError(f"spans not received within {seconds} s; got {names}")
            time.sleep(0.05)


if __name__ == "__main__":
    with Receiver(int(sys.argv[1]) if len(sys.argv) > 1 else 0, on_span=lambda s: print(json.dumps(s), flush=True)) as r:
        print(f"listening on {r.endpoint}", file=sys.stderr, flush=True)
        r.thread.join()
