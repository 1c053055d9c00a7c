// What the tests share: the repository's files (vectors, the API manifest) and the fixture
// server bindings-swift/swift-test starts (MCP_TASKS_TEST_URL, MCP_TASKS_FIXTURE_SERVER).
import Foundation
import MCPTasks
import XCTest

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The repository's root, from this file's place in it.
let repositoryRoot = URL(fileURLWithPath: #filePath)
    .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

/// A file of the repository, parsed as JSON.
func repositoryJSON(_ path: String) throws -> JSONValue {
    try JSONValue(parsing: Data(contentsOf: repositoryRoot.appendingPathComponent(path)))
}

/// The fixture server's endpoint, or a skip when the test script did not start one.
func fixtureURL() throws -> URL {
    guard let text = ProcessInfo.processInfo.environment["MCP_TASKS_TEST_URL"], let url = URL(string: text) else {
        throw XCTSkip("MCP_TASKS_TEST_URL is not set: run bindings-swift/swift-test, which starts the fixture server")
    }
    return url
}

/// The fixture server's binary (for the stdio transport), or a skip.
func fixtureBinary() throws -> String {
    guard let path = ProcessInfo.processInfo.environment["MCP_TASKS_FIXTURE_SERVER"] else {
        throw XCTSkip("MCP_TASKS_FIXTURE_SERVER is not set: run bindings-swift/swift-test")
    }
    return path
}

/// The text of a CallToolResult's first content item.
func firstText(_ result: JSONValue?) throws -> String {
    try XCTUnwrap(result?["content"]?[0]?["text"]?.stringValue, "no text content in \(String(describing: result))")
}

/// Asserts a CallToolResult's first text content.
func expectText(_ result: JSONValue?, _ expected: String, file: StaticString = #filePath, line: UInt = #line) throws {
    XCTAssertEqual(try firstText(result), expected, file: file, line: line)
}

/// A fresh SQLite file for a client's task references.
func temporaryStore() -> URL {
    FileManager.default.temporaryDirectory.appendingPathComponent("mcp-tasks-swift-\(UUID().uuidString).db")
}

/// Unix milliseconds now.
func nowMs() -> UInt64 { UInt64(Date().timeIntervalSince1970 * 1000) }

/// The server's own view of a task: a `tasks/get` sent by hand on the 2026-07-28 wire (the
/// `_meta` envelope declaring the extension, and the Mcp-* headers), as a host that keeps its own
/// transport would send what TaskDriver.pollOutgoing() returns.
func serverState(_ url: URL, taskId: String) async throws -> JSONValue {
    let body: JSONValue = [
        "jsonrpc": "2.0", "id": 1, "method": "tasks/get",
        "params": [
            "taskId": .string(taskId),
            "_meta": [
                "io.modelcontextprotocol/protocolVersion": .string(protocolVersion),
                "io.modelcontextprotocol/clientCapabilities": .object(["extensions": .object([extensionID: [:]])]),
                "io.modelcontextprotocol/clientInfo": ["name": "swift-tests", "version": "0"],
            ],
        ],
    ]
    var request = URLRequest(url: url)
    request.httpMethod = "POST"
    request.httpBody = Data(body.jsonText.utf8)
    for (name, value) in [
        ("content-type", "application/json"), ("accept", "application/json, text/event-stream"),
        ("mcp-protocol-version", protocolVersion), ("mcp-method", "tasks/get"), ("mcp-name", taskId),
    ] {
        request.setValue(value, forHTTPHeaderField: name)
    }
    let (data, _) = try await URLSession.shared.data(for: request)
    let answer = try JSONValue(parsing: data)
    return try XCTUnwrap(answer["result"], "tasks/get answered \(answer)")
}

/// Runs a Python snippet (python3 is on every machine the suite runs on) with `arguments`, and
/// returns what it printed.
func python(_ script: String, _ arguments: [String]) throws -> String {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
    process.arguments = ["python3", "-c", script] + arguments
    let out = Pipe()
    process.standardOutput = out
    try process.run()
    let data = out.fileHandleForReading.readDataToEndOfFile()
    // Not waitUntilExit(): off the main thread under XCTest on Linux it can wait for good.
    for _ in 0..<500 where process.isRunning { usleep(10_000) }
    // terminationStatus of a running process traps: say so instead.
    guard !process.isRunning else {
        XCTFail("python3 -c \(script) \(arguments) did not exit")
        return ""
    }
    XCTAssertEqual(process.terminationStatus, 0, "python3 -c \(script) \(arguments)")
    return String(decoding: data, as: UTF8.self)
}

/// The fixture server's SQLite file (swift-test starts it on one), or a skip.
func fixtureStore() throws -> String {
    guard let path = ProcessInfo.processInfo.environment["MCP_TASKS_TEST_STORE"] else {
        throw XCTSkip("MCP_TASKS_TEST_STORE is not set: run bindings-swift/swift-test")
    }
    return path
}

/// The record the fixture server keeps for `taskId` (its `tasks.body`, the store's JSON), read
/// from its SQLite file by another connection, as an operator's tool would.
func fixtureRecord(_ taskId: String) throws -> JSONValue {
    let script = """
        import sqlite3, sys
        row = sqlite3.connect(sys.argv[1]).execute("SELECT body FROM tasks WHERE id = ?", (sys.argv[2],)).fetchone()
        body = row[0] if row else b"null"
        sys.stdout.write(body.decode() if isinstance(body, bytes) else body)
        """
    return try JSONValue(parsing: python(script, [try fixtureStore(), taskId]))
}

/// How many task references a client's SQLite file holds.
func clientReferences(_ file: URL) throws -> Int {
    let script = """
        import sqlite3, sys
        print(sqlite3.connect(sys.argv[1]).execute("SELECT count(*) FROM task_refs").fetchone()[0])
        """
    return Int(try python(script, [file.path]).trimmingCharacters(in: .whitespacesAndNewlines)) ?? -1
}

/// A gauge or counter of the fixture server's `/metrics` (summed over its labels).
func fixtureMetric(_ name: String) async throws -> Double {
    let metrics = URL(string: try fixtureURL().absoluteString.replacingOccurrences(of: "/mcp", with: "/metrics"))!
    let (data, _) = try await URLSession.shared.data(from: metrics)
    return String(decoding: data, as: UTF8.self).split(separator: "\n")
        .filter { $0.hasPrefix(name + " ") || $0.hasPrefix(name + "{") }
        .compactMap { $0.split(separator: " ").last.flatMap { Double($0) } }
        .reduce(0, +)
}
