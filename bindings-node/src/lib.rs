//! The native module of the Node package `mcp-tasks`: napi-rs glue between JavaScript and the
//! mcp-tasks client. Every function converts its arguments, calls the core, converts back and
//! maps errors (`error.rs`); file names mirror the core modules (`client`, `protocol`). The
//! typed API users import is the TypeScript package in `ts/`.

pub mod client;
pub mod error;
pub mod protocol;
pub mod server;
pub mod web;

use napi_derive::napi;

/// Rust allocations of the native module (JavaScript's are V8's): a task's create and settle
/// allocate many small JSON values, where glibc's malloc spent half the native time.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// The extension identifier, `io.modelcontextprotocol/tasks`.
#[napi]
pub const EXTENSION_ID: &str = mcp_tasks::EXTENSION_ID;

/// The MCP revision the client speaks, `2026-07-28`.
#[napi]
pub const PROTOCOL_VERSION: &str = mcp_tasks::PROTOCOL_VERSION;

/// The content type of the metrics text (`TasksServer.metrics()`), for a scrape's answer.
#[napi]
pub const METRICS_CONTENT_TYPE: &str = mcp_tasks::metrics::CONTENT_TYPE;

/// The version of this package's native module.
#[napi]
pub fn native_version() -> String {
    env!("CARGO_PKG_VERSION").to_owned()
}
