//! The private native module `mcp_tasks._native`: glue between Python and the mcp-tasks engine.
//! Every function converts its arguments, calls the core, converts back and maps errors
//! (`error.rs`); file names mirror the core modules.

mod client;
mod engine;
mod error;

use std::future::Future;
use std::pin::pin;
use std::task::{Context, Poll, Waker};

use pyo3::BoundObject;
use pyo3::exceptions::{PyRuntimeError, PyStopIteration, PyValueError};
use pyo3::prelude::*;

/// Runs `fut` as a Python awaitable. The first poll happens right here (inside the tokio
/// runtime, GIL held: releasing it costs more than the few microseconds of a memory-store
/// operation, an inline SQLite commit or a cached read, because tokio workers finishing other
/// futures take it in between): work that finishes without waiting comes back as a [`Ready`]
/// awaitable, so it costs no hop to a tokio worker and back (measured ~0.2 ms per call here),
/// nor the event loop's future machinery. Anything still pending after that poll is handed,
/// unchanged, to pyo3-async-runtimes.
pub(crate) fn awaitable<'py, F, T>(py: Python<'py>, fut: F) -> PyResult<Bound<'py, PyAny>>
where
    F: Future<Output = PyResult<T>> + Send + 'static,
    T: for<'a> IntoPyObject<'a> + Send + 'static,
{
    let mut fut = Box::pin(fut);
    let runtime = pyo3_async_runtimes::tokio::get_runtime();
    let polled = {
        let _inside = runtime.enter();
        // A no-op waker is enough: if the future is pending, the next poll (by the runtime,
        // with a real waker) registers again, as every well-behaved future does.
        pin!(&mut fut).poll(&mut Context::from_waker(Waker::noop()))
    };
    match polled {
        Poll::Ready(result) => {
            let outcome =
                result.and_then(|value| value.into_pyobject(py).map(|v| v.into_any().unbind()).map_err(Into::into));
            Ok(Bound::new(py, Ready { outcome: parking_lot::Mutex::new(Some(outcome)) })?.into_any())
        }
        Poll::Pending => pyo3_async_runtimes::tokio::future_into_py(py, fut),
    }
}

/// An awaitable whose outcome is already known: `await` returns the value (or raises) at once,
/// without scheduling anything on the event loop. Awaiting it a second time is a RuntimeError,
/// as for a coroutine.
#[pyclass(module = "mcp_tasks._native", frozen)]
pub(crate) struct Ready {
    outcome: parking_lot::Mutex<Option<PyResult<Py<PyAny>>>>,
}

#[pymethods]
impl Ready {
    fn __await__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    fn __iter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    /// Ends the `await` with the value (StopIteration carries it) or the error.
    fn __next__(&self) -> PyResult<()> {
        match self.outcome.lock().take() {
            Some(Ok(value)) => Err(PyStopIteration::new_err((value,))),
            Some(Err(error)) => Err(error),
            None => Err(PyRuntimeError::new_err("cannot reuse an already awaited result")),
        }
    }
}

/// A serde value converted to Python objects (dicts, lists, str, int, float, bool, None) by
/// pythonize: results cross the boundary as objects, not JSON text to be parsed again.
pub(crate) struct Pythonized<T>(pub(crate) T);

impl<'py, T: serde::Serialize> IntoPyObject<'py> for Pythonized<T> {
    type Target = PyAny;
    type Output = Bound<'py, PyAny>;
    type Error = PyErr;

    fn into_pyobject(self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        pythonize::pythonize(py, &self.0).map_err(|e| PyValueError::new_err(e.to_string()))
    }
}

/// A Python object (dicts, lists, str, numbers, bool, None) as a JSON value; anything else is
/// -32602 (`InvalidParamsError`) naming `what`.
pub(crate) fn from_py(what: &str, value: &Bound<'_, PyAny>) -> PyResult<serde_json::Value> {
    pythonize::depythonize(value).map_err(|e| {
        error::protocol_error(&mcp_tasks::protocol::ProtocolError::InvalidParams(format!("{what} is not JSON: {e}")))
    })
}

/// The native module. `gil_used = false`: no Rust state here needs the GIL.
#[pymodule(gil_used = false)]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<Ready>()?;
    m.add_class::<engine::PyEngine>()?;
    m.add_class::<engine::PyTaskContext>()?;
    m.add_class::<engine::PySubscription>()?;
    m.add_class::<client::PyClient>()?;
    m.add_class::<client::PyTaskExecution>()?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add("EXTENSION_ID", mcp_tasks::EXTENSION_ID)?;
    m.add("PROTOCOL_VERSION", mcp_tasks::PROTOCOL_VERSION)?;
    Ok(())
}
