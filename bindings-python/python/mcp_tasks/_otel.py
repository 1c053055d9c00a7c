"""Task traces through the application's own OpenTelemetry API (SEP-414 trace context).

mcp-tasks brings no OpenTelemetry SDK or exporter of its own: where the application has the
``opentelemetry`` API (and configured an SDK), a task's create keeps the current span's context
(mcp's server span for the ``tools/call``, itself the caller's child), each run is a ``task.run``
span parented to it, wherever and whenever it runs, and ``tasks/*`` spans link to it. Without
the API, a task keeps its caller's ``_meta`` context, and nothing here records anything.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping
from typing import Any

try:
    from opentelemetry import context as _context
    from opentelemetry import propagate, trace
    from opentelemetry.trace import Status, StatusCode
except ImportError:  # the application has no OpenTelemetry: keep the caller's context only
    trace = None  # type: ignore[assignment]

TRACE_KEYS = ("traceparent", "tracestate", "baggage")


def _meta_carrier(params: Mapping[str, Any] | None) -> dict[str, str] | None:
    """The trace context in a request's ``_meta``, as a propagator's carrier (core checks it)."""
    meta = (params or {}).get("_meta") or {}
    carrier = {k: v for k in TRACE_KEYS if isinstance(v := meta.get(k), str)}
    return carrier if "traceparent" in carrier else None


def task_trace(params: Mapping[str, Any] | None) -> dict[str, str] | None:
    """The context a task created now keeps: the current span's (mcp's request span, when the
    application traces), else the caller's ``_meta`` context."""
    if trace is not None and trace.get_current_span().get_span_context().is_valid:
        carrier: dict[str, str] = {}
        propagate.inject(carrier)
        if "traceparent" in carrier:
            return carrier
    return _meta_carrier(params)


@contextlib.contextmanager
def run_span(task: Any, tool: str | None) -> Iterator[Any]:
    """The span of one run of ``task`` (a native ``TaskContext``), current while the tool runs:
    ``task.run``, a child of the context the task keeps (a fresh trace when it keeps none)."""
    if trace is None:
        yield None
        return
    carrier = task.trace
    parent = propagate.extract(carrier) if carrier else _context.Context()
    attributes: dict[str, Any] = {"mcp.task.id": task.task_id, "task.attempt": task.attempt}
    if tool:
        attributes["gen_ai.tool.name"] = tool
    span = trace.get_tracer("mcp_tasks").start_span(
        "task.run", context=parent, kind=trace.SpanKind.INTERNAL, attributes=attributes
    )
    # The kept context is the run's (its baggage too: a tool's own outgoing calls pass it on),
    # not the context of whatever started the run.
    token = _context.attach(parent)
    try:
        with trace.use_span(span, end_on_exit=True, record_exception=False, set_status_on_exception=False):
            yield span
    finally:
        _context.detach(token)


def outcome(span: Any, status: str, code: int | None = None) -> None:
    """Records a run's outcome on its span (`task.status`; `error.type` and an error status for
    a failure: the code only, as the message may quote what the user sent)."""
    if span is None:
        return
    span.set_attribute("task.status", status)
    if code is not None:
        span.set_attribute("error.type", str(code))
        span.set_status(Status(StatusCode.ERROR))


def event(name: str, keys: int) -> None:
    """A span event on the current span (an input request or its answers: their count only)."""
    if trace is not None:
        trace.get_current_span().add_event(name, {"keys": keys})


def annotate(task_id: Any) -> None:
    """Names the task on the current span (mcp's span of the request that created or concerns it)."""
    if trace is not None and isinstance(task_id, str):
        trace.get_current_span().set_attribute("mcp.task.id", task_id)


def recording() -> bool:
    """Whether the current span records (a link is worth a read of the task's context)."""
    return trace is not None and trace.get_current_span().is_recording()


def link(carrier: Mapping[str, str] | None) -> None:
    """Links the current span to the trace a task keeps."""
    if trace is None or not carrier:
        return
    linked = trace.get_current_span(propagate.extract(dict(carrier))).get_span_context()
    if linked.is_valid:
        trace.get_current_span().add_link(linked)
