// Without a server: the shared vectors replayed from the client side through TaskDriver (as
// core/tests/vectors.rs, the Node tests and the Python smoke test do), the driver's
// acknowledgements and resume, the error classes against core's table, and the public surface
// against tests/api/manifest.json.
import Foundation
import MCPTasks
import XCTest

final class OfflineTests: XCTestCase {
    // MARK: shared vectors

    /// Every server answer a vector records goes to classifyToolsCall and to one TaskDriver per
    /// task, which must accept it and end with an outcome consistent with the last state seen.
    func testSharedVectorsReplayThroughTheDriver() throws {
        let directory = repositoryRoot.appendingPathComponent("tests/vectors")
        let files = try FileManager.default.contentsOfDirectory(atPath: directory.path)
            .filter { $0.hasSuffix(".json") && $0 != "skip.json" }.sorted()
        XCTAssertGreaterThanOrEqual(files.count, 10)
        let skips = try repositoryJSON("tests/vectors/skip.json")["skips"]?.arrayValue ?? []
        XCTAssertEqual(skips.filter { $0["runner"] == "swift" }, [], "the Swift runner skips nothing")
        var checked = 0
        for file in files {
            checked += try replay(try repositoryJSON("tests/vectors/" + file), name: file)
        }
        // tools/call and tasks/get answers and task notifications (51 in the 11 vectors of this writing).
        XCTAssertGreaterThanOrEqual(checked, 50)
    }

    private func replay(_ vector: JSONValue, name: String) throws -> Int {
        var now = UInt64(try XCTUnwrap(vector["start_ms"]?.integerValue))
        var drivers: [String: TaskDriver] = [:]
        var checked = 0
        for step in vector["steps"]?.arrayValue ?? [] {
            now += UInt64(step["advance_ms"]?.integerValue ?? 0)
            for message in step["events"]?["expect"]?.arrayValue ?? [] where message["method"] == "notifications/tasks" {
                if let params = message["params"], let id = params["taskId"]?.stringValue, let driver = drivers[id] {
                    try driver.handleNotification(nowMs: now, params: params)
                }
                checked += 1
            }
            guard let send = step["send"], let body = step["expect"]?["body"] else { continue }
            let method = send["method"]?.stringValue
            let declared = step["tasks"]?.boolValue ?? true
            if method == "tools/call", let result = body["result"] {
                let kind = try classifyToolsCall(result, declared: declared)["kind"]
                if result["resultType"] == "task" {
                    XCTAssertEqual(kind, "task", name)
                    drivers[try XCTUnwrap(result["taskId"]?.stringValue)] = try TaskDriver(created: result, nowMs: now)
                    XCTAssertThrowsError(try classifyToolsCall(result, declared: false)) { error in
                        guard case TasksError.InvalidParamsError(let detail) = error else {
                            return XCTFail("\(name): \(error)")
                        }
                        XCTAssertEqual(detail.code, -32602)
                    }
                } else {
                    XCTAssertNotEqual(kind, "task", name)
                }
                checked += 1
            } else if method == "tasks/get", let result = body["result"] {
                if let id = result["taskId"]?.stringValue, let driver = drivers[id] {
                    try driver.handleGet(nowMs: now, result: result)
                }
                checked += 1
            } else if method == "tasks/get", case .object(var error)? = body["error"] {
                if let id = send["params"]?["taskId"]?.stringValue, let driver = drivers[id] {
                    let known = driver.outcome() != nil
                    error["message"] = "from the vector"
                    try driver.handleGetError(nowMs: now, error: .object(error))
                    if error["code"] == -32602 && !known {
                        XCTAssertEqual(driver.outcome(), ["kind": "gone"], name)
                    }
                }
                checked += 1
            }
        }
        let consistent: [String: String] = ["completed": "completed", "failed": "failed", "cancelled": "cancelled"]
        for (id, driver) in drivers {
            while let event = driver.pollEvent() {
                guard event["kind"] == "finished", let kind = event["outcome"]?["kind"]?.stringValue,
                    let status = consistent[kind]
                else { continue }
                XCTAssertEqual(driver.latest()["status"]?.stringValue, status, "\(name) \(id): \(event)")
            }
        }
        return checked
    }

    // MARK: the driver

    private let created: JSONValue = [
        "resultType": "task", "taskId": "t1", "status": "working", "createdAt": "2026-09-01T12:00:00.000Z",
        "lastUpdatedAt": "2026-09-01T12:00:00.000Z", "ttlMs": 60000, "pollIntervalMs": 500,
    ]
    private let t0: UInt64 = 1_788_264_000_000

    private var asking: JSONValue {
        guard case .object(var task) = created else { return created }
        task["resultType"] = "complete"
        task["status"] = "input_required"
        task["lastUpdatedAt"] = "2026-09-01T12:00:00.010Z"
        task["inputRequests"] = ["k": ["method": "elicitation/create", "params": ["message": "ok?"]]]
        return .object(task)
    }

