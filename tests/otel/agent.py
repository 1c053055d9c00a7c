"""An agent's turn through the Python client, in a process of its own (the OpenTelemetry SDK's tracer
provider is global, once per process): it sets up the SDK with an in-memory exporter, calls `TOOL`
with `ARGUMENTS` inside an `agent turn` span (answering any input request with an acceptance of
`ANSWER`), waits for the outcome, and prints one JSON line: `{"task_id", "outcome", "spans"}`, the
spans in tests/otel/receiver.py's form.

    python tests/otel/agent.py URL TOOL ARGUMENTS_JSON ANSWER_JSON
"""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any

from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from mcp_tasks import InputRequest, TasksClient


def as_received(span: ReadableSpan) -> dict[str, Any]:
    """A span of this process's SDK, in the receiver's form."""
    context = span.get_span_context()
    assert context is not None
    return {
        "trace_id": format(context.trace_id, "032x"),
        "span_id": format(context.span_id, "016x"),
        "parent_span_id": format(span.parent.span_id, "016x") if span.parent else None,
        "name": span.name,
        "kind": span.kind.name.lower(),
        "attributes": dict(span.attributes or {}),
        "events": [e.name for e in span.events],
        "links": [],
        "service": "agent",
        "start_ns": span.start_time,
        "end_ns": span.end_time,
    }


async def main() -> None:
    url, tool, arguments, answer = sys.argv[1], sys.argv[2], json.loads(sys.argv[3]), json.loads(sys.argv[4])
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    trace.set_tracer_provider(provider)

    async def accept(request: InputRequest) -> dict[str, Any]:
        return {"action": "accept", "content": answer}

    client = TasksClient(url, store="memory://", input_handler=accept, notifications=False)
    with trace.get_tracer("agent").start_as_current_span("agent turn"):
        execution = await client.call_tool(tool, arguments)
        task_id = execution.task.task_id if execution.task is not None else None
        outcome = await execution.result()
    await client.close()
    spans = [as_received(s) for s in exporter.get_finished_spans()]
    print(json.dumps({"task_id": task_id, "outcome": outcome.kind, "spans": spans}))


if __name__ == "__main__":
    asyncio.run(main())
