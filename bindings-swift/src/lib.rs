//! The uniffi library behind the Swift package `MCPTasks`: glue over the mcp-tasks client. Every
//! function converts its arguments, calls the core, converts back and maps errors (`error.rs`,
//! one FFI error enum); file names mirror the core modules. The Swift layer in
//! `Sources/MCPTasks/` wraps it in the public Swift API (JSONValue, async sequences,
//! cancellation); the same library also yields Python (and Kotlin) bindings, which the smoke test
//! uses where no Swift compiler exists.

pub mod client;
pub mod error;
pub mod protocol;

uniffi::setup_scaffolding!();

/// The extension identifier, `io.modelcontextprotocol/tasks`.
#[uniffi::export]
pub fn extension_id() -> String {
    mcp_tasks::EXTENSION_ID.to_owned()
}

/// The MCP revision the client speaks, `2026-07-28`.
#[uniffi::export]
pub fn protocol_version() -> String {
    mcp_tasks::PROTOCOL_VERSION.to_owned()
}
