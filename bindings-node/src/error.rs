//! The one place errors cross into JavaScript. Every core error becomes a JS `Error` whose message
//! is `mcp-tasks:` followed by `{"class", "code", "message", "data", "causes"}` as JSON; the
//! TypeScript package (`ts/errors.ts`) turns that into the class core names (one per row of
//! `ERROR_CLASSES`), with the causes chained as `cause`.

use mcp_tasks::client::ClientError;
use mcp_tasks::protocol::client::{DriverError, InvalidResult, OutcomeError};
use mcp_tasks::protocol::{ERROR_CLASSES, ProtocolError};
use napi_derive::napi;
use serde_json::{Value, json};

/// The prefix `ts/errors.ts` recognises.
const PREFIX: &str = "mcp-tasks:";

fn raise(class: &str, code: Option<i64>, message: &str, data: Option<&Value>, causes: &[String]) -> napi::Error {
    let payload = json!({ "class": class, "code": code, "message": message, "data": data, "causes": causes });
    napi::Error::from_reason(format!("{PREFIX}{payload}"))
}

/// Maps a client error to the class core names for it, keeping the server's code and data and
/// the cause chain.
pub(crate) fn client_error(err: ClientError) -> napi::Error {
    match &err {
        ClientError::Rpc(rpc) => raise(err.class(), Some(rpc.code), &rpc.message, rpc.data.as_ref(), &[]),
        _ => raise(err.class(), Some(err.code()), &err.to_string(), err.data().as_ref(), &err.causes()),
    }
}

/// Maps a protocol error (bad JSON from the caller, bad options).
pub(crate) fn protocol_error(err: &ProtocolError) -> napi::Error {
    let rpc = err.to_rpc();
    raise(err.class(), Some(rpc.code), &rpc.message, rpc.data.as_ref(), &[])
}

/// A task outcome that is no result (failed, cancelled, gone, expired) as its typed error.
pub(crate) fn outcome_error(err: &OutcomeError) -> napi::Error {
    raise(err.class, err.code, &err.message, err.data.as_ref(), &[])
}

/// A result the client protocol refuses (-32602 with the reason).
pub(crate) fn invalid_result(err: &InvalidResult) -> napi::Error {
    protocol_error(&ProtocolError::InvalidParams(err.to_string()))
}

/// The application's call to a driver was refused (-32602 with the reason).
pub(crate) fn driver_error(err: &DriverError) -> napi::Error {
    protocol_error(&ProtocolError::InvalidParams(err.to_string()))
}

/// Parses a JSON argument; one that does not parse is -32602.
pub(crate) fn parse_json(what: &str, text: &str) -> napi::Result<Value> {
    serde_json::from_str(text)
        .map_err(|e| protocol_error(&ProtocolError::InvalidParams(format!("{what} is not valid JSON: {e}"))))
}

/// Core's `ERROR_CLASSES` as JSON (core's serialization: `name`, `parent`, `code`,
/// `pythonBuiltin`, `doc`), which the tests compare with the classes of `ts/errors.ts`.
#[napi]
pub fn error_classes() -> String {
    serde_json::to_string(ERROR_CLASSES).expect("the class table serializes")
}

/// The `CallToolResult` (JSON) of an outcome (JSON), or throws the typed error core names for a
/// failed, cancelled, gone or expired task.
#[napi]
pub fn outcome_result(outcome_json: String, task_id: String) -> napi::Result<String> {
    let outcome: mcp_tasks::protocol::client::Outcome =
        serde_json::from_value(parse_json("outcome", &outcome_json)?)
            .map_err(|e| protocol_error(&ProtocolError::InvalidParams(format!("not an outcome: {e}"))))?;
    let result = outcome.into_result(&task_id).map_err(|e| outcome_error(&e))?;
    Ok(result.to_string())
}
