//! Glue for `mcp_tasks::client`: the task client, its executions, and a Python coroutine as the
//! input handler. JSON crosses the boundary as Python objects (dicts, lists, ...), as in
//! `engine.rs`.

use std::sync::Arc;

use async_trait::async_trait;
use mcp_tasks::client::{
    Client, ClientError, ClientOptions, Execution, InputError, InputHandler, ListenStream, TaskExecution, Transport,
};
use mcp_tasks::protocol::client::{CancelMode, InputRequest, Outcome};
use pyo3::prelude::*;
use pyo3_async_runtimes::TaskLocals;
use serde_json::Value;

use crate::error::{client_error, protocol_error};
use crate::{Pythonized, from_py};

/// Calls a Python `async def handler(request) -> response | None` for each input request, with
/// core's `InputRequest` as a dict (`taskId`, `key`, `method`, `params`), on the event loop the
/// client was created on.
struct PyInputHandler {
    callback: Py<PyAny>,
    locals: TaskLocals,
}

#[async_trait]
impl InputHandler for PyInputHandler {
    async fn handle(&self, request: InputRequest) -> Result<Option<Value>, InputError> {
        // At interpreter exit the question stays open (answerable after a restart).
        let Some(future) = crate::attach_unless_shutting_down(|py| {
            let coroutine = self.callback.call1(py, (Pythonized(&request),))?;
            pyo3_async_runtimes::into_future_with_locals(&self.locals, coroutine.into_bound(py))
        }) else {
            return Ok(None);
        };
        let answer = match future {
            Ok(future) => future.await,
            Err(e) => Err(e),
        };
        let answer = answer.and_then(|value| {
            crate::attach_unless_shutting_down(|py| {
                let value = value.into_bound(py);
                if value.is_none() { Ok(None) } else { from_py("input response", &value).map(Some) }
            })
            .unwrap_or(Ok(None))
        });
        // What the handler raised ends the call with it as the cause (the Python side keeps the
        // exception object itself for `__cause__`).
        answer
            .map_err(|e| InputError::new(crate::attach_unless_shutting_down(|py| describe(py, &e)).unwrap_or_default()))
    }
}

/// `TypeError: ...`: an exception's class and message.
fn describe(py: Python<'_>, error: &PyErr) -> String {
    let kind = error.get_type(py).name().map(|n| n.to_string()).unwrap_or_else(|_| "Exception".to_owned());
    format!("{kind}: {}", error.value(py))
}

/// A transport written in Python (e.g. an `mcp.Client` session): `await target.request(method,
/// params)` returns the JSON-RPC response's `{"result": ...}` or `{"error": {...}}` and raises
/// only when the request could not be exchanged. It offers no listen: tasks are polled.
struct PyTransport {
    target: Py<PyAny>,
    locals: TaskLocals,
    endpoint: String,
}

#[async_trait]
impl Transport for PyTransport {
    async fn request(&self, method: &str, params: Value) -> Result<Value, ClientError> {
        let exiting = || ClientError::transport("the Python interpreter is exiting");
        let future = crate::attach_unless_shutting_down(|py| {
            let coroutine = self.target.call_method1(py, "request", (method, Pythonized(&params)))?;
            pyo3_async_runtimes::into_future_with_locals(&self.locals, coroutine.into_bound(py))
        })
        .ok_or_else(exiting)?
        .map_err(|e| ClientError::transport(format!("the Python transport failed: {e}")))?;
        let response = future.await.map_err(|e| ClientError::transport(format!("the Python transport failed: {e}")))?;
        let response = crate::attach_unless_shutting_down(|py| from_py("response", &response.into_bound(py)))
            .ok_or_else(exiting)?
            .map_err(|e| ClientError::transport(e.to_string()))?;
        mcp_tasks::client::response_result(response)
    }

    async fn listen(&self, _task_ids: &[String]) -> Result<Option<ListenStream>, ClientError> {
        Ok(None)
    }

    fn endpoint(&self) -> &str {
        &self.endpoint
    }
}

/// The task client for one server: a Streamable HTTP endpoint, a stdio command, or a transport
/// written in Python.
#[pyclass(name = "Client", module = "mcp_tasks._native", frozen)]
pub(crate) struct PyClient {
    inner: Client,
}

#[pymethods]
impl PyClient {
    /// Builds the client from core's `ClientOptions` (a dict with its camelCase names; absent
    /// keys take core's defaults); `input_handler` answers input requests.
    /// `transport` is `(object, endpoint)`: requests go through `object.request` (see
    /// `PyTransport`) and `endpoint` names the server in task references.
    #[new]
    #[pyo3(signature = (options, input_handler = None, transport = None))]
    fn new(
        py: Python<'_>,
        options: &Bound<'_, PyAny>,
        input_handler: Option<Py<PyAny>>,
        transport: Option<(Py<PyAny>, String)>,
    ) -> PyResult<Self> {
        let options: ClientOptions = serde_json::from_value(from_py("options", options)?).map_err(|e| {
            protocol_error(&mcp_tasks::protocol::ProtocolError::InvalidParams(format!("client options: {e}")))
        })?;
        let mut builder = match transport {
            Some((target, endpoint)) => {
                let locals = pyo3_async_runtimes::tokio::get_current_locals(py)?;
                options.builder_with(Arc::new(PyTransport { target, locals, endpoint }))
            }
            None => options.builder(),
        }
        .map_err(client_error)?;
        if let Some(callback) = input_handler {
            // The handler's coroutines run on the loop that is current now.
            let locals = pyo3_async_runtimes::tokio::get_current_locals(py)?;
            builder = builder.input_handler(PyInputHandler { callback, locals });
        }
        Ok(Self { inner: builder.build().map_err(client_error)? })
    }

