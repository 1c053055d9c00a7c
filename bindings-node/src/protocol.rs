//! Glue for `mcp_tasks::protocol::client`: the sans-IO client protocol (classify a `tools/call`
//! answer, follow one task with a `TaskDriver`) for hosts that send JSON-RPC themselves.
//! Times are Unix milliseconds passed in; nothing here does IO or reads a clock.

use mcp_tasks::protocol::RpcError;
use mcp_tasks::protocol::client::{CancelMode, DriverConfig, DriverState, TaskDriver, classify, parse_created};
use napi_derive::napi;

use crate::error::{driver_error, invalid_result, parse_json, protocol_error};

fn to_json(value: &impl serde::Serialize) -> String {
    serde_json::to_string(value).expect("protocol types serialize")
}

/// Reads a cancel mode (`stop` or `observe`) with core's own names for it.
pub(crate) fn cancel_mode(mode: &str) -> napi::Result<CancelMode> {
    CancelMode::parse(mode).map_err(|e| protocol_error(&e))
}

/// Core's driver defaults, overridden where given.
fn config(default_poll_ms: Option<u32>, min_poll_ms: Option<u32>) -> DriverConfig {
    let defaults = DriverConfig::default();
    DriverConfig {
        default_poll_ms: default_poll_ms.map_or(defaults.default_poll_ms, u64::from),
        min_poll_ms: min_poll_ms.map_or(defaults.min_poll_ms, u64::from),
    }
}

fn rpc_error(error_json: &str) -> napi::Result<RpcError> {
    serde_json::from_value(parse_json("error", error_json)?).map_err(|e| {
        protocol_error(&mcp_tasks::protocol::ProtocolError::InvalidParams(format!("not a JSON-RPC error: {e}")))
    })
}

fn ms(value: f64) -> u64 {
    // JS numbers: Unix ms are integers well inside 2^53.
    value.max(0.0) as u64
}

/// Classifies a `tools/call` result (JSON). `declared` says whether the request declared the
/// tasks extension. Returns JSON `{"kind": "complete", "result"}`, `{"kind": "input_required",
/// "result"}` or `{"kind": "task", "task"}`; a task answer to a non-declaring request, an unknown
/// `resultType` or a malformed task throws (-32602).
#[napi]
pub fn classify_tools_call(result_json: String, declared: bool) -> napi::Result<String> {
    let result = parse_json("result", &result_json)?;
    Ok(to_json(&classify("tools/call", result, declared).map_err(|e| invalid_result(&e))?.to_json()))
}

/// Follows one task, sans-IO: feed it what the server said, send what `pollOutgoing` returns,
/// call `handleTimeout` at `pollTimeout`, and read `pollEvent` until `finished`.
#[napi]
pub struct NativeTaskDriver {
    inner: TaskDriver,
}

#[napi]
impl NativeTaskDriver {
    /// Starts from a `CreateTaskResult` (JSON) received at `now_ms`.
    #[napi(constructor)]
    pub fn new(
        created_json: String,
        now_ms: f64,
        default_poll_ms: Option<u32>,
        min_poll_ms: Option<u32>,
    ) -> napi::Result<Self> {
        let task = parse_created(parse_json("CreateTaskResult", &created_json)?).map_err(|e| invalid_result(&e))?;
        Ok(Self { inner: TaskDriver::new(task, ms(now_ms), config(default_poll_ms, min_poll_ms)) })
    }

    /// Re-attaches from a saved `state()` (JSON) at `now_ms`, e.g. after a restart.
    #[napi(factory)]
    pub fn resume(
        state_json: String,
        now_ms: f64,
        default_poll_ms: Option<u32>,
        min_poll_ms: Option<u32>,
    ) -> napi::Result<Self> {
        let state: DriverState = serde_json::from_value(parse_json("state", &state_json)?).map_err(|e| {
            protocol_error(&mcp_tasks::protocol::ProtocolError::InvalidParams(format!("not a driver state: {e}")))
        })?;
        Ok(Self { inner: TaskDriver::resume(state, ms(now_ms), config(default_poll_ms, min_poll_ms)) })
    }

    /// What survives a restart (JSON): pass it to `resume`.
    #[napi]
    pub fn state(&self) -> String {
        to_json(self.inner.state())
    }

    /// The task id.
    #[napi(getter)]
    pub fn task_id(&self) -> String {
        self.inner.task_id().to_owned()
    }

