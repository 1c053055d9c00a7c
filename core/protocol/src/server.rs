//! The server dispatcher: every decision a tasks server makes about one request, without IO.
//!
//! An adapter (the axum host, the Python extension under `mcp`'s `MCPServer`, the TypeScript
//! server) hands the [`Dispatcher`] what it received and gets back either a [`Reply`] to send
//! as it is, or a [`Routed`] request naming the one engine operation to perform. After the
//! operation the adapter builds its reply from the same [`Routed`] ([`ReplyTo::result`],
//! [`ReplyTo::error`]) and, for `subscriptions/listen`, frames the stream with
//! [`ListenFrames`]. The adapter decides nothing: the envelope, the protocol version, the header
//! rules (base64 forms and repeated headers included), per-tool negotiation, routing, the error
//! table and the message shapes all come from here, so every server answers the same bytes.
//!
//! Two entry points fit the two kinds of adapter: [`Dispatcher::handle_http`] takes one whole
//! Streamable HTTP request (a host that owns the transport), and [`Dispatcher::route`] takes a
//! request an SDK has already parsed (method, params and headers), as the Python extension
//! gets it from `mcp`.

use std::collections::BTreeMap;

use serde::Serialize;
use serde_json::{Map, Value, json};

use crate::error::{ProtocolError, RpcError};
use crate::headers::{self, StandardHeaders};
use crate::negotiation::{self, Dispatch, Envelope, EnvelopeRef, SUPPORTED_VERSIONS, TaskMode};
use crate::request::{self, Incoming, Method};
use crate::task::{StoredCall, TaskRecord};
use crate::time::format_ms;
use crate::types::{
    AckResult, AcknowledgedParams, DetailedTask, DiscoverResult, GetTaskResult, InputRequests, InputRequiredResult,
    InputResponses, ListenFilter, ListenResult, META_SERVER_INFO, PROTOCOL_VERSION, RequestId, ResultType,
    TaskNotificationParams, TaskStatus, error_response, notification, response, subscription_meta,
};

/// How long a sealed MRTR `requestState` stays valid (milliseconds).
pub const REQUEST_STATE_TTL_MS: u64 = 10 * 60 * 1000;

/// The largest HTTP body a server accepts by default (bytes).
pub const DEFAULT_MAX_BODY_BYTES: usize = 4 << 20;

/// How long a client may cache `server/discover` and `tools/list` answers (milliseconds).
const LISTING_TTL_MS: u64 = 60_000;

/// One tool as the dispatcher knows it: its task mode and its `tools/list` entry.
#[derive(Clone, Debug, PartialEq)]
pub struct ToolEntry {
    /// The name clients call.
    pub name: String,
    /// Whether its calls become tasks.
    pub mode: TaskMode,
    /// Its `tools/list` entry (`name`, `inputSchema`, `description`, ...).
    pub listing: Value,
}

/// What the dispatcher needs to know about the server it decides for.
#[derive(Clone, Debug)]
pub struct DispatcherConfig {
    /// `serverInfo.name` advertised by `server/discover`.
    pub server_name: String,
    /// `serverInfo.version` advertised by `server/discover`.
    pub server_version: String,
    /// The largest accepted HTTP body; a host reads at most this many bytes plus one.
    pub max_body_bytes: usize,
    /// The mode of tools the dispatcher has no entry for: `None` refuses them (-32602, a host
    /// that serves its own tools), `Some(mode)` routes them with that mode (an SDK adapter whose
    /// SDK owns the tool list).
    pub default_mode: Option<TaskMode>,
    /// An SDK serves every request that is not the extension's: [`Dispatcher::handle_http`]
    /// answers [`Decision::Delegate`] for them instead of refusing them (the TypeScript server,
    /// whose SDK owns `server/discover`, `tools/list`, resources, prompts and 2025-era traffic).
    pub delegate: bool,
}

impl Default for DispatcherConfig {
    fn default() -> Self {
        Self {
            server_name: "mcp-tasks".to_owned(),
            server_version: env!("CARGO_PKG_VERSION").to_owned(),
            max_body_bytes: DEFAULT_MAX_BODY_BYTES,
            default_mode: None,
            delegate: false,
        }
    }
}

/// The only request headers the dispatcher reads (lower case): an adapter may hand it just
/// these, in any case, instead of every header the request carried.
pub const READ_HEADERS: &[&str] = &["mcp-protocol-version", "mcp-method", "mcp-name", "accept", "content-type"];

/// The request headers the dispatcher reads, as `(name, value)` pairs in any case. Repeated
/// names are kept, so a repeated standard header can be refused instead of one copy winning.
#[derive(Clone, Copy, Debug, Default)]
pub struct Headers<'a>(pub &'a [(&'a str, &'a str)]);

impl<'a> Headers<'a> {
    /// The value of `name`; a repeated standard header is -32020.
    fn single(&self, name: &str) -> Result<Option<&'a str>, ProtocolError> {
        debug_assert!(READ_HEADERS.contains(&name), "{name} is read but not listed in READ_HEADERS");
        let mut values = self.0.iter().filter(|(n, _)| n.eq_ignore_ascii_case(name)).map(|(_, v)| *v);
        let first = values.next();
        if values.next().is_some() {
            return Err(ProtocolError::HeaderMismatch(format!("{name} header appears more than once")));
        }
        Ok(first)
    }

    fn standard(&self) -> Result<StandardHeaders<'a>, ProtocolError> {
        Ok(StandardHeaders {
            protocol_version: self.single("mcp-protocol-version")?,
            method: self.single("mcp-method")?,
            name: self.single("mcp-name")?,
        })
    }

    /// `None` when the request says its body is JSON (`Content-Type: application/json`, any
    /// case, parameters such as `charset` aside), else what it says instead. Both SDKs refuse
    /// anything else before reading the body; so does the dispatcher, for every server alike.
    fn unless_json(&self) -> Option<String> {
        debug_assert!(READ_HEADERS.contains(&"content-type"), "content-type is read but not listed in READ_HEADERS");
        let mut values = self.0.iter().filter(|(n, _)| n.eq_ignore_ascii_case("content-type")).map(|(_, v)| *v);
        let Some(first) = values.next() else { return Some("the request has no Content-Type".to_owned()) };
        // One media type in one header: Content-Type is a singleton field (RFC 9110, 5.3), and
        // an SDK behind core reads a repeated one as the values joined by ", " and refuses that
        // (the TypeScript SDK's `isJsonContentType`), so core refuses it first on every server.
        if values.next().is_some() {
            return Some("it has more than one Content-Type header".to_owned());
        }
        let json = !lists_outside_quotes(first)
            && first.split(';').next().is_some_and(|essence| essence.trim().eq_ignore_ascii_case("application/json"));
        (!json).then(|| format!("its Content-Type is {first:?}"))
    }

    /// `None` when the client accepts `text/event-stream` (no `Accept` header, or one naming
    /// it, `text/*` or `*/*`), else what it accepts instead. Of repeated `Accept` headers the
    /// first decides: Starlette, under mcp, reads only that one, and every server must agree.
    fn unless_sse(&self) -> Option<String> {
        let (_, accepted) = self.0.iter().find(|(n, _)| n.eq_ignore_ascii_case("accept"))?;
        let sse = accepted.split(',').any(|range| {
            let essence = range.split(';').next().unwrap_or_default().trim();
            ["text/event-stream", "text/*", "*/*"].iter().any(|ok| essence.eq_ignore_ascii_case(ok))
        });
        (!sse).then(|| format!("it accepts {accepted:?}"))
    }

    /// True when the client accepts SSE but not JSON: its replies then go as a one-event stream.
    fn wants_sse_only(&self) -> bool {
        debug_assert!(READ_HEADERS.contains(&"accept"), "accept is read but not listed in READ_HEADERS");
        self.0.iter().filter(|(n, _)| n.eq_ignore_ascii_case("accept")).any(|(_, accept)| {
            accept.contains("text/event-stream") && !accept.contains("application/json") && !accept.contains("*/*")
        })
    }
}

/// One HTTP request as a host received it.
#[derive(Clone, Copy, Debug)]
pub struct HttpRequest<'a> {
    /// The HTTP method (`POST`, `GET`, ...).
    pub method: &'a str,
    /// The request headers.
    pub headers: Headers<'a>,
    /// The body, or `None` when it was longer than [`DispatcherConfig::max_body_bytes`].
    pub body: Option<&'a [u8]>,
}

/// An HTTP reply the adapter sends as it is.
#[derive(Clone, Debug, PartialEq)]
pub struct Reply {
    /// The HTTP status.
    pub status: u16,
    /// The JSON-RPC message, serialized once, or `None` for an empty body (202 for
    /// notifications, 405).
    json: Option<String>,
    /// Send the message as a one-event `text/event-stream` instead of `application/json`.
    pub sse: bool,
    /// Extra headers (`Allow` on a 405).
    pub headers: Vec<(&'static str, &'static str)>,
}

impl Reply {
    fn empty(status: u16) -> Self {
        Self { status, json: None, sse: false, headers: Vec::new() }
    }

    /// A reply carrying `message` (a full JSON-RPC message).
    fn with(status: u16, message: &impl Serialize, sse: bool) -> Self {
        let json = serde_json::to_string(message).expect("protocol messages serialize");
        Self { status, json: Some(json), sse, headers: Vec::new() }
    }

