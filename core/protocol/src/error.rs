//! JSON-RPC errors: the wire shape, the protocol error enum, and the one table that maps every
//! error kind to its JSON-RPC code and Streamable HTTP status.
//!
//! Codes come from JSON-RPC 2.0 and the MCP 2026-07-28 core (`-32020…-32022`); the
//! task-specific uses (`-32602` for unknown/foreign/purged ids, `-32021` for a missing tasks
//! declaration, `-32601` for the removed `tasks/list` and `tasks/result`) follow SEP-2663
//! (<https://modelcontextprotocol.github.io/ext-tasks/specification/2026-07-28/tasks.html>, "Error Handling").

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

/// A JSON-RPC error object as it travels on the wire (`{code, message, data?}`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RpcError {
    /// The JSON-RPC error code (read from any JSON number of whole value: `-32602.0` too).
    #[serde(deserialize_with = "crate::number::de_whole")]
    pub code: i64,
    /// A short, single-sentence description.
    pub message: String,
    /// Structured detail defined by the code (e.g. `requiredCapabilities` for -32021).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<Value>,
}

impl RpcError {
    /// An error with the given code and message and no `data`.
    pub fn new(code: i64, message: impl Into<String>) -> Self {
        Self { code, message: message.into(), data: None }
    }

    /// Adds `data` to the error.
    #[must_use]
    pub fn with_data(mut self, data: Value) -> Self {
        self.data = Some(data);
        self
    }

    /// An internal error (-32603) with the given message.
    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::Internal.code(), message)
    }
}

impl std::fmt::Display for RpcError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} ({})", self.message, self.code)
    }
}

impl std::error::Error for RpcError {}

/// The kinds of protocol error, each with one row in [`ERROR_TABLE`].
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ErrorKind {
    /// The body is not valid JSON.
    Parse,
    /// The body is JSON but not a JSON-RPC 2.0 request object.
    InvalidRequest,
    /// A body, argument, input response or result is larger than the configured limit.
    TooLarge,
    /// The method does not exist (including the removed `tasks/list` and `tasks/result`).
    MethodNotFound,
    /// Params are missing, of the wrong type, or name an unknown tool.
    InvalidParams,
    /// The task id is unknown, expired and purged, or belongs to another principal.
    TaskNotFound,
    /// A standard HTTP header (`MCP-Protocol-Version`, `Mcp-Method`, `Mcp-Name`) is missing or
    /// disagrees with the body.
    HeaderMismatch,
    /// The request needs a client capability it did not declare in its own `_meta`.
    MissingCapability,
    /// The request's protocol version is not one the server speaks.
    UnsupportedVersion,
    /// The server failed (store unavailable, work ended without a result, ...).
    Internal,
    /// A new task would exceed the server's cap on live tasks (the caller's, or in total).
    QuotaExceeded,
    /// A POST whose `Content-Type` is not `application/json`.
    UnsupportedMediaType,
    /// A `subscriptions/listen` from a client whose `Accept` rules out `text/event-stream`.
    NotAcceptable,
    /// A request body that did not arrive within the server's body read timeout.
    RequestTimeout,
    /// A request header section over the server's limit.
    HeadersTooLarge,
}

/// One row of the error table: what, which JSON-RPC code, which HTTP status.
#[derive(Clone, Copy, Debug)]
pub struct ErrorRow {
    /// The error kind.
    pub kind: ErrorKind,
    /// Its JSON-RPC code.
    pub code: i64,
    /// The HTTP status of a Streamable HTTP response carrying it.
    pub http_status: u16,
    /// When it is returned.
    pub when: &'static str,
}

