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