    /// The JSON-RPC message as JSON text, or `None` for an empty body.
    pub fn json(&self) -> Option<&str> {
        self.json.as_deref()
    }

    /// The JSON-RPC message as a value (parsed again: for inspection and tests; adapters send
    /// [`Reply::body`]).
    pub fn message(&self) -> Option<Value> {
        self.json.as_deref().map(|json| serde_json::from_str(json).expect("a reply holds valid JSON"))
    }

    /// The body as bytes (empty for an empty body), in the chosen framing.
    pub fn body(&self) -> Vec<u8> {
        match &self.json {
            None => Vec::new(),
            Some(json) if self.sse => sse_frame(json).into_bytes(),
            Some(json) => json.clone().into_bytes(),
        }
    }

    /// [`Reply::body`] without copying the message.
    pub fn into_body(self) -> Vec<u8> {
        match self.json {
            None => Vec::new(),
            Some(json) if self.sse => sse_frame(&json).into_bytes(),
            Some(json) => json.into_bytes(),
        }
    }

    /// Every header to send: the `Content-Type` of [`Reply::body`] (when there is one), then
    /// [`Reply::headers`]. Names are lower case.
    pub fn all_headers(&self) -> impl Iterator<Item = (&'static str, &'static str)> + '_ {
        self.content_type().map(|ct| ("content-type", ct)).into_iter().chain(self.headers.iter().copied())
    }

    /// The `Content-Type` of [`Reply::body`], if it has one.
    pub fn content_type(&self) -> Option<&'static str> {
        match (&self.json, self.sse) {
            (None, _) => None,
            (Some(_), true) => Some("text/event-stream"),
            (Some(_), false) => Some("application/json"),
        }
    }
}

/// One SSE event carrying `message` (the framing of every stream a server sends).
pub fn sse_event(message: &Value) -> String {
    sse_frame(&message.to_string())
}

/// [`sse_event`] of a message already serialized.
fn sse_frame(json: &str) -> String {
    format!("event: message\ndata: {json}\n\n")
}

/// A JSON-RPC success response written straight from borrowed parts: the same bytes as
/// [`response`]'s value serialized, without building the value first.
#[derive(Serialize)]
struct ResponseRef<'a, T: Serialize> {
    jsonrpc: &'static str,
    id: &'a RequestId,
    result: T,
}

/// `tasks/get`'s result borrowed from the record: the same fields, in the same order, as
/// [`get_result`] of [`TaskRecord::to_detailed`] (the flattened `GetTaskResult`), without
/// copying the record's result, input requests or error into a [`DetailedTask`] and then into a
/// value. `tasks/get` is the request a polling client repeats.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct GetTaskResultRef<'a> {
    result_type: ResultType,
    task_id: &'a str,
    status: TaskStatus,
    #[serde(skip_serializing_if = "Option::is_none")]
    status_message: Option<&'a str>,
    created_at: String,
    last_updated_at: String,
    ttl_ms: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    poll_interval_ms: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    input_requests: Option<&'a InputRequests>,
    #[serde(skip_serializing_if = "Option::is_none")]
    result: Option<&'a Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<&'a RpcError>,
}

impl<'a> GetTaskResultRef<'a> {
    fn new(task: &'a TaskRecord) -> Self {
        Self {
            result_type: ResultType::Complete,
            task_id: &task.id,
            status: task.status,
            status_message: task.status_message.as_deref(),
            created_at: format_ms(task.created_at_ms),
            last_updated_at: format_ms(task.updated_at_ms),
            ttl_ms: task.ttl_ms,
            poll_interval_ms: task.poll_interval_ms,
            input_requests: (task.status == TaskStatus::InputRequired).then_some(&*task.input_requests),
            result: if task.status == TaskStatus::Completed { task.result.as_deref() } else { None },
            error: if task.status == TaskStatus::Failed { task.error.as_deref() } else { None },
        }
    }
}

/// What the dispatcher decided about an HTTP request.
#[derive(Clone, Debug, PartialEq)]
#[allow(clippy::large_enum_variant)] // built once per request and consumed at once
pub enum Decision {
    /// Send this reply; nothing else happens.
    Reply(Reply),
    /// Perform [`Routed::route`] for [`Routed::principal`], then reply through its [`Routed::reply`].
    Route(Routed),
    /// Hand the request, unchanged, to the SDK the dispatcher sits in front of (only with
    /// [`DispatcherConfig::delegate`]): it is not the extension's traffic, a listen whose filter
    /// names no tasks but other events, or 2025-era traffic.
    Delegate,
    /// Hand this synchronous `tools/call` to the SDK (only with [`DispatcherConfig::delegate`]).
    /// The SDK answers some of its refusals in its own way (an unknown tool with HTTP 200, a
    /// tool's protocol error as a result), so before and after it the adapter answers these from
    /// the table instead: [`ReplyTo::unknown_tool`] when the SDK does not serve `tool`, and
    /// [`ReplyTo::tool_error`] for a protocol error the tool raised.
    DelegateCall {
        /// The tool called.
        tool: String,
        /// How to answer the request in the SDK's stead.
        reply: ReplyTo,
    },
}

/// True when `value` has a comma outside its quoted strings (a parameter value may hold one): a
/// list of media types, not one. A scan, not a copy: it runs on every request.
fn lists_outside_quotes(value: &str) -> bool {
    let (mut quoted, mut escaped) = (false, false);
    for c in value.chars() {
        match (quoted, escaped, c) {
            (true, true, _) => escaped = false,
            (true, false, '\\') => escaped = true,
            (_, false, '"') => quoted = !quoted,
            (false, _, ',') => return true,
            _ => {}
        }
    }
    false
}

/// What the dispatcher decided about one message of the stdio transport (newline-delimited
/// JSON-RPC on a child process's stdin and stdout, MCP 2026-07-28 "Transports").
#[derive(Clone, Debug, PartialEq)]
#[allow(clippy::large_enum_variant)] // built once per message and consumed at once
pub enum StdioDecision {
    /// Write this JSON-RPC message (a response or an error) as one line; nothing else happens.
    Reply(Value),
    /// Perform [`Routed::route`], then write the message of the [`Reply`] its [`Routed::reply`] builds
    /// (or stream the listen).
    Route(Routed),
    /// `notifications/cancelled` for this earlier request: stop it (a listen stream ends there,
    /// with no response: the client asked to stop).
    Cancel(RequestId),
    /// A notification or a response: nothing to answer.
    Ignore,
    /// Hand the line, unchanged, to the SDK the dispatcher sits in front of (only with
    /// [`DispatcherConfig::delegate`]): as over HTTP, what is not the extension's traffic, a
    /// synchronous `tools/call`, a listen for the SDK's own events, and 2025-era traffic.
    Delegate,
}

/// A request routed to one engine operation.
#[derive(Clone, Debug, PartialEq)]
pub struct Routed {
    /// How to answer it: its id and framing, kept apart from the route, so an adapter can move
    /// the route into the engine and still reply.
    pub reply: ReplyTo,
    /// The caller the operation runs for.
    pub principal: String,
    /// What to do.
    pub route: Route,
    /// The caller's W3C trace context from `params._meta` (SEP-414), when valid: a task
    /// created by this request keeps it, and the request's span is its child.
    pub trace: Option<crate::trace::TraceContext>,
}

/// The replies to one routed request ([`Routed::reply`]).
#[derive(Clone, Debug, PartialEq)]
pub struct ReplyTo {
    /// The JSON-RPC request id.
    pub id: RequestId,
    /// Reply as a one-event SSE stream.
    pub sse: bool,
}

impl ReplyTo {
    /// The reply carrying `result` (a full result object: use the builders of this module).
    pub fn result(&self, result: Value) -> Reply {
        self.result_of(&result)
    }

    /// [`ReplyTo::result`] of a result that is one of this crate's types (a
    /// `CreateTaskResult`): serialized once, without a [`Value`] of it first.
    pub fn result_of(&self, result: &impl Serialize) -> Reply {
        Reply::with(200, &ResponseRef { jsonrpc: "2.0", id: &self.id, result }, self.sse)
    }

    /// The reply to `tasks/get` showing `task` (the record the engine read for the caller):
    /// the same message as [`ReplyTo::result`] of [`get_result`], serialized from the record.
    pub fn task(&self, task: &TaskRecord) -> Reply {
        self.result_of(&GetTaskResultRef::new(task))
    }

    /// The reply carrying a protocol error, with its status from the error table.
    pub fn error(&self, error: &ProtocolError) -> Reply {
        error_reply(Some(&self.id), error, self.sse)
    }

    /// The reply carrying an error a tool raised while running synchronously.
    pub fn tool_error(&self, error: &RpcError) -> Reply {
        Reply::with(200, &error_response(Some(&self.id), error), self.sse)
    }

    /// The reply to a `tools/call` of a tool the server does not serve: the error every server
    /// answers ([`unknown_tool`]).
    pub fn unknown_tool(&self, tool: &str) -> Reply {
        self.error(&unknown_tool(tool))
    }

    /// The framer of this request's listen stream.
    pub fn listen_frames(&self) -> ListenFrames {
        ListenFrames { id: self.id.clone() }
    }
}

impl ToolCallRoute {
    /// The call as a task keeps it for a later attempt or a separate worker, with `state` the
    /// MRTR state the request's `requestState` opened to.
    pub fn stored(&self, state: Option<Value>) -> StoredCall {
        StoredCall {
            arguments: self.arguments.clone(),
            input_responses: self.input_responses.clone(),
            state,
            envelope: Some(self.envelope.clone()),
        }
    }
}

