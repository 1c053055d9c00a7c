// What core's client gained since the Swift package was last compiled (2026-12-02), seen from
// the public Swift layer: trace context on every request about a task (SEP-414), the capability
// rule, references forgotten once delivered, listen streams shared between tasks.
import Foundation
import MCPTasks
import XCTest

final class CoreCatchUpTests: XCTestCase {
    private let parent = TraceContext(
        traceparent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", tracestate: "vendor=swift",
        baggage: "app=tests")

    private func vector(_ name: String) -> URL {
        repositoryRoot.appendingPathComponent("tests/vectors/client/\(name).json")
    }

    // MARK: trace context

    /// The fixture server keeps the caller's context with the task (it exports no spans of its
    /// own here, so the context it keeps is the one the Swift call sent).
    func testTheServerKeepsTheCallsTraceContext() async throws {
        let client = try TasksClient(options: ClientOptions(url: try fixtureURL().absoluteString, store: .memory))
        let execution = try await client.callTool(
            "slow_compute", arguments: ["seconds": 0.1, "label": "traced"], trace: parent)
        let taskId = try XCTUnwrap(execution.taskId)
        try expectText(await execution.value(), "Computed traced in 0.1s")
        let trace = try fixtureRecord(taskId)["trace"]
        XCTAssertEqual(trace?["traceparent"], .string(parent.traceparent), "\(String(describing: trace))")
        XCTAssertEqual(trace?["tracestate"], "vendor=swift")
        // Without a context, the task keeps none.
        let plain = try await client.callTool("slow_compute", arguments: ["seconds": 0])
        _ = try await plain.result()
        XCTAssertNil(try fixtureRecord(try XCTUnwrap(plain.taskId))["trace"])
    }

    /// Set once as a task-local (as an app's tracing library would), the context rides on the
    /// create, every poll, the answer's `tasks/update`, and, after the client is gone and the
    /// task is resumed from the store, on the resumed task's requests too.
    func testATaskLocalContextRidesOnEveryRequestAndSurvivesResume() async throws {
        let server = try ScriptedServer(vector: vector("float-numbers"))
        defer { server.stop() }
        let file = temporaryStore()
        var taskId = ""
        try await TraceContext.$current.withValue(parent) {
            // No input handler: the request stays open for whoever resumes the task.
            let first = try TasksClient(
                options: ClientOptions(url: server.url.absoluteString, store: .file(file), notifications: false))
            let execution = try await first.callTool("numbers")
            taskId = try XCTUnwrap(execution.taskId)
            for await state in execution.updates where state.status == .inputRequired { break }
            await first.close()
        }
        // Outside the task-local: the resumed task carries the context its reference kept.
        XCTAssertNil(TraceContext.current)
        let again = try TasksClient(
            options: ClientOptions(url: server.url.absoluteString, store: .file(file), notifications: false))
        let resumed = try await again.resumeAll()
        XCTAssertEqual(resumed.map(\.taskId), [taskId])
        try await resumed[0].answer("confirm", ["action": "accept", "content": ["ok": true]])
        let result = try await bounded("resumed") { try await resumed[0].value() }
        XCTAssertEqual(result["structuredContent"]?["negativeZero"], .double(-0.0))
        let requests = try await server.requests()
        let methods = requests.compactMap { $0["method"]?.stringValue }
        for method in ["tools/call", "tasks/get", "tasks/update"] {
            XCTAssertTrue(methods.contains(method), "\(method) not sent: \(methods)")
        }
        for request in requests where request["method"] != "server/discover" {
            let meta = request["params"]?["_meta"]
            XCTAssertEqual(meta?["traceparent"], .string(parent.traceparent), "\(request)")
            XCTAssertEqual(meta?["baggage"], "app=tests", "\(request)")
        }
    }

    /// The option on the call wins over the task-local, and reaches the task's `tasks/cancel`.
    func testTheCallsOptionWinsAndReachesTheCancel() async throws {
        let server = try ScriptedServer(vector: vector("unreadable-status"))
        defer { server.stop() }
        let own = TraceContext(traceparent: "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01")
        let client = try TasksClient(options: ClientOptions(url: server.url.absoluteString, store: .memory))
        let execution = try await TraceContext.$current.withValue(parent) {
            try await client.callTool("numbers", trace: own)
        }
        _ = try? await bounded("cancel") { try await execution.result() }
        var requests: [JSONValue] = []
        for _ in 0..<100 {
            requests = try await server.requests()
            if requests.contains(where: { $0["method"] == "tasks/cancel" }) { break }
            try await Task.sleep(nanoseconds: 20_000_000)
        }
        let cancel = try XCTUnwrap(requests.first { $0["method"] == "tasks/cancel" }, "\(requests)")
        XCTAssertEqual(cancel["params"]?["_meta"]?["traceparent"], .string(own.traceparent))
        for request in requests where request["method"] != "server/discover" {
            XCTAssertEqual(request["params"]?["_meta"]?["traceparent"], .string(own.traceparent), "\(request)")
        }
    }

