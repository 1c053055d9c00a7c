//! The sans-IO protocol layer: wire types, the error table, negotiation, header rules, request
//! decoding and the task state machine.
//!
//! Nothing in this crate performs IO, spawns, sleeps or reads a clock: time is passed in as
//! Unix milliseconds and ids as strings. The crate boundary enforces it (its dependencies are
//! serde, hashing, base64 and date formatting only); `mcp-tasks` re-exports it as
//! `mcp_tasks::protocol`.

#![warn(missing_docs)]

pub mod client;
pub mod error;
pub mod headers;
pub mod history;
pub mod negotiation;
pub mod number;
pub mod request;
pub mod request_state;
pub mod server;
pub mod task;
pub mod time;
pub mod trace;
pub mod types;

pub use error::{
    ERROR_CLASSES, ERROR_TABLE, ErrorClass, ErrorKind, ProtocolError, QuotaScope, RpcError, class_for_code,
};
pub use history::{Actor, HistoryEntry, HistoryEvent, TaskHistory};
pub use negotiation::{Dispatch, Envelope, TaskMode};
pub use task::{Resume, SparseMap, StoredCall, TaskEvent, TaskRecord, TransitionError};
pub use trace::TraceContext;
pub use types::*;
