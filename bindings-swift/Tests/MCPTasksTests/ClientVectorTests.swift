// The client vectors (tests/vectors/client/*.json) through the public Swift layer, each against
// its own scripted server (tests/fixtures' scripted-server, which answers what the vector
// scripts, floats as floats), polling and listening: what any conforming server may write, and
// answers no server should give, must end as the vector's `expect` says, with a clear
// `TasksError` and a `tasks/cancel` where the task cannot be followed. The Rust, Python and Node
// clients replay the same files; the FFI smoke test replays them one layer down.
import Foundation
import MCPTasks
import XCTest

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// A scripted server for one vector, stopped by `stop()` (or when the test ends).
final class ScriptedServer: @unchecked Sendable {
    let url: URL
    private let process: Process

    init(vector: URL) throws {
        guard let binary = ProcessInfo.processInfo.environment["MCP_TASKS_SCRIPTED_SERVER"] else {
            throw XCTSkip("MCP_TASKS_SCRIPTED_SERVER is not set: run bindings-swift/swift-test")
        }
        process = Process()
        process.executableURL = URL(fileURLWithPath: binary)
        process.arguments = [vector.path]
        let out = Pipe()
        process.standardOutput = out
        try process.run()
        // Its first line names its address; the bound is the pipe's end if it dies first.
        var line = Data()
        while let byte = try out.fileHandleForReading.read(upToCount: 1), !byte.isEmpty, byte != Data("\n".utf8) {
            line.append(byte)
        }
        let text = String(decoding: line, as: UTF8.self)
        guard text.hasPrefix("listening on "), let url = URL(string: String(text.dropFirst("listening on ".count)))
        else {
            kill(process.processIdentifier, SIGKILL)
            throw TasksError.TransportError(ErrorDetail(className: "TransportError", code: nil, message: text))
        }
        self.url = url
    }

    /// The methods the server received, in order.
    func sent() async throws -> [String] {
        try await requests().compactMap { $0["method"]?.stringValue }
    }

    /// The requests the server received, each `{"method", "params"}` (its `GET /log`).
    func requests() async throws -> [JSONValue] {
        let log = URL(string: url.absoluteString.replacingOccurrences(of: "/mcp", with: "/log"))!
        let (data, _) = try await URLSession.shared.data(from: log)
        return try JSONValue(parsing: data).arrayValue ?? []
    }

    /// Ends the server with SIGKILL: a child started from a Swift concurrency thread inherits
    /// its blocked SIGTERM, so `terminate()` is never heard. Not `waitUntilExit()` either: off
    /// the main thread under XCTest on Linux it waits on a run loop that never hears of the exit.
    func stop() {
        guard process.isRunning else { return }
        kill(process.processIdentifier, SIGKILL)
        for _ in 0..<200 where process.isRunning { usleep(10_000) }
    }

    deinit { stop() }
}

/// The vector files, sorted.
func clientVectors() throws -> [URL] {
    let directory = repositoryRoot.appendingPathComponent("tests/vectors/client")
    return try FileManager.default.contentsOfDirectory(atPath: directory.path)
        .filter { $0.hasSuffix(".json") }.sorted().map { directory.appendingPathComponent($0) }
}

/// `body`'s value, or a failure once `seconds` have passed: a client that hangs fails the run
/// (nothing here asserts timing).
func bounded<T: Sendable>(
    _ what: String, seconds: Double = 20, _ body: @escaping @Sendable () async throws -> T
) async throws -> T {
    try await withThrowingTaskGroup(of: T?.self) { group in
        group.addTask { try await body() }
        group.addTask {
            try await Task.sleep(nanoseconds: UInt64(seconds * 1e9))
            return nil
        }
        defer { group.cancelAll() }
        guard let first = try await group.next(), let value = first else {
            throw TasksError.TransportError(
                ErrorDetail(className: "TransportError", code: nil, message: "\(what): no answer within \(seconds) s"))
        }
        return value
    }
}

final class ClientVectorTests: XCTestCase {
    func testEveryClientVectorPollingAndListening() async throws {
        let files = try clientVectors()
        XCTAssertGreaterThanOrEqual(files.count, 6)
        var replayed = 0
        for file in files {
            for notifications in [false, true] {
                try await replay(file, notifications: notifications)
                replayed += 1
            }
        }
        XCTAssertEqual(replayed, files.count * 2)
    }

    /// The 2026-12-02 regressions by name, so a failure says which: a `pollIntervalMs` written
    /// `500.0`-style (float-numbers), and a malformed `tasks/get` answer that left the call
    /// hanging (unreadable-status: now a clear `InternalError` and a `tasks/cancel`).
    func testFloatNumbersAndAMalformedAnswer() async throws {
        let directory = repositoryRoot.appendingPathComponent("tests/vectors/client")
        let server = try ScriptedServer(vector: directory.appendingPathComponent("unreadable-status.json"))
        defer { server.stop() }
        let client = try TasksClient(options: ClientOptions(url: server.url.absoluteString, store: .memory))
        let execution = try await client.callTool("numbers")
        do {
            _ = try await bounded("unreadable-status") { try await execution.value() }
            XCTFail("expected InternalError")
        } catch TasksError.InternalError(let detail) {
            XCTAssertEqual(detail.data?["reason"], "unreadable_answer")
            XCTAssertTrue(detail.message.contains("status is \"frobbed\""), detail.message)
        }
        let sent = try await server.sent()
        XCTAssertTrue(sent.contains("tasks/cancel"), "\(sent)")
        XCTAssertLessThanOrEqual(sent.filter { $0 == "tasks/get" }.count, 1, "\(sent)")
    }