/// Every error this crate returns, with its JSON-RPC code and HTTP status. The error table of
/// docs/errors.md is checked against this one in tests.
pub const ERROR_TABLE: &[ErrorRow] = &[
    ErrorRow { kind: ErrorKind::Parse, code: -32700, http_status: 400, when: "the body is not valid JSON" },
    ErrorRow {
        kind: ErrorKind::InvalidRequest,
        code: -32600,
        http_status: 400,
        when: "the body is not a JSON-RPC 2.0 request object",
    },
    ErrorRow {
        kind: ErrorKind::TooLarge,
        code: -32600,
        http_status: 413,
        when: "the HTTP body exceeds the configured limit",
    },
    ErrorRow {
        kind: ErrorKind::MethodNotFound,
        code: -32601,
        http_status: 404,
        when: "unknown method, including the removed `tasks/list` and `tasks/result`",
    },
    ErrorRow {
        kind: ErrorKind::InvalidParams,
        code: -32602,
        // The 2026-07-28 transport text names no status for -32602; 400 is what the official
        // Python SDK sends (mcp 2.3.0 `shared/inbound.py` ERROR_CODE_HTTP_STATUS), so a client
        // sees the same reply from our Rust host and from mcp + our Python extension.
        http_status: 400,
        when: "missing or wrong-typed params, non-object `_meta`, unknown tool, arguments or input responses over their limit",
    },
    ErrorRow {
        kind: ErrorKind::TaskNotFound,
        code: -32602,
        http_status: 400,
        when: "`tasks/*` on an unknown, purged, or another principal's task id",
    },
    ErrorRow {
        kind: ErrorKind::HeaderMismatch,
        code: -32020,
        http_status: 400,
        when: "`MCP-Protocol-Version`, `Mcp-Method` or `Mcp-Name` missing or different from the body",
    },
    ErrorRow {
        kind: ErrorKind::MissingCapability,
        code: -32021,
        http_status: 400,
        when: "`tasks/*` or a `taskIds` listen without the extension in that request's `_meta`; a task-required tool called by a non-declaring client; an MRTR round asking for input the request's client did not declare (see [input only to a client that can answer it](#input-only-to-a-client-that-can-answer-it)); a synchronous call whose tool asks for input mid-run, which only its task could, from a client that did not declare the extension (the tool runs as a task for one that does: `data.requiredCapabilities` names the extension)",
    },
    ErrorRow {
        kind: ErrorKind::UnsupportedVersion,
        code: -32022,
        http_status: 400,
        when: "`_meta` protocol version other than 2026-07-28",
    },
    ErrorRow {
        kind: ErrorKind::Internal,
        code: -32603,
        http_status: 500,
        when: "store failure or other fault of the server itself; also inside a `failed` task when its work errs (a synchronous tool's own error goes out with HTTP 200, as the SDKs send every handler error)",
    },
    ErrorRow {
        kind: ErrorKind::QuotaExceeded,
        // -32000..-32019 are implementation-defined; -32020.. are the MCP spec's. The spec gives
        // this code no HTTP status, and mcp 2.3.0 and @modelcontextprotocol/server 2.4.0 send every
        // code they do not map with 200 (mcp `shared/inbound.py` ERROR_CODE_HTTP_STATUS), so 200
        // here too keeps the three servers' answers the same.
        code: -32010,
        http_status: 200,
        when: "a `tools/call` that would create a task over the server's cap on live (`working` or `input_required`) tasks: the caller's (`data.reason` `principal_quota`) or in total (`server_quota`), with `data.limit`",
    },
    ErrorRow {
        kind: ErrorKind::UnsupportedMediaType,
        // The status both SDKs send (@modelcontextprotocol/server 2.4.0 `createMcpHandler`, mcp
        // 2.3.0's legacy transport) with -32000, a code of no defined meaning; -32600 says what
        // it is: the message is no request this transport takes.
        code: -32600,
        http_status: 415,
        when: "a POST whose `Content-Type` is not `application/json` (parameters such as `charset` aside)",
    },
    ErrorRow {
        kind: ErrorKind::NotAcceptable,
        // The status both SDKs answer with (mcp 2.3.0 with an empty body); core's answer carries
        // the error as JSON, which such a client accepts.
        code: -32600,
        http_status: 406,
        when: "a `subscriptions/listen` whose `Accept` header rules out `text/event-stream`, the only form its answer has",
    },
    ErrorRow {
        kind: ErrorKind::RequestTimeout,
        code: -32600,
        http_status: 408,
        when: "a request header or body that did not arrive within its read timeout (10 s and 30 s by default); the Rust host closes a connection whose header is late without an answer",
    },
    ErrorRow {
        kind: ErrorKind::HeadersTooLarge,
        code: -32600,
        http_status: 431,
        when: "a request header section over the server's limit (64 KiB by default); the Rust host's HTTP layer sends it with an empty body",
    },
];

