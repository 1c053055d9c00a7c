//! The client side, sans-IO: classifying a `tools/call` result, and [`TaskDriver`], the state
//! machine that follows one task to its outcome.
//!
//! The driver is shaped like quinn-proto's `Connection`: `handle_*` methods take inputs (a
//! `tasks/get` result, a `notifications/tasks`, an error, the application's answers or cancel,
//! a timer firing) and only change state; `poll_outgoing` yields the requests to send,
//! `poll_event` what the application should hear, and `poll_timeout` when to call
//! `handle_timeout` next. Drain `poll_outgoing`, then `poll_event`, then `poll_timeout` after
//! every input. Time is Unix milliseconds passed in and must not go backwards.

use std::collections::{BTreeSet, VecDeque};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::error::{ErrorKind, RpcError};
use super::number;
use super::time::parse_ms;
use super::types::{DetailedTask, InputRequiredResult, InputResponses, Task, TaskStatus};

/// What a `tools/call` answered.
#[derive(Clone, Debug, PartialEq)]
pub enum CallResult {
    /// A final `CallToolResult` (also for results without `resultType`, from older servers).
    Complete(Value),
    /// An MRTR round: answer `inputRequests` and retry the call.
    InputRequired(InputRequiredResult),
    /// A task was created.
    Task(Task),
}

impl CallResult {
    /// The JSON every binding hands its host: `{"kind": "complete", "result"}`,
    /// `{"kind": "input_required", "result"}` or `{"kind": "task", "task"}`.
    pub fn to_json(&self) -> Value {
        match self {
            Self::Complete(result) => serde_json::json!({"kind": "complete", "result": result}),
            Self::InputRequired(round) => serde_json::json!({"kind": "input_required", "result": round}),
            Self::Task(task) => serde_json::json!({"kind": "task", "task": task}),
        }
    }
}

/// Reads a `CreateTaskResult` (the answer that starts a [`TaskDriver`]); anything else is
/// [`InvalidResult`].
pub fn parse_created(result: Value) -> Result<Task, InvalidResult> {
    match classify("tools/call", result, true)? {
        CallResult::Task(task) => Ok(task),
        _ => Err(InvalidResult::MalformedTask("not a CreateTaskResult (resultType is not \"task\")".into())),
    }
}

/// Why a result is invalid for the request it answers.
#[non_exhaustive]
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum InvalidResult {
    /// `resultType: "task"` answered a request other than `tools/call`, or a client that did not
    /// declare the extension (SEP-2663: such a response is invalid).
    #[error("resultType \"task\" is not valid for this request")]
    UnexpectedTask,
    /// A `resultType` the client does not know.
    #[error("unrecognised resultType {0:?}")]
    UnknownResultType(String),
    /// A `CreateTaskResult` or task missing required fields or carrying wrong types.
    #[error("malformed task: {0}")]
    MalformedTask(String),
    /// A JSON-RPC response that is neither a result nor an error this client can read (no
    /// `result` and no `error`, an error whose `code` is no whole number or whose `message` is
    /// no string).
    #[error("malformed response: {0}")]
    MalformedResponse(String),
}

/// Classifies the result of `method`. `declared_tasks` says whether the request declared the
/// extension; only then may a `tools/call` answer with a task.
pub fn classify(method: &str, result: Value, declared_tasks: bool) -> Result<CallResult, InvalidResult> {
    let result_type = result.get("resultType").and_then(Value::as_str).unwrap_or("complete").to_owned();
    match result_type.as_str() {
        "complete" => Ok(CallResult::Complete(result)),
        "input_required" if method == "tools/call" => serde_json::from_value(result)
            .map(CallResult::InputRequired)
            .map_err(|e| InvalidResult::MalformedTask(e.to_string())),
        "task" if method == "tools/call" && declared_tasks => {
            check_task_fields(&result)?;
            let Value::Object(mut fields) = result else { return Err(not_an_object()) };
            Ok(CallResult::Task(take_task(&mut fields)))
        }
        "task" => Err(InvalidResult::UnexpectedTask),
        other => Err(InvalidResult::UnknownResultType(other.to_owned())),
    }
}

/// Decodes a `DetailedTask` from a `tasks/get` result or `notifications/tasks` params as they
/// arrive: envelope keys (`resultType`, `_meta`) are ignored like any other unknown key. What
/// cannot be read is [`InvalidResult::MalformedTask`] naming the part (`status is "done", not a
/// task status ...`).
pub fn parse_detailed(value: Value) -> Result<DetailedTask, InvalidResult> {
    check_task_fields(&value)?;
    check_detail_fields(&value)?;
    let Value::Object(mut fields) = value else { return Err(not_an_object()) };
    let error = match fields.remove("error") {
        Some(error @ Value::Object(_)) => {
            Some(serde_json::from_value(error).map_err(|e| InvalidResult::MalformedTask(format!("error: {e}")))?)
        }
        _ => None,
    };
    let object = |value: Option<Value>| value.filter(Value::is_object);
    let input_requests = match fields.remove("inputRequests") {
        Some(Value::Object(requests)) => Some(requests),
        _ => None,
    };
    let result = object(fields.remove("result"));
    let task = DetailedTask { task: take_task(&mut fields), input_requests, result, error };
    let missing = match task.task.status {
        TaskStatus::InputRequired if task.input_requests.is_none() => Some("inputRequests"),
        TaskStatus::Completed if task.result.is_none() => Some("result"),
        TaskStatus::Failed if task.error.is_none() => Some("error"),
        _ => None,
    };
    match missing {
        Some(field) => Err(InvalidResult::MalformedTask(format!("{} task without {field}", task.task.status.as_str()))),
        None => Ok(task),
    }
}

/// Checks the base `Task` fields one by one, so what cannot be read is named (serde's own
/// messages name the wrong type, not the field). Numbers are read by [`crate::number`]: any
/// finite non-negative number of milliseconds.
fn check_task_fields(value: &Value) -> Result<(), InvalidResult> {
    let malformed = |text: String| Err(InvalidResult::MalformedTask(text));
    let Some(task) = value.as_object() else {
        return malformed(format!("the task is {}, not an object", number::kind(value)));
    };
    // `ttlMs` is required but may be null, which serde alone cannot tell from absent.
    for field in ["taskId", "status", "createdAt", "lastUpdatedAt", "ttlMs"] {
        if !task.contains_key(field) {
            return malformed(format!("missing {field}"));
        }
    }
    for (field, optional) in
        [("taskId", false), ("status", false), ("createdAt", false), ("lastUpdatedAt", false), ("statusMessage", true)]
    {
        match task.get(field) {
            Some(Value::String(_)) => {}
            None | Some(Value::Null) if optional => {}
            Some(other) => return malformed(format!("{field} is {}, not a string", number::kind(other))),
            None => return malformed(format!("missing {field}")),
        }
    }
    let status = task["status"].as_str().unwrap_or_default();
    if TaskStatus::parse(status).is_none() {
        return malformed(format!(
            "status is {}, not a task status (working, input_required, completed, failed or cancelled)",
            number::short(&task["status"])
        ));
    }
    for field in ["ttlMs", "pollIntervalMs"] {
        match task.get(field) {
            None | Some(Value::Null) => {}
            Some(ms) => {
                if let Err(why) = number::millis_of(ms) {
                    return malformed(format!("{field}: {why}"));
                }
            }
        }
    }
    Ok(())
}

