//! W3C Trace Context in a request's `params._meta` (SEP-414, final in MCP 2026-07-28:
//! <https://modelcontextprotocol.io/seps/414-request-meta>): `traceparent`, `tracestate` and
//! `baggage`, unprefixed, as the W3C headers of the same names
//! (<https://www.w3.org/TR/trace-context/>, <https://www.w3.org/TR/baggage/>).
//!
//! A server reads them from every request and keeps the creating request's context with the
//! task, so a run on any worker, after any restart, joins the caller's trace. Invalid values are
//! ignored, never an error (the W3C rule for a receiver: "restart the trace"), and sizes are
//! bounded, so a client cannot make a task's record large through its trace context.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// The `_meta` key of the W3C `traceparent`.
pub const META_TRACEPARENT: &str = "traceparent";
/// The `_meta` key of the W3C `tracestate`.
pub const META_TRACESTATE: &str = "tracestate";
/// The `_meta` key of the W3C `baggage`.
pub const META_BAGGAGE: &str = "baggage";

/// The longest `tracestate` kept, in bytes: W3C asks vendors to propagate at least 512.
pub const MAX_TRACESTATE_BYTES: usize = 512;
/// The most `tracestate` list members kept (the W3C limit).
pub const MAX_TRACESTATE_MEMBERS: usize = 32;
/// The longest `baggage` kept, in bytes (the W3C minimum a platform must propagate).
pub const MAX_BAGGAGE_BYTES: usize = 8192;
/// The most `baggage` list members kept (the W3C minimum a platform must propagate).
pub const MAX_BAGGAGE_MEMBERS: usize = 64;
/// The longest `traceparent` read: a future version may append fields, but not without bound.
pub const MAX_TRACEPARENT_BYTES: usize = 256;

/// A trace context as it travels in `_meta`: a valid `traceparent`, and the `tracestate` and
/// `baggage` that came with it when they were valid.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TraceContext {
    /// `version-traceid-parentid-flags`, normalised to version `00` (what this crate writes).
    pub traceparent: String,
    /// Vendor-specific trace state, passed on untouched.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tracestate: Option<String>,
    /// Application-defined key-value pairs, passed on untouched (never written to a span).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub baggage: Option<String>,
}

impl TraceContext {
    /// The context in a request's params (`params._meta`), if its `traceparent` is valid.
    pub fn from_params(params: Option<&Value>) -> Option<Self> {
        Self::from_meta(params?.get("_meta")?.as_object()?)
    }

    /// The context in a `_meta` object, if its `traceparent` is valid; an invalid or oversized
    /// `tracestate` or `baggage` is dropped and the rest kept.
    pub fn from_meta(meta: &Map<String, Value>) -> Option<Self> {
        let text = |key: &str| meta.get(key).and_then(Value::as_str);
        Self::from_parts(text(META_TRACEPARENT)?, text(META_TRACESTATE), text(META_BAGGAGE))
    }

    /// A context from the three header values (a binding's propagator wrote them); `None`
    /// unless `traceparent` is valid.
    pub fn from_parts(traceparent: &str, tracestate: Option<&str>, baggage: Option<&str>) -> Option<Self> {
        Some(Self {
            traceparent: parse_traceparent(traceparent)?,
            tracestate: tracestate.and_then(valid_tracestate),
            baggage: baggage.and_then(valid_baggage),
        })
    }

    /// The context in a propagator's carrier as JSON text (`{"traceparent": ..., "tracestate":
    /// ..., "baggage": ...}`, what bindings hand over); `None` unless it holds a valid one.
    pub fn from_carrier_json(carrier: &str) -> Option<Self> {
        Self::from_meta(&serde_json::from_str::<Map<String, Value>>(carrier).ok()?)
    }

