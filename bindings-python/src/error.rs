//! The one place errors cross into Python: every core error becomes the exception class core
//! names for it (a class of `mcp_tasks.errors`, one per row of `ERROR_CLASSES`), carrying
//! `code`, `message` and `data`, with the core error's cause chain as `__cause__`.

use mcp_tasks::EngineError;
use mcp_tasks::client::ClientError;
use mcp_tasks::protocol::client::OutcomeError;
use mcp_tasks::protocol::{ERROR_CLASSES, ERROR_TABLE, ProtocolError};
use mcp_tasks::store::StoreError;
use pyo3::prelude::*;

/// Builds `mcp_tasks.errors.{class}(code, message, data)` with `causes` (outermost first) chained
/// as `__cause__`.
fn raise(class: &str, code: Option<i64>, message: String, data: Option<serde_json::Value>, causes: &[String]) -> PyErr {
    // Errors are built on native threads too; at interpreter exit one is built lazily instead,
    // without attaching (nobody is left to catch it).
    if crate::shutting_down() {
        return pyo3::exceptions::PyRuntimeError::new_err(format!("{class}: {message}"));
    }
    Python::attach(|py| {
        let made = (|| -> PyResult<PyErr> {
            let errors = py.import("mcp_tasks.errors")?;
            let data = data.map(|d| pythonize::pythonize(py, &d)).transpose().map_err(PyErr::from)?;
            let exception = PyErr::from_value(errors.getattr(class)?.call1((code, message, data))?);
            let mut innermost: Option<PyErr> = None;
            for cause in causes.iter().rev() {
                let err = pyo3::exceptions::PyConnectionError::new_err(cause.clone());
                err.set_cause(py, innermost.take());
                innermost = Some(err);
            }
            exception.set_cause(py, innermost);
            Ok(exception)
        })();
        made.unwrap_or_else(|e| e)
    })
}

/// Maps an engine error to its Python exception.
pub(crate) fn engine_error(err: EngineError) -> PyErr {
    protocol_error(&err.to_protocol())
}

/// Maps a protocol error to its Python exception.
pub(crate) fn protocol_error(err: &ProtocolError) -> PyErr {
    let rpc = err.to_rpc();
    raise(err.class(), Some(rpc.code), rpc.message, rpc.data, &[])
}

/// Maps a store error from opening an engine's store: a bad URL is a `ValueError`.
pub(crate) fn store_error(err: StoreError) -> PyErr {
    match err {
        StoreError::InvalidUrl(why) => pyo3::exceptions::PyValueError::new_err(format!("store {why}")),
        other => engine_error(EngineError::Store(other)),
    }
}

/// Maps a client error to the class core names for it, keeping the server's code and data and
/// the cause chain.
pub(crate) fn client_error(err: ClientError) -> PyErr {
    let message = match &err {
        ClientError::Rpc(rpc) => rpc.message.clone(),
        other => other.to_string(),
    };
    raise(err.class(), Some(err.code()), message, err.data(), &err.causes())
}

/// Maps a task outcome that is no result (failed, cancelled, gone, expired) to its typed error.
pub(crate) fn outcome_error(err: OutcomeError) -> PyErr {
    raise(err.class, err.code, err.message, err.data, &[])
}

/// `ERROR_CLASSES` as Python dicts (core's serialization: `name`, `parent`, `code`,
/// `pythonBuiltin`, `doc`), which the tests compare with `mcp_tasks.errors`.
pub(crate) fn error_classes(py: Python<'_>) -> PyResult<Bound<'_, PyAny>> {
    pythonize::pythonize(py, ERROR_CLASSES).map_err(PyErr::from)
}

/// `ERROR_TABLE` as Python dicts (`class`, `code`, `httpStatus`, `when`): every error a server
/// answers, for the tests that check answers are on the table.
pub(crate) fn error_table(py: Python<'_>) -> PyResult<Bound<'_, PyAny>> {
    let rows: Vec<serde_json::Value> = ERROR_TABLE
        .iter()
        .map(|row| {
            serde_json::json!({"class": row.kind.class(), "code": row.code, "httpStatus": row.http_status, "when": row.when})
        })
        .collect();
    pythonize::pythonize(py, &rows).map_err(PyErr::from)
}
