//! The private native module `mcp_tasks._native`: glue between Python and the mcp-tasks engine.
//! Every function converts its arguments, calls the core, converts back and maps errors
//! (`error.rs`); file names mirror the core modules.

mod client;
mod engine;
mod error;

use std::future::Future;
use std::pin::pin;
use std::task::{Context, Poll, Waker};

use pyo3::prelude::*;

/// Runs `fut` as a Python awaitable. The first poll happens right here (inside the tokio
/// runtime, GIL held: releasing it costs more than the few microseconds of a memory-store
/// operation or an mmap-ed SQLite read, because tokio workers finishing other futures take it
/// in between): work that finishes without waiting, like a memory-store create or a cached
/// `tasks/get`, comes back as an already-resolved asyncio future, so it costs no hop to a tokio
/// worker and back (measured ~0.2 ms per call here). Anything still pending after that poll is
/// handed, unchanged, to pyo3-async-runtimes.
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
            let done = pyo3_async_runtimes::get_running_loop(py)?.call_method0("create_future")?;
            match result {
                Ok(value) => done.call_method1("set_result", (value,))?,
                Err(error) => done.call_method1("set_exception", (error.into_value(py),))?,
            };
            Ok(done)
        }
        Poll::Pending => pyo3_async_runtimes::tokio::future_into_py(py, fut),
    }
}

/// The native module. `gil_used = false`: no Rust state here needs the GIL.
#[pymodule(gil_used = false)]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
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
