// swift-tools-version:6.2
// The consumer-by-URL test's app: tests/swift-consumer/run copies this package outside the
// repository, swaps the URL below for a file:// clone of a release's tag, resolves, builds in
// Swift 6 mode and runs it against the fixture server. The lines between the markers are the
// install lines README.md and docs/swift.md quote (tests/docs/check keeps them identical).
import PackageDescription

let package = Package(
    name: "Consumer",
    platforms: [.macOS(.v14), .iOS(.v17)],
    // docs:begin install
    dependencies: [
        .package(url: "https://github.com/mcp-tasks/mcp-tasks", from: "0.1.0"),
    ],
    targets: [
        .executableTarget(name: "App", dependencies: [.product(name: "MCPTasks", package: "mcp-tasks")]),
    ]
    // docs:end install
)
