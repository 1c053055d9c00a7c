// The README's Swift example, compiled with the package and run against the fixture server by
// bindings-swift/swift-test (a test keeps the README's copy identical to this file from the
// import on): swift run quickstart http://127.0.0.1:PORT/mcp
import Foundation
import MCPTasks

let url = URL(string: CommandLine.arguments.dropFirst().first ?? "http://127.0.0.1:8080/mcp")!
let token = ProcessInfo.processInfo.environment["MCP_TOKEN"] ?? ""
// On iOS keep the file in Application Support (FileManager's .applicationSupportDirectory).
let store = FileManager.default.temporaryDirectory.appendingPathComponent("mcp-tasks-quickstart.db")
let client = try TasksClient(url: url, headers: ["Authorization": "Bearer \(token)"], store: .file(store)) { request in
    ["action": "accept", "content": ["confirm": true]]  // or nil: answer later with execution.answer(key, ...)
}
for task in try await client.resumeAll() { print("picked up", task.taskId, try await task.result()) }
let execution = try await client.callTool("confirm_delete", arguments: ["filename": "draft.txt"])
if #available(macOS 14, iOS 17, *), let task = ObservableTask(execution) {
    // In SwiftUI, `Text(task.statusMessage ?? "\(task.status)")` re-renders as the task's states
    // arrive, and `Button("Cancel") { try? task.cancel() }` cancels the server's task.
    print("observing", task.id, task.status)
}
for await state in execution.updates { print(state.status, state.statusMessage ?? "") }
print(try await execution.value())  // or catch TasksError.TaskCancelledError, .TaskExpiredError, ...