/// One error class. Every binding defines exactly these classes, under these names, with these
/// parents (Python, TypeScript, Swift), and picks the class of an error with
/// [`ProtocolError::class`], [`class_for_code`] or the client's own mapping; each binding's
/// tests compare its classes with this table.
/// Serialized (camelCase) as the rows bindings hand their tests.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ErrorClass {
    /// The class name, the same in every language.
    pub name: &'static str,
    /// The class it extends (`None` for the root, `McpTaskError`).
    pub parent: Option<&'static str>,
    /// The JSON-RPC code it carries; `None` for the root and for task outcomes, which are no
    /// JSON-RPC errors.
    pub code: Option<i64>,
    /// The Python builtin exception it also subclasses, if any (`except LookupError` catches an
    /// unknown task).
    pub python_builtin: Option<&'static str>,
    /// When it is raised.
    pub doc: &'static str,
}

/// The root class of every mcp-tasks error.
pub const ROOT_CLASS: &str = "McpTaskError";

/// Every error class, parents before children.
pub const ERROR_CLASSES: &[ErrorClass] = &[
    ErrorClass {
        name: ROOT_CLASS,
        parent: None,
        code: None,
        python_builtin: None,
        doc: "Any error from a tasks server or from this library; carries code, message and data.",
    },
    ErrorClass {
        name: "ParseError",
        parent: Some(ROOT_CLASS),
        code: Some(-32700),
        python_builtin: Some("ValueError"),
        doc: "-32700: the message was not valid JSON.",
    },
    ErrorClass {
        name: "InvalidRequestError",
        parent: Some(ROOT_CLASS),
        code: Some(-32600),
        python_builtin: Some("ValueError"),
        doc: "-32600: the message was not a JSON-RPC request object, or the request was refused.",
    },
    ErrorClass {
        name: "RequestTooLargeError",
        parent: Some("InvalidRequestError"),
        code: Some(-32600),
        python_builtin: None,
        doc: "-32600 (HTTP 413): the request body was over the server's limit.",
    },
    ErrorClass {
        name: "MethodNotFoundError",
        parent: Some(ROOT_CLASS),
        code: Some(-32601),
        python_builtin: Some("LookupError"),
        doc: "-32601: the server does not serve the method.",
    },
    ErrorClass {
        name: "InvalidParamsError",
        parent: Some(ROOT_CLASS),
        code: Some(-32602),
        python_builtin: Some("ValueError"),
        doc: "-32602: missing or malformed params, something over a size limit, or a misuse of this library.",
    },
    ErrorClass {
        name: "TaskNotFoundError",
        parent: Some("InvalidParamsError"),
        code: Some(-32602),
        python_builtin: Some("LookupError"),
        doc: "-32602 on tasks/*: the task id is unknown, purged, or another principal's.",
    },
    ErrorClass {
        name: "HeaderMismatchError",
        parent: Some(ROOT_CLASS),
        code: Some(-32020),
        python_builtin: Some("ValueError"),
        doc: "-32020: a standard Mcp-* header was missing, repeated or disagreed with the body.",
    },
    ErrorClass {
        name: "MissingCapabilityError",
        parent: Some(ROOT_CLASS),
        code: Some(-32021),
        python_builtin: None,
        doc: "-32021: the request did not declare a client capability it needs (data.requiredCapabilities).",
    },
    ErrorClass {
        name: "UnsupportedVersionError",
        parent: Some(ROOT_CLASS),
        code: Some(-32022),
        python_builtin: Some("ValueError"),
        doc: "-32022: the server does not speak the request's protocol version (data.supported).",
    },
    ErrorClass {
        name: "InternalError",
        parent: Some(ROOT_CLASS),
        code: Some(-32603),
        python_builtin: Some("RuntimeError"),
        doc: "-32603 or a code this library does not know: a server fault, or a store failure.",
    },
    ErrorClass {
        name: "QuotaExceededError",
        parent: Some(ROOT_CLASS),
        code: Some(-32010),
        python_builtin: None,
        doc: "-32010: the server's cap on live tasks, the caller's or in total, is reached (data.reason, data.limit).",
    },
    ErrorClass {
        name: "TransportError",
        parent: Some("InternalError"),
        code: Some(-32603),
        python_builtin: Some("ConnectionError"),
        doc: "The request could not be sent or its answer not read (the cause chain says why).",
    },
    ErrorClass {
        name: "TaskCancelledError",
        parent: Some(ROOT_CLASS),
        code: None,
        python_builtin: None,
        doc: "The task ended cancelled (a result was expected).",
    },
    ErrorClass {
        name: "TaskGoneError",
        parent: Some("TaskNotFoundError"),
        code: Some(-32602),
        python_builtin: None,
        doc: "The server no longer knows a task this client followed (purged or never there).",
    },
    ErrorClass {
        name: "TaskExpiredError",
        parent: Some(ROOT_CLASS),
        code: None,
        python_builtin: Some("TimeoutError"),
        doc: "The task's ttlMs passed before it finished.",
    },
];