/// The engine operation a request needs.
#[derive(Clone, Debug, PartialEq)]
pub enum Route {
    /// `tools/call`: run the MRTR phase, then the tool as [`ToolCallRoute::dispatch`] says.
    CallTool(Box<ToolCallRoute>),
    /// `tasks/get`: answer [`get_result`] with the task.
    GetTask {
        /// The task.
        task_id: String,
    },
    /// `tasks/update`: deliver the answers, then answer [`ack_result`].
    UpdateTask {
        /// The task.
        task_id: String,
        /// The answers (each an object).
        input_responses: InputResponses,
    },
    /// `tasks/cancel`: cancel, then answer [`ack_result`].
    CancelTask {
        /// The task.
        task_id: String,
    },
    /// `subscriptions/listen`: subscribe, then stream with [`ListenFrames`].
    Listen {
        /// `notifications.taskIds`, or `None` when the filter names no tasks (the listen then
        /// belongs to the SDK, or gets an acknowledgement and an immediate close from a host
        /// that serves no other events).
        task_ids: Option<Vec<String>>,
        /// The rest of the filter, untouched.
        other: Map<String, Value>,
    },
}

/// A routed `tools/call`.
#[derive(Clone, Debug, PartialEq)]
pub struct ToolCallRoute {
    /// The tool's name.
    pub name: String,
    /// Synchronous, or a task.
    pub dispatch: Dispatch,
    /// The arguments object.
    pub arguments: Map<String, Value>,
    /// MRTR answers of this round.
    pub input_responses: Option<InputResponses>,
    /// The sealed MRTR state of the previous round, still to be opened.
    pub request_state: Option<String>,
    /// The request's `_meta` envelope.
    pub envelope: Envelope,
}

/// Decides every request of one server.
#[derive(Clone, Debug)]
pub struct Dispatcher {
    config: DispatcherConfig,
    tools: BTreeMap<String, ToolEntry>,
    /// `tools/list` order: registration order.
    order: Vec<String>,
}

impl Dispatcher {
    /// A dispatcher with no tools.
    pub fn new(config: DispatcherConfig) -> Self {
        Self { config, tools: BTreeMap::new(), order: Vec::new() }
    }

    /// Adds or replaces a tool.
    pub fn add_tool(&mut self, tool: ToolEntry) {
        if !self.tools.contains_key(&tool.name) {
            self.order.push(tool.name.clone());
        }
        self.tools.insert(tool.name.clone(), tool);
    }

    /// The configuration.
    pub fn config(&self) -> &DispatcherConfig {
        &self.config
    }

    /// The task mode of `tool`: its own, else the default; `None` when the tool is unknown and
    /// there is no default.
    pub fn tool_mode(&self, tool: &str) -> Option<TaskMode> {
        self.tools.get(tool).map(|t| t.mode).or(self.config.default_mode)
    }

    /// Decides one Streamable HTTP request. `principal` is the caller the host's auth derived
    /// from the request; `None` answers 401 (after the body was found to be a request, so
    /// malformed bodies get their own error first).
    pub fn handle_http(&self, request: &HttpRequest<'_>, principal: Option<&str>) -> Decision {
        self.handle_http_with(request, principal, &|_| true)
    }

    /// [`Dispatcher::handle_http`] for an adapter that knows which tools its SDK serves:
    /// `sdk_serves(tool)` says whether a tool without an entry of its own exists, and a call of
    /// one that does not is refused as an unknown tool, as the Rust host refuses it.
    pub fn handle_http_with(
        &self,
        request: &HttpRequest<'_>,
        principal: Option<&str>,
        sdk_serves: &dyn Fn(&str) -> bool,
    ) -> Decision {
        let delegate = self.config.delegate;
        if delegate && !request.method.eq_ignore_ascii_case("POST") {
            return Decision::Delegate;
        }
        if !request.method.eq_ignore_ascii_case("POST") {
            // This revision has no sessions: GET (a standalone stream) and DELETE are refused.
            let mut reply = Reply::empty(405);
            reply.headers.push(("allow", "POST"));
            return Decision::Reply(reply);
        }
        let sse = request.headers.wants_sse_only();
        if let Some(said) = request.headers.unless_json() {
            return Decision::Reply(error_reply(None, &ProtocolError::UnsupportedMediaType(said), sse));
        }
        let Some(body) = request.body else {
            let error = ProtocolError::BodyTooLarge { limit: self.config.max_body_bytes };
            return Decision::Reply(error_reply(None, &error, sse));
        };
        let (id, method, params) = match request::decode(body) {
            Ok(Incoming::Request { id, method, params }) => (id, method, params),
            // 2025-era notifications and responses are the SDK's (its legacy sessions use them).
            Ok(Incoming::Notification { params, .. })
                if delegate && !self.claims_envelope(params.as_ref(), request.headers) =>
            {
                return Decision::Delegate;
            }
            Ok(Incoming::Response) if delegate && !self.claims_envelope(None, request.headers) => {
                return Decision::Delegate;
            }
            // Notifications and responses get no JSON-RPC answer: the 2026-07-28 core defines no
            // client-to-server notification over HTTP (a client cancels by closing the stream),
            // so one is accepted and dropped, as mcp 2.3.0 does, whatever its headers say.
            Ok(Incoming::Notification { .. } | Incoming::Response) => return Decision::Reply(Reply::empty(202)),
            Err(e) => return Decision::Reply(error_reply(e.id.as_ref(), &e.error, sse)),
        };
        if method == "subscriptions/listen"
            && let Some(accepts) = request.headers.unless_sse()
        {
            // Both SDKs refuse it (406) before anything else; so does every server of ours.
            return Decision::Reply(error_reply(Some(&id), &ProtocolError::NotAcceptable(accepts), false));
        }
        if delegate {
            match self.delegation(&method, params.as_ref(), Some(request.headers)) {
                Ok(true) => return Decision::Delegate,
                Ok(false) => {}
                Err(error) => return Decision::Reply(error_reply(Some(&id), &error, sse)),
            }
        }
        let Some(principal) = principal else {
            let mut reply = error_reply(Some(&id), &ProtocolError::InvalidRequest("unauthorized".into()), false);
            reply.status = 401;
            return Decision::Reply(reply);
        };
        let routed = match self.route_with(&method, params.as_ref(), Some(request.headers), sdk_serves) {
            // The SDK runs synchronous calls and serves listens for its own events.
            Ok(Routing::Route(Route::CallTool(call))) if delegate && call.dispatch == Dispatch::Sync => {
                return Decision::DelegateCall { tool: call.name, reply: ReplyTo { id, sse } };
            }
            Ok(Routing::Route(route)) if delegate && route.is_sdk_listen() => return Decision::Delegate,
            Ok(Routing::Route(route)) => route,
            Ok(Routing::Answer(result)) => {
                return Decision::Reply(Reply::with(200, &ResponseRef { jsonrpc: "2.0", id: &id, result }, sse));
            }
            Err(error) => return Decision::Reply(error_reply(Some(&id), &error, sse)),
        };
        let trace = crate::trace::TraceContext::from_params(params.as_ref());
        Decision::Route(Routed { reply: ReplyTo { id, sse }, principal: principal.to_owned(), route: routed, trace })
    }

    /// How core would frame an answer to a delegated request (its id, SSE for a client that
    /// accepts only SSE): for an adapter that answers in its SDK's stead after the SDK served the
    /// request. `None` for anything but a JSON-RPC request, and for a listen, which is a stream.
    pub fn reply_to(&self, request: &HttpRequest<'_>) -> Option<ReplyTo> {
        match request::decode(request.body?) {
            Ok(Incoming::Request { id, method, .. }) if method != "subscriptions/listen" => {
                Some(ReplyTo { id, sse: request.headers.wants_sse_only() })
            }
            _ => None,
        }
    }

    /// Whether a request belongs to the SDK before [`Dispatcher::route`] looks at it: methods
    /// outside the extension, and 2025-era traffic (no envelope claim) other than `tasks/*`,
    /// whose namespace the extension owns in every era. A 2025-era `tools/call` of a
    /// task-required tool is refused here (-32021), since the SDK knows nothing of modes.
    fn delegation(
        &self,
        method: &str,
        params: Option<&Value>,
        headers: Option<Headers<'_>>,
    ) -> Result<bool, ProtocolError> {
        // On stdio (no headers) the envelope in `_meta` alone claims the 2026-07-28 revision.
        let claims = match headers {
            Some(headers) => self.claims_envelope(params, headers),
            None => negotiation::claims_envelope(params, None),
        };
        let parsed = match Method::parse(method) {
            // The extension owns the `tasks/` namespace: the removed `tasks/list` and
            // `tasks/result` are core's -32601, as on every other server.
            None if method.starts_with("tasks/") => return Ok(false),
            None | Some(Method::Discover | Method::ToolsList) => {
                // The SDK's, once the transport rules every 2026-07-28 request follows hold: an
                // SDK may route by the version header alone (mcp 2.3.0 takes a request without
                // it to its 2025 path), so these are checked here, the same on every server.
                if claims {
                    let envelope = negotiation::parse_envelope_shape(params)?;
                    if let Some(headers) = headers {
                        headers::validate(method, params, envelope.protocol_version, headers.standard()?)?;
                    }
                    negotiation::check_version(envelope.protocol_version)?;
                }
                return Ok(true);
            }
            Some(parsed) => parsed,
        };
        if claims {
            return Ok(false);
        }
        match parsed {
            Method::ToolsCall => {
                let name = params.and_then(|p| p.get("name")).and_then(Value::as_str).unwrap_or_default();
                self.legacy_tool_call(name)?;
                Ok(true)
            }
            Method::SubscriptionsListen => Ok(true),
            _ => Ok(false),
        }
    }

