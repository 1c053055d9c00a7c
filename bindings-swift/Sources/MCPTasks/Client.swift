// The client face: TasksClient, Execution and TaskExecution over the generated objects. Every
// call converts, calls core, converts back; cancellation of the awaiting Swift Task is wired by
// hand (uniffi-rs #2771: it does not reach the Rust future), through withTaskCancellationHandler.
import Foundation
internal import MCPTasksFFI

/// Answers the server's input requests (MRTR rounds before a task, and a task's
/// `input_required`): return the response (an `ElicitResult`, ...), or `nil` to leave the request
/// open and answer it later with `answer(_:_:)`. It may suspend, e.g. to ask the user on the main
/// actor; it runs outside the Rust runtime's threads.
public typealias InputHandler = @Sendable (InputRequest) async -> JSONValue?

/// The stdio server's stderr.
public enum StderrMode: String, Sendable, Hashable {
    /// Into this process's stderr (the default).
    case inherit
    /// Kept by the client (last lines appear in a `TransportError`'s causes).
    case capture
    /// Dropped.
    case discard
}

/// Options of `TasksClient`: core's `ClientOptions`. `nil` takes core's default; core checks how
/// they combine (give `url` or `command`, not both) and refuses a bad one with
/// `InvalidParamsError`.
public struct ClientOptions: Sendable, Hashable {
    /// The Streamable HTTP endpoint (give this or `command`).
    public var url: String?
    /// Headers sent with every request (`Authorization`, ...; HTTP only).
    public var headers: [String: String]
    /// The program of a stdio server the client starts as its child (give this or `url`).
    public var command: String?
    /// The stdio server's arguments.
    public var args: [String]
    /// Environment variables set for the stdio server (added to the inherited ones).
    public var env: [String: String]
    /// The stdio server's working directory.
    public var cwd: String?
    /// The stdio server's stderr.
    public var stderr: StderrMode?
    /// Where task references are kept (default `.defaultFile`).
    public var store: TaskStore?
    /// `clientInfo.name` sent in every request's `_meta` (default `mcp-tasks`).
    public var clientName: String?
    /// `clientInfo.version` (default the library's version).
    public var clientVersion: String?
    /// Listen for `notifications/tasks` when the server offers it (default true).
    public var notifications: Bool?
    /// Poll interval when the server suggests none, in ms (default 1000).
    public var defaultPollMs: UInt64?
    /// The shortest poll interval honoured, in ms (default 100).
    public var minPollMs: UInt64?
    /// The most MRTR rounds one `callTool` may take (default 8).
    public var maxInputRounds: UInt64?
    /// The client capabilities every request declares besides the tasks extension (default
    /// `{"elicitation": {}}`, form elicitation). Servers ask only for input a request declares:
    /// name what the input handler answers, e.g. `["elicitation": [:], "roots": [:]]`.
    public var capabilities: JSONValue?

    /// Options; every one left out takes core's default.
    public init(
        url: String? = nil, headers: [String: String] = [:], command: String? = nil, args: [String] = [],
        env: [String: String] = [:], cwd: String? = nil, stderr: StderrMode? = nil, store: TaskStore? = nil,
        clientName: String? = nil, clientVersion: String? = nil, notifications: Bool? = nil,
        defaultPollMs: UInt64? = nil, minPollMs: UInt64? = nil, maxInputRounds: UInt64? = nil,
        capabilities: JSONValue? = nil
    ) {
        self.url = url
        self.headers = headers
        self.command = command
        self.args = args
        self.env = env
        self.cwd = cwd
        self.stderr = stderr
        self.store = store
        self.clientName = clientName
        self.clientVersion = clientVersion
        self.notifications = notifications
        self.defaultPollMs = defaultPollMs
        self.minPollMs = minPollMs
        self.maxInputRounds = maxInputRounds
        self.capabilities = capabilities
    }

    var ffi: MCPTasksFFI.ClientOptions {
        MCPTasksFFI.ClientOptions(
            url: url ?? "", headers: headers, command: command, args: args, env: env, cwd: cwd,
            stderr: stderr?.rawValue, store: store?.url, clientName: clientName, clientVersion: clientVersion,
            notifications: notifications, defaultPollMs: defaultPollMs, minPollMs: minPollMs,
            maxInputRounds: maxInputRounds, capabilities: capabilities?.jsonText)
    }
}

