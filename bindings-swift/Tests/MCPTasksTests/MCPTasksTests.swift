// XCTest against a running tasks server with the fixture tools (tests/fixtures `fixture-server`):
//   cargo run -p mcp-tasks-fixtures --bin fixture-server -- 8080 &
//   MCP_TASKS_TEST_URL=http://127.0.0.1:8080/mcp swift test
// Not compiled on this project's CI machines (no Swift compiler there); the same FFI surface is
// exercised by bindings-swift/smoke through uniffi's Python bindings.
import Foundation
import XCTest

@testable import MCPTasks

final class MCPTasksTests: XCTestCase {
    private var url: URL {
        URL(string: ProcessInfo.processInfo.environment["MCP_TASKS_TEST_URL"] ?? "http://127.0.0.1:8080/mcp")!
    }

    private func text(_ outcome: Outcome) throws -> String {
        let content = try XCTUnwrap(outcome.result?["content"] as? [[String: Any]])
        return try XCTUnwrap(content.first?["text"] as? String)
    }

    func testPollsATaskToItsResult() async throws {
        let client = try TasksClient(url: url, store: .memory, notifications: false)
        let execution = try await client.callTool("slow_compute", arguments: ["seconds": 0.3, "label": "swift"])
        XCTAssertEqual(execution.kind(), .task)
        XCTAssertEqual(execution.created()?.status, .working)
        var last: TaskStatus?
        for await state in execution.updates { last = state.status }
        XCTAssertEqual(last, .completed)
        let outcome = try await execution.result()
        XCTAssertTrue(try text(outcome).hasPrefix("Computed swift"))
    }

    func testCancel() async throws {
        let client = try TasksClient(url: url, store: .memory)
        let execution = try await client.callTool("slow_compute", arguments: ["seconds": 30])
        try execution.cancel(mode: .stop)
        do {
            _ = try await execution.value()
            XCTFail("expected TaskCancelledError")
        } catch TasksError.TaskCancelledError(let detail) {
            XCTAssertEqual(detail.className, "TaskCancelledError")
        }
    }

    func testInputRequestsGoToTheHandler() async throws {
        let client = try TasksClient(url: url, store: .memory) { request in
            ["action": "accept", "content": request.key == "user_name" ? ["name": "Alice"] : ["confirm": true]]
        }
        let execution = try await client.callTool("confirm_delete", arguments: ["filename": "a.txt"])
        let outcome = try await execution.result()
        XCTAssertEqual(try text(outcome), "Deleted a.txt")
    }

    func testResumesAfterARestart() async throws {
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("mcp-tasks-\(UUID()).db")
        var taskId = ""
        do {
            // The first client goes away mid-task, as a suspended or killed app would.
            let first = try TasksClient(url: url, store: .file(file))
            let execution = try await first.callTool("slow_compute", arguments: ["seconds": 1, "label": "resumed"])
            taskId = try XCTUnwrap(execution.taskId())
        }
        let again = try TasksClient(url: url, store: .file(file))
        let resumed = try await again.resumeAll()
        XCTAssertEqual(resumed.map { $0.taskId() }, [taskId])
        let outcome = try await resumed[0].result()
        XCTAssertEqual(try text(outcome), "Computed resumed in 1s")
        let none = try await again.resumeAll()
        XCTAssertTrue(none.isEmpty)
    }

    func testErrorsCarryTheirCode() async throws {
        let client = try TasksClient(url: url, store: .memory)
        do {
            _ = try await client.callTool("no_such_tool")
            XCTFail("expected an error")
        } catch TasksError.InvalidParamsError(let detail) {
            XCTAssertEqual(detail.code, -32602)
        }
    }
}
