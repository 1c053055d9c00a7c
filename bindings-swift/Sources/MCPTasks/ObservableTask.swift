// A task a SwiftUI view can observe: an `@Observable` model on the main actor whose status,
// message, open input requests and outcome follow the task as polls and notifications arrive.
// It is a consumer of `TaskExecution.updates` and `result()`, nothing more: core decides what
// a state is and when the task has ended; this file only moves each state onto the main actor.
#if canImport(Observation)
import Foundation
import Observation

/// A task followed on the main actor, for views: read `status`, `statusMessage`,
/// `inputRequests` and `outcome` in a SwiftUI `body` (or under `withObservationTracking`) and
/// the view updates as the server's states arrive, with no glue.
///
/// It follows the task from creation until its outcome, which it then holds (and which is
/// handed out to it: `resumeAll()` does not return the task again). Dropping the model stops
/// following; the task keeps running on the server and `resumeAll()` finds it, so after an
/// app relaunch `try await client.resumeAll().map(ObservableTask.init)` re-attaches every view.
/// `cancel()` cancels the server's task.
@available(macOS 14, iOS 17, tvOS 17, watchOS 10, *)
@MainActor
@Observable
public final class ObservableTask: Identifiable {
    /// The task id (also the model's `id`, so a `ForEach` over tasks needs no key path).
    public nonisolated let id: String
    /// The newest state seen.
    public private(set) var latest: TaskState
    /// The outcome, once the task has one (`nil` while it runs).
    public private(set) var outcome: Outcome?
    /// Why following stopped without an outcome (the transport failed, the client was closed):
    /// the task may still run on the server, and `resumeAll()` finds it.
    public private(set) var followError: TasksError?

    @ObservationIgnored private let task: TaskExecution
    @ObservationIgnored private let follower = Follower()

    /// Follows `task` from its latest state on.
    public init(_ task: TaskExecution) {
        self.task = task
        id = task.taskId
        latest = task.latest
        // The following task holds the model weakly between states, so a dropped model goes
        // away (and its deinit stops the following) even while a state is awaited.
        follower.start(
            Task { [weak self] in
                for await state in task.updates {
                    guard let self else { return }
                    self.apply(state)
                }
                let ended: Result<Outcome, any Error>
                do {
                    ended = .success(try await task.result(whenCancelled: .detach))
                } catch {
                    ended = .failure(error)
                }
                self?.finish(ended)
            })
    }

    /// Follows the task `execution` created; `nil` for a call that answered at once.
    public convenience init?(_ execution: Execution) {
        guard let task = execution.task else { return nil }
        self.init(task)
    }

    deinit {
        follower.stop()
    }

    /// The task id.
    public var taskId: String { id }

    /// The status: the outcome's once there is one (a task that is `gone` or `expired` keeps the
    /// last status the server sent).
    public var status: TaskStatus { latest.status }

    /// The server's human-readable progress, if any.
    public var statusMessage: String? { latest.statusMessage }

    /// The input requests waiting for an answer (key to request): empty unless the status is
    /// `inputRequired`.
    public var inputRequests: [String: JSONValue] {
        latest.status == .inputRequired ? latest.inputRequests ?? [:] : [:]
    }

    /// Whether the task has its outcome.
    public var isFinished: Bool { outcome != nil }

    /// The completed `CallToolResult`, or `nil`.
    public var result: JSONValue? { outcome?.result }

    /// Sends `tasks/cancel` (the outcome becomes `.cancelled` once the server acknowledges).
    public func cancel() throws {
        try task.cancel(mode: .stop)
    }

    /// Answers the open input request `key`.
    public func answer(_ key: String, _ response: JSONValue) async throws {
        try await task.answer(key, response)
    }

    private func finish(_ ended: Result<Outcome, any Error>) {
        switch ended {
        case .success(let outcome):
            // The last state may have been coalesced away: the outcome says how it ended.
            if let final = Self.status(of: outcome), latest.status != final {
                var state = latest
                state.status = final
                latest = state
            }
            self.outcome = outcome
        case .failure(is CancellationError):
            break  // dropped or stopped: the task stays for resumeAll()
        case .failure(let error as TasksError):
            followError = error
        case .failure(let error):
            followError = .InternalError(internalDetail("\(error)"))
        }
    }

    private func apply(_ state: TaskState) {
        // Never back from a terminal state, nor to an older one (a poll and a notification may
        // cross): core's driver already orders them; this keeps the model's rule local.
        guard !latest.status.isTerminal else { return }
        latest = state
    }

    private static func status(of outcome: Outcome) -> TaskStatus? {
        switch outcome {
        case .completed: return .completed
        case .failed: return .failed
        case .cancelled: return .cancelled
        case .gone, .expired: return nil
        }
    }

    /// The following Swift task, cancelled when the model goes away (a deinit is not
    /// main-actor isolated, so it reaches the task through this lock).
    private final class Follower: @unchecked Sendable {
        private let lock = NSLock()
        private var running: Task<Void, Never>?

        func start(_ task: Task<Void, Never>) { lock.withLock { running = task } }
        func stop() { lock.withLock { running?.cancel() } }
    }
}
#endif