    /// Whether a request is core's to answer rather than an SDK's legacy path: it claims the
    /// 2026-07-28 envelope ([`negotiation::claims_envelope`]), or its `MCP-Protocol-Version`
    /// header is repeated or names no revision a legacy path serves
    /// ([`negotiation::LEGACY_VERSIONS`]). Those an SDK would refuse in its own words (HTTP 400
    /// with `"id": null`, or plain text from rmcp); core refuses them from its table instead, as
    /// the Rust host does, so every server answers them alike.
    fn claims_envelope(&self, params: Option<&Value>, headers: Headers<'_>) -> bool {
        match headers.single("mcp-protocol-version") {
            Err(_) => true,
            Ok(Some(version)) if !negotiation::LEGACY_VERSIONS.contains(&version.trim()) => true,
            Ok(header) => negotiation::claims_envelope(params, header),
        }
    }

    /// Decides one line received on the stdio transport for `principal` (the process at the
    /// other end of the pipe: stdio has no per-request authentication). The Streamable HTTP
    /// header rules do not apply; everything else is as over HTTP, including the body limit:
    /// `line` is `None` when the host stopped reading it past the limit, as
    /// [`HttpRequest::body`] is.
    pub fn handle_stdio(&self, line: Option<&[u8]>, principal: &str) -> StdioDecision {
        self.handle_stdio_with(line, principal, &|_| true)
    }

    /// [`Dispatcher::handle_stdio`] for an adapter in front of an SDK that knows which tools the
    /// SDK serves (see [`Dispatcher::handle_http_with`]).
    pub fn handle_stdio_with(
        &self,
        line: Option<&[u8]>,
        principal: &str,
        sdk_serves: &dyn Fn(&str) -> bool,
    ) -> StdioDecision {
        let delegate = self.config.delegate;
        let refuse =
            |id: Option<&RequestId>, error: &ProtocolError| StdioDecision::Reply(error_response(id, &error.to_rpc()));
        let Some(line) = line.filter(|l| l.len() <= self.config.max_body_bytes) else {
            return refuse(None, &ProtocolError::BodyTooLarge { limit: self.config.max_body_bytes });
        };
        let (id, method, params) = match request::decode(line) {
            Ok(Incoming::Request { id, method, params }) => (id, method, params),
            Ok(Incoming::Notification { method, params }) if method == "notifications/cancelled" => {
                let id = params.as_ref().and_then(|p| p.get("requestId")).cloned();
                return match id.map(serde_json::from_value::<RequestId>) {
                    Some(Ok(id)) => StdioDecision::Cancel(id),
                    _ => StdioDecision::Ignore,
                };
            }
            // The SDK's, behind a delegating dispatcher (`notifications/initialized`, ...).
            Ok(Incoming::Notification { .. } | Incoming::Response) if delegate => return StdioDecision::Delegate,
            Ok(Incoming::Notification { .. } | Incoming::Response) => return StdioDecision::Ignore,
            Err(e) => return refuse(e.id.as_ref(), &e.error),
        };
        if delegate {
            match self.delegation(&method, params.as_ref(), None) {
                Ok(true) => return StdioDecision::Delegate,
                Ok(false) => {}
                Err(error) => return refuse(Some(&id), &error),
            }
        }
        match self.route_with(&method, params.as_ref(), None, sdk_serves) {
            Ok(Routing::Route(Route::CallTool(call))) if delegate && call.dispatch == Dispatch::Sync => {
                StdioDecision::Delegate
            }
            Ok(Routing::Route(route)) if delegate && route.is_sdk_listen() => StdioDecision::Delegate,
            Ok(Routing::Answer(result)) => StdioDecision::Reply(response(&id, result)),
            Ok(Routing::Route(route)) => StdioDecision::Route(Routed {
                reply: ReplyTo { id, sse: false },
                principal: principal.to_owned(),
                route,
                trace: crate::trace::TraceContext::from_params(params.as_ref()),
            }),
            Err(error) => refuse(Some(&id), &error),
        }
    }

    /// Decides a request whose JSON-RPC framing is already parsed: the method, its params
    /// (with `_meta`) and the HTTP headers it came with. Answers what needs no engine
    /// (`server/discover`, `tools/list`) at once, routes the rest, or refuses with the error
    /// the table gives.
    ///
    /// `headers` is `None` on a transport without HTTP headers (stdio), where the
    /// Streamable HTTP header rules do not apply.
    pub fn route(
        &self,
        method: &str,
        params: Option<&Value>,
        headers: Option<Headers<'_>>,
    ) -> Result<Routing, ProtocolError> {
        self.route_with(method, params, headers, &|_| true)
    }

    /// [`Dispatcher::route`] for an adapter that knows which tools its SDK serves (see
    /// [`Dispatcher::handle_http_with`]).
    pub fn route_with(
        &self,
        method: &str,
        params: Option<&Value>,
        headers: Option<Headers<'_>>,
        sdk_serves: &dyn Fn(&str) -> bool,
    ) -> Result<Routing, ProtocolError> {
        let parsed = Method::parse(method).ok_or_else(|| ProtocolError::MethodNotFound(method.to_owned()))?;
        // The rules' order is mcp 2.3.0's (`shared/inbound.py`): the envelope's shape, then the
        // headers, then the version, so a client that disagrees with itself is told so rather
        // than told its version is unsupported.
        let envelope = negotiation::parse_envelope_shape(params)?;
        if let Some(headers) = headers {
            headers::validate(method, params, envelope.protocol_version, headers.standard()?)?;
        }
        negotiation::check_version(envelope.protocol_version)?;
        let route = match parsed {
            Method::Discover => return Ok(Routing::Answer(self.discover())),
            Method::ToolsList => return Ok(Routing::Answer(self.tools_list())),
            Method::ToolsCall => Route::CallTool(Box::new(self.route_tool_call(params, envelope, sdk_serves)?)),
            Method::TasksGet => {
                envelope.require_tasks(method)?;
                Route::GetTask { task_id: request::task_id_params(params, method)?.task_id }
            }
            Method::TasksUpdate => {
                envelope.require_tasks(method)?;
                let p = request::update_params(params)?;
                Route::UpdateTask { task_id: p.task_id, input_responses: p.input_responses }
            }
            Method::TasksCancel => {
                envelope.require_tasks(method)?;
                Route::CancelTask { task_id: request::task_id_params(params, method)?.task_id }
            }
            Method::SubscriptionsListen => {
                let filter = request::listen_params(params)?.notifications;
                if filter.task_ids.is_some() {
                    envelope.require_tasks("subscriptions/listen with taskIds")?;
                }
                Route::Listen { task_ids: filter.task_ids, other: filter.other }
            }
        };
        Ok(Routing::Route(route))
    }

    /// Decides a `tools/call` that an SDK received under an earlier protocol revision (one
    /// without the per-request `_meta` envelope). The extension is undefined there (SEP-2663,
    /// "Backward Compatibility"), so the call runs synchronously, and a task-required tool is
    /// refused with -32021.
    pub fn legacy_tool_call(&self, tool: &str) -> Result<Dispatch, ProtocolError> {
        negotiation::decide(self.tool_mode(tool).unwrap_or_default(), false)
    }

    fn route_tool_call(
        &self,
        params: Option<&Value>,
        envelope: EnvelopeRef<'_>,
        sdk_serves: &dyn Fn(&str) -> bool,
    ) -> Result<ToolCallRoute, ProtocolError> {
        let params = request::call_tool_params(params)?;
        let own = self.tools.get(&params.name).map(|t| t.mode);
        let mode = own
            .or_else(|| self.config.default_mode.filter(|_| sdk_serves(&params.name)))
            .ok_or_else(|| unknown_tool(&params.name))?;
        let dispatch = negotiation::decide(mode, envelope.declares_tasks())?;
        Ok(ToolCallRoute {
            name: params.name,
            dispatch,
            arguments: params.arguments,
            input_responses: params.input_responses,
            request_state: params.request_state,
            envelope: envelope.to_envelope(),
        })
    }

    fn discover(&self) -> Value {
        let mut meta = Map::new();
        meta.insert(
            META_SERVER_INFO.to_owned(),
            json!({ "name": self.config.server_name, "version": self.config.server_version }),
        );
        to_value(DiscoverResult {
            result_type: ResultType::Complete,
            supported_versions: SUPPORTED_VERSIONS.iter().map(|v| (*v).to_owned()).collect(),
            capabilities: negotiation::server_capabilities(),
            ttl_ms: LISTING_TTL_MS,
            cache_scope: "public".to_owned(),
            instructions: None,
            meta: Some(meta),
        })
    }

    fn tools_list(&self) -> Value {
        let tools: Vec<&Value> = self.order.iter().map(|name| &self.tools[name].listing).collect();
        json!({
            "resultType": "complete",
            "tools": tools,
            // The tool set is fixed for the server's life and the same for every caller.
            "ttlMs": LISTING_TTL_MS,
            "cacheScope": "public",
        })
    }
}