/// What [`check_task_fields`] says of a task that is no object (it refuses one first).
fn not_an_object() -> InvalidResult {
    InvalidResult::MalformedTask("the task is not an object".to_owned())
}

/// The base `Task` fields, as [`check_task_fields`] found them, taken out of `fields` (serde's
/// derive of the flattened `Task` buffered every field first: most of a quick task's parse).
fn take_task(fields: &mut serde_json::Map<String, Value>) -> Task {
    let mut text = |field: &str| match fields.remove(field) {
        Some(Value::String(text)) => Some(text),
        _ => None,
    };
    let (task_id, status) = (text("taskId").unwrap_or_default(), text("status"));
    let (status_message, created_at, last_updated_at) =
        (text("statusMessage"), text("createdAt"), text("lastUpdatedAt"));
    let millis = |field: &str| fields.get(field).and_then(|ms| number::millis_of(ms).ok());
    Task {
        task_id,
        status: status.as_deref().and_then(TaskStatus::parse).unwrap_or(TaskStatus::Working),
        status_message,
        created_at: created_at.unwrap_or_default(),
        last_updated_at: last_updated_at.unwrap_or_default(),
        ttl_ms: millis("ttlMs"),
        poll_interval_ms: millis("pollIntervalMs"),
    }
}

/// Checks what a `DetailedTask` carries besides the base fields: `inputRequests`, `result` and
/// `error` are objects, and the error has a whole `code` and a string `message`.
fn check_detail_fields(value: &Value) -> Result<(), InvalidResult> {
    let malformed = |text: String| Err(InvalidResult::MalformedTask(text));
    for field in ["inputRequests", "result", "error"] {
        match value.get(field) {
            None | Some(Value::Null | Value::Object(_)) => {}
            Some(other) => return malformed(format!("{field} is {}, not an object", number::kind(other))),
        }
    }
    if let Some(error) = value.get("error").filter(|e| e.is_object()) {
        match error.get("code") {
            Some(Value::Number(code)) => {
                if let Err(why) = number::whole(code) {
                    return malformed(format!("error.code: {why}"));
                }
            }
            Some(other) => return malformed(format!("error.code is {}, not a number", number::kind(other))),
            None => return malformed("error without code".to_owned()),
        }
        if !error.get("message").is_some_and(Value::is_string) {
            return malformed("error.message is missing or not a string".to_owned());
        }
    }
    Ok(())
}

/// `data.reason` of the error a client gives a task it stopped following because an answer about
/// it could not be read ([`TaskDriver::handle_get_result`]).
pub const UNREADABLE_ANSWER: &str = "unreadable_answer";

/// `data.reason` of the error a client gives a task it stopped following because the
/// application's input handler failed ([`input_handler_failed`]).
pub const INPUT_HANDLER_FAILED: &str = "input_handler_failed";

/// The error of a task this client stopped following because the server's answer to `method`
/// about it could not be read: -32603 naming the task and the part, with `data.reason`
/// [`UNREADABLE_ANSWER`]. The driver has queued a best-effort `tasks/cancel`.
pub fn unreadable_answer(task_id: &str, method: &str, detail: &str) -> RpcError {
    RpcError::internal(format!(
        "task {task_id}: the server's {method} answer could not be read ({detail}); \
         a tasks/cancel was sent (best effort) so the work does not run on unwatched"
    ))
    .with_data(serde_json::json!({"reason": UNREADABLE_ANSWER, "taskId": task_id, "method": method, "detail": detail}))
}

/// The error of a task this client stopped following because the application's input handler
/// failed on input request `key`: -32603 naming the task, the key and the cause, with
/// `data.reason` [`INPUT_HANDLER_FAILED`]. The driver has queued a best-effort `tasks/cancel`.
pub fn input_handler_failed(task_id: &str, key: &str, cause: &str) -> RpcError {
    RpcError::internal(format!(
        "task {task_id}: the input handler failed on input request {key:?}: {cause}; \
         a tasks/cancel was sent (best effort) so the work does not wait for an answer"
    ))
    .with_data(serde_json::json!({"reason": INPUT_HANDLER_FAILED, "taskId": task_id, "key": key, "cause": cause}))
}

/// The longest a driver goes without polling while a listen stream reports on its task (or the
/// server's interval, when that is longer): a check that the stream still delivers.
pub const LISTENING_POLL_MS: u64 = 30_000;

/// How the driver paces itself.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DriverConfig {
    /// Poll interval when the server suggests none.
    pub default_poll_ms: u64,
    /// The shortest interval the driver polls at, whatever the server suggests.
    pub min_poll_ms: u64,
}

impl Default for DriverConfig {
    fn default() -> Self {
        Self { default_poll_ms: 1_000, min_poll_ms: 100 }
    }
}

/// What to do after sending `tasks/cancel`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CancelMode {
    /// Stop once the cancel is acknowledged; the outcome is [`Outcome::Cancelled`].
    Stop,
    /// Keep observing until the task is terminal (it may still complete or fail).
    Observe,
}

impl CancelMode {
    /// Reads a mode by its wire name (`stop` or `observe`); anything else is -32602.
    pub fn parse(mode: &str) -> Result<Self, crate::ProtocolError> {
        serde_json::from_value(Value::String(mode.to_owned()))
            .map_err(|_| crate::ProtocolError::InvalidParams(format!("cancel mode {mode:?}: use stop or observe")))
    }
}

/// How a task ended, as far as the client is concerned.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Outcome {
    /// The task completed; `result` is the tool's `CallToolResult` (maybe `isError: true`).
    Completed {
        /// The result.
        result: Value,
    },
    /// The task failed with a JSON-RPC error.
    Failed {
        /// The error.
        error: RpcError,
    },
    /// The task was cancelled (seen `cancelled`, or the cancel was acknowledged in stop mode).
    Cancelled,
    /// The server no longer knows the task (-32602 on `tasks/get`): purged or never there.
    Gone,
    /// `createdAt + ttlMs` passed before a terminal state was seen.
    Expired,
}