    /// A context for a span this process made: trace id and span id as lowercase hex (32 and
    /// 16 digits), the sampled flag, and the state and baggage it carries on.
    pub fn for_span(trace_id: &str, span_id: &str, sampled: bool, tracestate: Option<&str>) -> Option<Self> {
        let flags = if sampled { "01" } else { "00" };
        Self::from_parts(&format!("00-{trace_id}-{span_id}-{flags}"), tracestate, None)
    }

    /// Writes the context's keys into a `_meta` object (replacing any there).
    pub fn write_meta(&self, meta: &mut Map<String, Value>) {
        meta.insert(META_TRACEPARENT.into(), Value::String(self.traceparent.clone()));
        match &self.tracestate {
            Some(state) => meta.insert(META_TRACESTATE.into(), Value::String(state.clone())),
            None => meta.remove(META_TRACESTATE),
        };
        match &self.baggage {
            Some(baggage) => meta.insert(META_BAGGAGE.into(), Value::String(baggage.clone())),
            None => meta.remove(META_BAGGAGE),
        };
    }

    /// The context as a `_meta` object of its own.
    pub fn to_meta(&self) -> Map<String, Value> {
        let mut meta = Map::new();
        self.write_meta(&mut meta);
        meta
    }

    /// The trace id: 32 lowercase hex digits.
    pub fn trace_id(&self) -> &str {
        &self.traceparent[3..35]
    }

    /// The id of the span this context names as the parent: 16 lowercase hex digits.
    pub fn span_id(&self) -> &str {
        &self.traceparent[36..52]
    }

    /// True when the caller sampled its span (flag bit 0): a span made under it is recorded.
    pub fn sampled(&self) -> bool {
        u8::from_str_radix(&self.traceparent[53..55], 16).is_ok_and(|flags| flags & 1 == 1)
    }

    /// The same trace, `span_id` its parent now (a span this process made under it), its
    /// `tracestate` and `baggage` kept.
    pub fn with_span(&self, span_id: &str, sampled: bool) -> Option<Self> {
        let mut child = Self::for_span(self.trace_id(), span_id, sampled, self.tracestate.as_deref())?;
        child.baggage = self.baggage.clone();
        Some(child)
    }

    /// `trace_url` with `{trace_id}` replaced by this context's trace id (an operator's link
    /// to Jaeger, Tempo, Honeycomb...).
    pub fn link(&self, trace_url: &str) -> String {
        trace_url.replace("{trace_id}", self.trace_id())
    }
}

/// The W3C rules for `traceparent`: `00-` 32 hex digits, `-` 16, `-` 2, lowercase, neither id
/// all zeros; version `ff` is invalid; a later version may append `-`-led fields (read as
/// version `00`, as W3C asks). Returns the normalised `00-…` form.
fn parse_traceparent(value: &str) -> Option<String> {
    let value = value.trim_matches([' ', '\t']);
    if value.len() < 55 || value.len() > MAX_TRACEPARENT_BYTES || !value.is_ascii() {
        return None;
    }
    let lower_hex = |s: &str| s.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
    let nonzero = |s: &str| s.bytes().any(|b| b != b'0');
    let (version, trace_id, span_id, flags) = (&value[0..2], &value[3..35], &value[36..52], &value[53..55]);
    let dashes = [2, 35, 52].iter().all(|&at| value.as_bytes()[at] == b'-');
    let valid = dashes
        && lower_hex(version)
        && version != "ff"
        && lower_hex(trace_id)
        && nonzero(trace_id)
        && lower_hex(span_id)
        && nonzero(span_id)
        && lower_hex(flags);
    // Version 00 has exactly these fields; a later one may carry more after a dash.
    let tail_ok = if version == "00" { value.len() == 55 } else { value.len() == 55 || value.as_bytes()[55] == b'-' };
    (valid && tail_ok).then(|| format!("00-{trace_id}-{span_id}-{flags}"))
}

