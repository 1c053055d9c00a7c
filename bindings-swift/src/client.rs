//! Glue for `mcp_tasks::client`: the task client, its executions, records mirroring the core
//! types, and foreign traits for input requests and task updates. JSON payloads (tool results,
//! input requests and responses) cross as strings; task states and outcomes as records.

use std::collections::HashMap;
use std::sync::Arc;

use async_trait::async_trait;
use futures::StreamExt;
use mcp_tasks::client::{Client, ClientConfig, Execution, TaskExecution as CoreExecution};
use mcp_tasks::protocol::client::{CancelMode as CoreCancelMode, DriverConfig, Outcome as CoreOutcome};
use mcp_tasks::protocol::{DetailedTask, RpcError, TaskStatus as CoreStatus};
use serde_json::Value;

use crate::error::{TasksError, parse_json};

/// A task's status.
#[derive(Clone, Copy, Debug, PartialEq, Eq, uniffi::Enum)]
pub enum TaskStatus {
    /// The work is running.
    Working,
    /// The work waits for answers to `input_requests_json`.
    InputRequired,
    /// Terminal: `result_json` holds the tool's result.
    Completed,
    /// Terminal: `error` holds the JSON-RPC error.
    Failed,
    /// Terminal: the task was cancelled.
    Cancelled,
}

/// A JSON-RPC error object.
#[derive(Clone, Debug, PartialEq, uniffi::Record)]
pub struct TaskError {
    /// The code.
    pub code: i64,
    /// The message.
    pub message: String,
    /// `data`, as JSON.
    pub data_json: Option<String>,
}

/// A task's state (`DetailedTask`).
#[derive(Clone, Debug, PartialEq, uniffi::Record)]
pub struct TaskState {
    /// The task id.
    pub task_id: String,
    /// The status.
    pub status: TaskStatus,
    /// The server's human-readable progress, if any.
    pub status_message: Option<String>,
    /// RFC 3339 creation time.
    pub created_at: String,
    /// RFC 3339 time of the last change.
    pub last_updated_at: String,
    /// Lifetime from `created_at`; `None` is unlimited.
    pub ttl_ms: Option<u64>,
    /// The poll pace the server asks for.
    pub poll_interval_ms: Option<u64>,
    /// The `CallToolResult` (JSON) when completed.
    pub result_json: Option<String>,
    /// The error when failed.
    pub error: Option<TaskError>,
    /// The open `inputRequests` (JSON object, key -> request) when input is required.
    pub input_requests_json: Option<String>,
}

fn rpc_error(error: &RpcError) -> TaskError {
    TaskError { code: error.code, message: error.message.clone(), data_json: error.data.as_ref().map(Value::to_string) }
}

impl From<&DetailedTask> for TaskState {
    fn from(task: &DetailedTask) -> Self {
        let status = match task.task.status {
            CoreStatus::Working => TaskStatus::Working,
            CoreStatus::InputRequired => TaskStatus::InputRequired,
            CoreStatus::Completed => TaskStatus::Completed,
            CoreStatus::Failed => TaskStatus::Failed,
            CoreStatus::Cancelled => TaskStatus::Cancelled,
        };
        Self {
            task_id: task.task.task_id.clone(),
            status,
            status_message: task.task.status_message.clone(),
            created_at: task.task.created_at.clone(),
            last_updated_at: task.task.last_updated_at.clone(),
            ttl_ms: task.task.ttl_ms,
            poll_interval_ms: task.task.poll_interval_ms,
            result_json: task.result.as_ref().map(Value::to_string),
            error: task.error.as_ref().map(rpc_error),
            input_requests_json: task.input_requests.as_ref().map(|r| serde_json::to_string(r).expect("serializes")),
        }
    }
}

/// How a task ended, as far as the client is concerned.
#[derive(Clone, Debug, PartialEq, uniffi::Enum)]
pub enum Outcome {
    /// Completed; `result_json` is the `CallToolResult` (maybe `isError: true`).
    Completed {
        /// The result, as JSON.
        result_json: String,
    },
    /// Failed with a JSON-RPC error.
    Failed {
        /// The error.
        error: TaskError,
    },
    /// Cancelled.
    Cancelled,
    /// The server no longer knows the task (purged, or never there).
    Gone,
    /// Its TTL passed before a final state was seen.
    Expired,
}

