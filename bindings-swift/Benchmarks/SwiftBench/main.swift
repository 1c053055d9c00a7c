// The Swift client's half of bindings-swift/bench: end-to-end tasks per second of `MCPTasks`
// against a tasks server, `--concurrency` calls in flight (16 by default) of
// `slow_compute {"seconds": 0}` (a task tool that completes at once), each followed to its
// outcome: the loop of tests/fixtures/src/bin/swift-bench.rs, through the Swift layer and the FFI.
//   swift run -c release swift-bench URL [--seconds S] [--concurrency N]
import Foundation
import MCPTasks

var arguments = CommandLine.arguments.dropFirst()
guard let url = arguments.popFirst().flatMap(URL.init(string:)) else {
    FileHandle.standardError.write(Data("usage: swift-bench URL [--seconds S] [--concurrency N]\n".utf8))
    exit(2)
}
var seconds = 3.0
var concurrency = 16
while let flag = arguments.popFirst() {
    switch flag {
    case "--seconds": seconds = Double(arguments.popFirst() ?? "") ?? seconds
    case "--concurrency": concurrency = Int(arguments.popFirst() ?? "") ?? concurrency
    default:
        FileHandle.standardError.write(Data("unknown option \(flag)\n".utf8))
        exit(2)
    }
}
let client = try TasksClient(url: url, store: .memory)
let started = Date()
let deadline = started.addingTimeInterval(seconds)
let tasks = try await withThrowingTaskGroup(of: Int.self) { group in
    for _ in 0..<concurrency {
        group.addTask {
            var done = 0
            while Date() < deadline {
                let execution = try await client.callTool("slow_compute", arguments: ["seconds": 0])
                guard execution.kind == .task else { throw CancellationError() }
                _ = try await execution.result()
                done += 1
            }
            return done
        }
    }
    var total = 0
    for try await done in group { total += done }
    return total
}
let elapsed = Date().timeIntervalSince(started)
print("tasks \(tasks)")
print("tasks/s \(String(format: "%.1f", Double(tasks) / elapsed))")
