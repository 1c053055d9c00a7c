// The sans-IO client protocol (core's protocol::client) for hosts that send JSON-RPC themselves:
// classify a tools/call answer, follow one task with a TaskDriver. JSON in and out as JSONValue;
// times are Unix milliseconds passed in, so a host (or a test) owns the clock.
import Foundation
internal import MCPTasksFFI

/// Classifies a `tools/call` result; `declared` says whether the request declared the tasks
/// extension. Returns `{"kind": "complete" | "input_required" | "task", ...}`; a task answer to
/// a non-declaring request, an unknown `resultType` or a malformed task throws
/// `InvalidParamsError`.
public func classifyToolsCall(_ result: JSONValue, declared: Bool) throws -> JSONValue {
    let text = result.jsonText
    return parsedJSON(try bridged { try MCPTasksFFI.classifyToolsCall(resultJson: text, declared: declared) }) ?? .null
}

/// Follows one task, sans-IO: feed it the server's answers, send what `pollOutgoing()` returns,
/// call `handleTimeout` at `pollTimeout()`, read `pollEvent()` until a `finished` event. Safe to
/// share: each call takes the driver's lock.
public final class TaskDriver: Sendable {
    let ffi: MCPTasksFFI.TaskDriver

    /// Starts from a `CreateTaskResult` received at `nowMs`; a malformed one throws
    /// `InvalidParamsError`.
    public init(created: JSONValue, nowMs: UInt64) throws {
        let text = created.jsonText
        ffi = try bridged { try MCPTasksFFI.TaskDriver(createdJson: text, nowMs: nowMs) }
    }

    private init(ffi: MCPTasksFFI.TaskDriver) {
        self.ffi = ffi
    }

    /// Re-attaches from a saved `state()` at `nowMs`, e.g. after the app restarted.
    public static func resume(state: JSONValue, nowMs: UInt64) throws -> TaskDriver {
        let text = state.jsonText
        return TaskDriver(ffi: try bridged { try MCPTasksFFI.TaskDriver.resume(stateJson: text, nowMs: nowMs) })
    }

    /// The task id.
    public var taskId: String { ffi.taskId() }

    /// What survives a restart: pass it to `resume(state:nowMs:)`.
    public func state() -> JSONValue { parsedJSON(ffi.state()) ?? .null }

    /// The newest state seen (a `DetailedTask`).
    public func latest() -> JSONValue { parsedJSON(ffi.latest()) ?? .null }

    /// The outcome (`{"kind": ...}`), or `nil` while the task runs.
    public func outcome() -> JSONValue? { ffi.outcome().flatMap(parsedJSON) }

    /// A `tasks/get` result arrived.
    public func handleGet(nowMs: UInt64, result: JSONValue) throws {
        let text = result.jsonText
        try bridged { try ffi.handleGet(nowMs: nowMs, resultJson: text) }
    }

    /// A `notifications/tasks` params object arrived.
    public func handleNotification(nowMs: UInt64, params: JSONValue) throws {
        let text = params.jsonText
        try bridged { try ffi.handleNotification(nowMs: nowMs, paramsJson: text) }
    }

    /// `tasks/get` was answered with a JSON-RPC error object.
    public func handleGetError(nowMs: UInt64, error: JSONValue) throws {
        let text = error.jsonText
        try bridged { try ffi.handleGetError(nowMs: nowMs, errorJson: text) }
    }

    /// A `tasks/update` or `tasks/cancel` was answered: `error` is the JSON-RPC error object, or
    /// `nil` for the acknowledgement. Confirms a stop-mode cancel, tells `gone`, and resends
    /// answers whose update failed.
    public func handleAck(nowMs: UInt64, method: String, error: JSONValue?) throws {
        let text = error?.jsonText
        try bridged { try ffi.handleAck(nowMs: nowMs, method: method, errorJson: text) }
    }

    /// When `handleTimeout` is due (Unix ms), or `nil`.
    public func pollTimeout() -> UInt64? { ffi.pollTimeout() }

    /// The clock reached the timeout.
    public func handleTimeout(nowMs: UInt64) { ffi.handleTimeout(nowMs: nowMs) }

    /// The next request to send (`{"method", "params"}`), or `nil`.
    public func pollOutgoing() -> JSONValue? { ffi.pollOutgoing().flatMap(parsedJSON) }

    /// The next event (`{"kind": "status" | "input_requested" | "finished", ...}`), or `nil`.
    public func pollEvent() -> JSONValue? { ffi.pollEvent().flatMap(parsedJSON) }

    /// Answers input request `key` (sent by the next `pollOutgoing()`); a key never asked or
    /// already answered throws `InvalidParamsError`.
    public func answer(_ key: String, _ response: JSONValue) throws {
        let text = response.jsonText
        try bridged { try ffi.answer(key: key, responseJson: text) }
    }

    /// Sends `trace` (a W3C trace context; `nil` for none) in `_meta` with every later request
    /// about the task, as the client does for a traced call, and keeps it in `state()`.
    public func setTrace(_ trace: TraceContext?) {
        ffi.setTrace(traceJson: trace?.carrierJSON)
    }

    /// Asks to cancel.
    public func cancel(mode: CancelMode = .stop) throws {
        try bridged { try ffi.cancel(mode: mode.ffi) }
    }
}
