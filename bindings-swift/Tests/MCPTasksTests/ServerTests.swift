// Against the Rust fixture server (tests/fixtures, started by bindings-swift/swift-test) over
// loopback HTTP, and over stdio as the client's child: polling, notifications, cancel (explicit
// and by cancelling the Swift Task), input answered by the handler and later, MRTR then a task,
// failed vs a tool error, immediate results, error codes, resume after the client is recreated,
// and use from the main actor.
import Foundation
import MCPTasks
import XCTest

final class ServerTests: XCTestCase {
    private func client(
        store: TaskStore = .memory, notifications: Bool? = nil, minPollMs: UInt64? = nil,
        onInputRequest: InputHandler? = nil
    ) throws -> TasksClient {
        try TasksClient(
            options: ClientOptions(
                url: try fixtureURL().absoluteString, store: store, notifications: notifications, minPollMs: minPollMs),
            onInputRequest: onInputRequest)
    }

    func testPollsToCompletionAtThePollInterval() async throws {
        let client = try client(notifications: false)
        let started = Date()
        let execution = try await client.callTool("slow_compute", arguments: ["seconds": 0.5, "label": "swift"])
        XCTAssertEqual(execution.kind, .task)
        XCTAssertEqual(execution.created?.status, .working)
        XCTAssertEqual(execution.created?.pollIntervalMs, 200)
        var seen: [TaskStatus] = []
        for await state in execution.updates { seen.append(state.status) }
        XCTAssertEqual(seen.last, .completed)
        // Polled every 200 ms (the tool's pollIntervalMs) for 0.5 s: a handful of states, not a busy loop.
        XCTAssertLessThanOrEqual(seen.count, 6, "\(seen)")
        XCTAssertGreaterThanOrEqual(Date().timeIntervalSince(started), 0.5)
        try expectText(await execution.value(), "Computed swift in 0.5s")
    }

    func testNotificationsFinishATaskLongBeforeThePollingWould() async throws {
        // The shortest poll honoured is 30 s, so only notifications/tasks can end this in time.
        let client = try client(notifications: true, minPollMs: 30_000)
        let started = Date()
        let execution = try await client.callTool("slow_compute", arguments: ["seconds": 0.3, "label": "pushed"])
        let outcome = try await execution.result()
        XCTAssertEqual(try firstText(outcome.result), "Computed pushed in 0.3s")
        XCTAssertLessThan(Date().timeIntervalSince(started), 10)
    }

    func testAnExplicitCancelStaysCancelled() async throws {
        let client = try client()
        let execution = try await client.callTool("slow_compute", arguments: ["seconds": 1])
        try execution.cancel(mode: .stop)
        do {
            _ = try await execution.value()
            XCTFail("expected TaskCancelledError")
        } catch TasksError.TaskCancelledError(let detail) {
            XCTAssertEqual(detail.className, "TaskCancelledError")
            XCTAssertNil(detail.code)
        }
        // Past the time the work would have finished, the server still says cancelled.
        try await Task.sleep(nanoseconds: 1_300_000_000)
        let outcome = try await execution.result()
        XCTAssertEqual(outcome, .cancelled)
        let state = try await serverState(try fixtureURL(), taskId: try XCTUnwrap(execution.taskId))
        XCTAssertEqual(state["status"], "cancelled", "\(state)")
        XCTAssertNil(state["result"])
    }

    func testCancellingTheSwiftTaskCancelsTheServerTask() async throws {
        let file = temporaryStore()
        let client = try client(store: .file(file))
        let execution = try await client.callTool("slow_compute", arguments: ["seconds": 30])
        let waiting = Task { try await execution.value() }
        try await Task.sleep(nanoseconds: 200_000_000)
        waiting.cancel()
        do {
            _ = try await waiting.value
            XCTFail("expected TaskCancelledError")
        } catch TasksError.TaskCancelledError {}
        let state = try await serverState(try fixtureURL(), taskId: try XCTUnwrap(execution.taskId))
        XCTAssertEqual(state["status"], "cancelled", "\(state)")
        // The outcome was handed out: a new client on the same store finds nothing to resume.
        let again = try self.client(store: .file(file))
        let resumed = try await again.resumeAll()
        XCTAssertEqual(resumed.map(\.taskId), [])
    }