/// The generated `InputHandler` over a Swift closure. Rust calls `handle` on a blocking thread of
/// its own (never a runtime worker), so waiting there for the async closure blocks no Swift
/// executor.
final class InputBridge: MCPTasksFFI.InputHandler {
    private let body: InputHandler

    init(_ body: @escaping InputHandler) {
        self.body = body
    }

    func handle(request: MCPTasksFFI.InputRequest) -> String? {
        let answer = Answer()
        let done = DispatchSemaphore(value: 0)
        let body = self.body
        let request = InputRequest(request)
        Task.detached {
            answer.set(await body(request))
            done.signal()
        }
        done.wait()
        return answer.get()?.jsonText
    }

    /// The closure's answer, handed from the Swift task to the waiting Rust thread.
    private final class Answer: @unchecked Sendable {
        // Written once by the Swift task before it signals, read after the wait: the semaphore
        // orders the two, and the lock keeps the checker's rule for it anyway.
        private let lock = NSLock()
        private var value: JSONValue?

        func set(_ value: JSONValue?) { lock.withLock { self.value = value } }
        func get() -> JSONValue? { lock.withLock { value } }
    }
}

/// The tasks client for one endpoint: calls tools, follows the tasks they create, and keeps task
/// references so `resumeAll()` finds them after the app is suspended or killed. `Sendable`: use
/// one from any actor, the main actor included.
public final class TasksClient: Sendable {
    let ffi: MCPTasksFFI.TasksClient

    /// A client from core's options; `onInputRequest` answers input requests. Throws
    /// `InvalidParamsError` for options core refuses, or the store's error.
    public init(options: ClientOptions, onInputRequest: InputHandler? = nil) throws {
        ffi = try bridged {
            try MCPTasksFFI.TasksClient(options: options.ffi, inputHandler: onInputRequest.map(InputBridge.init))
        }
    }

    /// A client for the Streamable HTTP endpoint `url`, sending `headers` with every request.
    public convenience init(
        url: URL, headers: [String: String] = [:], store: TaskStore = .defaultFile, notifications: Bool? = nil,
        onInputRequest: InputHandler? = nil
    ) throws {
        try self.init(
            options: ClientOptions(url: url.absoluteString, headers: headers, store: store, notifications: notifications),
            onInputRequest: onInputRequest)
    }

    /// A client for a stdio server it starts as its child: `command` with `arguments`,
    /// `environment` added to the inherited one, and `directory` as its working directory. The
    /// child starts on the first call (again after it died) and ends on `close()`. Not on iOS,
    /// tvOS or watchOS, where apps cannot start processes.
    @available(iOS, unavailable)
    @available(tvOS, unavailable)
    @available(watchOS, unavailable)
    public convenience init(
        command: String, arguments: [String] = [], environment: [String: String] = [:], directory: URL? = nil,
        stderr: StderrMode? = nil, store: TaskStore = .defaultFile, notifications: Bool? = nil,
        onInputRequest: InputHandler? = nil
    ) throws {
        try self.init(
            options: ClientOptions(
                command: command, args: arguments, env: environment, cwd: directory?.path, stderr: stderr,
                store: store, notifications: notifications),
            onInputRequest: onInputRequest)
    }

    /// Calls a tool: an immediate result, or a task to follow (MRTR rounds are answered by the
    /// input handler on the way). If the awaiting Swift `Task` is cancelled meanwhile and the
    /// call became a task, that task is cancelled and this throws `CancellationError`.
    ///
    /// `trace` (else `TraceContext.current`) is the caller's W3C trace context: it is sent with
    /// the call and with every poll, answer and cancel of its task, and kept with the task's
    /// reference, so a task `resumeAll()` finds later still carries it (SEP-414).
    public func callTool(
        _ name: String, arguments: [String: JSONValue] = [:], trace: TraceContext? = nil
    ) async throws -> Execution {
        let text = JSONValue.object(arguments).jsonText
        let traceJSON = (trace ?? TraceContext.current)?.carrierJSON
        let ffi = try await bridged {
            try await self.ffi.callToolTraced(name: name, argumentsJson: text, traceJson: traceJSON)
        }
        let execution = Execution(ffi)
        if Task.isCancelled {
            _ = try? await execution.result(whenCancelled: .cancelTask)
            throw CancellationError()
        }
        return execution
    }