    /// A server that acknowledges the subscription and pushes nothing: the outcome still comes
    /// at the server's poll interval (200 ms), not at the 30 s listening check.
    func testASilentListenStreamStillReachesTheOutcome() async throws {
        let directory = repositoryRoot.appendingPathComponent("tests/vectors/client")
        let server = try ScriptedServer(vector: directory.appendingPathComponent("silent-listen.json"))
        defer { server.stop() }
        let client = try TasksClient(
            options: ClientOptions(url: server.url.absoluteString, store: .memory, notifications: true)
        ) { _ in ["action": "accept", "content": ["ok": true]] }
        let started = Date()
        let execution = try await client.callTool("quick")
        let result = try await bounded("silent-listen") { try await execution.value() }
        XCTAssertEqual(result["structuredContent"], ["done": true])
        // Bounded generously (noisy machines): what it guards against is the 30 s wait.
        XCTAssertLessThan(Date().timeIntervalSince(started), 10)
        let sent = try await server.sent()
        XCTAssertTrue(sent.contains("subscriptions/listen"), "it listened: \(sent)")
        XCTAssertTrue(sent.contains("tasks/get"), "and polled while the stream said nothing: \(sent)")
    }

    private func replay(_ file: URL, notifications: Bool) async throws {
        let vector = try JSONValue(parsing: Data(contentsOf: file))
        let expect = try XCTUnwrap(vector["expect"])
        let name = "\(vector["name"]?.stringValue ?? file.lastPathComponent) (\(notifications ? "listen" : "poll"))"
        let server = try ScriptedServer(vector: file)
        defer { server.stop() }
        let input = vector["input"] ?? [:]
        // A Swift handler cannot throw: a failing one answers what is no result object.
        let failing: JSONValue = notifications ? "not a result" : 5
        let client = try TasksClient(
            options: ClientOptions(url: server.url.absoluteString, store: .memory, notifications: notifications)
        ) { request in
            input == "@fail" ? failing : input[request.key]
        }
        let tool = try XCTUnwrap(vector["tool"]?.stringValue)
        let arguments = vector["arguments"]?.objectValue ?? [:]
        if let want = expect["call_error"] {
            do {
                _ = try await bounded(name) { try await client.callTool(tool, arguments: arguments) }
                XCTFail("\(name): the call succeeded")
            } catch let error as TasksError {
                check(error, want, name)
            }
        } else {
            let execution = try await bounded(name) { try await client.callTool(tool, arguments: arguments) }
            XCTAssertEqual(execution.kind, .task, name)
            let outcome = try await bounded(name) { try await execution.result() }
            if let want = expect["outcome"] {
                switch (want["kind"]?.stringValue, outcome) {
                case ("completed", .completed(let result)):
                    // Kinds kept: 1, 1.0, true, 2^53+1 and -0.0 are what the server wrote.
                    XCTAssertEqual(result, want["result"], name)
                case ("failed", .failed(let error)):
                    XCTAssertEqual(JSONValue.integer(Int64(error.code)), want["error"]?["code"], name)
                    XCTAssertEqual(error.data, want["error"]?["data"], name)
                default:
                    XCTFail("\(name): \(outcome) is not \(want)")
                }
            }
            if let want = expect["error"] {
                do {
                    _ = try await bounded(name) { try await execution.value() }
                    XCTFail("\(name): value() returned")
                } catch let error as TasksError {
                    check(error, want, name)
                }
            }
        }
        var sent = try await server.sent()
        // The best-effort cancel may land just after the call ended.
        for _ in 0..<100 where !(expect["sent"]?.arrayValue ?? []).allSatisfy({ sent.contains($0.stringValue ?? "") }) {
            try await Task.sleep(nanoseconds: 20_000_000)
            sent = try await server.sent()
        }
        for method in expect["sent"]?.arrayValue?.compactMap(\.stringValue) ?? [] {
            XCTAssertTrue(sent.contains(method), "\(name): \(method) was not sent: \(sent)")
        }
        for method in expect["not_sent"]?.arrayValue?.compactMap(\.stringValue) ?? [] {
            XCTAssertFalse(sent.contains(method), "\(name): \(method) was sent: \(sent)")
        }
        for (method, most) in expect["most"]?.objectValue ?? [:] {
            XCTAssertLessThanOrEqual(Int64(sent.filter { $0 == method }.count), most.integerValue ?? 0, "\(name): \(sent)")
        }
        await client.close()
    }

    private func check(_ error: TasksError, _ want: JSONValue, _ name: String) {
        XCTAssertEqual(error.className, want["class"]?.stringValue, "\(name): \(error)")
        if let code = want["code"]?.integerValue {
            XCTAssertEqual(error.code.map(Int64.init), code, "\(name): \(error)")
        }
        if let reason = want["reason"] {
            XCTAssertEqual(error.detail.data?["reason"], reason, "\(name): \(error)")
        }
        for part in want["contains"]?.arrayValue?.compactMap(\.stringValue) ?? [] {
            XCTAssertTrue(error.message.contains(part), "\(name): \(error.message) does not say \(part)")
        }
    }
}
