//! The private native module `mcp_tasks._native`: glue between Python and the mcp-tasks engine.
//! Every function converts its arguments, calls the core, converts back and maps errors
//! (`error.rs`); file names mirror the core modules.

mod client;
mod engine;
mod error;

use pyo3::prelude::*;

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