    func testDriverPollsAtTheServersPaceAndConfirmsAStopCancel() throws {
        let driver = try TaskDriver(created: created, nowMs: t0)
        XCTAssertEqual(driver.taskId, "t1")
        XCTAssertEqual(driver.pollTimeout(), t0 + 500)
        driver.handleTimeout(nowMs: t0 + 500)
        XCTAssertEqual(driver.pollOutgoing(), ["method": "tasks/get", "params": ["taskId": "t1"]])
        try driver.cancel(mode: .stop)
        XCTAssertEqual(driver.pollOutgoing(), ["method": "tasks/cancel", "params": ["taskId": "t1"]])
        XCTAssertNil(driver.outcome())
        try driver.handleAck(nowMs: t0 + 501, method: "tasks/cancel", error: nil)
        XCTAssertEqual(driver.outcome(), ["kind": "cancelled"])
    }

    func testDriverResendsFailedAnswersAndResumesFromItsState() throws {
        let driver = try TaskDriver(created: created, nowMs: t0)
        try driver.handleGet(nowMs: t0 + 10, result: asking)
        var events: [JSONValue] = []
        while let event = driver.pollEvent() { events.append(event) }
        XCTAssertTrue(events.contains { $0["kind"] == "input_requested" && $0["key"] == "k" }, "\(events)")
        try driver.answer("k", ["action": "accept", "content": [:]])
        let first = try XCTUnwrap(driver.pollOutgoing())
        XCTAssertEqual(first["method"], "tasks/update")
        try driver.handleAck(nowMs: t0 + 20, method: "tasks/update", error: ["code": -32603, "message": "store down"])
        XCTAssertEqual(driver.pollOutgoing(), first)
        try driver.handleAck(nowMs: t0 + 30, method: "tasks/update", error: nil)
        XCTAssertNil(driver.pollOutgoing())
        let state = driver.state()
        XCTAssertEqual(state["answered_keys"], ["k"])
        let resumed = try TaskDriver.resume(state: state, nowMs: t0 + 1000)
        XCTAssertEqual(resumed.latest()["status"], "input_required")
        XCTAssertThrowsError(try resumed.answer("k", [:])) { error in
            XCTAssertEqual((error as? TasksError)?.className, "InvalidParamsError")
        }
        XCTAssertThrowsError(try TaskDriver(created: ["resultType": "complete"], nowMs: t0))
    }

    // MARK: the README

    /// The README's Swift example is Examples/Quickstart/main.swift (compiled, and run by
    /// bindings-swift/swift-test), from its first import on.
    func testTheReadmeQuotesTheCompiledExample() throws {
        let readme = try String(contentsOf: repositoryRoot.appendingPathComponent("README.md"), encoding: .utf8)
        let example = try String(
            contentsOf: repositoryRoot.appendingPathComponent("bindings-swift/Examples/Quickstart/main.swift"),
            encoding: .utf8)
        let body = try XCTUnwrap(example.range(of: "import Foundation")).lowerBound
        XCTAssertTrue(readme.contains("```swift\n" + example[body...] + "```"), "README.md's Swift example differs")
    }

    // MARK: errors and the public surface

    func testErrorCasesAreCoresClassesWithTheirCodes() throws {
        let manifest = try repositoryJSON("tests/api/manifest.json")
        let names = ErrorClass.table.map(\.name)
        XCTAssertEqual(names.map(JSONValue.string), manifest["error_classes"]?.arrayValue)
        let expectedCodes: [String: Int?] = [
            "McpTaskError": nil, "ParseError": -32700, "InvalidRequestError": -32600, "RequestTooLargeError": -32600,
            "MethodNotFoundError": -32601, "InvalidParamsError": -32602, "TaskNotFoundError": -32602,
            "HeaderMismatchError": -32020, "MissingCapabilityError": -32021, "UnsupportedVersionError": -32022,
            "InternalError": -32603, "QuotaExceededError": -32010, "TransportError": -32603,
            "TaskCancelledError": nil, "TaskGoneError": -32602, "TaskExpiredError": nil,
        ]
        XCTAssertEqual(Dictionary(uniqueKeysWithValues: ErrorClass.table.map { ($0.name, $0.code) }), expectedCodes)
        // One case per class, each carrying its detail; subclasses by core's table.
        for row in ErrorClass.table {
            let error = TasksError.make(row.name)
            XCTAssertEqual(error.className, row.name)
            XCTAssertTrue(error.isKind(of: "McpTaskError"))
        }
        XCTAssertTrue(TasksError.make("TaskGoneError").isKind(of: "InvalidParamsError"))
        XCTAssertFalse(TasksError.make("TaskGoneError").isKind(of: "InternalError"))
    }

