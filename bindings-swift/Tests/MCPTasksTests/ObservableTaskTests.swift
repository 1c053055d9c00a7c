// ObservableTask against the fixture server, seen the way SwiftUI sees it: through
// withObservationTracking (the Observation module ships with the toolchain on Linux too), each
// change arriving on the main actor as polls and notifications come in.
import Foundation
import MCPTasks
import Observation
import XCTest

// The package's floor is macOS 12 / iOS 15; the Observation module starts at macOS 14 / iOS 17.
@available(macOS 14, iOS 17, *)
@MainActor
final class ObservableTaskTests: XCTestCase {
    private func client(store: TaskStore = .memory, onInputRequest: InputHandler? = nil) throws -> TasksClient {
        try TasksClient(
            options: ClientOptions(url: try fixtureURL().absoluteString, store: store, notifications: true),
            onInputRequest: onInputRequest)
    }

    /// The model of the task a call created.
    private func observed(
        _ client: TasksClient, _ tool: String, _ arguments: [String: JSONValue] = [:]
    ) async throws -> ObservableTask {
        let execution = try await client.callTool(tool, arguments: arguments)
        return try XCTUnwrap(ObservableTask(execution), "\(tool) answered at once")
    }

    /// What a view's `body` reads, recorded at each change a view would re-render for, until the
    /// task has its outcome (bounded: 20 changes or 20 s).
    private func renders(_ task: ObservableTask) async throws -> [String] {
        var frames = [frame(task)]
        let deadline = Date().addingTimeInterval(20)
        while !task.isFinished, frames.count < 20, Date() < deadline {
            await withCheckedContinuation { (changed: CheckedContinuation<Void, Never>) in
                withObservationTracking {
                    _ = (task.status, task.statusMessage, task.inputRequests, task.outcome)
                } onChange: {
                    // A view is invalidated on the actor that changed the model: the main actor.
                    MainActor.assertIsolated()
                    changed.resume()
                }
            }
            // onChange runs before the new value is stored (willSet): read it after a turn.
            await Task.yield()
            frames.append(frame(task))
        }
        return frames
    }

    private func frame(_ task: ObservableTask) -> String {
        let inputs = task.inputRequests.keys.sorted().joined(separator: ",")
        return [task.status.rawValue, task.statusMessage ?? "", inputs, task.outcome?.kind ?? ""].joined(separator: "|")
    }

    func testAViewSeesProgressAndTheOutcome() async throws {
        let client = try client { _ in ["action": "accept", "content": ["name": "Ada"]] }  // its MRTR round
        let immediate = try await client.callTool("greet", arguments: ["name": "x"])
        XCTAssertNil(ObservableTask(immediate))
        // docs:begin observe
        let execution = try await client.callTool("test_tool_with_task")
        // nil for a call that answered at once (execution.value() holds its result).
        let task = try XCTUnwrap(ObservableTask(execution))
        // docs:end observe
        XCTAssertEqual(task.id, execution.taskId)
        XCTAssertFalse(task.isFinished)
        let frames = try await renders(task)
        XCTAssertTrue(task.isFinished, "\(frames)")
        XCTAssertEqual(task.status, .completed)
        XCTAssertEqual(task.outcome?.kind, "completed")
        XCTAssertEqual(try firstText(task.result), "Hello, Ada! Your task is done.")
        XCTAssertTrue(frames.last?.hasPrefix("completed|") ?? false, "\(frames)")
        XCTAssertTrue(frames.last?.hasSuffix("||completed") ?? false, "\(frames)")
        XCTAssertGreaterThanOrEqual(frames.count, 2, "\(frames)")
    }

    /// An input request shows in `inputRequests`, the view answers it, and the task goes on.
    func testAViewAnswersAnInputRequest() async throws {
        let client = try client { _ in nil }  // left open for the view
        let task = try await observed(client, "confirm_delete", ["filename": "v.txt"])
        let deadline = Date().addingTimeInterval(20)
        while task.inputRequests.isEmpty, Date() < deadline {
            await withCheckedContinuation { changed in
                withObservationTracking { _ = task.inputRequests } onChange: { changed.resume() }
            }
            await Task.yield()
        }
        XCTAssertEqual(task.status, .inputRequired)
        XCTAssertEqual(Array(task.inputRequests.keys), ["confirm_delete"])
        try await task.answer("confirm_delete", ["action": "accept", "content": ["confirm": true]])
        _ = try await renders(task)
        XCTAssertEqual(try firstText(task.result), "Deleted v.txt")
        XCTAssertTrue(task.inputRequests.isEmpty)
    }

    /// Cancelling from the view cancels the server's task.
    func testCancellingFromTheViewCancelsTheServersTask() async throws {
        let client = try client()
        let task = try await observed(client, "slow_compute", ["seconds": 30])
        try task.cancel()
        _ = try await renders(task)
        XCTAssertEqual(task.outcome, .cancelled)
        XCTAssertEqual(task.status, .cancelled)
        let state = try await serverState(try fixtureURL(), taskId: task.taskId)
        XCTAssertEqual(state["status"], "cancelled", "\(state)")
    }

    /// After a relaunch (a new client on the same file), `resumeAll()` re-attaches a model to
    /// each task whose outcome no model was handed; a model dropped mid-task left it there.
    func testReattachedAfterARelaunch() async throws {
        let file = temporaryStore()
        var taskId = ""
        do {
            let before = try client(store: .file(file))
            let task = try await observed(before, "slow_compute", ["seconds": 0.8, "label": "again"])
            taskId = task.taskId
            await before.close()
        }
        let after = try client(store: .file(file))
        // docs:begin relaunch
        // At launch: a model for each task whose outcome no model (nor value(), nor result()) took yet.
        let tasks = try await after.resumeAll().map(ObservableTask.init)
        // docs:end relaunch
        XCTAssertEqual(tasks.map(\.id), [taskId])
        _ = try await renders(tasks[0])
        XCTAssertEqual(try firstText(tasks[0].result), "Computed again in 0.8s")
        // Handed out to that model: nothing left to resume.
        let none = try await client(store: .file(file)).resumeAll()
        XCTAssertTrue(none.isEmpty)
    }

    /// A model that is dropped stops following (its following task goes with it).
    func testADroppedModelGoesAway() async throws {
        let client = try client()
        weak var weakTask: ObservableTask?
        do {
            let task = try await observed(client, "slow_compute", ["seconds": 30])
            weakTask = task
        }
        for _ in 0..<100 where weakTask != nil { try await Task.sleep(nanoseconds: 10_000_000) }
        XCTAssertNil(weakTask, "nothing holds a dropped model")
    }
}
