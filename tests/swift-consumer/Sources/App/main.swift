// The consumer-by-URL test's app (tests/swift-consumer/run): a package outside the repository
// that depends on MCPTasks by git URL at a release tag, built in Swift 6 mode, calling tools of
// the fixture server: `App URL`. Exits non-zero on anything unexpected.
import Foundation
import MCPTasks

let url = URL(string: CommandLine.arguments[1])!
let client = try TasksClient(url: url, store: .memory) { _ in ["action": "accept", "content": ["confirm": true]] }
let greeting = try await client.callTool("greet", arguments: ["name": "consumer"])
let text = try await greeting.value()["content"]?[0]?["text"]
print("greet:", text ?? "nil")
guard text == "Hello, consumer!" else { exit(1) }
let execution = try await client.callTool("confirm_delete", arguments: ["filename": "by-url.txt"])
guard execution.kind == .task else { exit(1) }
for await state in execution.updates { print("task", state.taskId, state.status) }
let deleted = try await execution.value()["content"]?[0]?["text"]
print("confirm_delete:", deleted ?? "nil")
guard deleted == "Deleted by-url.txt" else { exit(1) }
print("MCPTasks \(protocolVersion) by URL: ok")
