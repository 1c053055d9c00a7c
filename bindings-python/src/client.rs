//! Glue for `mcp_tasks::client`: the task client, its executions, and a Python coroutine as the
//! input handler. JSON crosses the boundary as strings.

use std::sync::Arc;

use async_trait::async_trait;
use mcp_tasks::client::{Client, ClientConfig, Execution, InputHandler, TaskExecution};
use mcp_tasks::protocol::client::{CancelMode, DriverConfig};
use pyo3::prelude::*;
use pyo3_async_runtimes::TaskLocals;
use serde_json::Value;

use crate::error::{client_error, parse_json};

/// Calls a Python `async def handler(task_id, key, request_json) -> str | None` for each input
/// request, on the event loop the client was created on.
struct PyInputHandler {
    callback: Py<PyAny>,
    locals: TaskLocals,
}

#[async_trait]
impl InputHandler for PyInputHandler {
    async fn handle(&self, task_id: Option<&str>, key: &str, request: &Value) -> Option<Value> {
        let future = Python::attach(|py| {
            let coroutine = self.callback.call1(py, (task_id, key, request.to_string()))?;
            pyo3_async_runtimes::into_future_with_locals(&self.locals, coroutine.into_bound(py))
        });
        let answer = match future {
            Ok(future) => future.await,
            Err(e) => Err(e),
        };
        let answer = answer.and_then(|value| Python::attach(|py| value.extract::<Option<String>>(py)));
        match answer {
            Ok(Some(text)) => serde_json::from_str(&text).ok(),
            Ok(None) => None,
            Err(e) => {
                Python::attach(|py| e.print(py));
                None
            }
        }
    }
}

/// The task client for one Streamable HTTP endpoint.
#[pyclass(name = "Client", module = "mcp_tasks._native", frozen)]
pub(crate) struct PyClient {
    inner: Client,
}

#[pymethods]
impl PyClient {
    /// `store`: `sqlite:///path`, `memory://`, or None for the default SQLite file.
    #[new]
    #[pyo3(signature = (url, headers = Vec::new(), store = None, notifications = true, default_poll_ms = 1_000, min_poll_ms = 100, input_handler = None))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        url: String,
        headers: Vec<(String, String)>,
        store: Option<String>,
        notifications: bool,
        default_poll_ms: u64,
        min_poll_ms: u64,
        input_handler: Option<Py<PyAny>>,
    ) -> PyResult<Self> {
        let mut builder = Client::http(url).config(ClientConfig {
            driver: DriverConfig { default_poll_ms, min_poll_ms },
            notifications,
            ..ClientConfig::default()
        });
        for (name, value) in &headers {
            builder = builder.header(name, value);
        }
        if let Some(url) = store.as_deref() {
            builder = builder.store_url(url).map_err(client_error)?;
        }
        if let Some(callback) = input_handler {
            // The handler's coroutines run on the loop that is current now.
            let locals = pyo3_async_runtimes::tokio::get_current_locals(py)?;
            builder = builder.input_handler(PyInputHandler { callback, locals });
        }
        Ok(Self { inner: builder.build().map_err(client_error)? })
    }

    /// Calls a tool; resolves to `("immediate", result_json, None)` or `("task", create_json, TaskExecution)`.
    fn call_tool<'py>(&self, py: Python<'py>, name: String, arguments: String) -> PyResult<Bound<'py, PyAny>> {
        let arguments = parse_json("arguments", &arguments)?;
        let client = self.inner.clone();
        crate::awaitable(py, async move {
            match client.call_tool(&name, arguments).await.map_err(client_error)? {
                Execution::Immediate(result) => Ok(("immediate".to_owned(), result.to_string(), None)),
                Execution::Task(task) => {
                    let created = serde_json::to_string(&task.latest()).expect("tasks serialize");
                    Ok(("task".to_owned(), created, Some(PyTaskExecution::new(task))))
                }
            }
        })
    }

    /// Follows a task from a `CreateTaskResult` (JSON) received elsewhere, e.g. by `mcp.Client`.
    fn follow<'py>(
        &self,
        py: Python<'py>,
        created: String,
        tool: String,
        arguments: String,
    ) -> PyResult<Bound<'py, PyAny>> {
        let created = parse_json("CreateTaskResult", &created)?;
        let arguments = parse_json("arguments", &arguments)?;
        let task = match mcp_tasks::protocol::client::classify("tools/call", created, true) {
            Ok(mcp_tasks::protocol::client::CallResult::Task(task)) => task,
            Ok(_) => return Err(pyo3::exceptions::PyValueError::new_err("not a CreateTaskResult")),
            Err(e) => return Err(client_error(e.into())),
        };
        let client = self.inner.clone();
        crate::awaitable(py, async move {
            let execution = client.follow(task, &tool, arguments).await.map_err(client_error)?;
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

    /// The latest state seen (JSON).
    fn latest(&self) -> String {
        serde_json::to_string(&self.inner.latest()).expect("tasks serialize")
    }

    /// The next state (JSON), or None once the task has an outcome.
    fn next_update<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let inner = Arc::clone(&self.inner);
        crate::awaitable(py, async move {
            let next = inner.next_update().await;
            Ok(next.map(|task| serde_json::to_string(&task).expect("tasks serialize")))
        })
    }

    /// Waits for the outcome (JSON: `{"kind": "completed", "result": ...}`, `failed`, `cancelled`,
    /// `gone`, `expired`) and marks it delivered.
    fn result<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let inner = Arc::clone(&self.inner);
        crate::awaitable(py, async move {
            let outcome = inner.result().await.map_err(client_error)?;
            Ok(serde_json::to_string(&outcome).expect("outcomes serialize"))
        })
    }

    /// Sends `tasks/cancel`; `mode` is "stop" or "observe".
    #[pyo3(signature = (mode = "stop"))]
    fn cancel(&self, mode: &str) -> PyResult<()> {
        let mode = match mode {
            "stop" => CancelMode::Stop,
            "observe" => CancelMode::Observe,
            other => {
                return Err(pyo3::exceptions::PyValueError::new_err(format!("mode {other:?}: use stop or observe")));
            }
        };
        self.inner.cancel(mode).map_err(client_error)
    }

    /// Answers input request `key` with `response` (JSON).
    fn answer(&self, key: &str, response: &str) -> PyResult<()> {
        let response = parse_json("response", response)?;
        self.inner.answer(key, response).map_err(client_error)
    }
}