    func testADetachedWaitLeavesTheTaskForResumeAll() async throws {
        let file = temporaryStore()
        let client = try client(store: .file(file))
        let execution = try await client.callTool("slow_compute", arguments: ["seconds": 0.6, "label": "kept"])
        let taskId = try XCTUnwrap(execution.taskId)
        let waiting = Task { try await execution.value(whenCancelled: .detach) }
        try await Task.sleep(nanoseconds: 100_000_000)
        waiting.cancel()
        do {
            _ = try await waiting.value
            XCTFail("expected CancellationError")
        } catch is CancellationError {}
        let again = try self.client(store: .file(file))
        let resumed = try await again.resumeAll()
        XCTAssertEqual(resumed.map(\.taskId), [taskId])
        try expectText(await resumed[0].value(), "Computed kept in 0.6s")
    }

    func testInputIsAnsweredByTheHandler() async throws {
        let asked = Counter()
        let client = try client { request in
            asked.add(request.key)
            XCTAssertEqual(request.method, "elicitation/create")
            XCTAssertNotNil(request.taskId)
            return ["action": "accept", "content": ["confirm": true]]
        }
        let execution = try await client.callTool("confirm_delete", arguments: ["filename": "a.txt"])
        try expectText(await execution.value(), "Deleted a.txt")
        XCTAssertEqual(asked.keys, ["confirm_delete"])
    }

    func testInputLeftOpenIsAnsweredLater() async throws {
        let client = try client { _ in nil }
        let execution = try await client.callTool("multi_input")
        var open: [String: JSONValue] = [:]
        for await state in execution.updates where state.status == .inputRequired {
            open = state.inputRequests ?? [:]
            if open.count == 2 { break }
        }
        XCTAssertEqual(open.keys.sorted(), ["first", "second"])
        try await execution.answer("first", ["action": "accept", "content": ["name": "Ada"]])
        try await execution.answer("second", ["action": "accept", "content": ["name": "Grace"]])
        try expectText(await execution.value(), "Got Ada and Grace")
        do {
            try await execution.answer("third", ["action": "accept", "content": [:]])
            XCTFail("expected InvalidParamsError")
        } catch TasksError.InvalidParamsError(let detail) {
            XCTAssertEqual(detail.code, -32602)
        }
    }

    func testAnMRTRRoundThenATask() async throws {
        let client = try client { request in
            request.key == "user_name" ? ["action": "accept", "content": ["name": "Alice"]] : nil
        }
        let execution = try await client.callTool("test_tool_with_task")
        XCTAssertEqual(execution.kind, .task)
        try expectText(await execution.value(), "Hello, Alice! Your task is done.")
    }

    func testFailedIsNotAToolError() async throws {
        let client = try client()
        let failed = try await client.callTool("protocol_error_job")
        guard case .failed(let error) = try await failed.result() else { return XCTFail("expected failed") }
        XCTAssertEqual(error.code, -32603)
        do {
            _ = try await failed.value()
            XCTFail("expected InternalError")
        } catch let error as TasksError {
            XCTAssertEqual(error.className, "InternalError")
            XCTAssertEqual(error.code, -32603)
        }
        let toolError = try await client.callTool("failing_job")
        let result = try await toolError.value()
        XCTAssertEqual(result["isError"], true)
        XCTAssertEqual(try firstText(result), "failing_job always fails (a tool-level error)")
    }

    func testAnImmediateResultHasTheSameFace() async throws {
        let client = try client()
        let execution = try await client.callTool("greet", arguments: ["name": "Swift"])
        XCTAssertEqual(execution.kind, .immediate)
        XCTAssertNil(execution.taskId)
        XCTAssertNil(execution.created)
        var states = 0
        for await _ in execution.updates { states += 1 }
        XCTAssertEqual(states, 0)
        try execution.cancel()
        try expectText(await execution.value(), "Hello, Swift!")
        guard case .completed(let result) = try await execution.result() else { return XCTFail("expected completed") }
        XCTAssertEqual(try firstText(result), "Hello, Swift!")
        do {
            try await execution.answer("k", [:])
            XCTFail("expected InvalidParamsError")
        } catch TasksError.InvalidParamsError {}
    }