impl From<CoreOutcome> for Outcome {
    fn from(outcome: CoreOutcome) -> Self {
        match outcome {
            CoreOutcome::Completed { result } => Self::Completed { result_json: result.to_string() },
            CoreOutcome::Failed { error } => Self::Failed { error: rpc_error(&error) },
            CoreOutcome::Cancelled => Self::Cancelled,
            CoreOutcome::Gone => Self::Gone,
            CoreOutcome::Expired => Self::Expired,
        }
    }
}

/// How `cancel` behaves.
#[derive(Clone, Copy, Debug, PartialEq, Eq, uniffi::Enum)]
pub enum CancelMode {
    /// The outcome is `Cancelled` once the server acknowledges.
    Stop,
    /// Keep following until the server's final state.
    Observe,
}

impl From<CancelMode> for CoreCancelMode {
    fn from(mode: CancelMode) -> Self {
        match mode {
            CancelMode::Stop => Self::Stop,
            CancelMode::Observe => Self::Observe,
        }
    }
}

/// Options of [`TasksClient`].
#[derive(Clone, Debug, uniffi::Record)]
pub struct ClientOptions {
    /// The Streamable HTTP endpoint.
    pub url: String,
    /// Headers sent with every request (e.g. `Authorization`).
    #[uniffi(default)]
    pub headers: HashMap<String, String>,
    /// `sqlite:///path` (task references survive restarts), `memory://`, or `None` for the
    /// default file (`$MCP_TASKS_CLIENT_DB`, else the XDG data dir). On iOS pass a path inside
    /// the app's Application Support directory.
    #[uniffi(default = None)]
    pub store: Option<String>,
    /// `clientInfo` name and version sent in every request's `_meta`.
    #[uniffi(default = None)]
    pub client_name: Option<String>,
    /// `clientInfo.version`.
    #[uniffi(default = None)]
    pub client_version: Option<String>,
    /// Listen for `notifications/tasks` when the server offers it.
    #[uniffi(default = true)]
    pub notifications: bool,
}

/// Answers the server's input requests (MRTR rounds before a task, and a task's input_required).
/// Called on a background thread; return the response JSON, or `None` to leave the request open
/// (a task's request can then be answered with [`TaskExecution::answer`]).
#[uniffi::export(with_foreign)]
pub trait InputHandler: Send + Sync {
    /// `task_id` is `None` for an MRTR round; `request_json` is `{"method", "params"}`.
    fn handle(&self, task_id: Option<String>, key: String, request_json: String) -> Option<String>;
}

struct ForeignInput(Arc<dyn InputHandler>);

#[async_trait]
impl mcp_tasks::client::InputHandler for ForeignInput {
    async fn handle(&self, task_id: Option<&str>, key: &str, request: &Value) -> Option<Value> {
        let handler = Arc::clone(&self.0);
        let (task_id, key, request) = (task_id.map(str::to_owned), key.to_owned(), request.to_string());
        // Foreign code may block (a prompt, a lock); keep it off the runtime's workers.
        let answer = tokio::task::spawn_blocking(move || handler.handle(task_id, key, request)).await.ok()??;
        serde_json::from_str(&answer).ok()
    }
}

/// Hears every newer state of a task and then its outcome.
#[uniffi::export(with_foreign)]
pub trait TaskListener: Send + Sync {
    /// A newer state (from a poll or a notification).
    fn on_update(&self, state: TaskState);
    /// The outcome; nothing follows it.
    fn on_finished(&self, outcome: Outcome);
}

/// What `call_tool` answered.
// Crosses the FFI by value once per call; boxing the large variant would buy nothing.
#[allow(clippy::large_enum_variant)]
#[derive(uniffi::Enum)]
pub enum CallResult {
    /// The tool answered at once (no task).
    Immediate {
        /// The `CallToolResult`, as JSON.
        result_json: String,
    },
    /// The server created a task, now followed.
    Task {
        /// The task as created.
        created: TaskState,
        /// The execution to await or observe.
        execution: Arc<TaskExecution>,
    },
}

/// The tasks client for one Streamable HTTP endpoint.
#[derive(uniffi::Object)]
pub struct TasksClient {
    inner: Client,
}

