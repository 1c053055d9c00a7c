// Trace context from Swift (SEP-414, https://modelcontextprotocol.io/seps/414-request-meta): a
// W3C trace context handed to a call, by an option or by a task-local value an app's tracing
// library sets once. Core sends it in `_meta` with the call and with every request about the
// task (polls, answers, cancels) and keeps it with the task reference for `resumeAll()`; core
// also decides what is valid (an invalid context is ignored, never an error), so nothing here
// parses it.
import Foundation

/// A W3C trace context (`traceparent`, `tracestate`, `baggage`), as a propagator's carrier
/// holds it. Hand it to a call with `callTool(_:arguments:trace:)`, or set it for a whole
/// stretch of work with `TraceContext.$current.withValue(context) { ... }`.
public struct TraceContext: Sendable, Hashable, Codable {
    /// `00-<32 hex trace id>-<16 hex parent span id>-<2 hex flags>`.
    public var traceparent: String
    /// Vendor state (`tracestate`), if any.
    public var tracestate: String?
    /// W3C baggage, if any.
    public var baggage: String?

    /// A context from its header values.
    public init(traceparent: String, tracestate: String? = nil, baggage: String? = nil) {
        self.traceparent = traceparent
        self.tracestate = tracestate
        self.baggage = baggage
    }

    /// The context from a propagator's carrier (header names in any case, as an OpenTelemetry
    /// injector writes them), or `nil` when it has no `traceparent`.
    public init?(carrier: [String: String]) {
        let lowered = Dictionary(carrier.map { ($0.key.lowercased(), $0.value) }, uniquingKeysWith: { _, last in last })
        guard let traceparent = lowered["traceparent"] else { return nil }
        self.init(traceparent: traceparent, tracestate: lowered["tracestate"], baggage: lowered["baggage"])
    }

    /// The context as a propagator's carrier (lower-case header names).
    public var carrier: [String: String] {
        var carrier = ["traceparent": traceparent]
        carrier["tracestate"] = tracestate
        carrier["baggage"] = baggage
        return carrier
    }

    /// The context calls in this Swift task (and the child tasks it starts) carry when they are
    /// given none: an app's tracing library sets it once around an operation.
    @TaskLocal public static var current: TraceContext?

    /// The carrier as JSON text, as the FFI takes it.
    var carrierJSON: String {
        JSONValue.object(carrier.mapValues(JSONValue.string)).jsonText
    }
}
