"""What an application does to export its spans, for the Python test servers: the OpenTelemetry
SDK with its OTLP/HTTP exporter, configured from the standard environment
(`OTEL_EXPORTER_OTLP_ENDPOINT`, `OTEL_SERVICE_NAME`, `OTEL_BSP_*`). mcp-tasks then records through
it (no exporter of its own). Nothing happens without an endpoint, nor without the SDK installed.
"""

from __future__ import annotations

import os


def configure() -> None:
    """Installs the SDK's tracer provider with a batch OTLP/HTTP exporter, if an endpoint is set."""
    if not os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT"):
        return
    from opentelemetry import trace
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    # The resource reads OTEL_SERVICE_NAME; the provider flushes at exit (SIGINT's clean stop).
    provider = TracerProvider()
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    trace.set_tracer_provider(provider)