#[uniffi::export(async_runtime = "tokio")]
impl TasksClient {
    /// Builds the client; `input_handler` answers input requests.
    #[uniffi::constructor(default(input_handler = None))]
    pub fn new(options: ClientOptions, input_handler: Option<Arc<dyn InputHandler>>) -> Result<Arc<Self>, TasksError> {
        let mut builder = Client::http(options.url).config(ClientConfig {
            driver: DriverConfig::default(),
            notifications: options.notifications,
            ..ClientConfig::default()
        });
        for (name, value) in &options.headers {
            builder = builder.header(name, value);
        }
        if let Some(name) = &options.client_name {
            builder = builder.client_info(name, options.client_version.as_deref().unwrap_or("0"));
        }
        if let Some(url) = options.store.as_deref() {
            builder = builder.store_url(url)?;
        }
        if let Some(handler) = input_handler {
            builder = builder.input_handler(ForeignInput(handler));
        }
        Ok(Arc::new(Self { inner: builder.build()? }))
    }

    /// Calls a tool (`arguments_json`: a JSON object): an immediate result, or a task to follow.
    pub async fn call_tool(&self, name: String, arguments_json: String) -> Result<CallResult, TasksError> {
        let arguments = parse_json("arguments", &arguments_json)?;
        Ok(match self.inner.call_tool(&name, arguments).await? {
            Execution::Immediate(result) => CallResult::Immediate { result_json: result.to_string() },
            Execution::Task(task) => {
                CallResult::Task { created: TaskState::from(&task.latest()), execution: TaskExecution::new(task) }
            }
        })
    }

    /// Re-attaches to every persisted task whose outcome was not delivered yet (after the app was
    /// suspended or killed).
    pub async fn resume_all(&self) -> Result<Vec<Arc<TaskExecution>>, TasksError> {
        Ok(self.inner.resume_all().await?.into_iter().map(TaskExecution::new).collect())
    }
}

/// A task being followed. Following stops when the last reference is dropped; the task itself
/// keeps running on the server and stays persisted for `resume_all`.
#[derive(uniffi::Object)]
pub struct TaskExecution {
    inner: Arc<CoreExecution>,
}

impl TaskExecution {
    fn new(task: CoreExecution) -> Arc<Self> {
        Arc::new(Self { inner: Arc::new(task) })
    }
}

#[uniffi::export(async_runtime = "tokio")]
impl TaskExecution {
    /// The task id.
    pub fn task_id(&self) -> String {
        self.inner.task_id().to_owned()
    }

    /// The latest state seen.
    pub fn latest(&self) -> TaskState {
        TaskState::from(&self.inner.latest())
    }

    /// The next newer state, or `None` once the task has an outcome.
    pub async fn next_update(&self) -> Option<TaskState> {
        self.inner.next_update().await.as_ref().map(TaskState::from)
    }

    /// Waits for the outcome and marks it delivered (`resume_all` will not return it again).
    pub async fn result(&self) -> Result<Outcome, TasksError> {
        Ok(self.inner.result().await?.into())
    }

    /// Sends `tasks/cancel`.
    pub fn cancel(&self, mode: CancelMode) -> Result<(), TasksError> {
        Ok(self.inner.cancel(mode.into())?)
    }

    /// Answers input request `key` with `response_json`.
    pub fn answer(&self, key: String, response_json: String) -> Result<(), TasksError> {
        Ok(self.inner.answer(&key, parse_json("response", &response_json)?)?)
    }

    /// Calls `listener` for every newer state and then the outcome, until the returned handle is
    /// dropped or cancelled.
    pub fn observe(&self, listener: Arc<dyn TaskListener>) -> Arc<ObservationHandle> {
        let inner = Arc::clone(&self.inner);
        let mut updates = inner.updates();
        let task = tokio_runtime().spawn(async move {
            while let Some(state) = updates.next().await {
                listener.on_update(TaskState::from(&state));
            }
            // Read without marking it delivered: `result()` does that.
            if let Ok(outcome) = inner.finished().await {
                listener.on_finished(outcome.into());
            }
        });
        Arc::new(ObservationHandle { task: task.abort_handle() })
    }
}

/// Stops an `observe` when dropped or cancelled.
#[derive(uniffi::Object)]
pub struct ObservationHandle {
    task: tokio::task::AbortHandle,
}

#[uniffi::export]
impl ObservationHandle {
    /// Stops calling the listener.
    pub fn cancel(&self) {
        self.task.abort();
    }
}

impl Drop for ObservationHandle {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// The runtime uniffi's `async_runtime = "tokio"` futures run on, for work spawned from
/// synchronous calls.
fn tokio_runtime() -> &'static tokio::runtime::Runtime {
    static RUNTIME: std::sync::OnceLock<tokio::runtime::Runtime> = std::sync::OnceLock::new();
    RUNTIME.get_or_init(|| {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("mcp-tasks-ffi")
            .enable_all()
            .build()
            .expect("the tokio runtime starts")
    })
}
