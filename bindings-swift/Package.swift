// swift-tools-version:5.9
// MCPTasks: the MCP tasks extension client (io.modelcontextprotocol/tasks, MCP 2026-07-28) for
// Swift hosts, over the Rust library `mcp_tasks_ffi` (uniffi bindings in Sources/MCPTasks).
//
// The Rust library comes from either
// - MCPTasksFFI.xcframework in this folder (Apple platforms; see the README for building it), or
// - ../target/release (macOS or Linux: `cargo build --release -p mcp-tasks-swift`).
import Foundation
import PackageDescription

let xcframework = "MCPTasksFFI.xcframework"
let useXCFramework = FileManager.default.fileExists(atPath: Context.packageDirectory + "/" + xcframework)

let ffi: Target = useXCFramework
    ? .binaryTarget(name: "mcp_tasks_ffiFFI", path: xcframework)
    : .systemLibrary(name: "mcp_tasks_ffiFFI", path: "Sources/mcp_tasks_ffiFFI")

let package = Package(
    name: "MCPTasks",
    platforms: [.macOS(.v12), .iOS(.v15)],
    products: [.library(name: "MCPTasks", targets: ["MCPTasks"])],
    targets: [
        ffi,
        .target(
            name: "MCPTasks",
            dependencies: ["mcp_tasks_ffiFFI"],
            linkerSettings: useXCFramework
                ? []
                : [.unsafeFlags(["-L", Context.packageDirectory + "/../target/release"])]
        ),
        .testTarget(name: "MCPTasksTests", dependencies: ["MCPTasks"]),
    ]
)
