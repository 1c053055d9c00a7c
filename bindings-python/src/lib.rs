//! The private native module `mcp_tasks._native`: glue between Python and the mcp-tasks engine.
//! Every function converts its arguments, calls the core, converts back and maps errors
//! (`error.rs`); file names mirror the core modules.

mod client;
mod delivery;
mod engine;
mod error;
mod web;

use std::future::Future;
use std::pin::pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use pyo3::BoundObject;
use pyo3::exceptions::{PyRuntimeError, PyStopIteration, PyValueError};
use pyo3::prelude::*;

/// Set by `prepare_exit()` (the package registers it with `atexit`): the interpreter is about to
/// finalize, and a native thread that attaches to it from then on can crash the process
/// ("PyGILState_Release: thread state must be current", seen at the exit of a client script).
static SHUTTING_DOWN: AtomicBool = AtomicBool::new(false);

/// True once the interpreter is shutting down: native threads must not attach to it any more.
pub(crate) fn shutting_down() -> bool {
    SHUTTING_DOWN.load(Ordering::Acquire)
}

/// Runs `f` attached to the interpreter, unless it is shutting down (then `None`).
pub(crate) fn attach_unless_shutting_down<R>(f: impl for<'py> FnOnce(Python<'py>) -> R) -> Option<R> {
    (!shutting_down()).then(|| Python::attach(f))
}

/// The package's `atexit` hook: from now on no native thread attaches to the interpreter (the
/// awaitables still pending never complete, callbacks and input handlers are skipped), and
/// threads already attaching get a moment, without the GIL held here, to finish first.
#[pyfunction]
fn prepare_exit(py: Python<'_>) {
    SHUTTING_DOWN.store(true, Ordering::Release);
    py.detach(|| std::thread::sleep(Duration::from_millis(50)));
}

/// Runs `fut` as a Python awaitable. The first poll happens right here (inside the tokio
/// runtime, GIL held: releasing it costs more than the few microseconds of a memory-store
/// operation, a redo-log append or a cached read, because tokio workers finishing other
/// futures take it in between): work that finishes without waiting comes back as a [`Ready`]
/// awaitable, so it costs no hop to a tokio worker and back (measured ~0.2 ms per call here),
/// nor the event loop's future machinery. Anything still pending after that poll runs on the
/// runtime and settles an asyncio future through the loop's [`delivery::Delivery`] (a pipe the
/// loop reads: the worker never takes the GIL); a loop that cannot watch a pipe gets
/// pyo3-async-runtimes' `future_into_py` instead.
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
        // Completing hands the outcome to the event loop from a native thread, which must not
        // happen once the interpreter is shutting down: such a future stays pending instead.
        Poll::Pending => {
            let event_loop = pyo3_async_runtimes::get_running_loop(py)?;
            let Some(delivery) = delivery::Delivery::of(py, &event_loop) else {
                return pyo3_async_runtimes::tokio::future_into_py(py, async move {
                    let outcome = fut.await;
                    if shutting_down() {
                        std::future::pending::<()>().await;
                    }
                    outcome
                });
            };
            let future = event_loop.call_method0("create_future")?;
            let settle = future.clone().unbind();
            let work = runtime.spawn(async move {
                let outcome = fut.await;
                if shutting_down() {
                    return; // the future stays pending
                }
                delivery.push((
                    settle,
                    Box::new(move |py| {
                        outcome.and_then(|v| v.into_pyobject(py).map(|v| v.into_any().unbind()).map_err(Into::into))
                    }),
                ));
            });
            future.call_method1("add_done_callback", (delivery::AbortOnCancel { work: work.abort_handle() },))?;
            Ok(future)
        }
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

/// A Python object (dicts, lists, tuples, str, int, float, bool, None) as a JSON value; anything
/// else is -32602 (`InvalidParamsError`) naming `what`. Hand-written rather than pythonize's
/// `depythonize`, which asks every object whether it is a dataclass (a failing attribute lookup
/// each): measured 6.4 µs for a small tool result in the benchmark, this takes ~1.
pub(crate) fn from_py(what: &str, value: &Bound<'_, PyAny>) -> PyResult<serde_json::Value> {
    json_value(value, 0, Ints::Exact).map_err(|why| {
        error::protocol_error(&mcp_tasks::protocol::ProtocolError::InvalidParams(format!("{what} is not JSON: {why}")))
    })
}

