// swift-tools-version:6.2
// MCPTasks: the MCP tasks extension client (io.modelcontextprotocol/tasks, MCP 2026-07-28) for
// Swift hosts, over the Rust library `mcp_tasks_ffi` (its C module is `mcp_tasks_ffiFFI`
// everywhere). At the repository root because SwiftPM reads a dependency's manifest only there;
// every target lives in bindings-swift/ (docs/swift.md).
//
// The Rust library is a binary target holding a static library (no unsafe flags, no
// LD_LIBRARY_PATH): on Apple platforms MCPTasksFFI.xcframework, on Linux a static-library
// artifact bundle (SE-0482, hence tools version 6.2).
// - A release's tagged commit pins its binaries below (bindings-swift/pin-release writes the
//   three lines; the release workflow runs it), so a consumer by URL downloads them.
// - On main the pins are empty (tests/run-swift checks it) and the targets use local builds:
//   bindings-swift/stage-ffi (Linux) or bindings-swift/build-xcframework (macOS). Main's Swift
//   sources call the FFI of main's Rust code, which no earlier release's binary has.
// - MCP_TASKS_FFI=local in the environment uses the local builds on a tagged commit too, for a
//   contributor rebuilding a release from source.
import PackageDescription

// Pinned by bindings-swift/pin-release (empty on main).
let releaseVersion = ""
let releaseBaseURL = ""
let xcframeworkChecksum = ""
let linuxBundleChecksum = ""

let useLocalBuilds = releaseVersion.isEmpty || Context.environment["MCP_TASKS_FFI"] == "local"

// The platform's binary: chosen by the host that resolves the package, which is the platform it
// builds for.
#if os(Linux)
let (localFFI, releaseZip, releaseChecksum) = (
    "bindings-swift/MCPTasksFFI.artifactbundle", "MCPTasksFFI-linux.artifactbundle.zip", linuxBundleChecksum
)
#else
let (localFFI, releaseZip, releaseChecksum) = (
    "bindings-swift/MCPTasksFFI.xcframework", "MCPTasksFFI.xcframework.zip", xcframeworkChecksum
)
#endif
let ffi: Target =
    useLocalBuilds
    ? .binaryTarget(name: "mcp_tasks_ffiFFI", path: localFFI)
    : .binaryTarget(name: "mcp_tasks_ffiFFI", url: "\(releaseBaseURL)/\(releaseZip)", checksum: releaseChecksum)

// What the static library needs from the system on Linux, as `cargo rustc --print
// native-static-libs` names them (bindings-swift/stage-ffi fails when they differ): an artifact
// bundle carries no system libraries. On Apple platforms the XCFramework's module map links them.
let linuxSystemLibraries = ["gcc_s", "util", "rt", "pthread", "m", "dl", "c"]

let package = Package(
    name: "MCPTasks",
    platforms: [.macOS(.v12), .iOS(.v15)],
    products: [.library(name: "MCPTasks", targets: ["MCPTasks"])],
    targets: [
        ffi,
        // uniffi's generated Swift, as bindings-swift/generate writes it.
        .target(
            name: "MCPTasksFFI", dependencies: ["mcp_tasks_ffiFFI"], path: "bindings-swift/Sources/MCPTasksFFI",
            linkerSettings: linuxSystemLibraries.map { .linkedLibrary($0, .when(platforms: [.linux])) }),
        .target(name: "MCPTasks", dependencies: ["MCPTasksFFI"], path: "bindings-swift/Sources/MCPTasks"),
        .testTarget(name: "MCPTasksTests", dependencies: ["MCPTasks"], path: "bindings-swift/Tests/MCPTasksTests"),
        // The README's example (bindings-swift/swift-test runs it against the fixture server).
        .executableTarget(name: "quickstart", dependencies: ["MCPTasks"], path: "bindings-swift/Examples/Quickstart"),
        // The Swift half of bindings-swift/bench (the Rust half is tests/fixtures' swift-bench).
        .executableTarget(
            name: "swift-bench", dependencies: ["MCPTasks"], path: "bindings-swift/Benchmarks/SwiftBench"),
    ]
)