    /// Calls a tool; resolves to `("immediate", CallToolResult dict, None)` or
    /// `("task", None, TaskExecution)` (its state is `TaskExecution.latest()`, converted only
    /// when asked for: a quick task's caller never reads it). `trace` is the caller's W3C trace
    /// context as a propagator writes it (`{"traceparent": ..., "tracestate": ..., "baggage":
    /// ...}`), sent with the call and every request about its task; an invalid one is ignored.
    #[pyo3(signature = (name, arguments, trace=None))]
    fn call_tool<'py>(
        &self,
        py: Python<'py>,
        name: String,
        arguments: &Bound<'py, PyAny>,
        trace: Option<std::collections::HashMap<String, String>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let arguments = from_py("arguments", arguments)?;
        let trace = crate::engine::trace_context(trace);
        let client = self.inner.clone();
        crate::awaitable(py, async move {
            match client.call_tool_traced(&name, arguments, trace).await.map_err(client_error)? {
                Execution::Immediate(result) => Ok(("immediate", Some(Pythonized(result)), None)),
                Execution::Task(task) => Ok(("task", None, Some(PyTaskExecution::new(task)))),
            }
        })
    }

    /// Follows a task from a `CreateTaskResult` (a dict) received elsewhere, e.g. by `mcp.Client`.
    fn follow<'py>(
        &self,
        py: Python<'py>,
        created: &Bound<'py, PyAny>,
        tool: String,
        arguments: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let created = from_py("CreateTaskResult", created)?;
        let arguments = from_py("arguments", arguments)?;
        let client = self.inner.clone();
        crate::awaitable(py, async move {
            let execution = client.follow_result(created, &tool, arguments).await.map_err(client_error)?;
            Ok(PyTaskExecution::new(execution))
        })
    }

    /// Re-attaches to every task whose outcome was not delivered yet.
    fn resume_all<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let client = self.inner.clone();
        crate::awaitable(py, async move {
            let tasks = client.resume_all().await.map_err(client_error)?;
            Ok(tasks.into_iter().map(PyTaskExecution::new).collect::<Vec<_>>())
        })
    }

    /// Stops following every task (references stay for `resume_all`) and closes the transport
    /// (a stdio server's child ends); later calls raise `TransportError`.
    fn close<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let client = self.inner.clone();
        crate::awaitable(py, async move {
            client.close().await;
            Ok(())
        })
    }
}

/// A task being followed.
#[pyclass(name = "TaskExecution", module = "mcp_tasks._native", frozen)]
pub(crate) struct PyTaskExecution {
    task_id: String,
    inner: Arc<TaskExecution>,
}

impl PyTaskExecution {
    fn new(task: TaskExecution) -> Self {
        Self { task_id: task.task_id().to_owned(), inner: Arc::new(task) }
    }
}

#[pymethods]
impl PyTaskExecution {
    /// The task id.
    #[getter]
    fn task_id(&self) -> &str {
        &self.task_id
    }

    /// The latest state seen (a `DetailedTask` dict).
    fn latest<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        Pythonized(self.inner.latest()).into_pyobject(py)
    }

    /// The next state (a dict), or None once the task has an outcome.
    fn next_update<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let inner = Arc::clone(&self.inner);
        crate::awaitable(py, async move {
            let next = inner.next_update().await;
            Ok(next.map(Pythonized))
        })
    }

    /// Waits for the outcome (a dict: `{"kind": "completed", "result": ...}`, `failed`,
    /// `cancelled`, `gone`, `expired`) and marks it delivered.
    fn result<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let inner = Arc::clone(&self.inner);
        crate::awaitable(py, async move {
            let outcome = inner.result().await.map_err(client_error)?;
            Ok(Pythonized(outcome))
        })
    }

    /// Sends `tasks/cancel`; `mode` is "stop" or "observe".
    #[pyo3(signature = (mode = "stop"))]
    fn cancel(&self, mode: &str) -> PyResult<()> {
        let mode = CancelMode::parse(mode).map_err(|e| protocol_error(&e))?;
        self.inner.cancel(mode).map_err(client_error)
    }

    /// Answers input request `key` with `response` (a dict); raises `InvalidParamsError` for a
    /// key the server never asked, one already answered, or a finished task.
    fn answer<'py>(&self, py: Python<'py>, key: String, response: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyAny>> {
        let response = from_py("response", response)?;
        let inner = Arc::clone(&self.inner);
        crate::awaitable(py, async move { inner.answer(&key, response).await.map_err(client_error) })
    }
}

/// The `CallToolResult` of an outcome dict (`TaskExecution.result()`), or raises the typed error
/// core names for a failed, cancelled, gone or expired task.
#[pyfunction]
pub(crate) fn outcome_result<'py>(
    py: Python<'py>,
    outcome: &Bound<'py, PyAny>,
    task_id: &str,
) -> PyResult<Bound<'py, PyAny>> {
    let outcome: Outcome = serde_json::from_value(from_py("outcome", outcome)?).map_err(|e| {
        crate::error::protocol_error(&mcp_tasks::protocol::ProtocolError::InvalidParams(format!("not an outcome: {e}")))
    })?;
    let result = outcome.into_result(task_id).map_err(|e| crate::error::outcome_error(*e))?;
    pythonize::pythonize(py, &result).map_err(|e| pyo3::exceptions::PyValueError::new_err(e.to_string()))
}
