//! Decoding one incoming JSON-RPC message into a typed request, with the right error for every
//! malformed input (invalid JSON, not a request object, unknown method, bad params).

use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

use super::error::ProtocolError;
use super::types::{CallToolParams, ListenParams, RequestId, TaskIdParams, UpdateTaskParams};

/// The methods this server answers. `tasks/list` and `tasks/result` were removed by SEP-2663,
/// and `ping` is not a 2026-07-28 method (its schema has no PingRequest; mcp 2.3.0 answers it
/// -32601 too): all are unknown (-32601) like any other unlisted method.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Method {
    /// `server/discover`.
    Discover,
    /// `tools/list`.
    ToolsList,
    /// `tools/call`.
    ToolsCall,
    /// `tasks/get`.
    TasksGet,
    /// `tasks/update`.
    TasksUpdate,
    /// `tasks/cancel`.
    TasksCancel,
    /// `subscriptions/listen`.
    SubscriptionsListen,
}

impl Method {
    /// Looks a method name up; `None` for methods this server does not serve.
    pub fn parse(name: &str) -> Option<Self> {
        Some(match name {
            "server/discover" => Self::Discover,
            "tools/list" => Self::ToolsList,
            "tools/call" => Self::ToolsCall,
            "tasks/get" => Self::TasksGet,
            "tasks/update" => Self::TasksUpdate,
            "tasks/cancel" => Self::TasksCancel,
            "subscriptions/listen" => Self::SubscriptionsListen,
            _ => return None,
        })
    }

    /// True for the `tasks/*` methods, which need the extension on the request.
    pub fn is_tasks(self) -> bool {
        matches!(self, Self::TasksGet | Self::TasksUpdate | Self::TasksCancel)
    }
}

/// One decoded incoming message.
#[derive(Clone, Debug, PartialEq)]
pub enum Incoming {
    /// A request, which gets exactly one response.
    Request {
        /// Its id.
        id: RequestId,
        /// Its method name (may be unknown; see [`Method::parse`]).
        method: String,
        /// Its params, if any.
        params: Option<Value>,
    },
    /// A notification (no id), which gets no response.
    Notification {
        /// Its method name.
        method: String,
        /// Its params, if any (`notifications/cancelled` names the request it cancels).
        params: Option<Value>,
    },
    /// A response from the client; this stateless server sends no requests, so it is ignored.
    Response,
}

/// Why a message could not be decoded, with the request id when it could be read.
#[derive(Clone, Debug, PartialEq)]
pub struct DecodeError {
    /// The request id, if the message had a readable one.
    pub id: Option<RequestId>,
    /// The error to answer with.
    pub error: ProtocolError,
}

fn fail(id: Option<RequestId>, error: ProtocolError) -> Box<DecodeError> {
    Box::new(DecodeError { id, error })
}

/// Decodes one message body.
pub fn decode(body: &[u8]) -> Result<Incoming, Box<DecodeError>> {
    let value: Value = serde_json::from_slice(body).map_err(|e| fail(None, ProtocolError::Parse(e.to_string())))?;
    let Value::Object(object) = value else {
        let what = if value.is_array() { "batches are not supported" } else { "the message must be an object" };
        return Err(fail(None, ProtocolError::NotARequest(what.into())));
    };
    decode_object(object)
}

fn decode_object(mut object: Map<String, Value>) -> Result<Incoming, Box<DecodeError>> {
    // The 2026-07-28 schema's RequestId is a string or an integer: a fraction, an exponent or an
    // integer beyond 64 bits (which JSON parsing turns into a float) is refused, not echoed.
    let id = match object.remove("id") {
        Some(id @ Value::String(_)) => Some(id),
        Some(Value::Number(n)) if n.is_i64() || n.is_u64() => Some(Value::Number(n)),
        None => None,
        // JSON-RPC 2.0 discourages a null id and MCP 2026-07-28 forbids it (RequestId is a string
        // or an integer): a request with one is refused, not taken for a notification (which has
        // no id member at all).
        Some(_) => return Err(fail(None, ProtocolError::NotARequest("id must be a string or an integer".into()))),
    };
    if object.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
        return Err(fail(id, ProtocolError::NotARequest("jsonrpc must be \"2.0\"".into())));
    }
    let method = match object.remove("method") {
        Some(Value::String(method)) => method,
        Some(_) => return Err(fail(id, ProtocolError::NotARequest("method must be a string".into()))),
        None if object.contains_key("result") || object.contains_key("error") => return Ok(Incoming::Response),
        None => return Err(fail(id, ProtocolError::NotARequest("method is required".into()))),
    };
    let params = object.remove("params");
    if params.as_ref().is_some_and(|p| !p.is_object()) {
        return Err(fail(id, ProtocolError::NotARequest("params must be an object".into())));
    }
    match id {
        Some(id) => Ok(Incoming::Request { id, method, params }),
        None => Ok(Incoming::Notification { method, params }),
    }
}