/// One input request as every binding hands it to the application's input handler: the task
/// that asks (`None` for an MRTR round before any task), the key to answer, and the request's
/// `method` and `params` (an elicitation, a sampling request, a roots request).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct InputRequest {
    /// The task that asks, or `None` for an MRTR round of `tools/call`.
    pub task_id: Option<String>,
    /// The key to answer (with `TaskExecution::answer` or the handler's return value).
    pub key: String,
    /// `elicitation/create`, `sampling/createMessage`, `roots/list`, ...
    pub method: String,
    /// The request's params (`{}` when it has none).
    pub params: Value,
}

impl InputRequest {
    /// Splits a server's `{method, params}` input request for the handler.
    pub fn new(task_id: Option<&str>, key: &str, request: &Value) -> Self {
        Self {
            task_id: task_id.map(str::to_owned),
            key: key.to_owned(),
            method: request.get("method").and_then(Value::as_str).unwrap_or_default().to_owned(),
            params: request.get("params").cloned().unwrap_or_else(|| Value::Object(serde_json::Map::new())),
        }
    }
}

/// A task's outcome as the error a caller that wanted its result gets (see
/// [`Outcome::into_result`]): bindings raise the class named here.
#[derive(Clone, Debug, PartialEq)]
pub struct OutcomeError {
    /// The error class (a name from [`ERROR_CLASSES`](crate::ERROR_CLASSES)).
    pub class: &'static str,
    /// The JSON-RPC code, when the outcome carries one (a failed task's, -32602 for gone).
    pub code: Option<i64>,
    /// What happened.
    pub message: String,
    /// The failed task's error `data`, if any.
    pub data: Option<Value>,
}

impl std::fmt::Display for OutcomeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for OutcomeError {}

impl Outcome {
    /// The `CallToolResult` of a completed task (a tool error too: `isError: true` is a
    /// result), or the typed error for a failed, cancelled, gone or expired one.
    pub fn into_result(self, task_id: &str) -> Result<Value, Box<OutcomeError>> {
        let (class, code, message, data) = match self {
            Self::Completed { result } => return Ok(result),
            Self::Failed { error } => {
                (crate::class_for_code(error.code, None), Some(error.code), error.message, error.data)
            }
            Self::Cancelled => ("TaskCancelledError", None, format!("task {task_id} was cancelled"), None),
            Self::Gone => (
                "TaskGoneError",
                Some(ErrorKind::TaskNotFound.code()),
                format!("task {task_id} is gone: the server no longer knows it"),
                None,
            ),
            Self::Expired => {
                ("TaskExpiredError", None, format!("task {task_id} expired: its ttlMs passed before it finished"), None)
            }
        };
        Err(Box::new(OutcomeError { class, code, message, data }))
    }
}

/// A request the driver wants sent.
#[derive(Clone, Debug, PartialEq)]
pub enum Outgoing {
    /// `tasks/get`.
    Get {
        /// The task.
        task_id: String,
    },
    /// `tasks/update` with answers.
    Update {
        /// The task.
        task_id: String,
        /// The answers.
        input_responses: InputResponses,
    },
    /// `tasks/cancel`.
    Cancel {
        /// The task.
        task_id: String,
    },
}

impl Outgoing {
    /// The JSON-RPC method.
    pub fn method(&self) -> &'static str {
        match self {
            Self::Get { .. } => "tasks/get",
            Self::Update { .. } => "tasks/update",
            Self::Cancel { .. } => "tasks/cancel",
        }
    }

    /// The request as bindings hand it to their host: `{"method", "params"}` (without `_meta`;
    /// the transport adds the envelope).
    pub fn to_json(&self) -> Value {
        serde_json::json!({ "method": self.method(), "params": self.params() })
    }

    /// [`Outgoing::to_json`] with `trace` in the params' `_meta` ([`Outgoing::params_traced`]):
    /// what a driver with a trace context hands a host's own transport.
    pub fn to_json_traced(&self, trace: Option<&crate::trace::TraceContext>) -> Value {
        serde_json::json!({ "method": self.method(), "params": self.params_traced(trace) })
    }

    /// [`Outgoing::params`] with `trace` in `_meta` (the transport adds the envelope beside it).
    pub fn params_traced(&self, trace: Option<&crate::trace::TraceContext>) -> Value {
        let mut params = self.params();
        if let (Some(trace), Value::Object(map)) = (trace, &mut params) {
            map.insert("_meta".into(), Value::Object(trace.to_meta()));
        }
        params
    }

    /// The params (without `_meta`; the transport adds the envelope).
    pub fn params(&self) -> Value {
        match self {
            Self::Get { task_id } | Self::Cancel { task_id } => serde_json::json!({ "taskId": task_id }),
            Self::Update { task_id, input_responses } => {
                serde_json::json!({ "taskId": task_id, "inputResponses": input_responses })
            }
        }
    }
}

/// What the application hears.
#[derive(Clone, Debug, PartialEq)]
pub enum DriverEvent {
    /// The task changed (a newer state from a poll or a notification).
    Status(Box<DetailedTask>),
    /// A new input request; each key is surfaced exactly once over the task's life.
    InputRequested {
        /// The key to answer with [`TaskDriver::answer`].
        key: String,
        /// The request (`{method, params}`).
        request: Value,
    },
    /// The outcome; nothing follows it.
    Finished(Outcome),
}

impl DriverEvent {
    /// The event as bindings hand it to their application: `{"kind": "status", "task"}`,
    /// `{"kind": "input_requested", "key", "request"}` or `{"kind": "finished", "outcome"}`.
    pub fn to_json(&self) -> Value {
        match self {
            Self::Status(task) => serde_json::json!({"kind": "status", "task": task}),
            Self::InputRequested { key, request } => {
                serde_json::json!({"kind": "input_requested", "key": key, "request": request})
            }
            Self::Finished(outcome) => serde_json::json!({"kind": "finished", "outcome": outcome}),
        }
    }
}

/// Why the application's call to the driver was refused.
#[non_exhaustive]
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum DriverError {
    /// The key was never requested by the server.
    #[error("input key {0:?} was not requested")]
    UnknownKey(String),
    /// The key was answered already.
    #[error("input key {0:?} was already answered")]
    AlreadyAnswered(String),
    /// The task has an outcome; nothing more can be sent.
    #[error("the task has finished")]
    Finished,
    /// The answer is no result object (see [`check_answer`]).
    #[error("the answer to input key {0:?} is {1}")]
    InvalidAnswer(String, String),
}

/// Checks that an answer to an input request is a result object (an `ElicitResult`, a
/// `CreateMessageResult`, a `ListRootsResult`): a server refuses any other shape, so sending it
/// would only fail. `Err` says what the answer is instead.
pub fn check_answer(answer: &Value) -> Result<(), String> {
    if answer.is_object() {
        Ok(())
    } else {
        Err(format!(
            "{} ({}), not a result object such as an ElicitResult",
            number::kind(answer),
            number::short(answer)
        ))
    }
}

