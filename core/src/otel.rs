//! OpenTelemetry export of the host's spans (feature `otel`): OTLP over HTTP/protobuf, set up from
//! the standard environment (`OTEL_EXPORTER_OTLP_ENDPOINT` or `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`,
//! `OTEL_EXPORTER_OTLP_HEADERS`, `OTEL_EXPORTER_OTLP_TIMEOUT`, `OTEL_SERVICE_NAME`,
//! `OTEL_RESOURCE_ATTRIBUTES`, `OTEL_TRACES_SAMPLER`, `OTEL_BSP_*`), through a
//! `tracing-opentelemetry` layer the application adds to its subscriber.
//!
//! ```no_run
//! use tracing_subscriber::prelude::*;
//! # fn main() -> Result<(), mcp_tasks::otel::OtelError> {
//! let export = mcp_tasks::otel::from_env()?; // None: no endpoint configured, nothing exported
//! let (layer, _guard) = export.map(|e| e.into_layer()).unzip();
//! tracing_subscriber::registry().with(layer).with(tracing_subscriber::fmt::layer()).init();
//! // ... serve; `_guard` flushes the spans still queued when it drops.
//! # Ok(()) }
//! ```

use opentelemetry::trace::TracerProvider as _;
use opentelemetry_sdk::trace::SdkTracerProvider;

/// The export could not be set up (an endpoint that is no URL, an unknown protocol...).
#[derive(Debug, thiserror::Error)]
#[error("OpenTelemetry export: {0}")]
pub struct OtelError(String);

/// A configured OTLP export: turn it into the layer for a `tracing` subscriber.
#[derive(Debug)]
pub struct Export {
    provider: SdkTracerProvider,
}

/// Flushes and shuts the exporter down when dropped, so spans still queued reach the collector.
#[derive(Debug)]
pub struct OtelGuard {
    provider: SdkTracerProvider,
}

impl Drop for OtelGuard {
    fn drop(&mut self) {
        let _ = self.provider.force_flush();
        let _ = self.provider.shutdown();
    }
}

/// True when the environment asks for traces to be exported: an OTLP endpoint is set, and
/// neither `OTEL_SDK_DISABLED=true` nor `OTEL_TRACES_EXPORTER=none` turns it off.
pub fn configured() -> bool {
    let set = |name: &str| std::env::var(name).is_ok_and(|v| !v.trim().is_empty());
    let disabled = std::env::var("OTEL_SDK_DISABLED").is_ok_and(|v| v.trim().eq_ignore_ascii_case("true"));
    let none = std::env::var("OTEL_TRACES_EXPORTER").is_ok_and(|v| v.trim().eq_ignore_ascii_case("none"));
    (set("OTEL_EXPORTER_OTLP_ENDPOINT") || set("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")) && !disabled && !none
}

/// The OTLP export the environment configures, with a batch span processor; `None` when it
/// configures none ([`configured`]): then nothing is exported and the spans cost what `tracing`
/// spans without a listening layer cost.
pub fn from_env() -> Result<Option<Export>, OtelError> {
    if !configured() {
        return Ok(None);
    }
    let protocol =
        std::env::var("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL").or_else(|_| std::env::var("OTEL_EXPORTER_OTLP_PROTOCOL"));
    if let Ok(protocol) = protocol
        && protocol.trim() != "http/protobuf"
    {
        return Err(OtelError(format!("protocol {protocol:?}: this build exports http/protobuf only")));
    }
    let exporter =
        opentelemetry_otlp::SpanExporter::builder().with_http().build().map_err(|e| OtelError(e.to_string()))?;
    // The resource reads OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES; the sampler
    // OTEL_TRACES_SAMPLER (default: parent-based, so a caller's "not sampled" holds).
    let provider = SdkTracerProvider::builder().with_batch_exporter(exporter).build();
    Ok(Some(Export { provider }))
}

impl Export {
    /// The `tracing` layer that turns spans into OpenTelemetry spans, and the guard that
    /// flushes them at exit.
    pub fn into_layer<S>(self) -> (impl tracing_subscriber::Layer<S> + Send + Sync + 'static, OtelGuard)
    where
        S: tracing::Subscriber + for<'span> tracing_subscriber::registry::LookupSpan<'span> + Send + Sync,
    {
        use tracing_subscriber::Layer as _;
        let tracer = self.provider.tracer("mcp-tasks");
        // Which spans it sees is the application's filter's choice (the fixture servers keep the
        // `mcp_tasks` targets at info). Each span carries what the semantic conventions name and
        // nothing per span besides: no busy and idle times, source locations, thread names or
        // `tracing` targets, which cost every span their attributes (measured: docs/BENCHMARKS.md,
        // "Traces").
        let layer = tracing_opentelemetry::layer()
            .with_tracer(tracer)
            .with_tracked_inactivity(false)
            .with_location(false)
            .with_threads(false)
            .with_target(false)
            // A tool's spans are its run's children through `tracing` itself: attaching the
            // OpenTelemetry context at every poll of every instrumented future cost more than
            // the spans (measured: docs/BENCHMARKS.md, "Traces"). Code that reads the
            // OpenTelemetry API's current context gets it from `RunContext::trace` instead.
            .with_context_activation(false)
            // The engine's log lines (`task created`, `task finished`) say what the spans' own
            // attributes say: as span events they doubled what each task exports.
            .with_filter(tracing_subscriber::filter::filter_fn(|meta| {
                meta.is_span() || meta.target() != crate::metrics::TASK_LOG_TARGET
            }));
        (layer, OtelGuard { provider: self.provider })
    }

    /// The tracer provider, for tracers of the application's own beside the layer's.
    pub fn provider(&self) -> &SdkTracerProvider {
        &self.provider
    }
}

impl OtelGuard {
    /// Exports what is queued now.
    pub fn flush(&self) {
        let _ = self.provider.force_flush();
    }
}