/// Reads params as `T`, from the borrowed value (copying only what `T` keeps: a whole-params
/// copy per request showed in profiles of `tasks/get`).
fn typed<T: DeserializeOwned>(params: Option<&Value>, method: &str) -> Result<T, ProtocolError> {
    let empty = Value::Object(Map::new());
    T::deserialize(params.unwrap_or(&empty)).map_err(|e| ProtocolError::InvalidParams(format!("{method}: {e}")))
}

/// Decodes `tools/call` params; `arguments` must be an object when present.
pub fn call_tool_params(params: Option<&Value>) -> Result<CallToolParams, ProtocolError> {
    if let Some(Value::Object(p)) = params {
        if p.get("arguments").is_some_and(|a| !a.is_object() && !a.is_null()) {
            return Err(ProtocolError::InvalidParams("tools/call: arguments must be an object".into()));
        }
        if p.get("inputResponses").is_some_and(|r| !r.is_object()) {
            return Err(ProtocolError::InvalidParams("tools/call: inputResponses must be an object".into()));
        }
    }
    // `arguments: null` reads as absent (a copy only then).
    if let Some(Value::Object(p)) = params
        && p.get("arguments").is_some_and(Value::is_null)
    {
        let mut p = p.clone();
        p.remove("arguments");
        return typed(Some(&Value::Object(p)), "tools/call");
    }
    typed(params, "tools/call")
}

/// Decodes `tasks/get` or `tasks/cancel` params.
pub fn task_id_params(params: Option<&Value>, method: &str) -> Result<TaskIdParams, ProtocolError> {
    typed(params, method)
}

/// Decodes `tasks/update` params; every response must be an object.
pub fn update_params(params: Option<&Value>) -> Result<UpdateTaskParams, ProtocolError> {
    let update: UpdateTaskParams = typed(params, "tasks/update")?;
    if let Some((key, _)) = update.input_responses.iter().find(|(_, v)| !v.is_object()) {
        return Err(ProtocolError::InvalidParams(format!("tasks/update: inputResponses[{key:?}] must be an object")));
    }
    Ok(update)
}

/// Decodes `subscriptions/listen` params.
pub fn listen_params(params: Option<&Value>) -> Result<ListenParams, ProtocolError> {
    typed(params, "subscriptions/listen")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn malformed_messages() {
        assert_eq!(decode(b"{").unwrap_err().error.code(), -32700);
        assert_eq!(decode(b"[]").unwrap_err().error.code(), -32600);
        assert_eq!(decode(br#"{"jsonrpc":"2.0","id":1}"#).unwrap_err().error.code(), -32600);
        assert_eq!(decode(br#"{"jsonrpc":"1.0","id":1,"method":"ping"}"#).unwrap_err().error.code(), -32600);
        assert_eq!(
            decode(br#"{"jsonrpc":"2.0","id":1,"method":"ping","params":[]}"#).unwrap_err().error.code(),
            -32600
        );
        assert!(matches!(decode(br#"{"jsonrpc":"2.0","method":"x"}"#).unwrap(), Incoming::Notification { .. }));
        for id in ["0.5", "1e30", "18446744073709551616", "-1.0", "{}", "[1]", "true"] {
            let body = format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"tasks/get"}}"#);
            let err = decode(body.as_bytes()).unwrap_err();
            assert_eq!((err.id, err.error.code()), (None, -32600), "id {id}");
        }
        for id in ["0", "-7", "18446744073709551615", "\"x\""] {
            let body = format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"tasks/get"}}"#);
            assert!(matches!(decode(body.as_bytes()).unwrap(), Incoming::Request { .. }), "id {id}");
        }
    }

    #[test]
    fn params_types() {
        assert!(task_id_params(Some(&json!({"taskId": 3})), "tasks/get").is_err());
        assert!(task_id_params(Some(&json!({})), "tasks/get").is_err());
        assert!(update_params(Some(&json!({"taskId": "a"}))).is_err());
        assert!(update_params(Some(&json!({"taskId": "a", "inputResponses": {"k": 1}}))).is_err());
        assert!(call_tool_params(Some(&json!({"name": "x", "arguments": []}))).is_err());
        assert!(call_tool_params(Some(&json!({"arguments": {}}))).is_err());
        let ok = call_tool_params(Some(&json!({"name": "x", "task": {"ttl": 5}}))).unwrap();
        assert_eq!(ok.name, "x");
        assert!(Method::parse("tasks/list").is_none());
        assert!(Method::parse("tasks/result").is_none());
    }
}