/// What survives a client restart: enough to re-attach to the task.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct DriverState {
    /// The task.
    pub task_id: String,
    /// The latest state seen.
    pub last: DetailedTask,
    /// Input keys already surfaced to the application.
    pub seen_keys: BTreeSet<String>,
    /// Input keys already answered.
    pub answered_keys: BTreeSet<String>,
    /// A cancel that was requested, if any.
    pub cancel: Option<CancelMode>,
    /// The trace context of the call that created the task (SEP-414): sent in `_meta` with
    /// every poll, answer and cancel of it, so the server links them to the caller's trace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace: Option<crate::trace::TraceContext>,
}

/// Follows one task to its outcome. See the module docs for the drain order.
#[derive(Debug)]
pub struct TaskDriver {
    config: DriverConfig,
    /// True while a live `subscriptions/listen` stream reports on the task.
    listening: bool,
    /// True once that stream has reported on the task: only then does it stand in for polls.
    heard: bool,
    state: DriverState,
    updated_ms: u64,
    expires_ms: Option<u64>,
    next_poll_ms: u64,
    get_in_flight: bool,
    pending_answers: InputResponses,
    /// Answers sent in the `tasks/update` not yet acknowledged; resent if it fails.
    unacked_answers: InputResponses,
    /// Boxed: a driver lives as long as its task is followed, without an outcome until its end.
    outcome: Option<Box<Outcome>>,
    events: VecDeque<DriverEvent>,
    outgoing: VecDeque<Outgoing>,
    /// Counts the changes of `state` ([`TaskDriver::revision`]).
    revision: u64,
}

/// Pops the front of `queue`, and lets its room go once it is empty: a followed task keeps its
/// driver for its whole life, and the few events of one change need no room kept after it.
fn pop_releasing<T>(queue: &mut VecDeque<T>) -> Option<T> {
    let item = queue.pop_front();
    if queue.is_empty() && queue.capacity() > 0 {
        *queue = VecDeque::new();
    }
    item
}

impl TaskDriver {
    /// Starts following a task just created at `now_ms`; the first poll is due one interval later.
    pub fn new(created: Task, now_ms: u64, config: DriverConfig) -> Self {
        let last = DetailedTask { task: created, input_requests: None, result: None, error: None };
        let state = DriverState {
            task_id: last.task.task_id.clone(),
            last,
            seen_keys: BTreeSet::new(),
            answered_keys: BTreeSet::new(),
            cancel: None,
            trace: None,
        };
        let mut driver = Self::resume(state, now_ms, config);
        driver.next_poll_ms = now_ms.saturating_add(driver.interval());
        driver
    }

    /// Re-attaches to a task from a saved [`DriverState`]; the first poll is due at once, and a
    /// cancel that was requested but maybe not sent is sent again.
    pub fn resume(state: DriverState, now_ms: u64, config: DriverConfig) -> Self {
        let updated_ms = parse_ms(&state.last.task.last_updated_at).unwrap_or(0);
        let expires_ms = parse_ms(&state.last.task.created_at)
            .and_then(|created| state.last.task.ttl_ms.map(|ttl| created.saturating_add(ttl)));
        let mut driver = Self {
            config,
            listening: false,
            heard: false,
            updated_ms,
            expires_ms,
            next_poll_ms: now_ms,
            get_in_flight: false,
            pending_answers: InputResponses::new(),
            unacked_answers: InputResponses::new(),
            outcome: None,
            events: VecDeque::new(),
            outgoing: VecDeque::new(),
            revision: 0,
            state,
        };
        if driver.state.last.task.status.is_terminal() {
            driver.finish_from_last();
        } else if driver.state.cancel.is_some() {
            driver.outgoing.push_back(Outgoing::Cancel { task_id: driver.state.task_id.clone() });
        }
        driver
    }

    /// The task id.
    pub fn task_id(&self) -> &str {
        &self.state.task_id
    }

    /// Sends `trace` with every later request about the task (kept in [`TaskDriver::state`]).
    pub fn set_trace(&mut self, trace: Option<crate::trace::TraceContext>) {
        if self.state.trace != trace {
            self.state.trace = trace;
            self.revision += 1;
        }
    }

    /// The trace context sent with the task's requests ([`Outgoing::params_traced`]).
    pub fn trace(&self) -> Option<&crate::trace::TraceContext> {
        self.state.trace.as_ref()
    }

    /// The latest state seen.
    pub fn latest(&self) -> &DetailedTask {
        &self.state.last
    }

    /// What to persist to resume after a restart.
    pub fn state(&self) -> &DriverState {
        &self.state
    }

    /// The outcome, once known.
    pub fn outcome(&self) -> Option<&Outcome> {
        self.outcome.as_deref()
    }

    fn interval(&self) -> u64 {
        let interval =
            self.state.last.task.poll_interval_ms.unwrap_or(self.config.default_poll_ms).max(self.config.min_poll_ms);
        // Notifications carry every change while a stream reports on the task; a poll is then
        // only a check that the stream still works. Not before the stream has said something of
        // it: a server's notifications are best effort, and one that sends no current state on
        // subscribe (tower-mcp 0.25) says nothing of a task that ended before the subscription.
        if self.listening && self.heard { interval.max(LISTENING_POLL_MS) } else { interval }
    }

    /// A `subscriptions/listen` stream now reports on the task (`true`: it accepted the task), or
    /// no longer does (`false`: it ended or failed). The driver keeps polling at the server's
    /// interval until the stream has sent a notification about the task
    /// ([`TaskDriver::handle_notification`]); from then on, while it reports, at most every
    /// [`LISTENING_POLL_MS`]. Once it stops, the server's interval is back from `now_ms`.
    pub fn handle_listening(&mut self, now_ms: u64, listening: bool) {
        if self.listening == listening {
            return;
        }
        self.listening = listening;
        self.heard = false;
        if !self.get_in_flight && self.outcome.is_none() {
            // Nothing heard on the stream yet: the server's interval either way.
            let due = now_ms.saturating_add(self.interval());
            self.next_poll_ms = self.next_poll_ms.min(due);
        }
    }

    /// A `tasks/get` result arrived (a `GetTaskResult`, already decoded).
    pub fn handle_get(&mut self, now_ms: u64, task: DetailedTask) {
        self.get_in_flight = false;
        self.apply(task);
        self.next_poll_ms = now_ms.saturating_add(self.interval());
    }