/// A `tracestate` within the bounds: printable ASCII, at most 32 `key=value` members, 512
/// bytes. Anything else is dropped whole (W3C lets a receiver discard an invalid one).
fn valid_tracestate(value: &str) -> Option<String> {
    let value = value.trim_matches([' ', '\t']);
    if value.is_empty() || value.len() > MAX_TRACESTATE_BYTES || !printable(value) {
        return None;
    }
    let members: Vec<&str> = value.split(',').map(|m| m.trim_matches([' ', '\t'])).filter(|m| !m.is_empty()).collect();
    let well_formed = members.iter().all(|m| m.split_once('=').is_some_and(|(k, v)| !k.is_empty() && !v.is_empty()));
    (well_formed && !members.is_empty() && members.len() <= MAX_TRACESTATE_MEMBERS).then(|| value.to_owned())
}

/// A `baggage` within the bounds: printable ASCII, at most 64 members each with a `key=`,
/// 8,192 bytes. Anything else is dropped whole.
fn valid_baggage(value: &str) -> Option<String> {
    let value = value.trim_matches([' ', '\t']);
    if value.is_empty() || value.len() > MAX_BAGGAGE_BYTES || !printable(value) {
        return None;
    }
    let members: Vec<&str> = value.split(',').collect();
    let well_formed = members.iter().all(|m| {
        let pair = m.split(';').next().unwrap_or_default();
        pair.split_once('=').is_some_and(|(k, _)| !k.trim_matches([' ', '\t']).is_empty())
    });
    (well_formed && members.len() <= MAX_BAGGAGE_MEMBERS).then(|| value.to_owned())
}

fn printable(value: &str) -> bool {
    value.bytes().all(|b| (0x20..0x7f).contains(&b) || b == b'\t')
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const PARENT: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

    #[test]
    fn reads_a_valid_context_and_its_parts() {
        let meta = json!({"traceparent": PARENT, "tracestate": "rojo=00f067aa0ba902b7,congo=t61rcWkgMzE",
                          "baggage": "userId=alice,isProduction=false"});
        let ctx = TraceContext::from_meta(meta.as_object().unwrap()).unwrap();
        assert_eq!(ctx.trace_id(), "4bf92f3577b34da6a3ce929d0e0e4736");
        assert_eq!(ctx.span_id(), "00f067aa0ba902b7");
        assert!(ctx.sampled());
        assert_eq!(ctx.tracestate.as_deref(), Some("rojo=00f067aa0ba902b7,congo=t61rcWkgMzE"));
        assert_eq!(ctx.to_meta(), *meta.as_object().unwrap());
        let child = ctx.with_span("1111111111111111", false).unwrap();
        assert_eq!(child.traceparent, "00-4bf92f3577b34da6a3ce929d0e0e4736-1111111111111111-00");
        assert_eq!(child.baggage, ctx.baggage);
        assert_eq!(
            ctx.link("https://jaeger/trace/{trace_id}"),
            "https://jaeger/trace/4bf92f3577b34da6a3ce929d0e0e4736"
        );
    }

    #[test]
    fn ignores_what_is_invalid_and_bounds_the_rest() {
        for bad in [
            "",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-0",
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
            "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra",
            "00_4bf92f3577b34da6a3ce929d0e0e4736_00f067aa0ba902b7_01",
        ] {
            assert_eq!(TraceContext::from_parts(bad, None, None), None, "{bad:?}");
        }
        // A later version with more fields is read as 00.
        let later =
            TraceContext::from_parts("cc-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-what", None, None);
        assert_eq!(later.unwrap().traceparent, PARENT);
        // Not a string: ignored.
        assert_eq!(TraceContext::from_meta(json!({"traceparent": 7}).as_object().unwrap()), None);
        let long_state = vec!["k=v"; 33].join(",");
        let ctx = TraceContext::from_parts(PARENT, Some(&long_state), Some(&"a=b,".repeat(3000))).unwrap();
        assert_eq!((ctx.tracestate, ctx.baggage), (None, None));
        let ctx = TraceContext::from_parts(PARENT, Some("no-equals"), Some("k=v\u{7f}")).unwrap();
        assert_eq!((ctx.tracestate, ctx.baggage), (None, None));
    }
}
