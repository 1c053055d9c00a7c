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

/// One input request from the server: an MRTR round (`taskId == nil`) or a task's input_required.
public struct InputRequest: Sendable {
    /// The task asking, or `nil` for a round before any task exists.
    public let taskId: String?
    /// The key the answer goes under.
    public let key: String
    /// `elicitation/create`, `sampling/createMessage`, `roots/list`, ...
    public let method: String
    /// The request's params, as JSON.
    public let paramsJSON: String
}

/// Adapts a closure to the generated `InputHandler` protocol. Called on a background thread.
final class ClosureInputHandler: InputHandler, @unchecked Sendable {
    private let body: @Sendable (InputRequest) -> [String: Any]?

    init(_ body: @escaping @Sendable (InputRequest) -> [String: Any]?) {
        self.body = body
    }

    func handle(taskId: String?, key: String, requestJson: String) -> String? {
        let request = (try? JSONSerialization.jsonObject(with: Data(requestJson.utf8))) as? [String: Any] ?? [:]
        let params = request["params"].flatMap { try? JSONSerialization.data(withJSONObject: $0) } ?? Data("{}".utf8)
        let asked = InputRequest(
            taskId: taskId,
            key: key,
            method: request["method"] as? String ?? "",
            paramsJSON: String(decoding: params, as: UTF8.self)
        )
        guard let answer = body(asked), let data = try? JSONSerialization.data(withJSONObject: answer) else {
            return nil  // left open: answer later with TaskExecution.answer
        }
        return String(decoding: data, as: UTF8.self)
    }
}

extension TasksClient {
    /// A client for the Streamable HTTP endpoint `url`. `onInputRequest` answers input requests
    /// with a response object (an ElicitResult, ...), or `nil` to leave a task's request open.
    public convenience init(
        url: URL,
        headers: [String: String] = [:],
        store: TaskStore = .defaultFile,
        notifications: Bool = true,
        onInputRequest: (@Sendable (InputRequest) -> [String: Any]?)? = nil
    ) throws {
        let options = ClientOptions(
            url: url.absoluteString,
            headers: headers,
            store: store.url,
            clientName: nil,
            clientVersion: nil,
            notifications: notifications
        )
        try self.init(options: options, inputHandler: onInputRequest.map { ClosureInputHandler($0) as InputHandler })
    }

    /// Calls a tool with JSON-serializable arguments.
    public func callTool(_ name: String, arguments: [String: Any] = [:]) async throws -> CallResult {
        let data = try JSONSerialization.data(withJSONObject: arguments)
        return try await callTool(name: name, argumentsJson: String(decoding: data, as: UTF8.self))
    }
}

extension TaskExecution {
    /// Every newer state of the task (from polls and notifications), ending at its outcome.
    /// Cancelling the iterating Swift task stops reading; the task itself keeps running.
    public var updates: AsyncStream<TaskState> {
        AsyncStream { continuation in
            let pump = Task {
                while let state = await self.nextUpdate() {
                    continuation.yield(state)
                }
                continuation.finish()
            }
            continuation.onTermination = { _ in pump.cancel() }
        }
    }

    /// Answers input request `key` with a response object.
    public func answer(_ key: String, _ response: [String: Any]) throws {
        let data = try JSONSerialization.data(withJSONObject: response)
        try answer(key: key, responseJson: String(decoding: data, as: UTF8.self))
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
    /// The JSON-RPC error code.
    public var code: Int64 {
        switch self {
        case .Server(let code, _, _): return code
        case .Client(let code, _): return code
        }
    }
}