/// The class of a JSON-RPC error a server answered to `method` (`None` when unknown): the class
/// of its code, and [`TaskNotFoundError`](ERROR_CLASSES) for -32602 on `tasks/*`.
pub fn class_for_code(code: i64, method: Option<&str>) -> &'static str {
    if code == ErrorKind::TaskNotFound.code() && method.is_some_and(|m| m.starts_with("tasks/")) {
        return "TaskNotFoundError";
    }
    match code {
        -32700 => "ParseError",
        -32600 => "InvalidRequestError",
        -32601 => "MethodNotFoundError",
        -32602 => "InvalidParamsError",
        -32020 => "HeaderMismatchError",
        -32021 => "MissingCapabilityError",
        -32022 => "UnsupportedVersionError",
        -32010 => "QuotaExceededError",
        _ => "InternalError",
    }
}

impl ErrorKind {
    /// The error class of this kind.
    pub fn class(self) -> &'static str {
        match self {
            Self::Parse => "ParseError",
            Self::InvalidRequest => "InvalidRequestError",
            Self::TooLarge => "RequestTooLargeError",
            Self::MethodNotFound => "MethodNotFoundError",
            Self::InvalidParams => "InvalidParamsError",
            Self::TaskNotFound => "TaskNotFoundError",
            Self::HeaderMismatch => "HeaderMismatchError",
            Self::MissingCapability => "MissingCapabilityError",
            Self::UnsupportedVersion => "UnsupportedVersionError",
            Self::Internal => "InternalError",
            Self::QuotaExceeded => "QuotaExceededError",
            Self::UnsupportedMediaType | Self::NotAcceptable | Self::RequestTimeout | Self::HeadersTooLarge => {
                "InvalidRequestError"
            }
        }
    }

    fn row(self) -> &'static ErrorRow {
        ERROR_TABLE.iter().find(|row| row.kind == self).expect("every ErrorKind has a row in ERROR_TABLE")
    }

    /// The JSON-RPC code of this kind.
    pub fn code(self) -> i64 {
        self.row().code
    }

    /// The HTTP status of a Streamable HTTP response carrying this kind.
    pub fn http_status(self) -> u16 {
        self.row().http_status
    }
}

