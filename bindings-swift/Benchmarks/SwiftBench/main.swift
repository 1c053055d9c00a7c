// The Swift client's half of bindings-swift/bench: end-to-end tasks per second of `MCPTasks`
// against a tasks server, `--concurrency` calls in flight (16 by default) of
// `slow_compute {"seconds": 0}` (a task tool that completes at once), each followed to its
// outcome: the loop of tests/fixtures/src/bin/swift-bench.rs, through the Swift layer and the FFI.
// With `--tasks N` it runs N tasks instead of for a time, and prints its resident memory after the
// first tenth and at the end (what a client that forgets delivered references keeps flat).
//   swift run -c release swift-bench URL [--seconds S | --tasks N] [--concurrency N]
import Foundation
import MCPTasks

var arguments = CommandLine.arguments.dropFirst()
guard let url = arguments.popFirst().flatMap(URL.init(string:)) else {
    FileHandle.standardError.write(Data("usage: swift-bench URL [--seconds S | --tasks N] [--concurrency N]\n".utf8))
    exit(2)
}
var seconds = 3.0
var count: Int?
var concurrency = 16
while let flag = arguments.popFirst() {
    switch flag {
    case "--seconds": seconds = Double(arguments.popFirst() ?? "") ?? seconds
    case "--tasks": count = Int(arguments.popFirst() ?? "")
    case "--concurrency": concurrency = Int(arguments.popFirst() ?? "") ?? concurrency
    default:
        FileHandle.standardError.write(Data("unknown option \(flag)\n".utf8))
        exit(2)
    }
}

/// This process's resident set in KiB (Linux: /proc/self/status), or 0 where unknown.
func residentKiB() -> Int {
    guard let status = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8),
        let line = status.split(separator: "\n").first(where: { $0.hasPrefix("VmRSS:") })
    else { return 0 }
    return Int(line.split(separator: " ").dropFirst().first ?? "") ?? 0
}

/// Hands out task numbers to the workers, and notes the memory once a tenth of them is done.
final class Tally: @unchecked Sendable {
    private let lock = NSLock()
    private var started = 0
    private var finished = 0
    private var tenth = 0
    let limit: Int?

    init(limit: Int?) { self.limit = limit }

    /// Whether another task may start.
    func take(before deadline: Date) -> Bool {
        lock.withLock {
            let more = limit.map { started < $0 } ?? (Date() < deadline)
            if more { started += 1 }
            return more
        }
    }

    func done() {
        let reached = lock.withLock { () -> Bool in
            finished += 1
            return limit.map { finished == max(1, $0 / 10) } ?? false
        }
        if reached {
            let now = residentKiB()
            lock.withLock { tenth = now }
        }
    }

    /// The memory noted after the first tenth.
    var tenthKiB: Int { lock.withLock { tenth } }
}

let client = try TasksClient(url: url, store: .memory)
let tally = Tally(limit: count)
let started = Date()
let deadline = started.addingTimeInterval(seconds)
let tasks = try await withThrowingTaskGroup(of: Int.self) { group in
    for _ in 0..<concurrency {
        group.addTask {
            var done = 0
            while tally.take(before: deadline) {
                let execution = try await client.callTool("slow_compute", arguments: ["seconds": 0])
                guard execution.kind == .task else { throw CancellationError() }
                _ = try await execution.result()
                tally.done()
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
if count != nil {
    print("rss_kib_tenth \(tally.tenthKiB)")
    print("rss_kib_end \(residentKiB())")
}