/// The start of [`from_py`]'s reason for a string that is not valid Unicode (a lone surrogate,
/// which Python's JSON parser accepts and JSON text may not carry).
const NOT_UNICODE: &str = "a string that is not valid Unicode";

/// A request's params as the SDK parsed them from the wire, as JSON. A lone surrogate, which
/// Python's parser lets through, is answered as the Rust host answers the same body: -32700,
/// since the body was not valid JSON (RFC 8259 §8.2; serde_json refuses it while parsing).
pub(crate) fn wire_params(value: &Bound<'_, PyAny>) -> PyResult<serde_json::Value> {
    json_value(value, 0, Ints::AsParsed).map_err(|why| {
        let error = if why.starts_with(NOT_UNICODE) {
            mcp_tasks::protocol::ProtocolError::Parse(why)
        } else {
            mcp_tasks::protocol::ProtocolError::InvalidParams(format!("params is not JSON: {why}"))
        };
        error::protocol_error(&error)
    })
}

/// How deep [`from_py`] follows nested containers (JSON parsers commonly stop at 128 too).
const MAX_DEPTH: usize = 128;

/// What an integer past 64 bits becomes.
#[derive(Clone, Copy)]
enum Ints {
    /// Refused: a value a tool or the caller built must keep its exact value.
    Exact,
    /// The nearest f64, as serde_json (and so the Rust host) reads such a number from the wire;
    /// for params Python's JSON parser read as an exact integer.
    AsParsed,
}

fn json_value(value: &Bound<'_, PyAny>, depth: usize, ints: Ints) -> Result<serde_json::Value, String> {
    use pyo3::types::{PyBool, PyDict, PyFloat, PyInt, PyList, PyString, PyTuple};
    use serde_json::Value;
    if depth > MAX_DEPTH {
        return Err(format!("nested deeper than {MAX_DEPTH}"));
    }
    if value.is_none() {
        return Ok(Value::Null);
    }
    if let Ok(text) = value.cast::<PyString>() {
        return text.to_str().map(|s| Value::String(s.to_owned())).map_err(|e| format!("{NOT_UNICODE}: {e}"));
    }
    // Before int: bool is a subclass of int.
    if let Ok(flag) = value.cast::<PyBool>() {
        return Ok(Value::Bool(flag.is_true()));
    }
    if let Ok(int) = value.cast::<PyInt>() {
        if let Ok(n) = int.extract::<i64>() {
            return Ok(Value::from(n));
        }
        if let Ok(n) = int.extract::<u64>() {
            return Ok(Value::from(n));
        }
        let out_of_range = || format!("integer {int} is out of range");
        return match ints {
            Ints::Exact => Err(out_of_range()),
            // Python's float(int) rounds as serde_json does (and refuses past f64's range).
            Ints::AsParsed => int
                .extract::<f64>()
                .ok()
                .and_then(serde_json::Number::from_f64)
                .map(Value::Number)
                .ok_or_else(out_of_range),
        };
    }
    if let Ok(float) = value.cast::<PyFloat>() {
        let x = float.value();
        return serde_json::Number::from_f64(x).map(Value::Number).ok_or_else(|| format!("{x} is not a JSON number"));
    }
    if let Ok(dict) = value.cast::<PyDict>() {
        let mut map = serde_json::Map::with_capacity(dict.len());
        for (key, item) in dict.iter() {
            let key = key.cast::<PyString>().map_err(|_| format!("object key {key} is not a string"))?;
            let key = key.to_str().map_err(|e| e.to_string())?.to_owned();
            map.insert(key, json_value(&item, depth + 1, ints)?);
        }
        return Ok(Value::Object(map));
    }
    if let Ok(list) = value.cast::<PyList>() {
        return list.iter().map(|item| json_value(&item, depth + 1, ints)).collect::<Result<_, _>>().map(Value::Array);
    }
    if let Ok(tuple) = value.cast::<PyTuple>() {
        return tuple.iter().map(|item| json_value(&item, depth + 1, ints)).collect::<Result<_, _>>().map(Value::Array);
    }
    Err(format!("a {} is not JSON", value.get_type().name().map(|n| n.to_string()).unwrap_or_default()))
}