/// A protocol-level error: what the server answers instead of a result.
#[non_exhaustive]
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum ProtocolError {
    /// The body is not valid JSON; the parser's reason goes to `data.reason`. The message is
    /// the one mcp 2.3.0 sends, so every server of ours answers alike.
    #[error("Parse error")]
    Parse(String),
    /// The body is JSON but not one JSON-RPC 2.0 request or notification object (a batch, a
    /// non-object, a wrong `jsonrpc`, `method`, `id` or `params`); the reason goes to
    /// `data.reason`. The message is the one mcp 2.3.0 sends.
    #[error("Body must be a single JSON-RPC request or notification object")]
    NotARequest(String),
    /// The request is refused for another reason (unauthenticated).
    #[error("Invalid request: {0}")]
    InvalidRequest(String),
    /// The HTTP body exceeds the configured limit (reading stopped there, so its full size is
    /// unknown).
    #[error("request body is over the limit of {limit} bytes")]
    BodyTooLarge {
        /// The configured limit in bytes.
        limit: usize,
    },
    /// A JSON value in the params exceeds a configured size limit; `what` names it.
    #[error("{what} is {size} bytes, over the limit of {limit} bytes")]
    TooLarge {
        /// What was too large ("arguments", "inputResponses", "tool result").
        what: &'static str,
        /// Its size in bytes.
        size: usize,
        /// The configured limit in bytes.
        limit: usize,
    },
    /// The method does not exist; the method goes to `data` (as mcp 2.3.0 sends it).
    #[error("Method not found")]
    MethodNotFound(String),
    /// Params are malformed.
    #[error("Invalid params: {0}")]
    InvalidParams(String),
    /// The `_meta` envelope is missing or lacks a required key; the text is the whole message
    /// (mcp 2.3.0's words).
    #[error("{0}")]
    InvalidEnvelope(String),
    /// An MRTR `requestState` failed verification (tampered, expired, or for another request).
    #[error("Invalid or expired requestState")]
    InvalidRequestState,
    /// The task does not exist for this caller (unknown, purged, or another principal's).
    #[error("Task not found: {0}")]
    TaskNotFound(String),
    /// A standard header disagrees with the body, is missing or is repeated; the text is the
    /// whole message.
    #[error("{0}")]
    HeaderMismatch(String),
    /// The request lacks a client capability it needs; `required` is a `ClientCapabilities` object.
    #[error("Missing required client capability: {message}")]
    MissingCapability {
        /// Human-readable reason.
        message: String,
        /// The `ClientCapabilities` the request needs (goes to `data.requiredCapabilities`).
        required: Value,
    },
    /// The request's protocol version is not supported.
    #[error("Unsupported protocol version: {requested}")]
    UnsupportedVersion {
        /// The version the request carried.
        requested: String,
        /// The versions the server speaks.
        supported: Vec<String>,
    },
    /// A server fault.
    #[error("Internal error: {0}")]
    Internal(String),
    /// A POST's `Content-Type` is not `application/json`; the text is what it was (or that it
    /// was missing). The message is the one both SDKs send.
    #[error("Unsupported Media Type: Content-Type must be application/json")]
    UnsupportedMediaType(String),
    /// A `subscriptions/listen` from a client that does not accept `text/event-stream`; the
    /// text is what it accepts.
    #[error("Not Acceptable: a subscriptions/listen answer is a text/event-stream, which the client does not accept")]
    NotAcceptable(String),
    /// A request's header or body did not arrive within its read timeout.
    #[error("the {what} did not arrive within {seconds} s")]
    RequestTimeout {
        /// `request body` or `request header`.
        what: &'static str,
        /// The bound, in seconds.
        seconds: u64,
    },
    /// The request's header section is over the limit.
    #[error("the request header section is over the limit of {limit} bytes")]
    HeadersTooLarge {
        /// The limit in bytes.
        limit: usize,
    },
    /// A new task would exceed a cap on live tasks; `data` says which and its limit.
    #[error("Too many live tasks: {scope} limit of {limit} reached; retry when some have finished")]
    QuotaExceeded {
        /// Which cap.
        scope: QuotaScope,
        /// Its value.
        limit: u64,
    },
}

/// Which cap on live tasks a create ran into (`data.reason` of -32010).
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum QuotaScope {
    /// The caller's own live tasks (`principal_quota`).
    Principal,
    /// Every live task of the server (`server_quota`).
    Server,
}

impl QuotaScope {
    /// The `data.reason` value.
    pub fn reason(self) -> &'static str {
        match self {
            Self::Principal => "principal_quota",
            Self::Server => "server_quota",
        }
    }
}

impl std::fmt::Display for QuotaScope {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Principal => "per-caller",
            Self::Server => "server-wide",
        })
    }
}

