//! The one place errors cross into Python: every core error becomes an exception from
//! `mcp_tasks.errors`, chosen by its JSON-RPC code, carrying `code`, `message` and `data`.

use mcp_tasks::EngineError;
use mcp_tasks::client::ClientError;
use mcp_tasks::protocol::{ErrorKind, ProtocolError};
use mcp_tasks::store::StoreError;
use pyo3::prelude::*;

/// The `mcp_tasks.errors` class for an error kind.
fn class_name(kind: ErrorKind) -> &'static str {
    match kind {
        ErrorKind::TaskNotFound => "TaskNotFoundError",
        ErrorKind::InvalidParams | ErrorKind::TooLarge => "InvalidParamsError",
        ErrorKind::MissingCapability => "MissingCapabilityError",
        ErrorKind::HeaderMismatch => "HeaderMismatchError",
        ErrorKind::MethodNotFound => "MethodNotFoundError",
        _ => "InternalError",
    }
}

fn raise(kind: ErrorKind, code: i64, message: String, data: Option<String>) -> PyErr {
    Python::attach(|py| {
        let made = py
            .import("mcp_tasks.errors")
            .and_then(|m| m.getattr(class_name(kind)))
            .and_then(|class| class.call1((code, message.clone(), data)));
        match made {
            Ok(exception) => PyErr::from_value(exception),
            Err(e) => e,
        }
    })
}

/// Maps an engine error to its Python exception.
pub(crate) fn engine_error(err: EngineError) -> PyErr {
    protocol_error(&err.to_protocol())
}

/// Maps a protocol error to its Python exception.
pub(crate) fn protocol_error(err: &ProtocolError) -> PyErr {
    let rpc = err.to_rpc();
    raise(err.kind(), rpc.code, rpc.message, rpc.data.map(|d| d.to_string()))
}

/// Maps a store error from opening an engine's store: a bad URL is a `ValueError`.
pub(crate) fn store_error(err: StoreError) -> PyErr {
    match err {
        StoreError::InvalidUrl(why) => pyo3::exceptions::PyValueError::new_err(format!("store {why}")),
        other => engine_error(EngineError::Store(other)),
    }
}

/// Maps a client error: a server's JSON-RPC error keeps its code and data; the rest are
/// internal (-32603) or, for misuse of a task (answering an unknown key), -32602.
pub(crate) fn client_error(err: ClientError) -> PyErr {
    let (kind, data) = match &err {
        ClientError::Rpc(rpc) => {
            let kind = match rpc.code {
                -32602 => ErrorKind::InvalidParams,
                -32021 => ErrorKind::MissingCapability,
                -32020 => ErrorKind::HeaderMismatch,
                -32601 => ErrorKind::MethodNotFound,
                _ => ErrorKind::Internal,
            };
            (kind, rpc.data.as_ref().map(|d| d.to_string()))
        }
        ClientError::Driver(_) | ClientError::InvalidStoreUrl(_) => (ErrorKind::InvalidParams, None),
        _ => (ErrorKind::Internal, None),
    };
    raise(kind, err.code(), err.to_string(), data)
}