    /// The guide's example (docs/swift.md, "Traces"), as it is quoted.
    func testTracingAsTheGuideShowsIt() async throws {
        let client = try TasksClient(options: ClientOptions(url: try fixtureURL().absoluteString, store: .memory))
        // docs:begin trace
        // Where the app's tracing library starts an operation: every call inside it (and in the Swift
        // tasks it starts) carries this context, on the create and on each poll, answer and cancel.
        let context = TraceContext(traceparent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
        let report = try await TraceContext.$current.withValue(context) {
            try await client.callTool("slow_compute", arguments: ["seconds": 0.1, "label": "Q3"])
        }
        // Or for one call: try await client.callTool("slow_compute", arguments: ..., trace: context)
        // docs:end trace
        try expectText(await report.value(), "Computed Q3 in 0.1s")
        let kept = try fixtureRecord(try XCTUnwrap(report.taskId))["trace"]
        XCTAssertEqual(kept?["traceparent"], .string(context.traceparent))
    }

    /// The sans-IO driver sends the context it was given with each request it makes.
    func testTheDriverSendsItsTrace() throws {
        let created: JSONValue = [
            "resultType": "task", "taskId": "t9", "status": "working", "createdAt": "2026-09-01T12:00:00.000Z",
            "lastUpdatedAt": "2026-09-01T12:00:00.000Z", "ttlMs": 60000, "pollIntervalMs": 100,
        ]
        let driver = try TaskDriver(created: created, nowMs: 1_788_264_000_000)
        driver.setTrace(parent)
        driver.handleTimeout(nowMs: 1_788_264_000_100)
        let poll = try XCTUnwrap(driver.pollOutgoing())
        XCTAssertEqual(poll["params"]?["_meta"]?["traceparent"], .string(parent.traceparent), "\(poll)")
        XCTAssertEqual(TraceContext(carrier: ["TraceParent": parent.traceparent])?.traceparent, parent.traceparent)
        XCTAssertNil(TraceContext(carrier: ["tracestate": "x"]))
    }

    // MARK: capabilities

    /// A client that declares no elicitation is asked none: the MRTR round refuses with the
    /// missing-capability error, and so does a task that asks.
    func testCapabilitiesSayWhatTheHandlerAnswers() async throws {
        let url = try fixtureURL().absoluteString
        let answers: InputHandler = { _ in ["action": "accept", "content": ["name": "Ada", "confirm": true]] }
        let none = try TasksClient(options: ClientOptions(url: url, store: .memory, capabilities: [:]), onInputRequest: answers)
        do {
            _ = try await none.callTool("test_tool_with_task")
            XCTFail("expected MissingCapabilityError")
        } catch TasksError.MissingCapabilityError(let detail) {
            XCTAssertEqual(detail.code, -32021)
            XCTAssertEqual(detail.data?["requiredCapabilities"]?["elicitation"]?.objectValue != nil, true, "\(detail)")
        }
        let roots = try TasksClient(
            options: ClientOptions(url: url, store: .memory, capabilities: ["roots": [:]]), onInputRequest: answers)
        let task = try await roots.callTool("confirm_delete", arguments: ["filename": "z"])
        guard case .failed(let error) = try await task.result() else { return XCTFail("expected failed") }
        XCTAssertEqual(error.code, -32021)
        do {
            _ = try await task.value()
            XCTFail("expected MissingCapabilityError")
        } catch let error as TasksError {
            XCTAssertTrue(error.isKind(of: "MissingCapabilityError"), "\(error)")
        }
        // A capabilities value that is no object is refused where the client is built.
        XCTAssertThrowsError(try TasksClient(options: ClientOptions(url: url, capabilities: ["roots"]))) {
            XCTAssertEqual(($0 as? TasksError)?.className, "InvalidParamsError")
        }
    }

    // MARK: the client's store and streams

    /// A delivered outcome's reference is deleted from the client's file: following many tasks
    /// leaves nothing behind (what keeps a long-running app's memory and file flat).
    func testDeliveredReferencesAreForgotten() async throws {
        let file = temporaryStore()
        let client = try TasksClient(options: ClientOptions(url: try fixtureURL().absoluteString, store: .file(file)))
        let pending = try await client.callTool("slow_compute", arguments: ["seconds": 30])
        try await withThrowingTaskGroup(of: Void.self) { group in
            for _ in 0..<8 {
                group.addTask {
                    for _ in 0..<25 {
                        let execution = try await client.callTool("slow_compute", arguments: ["seconds": 0])
                        _ = try await execution.result()
                    }
                }
            }
            try await group.waitForAll()
        }
        // 200 delivered, one still running: one reference.
        XCTAssertEqual(try clientReferences(file), 1)
        try pending.cancel()
        _ = try await pending.result()
        XCTAssertEqual(try clientReferences(file), 0)
    }

    /// Tasks followed at once share the client's listen streams (at most 16), rather than one
    /// stream each, and every one still gets its outcome by notification.
    func testConcurrentTasksShareListenStreams() async throws {
        let client = try TasksClient(
            options: ClientOptions(url: try fixtureURL().absoluteString, store: .memory, notifications: true))
        var executions: [Execution] = []
        for i in 0..<40 {
            executions.append(try await client.callTool("slow_compute", arguments: ["seconds": 1.5, "label": "s\(i)"]))
        }
        var most = 0.0
        for _ in 0..<20 {
            most = max(most, try await fixtureMetric("mcp_tasks_listen_streams"))
            try await Task.sleep(nanoseconds: 25_000_000)
        }
        XCTAssertGreaterThan(most, 0, "the tasks are followed by notification")
        XCTAssertLessThanOrEqual(most, 16, "40 tasks share the client's streams")
        for (i, execution) in executions.enumerated() {
            try expectText(await execution.value(), "Computed s\(i) in 1.5s")
        }
    }
}
