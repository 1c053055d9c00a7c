// The Swift layer over the generated bindings (mcp_tasks_ffi.swift): Foundation types in, async
// sequences of task updates out, closures as input handlers and listeners. Everything crosses
// into Rust through the generated `TasksClient` and `TaskExecution`.
import Foundation

/// Where a client keeps its task references (what `resumeAll()` finds after a restart).
public enum TaskStore: Sendable {
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

/// Adapts a closure to the generated `InputHandler` protocol. Called on a background thread with
/// core's `InputRequest` (`taskId` is `nil` for an MRTR round before any task exists).
final class ClosureInputHandler: InputHandler, @unchecked Sendable {
    private let body: @Sendable (InputRequest) -> [String: Any]?

    init(_ body: @escaping @Sendable (InputRequest) -> [String: Any]?) {
        self.body = body
    }

    func handle(request: InputRequest) -> String? {
        guard let answer = body(request), let data = try? JSONSerialization.data(withJSONObject: answer) else {
            return nil  // left open: answer later with Execution.answer
        }
        return String(decoding: data, as: UTF8.self)
    }
}

extension InputRequest {
    /// The request's params, decoded.
    public var params: [String: Any] {
        (try? JSONSerialization.jsonObject(with: Data(paramsJson.utf8))) as? [String: Any] ?? [:]
    }
}

extension TasksClient {
    /// A client for the Streamable HTTP endpoint `url`. `onInputRequest` answers input requests
    /// with a response object (an ElicitResult, ...), or `nil` to leave a task's request open.
    public convenience init(
        url: URL,
        headers: [String: String] = [:],
        store: TaskStore = .defaultFile,
        notifications: Bool? = nil,
        onInputRequest: (@Sendable (InputRequest) -> [String: Any]?)? = nil
    ) throws {
        let options = ClientOptions(url: url.absoluteString, headers: headers, store: store.url, notifications: notifications)
        try self.init(options: options, inputHandler: onInputRequest.map { ClosureInputHandler($0) as InputHandler })
    }

    /// A client for a stdio server it starts as its child: `command` with `arguments`,
    /// `environment` added to the inherited one, and `directory` as its working directory. The
    /// child starts on the first call (again after it died) and ends on `close()`. macOS and
    /// Linux only: iOS apps cannot start processes, so there the first call throws
    /// `TransportError`.
    public convenience init(
        command: String,
        arguments: [String] = [],
        environment: [String: String] = [:],
        directory: URL? = nil,
        store: TaskStore = .defaultFile,
        notifications: Bool? = nil,
        onInputRequest: (@Sendable (InputRequest) -> [String: Any]?)? = nil
    ) throws {
        let options = ClientOptions(
            command: command, args: arguments, env: environment, cwd: directory?.path, store: store.url,
            notifications: notifications)
        try self.init(options: options, inputHandler: onInputRequest.map { ClosureInputHandler($0) as InputHandler })
    }

    /// Calls a tool with JSON-serializable arguments.
    public func callTool(_ name: String, arguments: [String: Any] = [:]) async throws -> Execution {
        let data = try JSONSerialization.data(withJSONObject: arguments)
        return try await callTool(name: name, argumentsJson: String(decoding: data, as: UTF8.self))
    }
}

/// The states `next` hands out, as an `AsyncStream` that ends when it returns `nil`; cancelling
/// the iterating Swift task stops reading (the task itself keeps running).
private func stateStream(_ next: @escaping @Sendable () async -> TaskState?) -> AsyncStream<TaskState> {
    AsyncStream { continuation in
        let pump = Task {
            while let state = await next() {
                continuation.yield(state)
            }
            continuation.finish()
        }
        continuation.onTermination = { _ in pump.cancel() }
    }
}

/// A response object as the JSON text the generated `answer(key:responseJson:)` takes.
private func responseJson(_ response: [String: Any]) throws -> String {
    String(decoding: try JSONSerialization.data(withJSONObject: response), as: UTF8.self)
}

extension Execution {
    /// Every newer state of the task (from polls and notifications), ending at its outcome; empty
    /// for an immediate result.
    public var updates: AsyncStream<TaskState> { stateStream { await self.nextUpdate() } }

    /// Answers input request `key` with a response object.
    public func answer(_ key: String, _ response: [String: Any]) async throws {
        try await answer(key: key, responseJson: responseJson(response))
    }

    /// The `CallToolResult`, decoded; throws the typed error for a failed, cancelled, gone or
    /// expired task (`TasksError.TaskCancelledError`, ...).
    public func value() async throws -> [String: Any] {
        let json = try await valueJson()
        return (try JSONSerialization.jsonObject(with: Data(json.utf8))) as? [String: Any] ?? [:]
    }
}

extension TaskExecution {
    /// Every newer state of the task (from polls and notifications), ending at its outcome.
    public var updates: AsyncStream<TaskState> { stateStream { await self.nextUpdate() } }

    /// Answers input request `key` with a response object.
    public func answer(_ key: String, _ response: [String: Any]) async throws {
        try await answer(key: key, responseJson: responseJson(response))
    }
}

extension Outcome {
    /// The completed `CallToolResult`, decoded, or `nil` for other outcomes.
    public var result: [String: Any]? {
        guard case .completed(let json) = self else { return nil }
        return (try? JSONSerialization.jsonObject(with: Data(json.utf8))) as? [String: Any]
    }
}

extension TasksError {
    /// The class, code, message, data and causes every case carries.
    public var detail: ErrorDetail {
        switch self {
        case .McpTaskError(let d), .ParseError(let d), .InvalidRequestError(let d), .RequestTooLargeError(let d),
             .MethodNotFoundError(let d), .InvalidParamsError(let d), .TaskNotFoundError(let d),
             .HeaderMismatchError(let d), .MissingCapabilityError(let d), .UnsupportedVersionError(let d),
             .InternalError(let d), .QuotaExceededError(let d), .TransportError(let d), .TaskCancelledError(let d),
             .TaskGoneError(let d), .TaskExpiredError(let d):
            return d
        }
    }

    /// The JSON-RPC error code (-32603 for task outcomes, which have none).
    public var code: Int64 { detail.code ?? -32603 }
}