    /// A `tasks/get` result arrived as the server sent it: read with [`parse_detailed`]. A result
    /// that cannot be read, or that is about another task, is no passing fault (asking again
    /// would read the same): the driver stops following with [`TaskDriver::abandon`] and
    /// [`unreadable_answer`], naming the part.
    pub fn handle_get_result(&mut self, now_ms: u64, result: Value) {
        self.get_in_flight = false;
        let read = parse_detailed(result).and_then(|task| {
            if task.task.task_id == self.state.task_id {
                Ok(task)
            } else {
                Err(InvalidResult::MalformedTask(format!("the answer is about task {:?}", task.task.task_id)))
            }
        });
        match read {
            Ok(task) => self.handle_get(now_ms, task),
            Err(e) => self.handle_unreadable("tasks/get", &e),
        }
    }

    /// A `tasks/get` was answered with something that is neither a result nor a JSON-RPC error
    /// this client can read (a response without either, an error whose code is no number): the
    /// driver stops following, as for an unreadable result.
    pub fn handle_unreadable(&mut self, method: &str, why: &InvalidResult) {
        self.get_in_flight = false;
        let detail = why.to_string();
        let error = unreadable_answer(&self.state.task_id, method, &detail);
        self.abandon(error);
    }

    /// `notifications/tasks` params as they arrived: read with [`parse_detailed`]. One that
    /// cannot be read is not acted on, but asks for a poll now, whose answer decides.
    pub fn handle_notification_params(&mut self, now_ms: u64, params: Value) {
        let about_this = params.get("taskId").and_then(Value::as_str) == Some(self.state.task_id.as_str());
        match parse_detailed(params) {
            Ok(task) => self.handle_notification(now_ms, task),
            Err(_) if about_this && !self.get_in_flight => self.next_poll_ms = self.next_poll_ms.min(now_ms),
            Err(_) => {}
        }
    }

    /// Stops following the task because this client cannot go on (an unreadable answer, a
    /// failing input handler): the outcome is [`Outcome::Failed`] with `error`, and a
    /// `tasks/cancel` is queued after it, so the work does not run on unwatched on the server.
    /// Send it as usual (it may fail: it is best effort); nothing else follows.
    pub fn abandon(&mut self, error: RpcError) {
        if self.outcome.is_some() {
            return;
        }
        self.finish(Outcome::Failed { error });
        self.outgoing.push_back(Outgoing::Cancel { task_id: self.state.task_id.clone() });
    }

    /// A `notifications/tasks` for this task arrived; it makes the pending poll unnecessary.
    pub fn handle_notification(&mut self, now_ms: u64, task: DetailedTask) {
        if task.task.task_id != self.state.task_id {
            return;
        }
        // The stream reports on the task: from now on it stands in for polls.
        self.heard = self.listening;
        self.apply(task);
        if !self.get_in_flight {
            self.next_poll_ms = now_ms.saturating_add(self.interval());
        }
    }

    /// A `tasks/get` failed. -32602 means the server no longer knows the task; anything else is
    /// retried at the next interval.
    pub fn handle_get_error(&mut self, now_ms: u64, error: &RpcError) {
        self.get_in_flight = false;
        if error.code == ErrorKind::TaskNotFound.code() {
            self.finish(Outcome::Gone);
        } else {
            self.next_poll_ms = now_ms.saturating_add(self.interval());
        }
    }

    /// A `tasks/update` or `tasks/cancel` was answered (`Ok` for the ack).
    pub fn handle_ack(&mut self, now_ms: u64, method: &str, result: Result<(), &RpcError>) {
        if method == "tasks/update" {
            let sent = std::mem::take(&mut self.unacked_answers);
            if result.is_err_and(|e| e.code != ErrorKind::TaskNotFound.code()) {
                // Not delivered: send these answers again with the next update.
                for (key, answer) in sent {
                    self.pending_answers.entry(key).or_insert(answer);
                }
            }
        }
        match result {
            Err(error) if error.code == ErrorKind::TaskNotFound.code() => self.finish(Outcome::Gone),
            _ if method == "tasks/cancel" && self.state.cancel == Some(CancelMode::Stop) => {
                self.finish(Outcome::Cancelled);
            }
            // The ack is eventually consistent: look again soon.
            _ => self.next_poll_ms = self.next_poll_ms.min(now_ms.saturating_add(self.config.min_poll_ms)),
        }
    }

    /// Answers one input request; answers given before the next `poll_outgoing` go out in one
    /// `tasks/update`, later ones in another.
    pub fn answer(&mut self, key: &str, response: Value) -> Result<(), DriverError> {
        if self.outcome.is_some() {
            return Err(DriverError::Finished);
        }
        if !self.state.seen_keys.contains(key) {
            return Err(DriverError::UnknownKey(key.to_owned()));
        }
        check_answer(&response).map_err(|why| DriverError::InvalidAnswer(key.to_owned(), why))?;
        if !self.state.answered_keys.insert(key.to_owned()) {
            return Err(DriverError::AlreadyAnswered(key.to_owned()));
        }
        self.revision += 1;
        self.pending_answers.insert(key.to_owned(), response);
        Ok(())
    }

    /// Asks the server to cancel (with `tasks/cancel`, never `notifications/cancelled`).
    pub fn cancel(&mut self, mode: CancelMode) -> Result<(), DriverError> {
        if self.outcome.is_some() {
            return Err(DriverError::Finished);
        }
        if self.state.cancel.is_none() {
            self.state.cancel = Some(mode);
            self.revision += 1;
            self.outgoing.push_back(Outgoing::Cancel { task_id: self.state.task_id.clone() });
        }
        Ok(())
    }

    /// Makes the next poll due at `now_ms`, unless one is in flight: for a client that reads a
    /// task once right after its creation, since a quick task may be finished already (and a
    /// listen would then cost a stream for nothing). Later polls keep the server's interval.
    pub fn poll_now(&mut self, now_ms: u64) {
        if self.outcome.is_none() && !self.get_in_flight {
            self.next_poll_ms = self.next_poll_ms.min(now_ms);
        }
    }

    /// The timer fired: queue a poll if one is due, or give up on an expired task.
    pub fn handle_timeout(&mut self, now_ms: u64) {
        if self.outcome.is_some() {
            return;
        }
        if self.expires_ms.is_some_and(|at| now_ms >= at) {
            self.finish(Outcome::Expired);
            return;
        }
        if now_ms >= self.next_poll_ms && !self.get_in_flight {
            self.get_in_flight = true;
            self.outgoing.push_back(Outgoing::Get { task_id: self.state.task_id.clone() });
        }
    }

    /// When to call [`TaskDriver::handle_timeout`] next; `None` once finished.
    #[must_use]
    pub fn poll_timeout(&self) -> Option<u64> {
        if self.outcome.is_some() {
            return None;
        }
        let poll = if self.get_in_flight { u64::MAX } else { self.next_poll_ms };
        Some(self.expires_ms.map_or(poll, |at| poll.min(at)))
    }

