// The value types of the public API: core's task state, outcome and input request with JSON as
// `JSONValue`, converted from the generated records (whose JSON crosses the FFI as text).
import Foundation
internal import MCPTasksFFI

/// A task's status (`status` on the wire).
public enum TaskStatus: String, Sendable, Hashable, Codable, CaseIterable {
    /// The work is running.
    case working
    /// The work waits for answers to `inputRequests`.
    case inputRequired = "input_required"
    /// Terminal: `result` holds the tool's `CallToolResult`.
    case completed
    /// Terminal: `error` holds the JSON-RPC error.
    case failed
    /// Terminal: the task was cancelled.
    case cancelled

    /// Whether no further state follows.
    public var isTerminal: Bool { self == .completed || self == .failed || self == .cancelled }

    init(_ ffi: MCPTasksFFI.TaskStatus) {
        switch ffi {
        case .working: self = .working
        case .inputRequired: self = .inputRequired
        case .completed: self = .completed
        case .failed: self = .failed
        case .cancelled: self = .cancelled
        }
    }
}

/// A JSON-RPC error object, as a failed task carries it.
public struct TaskError: Sendable, Hashable, Codable {
    /// The JSON-RPC code.
    public var code: Int
    /// The message.
    public var message: String
    /// The error's `data`, if any.
    public var data: JSONValue?

    /// An error object.
    public init(code: Int, message: String, data: JSONValue? = nil) {
        self.code = code
        self.message = message
        self.data = data
    }

    init(_ ffi: MCPTasksFFI.TaskError) {
        self.init(code: Int(ffi.code), message: ffi.message, data: ffi.dataJson.flatMap(parsedJSON))
    }
}

/// A task's state (`DetailedTask`): what a poll or a notification said last.
public struct TaskState: Sendable, Hashable {
    /// The task id.
    public var taskId: String
    /// The status.
    public var status: TaskStatus
    /// The server's human-readable progress, if any.
    public var statusMessage: String?
    /// RFC 3339 creation time, as the server wrote it.
    public var createdAt: String
    /// RFC 3339 time of the last change, as the server wrote it.
    public var lastUpdatedAt: String
    /// Lifetime from `createdAt` in milliseconds; `nil` is unlimited.
    public var ttlMs: UInt64?
    /// The poll pace the server asks for, in milliseconds.
    public var pollIntervalMs: UInt64?
    /// The `CallToolResult` when completed.
    public var result: JSONValue?
    /// The error when failed.
    public var error: TaskError?
    /// The open input requests (key to request) when input is required.
    public var inputRequests: [String: JSONValue]?

    init(_ ffi: MCPTasksFFI.TaskState) {
        taskId = ffi.taskId
        status = TaskStatus(ffi.status)
        statusMessage = ffi.statusMessage
        createdAt = ffi.createdAt
        lastUpdatedAt = ffi.lastUpdatedAt
        ttlMs = ffi.ttlMs
        pollIntervalMs = ffi.pollIntervalMs
        result = ffi.resultJson.flatMap(parsedJSON)
        error = ffi.error.map(TaskError.init)
        inputRequests = ffi.inputRequestsJson.flatMap(parsedJSON)?.objectValue
    }
}

/// How a task ended, as far as the client is concerned (core's `Outcome`).
public enum Outcome: Sendable, Hashable {
    /// Completed with this `CallToolResult` (which may have `isError: true`: a tool error).
    case completed(JSONValue)
    /// Failed with a JSON-RPC error.
    case failed(TaskError)
    /// Cancelled.
    case cancelled
    /// The server no longer knows the task (purged, or never there).
    case gone
    /// Its TTL passed before a final state was seen.
    case expired

    /// The outcome's kind as core names it: `completed`, `failed`, `cancelled`, `gone` or `expired`.
    public var kind: String {
        switch self {
        case .completed: return "completed"
        case .failed: return "failed"
        case .cancelled: return "cancelled"
        case .gone: return "gone"
        case .expired: return "expired"
        }
    }

    /// The completed `CallToolResult`, or `nil` for the other outcomes.
    public var result: JSONValue? {
        if case .completed(let result) = self { return result }
        return nil
    }

    init(_ ffi: MCPTasksFFI.Outcome) {
        switch ffi {
        case .completed(let json): self = .completed(parsedJSON(json) ?? .null)
        case .failed(let error): self = .failed(TaskError(error))
        case .cancelled: self = .cancelled
        case .gone: self = .gone
        case .expired: self = .expired
        }
    }
}

/// One input request (core's `InputRequest`): the asking task (`nil` for an MRTR round before any
/// task exists), the key the answer goes under, and the request's method and params.
public struct InputRequest: Sendable, Hashable {
    /// The task asking, or `nil` for a round before any task exists.
    public var taskId: String?
    /// The key the answer goes under.
    public var key: String
    /// `elicitation/create`, `sampling/createMessage`, `roots/list`, ...
    public var method: String
    /// The request's params (`{}` when it has none).
    public var params: JSONValue

    /// An input request.
    public init(taskId: String?, key: String, method: String, params: JSONValue) {
        self.taskId = taskId
        self.key = key
        self.method = method
        self.params = params
    }

    init(_ ffi: MCPTasksFFI.InputRequest) {
        self.init(taskId: ffi.taskId, key: ffi.key, method: ffi.method, params: parsedJSON(ffi.paramsJson) ?? [:])
    }
}

/// How `cancel` behaves.
public enum CancelMode: Sendable, Hashable {
    /// The outcome is `.cancelled` once the server acknowledges the cancel.
    case stop
    /// Keep following until the server's final state.
    case observe

    var ffi: MCPTasksFFI.CancelMode { self == .stop ? .stop : .observe }
}

/// Whether a call answered at once or became a task.
public enum ExecutionKind: String, Sendable, Hashable {
    /// The tool answered at once (no task).
    case immediate
    /// The server created a task, now followed.
    case task
}

/// What cancelling the Swift `Task` that awaits `result()` or `value()` does.
public enum CancellationPolicy: Sendable, Hashable {
    /// Send `tasks/cancel` and wait for the acknowledgement: the task ends `.cancelled`, and
    /// `resumeAll()` does not hand it out again. The default.
    case cancelTask
    /// Stop waiting at once (the call throws `CancellationError`) and leave the task running on
    /// the server; its outcome stays for `resumeAll()`.
    case detach
}

/// Where a client keeps its task references (what `resumeAll()` finds after a restart).
public enum TaskStore: Sendable, Hashable {
    /// The library's default file (`$MCP_TASKS_CLIENT_DB`, else the XDG data directory). On iOS
    /// prefer `.file` inside Application Support.
    case defaultFile
    /// A SQLite file.
    case file(URL)
    /// Memory only: lost when the process ends.
    case memory

    var url: String? {
        switch self {
        case .defaultFile: return nil
        case .file(let path): return "sqlite://" + path.path
        case .memory: return "memory://"
        }
    }
}

/// The JSON text the generated bindings hand out, parsed. Core wrote it, so it parses; `nil`
/// would mean a bug on the Rust side, and the value is then absent rather than a crash.
func parsedJSON(_ text: String) -> JSONValue? {
    try? JSONValue(parsing: text)
}

/// The extension identifier, `io.modelcontextprotocol/tasks`.
public let extensionID: String = MCPTasksFFI.extensionId()

/// The MCP revision the client speaks, `2026-07-28`.
public let protocolVersion: String = MCPTasksFFI.protocolVersion()
