//! The one place errors cross into JavaScript. Every core error becomes a JS `Error` whose message
//! is `mcp-tasks:` followed by `{"code", "message", "data"}` as JSON; the TypeScript package
//! (`ts/errors.ts`) turns that into an `McpTaskError` subclass carrying the JSON-RPC code.

use mcp_tasks::client::ClientError;
use mcp_tasks::protocol::ProtocolError;
use mcp_tasks::protocol::client::{DriverError, InvalidResult};
use serde_json::{Value, json};

/// The prefix `ts/errors.ts` recognises.
const PREFIX: &str = "mcp-tasks:";

fn raise(code: i64, message: &str, data: Option<&Value>) -> napi::Error {
    let payload = json!({ "code": code, "message": message, "data": data });
    napi::Error::from_reason(format!("{PREFIX}{payload}"))
}

/// Maps a client error: a server's JSON-RPC error keeps its code and data; misuse of a task
/// (answering an unknown key) is -32602; the rest (transport, store) are -32603.
pub(crate) fn client_error(err: ClientError) -> napi::Error {
    match &err {
        ClientError::Rpc(rpc) => raise(rpc.code, &rpc.message, rpc.data.as_ref()),
        _ => raise(err.code(), &err.to_string(), None),
    }
}

/// Maps a protocol error (bad JSON from the caller, bad options).
pub(crate) fn protocol_error(err: &ProtocolError) -> napi::Error {
    let rpc = err.to_rpc();
    raise(rpc.code, &rpc.message, rpc.data.as_ref())
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