    /// The next request to send. Call again after [`TaskDriver::answer`] and every `handle_*`.
    #[must_use]
    pub fn poll_outgoing(&mut self) -> Option<Outgoing> {
        if !self.pending_answers.is_empty() && self.outcome.is_none() {
            let input_responses = std::mem::take(&mut self.pending_answers);
            self.unacked_answers.extend(input_responses.clone());
            self.outgoing.push_front(Outgoing::Update { task_id: self.state.task_id.clone(), input_responses });
        }
        pop_releasing(&mut self.outgoing)
    }

    /// The next event for the application.
    #[must_use]
    pub fn poll_event(&mut self) -> Option<DriverEvent> {
        pop_releasing(&mut self.events)
    }

    /// How many times [`TaskDriver::state`] changed: what to persist has changed since a save
    /// when this moved.
    #[must_use]
    pub fn revision(&self) -> u64 {
        self.revision
    }

    fn apply(&mut self, task: DetailedTask) {
        if self.outcome.is_some() || self.state.last.task.status.is_terminal() {
            return;
        }
        let updated = parse_ms(&task.task.last_updated_at).unwrap_or(0);
        // Apply whichever of a poll and a notification is newer; equal timestamps apply only if
        // something visible differs (the server's clock has millisecond resolution).
        if updated < self.updated_ms || (updated == self.updated_ms && task == self.state.last) {
            return;
        }
        self.updated_ms = updated;
        if let Some(ttl) = task.task.ttl_ms {
            self.expires_ms = parse_ms(&task.task.created_at).map(|c| c.saturating_add(ttl));
        } else {
            self.expires_ms = None;
        }
        self.revision += 1;
        self.events.push_back(DriverEvent::Status(Box::new(task.clone())));
        self.state.last = task;
        if let Some(requests) = &self.state.last.input_requests {
            for (key, request) in requests {
                if !self.state.answered_keys.contains(key) && self.state.seen_keys.insert(key.clone()) {
                    self.events.push_back(DriverEvent::InputRequested { key: key.clone(), request: request.clone() });
                }
            }
        }
        if self.state.last.task.status.is_terminal() {
            self.finish_from_last();
        }
    }

    /// Finishes with the outcome the last state (a terminal one) carries.
    fn finish_from_last(&mut self) {
        let task = &self.state.last;
        let outcome = match task.task.status {
            TaskStatus::Completed => Outcome::Completed { result: task.result.clone().unwrap_or(Value::Null) },
            TaskStatus::Failed => Outcome::Failed {
                error: task.error.clone().unwrap_or_else(|| RpcError::internal("failed without an error")),
            },
            _ => Outcome::Cancelled,
        };
        self.finish(outcome);
    }