    /// Calls a tool with any `Encodable` arguments (encoded by `encoder`; they must encode as a
    /// JSON object).
    public func callTool<Arguments: Encodable>(
        _ name: String, arguments: Arguments, encoder: JSONEncoder = JSONEncoder(), trace: TraceContext? = nil
    ) async throws -> Execution {
        guard case .object(let members) = try JSONValue(encoding: arguments, encoder: encoder) else {
            throw TasksError.InvalidParamsError(
                internalDetail("arguments must encode as a JSON object", className: "InvalidParamsError", code: -32602))
        }
        return try await callTool(name, arguments: members, trace: trace)
    }

    /// Re-attaches to every persisted task whose outcome was not handed out yet (after the app
    /// was suspended or killed); each outcome is handed out once, by `result()` or `value()`.
    public func resumeAll() async throws -> [TaskExecution] {
        try await bridged { try await self.ffi.resumeAll() }.map(TaskExecution.init)
    }

    /// Stops following every task (their references stay for `resumeAll()`) and closes the
    /// transport: a stdio server's child ends. Later calls throw `TransportError`.
    public func close() async {
        await ffi.close()
    }
}

/// What `callTool` became, with the same face for both kinds: `result()`, `value()`, `updates`,
/// `cancel` and `answer` (an immediate result has no updates, nothing to cancel and nothing to
/// answer).
public final class Execution: Sendable {
    let ffi: MCPTasksFFI.Execution
    /// The task being followed, or `nil` for an immediate result.
    public let task: TaskExecution?

    init(_ ffi: MCPTasksFFI.Execution) {
        self.ffi = ffi
        task = ffi.task().map(TaskExecution.init)
    }

    /// Immediate or task.
    public var kind: ExecutionKind { task == nil ? .immediate : .task }

    /// The task id, or `nil` for an immediate result.
    public var taskId: String? { task?.taskId }

    /// The task as created, or `nil` for an immediate result.
    public var created: TaskState? { ffi.created().map(TaskState.init) }

    /// The outcome (an immediate result is `.completed`); marks a task's outcome delivered, so
    /// `resumeAll()` does not hand it out again. See `CancellationPolicy` for what cancelling the
    /// awaiting Swift `Task` does.
    public func result(whenCancelled policy: CancellationPolicy = .cancelTask) async throws -> Outcome {
        if let task { return try await task.result(whenCancelled: policy) }
        return Outcome(try await bridged { try await ffi.result() })
    }

    /// The `CallToolResult`, or the typed error for a failed, cancelled, gone or expired task
    /// (`TasksError.TaskCancelledError`, ...). Marks the outcome delivered, as `result()` does.
    public func value(whenCancelled policy: CancellationPolicy = .cancelTask) async throws -> JSONValue {
        if let task { return try await task.value(whenCancelled: policy) }
        return parsedJSON(try await bridged { try await ffi.valueJson() }) ?? .null
    }

    /// The `CallToolResult` decoded as `T` (e.g. a struct with `structuredContent`), or the
    /// typed error as `value()` throws it.
    public func value<T: Decodable>(
        as type: T.Type, decoder: JSONDecoder = JSONDecoder(), whenCancelled policy: CancellationPolicy = .cancelTask
    ) async throws -> T {
        try await value(whenCancelled: policy).decode(type, decoder: decoder)
    }

    /// Every newer state of the task (from polls and notifications), the latest first, ending at
    /// its outcome; empty for an immediate result.
    public var updates: TaskUpdates { task?.updates ?? TaskUpdates { _ in nil } }

    /// Sends `tasks/cancel` (nothing to cancel for an immediate result).
    public func cancel(mode: CancelMode = .stop) throws {
        try bridged { try ffi.cancel(mode: mode.ffi) }
    }

    /// Answers the input request `key` left open; an immediate result asks nothing, and a key
    /// never asked, one already answered, or a finished task is `InvalidParamsError`.
    public func answer(_ key: String, _ response: JSONValue) async throws {
        let text = response.jsonText
        try await bridged { try await ffi.answer(key: key, responseJson: text) }
    }
}

