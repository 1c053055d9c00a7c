//! W3C trace context on `tracing` spans: a span parented to the caller's context, linked to a
//! task's, and the context a span hands on. With the `otel` feature these reach the
//! OpenTelemetry spans `tracing-opentelemetry` makes of the spans (when the application
//! installed `mcp_tasks::otel`'s layer); without it they do nothing, and a task keeps the caller's
//! own context.

pub use crate::protocol::trace::TraceContext;

/// Makes `parent` the OpenTelemetry parent of `span`: call it before the span is first entered
/// (an entered span has started under the parent it had).
pub fn adopt(span: &tracing::Span, parent: Option<&TraceContext>) {
    #[cfg(feature = "otel")]
    if let Some(parent) = parent.and_then(otel_context) {
        use tracing_opentelemetry::OpenTelemetrySpanExt;
        let _ = span.set_parent(parent);
    }
    #[cfg(not(feature = "otel"))]
    let _ = (span, parent);
}

/// True when an OpenTelemetry layer records `span` (only then is a link worth a lookup).
pub fn recorded(span: &tracing::Span) -> bool {
    #[cfg(feature = "otel")]
    {
        use opentelemetry::trace::TraceContextExt;
        use tracing_opentelemetry::OpenTelemetrySpanExt;
        !span.is_disabled() && span.context().span().span_context().is_valid()
    }
    #[cfg(not(feature = "otel"))]
    {
        let _ = span;
        false
    }
}

/// Links `span` to the trace `to` names (a poll to the task it polls).
pub fn link(span: &tracing::Span, to: &TraceContext) {
    #[cfg(feature = "otel")]
    {
        use tracing_opentelemetry::OpenTelemetrySpanExt;
        if let Some(linked) = span_context(to) {
            span.add_link(linked);
        }
    }
    #[cfg(not(feature = "otel"))]
    let _ = (span, to);
}

/// The context `span` hands on (its trace, itself as the parent), carrying `baggage` along;
/// `None` when no OpenTelemetry layer records it.
pub fn context_of(span: &tracing::Span, baggage: Option<&str>) -> Option<TraceContext> {
    #[cfg(feature = "otel")]
    {
        use opentelemetry::trace::TraceContextExt;
        use tracing_opentelemetry::OpenTelemetrySpanExt;
        let cx = span.context();
        let own = cx.span().span_context().clone();
        if !own.is_valid() {
            return None;
        }
        let state = own.trace_state().header();
        let state = (!state.is_empty()).then_some(state);
        let mut context = TraceContext::for_span(
            &own.trace_id().to_string(),
            &own.span_id().to_string(),
            own.is_sampled(),
            state.as_deref(),
        )?;
        context.baggage = baggage.map(str::to_owned);
        Some(context)
    }
    #[cfg(not(feature = "otel"))]
    {
        let _ = (span, baggage);
        None
    }
}

/// The context `span` hands on where an OpenTelemetry layer records it (carrying `fallback`'s
/// baggage), else `fallback` itself: what a new task keeps, what a call or a run sends on.
pub fn handed_on(span: &tracing::Span, fallback: Option<TraceContext>) -> Option<TraceContext> {
    let baggage = fallback.as_ref().and_then(|c| c.baggage.as_deref());
    context_of(span, baggage).or(fallback)
}

/// `context` as an OpenTelemetry context with a remote parent.
#[cfg(feature = "otel")]
fn otel_context(context: &TraceContext) -> Option<opentelemetry::Context> {
    use opentelemetry::trace::TraceContextExt;
    Some(opentelemetry::Context::new().with_remote_span_context(span_context(context)?))
}

/// The remote span `context` names, as OpenTelemetry's span context (a parent or a link).
#[cfg(feature = "otel")]
fn span_context(context: &TraceContext) -> Option<opentelemetry::trace::SpanContext> {
    use opentelemetry::trace::{SpanContext, SpanId, TraceFlags, TraceId, TraceState};
    let trace_id = TraceId::from_hex(context.trace_id()).ok()?;
    let span_id = SpanId::from_hex(context.span_id()).ok()?;
    let flags = if context.sampled() { TraceFlags::SAMPLED } else { TraceFlags::default() };
    let state = context.tracestate.as_deref().and_then(|s| s.parse::<TraceState>().ok()).unwrap_or_default();
    Some(SpanContext::new(trace_id, span_id, flags, true, state))
}