    fn finish(&mut self, outcome: Outcome) {
        if self.outcome.is_none() {
            // Nothing more is worth sending once the outcome is known.
            self.outgoing.clear();
            self.pending_answers.clear();
            self.events.push_back(DriverEvent::Finished(outcome.clone()));
            self.outcome = Some(Box::new(outcome));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const T0: u64 = 1_788_264_000_000;

    fn task(status: &str, updated_ms: u64, extra: Value) -> DetailedTask {
        let mut value = json!({
            "taskId": "t", "status": status, "createdAt": "2026-09-01T12:00:00.000Z",
            "lastUpdatedAt": super::super::time::format_ms(updated_ms), "ttlMs": 60_000, "pollIntervalMs": 500,
        });
        for (k, v) in extra.as_object().unwrap() {
            value[k] = v.clone();
        }
        parse_detailed(value).unwrap()
    }

    fn driver() -> TaskDriver {
        TaskDriver::new(task("working", T0, json!({})).task, T0, DriverConfig::default())
    }

    fn events(d: &mut TaskDriver) -> Vec<DriverEvent> {
        std::iter::from_fn(|| d.poll_event()).collect()
    }

    #[test]
    fn classification() {
        let created = json!({"resultType": "task", "taskId": "t", "status": "working",
            "createdAt": "2026-09-01T12:00:00Z", "lastUpdatedAt": "2026-09-01T12:00:00Z", "ttlMs": null});
        assert!(matches!(classify("tools/call", created.clone(), true), Ok(CallResult::Task(_))));
        assert_eq!(classify("tools/call", created.clone(), false), Err(InvalidResult::UnexpectedTask));
        assert_eq!(classify("prompts/get", created, true), Err(InvalidResult::UnexpectedTask));
        let no_ttl = json!({"resultType": "task", "taskId": "t", "status": "working",
            "createdAt": "x", "lastUpdatedAt": "x"});
        assert!(matches!(classify("tools/call", no_ttl, true), Err(InvalidResult::MalformedTask(_))));
        assert!(matches!(classify("tools/call", json!({"content": []}), true), Ok(CallResult::Complete(_))));
        assert!(matches!(
            classify("tools/call", json!({"resultType": "zzz"}), true),
            Err(InvalidResult::UnknownResultType(_))
        ));
        assert!(
            parse_detailed(json!({"taskId": "t", "status": "completed", "createdAt": "x",
            "lastUpdatedAt": "x", "ttlMs": null}))
            .is_err(),
            "completed needs result"
        );
    }

    #[test]
    fn a_trace_context_rides_every_request_about_the_task_and_survives_a_resume() {
        let trace = crate::trace::TraceContext::from_parts(
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            Some("rojo=1"),
            None,
        );
        let mut d = driver();
        let before = d.revision();
        d.set_trace(trace.clone());
        assert!(d.revision() > before, "the state to persist changed");
        d.poll_now(T0 + 1);
        d.handle_timeout(T0 + 1);
        let get = d.poll_outgoing().unwrap();
        let sent = get.to_json_traced(d.trace());
        assert_eq!(sent["params"]["_meta"]["traceparent"], "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01");
        assert_eq!(sent["params"]["_meta"]["tracestate"], "rojo=1");
        assert_eq!(sent["params"]["taskId"], "t");
        assert!(get.to_json()["params"].get("_meta").is_none(), "untraced: no _meta of the driver's");
        // Saved, read back after a restart: the same context goes on.
        let saved = serde_json::to_value(d.state()).unwrap();
        let mut resumed = TaskDriver::resume(serde_json::from_value(saved).unwrap(), T0 + 5, DriverConfig::default());
        assert_eq!(resumed.trace(), trace.as_ref());
        resumed.cancel(CancelMode::Stop).unwrap();
        let cancel = resumed.poll_outgoing().unwrap();
        assert_eq!(cancel.method(), "tasks/cancel");
        assert_eq!(
            cancel.params_traced(resumed.trace())["_meta"]["traceparent"],
            sent["params"]["_meta"]["traceparent"]
        );
        // A state saved before traces existed reads as untraced.
        let mut old = serde_json::to_value(driver().state()).unwrap();
        old.as_object_mut().unwrap().remove("trace");
        assert_eq!(TaskDriver::resume(serde_json::from_value(old).unwrap(), T0, DriverConfig::default()).trace(), None);
    }

    #[test]
    fn poll_now_moves_the_first_poll_and_then_the_interval_holds() {
        let mut d = driver();
        d.poll_now(T0 + 1);
        assert_eq!(d.poll_timeout(), Some(T0 + 1));
        d.handle_timeout(T0 + 1);
        assert_eq!(d.poll_outgoing().unwrap().method(), "tasks/get");
        d.poll_now(T0 + 2);
        assert_eq!(d.poll_timeout(), Some(T0 + 60_000), "a get in flight is not doubled: only the expiry is due");
        d.handle_timeout(T0 + 2);
        assert_eq!(d.poll_outgoing(), None, "one get in flight at a time");
        d.handle_get(T0 + 3, task("working", T0 + 2, json!({})));
        assert_eq!(d.poll_timeout(), Some(T0 + 503), "then the server's interval");
        d.handle_get(T0 + 4, task("completed", T0 + 4, json!({"result": {"content": []}})));
        d.poll_now(T0 + 5);
        assert_eq!(d.poll_timeout(), None, "finished: nothing more to poll");
    }

    #[test]
    fn a_listening_driver_polls_only_to_check_the_stream_once_the_stream_has_spoken() {
        let mut d = driver();
        d.handle_listening(T0 + 10, true);
        assert_eq!(d.poll_timeout(), Some(T0 + 500), "acknowledged but silent: the server's interval still");
        d.handle_notification(T0 + 20, task("working", T0 + 20, json!({"statusMessage": "half"})));
        assert_eq!(d.poll_timeout(), Some(T0 + 20 + LISTENING_POLL_MS), "the stream reports: the 500 ms give way");
        d.handle_listening(T0 + 30, false);
        assert_eq!(d.poll_timeout(), Some(T0 + 530), "the stream ended: the server's interval again");
        d.handle_listening(T0 + 40, false);
        assert_eq!(d.poll_timeout(), Some(T0 + 530), "no change, no new deadline");
    }

    #[test]
    fn a_server_that_pushes_nothing_after_the_acknowledgement_is_polled_at_its_interval() {
        // tower-mcp 0.25: the update finishes the task before the subscription exists, and the
        // stream sends no current state. The outcome must come within one interval, not 30 s.
        let mut d = driver();
        d.handle_timeout(T0 + 500);
        assert_eq!(d.poll_outgoing().unwrap().method(), "tasks/get");
        d.handle_get(T0 + 501, task("working", T0 + 1, json!({})));
        d.handle_listening(T0 + 502, true);
        for at in [T0 + 1_001, T0 + 1_501] {
            assert_eq!(d.poll_timeout(), Some(at), "a poll each interval while the stream says nothing");
            d.handle_timeout(at);
            assert_eq!(d.poll_outgoing().unwrap().method(), "tasks/get");
            d.handle_get(at, task("working", T0 + 1, json!({})));
        }
        d.handle_get(T0 + 2_001, task("completed", T0 + 503, json!({"result": {"content": []}})));
        assert!(matches!(d.outcome(), Some(Outcome::Completed { .. })), "{:?}", d.outcome());
    }

    #[test]
    fn polls_at_the_server_interval_with_a_floor() {
        let mut d = driver();
        assert_eq!(d.poll_timeout(), Some(T0 + 500));
        d.handle_timeout(T0 + 499);
        assert_eq!(d.poll_outgoing(), None);
        d.handle_timeout(T0 + 500);
        assert_eq!(d.poll_outgoing().unwrap().method(), "tasks/get");
        d.handle_timeout(T0 + 600);
        assert_eq!(d.poll_outgoing(), None, "one get in flight at a time");
        d.handle_get(T0 + 600, task("working", T0 + 550, json!({"pollIntervalMs": 5})));
        assert_eq!(d.poll_timeout(), Some(T0 + 700), "floor of 100 ms");
    }

    #[test]
    fn newer_state_wins_and_notifications_postpone_the_poll() {
        let mut d = driver();
        d.handle_notification(T0 + 300, task("working", T0 + 250, json!({"statusMessage": "b"})));
        assert_eq!(d.poll_timeout(), Some(T0 + 800));
        d.handle_get(T0 + 900, task("working", T0 + 100, json!({"statusMessage": "a"})));
        assert_eq!(d.latest().task.status_message.as_deref(), Some("b"), "an older poll result is ignored");
        assert_eq!(events(&mut d).len(), 1);
    }

    #[test]
    fn input_keys_surface_once_and_answers_batch_per_update() {
        let mut d = driver();
        let reqs = json!({"inputRequests": {"a": {"method": "roots/list"}, "b": {"method": "roots/list"}}});
        d.handle_get(T0 + 500, task("input_required", T0 + 400, reqs.clone()));
        let asked: Vec<_> = events(&mut d)
            .into_iter()
            .filter_map(|e| match e {
                DriverEvent::InputRequested { key, .. } => Some(key),
                _ => None,
            })
            .collect();
        assert_eq!(asked, vec!["a", "b"]);
        d.handle_get(T0 + 1000, task("input_required", T0 + 400, reqs.clone()));
        assert!(events(&mut d).is_empty(), "same state, nothing new");
        d.answer("a", json!({"roots": []})).unwrap();
        assert_eq!(d.answer("a", json!({})), Err(DriverError::AlreadyAnswered("a".into())));
        assert_eq!(d.answer("zzz", json!({})), Err(DriverError::UnknownKey("zzz".into())));
        match d.poll_outgoing().unwrap() {
            Outgoing::Update { input_responses, .. } => assert_eq!(input_responses.len(), 1),
            other => panic!("{other:?}"),
        }
        d.handle_ack(T0 + 1010, "tasks/update", Ok(()));
        d.handle_get(
            T0 + 1200,
            task("input_required", T0 + 1100, json!({"inputRequests": {"b": {"method": "roots/list"}}})),
        );
        assert!(!events(&mut d).iter().any(|e| matches!(e, DriverEvent::InputRequested { .. })));
        d.answer("b", json!({"roots": []})).unwrap();
        assert!(matches!(d.poll_outgoing(), Some(Outgoing::Update { .. })));
    }

    #[test]
    fn outcomes() {
        let mut d = driver();
        d.handle_get(T0 + 500, task("completed", T0 + 450, json!({"result": {"content": []}})));
        assert!(matches!(events(&mut d).last(), Some(DriverEvent::Finished(Outcome::Completed { .. }))));
        assert_eq!(d.poll_timeout(), None);

        let mut d = driver();
        d.handle_get_error(T0 + 500, &RpcError::new(-32602, "gone"));
        assert_eq!(d.outcome(), Some(&Outcome::Gone));

        let mut d = driver();
        d.handle_get_error(T0 + 500, &RpcError::internal("flaky"));
        assert_eq!(d.outcome(), None, "other errors are retried");
        d.handle_timeout(T0 + 60_000);
        assert_eq!(d.outcome(), Some(&Outcome::Expired));

        let mut d = driver();
        d.cancel(CancelMode::Stop).unwrap();
        assert_eq!(d.poll_outgoing().unwrap().method(), "tasks/cancel");
        d.handle_ack(T0 + 10, "tasks/cancel", Ok(()));
        assert_eq!(d.outcome(), Some(&Outcome::Cancelled));

        let mut d = driver();
        d.cancel(CancelMode::Observe).unwrap();
        let _ = d.poll_outgoing();
        d.handle_ack(T0 + 10, "tasks/cancel", Ok(()));
        assert_eq!(d.outcome(), None, "observe mode keeps following");
        d.handle_get(T0 + 200, task("completed", T0 + 150, json!({"result": {"content": []}})));
        assert!(matches!(d.outcome(), Some(Outcome::Completed { .. })), "the work finished first");
    }

    #[test]
    fn numbers_are_read_as_json_means_them() {
        let created = json!({"resultType": "task", "taskId": "t", "status": "working",
            "createdAt": "2026-09-01T12:00:00.000Z", "lastUpdatedAt": "2026-09-01T12:00:00.000Z",
            "ttlMs": 60000.0, "pollIntervalMs": 500.5});
        let task = parse_created(created).unwrap();
        assert_eq!((task.ttl_ms, task.poll_interval_ms), (Some(60_000), Some(501)), "a fraction rounds up");
        let mut d = TaskDriver::new(task, T0, DriverConfig::default());
        assert_eq!(d.poll_timeout(), Some(T0 + 501));
        // A failed task whose error code is written as a float is still read as failed.
        d.handle_get_result(
            T0 + 600,
            json!({"resultType": "complete", "taskId": "t", "status": "failed",
            "createdAt": "2026-09-01T12:00:00.000Z", "lastUpdatedAt": "2026-09-01T12:00:00.600Z",
            "ttlMs": 6e4, "error": {"code": -32603.0, "message": "boom"}}),
        );
        assert!(matches!(d.outcome(), Some(Outcome::Failed { error }) if error.code == -32603));
        for (field, value, says) in [
            ("ttlMs", json!(-1), "ttlMs: -1 is negative"),
            ("pollIntervalMs", json!(-0.5), "pollIntervalMs: -0.5 is negative"),
            ("ttlMs", json!("60000"), "ttlMs: \"60000\" is a string"),
            ("status", json!("done"), "status is \"done\", not a task status"),
            ("taskId", json!(7), "taskId is a number, not a string"),
        ] {
            let mut task = json!({"taskId": "t", "status": "working", "createdAt": "x", "lastUpdatedAt": "x",
                "ttlMs": null});
            task[field] = value;
            let err = parse_detailed(task).unwrap_err().to_string();
            assert!(err.contains(says), "{field}: {err}");
        }
        let err = parse_detailed(json!({"taskId": "t", "status": "failed", "createdAt": "x", "lastUpdatedAt": "x",
            "ttlMs": null, "error": {"code": -32603.5, "message": "m"}}))
        .unwrap_err();
        assert!(err.to_string().contains("error.code: -32603.5 is not a whole number"), "{err}");
    }

    #[test]
    fn an_unreadable_answer_ends_the_driver_and_cancels_the_task() {
        let mut d = driver();
        d.handle_timeout(T0 + 500);
        assert_eq!(d.poll_outgoing().unwrap().method(), "tasks/get");
        d.handle_get_result(
            T0 + 510,
            json!({"resultType": "complete", "taskId": "t", "status": "frobbed",
            "createdAt": "2026-09-01T12:00:00.000Z", "lastUpdatedAt": "2026-09-01T12:00:00.000Z", "ttlMs": null}),
        );
        let Some(Outcome::Failed { error }) = d.outcome().cloned() else { panic!("{:?}", d.outcome()) };
        assert_eq!(error.code, -32603);
        assert!(
            error.message.contains("task t") && error.message.contains("status is \"frobbed\""),
            "{}",
            error.message
        );
        assert_eq!(error.data.as_ref().unwrap()["reason"], UNREADABLE_ANSWER);
        assert_eq!(d.poll_outgoing(), Some(Outgoing::Cancel { task_id: "t".into() }), "a best-effort cancel");
        assert_eq!(d.poll_outgoing(), None);
        assert!(matches!(events(&mut d).last(), Some(DriverEvent::Finished(Outcome::Failed { .. }))));

        // An answer about another task is as unreadable.
        let mut d = driver();
        d.handle_get_result(T0 + 510, serde_json::to_value(task("working", T0 + 1, json!({"taskId": "u"}))).unwrap());
        assert!(matches!(d.outcome(), Some(Outcome::Failed { .. })));

        // A notification that cannot be read asks for a poll now; the poll's answer decides.
        let mut d = driver();
        d.handle_notification_params(T0 + 100, json!({"taskId": "t", "status": "??"}));
        assert_eq!(d.outcome(), None);
        assert_eq!(d.poll_timeout(), Some(T0 + 100));
    }

    #[test]
    fn an_answer_that_is_no_object_is_refused_before_it_is_sent() {
        let mut d = driver();
        d.handle_get(
            T0 + 500,
            task("input_required", T0 + 400, json!({"inputRequests": {"a": {"method": "elicitation/create"}}})),
        );
        let _ = events(&mut d);
        assert!(matches!(d.answer("a", json!(5)), Err(DriverError::InvalidAnswer(key, _)) if key == "a"));
        assert_eq!(d.poll_outgoing(), None);
        d.answer("a", json!({"action": "decline"})).unwrap();
        assert!(matches!(d.poll_outgoing(), Some(Outgoing::Update { .. })));
    }

    #[test]
    fn resume_polls_at_once_and_resends_a_cancel() {
        let mut d = driver();
        d.cancel(CancelMode::Observe).unwrap();
        let saved = d.state().clone();
        let mut resumed = TaskDriver::resume(saved, T0 + 5_000, DriverConfig::default());
        assert_eq!(resumed.poll_outgoing().unwrap().method(), "tasks/cancel");
        resumed.handle_timeout(T0 + 5_000);
        assert_eq!(resumed.poll_outgoing().unwrap().method(), "tasks/get");
    }
}