    /// The newest state seen (`DetailedTask` JSON).
    #[napi]
    pub fn latest(&self) -> String {
        to_json(self.inner.latest())
    }

    /// The outcome (JSON), or `null` while the task runs.
    #[napi]
    pub fn outcome(&self) -> Option<String> {
        self.inner.outcome().map(to_json)
    }

    /// A `tasks/get` result (JSON) arrived. One that cannot be read (or is about another task)
    /// ends the driver: the outcome is `failed` (`data.reason` `unreadable_answer`, naming the
    /// part) and a best-effort `tasks/cancel` is the next outgoing request.
    #[napi]
    pub fn handle_get(&mut self, now_ms: f64, result_json: String) -> napi::Result<()> {
        let result = parse_json("result", &result_json)?;
        self.inner.handle_get_result(ms(now_ms), result);
        Ok(())
    }

    /// A `notifications/tasks` params object (JSON) arrived; one that cannot be read asks for a
    /// poll now instead.
    #[napi]
    pub fn handle_notification(&mut self, now_ms: f64, params_json: String) -> napi::Result<()> {
        let params = parse_json("params", &params_json)?;
        self.inner.handle_notification_params(ms(now_ms), params);
        Ok(())
    }

    /// `tasks/get` answered with a JSON-RPC error object (JSON).
    #[napi]
    pub fn handle_get_error(&mut self, now_ms: f64, error_json: String) -> napi::Result<()> {
        self.inner.handle_get_error(ms(now_ms), &rpc_error(&error_json)?);
        Ok(())
    }

    /// A `tasks/update` or `tasks/cancel` was answered: `error_json` is the JSON-RPC error object,
    /// or `null` for the acknowledgement. Confirms a stop-mode cancel, tells `Gone`, and resends
    /// answers whose update failed.
    #[napi]
    pub fn handle_ack(&mut self, now_ms: f64, method: String, error_json: Option<String>) -> napi::Result<()> {
        let error = error_json.map(|e| rpc_error(&e)).transpose()?;
        self.inner.handle_ack(ms(now_ms), &method, error.as_ref().map_or(Ok(()), Err));
        Ok(())
    }

    /// The time (Unix ms) at which `handleTimeout` is due, or `null` when nothing is scheduled.
    #[napi]
    pub fn poll_timeout(&self) -> Option<f64> {
        self.inner.poll_timeout().map(|t| t as f64)
    }

    /// The clock reached the timeout.
    #[napi]
    pub fn handle_timeout(&mut self, now_ms: f64) {
        self.inner.handle_timeout(ms(now_ms));
    }

    /// The next request to send, as JSON `{"method", "params"}` (add the `_meta` envelope beside
    /// a `_meta` it carries: the task's trace context, once `setTrace` gave one), or `null`.
    #[napi]
    pub fn poll_outgoing(&mut self) -> Option<String> {
        let out = self.inner.poll_outgoing()?;
        Some(to_json(&out.to_json_traced(self.inner.trace())))
    }

    /// Sends a W3C trace context (a propagator's carrier as JSON: `{"traceparent": ...}`; `null`
    /// for none) with every later request about the task, and keeps it in `state()`.
    #[napi]
    pub fn set_trace(&mut self, trace_json: Option<String>) {
        let trace = trace_json.as_deref().and_then(mcp_tasks::trace::TraceContext::from_carrier_json);
        self.inner.set_trace(trace);
    }

    /// The next event, as JSON: `{"kind": "status", "task"}`, `{"kind": "input_requested", "key",
    /// "request"}` or `{"kind": "finished", "outcome"}`; `null` when there is none.
    #[napi]
    pub fn poll_event(&mut self) -> Option<String> {
        self.inner.poll_event().map(|event| to_json(&event.to_json()))
    }

    /// Answers input request `key` (sent by the next `pollOutgoing`).
    #[napi]
    pub fn answer(&mut self, key: String, response_json: String) -> napi::Result<()> {
        let response = parse_json("response", &response_json)?;
        self.inner.answer(&key, response).map_err(|e| driver_error(&e))
    }

    /// Asks to cancel (`stop` or `observe`).
    #[napi]
    pub fn cancel(&mut self, mode: String) -> napi::Result<()> {
        self.inner.cancel(cancel_mode(&mode)?).map_err(|e| driver_error(&e))
    }
}
