//! The sans-IO protocol layer: wire types, the error table, negotiation, header rules, request
//! decoding and the task state machine.
//!
//! Nothing in this module performs IO, spawns, sleeps or reads a clock: time is passed in as
//! Unix milliseconds and ids as strings. A test (`core/tests/sans_io.rs`) fails if a runtime or
//! clock call appears here.

pub mod client;
pub mod error;
pub mod headers;
pub mod negotiation;
pub mod request;
pub mod request_state;
pub mod task;
pub mod time;
pub mod types;

pub use error::{ERROR_TABLE, ErrorKind, ProtocolError, RpcError};
pub use negotiation::{Dispatch, Envelope, TaskMode};
pub use task::{TaskEvent, TaskRecord, TransitionError};
pub use types::*;
