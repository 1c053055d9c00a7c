//! Glue for `mcp_tasks::protocol::client`: the sans-IO client protocol (classify a `tools/call`
//! answer, follow one task with a driver) for hosts that send JSON-RPC themselves. JSON in and
//! out as strings; times are Unix milliseconds passed in.

use std::sync::Mutex;

use mcp_tasks::protocol::client::{DriverConfig, DriverState, TaskDriver as CoreDriver, classify, parse_created};
use mcp_tasks::protocol::{ProtocolError, RpcError};

use crate::client::CancelMode;
use crate::error::{TasksError, parse_json};

fn invalid(err: impl std::fmt::Display) -> TasksError {
    ProtocolError::InvalidParams(err.to_string()).into()
}

fn to_json(value: &impl serde::Serialize) -> String {
    serde_json::to_string(value).expect("protocol types serialize")
}

/// Classifies a `tools/call` result (JSON); `declared` says whether the request declared the
/// tasks extension. Returns JSON `{"kind": "complete" | "input_required" | "task", ...}`; a task
/// answer to a non-declaring request, an unknown `resultType` or a malformed task is an error
/// (-32602).
#[uniffi::export]
pub fn classify_tools_call(result_json: String, declared: bool) -> Result<String, TasksError> {
    let result = parse_json("result", &result_json)?;
    Ok(to_json(&classify("tools/call", result, declared).map_err(invalid)?.to_json()))
}

/// Follows one task, sans-IO: feed it the server's answers, send what `poll_outgoing` returns,
/// call `handle_timeout` at `poll_timeout`, read `poll_event` until `finished`.
#[derive(uniffi::Object)]
pub struct TaskDriver {
    inner: Mutex<CoreDriver>,
}

impl TaskDriver {
    fn with<T>(&self, f: impl FnOnce(&mut CoreDriver) -> T) -> T {
        f(&mut self.inner.lock().expect("driver lock"))
    }
}

#[uniffi::export]
impl TaskDriver {
    /// Starts from a `CreateTaskResult` (JSON) received at `now_ms`.
    #[uniffi::constructor]
    pub fn new(created_json: String, now_ms: u64) -> Result<std::sync::Arc<Self>, TasksError> {
        let task = parse_created(parse_json("CreateTaskResult", &created_json)?).map_err(invalid)?;
        Ok(std::sync::Arc::new(Self { inner: Mutex::new(CoreDriver::new(task, now_ms, DriverConfig::default())) }))
    }

    /// Re-attaches from a saved `state()` (JSON) at `now_ms`, e.g. after the app restarted.
    #[uniffi::constructor]
    pub fn resume(state_json: String, now_ms: u64) -> Result<std::sync::Arc<Self>, TasksError> {
        let state: DriverState = serde_json::from_value(parse_json("state", &state_json)?).map_err(invalid)?;
        Ok(std::sync::Arc::new(Self { inner: Mutex::new(CoreDriver::resume(state, now_ms, DriverConfig::default())) }))
    }

    /// The task id.
    pub fn task_id(&self) -> String {
        self.with(|d| d.task_id().to_owned())
    }

    /// What survives a restart (JSON): pass it to `resume`.
    pub fn state(&self) -> String {
        self.with(|d| to_json(d.state()))
    }

    /// A `tasks/update` or `tasks/cancel` was answered: `error_json` is the JSON-RPC error object,
    /// or `None` for the acknowledgement. Confirms a stop-mode cancel, tells `Gone`, and resends
    /// answers whose update failed.
    pub fn handle_ack(&self, now_ms: u64, method: String, error_json: Option<String>) -> Result<(), TasksError> {
        let error: Option<RpcError> =
            error_json.map(|e| serde_json::from_value(parse_json("error", &e)?).map_err(invalid)).transpose()?;
        self.with(|d| d.handle_ack(now_ms, &method, error.as_ref().map_or(Ok(()), Err)));
        Ok(())
    }

    /// The newest state seen (JSON).
    pub fn latest(&self) -> String {
        self.with(|d| to_json(d.latest()))
    }

    /// The outcome (JSON), or `None` while the task runs.
    pub fn outcome(&self) -> Option<String> {
        self.with(|d| d.outcome().map(to_json))
    }

    /// A `tasks/get` result (JSON) arrived. One that cannot be read (or is about another task)
    /// ends the driver: the outcome is `failed` (data.reason `unreadable_answer`, naming the
    /// part) and a best-effort `tasks/cancel` is the next outgoing request. Throws only for
    /// text that is not JSON.
    pub fn handle_get(&self, now_ms: u64, result_json: String) -> Result<(), TasksError> {
        let result = parse_json("result", &result_json)?;
        self.with(|d| d.handle_get_result(now_ms, result));
        Ok(())
    }

    /// A `notifications/tasks` params object (JSON) arrived; one that cannot be read asks for a
    /// poll now instead. Throws only for text that is not JSON.
    pub fn handle_notification(&self, now_ms: u64, params_json: String) -> Result<(), TasksError> {
        let params = parse_json("params", &params_json)?;
        self.with(|d| d.handle_notification_params(now_ms, params));
        Ok(())
    }

    /// `tasks/get` answered with a JSON-RPC error object (JSON).
    pub fn handle_get_error(&self, now_ms: u64, error_json: String) -> Result<(), TasksError> {
        let error: RpcError = serde_json::from_value(parse_json("error", &error_json)?).map_err(invalid)?;
        self.with(|d| d.handle_get_error(now_ms, &error));
        Ok(())
    }

    /// When `handle_timeout` is due (Unix ms), or `None`.
    pub fn poll_timeout(&self) -> Option<u64> {
        self.with(|d| d.poll_timeout())
    }

    /// The clock reached the timeout.
    pub fn handle_timeout(&self, now_ms: u64) {
        self.with(|d| d.handle_timeout(now_ms));
    }

    /// The next request to send, as JSON `{"method", "params"}` (the params carry a `_meta` with
    /// the task's trace context once `set_trace` gave one), or `None`.
    pub fn poll_outgoing(&self) -> Option<String> {
        self.with(|d| {
            let out = d.poll_outgoing()?;
            Some(to_json(&out.to_json_traced(d.trace())))
        })
    }

    /// Sends a W3C trace context (a propagator's carrier as JSON: `{"traceparent": ...}`; `None`
    /// for none) with every later request about the task, and keeps it in `state()`.
    pub fn set_trace(&self, trace_json: Option<String>) {
        let trace = trace_json.as_deref().and_then(mcp_tasks::trace::TraceContext::from_carrier_json);
        self.with(|d| d.set_trace(trace));
    }

    /// The next event as JSON (`status`, `input_requested` or `finished`), or `None`.
    pub fn poll_event(&self) -> Option<String> {
        self.with(|d| d.poll_event().map(|event| to_json(&event.to_json())))
    }

    /// Answers input request `key` (sent by the next `poll_outgoing`).
    pub fn answer(&self, key: String, response_json: String) -> Result<(), TasksError> {
        let response = parse_json("response", &response_json)?;
        self.with(|d| d.answer(&key, response)).map_err(invalid)
    }

    /// Asks to cancel.
    pub fn cancel(&self, mode: CancelMode) -> Result<(), TasksError> {
        self.with(|d| d.cancel(mode.into())).map_err(invalid)
    }
}
