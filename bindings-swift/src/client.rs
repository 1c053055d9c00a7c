//! Glue for `mcp_tasks::client`: the task client, its executions, records mirroring the core
//! types, and foreign traits for input requests and task updates. JSON payloads (tool results,
//! input requests and responses) cross as strings; task states and outcomes as records.

use std::collections::HashMap;
use std::sync::Arc;

use async_trait::async_trait;
use futures::StreamExt;
use mcp_tasks::client::{
    Client, ClientOptions as CoreOptions, Execution as CoreExecutionKind, InputError, TaskExecution as CoreExecution,
};
use mcp_tasks::protocol::client::{
    CancelMode as CoreCancelMode, InputRequest as CoreInputRequest, Outcome as CoreOutcome,
};
use mcp_tasks::protocol::{DetailedTask, ProtocolError, RpcError, TaskStatus as CoreStatus};
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

/// Options of [`TasksClient`]: core's `ClientOptions`; `None` takes core's default.
#[derive(Clone, Debug, uniffi::Record)]
pub struct ClientOptions {
    /// The Streamable HTTP endpoint (give this or `command`).
    #[uniffi(default = "")]
    pub url: String,
    /// Headers sent with every request (e.g. `Authorization`; HTTP only).
    #[uniffi(default)]
    pub headers: HashMap<String, String>,
    /// The program of a stdio server the client starts as its child (give this or `url`).
    /// Starting processes is macOS (and Linux) only: on iOS the call fails with a
    /// `TransportError`, since apps there cannot start one.
    #[uniffi(default = None)]
    pub command: Option<String>,
    /// The stdio server's arguments.
    #[uniffi(default)]
    pub args: Vec<String>,
    /// Environment variables set for the stdio server (added to the inherited ones).
    #[uniffi(default)]
    pub env: HashMap<String, String>,
    /// The stdio server's working directory.
    #[uniffi(default = None)]
    pub cwd: Option<String>,
    /// The stdio server's stderr: `inherit` (default), `capture` or `discard`.
    #[uniffi(default = None)]
    pub stderr: Option<String>,
    /// `sqlite:///path` (task references survive restarts), `memory://`, or `None` for the
    /// default file (`$MCP_TASKS_CLIENT_DB`, else the XDG data dir). On iOS pass a path inside
    /// the app's Application Support directory.
    #[uniffi(default = None)]
    pub store: Option<String>,
    /// `clientInfo.name` sent in every request's `_meta` (default `mcp-tasks`).
    #[uniffi(default = None)]
    pub client_name: Option<String>,
    /// `clientInfo.version` (default the library's version).
    #[uniffi(default = None)]
    pub client_version: Option<String>,
    /// Listen for `notifications/tasks` when the server offers it (default true).
    #[uniffi(default = None)]
    pub notifications: Option<bool>,
    /// Poll interval when the server suggests none, in ms (default 1000).
    #[uniffi(default = None)]
    pub default_poll_ms: Option<u64>,
    /// The shortest poll interval honoured, in ms (default 100).
    #[uniffi(default = None)]
    pub min_poll_ms: Option<u64>,
    /// The most MRTR rounds one `call_tool` may take (default 8).
    #[uniffi(default = None)]
    pub max_input_rounds: Option<u64>,
    /// The client capabilities every request declares besides the tasks extension, a JSON
    /// object as text (default `{"elicitation": {}}`, form elicitation). Servers ask only for
    /// input a request declares: name what the input handler answers.
    #[uniffi(default = None)]
    pub capabilities: Option<String>,
}

impl From<ClientOptions> for CoreOptions {
    fn from(o: ClientOptions) -> Self {
        let mut headers: Vec<(String, String)> = o.headers.into_iter().collect();
        headers.sort();
        Self {
            url: o.url,
            headers,
            command: o.command,
            args: o.args,
            env: o.env.into_iter().collect(),
            cwd: o.cwd,
            stderr: o.stderr,
            store: o.store,
            client_name: o.client_name,
            client_version: o.client_version,
            notifications: o.notifications,
            default_poll_ms: o.default_poll_ms,
            min_poll_ms: o.min_poll_ms,
            max_input_rounds: o.max_input_rounds.map(|n| usize::try_from(n).unwrap_or(usize::MAX)),
            // Text that is no JSON stays a string, which core refuses as not an object.
            capabilities: o
                .capabilities
                .map(|text| serde_json::from_str(&text).unwrap_or(serde_json::Value::String(text))),
        }
    }
}

/// One input request (core's `InputRequest`): the asking task (`None` for an MRTR round before
/// any task), the key to answer, and the request's method and params.
#[derive(Clone, Debug, PartialEq, uniffi::Record)]
pub struct InputRequest {
    /// The task asking, or `None` for a round before any task exists.
    pub task_id: Option<String>,
    /// The key the answer goes under.
    pub key: String,
    /// `elicitation/create`, `sampling/createMessage`, `roots/list`, ...
    pub method: String,
    /// The request's params, as JSON (`{}` when it has none).
    pub params_json: String,
}