/// Runs the `mcp-tasks` admin CLI (core's, the same program as the Rust binary) with `argv`
/// (the program name first) and returns its exit status; `python -m mcp_tasks` calls it. The
/// GIL is released while it runs.
#[pyfunction]
fn admin_main(py: Python<'_>, argv: Vec<String>) -> i32 {
    py.detach(|| mcp_tasks_cli::run(argv))
}

/// Core's default bounds on HTTP connections, as a dict (`headerReadTimeoutMs`,
/// `bodyReadTimeoutMs`, `idleTimeoutMs`, `maxConnections` from this process's descriptor limit,
/// `maxHeaderBytes`): what `mcp_tasks.serve` sets on uvicorn.
#[pyfunction]
fn serve_limits(py: Python<'_>) -> PyResult<Bound<'_, PyAny>> {
    pythonize::pythonize(py, &mcp_tasks::limits::ServeLimits::default().to_json()).map_err(PyErr::from)
}

/// The client capabilities a client declares unless told otherwise (core's
/// `default_capabilities`: form elicitation), as a dict.
#[pyfunction]
fn default_capabilities(py: Python<'_>) -> PyResult<Bound<'_, PyAny>> {
    pythonize::pythonize(py, &mcp_tasks::client::default_capabilities()).map_err(PyErr::from)
}

/// The whole HTTP/1.1 response to a connection the HTTP server refused before any request
/// reached core (`kind`: `header_timeout`, `body_timeout`, `headers_too_large` or `malformed`)
/// under `limits` (a dict as `serve_limits()` gives it): written as it is, then it closes.
#[pyfunction]
fn refusal_response(kind: &str, limits: &Bound<'_, PyAny>) -> PyResult<Vec<u8>> {
    use mcp_tasks::limits::{Refusal, ServeLimits};
    let refusal: Refusal = kind.parse().map_err(pyo3::exceptions::PyValueError::new_err)?;
    Ok(refusal.response(&ServeLimits::from_json(&from_py("limits", limits)?)).into_bytes())
}

/// The native module. `gil_used = false`: no Rust state here needs the GIL.
#[pymodule(gil_used = false)]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<Ready>()?;
    m.add_class::<engine::PyEngine>()?;
    m.add_class::<engine::PyTaskContext>()?;
    m.add_class::<engine::PySubscription>()?;
    m.add_class::<engine::PyServer>()?;
    m.add_class::<engine::PyListen>()?;
    m.add_class::<engine::PyRouted>()?;
    m.add_class::<engine::PySseListen>()?;
    m.add_class::<client::PyClient>()?;
    m.add_class::<web::PyWebView>()?;
    m.add_class::<client::PyTaskExecution>()?;
    m.add_function(wrap_pyfunction!(client::outcome_result, m)?)?;
    m.add_function(wrap_pyfunction!(prepare_exit, m)?)?;
    m.add_function(wrap_pyfunction!(admin_main, m)?)?;
    m.add_function(wrap_pyfunction!(serve_limits, m)?)?;
    m.add_function(wrap_pyfunction!(default_capabilities, m)?)?;
    m.add_function(wrap_pyfunction!(refusal_response, m)?)?;
    m.add("ERROR_CLASSES", error::error_classes(m.py())?)?;
    m.add("ERROR_TABLE", error::error_table(m.py())?)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add("EXTENSION_ID", mcp_tasks::EXTENSION_ID)?;
    m.add("PROTOCOL_VERSION", mcp_tasks::PROTOCOL_VERSION)?;
    m.add("METRICS_CONTENT_TYPE", mcp_tasks::metrics::CONTENT_TYPE)?;
    Ok(())
}