    func testErrorsCarryTheirClassCodeAndCauses() async throws {
        let client = try client()
        do {
            _ = try await client.callTool("no_such_tool")
            XCTFail("expected InvalidParamsError")
        } catch TasksError.InvalidParamsError(let detail) {
            XCTAssertEqual(detail.code, -32602)
            XCTAssertFalse(detail.message.isEmpty)
        }
        // Nothing listens on port 9 here: the OS error is kept in the causes.
        let unreachable = try TasksClient(url: URL(string: "http://127.0.0.1:9/mcp")!, store: .memory)
        do {
            _ = try await unreachable.callTool("greet")
            XCTFail("expected TransportError")
        } catch let error as TasksError {
            XCTAssertEqual(error.className, "TransportError")
            XCTAssertEqual(error.code, -32603)
            XCTAssertTrue(error.isKind(of: "InternalError"))
            XCTAssertFalse(error.detail.causes.isEmpty, "\(error)")
        }
        // Options core refuses: both a URL and a command.
        XCTAssertThrowsError(try TasksClient(options: ClientOptions(url: "http://127.0.0.1:1/mcp", command: "x"))) {
            XCTAssertEqual(($0 as? TasksError)?.className, "InvalidParamsError")
        }
    }

    func testResumeAfterTheClientIsDroppedAndRecreated() async throws {
        let file = temporaryStore()
        var taskId = ""
        do {
            // The first client goes away mid-task, as a suspended or killed app would.
            let first = try client(store: .file(file))
            let execution = try await first.callTool("slow_compute", arguments: ["seconds": 0.8, "label": "resumed"])
            taskId = try XCTUnwrap(execution.taskId)
        }
        let again = try client(store: .file(file))
        let resumed = try await again.resumeAll()
        XCTAssertEqual(resumed.map(\.taskId), [taskId])
        try expectText(await resumed[0].result().result, "Computed resumed in 0.8s")
        // Handed out once: neither this client nor a third one gets it again.
        let none = try await again.resumeAll()
        XCTAssertTrue(none.isEmpty)
        let third = try await client(store: .file(file)).resumeAll()
        XCTAssertTrue(third.isEmpty)
    }

    func testEncodableArgumentsAndDecodableResults() async throws {
        struct Arguments: Encodable {
            let seconds: Double
            let label: String
        }
        struct Result: Decodable {
            struct Content: Decodable { let type: String; let text: String }
            let content: [Content]
        }
        let client = try client()
        let execution = try await client.callTool("slow_compute", arguments: Arguments(seconds: 0.1, label: "typed"))
        let result = try await execution.value(as: Result.self)
        XCTAssertEqual(result.content.first?.text, "Computed typed in 0.1s")
    }

    func testTheStdioTransport() async throws {
        let binary = try fixtureBinary()
        let client = try TasksClient(command: binary, arguments: ["--stdio"], stderr: .discard, store: .memory) { _ in
            ["action": "accept", "content": ["confirm": false]]
        }
        let greeting = try await client.callTool("greet", arguments: ["name": "stdio"])
        try expectText(await greeting.value(), "Hello, stdio!")
        let task = try await client.callTool("confirm_delete", arguments: ["filename": "b.txt"])
        XCTAssertEqual(task.kind, .task)
        try expectText(await task.value(), "Kept b.txt")
        await client.close()
        do {
            _ = try await client.callTool("greet")
            XCTFail("expected TransportError after close")
        } catch let error as TasksError {
            XCTAssertEqual(error.className, "TransportError")
        }
    }

    @MainActor
    func testUsableFromTheMainActor() async throws {
        let client = try client()
        let execution = try await client.callTool("slow_compute", arguments: ["seconds": 0.2, "label": "main"])
        var statuses: [TaskStatus] = []
        for await state in execution.updates {
            MainActor.assertIsolated()
            statuses.append(state.status)
        }
        let result: JSONValue = try await execution.value()
        MainActor.assertIsolated()
        XCTAssertEqual(try firstText(result), "Computed main in 0.2s")
        XCTAssertEqual(statuses.last, .completed)
    }

    func testCancellingTheConsumerEndsUpdatesButNotTheTask() async throws {
        let client = try client()
        let execution = try await client.callTool("slow_compute", arguments: ["seconds": 0.8, "label": "on"])
        let consumer = Task {
            var count = 0
            for await _ in execution.updates { count += 1 }
            return count
        }
        try await Task.sleep(nanoseconds: 100_000_000)
        consumer.cancel()
        let count = await consumer.value
        XCTAssertGreaterThanOrEqual(count, 1)
        try expectText(await execution.value(), "Computed on in 0.8s")
    }
}

/// Keys an input handler saw (handlers run concurrently with the test).
final class Counter: @unchecked Sendable {
    private let lock = NSLock()
    private var seen: [String] = []

    func add(_ key: String) { lock.withLock { seen.append(key) } }
    var keys: [String] { lock.withLock { seen } }
}