    /// Each manifest item as the Swift member that spells it (a reference, so a missing or
    /// renamed member does not compile), and the manifest's list of names equal to this one.
    func testPublicSurfaceMatchesTheManifest() throws {
        let manifest = try repositoryJSON("tests/api/manifest.json")
        let surface: [String: [String: Any]] = [
            "TasksClient": [
                "call_tool": { (c: TasksClient) in { (n: String, a: [String: JSONValue]) in try await c.callTool(n, arguments: a) } },
                "resume_all": TasksClient.resumeAll, "close": TasksClient.close,
            ],
            "Execution": [
                "kind": \Execution.kind, "task_id": \Execution.taskId, "result": Execution.result,
                "value": { (e: Execution) in { try await e.value() } }, "updates": \Execution.updates,
                "cancel": Execution.cancel, "answer": Execution.answer,
            ],
            "TaskExecution": [
                "task_id": \TaskExecution.taskId, "latest": \TaskExecution.latest, "updates": \TaskExecution.updates,
                "result": TaskExecution.result, "value": { (e: TaskExecution) in { try await e.value() } },
                "cancel": TaskExecution.cancel, "answer": TaskExecution.answer,
            ],
            "InputRequest": [
                "task_id": \InputRequest.taskId, "key": \InputRequest.key, "method": \InputRequest.method,
                "params": \InputRequest.params,
            ],
            "TaskDriver": [
                "resume": TaskDriver.resume, "task_id": \TaskDriver.taskId, "latest": TaskDriver.latest,
                "state": TaskDriver.state, "outcome": TaskDriver.outcome, "handle_get": TaskDriver.handleGet,
                "handle_notification": TaskDriver.handleNotification, "handle_get_error": TaskDriver.handleGetError,
                "handle_ack": TaskDriver.handleAck, "answer": TaskDriver.answer, "cancel": TaskDriver.cancel,
                "handle_timeout": TaskDriver.handleTimeout, "poll_timeout": TaskDriver.pollTimeout,
                "poll_outgoing": TaskDriver.pollOutgoing, "poll_event": TaskDriver.pollEvent,
            ],
        ]
        for (name, spec) in manifest["types"]?.objectValue ?? [:] {
            if let languages = spec["languages"]?.arrayValue, !languages.contains("swift") { continue }
            let members = Set(spec["members"]?.arrayValue?.compactMap(\.stringValue) ?? [])
            XCTAssertEqual(Set(surface[name]?.keys.map { $0 } ?? []), members, name)
        }
        XCTAssertEqual(Set(manifest["types"]?.objectValue?.keys.map { $0 } ?? []), Set(surface.keys))
        let functions: [String: Any] = ["classify_tools_call": classifyToolsCall]
        XCTAssertEqual(Set(manifest["functions"]?.objectValue?.keys.map { $0 } ?? []), Set(functions.keys))
        let options: [String: PartialKeyPath<ClientOptions>] = [
            "url": \.url, "headers": \.headers, "command": \.command, "args": \.args, "env": \.env, "cwd": \.cwd,
            "stderr": \.stderr, "store": \.store, "client_name": \.clientName, "client_version": \.clientVersion,
            "notifications": \.notifications, "default_poll_ms": \.defaultPollMs, "min_poll_ms": \.minPollMs,
            "max_input_rounds": \.maxInputRounds, "capabilities": \.capabilities,
        ]
        XCTAssertEqual(options.keys.sorted(), manifest["client_options"]?.arrayValue?.compactMap(\.stringValue).sorted())
        let outcomes: [Outcome] = [.completed(nil), .failed(TaskError(code: 1, message: "m")), .cancelled, .gone, .expired]
        XCTAssertEqual(outcomes.map { JSONValue.string($0.kind) }, manifest["outcome_kinds"]?.arrayValue)
    }
}

extension TasksError {
    /// The case for a class name, with a detail naming it (tests only).
    static func make(_ name: String) -> TasksError {
        let detail = ErrorDetail(className: name, code: nil, message: "m", data: nil, causes: [])
        switch name {
        case "McpTaskError": return .McpTaskError(detail)
        case "ParseError": return .ParseError(detail)
        case "InvalidRequestError": return .InvalidRequestError(detail)
        case "RequestTooLargeError": return .RequestTooLargeError(detail)
        case "MethodNotFoundError": return .MethodNotFoundError(detail)
        case "InvalidParamsError": return .InvalidParamsError(detail)
        case "TaskNotFoundError": return .TaskNotFoundError(detail)
        case "HeaderMismatchError": return .HeaderMismatchError(detail)
        case "MissingCapabilityError": return .MissingCapabilityError(detail)
        case "UnsupportedVersionError": return .UnsupportedVersionError(detail)
        case "InternalError": return .InternalError(detail)
        case "QuotaExceededError": return .QuotaExceededError(detail)
        case "TransportError": return .TransportError(detail)
        case "TaskCancelledError": return .TaskCancelledError(detail)
        case "TaskGoneError": return .TaskGoneError(detail)
        default: return .TaskExpiredError(detail)
        }
    }
}
