//! # mcp-tasks
//!
//! The Model Context Protocol tasks extension (`io.modelcontextprotocol/tasks`, SEP-2663) for
//! MCP revision 2026-07-28: long-running `tools/call`s answer with a durable task handle that
//! clients poll with `tasks/get`, feed with `tasks/update`, cancel with `tasks/cancel`, or watch
//! through `subscriptions/listen`.
//!
//! The crate is layered:
//! - [`protocol`] (the `mcp-tasks-protocol` crate): sans-IO. Wire types, the error table, negotiation, header rules, request
//!   decoding and the task state machine. No IO, no runtime, no clock: time and ids are passed
//!   in, so any host or language binding can drive it.
//! - [`store`]: durable storage behind the async [`store::TaskStore`] trait; SQLite (embedded
//!   default: a redo log in front of group commits), PostgreSQL (feature `postgres`, many
//!   workers) and in-memory backends.
//! - [`engine`]: the tokio task engine — durable creation, the work handle
//!   ([`engine::TaskContext`]), `tasks/*`, subscriptions, TTL sweeping, crash recovery.
//! - [`host`] (feature `http`): a stateless Streamable HTTP endpoint on axum that serves tools
//!   through the engine; what a program without an MCP SDK embeds.
//! - [`client`] (feature `client`): the task client — calls tools, follows tasks by polling and
//!   notifications, answers input, cancels, persists task references and resumes after restart.
//! - [`admin`] (feature `sqlite`): operating a store from outside its servers (list, show,
//!   cancel, purge, tail, stats), safe on a live store; the `mcp-tasks` CLI (`core/cli`) prints it.
//! - [`metrics`]: an engine's Prometheus metrics and the fields of its `tracing` events.
//! - [`trace`]: W3C trace context (SEP-414) on the host's spans; `otel` (feature `otel`):
//!   their OTLP export from the standard `OTEL_*` environment.
//! - [`clock`]: where time and ids come from.

#![warn(missing_docs)]

#[cfg(feature = "sqlite")]
pub mod admin;
#[cfg(feature = "client")]
pub mod client;
pub mod clock;
pub mod engine;
#[cfg(feature = "http")]
pub mod host;
pub mod limits;
pub mod metrics;
#[cfg(feature = "otel")]
pub mod otel;
pub mod store;
pub mod trace;

pub use engine::{Engine, EngineConfig, EngineError, TaskContext, TaskOptions};
/// The sans-IO protocol layer (the `mcp-tasks-protocol` crate).
pub use mcp_tasks_protocol as protocol;
pub use protocol::{EXTENSION_ID, PROTOCOL_VERSION};