/// The principal a task is bound to when an SDK's auth names the client: `client:{id}`, or
/// `anonymous` for a server without auth (every caller then shares the one principal).
pub fn default_principal(client_id: Option<&str>) -> String {
    client_id.map_or_else(|| "anonymous".to_owned(), |id| format!("client:{id}"))
}

/// The error of a `tools/call` naming a tool the server does not serve (-32602, HTTP 400), the
/// same from every server.
pub fn unknown_tool(tool: &str) -> ProtocolError {
    ProtocolError::InvalidParams(format!("Unknown tool: {tool}"))
}

impl Route {
    /// The JSON-RPC method this route serves.
    pub fn method(&self) -> &'static str {
        match self {
            Self::CallTool(_) => "tools/call",
            Self::GetTask { .. } => "tasks/get",
            Self::UpdateTask { .. } => "tasks/update",
            Self::CancelTask { .. } => "tasks/cancel",
            Self::Listen { .. } => "subscriptions/listen",
        }
    }

    /// A listen an SDK behind a delegating dispatcher serves: its filter names no tasks but
    /// other events. One that names nothing at all is answered here (an acknowledgement of the
    /// empty filter and the end of the stream), on every server alike.
    pub fn is_sdk_listen(&self) -> bool {
        matches!(self, Self::Listen { task_ids: None, other } if !other.is_empty())
    }
}

/// The outcome of [`Dispatcher::route`].
#[derive(Clone, Debug, PartialEq)]
pub enum Routing {
    /// The full result to answer with; no engine operation is needed.
    Answer(Value),
    /// The engine operation to perform.
    Route(Route),
}

/// The reply carrying `error`, with the HTTP status of its row in the error table.
pub fn error_reply(id: Option<&RequestId>, error: &ProtocolError, sse: bool) -> Reply {
    Reply::with(error.http_status(), &error_response(id, &error.to_rpc()), sse)
}

/// The `tasks/get` result carrying `task`.
pub fn get_result(task: DetailedTask) -> Value {
    to_value(GetTaskResult { result_type: ResultType::Complete, task })
}

/// The acknowledgement `tasks/update` and `tasks/cancel` answer with.
pub fn ack_result() -> Value {
    to_value(AckResult::new())
}

/// The MRTR `input_required` result of a `tools/call` round (no task exists yet), or -32021 when
/// the round asks for input the request's client did not declare it can answer
/// ([`check_input_requests`](crate::negotiation::check_input_requests)).
pub fn input_required_result(
    envelope: &Envelope,
    input_requests: InputRequests,
    sealed_state: Option<String>,
) -> Result<Value, ProtocolError> {
    envelope.check_input_requests(&input_requests)?;
    Ok(to_value(InputRequiredResult {
        result_type: ResultType::InputRequired,
        input_requests: Some(input_requests),
        request_state: sealed_state,
    }))
}