/// Answers the server's input requests (MRTR rounds before a task, and a task's input_required).
/// Called on a background thread; return the response JSON, or `None` to leave the request open
/// (a task's request can then be answered with [`Execution::answer`]).
#[uniffi::export(with_foreign)]
pub trait InputHandler: Send + Sync {
    /// Answers `request`.
    fn handle(&self, request: InputRequest) -> Option<String>;
}

struct ForeignInput(Arc<dyn InputHandler>);

#[async_trait]
impl mcp_tasks::client::InputHandler for ForeignInput {
    async fn handle(&self, core: CoreInputRequest) -> Result<Option<Value>, InputError> {
        let handler = Arc::clone(&self.0);
        let request = InputRequest {
            task_id: core.task_id,
            key: core.key,
            method: core.method,
            params_json: core.params.to_string(),
        };
        // Foreign code may block (a prompt, a lock); keep it off the runtime's workers.
        let answer = tokio::task::spawn_blocking(move || handler.handle(request))
            .await
            .map_err(|e| InputError::new(format!("the input handler did not return: {e}")))?;
        // Core checks that the answer is a result object; here only that it is JSON.
        answer
            .map(|text| serde_json::from_str(&text))
            .transpose()
            .map_err(|e| InputError::new(format!("the input handler's answer is not JSON: {e}")))
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

/// Whether a call answered at once or became a task.
#[derive(Clone, Copy, Debug, PartialEq, Eq, uniffi::Enum)]
pub enum ExecutionKind {
    /// The tool answered at once (no task).
    Immediate,
    /// The server created a task, now followed.
    Task,
}

/// What `call_tool` became, with the same face for both kinds: `result`, `value`, updates,
/// `cancel` and `answer` (an immediate result has no updates, nothing to cancel and nothing to
/// answer).
#[derive(uniffi::Object)]
pub struct Execution {
    immediate: Option<Value>,
    task: Option<Arc<TaskExecution>>,
    created: Option<TaskState>,
}

#[uniffi::export(async_runtime = "tokio")]
impl Execution {
    /// Immediate or task.
    pub fn kind(&self) -> ExecutionKind {
        if self.task.is_some() { ExecutionKind::Task } else { ExecutionKind::Immediate }
    }

    /// The task id, or `None` for an immediate result.
    pub fn task_id(&self) -> Option<String> {
        self.task.as_ref().map(|t| t.task_id())
    }

    /// The task being followed, or `None` for an immediate result.
    pub fn task(&self) -> Option<Arc<TaskExecution>> {
        self.task.clone()
    }

    /// The task as created, or `None` for an immediate result.
    pub fn created(&self) -> Option<TaskState> {
        self.created.clone()
    }

    /// The immediate `CallToolResult` (JSON), or `None` for a task.
    pub fn immediate_result_json(&self) -> Option<String> {
        self.immediate.as_ref().map(Value::to_string)
    }

    /// The outcome (an immediate result is `Completed`).
    pub async fn result(&self) -> Result<Outcome, TasksError> {
        match (&self.task, &self.immediate) {
            (Some(task), _) => task.result().await,
            (None, Some(result)) => Ok(Outcome::Completed { result_json: result.to_string() }),
            (None, None) => unreachable!("an execution is immediate or a task"),
        }
    }

    /// The `CallToolResult` (JSON), or the typed error for a failed, cancelled, gone or expired
    /// task (`TaskCancelledError`, ...).
    pub async fn value_json(&self) -> Result<String, TasksError> {
        match &self.task {
            Some(task) => task.value_json().await,
            None => Ok(self.immediate.as_ref().map(Value::to_string).unwrap_or_default()),
        }
    }

    /// The next newer state of the task, or `None` once it has an outcome (at once for an
    /// immediate result).
    pub async fn next_update(&self) -> Option<TaskState> {
        match &self.task {
            Some(task) => task.next_update().await,
            None => None,
        }
    }

    /// Sends `tasks/cancel` (nothing to cancel for an immediate result).
    pub fn cancel(&self, mode: CancelMode) -> Result<(), TasksError> {
        match &self.task {
            Some(task) => task.cancel(mode),
            None => Ok(()),
        }
    }

    /// Answers an input request left open; an immediate result asks nothing
    /// (`InvalidParamsError`).
    pub async fn answer(&self, key: String, response_json: String) -> Result<(), TasksError> {
        match &self.task {
            Some(task) => task.answer(key, response_json).await,
            None => Err(ProtocolError::InvalidParams(format!(
                "input key {key:?} was not requested: the call answered at once"
            ))
            .into()),
        }
    }
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
        let mut builder = CoreOptions::from(options).builder()?;
        if let Some(handler) = input_handler {
            builder = builder.input_handler(ForeignInput(handler));
        }
        Ok(Arc::new(Self { inner: builder.build()? }))
    }

    /// Calls a tool (`arguments_json`: a JSON object): an immediate result, or a task to follow.
    pub async fn call_tool(&self, name: String, arguments_json: String) -> Result<Arc<Execution>, TasksError> {
        self.call_tool_traced(name, arguments_json, None).await
    }

    /// [`TasksClient::call_tool`] inside the caller's trace: `trace_json` is its W3C trace context
    /// (a propagator's carrier as JSON: `{"traceparent": ..., "tracestate": ..., "baggage":
    /// ...}`), sent in `_meta` with the call and every request about its task (SEP-414), and kept
    /// with the task reference for `resume_all`. An invalid one is ignored.
    pub async fn call_tool_traced(
        &self,
        name: String,
        arguments_json: String,
        trace_json: Option<String>,
    ) -> Result<Arc<Execution>, TasksError> {
        let arguments = parse_json("arguments", &arguments_json)?;
        let trace = trace_json.as_deref().and_then(mcp_tasks::trace::TraceContext::from_carrier_json);
        Ok(Arc::new(match self.inner.call_tool_traced(&name, arguments, trace).await? {
            CoreExecutionKind::Immediate(result) => Execution { immediate: Some(result), task: None, created: None },
            CoreExecutionKind::Task(task) => {
                let created = Some(TaskState::from(&task.latest()));
                Execution { immediate: None, task: Some(TaskExecution::new(task)), created }
            }
        }))
    }

    /// Re-attaches to every persisted task whose outcome was not delivered yet (after the app was
    /// suspended or killed).
    pub async fn resume_all(&self) -> Result<Vec<Arc<TaskExecution>>, TasksError> {
        Ok(self.inner.resume_all().await?.into_iter().map(TaskExecution::new).collect())
    }

    /// Stops following every task (their references stay for `resume_all`) and closes the
    /// transport: a stdio server's child ends. Later calls fail with `TransportError`.
    pub async fn close(&self) {
        self.inner.close().await;
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

    /// The `CallToolResult` (JSON), or the typed error for a failed, cancelled, gone or expired
    /// task (`TaskCancelledError`, ...). Marks the outcome delivered, as `result` does.
    pub async fn value_json(&self) -> Result<String, TasksError> {
        let outcome = self.inner.result().await?;
        Ok(outcome.into_result(self.inner.task_id())?.to_string())
    }

    /// Answers input request `key` with `response_json`; a key the server never asked, one
    /// already answered, or a finished task is `InvalidParamsError`.
    pub async fn answer(&self, key: String, response_json: String) -> Result<(), TasksError> {
        Ok(self.inner.answer(&key, parse_json("response", &response_json)?).await?)
    }

    /// [`TaskExecution::result`] until `interrupt` fires: `None` then, with nothing marked
    /// delivered (the outcome stays for `resume_all`).
    pub async fn result_until(&self, interrupt: Arc<Interrupt>) -> Result<Option<Outcome>, TasksError> {
        interrupt.until(self.result()).await.transpose()
    }

    /// [`TaskExecution::value_json`] until `interrupt` fires: `None` then, with nothing marked
    /// delivered.
    pub async fn value_json_until(&self, interrupt: Arc<Interrupt>) -> Result<Option<String>, TasksError> {
        interrupt.until(self.value_json()).await.transpose()
    }

    /// [`TaskExecution::next_update`] until `interrupt` fires (`None` then).
    pub async fn next_update_until(&self, interrupt: Arc<Interrupt>) -> Option<TaskState> {
        interrupt.until(self.next_update()).await.flatten()
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

/// Ends the `*_until` waits it is passed to, at once and for good: a Swift `Task`'s
/// cancellation does not reach the Rust future behind a generated async call (uniffi-rs #2771),
/// so the Swift layer fires one from `withTaskCancellationHandler`. A wait it ends is dropped
/// before it finishes, so a result it was waiting for is not marked delivered.
#[derive(uniffi::Object)]
pub struct Interrupt {
    fired: tokio::sync::watch::Sender<bool>,
}

impl Interrupt {
    /// `work`'s output, or `None` once this interrupt has fired (before or during the wait).
    async fn until<T>(&self, work: impl std::future::Future<Output = T>) -> Option<T> {
        let mut fired = self.fired.subscribe();
        tokio::select! {
            biased;
            _ = fired.wait_for(|fired| *fired) => None,
            out = work => Some(out),
        }
    }
}

#[uniffi::export]
impl Interrupt {
    /// An interrupt that has not fired.
    #[uniffi::constructor]
    pub fn new() -> Arc<Self> {
        Arc::new(Self { fired: tokio::sync::watch::channel(false).0 })
    }

    /// Ends every wait given this interrupt, now and later.
    pub fn fire(&self) {
        self.fired.send_replace(true);
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