/// A task being followed. Following stops when the last reference is dropped; the task itself
/// keeps running on the server and stays persisted for `resumeAll()`.
public final class TaskExecution: Sendable {
    let ffi: MCPTasksFFI.TaskExecution

    init(_ ffi: MCPTasksFFI.TaskExecution) {
        self.ffi = ffi
    }

    /// The task id.
    public var taskId: String { ffi.taskId() }

    /// The latest state seen.
    public var latest: TaskState { TaskState(ffi.latest()) }

    /// The outcome, marked delivered so `resumeAll()` does not hand it out again. See
    /// `CancellationPolicy` for what cancelling the awaiting Swift `Task` does.
    public func result(whenCancelled policy: CancellationPolicy = .cancelTask) async throws -> Outcome {
        let ffi = self.ffi
        return Outcome(try await awaiting(policy) { try await ffi.resultUntil(interrupt: $0) })
    }

    /// The `CallToolResult`, or the typed error for a failed, cancelled, gone or expired task.
    public func value(whenCancelled policy: CancellationPolicy = .cancelTask) async throws -> JSONValue {
        let ffi = self.ffi
        return parsedJSON(try await awaiting(policy) { try await ffi.valueJsonUntil(interrupt: $0) }) ?? .null
    }

    /// Waits through `wait`, which ends early with `nil` when its interrupt fires. Cancelling the
    /// awaiting Swift `Task` sends `tasks/cancel` (`.cancelTask`: the wait then ends with the
    /// server's answer) or fires the interrupt (`.detach`: the wait ends at once, throwing
    /// `CancellationError`).
    private func awaiting<T: Sendable>(
        _ policy: CancellationPolicy, _ wait: @Sendable (MCPTasksFFI.Interrupt) async throws -> T?
    ) async throws -> T {
        let ffi = self.ffi
        let interrupt = MCPTasksFFI.Interrupt()
        let value = try await withTaskCancellationHandler {
            try await bridged { try await wait(interrupt) }
        } onCancel: {
            switch policy {
            case .cancelTask: try? ffi.cancel(mode: .stop)
            case .detach: interrupt.fire()
            }
        }
        guard let value else { throw CancellationError() }
        return value
    }

    /// Every newer state of the task, the latest first, ending at its outcome.
    public var updates: TaskUpdates {
        let ffi = self.ffi
        return TaskUpdates { await ffi.nextUpdateUntil(interrupt: $0) }
    }

    /// Sends `tasks/cancel`.
    public func cancel(mode: CancelMode = .stop) throws {
        try bridged { try ffi.cancel(mode: mode.ffi) }
    }

    /// Answers input request `key`; a key never asked, one already answered, or a finished task
    /// is `InvalidParamsError`.
    public func answer(_ key: String, _ response: JSONValue) async throws {
        let text = response.jsonText
        try await bridged { try await ffi.answer(key: key, responseJson: text) }
    }
}

/// A task's states as an `AsyncSequence`: the latest first, then each newer one (intermediate
/// states may be coalesced when the consumer is slow), ending at the outcome. Cancelling the
/// consuming Swift `Task` ends it at once; the task itself keeps running.
public struct TaskUpdates: AsyncSequence, Sendable {
    public typealias Element = TaskState
    public typealias Failure = Never

    let next: @Sendable (MCPTasksFFI.Interrupt) async -> MCPTasksFFI.TaskState?

    public func makeAsyncIterator() -> Iterator {
        Iterator(next: next)
    }

    /// Reads one state at a time from the Rust client.
    public struct Iterator: AsyncIteratorProtocol {
        let next: @Sendable (MCPTasksFFI.Interrupt) async -> MCPTasksFFI.TaskState?
        var finished = false

        public mutating func next() async -> TaskState? {
            guard !finished, !Task.isCancelled else { return nil }
            let interrupt = MCPTasksFFI.Interrupt()
            let next = self.next
            let state = await withTaskCancellationHandler {
                await next(interrupt)
            } onCancel: {
                interrupt.fire()
            }
            guard let state else {
                finished = true
                return nil
            }
            return TaskState(state)
        }
    }
}