impl ProtocolError {
    /// The table kind of this error.
    pub fn kind(&self) -> ErrorKind {
        match self {
            Self::Parse(_) => ErrorKind::Parse,
            Self::InvalidRequest(_) | Self::NotARequest(_) => ErrorKind::InvalidRequest,
            Self::BodyTooLarge { .. } => ErrorKind::TooLarge,
            Self::TooLarge { .. } => ErrorKind::InvalidParams,
            Self::MethodNotFound(_) => ErrorKind::MethodNotFound,
            Self::InvalidParams(_) | Self::InvalidEnvelope(_) | Self::InvalidRequestState => ErrorKind::InvalidParams,
            Self::TaskNotFound(_) => ErrorKind::TaskNotFound,
            Self::HeaderMismatch(_) => ErrorKind::HeaderMismatch,
            Self::MissingCapability { .. } => ErrorKind::MissingCapability,
            Self::UnsupportedVersion { .. } => ErrorKind::UnsupportedVersion,
            Self::Internal(_) => ErrorKind::Internal,
            Self::QuotaExceeded { .. } => ErrorKind::QuotaExceeded,
            Self::UnsupportedMediaType(_) => ErrorKind::UnsupportedMediaType,
            Self::NotAcceptable(_) => ErrorKind::NotAcceptable,
            Self::RequestTimeout { .. } => ErrorKind::RequestTimeout,
            Self::HeadersTooLarge { .. } => ErrorKind::HeadersTooLarge,
        }
    }

    /// The JSON-RPC code (from [`ERROR_TABLE`]).
    pub fn code(&self) -> i64 {
        self.kind().code()
    }

    /// The error class bindings raise for it (from [`ERROR_CLASSES`]).
    pub fn class(&self) -> &'static str {
        self.kind().class()
    }

    /// The HTTP status (from [`ERROR_TABLE`]).
    pub fn http_status(&self) -> u16 {
        self.kind().http_status()
    }

    /// The wire error object, with the `data` each code defines.
    pub fn to_rpc(&self) -> RpcError {
        let err = RpcError::new(self.code(), self.to_string());
        match self {
            Self::MissingCapability { required, .. } => err.with_data(json!({ "requiredCapabilities": required })),
            Self::UnsupportedVersion { requested, supported } => {
                err.with_data(json!({ "supported": supported, "requested": requested }))
            }
            Self::QuotaExceeded { scope, limit } => err.with_data(json!({ "reason": scope.reason(), "limit": limit })),
            Self::TooLarge { what, size, limit } => {
                err.with_data(json!({ "what": what, "size": size, "limit": limit }))
            }
            // The same data mcp 2.3.0 sends (`server/request_state.py`), so clients can tell a
            // stale round from other bad params on either of our servers.
            Self::InvalidRequestState => err.with_data(json!({ "reason": "invalid_request_state" })),
            Self::Parse(reason)
            | Self::NotARequest(reason)
            | Self::UnsupportedMediaType(reason)
            | Self::NotAcceptable(reason) => err.with_data(json!({ "reason": reason })),
            // The method name, as mcp 2.3.0 sends it, so both our servers give the same data.
            Self::MethodNotFound(method) => err.with_data(json!(method)),
            Self::RequestTimeout { what, seconds } => err.with_data(json!({ "what": what, "timeoutSeconds": seconds })),
            Self::HeadersTooLarge { limit } => err.with_data(json!({ "what": "request header", "limit": limit })),
            // `size` is the first byte past the limit: reading stopped there.
            Self::BodyTooLarge { limit } => {
                err.with_data(json!({ "what": "request body", "size": limit + 1, "limit": limit }))
            }
            _ => err,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_class_table_is_a_tree_with_one_root_and_every_kind() {
        let names: Vec<&str> = ERROR_CLASSES.iter().map(|c| c.name).collect();
        for (i, class) in ERROR_CLASSES.iter().enumerate() {
            assert_eq!(names.iter().filter(|n| **n == class.name).count(), 1, "{} twice", class.name);
            match class.parent {
                None => assert_eq!(class.name, ROOT_CLASS),
                Some(parent) => {
                    assert!(names[..i].contains(&parent), "{}: parent {parent} not listed before", class.name)
                }
            }
        }
        for row in ERROR_TABLE {
            let class = ERROR_CLASSES.iter().find(|c| c.name == row.kind.class()).expect("every kind has a class");
            assert_eq!(class.code, Some(row.code), "{}", class.name);
        }
        for code in [-32700, -32600, -32601, -32602, -32020, -32021, -32022, -32603, -1] {
            assert!(names.contains(&class_for_code(code, None)));
        }
        assert_eq!(class_for_code(-32602, Some("tasks/get")), "TaskNotFoundError");
        assert_eq!(class_for_code(-32602, Some("tools/call")), "InvalidParamsError");
    }
}
