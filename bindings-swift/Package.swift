// swift-tools-version:6.2
// MCPTasks: the MCP tasks extension client (io.modelcontextprotocol/tasks, MCP 2026-07-28) for
// Swift hosts, over the Rust library `mcp_tasks_ffi` (its C module is `mcp_tasks_ffiFFI`
// everywhere).
//
// The Rust library is a binary target:
// - on Apple platforms MCPTasksFFI.xcframework (bindings-swift/build-xcframework, on macOS);
// - on Linux MCPTasksFFI.artifactbundle, a static-library artifact bundle (SE-0482, hence
//   tools version 6.2) staged by bindings-swift/stage-ffi.
// Neither needs unsafe flags or LD_LIBRARY_PATH: both hold a static library.
import PackageDescription

#if os(Linux)
let ffi: Target = .binaryTarget(name: "mcp_tasks_ffiFFI", path: "MCPTasksFFI.artifactbundle")
#else
let ffi: Target = .binaryTarget(name: "mcp_tasks_ffiFFI", path: "MCPTasksFFI.xcframework")
#endif

let package = Package(
    name: "MCPTasks",
    platforms: [.macOS(.v12), .iOS(.v15)],
    products: [.library(name: "MCPTasks", targets: ["MCPTasks"])],
    targets: [
        ffi,
        // uniffi's generated Swift, as bindings-swift/generate writes it.
        .target(name: "MCPTasksFFI", dependencies: ["mcp_tasks_ffiFFI"]),
        .target(name: "MCPTasks", dependencies: ["MCPTasksFFI"]),
        .testTarget(name: "MCPTasksTests", dependencies: ["MCPTasks"]),
        // The README's example (bindings-swift/swift-test runs it against the fixture server).
        .executableTarget(name: "quickstart", dependencies: ["MCPTasks"], path: "Examples/Quickstart"),
        // The Swift half of bindings-swift/bench (the Rust half is tests/fixtures' swift-bench).
        .executableTarget(name: "swift-bench", dependencies: ["MCPTasks"], path: "Benchmarks/SwiftBench"),
    ]
)