/// The Streamable HTTP request that makes a stored call again: headers (lower-case names) and
/// the JSON-RPC `tools/call` body (id `id`; the tool, its arguments, its MRTR answers, and the
/// client's envelope as `_meta`). For an adapter whose tool code runs behind an SDK's own
/// handler (the TypeScript server, an rmcp server), so a later attempt, or a separate worker,
/// runs the tool as the first call did.
///
/// The envelope is the client's without the tasks extension: the exchange runs the tool inside
/// its task, and an SDK that makes tasks itself (rmcp's `TaskManager`) must run it, not make a
/// second, in-memory task of it.
pub fn call_request(tool: &str, call: &StoredCall, id: u64) -> (Vec<(&'static str, String)>, Value) {
    let mut params = Map::new();
    params.insert("name".into(), Value::String(tool.to_owned()));
    params.insert("arguments".into(), Value::Object(call.arguments.clone()));
    if let Some(responses) = &call.input_responses {
        params.insert("inputResponses".into(), Value::Object(responses.clone()));
    }
    let mut envelope = call
        .envelope
        .clone()
        .unwrap_or_else(|| Envelope { protocol_version: PROTOCOL_VERSION.to_owned(), ..Envelope::default() });
    if let Some(Value::Object(extensions)) = envelope.client_capabilities.get_mut("extensions") {
        extensions.remove(crate::EXTENSION_ID);
        if extensions.is_empty() {
            envelope.client_capabilities.remove("extensions");
        }
    }
    params.insert("_meta".into(), Value::Object(envelope.to_meta()));
    let headers = vec![
        ("content-type", "application/json".to_owned()),
        ("accept", "application/json, text/event-stream".to_owned()),
        ("mcp-protocol-version", envelope.protocol_version.clone()),
        ("mcp-method", "tools/call".to_owned()),
        ("mcp-name", headers::encode_value(tool)),
    ];
    (headers, json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": params}))
}

/// What an SDK's answer to a [`call_request`] exchange means for the task that ran it
/// ([`read_call_answer`]).
#[derive(Clone, Debug, PartialEq)]
pub enum CallAnswer {
    /// The tool's `CallToolResult` (an `isError` one included): complete the task with it.
    Complete(Value),
    /// A JSON-RPC error: fail the task with it.
    Failed(RpcError),
    /// The tool asked for input (`resultType: "input_required"`): the task waits for these, and
    /// the next exchange carries the answers ([`CallAnswer::next_round`]).
    InputRequired {
        /// The requests to put in the task's `inputRequests`.
        input_requests: InputRequests,
        /// The `requestState` to send back with the answers, when the tool gave one.
        request_state: Option<Value>,
    },
}

impl CallAnswer {
    /// The `tools/call` params that carry `answers` (and the round's `requestState`) into the
    /// next exchange: `{"inputResponses", "requestState"?}`.
    pub fn next_round(request_state: Option<Value>, answers: InputResponses) -> Value {
        let mut next = json!({ "inputResponses": answers });
        if let Some(state) = request_state {
            next["requestState"] = state;
        }
        next
    }
}

/// An SDK's JSON-RPC answer to a [`call_request`] exchange, as much of it as settling reads:
/// the result's members are taken whole, not copied out of a parsed message.
#[derive(serde::Deserialize)]
struct SdkAnswer {
    #[serde(default)]
    result: Option<Value>,
    #[serde(default)]
    error: Option<SdkError>,
}

/// A JSON-RPC error an SDK answered. Its members are read as any JSON, so a malformed one still
/// fails the task with what can be read (a code that is not an integer becomes -32603, a message
/// that is not a string the default), rather than as an unreadable answer.
#[derive(serde::Deserialize)]
struct SdkError {
    #[serde(default)]
    code: Value,
    #[serde(default)]
    message: Value,
    #[serde(default)]
    data: Option<Value>,
}

/// Reads the bytes an SDK answered a [`call_request`] exchange with (the adapter whose tool code
/// runs behind an SDK's own handler: the TypeScript server): a result completes the task
/// (without the `serverInfo` stamp an SDK puts on every result, which describes the exchange,
/// not the tool's result), an error fails it, an `input_required` result asks for input. Bytes
/// that are no JSON, or a message with neither a result nor an error, fail it with -32603.
///
/// An answer framed as an SSE stream (an SDK that streamed notifications before its response)
/// is read from its last event carrying a JSON-RPC response; the notifications before it are
/// the exchange's, not the task's.
pub fn read_call_answer(bytes: &[u8]) -> CallAnswer {
    let Some(bytes) = response_message(bytes) else {
        return CallAnswer::Failed(RpcError::internal("the SDK's event stream carried no response"));
    };
    let answer = match serde_json::from_slice::<SdkAnswer>(bytes) {
        Ok(answer) => answer,
        Err(e) => return CallAnswer::Failed(RpcError::internal(format!("the SDK's answer is not JSON: {e}"))),
    };
    if let Some(error) = answer.error {
        let message = error.message.as_str().unwrap_or("the tool failed").to_owned();
        let mut rpc = RpcError::new(error.code.as_i64().unwrap_or(-32603), message);
        if let Some(data) = error.data {
            rpc = rpc.with_data(data);
        }
        return CallAnswer::Failed(rpc);
    }
    let Some(Value::Object(mut result)) = answer.result else {
        return CallAnswer::Failed(RpcError::internal("the SDK answered neither a result nor an error"));
    };
    if result.get("resultType").and_then(Value::as_str) == Some("input_required") {
        let input_requests = match result.remove("inputRequests") {
            Some(Value::Object(requests)) => requests,
            _ => Map::new(),
        };
        let request_state = result.remove("requestState").filter(Value::is_string);
        return CallAnswer::InputRequired { input_requests, request_state };
    }
    if let Some(Value::Object(meta)) = result.get_mut("_meta") {
        meta.remove(META_SERVER_INFO);
        if meta.is_empty() {
            result.remove("_meta");
        }
    }
    CallAnswer::Complete(Value::Object(result))
}

/// The JSON-RPC response in an SDK's answer body: the body itself when it is JSON (or empty),
/// else, for an SSE stream, the `data` of its last event carrying a response; `None` when the
/// stream carried none.
pub fn response_message(body: &[u8]) -> Option<&[u8]> {
    match body.iter().find(|b| !b.is_ascii_whitespace()) {
        Some(b'{') | None => Some(body),
        Some(_) => last_sse_response(body),
    }
}

/// The `data` of the last event of an SSE stream whose message is a JSON-RPC response (an `id`
/// with a `result` or an `error`). Events of one data line (how SDKs frame JSON-RPC) only.
fn last_sse_response(stream: &[u8]) -> Option<&[u8]> {
    #[derive(serde::Deserialize)]
    struct Shape {
        id: Option<serde::de::IgnoredAny>,
        result: Option<serde::de::IgnoredAny>,
        error: Option<serde::de::IgnoredAny>,
    }
    stream
        .split(|b| *b == b'\n')
        .filter_map(|line| line.strip_prefix(b"data:"))
        .map(|data| data.strip_prefix(b" ").unwrap_or(data))
        .map(|data| data.strip_suffix(b"\r").unwrap_or(data))
        .rfind(|data| {
            serde_json::from_slice::<Shape>(data)
                .is_ok_and(|m| m.id.is_some() && (m.result.is_some() || m.error.is_some()))
        })
}

/// The messages of one `subscriptions/listen` stream, each stamped with the subscription id
/// (the listen request's id): the acknowledgement first (only the ids the caller may see),
/// then `notifications/tasks` with the full `DetailedTask` on every change, then, once every
/// accepted task is terminal, the graceful-close result.
#[derive(Clone, Debug, PartialEq)]
pub struct ListenFrames {
    id: RequestId,
}

impl ListenFrames {
    /// Frames for the listen request `id` (for adapters that did not route through a [`Routed`]).
    pub fn new(id: RequestId) -> Self {
        Self { id }
    }

    /// `notifications/subscriptions/acknowledged` naming the accepted task ids.
    pub fn ack(&self, accepted: &[String]) -> Value {
        let params = AcknowledgedParams {
            meta: subscription_meta(&self.id),
            notifications: ListenFilter { task_ids: Some(accepted.to_vec()), other: Map::new() },
        };
        notification("notifications/subscriptions/acknowledged", params)
    }

    /// `notifications/tasks` carrying one task's current state.
    pub fn task(&self, task: DetailedTask) -> Value {
        notification("notifications/tasks", TaskNotificationParams { meta: subscription_meta(&self.id), task })
    }

    /// The listen request's own result, which ends the stream gracefully.
    pub fn close(&self) -> Value {
        response(&self.id, self.close_result())
    }

    /// The result object of [`ListenFrames::close`] (for SDKs that wrap results themselves).
    pub fn close_result(&self) -> Value {
        to_value(ListenResult { result_type: ResultType::Complete, meta: subscription_meta(&self.id) })
    }
}

fn to_value(value: impl Serialize) -> Value {
    serde_json::to_value(value).expect("protocol types serialize")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::{META_CLIENT_CAPABILITIES, META_PROTOCOL_VERSION, PROTOCOL_VERSION};

    #[test]
    fn a_task_reply_is_the_get_result_of_the_detailed_task_byte_for_byte() {
        let routed = Routed {
            reply: ReplyTo { id: json!(9), sse: false },
            principal: "p".into(),
            route: Route::GetTask { task_id: "t".into() },
            trace: None,
        };
        let mut task =
            TaskRecord::new("t".into(), "p".into(), "o".into(), "tool".into(), 1_000, Some(60_000), Some(500));
        let mut asked = Map::new();
        asked.insert("k".into(), json!({"method": "elicitation/create", "params": {"message": "?"}}));
        let mut answered = Map::new();
        answered.insert("k".into(), json!({"action": "accept"}));
        let events = [
            crate::TaskEvent::SetStatusMessage("half \"way\"".into()),
            crate::TaskEvent::RequestInput(asked),
            crate::TaskEvent::ProvideInput(answered),
            crate::TaskEvent::Complete(json!({"content": [{"type": "text", "text": "done"}], "isError": false})),
        ];
        let mut shown = vec![task.clone()];
        for (i, event) in events.into_iter().enumerate() {
            task.apply(2_000 + i as u64, event).unwrap();
            shown.push(task.clone());
        }
        let mut failed = TaskRecord::new("f".into(), "p".into(), "o".into(), "tool".into(), 1_000, None, None);
        failed.apply(3_000, crate::TaskEvent::Fail(RpcError::internal("boom"))).unwrap();
        shown.push(failed);
        for task in &shown {
            let expected = routed.reply.result(get_result(task.to_detailed()));
            // Status, framing and the JSON text alike.
            assert_eq!(routed.reply.task(task), expected, "{:?}", task.status);
        }
    }

    fn dispatcher() -> Dispatcher {
        let mut d = Dispatcher::new(DispatcherConfig::default());
        for (name, mode) in [("sync", TaskMode::Forbidden), ("maybe", TaskMode::Optional), ("task", TaskMode::Required)]
        {
            d.add_tool(ToolEntry { name: name.into(), mode, listing: json!({"name": name, "inputSchema": {}}) });
        }
        d
    }

    fn body(method: &str, mut params: Value, declare: bool) -> Vec<u8> {
        let caps = if declare { json!({"extensions": {crate::EXTENSION_ID: {}}}) } else { json!({}) };
        params["_meta"] = json!({META_PROTOCOL_VERSION: PROTOCOL_VERSION, META_CLIENT_CAPABILITIES: caps});
        json!({"jsonrpc": "2.0", "id": 7, "method": method, "params": params}).to_string().into_bytes()
    }

    /// A POST with these headers, and `Content-Type: application/json` unless they name one.
    fn post<'a>(headers: &'a [(&'a str, &'a str)], body: &'a [u8]) -> HttpRequest<'a> {
        let mut all = headers.to_vec();
        if !all.iter().any(|(n, _)| n.eq_ignore_ascii_case("content-type")) {
            all.push(("content-type", "application/json"));
        }
        // Test requests live as long as the test process.
        HttpRequest { method: "POST", headers: Headers(Box::leak(all.into_boxed_slice())), body: Some(body) }
    }

    fn reply(decision: Decision) -> Reply {
        match decision {
            Decision::Reply(reply) => reply,
            other => panic!("expected a reply, got {other:?}"),
        }
    }

    #[test]
    fn a_stored_call_made_again_routes_as_the_first_call_did_but_runs_in_place() {
        let sent =
            body("tools/call", json!({"name": "maybe", "arguments": {"n": 1}, "inputResponses": {"k": {}}}), true);
        let headers = [("mcp-protocol-version", PROTOCOL_VERSION), ("mcp-method", "tools/call"), ("mcp-name", "maybe")];
        let Decision::Route(first) = dispatcher().handle_http(&post(&headers, &sent), Some("alice")) else {
            panic!("the first call routes")
        };
        let Route::CallTool(first) = first.route else { panic!("a tool call") };
        assert_eq!(first.dispatch, Dispatch::Task);
        let stored = first.stored(None);
        let (again_headers, again) = call_request("maybe", &stored, 9);
        let pairs: Vec<(&str, &str)> = again_headers.iter().map(|(n, v)| (*n, v.as_str())).collect();
        let again = again.to_string().into_bytes();
        let Decision::Route(routed) = dispatcher().handle_http(&post(&pairs, &again), Some("alice")) else {
            panic!("the call made again routes")
        };
        let Route::CallTool(call) = routed.route else { panic!("a tool call") };
        // The same call, its envelope the client's but for the tasks extension: the exchange runs
        // the tool inside its task, so an SDK runs it rather than making another task of it.
        let mut expected = first.envelope.clone();
        expected.client_capabilities.remove("extensions");
        assert!(first.envelope.declares_tasks());
        assert_eq!(
            (call.arguments, call.input_responses, call.envelope),
            (first.arguments, first.input_responses, expected)
        );
        assert_eq!(call.dispatch, Dispatch::Sync);
    }

    #[test]
    fn an_answer_framed_as_an_event_stream_is_read_from_its_response() {
        let stream = concat!(
            "id: 0\nretry: 3000\ndata: \n\n",
            "event: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{}}\n\n",
            "event: message\r\ndata: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"content\":[]}}\r\n\r\n",
        );
        assert_eq!(read_call_answer(stream.as_bytes()), CallAnswer::Complete(json!({"content": []})));
        let error = "data: {\"jsonrpc\":\"2.0\",\"id\":1,\"error\":{\"code\":-32602,\"message\":\"no\"}}\n\n";
        assert!(matches!(read_call_answer(error.as_bytes()), CallAnswer::Failed(e) if e.code == -32602));
        let none = "event: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\"}\n\n";
        assert!(matches!(read_call_answer(none.as_bytes()), CallAnswer::Failed(e) if e.code == -32603));
    }

    fn delegating() -> Dispatcher {
        let mut d = dispatcher();
        d.config.delegate = true;
        d.config.default_mode = Some(TaskMode::Forbidden);
        d
    }

    #[test]
    fn a_delegating_dispatcher_hands_stdio_lines_that_are_not_the_extensions_to_the_sdk() {
        let d = delegating();
        let serves = |tool: &str| tool == "sdk_tool";
        let decide = |line: &[u8]| d.handle_stdio_with(Some(line), "me", &serves);
        for line in [
            body("server/discover", json!({}), true),
            body("tools/list", json!({}), true),
            body("tools/call", json!({"name": "sdk_tool", "arguments": {}}), true),
            body("tools/call", json!({"name": "maybe", "arguments": {}}), false),
            br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#.to_vec(),
            br#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}"#.to_vec(),
        ] {
            assert_eq!(decide(&line), StdioDecision::Delegate, "{}", String::from_utf8_lossy(&line));
        }
        let task = body("tools/call", json!({"name": "maybe", "arguments": {}}), true);
        assert!(matches!(decide(&task), StdioDecision::Route(r) if matches!(r.route, Route::CallTool(_))));
        let get = body("tasks/get", json!({"taskId": "t"}), true);
        assert!(matches!(decide(&get), StdioDecision::Route(r) if matches!(r.route, Route::GetTask { .. })));
        let StdioDecision::Reply(unknown) = decide(&body("tools/call", json!({"name": "nope", "arguments": {}}), true))
        else {
            panic!("an unknown tool is refused by core")
        };
        assert_eq!(unknown["error"]["code"], -32602);
        let bad_version = br#"{"jsonrpc":"2.0","id":2,"method":"server/discover","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"1999-01-01"}}}"#;
        assert!(matches!(decide(bad_version), StdioDecision::Reply(m) if m["error"].is_object()));
    }

    #[test]
    fn stdio_lines_are_decided_without_header_rules() {
        let d = dispatcher();
        let call = body("tools/call", json!({"name": "maybe", "arguments": {}}), true);
        match d.handle_stdio(Some(&call), "me") {
            StdioDecision::Route(routed) => {
                assert_eq!(routed.principal, "me");
                assert!(matches!(routed.route, Route::CallTool(ref c) if c.dispatch == Dispatch::Task));
                assert!(!routed.reply.sse);
            }
            other => panic!("{other:?}"),
        }
        let discover = body("server/discover", json!({}), true);
        assert!(
            matches!(d.handle_stdio(Some(&discover), "me"), StdioDecision::Reply(m) if m["result"]["resultType"] == "complete")
        );
        let StdioDecision::Reply(parse) = d.handle_stdio(Some(b"not json"), "me") else { panic!() };
        assert_eq!(parse["error"]["code"], -32700);
        assert_eq!(parse["id"], Value::Null);
        let cancel = br#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":7}}"#;
        assert_eq!(
            d.handle_stdio(Some(cancel), "me"),
            StdioDecision::Cancel(serde_json::from_value(json!(7)).unwrap())
        );
        let other = br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#;
        assert_eq!(d.handle_stdio(Some(other), "me"), StdioDecision::Ignore);
        let mut small = dispatcher();
        small.config.max_body_bytes = 8;
        let StdioDecision::Reply(large) = small.handle_stdio(Some(&call), "me") else { panic!() };
        assert_eq!(large["error"]["code"], -32600);
        assert_eq!(small.handle_stdio(None, "me"), StdioDecision::Reply(large));
    }

    #[test]
    fn a_delegating_dispatcher_keeps_only_the_extensions_traffic() {
        let d = delegating();
        let h = |m: &'static str, n: Option<&'static str>| {
            let mut v = vec![("MCP-Protocol-Version", "2026-07-28"), ("Mcp-Method", m)];
            v.extend(n.map(|n| ("Mcp-Name", n)));
            v
        };
        let delegated = |decision: Decision| matches!(decision, Decision::Delegate | Decision::DelegateCall { .. });
        // Methods outside the extension, listings, notifications and other HTTP methods.
        for method in ["resources/read", "server/discover", "tools/list", "initialize"] {
            let b = body(method, json!({}), true);
            assert!(delegated(d.handle_http(&post(&h(method, None), &b), Some("a"))), "{method}");
        }
        let n = br#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{}}"#;
        assert!(delegated(d.handle_http(&post(&[], n), Some("a"))));
        assert!(delegated(d.handle_http(&HttpRequest { method: "GET", headers: Headers(&[]), body: None }, None)));
        // A synchronous call (forbidden tool, or optional without the declaration) and a listen
        // naming no tasks are the SDK's; a task is core's.
        let sync = body("tools/call", json!({"name": "other"}), true);
        assert!(delegated(d.handle_http(&post(&h("tools/call", Some("other")), &sync), Some("a"))));
        let undeclared = body("tools/call", json!({"name": "maybe"}), false);
        assert!(delegated(d.handle_http(&post(&h("tools/call", Some("maybe")), &undeclared), Some("a"))));
        let task = body("tools/call", json!({"name": "maybe"}), true);
        assert!(matches!(d.handle_http(&post(&h("tools/call", Some("maybe")), &task), Some("a")), Decision::Route(_)));
        let listen = body("subscriptions/listen", json!({"notifications": {"toolsListChanged": true}}), true);
        assert!(delegated(d.handle_http(&post(&h("subscriptions/listen", None), &listen), Some("a"))));
        let tasks_listen = body("subscriptions/listen", json!({"notifications": {"taskIds": ["t"]}}), true);
        assert!(matches!(
            d.handle_http(&post(&h("subscriptions/listen", None), &tasks_listen), Some("a")),
            Decision::Route(_)
        ));
    }

    #[test]
    fn a_delegating_dispatcher_classifies_2025_traffic_as_the_sdk_does() {
        let d = delegating();
        let legacy = |method: &str, params: Value| {
            json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}).to_string().into_bytes()
        };
        // No envelope claim: the SDK's legacy path runs the call, unless the tool needs a task.
        let b = legacy("tools/call", json!({"name": "maybe"}));
        assert!(matches!(d.handle_http(&post(&[], &b), Some("a")), Decision::Delegate));
        let b = legacy("tools/call", json!({"name": "task"}));
        let r = reply(d.handle_http(&post(&[], &b), Some("a")));
        assert_eq!(r.message().unwrap()["error"]["code"], -32021);
        // tasks/* stays core's in every era: the same refusal as every other server.
        let b = legacy("tasks/get", json!({"taskId": "t"}));
        let r = reply(d.handle_http(&post(&[], &b), Some("a")));
        assert_eq!(r.message().unwrap()["error"]["code"], -32602);
        let b = body("tasks/list", json!({}), true);
        let r = reply(d.handle_http(&post(&[("Mcp-Method", "tasks/list")], &b), Some("a")));
        assert_eq!(r.message().unwrap()["error"]["code"], -32601);
        // A modern header is a claim: the envelope's absence is then an error, not 2025 traffic.
        let b = legacy("tools/call", json!({"name": "maybe"}));
        let r = reply(d.handle_http(&post(&[("MCP-Protocol-Version", "2026-07-28")], &b), Some("a")));
        assert_eq!(r.message().unwrap()["error"]["code"], -32602);
        // A malformed claim is core's to refuse, as the SDK refuses it.
        let b = legacy("tools/call", json!({"name": "maybe", "_meta": {META_PROTOCOL_VERSION: 5}}));
        let r = reply(d.handle_http(&post(&[], &b), Some("a")));
        assert_eq!(r.message().unwrap()["error"]["code"], -32602);
    }

    #[test]
    fn what_an_sdk_would_refuse_in_its_own_words_core_refuses_from_its_table_first() {
        let d = delegating();
        let bare = br#"{"jsonrpc":"2.0","id":3,"method":"server/discover"}"#;
        // A version header no legacy path serves, or a repeated one, on an envelope-less
        // request: the TypeScript SDK answered 400 "Unsupported protocol version" with "id":
        // null, rmcp plain text. Core answers it, as the Rust host does.
        for headers in [
            vec![("MCP-Protocol-Version", "2026-07-28x"), ("Mcp-Method", "server/discover")],
            vec![("MCP-Protocol-Version", " x "), ("Mcp-Method", "server/discover")],
            vec![("MCP-Protocol-Version", "2025-11-25"), ("mcp-protocol-version", "2025-11-25")],
        ] {
            let r = reply(d.handle_http(&post(&headers, bare), Some("a")));
            let message = r.message().unwrap();
            assert_eq!(r.status, 400, "{headers:?}: {message}");
            assert_eq!(message["id"], 3, "the id is read, never null");
        }
        // A 2025-era version the legacy paths serve stays theirs.
        let legacy = [("MCP-Protocol-Version", "2025-06-18")];
        assert!(matches!(d.handle_http(&post(&legacy, bare), Some("a")), Decision::Delegate));
        // Content-Type: one header naming one media type. Two headers (which the TypeScript SDK
        // reads joined by ", " and refuses) or a list are 415 from core's table.
        let b = body("tools/list", json!({}), true);
        let h = |ct: &'static [(&'static str, &'static str)]| {
            let mut v = vec![("MCP-Protocol-Version", "2026-07-28"), ("Mcp-Method", "tools/list")];
            v.extend_from_slice(ct);
            v
        };
        for ct in [
            &[("Content-Type", "application/json"), ("content-type", "APPLICATION/JSON")][..],
            &[("Content-Type", "application/json, application/json")][..],
            &[("Content-Type", "application/json;a=b,c")][..],
        ] {
            let r = reply(d.handle_http(&post(&h(ct), &b), Some("a")));
            assert_eq!((r.status, r.message().unwrap()["error"]["code"].clone()), (415, json!(-32600)), "{ct:?}");
        }
        for ct in [
            &[("Content-Type", "Application/JSON; charset=utf-8")][..],
            &[("Content-Type", r#"application/json; profile="a,b""#)][..],
        ] {
            assert!(matches!(d.handle_http(&post(&h(ct), &b), Some("a")), Decision::Delegate), "{ct:?}");
        }
    }

    #[test]
    fn routes_tasks_methods_after_every_check() {
        let d = dispatcher();
        let b = body("tasks/get", json!({"taskId": "t1"}), true);
        let h = [("MCP-Protocol-Version", "2026-07-28"), ("Mcp-Method", "tasks/get"), ("Mcp-Name", "t1")];
        match d.handle_http(&post(&h, &b), Some("alice")) {
            Decision::Route(r) => {
                assert_eq!(r.route, Route::GetTask { task_id: "t1".into() });
                assert_eq!(r.principal, "alice");
            }
            other => panic!("{other:?}"),
        }
        // The same request without the declaration, with a repeated Mcp-Name, without auth.
        let plain = body("tasks/get", json!({"taskId": "t1"}), false);
        assert_eq!(reply(d.handle_http(&post(&h, &plain), Some("a"))).message().unwrap()["error"]["code"], -32021);
        let twice = [
            ("MCP-Protocol-Version", "2026-07-28"),
            ("Mcp-Method", "tasks/get"),
            ("Mcp-Name", "t1"),
            ("mcp-name", "t2"),
        ];
        let r = reply(d.handle_http(&post(&twice, &b), Some("a")));
        assert_eq!((r.status, r.message().unwrap()["error"]["code"].clone()), (400, json!(-32020)));
        assert_eq!(reply(d.handle_http(&post(&h, &b), None)).status, 401);
    }

    #[test]
    fn negotiates_tool_calls() {
        let d = dispatcher();
        let headers = |name: &'static str| {
            [("MCP-Protocol-Version", "2026-07-28"), ("Mcp-Method", "tools/call"), ("Mcp-Name", name)]
        };
        let route = |name: &'static str, declare: bool| {
            let h = headers(name);
            let b = body("tools/call", json!({"name": name}), declare);
            match d.handle_http(&post(&h, &b), Some("a")) {
                Decision::Route(Routed { route: Route::CallTool(call), .. }) => Ok(call.dispatch),
                Decision::Reply(r) => Err(r.message().unwrap()["error"]["code"].as_i64().unwrap()),
                other => panic!("{other:?}"),
            }
        };
        assert_eq!(route("sync", true), Ok(Dispatch::Sync));
        assert_eq!(route("maybe", true), Ok(Dispatch::Task));
        assert_eq!(route("maybe", false), Ok(Dispatch::Sync));
        assert_eq!(route("task", false), Err(-32021));
        assert_eq!(route("nope", true), Err(-32602));
    }

    #[test]
    fn answers_without_the_engine() {
        let d = dispatcher();
        let h = [("MCP-Protocol-Version", "2026-07-28"), ("Mcp-Method", "tools/list")];
        let r = reply(d.handle_http(&post(&h, &body("tools/list", json!({}), false)), Some("a")));
        assert_eq!(r.message().unwrap()["result"]["tools"][2]["name"], "task");
        let get = HttpRequest { method: "GET", headers: Headers(&[]), body: Some(b"") };
        assert_eq!(reply(d.handle_http(&get, Some("a"))).headers, vec![("allow", "POST")]);
        let big = HttpRequest { method: "POST", headers: Headers(&[("content-type", "application/json")]), body: None };
        assert_eq!(reply(d.handle_http(&big, Some("a"))).status, 413);
        let note = br#"{"jsonrpc":"2.0","method":"notifications/cancelled"}"#;
        assert_eq!(reply(d.handle_http(&post(&[], note), Some("a"))).status, 202);
        let sse = [("accept", "text/event-stream")];
        let r = reply(d.handle_http(&post(&sse, b"{"), Some("a")));
        assert!(r.sse && r.content_type() == Some("text/event-stream"));
        assert!(String::from_utf8(r.body()).unwrap().starts_with("event: message\ndata: {"));
    }

    #[test]
    fn every_post_says_its_body_is_json() {
        let d = dispatcher();
        let b = body("tasks/get", json!({"taskId": "t1"}), true);
        for content_type in
            [Some("text/plain"), Some("application/json-seq"), None, Some("application/json, text/plain")]
        {
            let mut headers =
                vec![("MCP-Protocol-Version", "2026-07-28"), ("Mcp-Method", "tasks/get"), ("Mcp-Name", "t1")];
            headers.extend(content_type.map(|ct| ("Content-Type", ct)));
            let request = HttpRequest { method: "POST", headers: Headers(&headers), body: Some(&b) };
            let r = reply(d.handle_http(&request, Some("a")));
            assert_eq!(
                (r.status, r.message().unwrap()["error"]["code"].clone()),
                (415, json!(-32600)),
                "{content_type:?}"
            );
        }
        let h = [
            ("Content-Type", "Application/JSON; charset=utf-8"),
            ("MCP-Protocol-Version", "2026-07-28"),
            ("Mcp-Method", "tasks/get"),
            ("Mcp-Name", "t1"),
        ];
        assert!(matches!(
            d.handle_http(&HttpRequest { method: "POST", headers: Headers(&h), body: Some(&b) }, Some("a")),
            Decision::Route(_)
        ));
    }

    #[test]
    fn a_delegated_call_carries_its_tool_and_unknown_tools_are_refused_alike() {
        let d = delegating();
        let h = [("MCP-Protocol-Version", "2026-07-28"), ("Mcp-Method", "tools/call"), ("Mcp-Name", "other")];
        let b = body("tools/call", json!({"name": "other"}), true);
        match d.handle_http(&post(&h, &b), Some("a")) {
            Decision::DelegateCall { tool, reply } => {
                assert_eq!(tool, "other");
                let unknown = reply.unknown_tool(&tool);
                assert_eq!((unknown.status, unknown.message().unwrap()["error"]["code"].clone()), (400, json!(-32602)));
                assert_eq!(unknown.message().unwrap()["id"], 7);
            }
            other => panic!("{other:?}"),
        }
        // An adapter that knows its SDK's tools has core refuse the others, as the Rust host does.
        let r = reply(d.handle_http_with(&post(&h, &b), Some("a"), &|tool| tool == "greet"));
        let host = reply(dispatcher().handle_http(&post(&h, &b), Some("a")));
        assert_eq!((r.status, r.message()), (host.status, host.message()));
        assert_eq!(r.message().unwrap()["error"]["message"], "Invalid params: Unknown tool: other");
    }

    #[test]
    fn a_listen_naming_nothing_is_answered_here_on_every_server() {
        let d = delegating();
        let h = [("MCP-Protocol-Version", "2026-07-28"), ("Mcp-Method", "subscriptions/listen")];
        let empty = body("subscriptions/listen", json!({"notifications": {}}), true);
        assert!(matches!(
            d.handle_http(&post(&h, &empty), Some("a")),
            Decision::Route(Routed { route: Route::Listen { task_ids: None, .. }, .. })
        ));
        let tools = body("subscriptions/listen", json!({"notifications": {"toolsListChanged": true}}), true);
        assert!(matches!(d.handle_http(&post(&h, &tools), Some("a")), Decision::Delegate));
    }

    #[test]
    fn listen_frames_carry_the_subscription_id() {
        let frames = ListenFrames::new(json!(9));
        let ack = frames.ack(&["a".to_owned()]);
        assert_eq!(ack["params"]["_meta"][crate::META_SUBSCRIPTION_ID], 9);
        assert_eq!(ack["params"]["notifications"]["taskIds"], json!(["a"]));
        assert_eq!(frames.close()["result"]["resultType"], "complete");
    }

    #[test]
    fn an_sdk_answer_settles_its_task() {
        let read = |v: Value| read_call_answer(v.to_string().as_bytes());
        // A result completes it, without the stamp that describes the exchange.
        let stamped = json!({"jsonrpc": "2.0", "id": 1, "result": {"content": [], "resultType": "complete",
            "_meta": {META_SERVER_INFO: {"name": "sdk"}}}});
        assert_eq!(read(stamped), CallAnswer::Complete(json!({"content": [], "resultType": "complete"})));
        let kept =
            json!({"jsonrpc": "2.0", "id": 1, "result": {"content": [], "_meta": {"mine": 1, META_SERVER_INFO: {}}}});
        assert_eq!(read(kept), CallAnswer::Complete(json!({"content": [], "_meta": {"mine": 1}})));
        // An error fails it with what can be read.
        let error = json!({"jsonrpc": "2.0", "id": 1, "error": {"code": -32602, "message": "bad", "data": {"x": 1}}});
        assert_eq!(read(error), CallAnswer::Failed(RpcError::new(-32602, "bad").with_data(json!({"x": 1}))));
        let odd = json!({"jsonrpc": "2.0", "id": 1, "error": {"code": "x", "message": 3}});
        assert_eq!(read(odd), CallAnswer::Failed(RpcError::new(-32603, "the tool failed")));
        // An input round asks; its state comes back with the answers.
        let round = json!({"jsonrpc": "2.0", "id": 1, "result": {"resultType": "input_required",
            "inputRequests": {"k": {"method": "roots/list"}}, "requestState": "s"}});
        let CallAnswer::InputRequired { input_requests, request_state } = read(round) else { panic!("a round") };
        assert_eq!(Value::Object(input_requests), json!({"k": {"method": "roots/list"}}));
        let mut answers = Map::new();
        answers.insert("k".into(), json!({"roots": []}));
        assert_eq!(
            CallAnswer::next_round(request_state, answers),
            json!({"inputResponses": {"k": {"roots": []}}, "requestState": "s"})
        );
        // Neither, or no JSON: a server fault.
        for bytes in [&b"{}"[..], b"not json"] {
            assert!(matches!(read_call_answer(bytes), CallAnswer::Failed(e) if e.code == -32603));
        }
    }
}
