//! A stateless MCP 2026-07-28 Streamable HTTP endpoint on axum, serving tools through the task
//! engine: `server/discover`, `ping`, `tools/list`, `tools/call` (sync, MRTR and task),
//! `tasks/get|update|cancel`, and `subscriptions/listen` as an SSE stream.
//!
//! Every POST is one JSON-RPC message. The reply is `application/json`, or a one-event SSE
//! stream when the client accepts only `text/event-stream`. GET and DELETE answer 405: this
//! revision has no sessions
//! (<https://modelcontextprotocol.io/specification/2026-07-28/basic/transports/streamable-http>).

mod delegate;
mod serve;
mod stdio;
mod tools;

use std::sync::Arc;

use axum::Router;
use axum::body::Body;
use axum::extract::{DefaultBodyLimit, Request, State};
use axum::http::{HeaderName, HeaderValue, StatusCode, header, request::Parts};
use axum::response::{IntoResponse, Response};
use axum::routing::any;
use sha2::Digest;

pub use delegate::{Delegate, PrepareFn};
pub use serve::{BodyTimeout, ServeLimits, default_max_connections, serve_with};
pub use stdio::STDIO_PRINCIPAL;
pub use tools::{Prepared, RunContext, Tool, ToolCall, ToolHandler, error_result, handler_fn, text_result};

pub use crate::engine::Execution;
use crate::engine::{ClaimedTask, Engine, EngineError, Served, Subscription, TaskContext};
use crate::protocol::TaskMode;
use crate::protocol::negotiation::Dispatch;
use crate::protocol::server::{
    Decision, Dispatcher, DispatcherConfig, Headers, HttpRequest, ListenFrames, REQUEST_STATE_TTL_MS, Reply, Route,
    Routed, ToolCallRoute, ToolEntry, input_required_result,
};
use crate::protocol::task::with_complete_result_type;
use crate::protocol::{ProtocolError, RpcError, request_state};
use crate::trace::{self, TraceContext};

/// Derives the caller's principal from the HTTP request (its auth); `None` answers 401.
pub type PrincipalFn = Arc<dyn Fn(&Parts) -> Option<String> + Send + Sync>;

/// The default principal: a SHA-256 of the `Authorization` header, or `"anonymous"` without
/// one. Hosts with real auth plug in their own [`PrincipalFn`].
pub fn authorization_principal(parts: &Parts) -> Option<String> {
    Some(match parts.headers.get(header::AUTHORIZATION) {
        Some(value) => format!("auth:{}", hex::encode(sha2::Sha256::digest(value.as_bytes()))),
        None => "anonymous".to_owned(),
    })
}

/// Builds a [`Host`].
pub struct HostBuilder {
    engine: Engine,
    tools: Vec<Tool>,
    principal: PrincipalFn,
    config: DispatcherConfig,
    state_key: Vec<u8>,
    execution: Execution,
    delegate: Option<Arc<dyn Delegate>>,
}

impl HostBuilder {
    /// Adds a tool.
    #[must_use]
    pub fn tool(mut self, tool: Tool) -> Self {
        self.tools.retain(|t| t.name != tool.name);
        self.tools.push(tool);
        self
    }

    /// Replaces the principal function.
    #[must_use]
    pub fn principal(mut self, f: impl Fn(&Parts) -> Option<String> + Send + Sync + 'static) -> Self {
        self.principal = Arc::new(f);
        self
    }

    /// Sets the `serverInfo` advertised by `server/discover`.
    #[must_use]
    pub fn server_info(mut self, name: impl Into<String>, version: impl Into<String>) -> Self {
        self.config.server_name = name.into();
        self.config.server_version = version.into();
        self
    }

    /// Sets the largest accepted HTTP body; larger ones get -32600 with HTTP 413.
    #[must_use]
    pub fn max_body_bytes(mut self, bytes: usize) -> Self {
        self.config.max_body_bytes = bytes;
        self
    }

    /// Sets the key that seals MRTR `requestState` (random per process by default; set one
    /// shared key when several processes serve the same endpoint).
    #[must_use]
    pub fn request_state_key(mut self, key: impl Into<Vec<u8>>) -> Self {
        self.state_key = key.into();
        self
    }

    /// Sets where the work of tasks runs ([`Execution::Local`] by default).
    #[must_use]
    pub fn execution(mut self, execution: Execution) -> Self {
        self.execution = execution;
        self
    }

    /// Puts the host in front of another MCP server (an SDK's own service): what is not the
    /// extension's traffic goes to it unchanged, synchronous calls included, and the tools of
    /// tasks it runs are registered with [`Tool::delegated`]. `server/discover` and
    /// `tools/list` are then the delegate's to answer, so its server advertises the extension.
    #[must_use]
    pub fn delegate(mut self, delegate: Arc<dyn Delegate>) -> Self {
        self.config.delegate = true;
        // A tool registered with no mode of its own is the delegate's, run synchronously.
        self.config.default_mode = Some(TaskMode::Forbidden);
        self.delegate = Some(delegate);
        self
    }

    /// Builds the host.
    pub fn build(self) -> Host {
        let mut dispatcher = Dispatcher::new(self.config);
        for tool in &self.tools {
            dispatcher.add_tool(ToolEntry { name: tool.name.clone(), mode: tool.mode, listing: tool.listing() });
        }
        Host {
            inner: Arc::new(Inner {
                engine: self.engine,
                tools: self.tools,
                principal: self.principal,
                dispatcher,
                state_key: self.state_key,
                execution: self.execution,
                delegate: self.delegate,
            }),
        }
    }
}

struct Inner {
    engine: Engine,
    tools: Vec<Tool>,
    principal: PrincipalFn,
    dispatcher: Dispatcher,
    state_key: Vec<u8>,
    execution: Execution,
    /// The server behind this host, when it is in front of one.
    delegate: Option<Arc<dyn Delegate>>,
}

/// The HTTP host. Cheap to clone.
#[derive(Clone)]
pub struct Host {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Host {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Host").field("tools", &self.inner.tools).finish_non_exhaustive()
    }
}

impl Host {
    /// Starts building a host over `engine`.
    pub fn builder(engine: Engine) -> HostBuilder {
        HostBuilder {
            engine,
            tools: Vec::new(),
            principal: Arc::new(authorization_principal),
            config: DispatcherConfig::default(),
            state_key: crate::clock::random_key(),
            execution: Execution::Local,
            delegate: None,
        }
    }

    /// Runs this host's tools for tasks that wait for a worker, until the handle is aborted:
    /// resumable tasks a dead process left (on SQLite, found when the store opened; on
    /// PostgreSQL, once the dead worker's lease lapsed) and, on a worker, tasks a front-end
    /// with [`Execution::Workers`] created. Start it on every host that runs tools; a
    /// front-end that only accepts does not.
    pub fn spawn_executor(&self) -> tokio::task::JoinHandle<()> {
        self.inner.engine.spawn_executor(Arc::new(self.clone()))
    }

    /// The engine.
    pub fn engine(&self) -> &Engine {
        &self.inner.engine
    }

    /// An axum router serving the endpoint at `path` (usually `/mcp`).
    pub fn router(&self, path: &str) -> Router {
        Router::new().route(path, any(post_handler)).layer(DefaultBodyLimit::disable()).with_state(self.clone())
    }

    /// An axum router serving the engine's metrics at `path` (usually `/metrics`) in the
    /// Prometheus exposition format; opt-in: merge it into the app where it should be reachable
    /// (`host.router("/mcp").merge(host.metrics_router("/metrics"))`). Names: [`crate::metrics`].
    pub fn metrics_router(&self, path: &str) -> Router {
        let engine = self.inner.engine.clone();
        Router::new().route(
            path,
            axum::routing::get(move || {
                let text = engine.metrics_text();
                async move { ([(http::header::CONTENT_TYPE, crate::metrics::CONTENT_TYPE)], text).into_response() }
            }),
        )
    }

    /// Handles one HTTP request (headers and body) and returns the HTTP response, inside a
    /// `mcp_request` span naming its `Mcp-Method` ([`request_span`]), parented to the caller's
    /// trace context when its `_meta` carries one.
    pub async fn handle(&self, parts: Parts, body: Body) -> Response {
        // Borrowed: a span records its fields only when a subscriber wants it.
        let method = parts.headers.get("mcp-method").and_then(|v| v.to_str().ok()).unwrap_or_default();
        let span = request_span(method);
        // Entered only once the request is decoded: an OpenTelemetry span takes its parent (the
        // caller's `_meta` context) when it is first entered.
        self.handle_inner(parts, body, span).await
    }

    async fn handle_inner(&self, parts: Parts, body: Body, span: tracing::Span) -> Response {
        let dispatcher = &self.inner.dispatcher;
        // One byte past the limit tells "too large" from "exactly the limit".
        let bytes = match axum::body::to_bytes(body, dispatcher.config().max_body_bytes).await {
            Ok(bytes) => Some(bytes),
            Err(e) => {
                if let Some(late) = body_timeout(&e) {
                    let error = ProtocolError::RequestTimeout { what: "request body", seconds: late.seconds };
                    return http_reply(crate::protocol::server::error_reply(None, &error, false));
                }
                None // over the limit (or the client went away: nobody reads the answer)
            }
        };
        // Header values that are not UTF-8 still reach the rules (and fail them) as text; valid
        // ones are borrowed, not copied.
        let texts: Vec<(&str, std::borrow::Cow<'_, str>)> = parts
            .headers
            .iter()
            .map(|(name, value)| (name.as_str(), String::from_utf8_lossy(value.as_bytes())))
            .collect();
        let pairs: Vec<(&str, &str)> = texts.iter().map(|(n, v)| (*n, v.as_ref())).collect();
        let request = HttpRequest { method: parts.method.as_str(), headers: Headers(&pairs), body: bytes.as_deref() };
        let principal = (self.inner.principal)(&parts);
        let delegate = self.inner.delegate.as_ref();
        // Decided in a block: the cell the closure borrows is no `Sync`, and must not be held
        // across the awaits below.
        let (decision, unknowable) = {
            let unknowable = std::cell::RefCell::new(None::<String>);
            let serves = |tool: &str| serves(delegate, tool, &unknowable);
            (dispatcher.handle_http_with(&request, principal.as_deref(), &serves), unknowable.into_inner())
        };
        if let (Decision::DelegateCall { reply, .. }, Some(why)) = (&decision, unknowable) {
            let error = ProtocolError::Internal(why);
            return http_reply(crate::protocol::server::error_reply(Some(&reply.id), &error, reply.sse));
        }
        match decision {
            Decision::Reply(reply) => http_reply(reply),
            Decision::Route(routed) => {
                describe_request(&span, &routed);
                tracing::Instrument::instrument(self.perform(routed), span).await
            }
            Decision::Delegate | Decision::DelegateCall { .. } => {
                // Without a delegate the dispatcher is built without `delegate`.
                let delegate = delegate.expect("a host with nothing behind it never delegates");
                // A request core took that the SDK would refuse by a narrower reading (an
                // Accept of `*/*` or of one media type, an id past i64) goes to it in the form
                // it reads, and its answer to the client in core's framing.
                let reframe = dispatcher.reply_to(&request).filter(|reply| {
                    !delegate::names_both_media_types(&parts.headers) || delegate::id_out_of_range(&reply.id)
                });
                drop(texts);
                let Some(reply) = reframe else {
                    let body = bytes.map_or_else(Body::empty, Body::from);
                    let served = delegate.serve(http::Request::from_parts(parts, body));
                    return tracing::Instrument::instrument(served, span).await;
                };
                let body = delegate::with_plain_id(bytes.as_deref().unwrap_or_default(), &reply.id);
                let mut request = http::Request::from_parts(parts, Body::from(body));
                request.headers_mut().insert(header::ACCEPT, HeaderValue::from_static(delegate::BOTH_MEDIA_TYPES));
                request.headers_mut().remove(header::CONTENT_LENGTH);
                delegate::reframed(delegate.serve(request).await, &reply).await
            }
        }
    }

    async fn perform(&self, routed: Routed) -> Response {
        match self.performed(routed).await {
            Performed::Reply(reply) => http_reply(reply),
            Performed::Listen(subscription, frames) => {
                let mut response = ListenBody::response(frames, subscription);
                response.extensions_mut().insert(serve::LongLived);
                response
            }
        }
    }

    /// Performs a routed request, whatever the transport: the reply to send, or a listen to
    /// stream with the request's [`ListenFrames`].
    async fn performed(&self, routed: Routed) -> Performed {
        let engine = &self.inner.engine;
        // The route moves into the engine (a call's arguments are not copied); the reply needs
        // only the request's id and framing.
        let Routed { reply, principal, route, trace } = routed;
        let span = tracing::Span::current();
        // The tasks this request concerns, whose traces its span links to (a listen's first
        // few: a link per task it streams would grow the span without bound); a `tasks/get`
        // links through the record it reads, with no second lookup.
        let recorded = trace::recorded(&span);
        let linked: Vec<String> = match &route {
            _ if !recorded => Vec::new(),
            Route::UpdateTask { task_id, .. } | Route::CancelTask { task_id } => vec![task_id.clone()],
            Route::Listen { task_ids: Some(ids), .. } => ids.iter().take(MAX_LISTEN_LINKS).cloned().collect(),
            Route::GetTask { .. } | Route::CallTool(_) | Route::Listen { .. } => Vec::new(),
        };
        let performed = match engine.serve(&principal, route).await {
            Ok(Served::Result(result)) => Performed::Reply(reply.result(result)),
            Ok(Served::Task(task)) => {
                if let Some(task_trace) = task.trace.as_deref().filter(|_| recorded) {
                    trace::link(&span, task_trace);
                }
                Performed::Reply(reply.task(&task))
            }
            Ok(Served::Listen(subscription)) => Performed::Listen(subscription, reply.listen_frames()),
            Ok(Served::CallTool(call)) => Performed::Reply(match self.call_tool(&principal, call, trace).await {
                Ok(Answer::Result(result)) => reply.result(result),
                Ok(Answer::Created(created)) => {
                    span.record("mcp.task.id", created.task.task_id.as_str());
                    reply.result_of(&created)
                }
                Err(Failure::Protocol(e)) => {
                    record_error(&span, e.code());
                    reply.error(&e)
                }
                Err(Failure::Tool(e)) => {
                    record_error(&span, e.code);
                    reply.tool_error(&e)
                }
            }),
            Err(e) => {
                record_error(&span, e.code());
                Performed::Reply(reply.error(&e))
            }
        };
        // An answer, a cancel, a listen: linked to the task's own trace (its create, and so its
        // runs), whose id the caller's trace may not share.
        for task_id in linked {
            if let Some(task_trace) = engine.task_trace(&principal, &task_id).await {
                trace::link(&span, &task_trace);
            }
        }
        performed
    }

    /// Runs a routed `tools/call`: the MRTR phase first, then a task or a synchronous run.
    async fn call_tool(
        &self,
        principal: &str,
        route: Box<ToolCallRoute>,
        caller: Option<TraceContext>,
    ) -> Result<Answer, Failure> {
        let engine = &self.inner.engine;
        let tool = self
            .inner
            .tools
            .iter()
            .find(|t| t.name == route.name)
            // The dispatcher routes only the tools `build` registered with it.
            .ok_or_else(|| ProtocolError::Internal(format!("tool {:?} is routed but not served", route.name)))?;
        let key = &self.inner.state_key;
        let state = route
            .request_state
            .as_deref()
            .map(|sealed| request_state::open(key, principal, &tool.name, sealed, engine.now_ms()))
            .transpose()?;
        let dispatch = route.dispatch;
        let call = ToolCall {
            name: route.name,
            arguments: route.arguments,
            input_responses: route.input_responses.map(Box::new),
            state: state.map(Box::new),
            principal: principal.to_owned(),
            envelope: engine.share_envelope(route.envelope),
        };
        if let Prepared::InputRequired { input_requests, state } =
            unpanicked(tool.handler.prepare(&call)).await.map_err(Failure::Tool)?
        {
            let expires = engine.now_ms().saturating_add(REQUEST_STATE_TTL_MS);
            let sealed = state.map(|s| request_state::seal(key, principal, &tool.name, &s, expires));
            return Ok(Answer::Result(input_required_result(&call.envelope, input_requests, sealed)?));
        }
        match dispatch {
            Dispatch::Sync => {
                let context = RunContext::synchronous_call(tool.mode, &call.envelope);
                let watch = context.clone();
                let result = unpanicked(tool.handler.run(call, context)).await;
                // The tool asked mid-run where its client made that impossible: core's refusal
                // (-32021, HTTP 400 as the table says), not whatever the tool did with it.
                if let Some(refusal) = watch.refusal() {
                    return Err(Failure::Protocol(refusal));
                }
                let result = result.map_err(Failure::Tool)?;
                Ok(Answer::Result(with_complete_result_type(result)))
            }
            Dispatch::Task if self.inner.execution == Execution::Workers => {
                let created = engine
                    .enqueue_task_traced(principal, &tool.name, tool.options, call.stored(), task_trace(caller))
                    .await
                    .map_err(|e| e.to_protocol())?;
                Ok(Answer::Created(created))
            }
            Dispatch::Task => {
                // Only a resumable tool's call is kept: a later attempt runs it again.
                let stored = tool.options.resume.map(|_| call.stored());
                let (created, mut ctx) = engine
                    .create_task_traced(principal, &tool.name, tool.options, stored, task_trace(caller))
                    .await
                    .map_err(|e| e.to_protocol())?;
                // The task's input is checked against what this request declared.
                ctx.bind_envelope(Arc::clone(&call.envelope));
                spawn_work(tool, call, ctx);
                Ok(Answer::Created(created))
            }
        }
    }
}

impl crate::engine::Executor for Host {
    fn tools(&self) -> Vec<String> {
        self.inner.tools.iter().filter(|t| t.mode != TaskMode::Forbidden).map(|t| t.name.clone()).collect()
    }

    fn execute(&self, task: ClaimedTask) {
        let Some(tool) = self.inner.tools.iter().find(|t| t.name == task.tool) else {
            // `tools()` named only served tools. The context dropped here unfinished ends this
            // attempt: the task fails (or, resumable, waits for its next attempt).
            tracing::error!(tool = %task.tool, "claimed a task of a tool this host does not serve");
            return;
        };
        let stored = task.call;
        let call = ToolCall {
            name: task.tool,
            arguments: stored.arguments,
            input_responses: stored.input_responses.map(Box::new),
            state: stored.state.map(Box::new),
            principal: task.principal,
            envelope: self.inner.engine.share_envelope(stored.envelope.unwrap_or_default()),
        };
        spawn_work(tool, call, task.context);
    }
}

/// Spawns a task's work: runs the tool, turns a panic into a failure, and records the outcome,
/// inside a `mcp_task` span ([`run_span`]): a child of the task's trace context, on whichever
/// process runs this attempt.
fn spawn_work(tool: &Tool, mut call: ToolCall, ctx: TaskContext) {
    let handler = Arc::clone(&tool.handler);
    let span = run_span(ctx.task_id(), &tool.name, &call.principal, ctx.attempt());
    trace::adopt(&span, ctx.trace().as_ref());
    // The call lives as long as the task: its arguments, decoded by growing a map (a two-key
    // object had room for three entries, ~100 B each), are rebuilt to their exact size.
    call.arguments = std::mem::take(&mut call.arguments).into_iter().collect();
    // Boxed into the spawned future and moved out into the (boxed) run, so the spawned future
    // keeps a pointer, not a second, dead copy of the call. The box is taken into a block that
    // ends at once: moving out of `*call` alone leaves the emptied allocation (~270 B) alive
    // until the whole task ends.
    let call = Box::new(call);
    // Every running task carries this future (and its tokio cell, in 128-byte steps) for its
    // whole life, so nothing it holds across an await is larger than a pointer: a value moved
    // out of by a `match` keeps its place in the future, so the outcome goes whole into the
    // boxed finishing step.
    let work = async move {
        let call = {
            let boxed = call;
            *boxed
        };
        let run = unpanicked(handler.run(call, RunContext::task(ctx.handle())));
        // Cancellation drops the work future; the task is already `cancelled` (or another
        // worker took it over).
        let outcome = tokio::select! {
            outcome = run => outcome,
            () = ctx.cancelled() => {
                // Cancelled, expired, or taken over by another worker: what the task is now.
                tracing::Span::current().record("task.status", ctx.status().as_str());
                return;
            }
        };
        let span = tracing::Span::current();
        match &outcome {
            Ok(_) => span.record("task.status", "completed"),
            Err(e) => {
                record_error(&span, e.code);
                span.record("task.status", "failed")
            }
        };
        if let Err(e) = Box::pin(finish(ctx, outcome)).await {
            tracing::error!(error = %e, "could not record a task's outcome");
        }
    };
    tokio::spawn(tracing::Instrument::instrument(work, span));
}

/// How many of a listen's tasks its span links to.
const MAX_LISTEN_LINKS: usize = 32;

/// The span of one request: `mcp_request`, exported under the OpenTelemetry semantic
/// conventions for MCP (<https://opentelemetry.io/docs/specs/semconv/gen-ai/mcp/>, Development
/// status): named `{mcp.method.name} {target}`, kind server, with the tool, request id and task
/// id where they apply. No argument, result, input or token is recorded.
pub fn request_span(method: &str) -> tracing::Span {
    tracing::info_span!(
        "mcp_request",
        method,
        otel.name = method,
        otel.kind = "server",
        "mcp.method.name" = method,
        "mcp.protocol.version" = crate::protocol::PROTOCOL_VERSION,
        "jsonrpc.request.id" = tracing::field::Empty,
        "gen_ai.tool.name" = tracing::field::Empty,
        "gen_ai.operation.name" = tracing::field::Empty,
        "mcp.task.id" = tracing::field::Empty,
        "error.type" = tracing::field::Empty,
        "rpc.response.status_code" = tracing::field::Empty,
        otel.status_code = tracing::field::Empty,
    )
}

/// The span of one run attempt of a task: `mcp_task`, exported as `task.run` with the task id,
/// tool, attempt, the caller's principal hash, and its outcome (`task.status`, `error.type`).
pub fn run_span(task_id: &str, tool: &str, principal: &str, attempt: u32) -> tracing::Span {
    // No `tracing` parent: a span keeps its parent open until it closes itself, and the request
    // that created the task ends long before its run. The run's OpenTelemetry parent is the
    // context the task keeps ([`trace::adopt`]).
    tracing::info_span!(
        parent: None,
        "mcp_task",
        otel.name = "task.run",
        otel.kind = "internal",
        "mcp.task.id" = task_id,
        "gen_ai.tool.name" = tool,
        "task.attempt" = i64::from(attempt),
        principal = %crate::metrics::principal_hash(principal),
        "task.status" = tracing::field::Empty,
        "error.type" = tracing::field::Empty,
        otel.status_code = tracing::field::Empty,
    )
}

/// Names a request span after its route (`tools/call report`), records the task it concerns,
/// and parents it to the caller's trace context: before the span is first entered, when an
/// OpenTelemetry span takes its name and parent.
pub(crate) fn describe_request(span: &tracing::Span, routed: &Routed) {
    if span.is_disabled() {
        return;
    }
    span.record("jsonrpc.request.id", routed.reply.id.to_string().trim_matches('"'));
    match &routed.route {
        Route::CallTool(call) => {
            span.record("otel.name", format!("tools/call {}", call.name));
            span.record("gen_ai.tool.name", call.name.as_str());
            span.record("gen_ai.operation.name", "execute_tool");
        }
        Route::GetTask { task_id } | Route::UpdateTask { task_id, .. } | Route::CancelTask { task_id } => {
            span.record("mcp.task.id", task_id.as_str());
        }
        Route::Listen { .. } => {}
    }
    trace::adopt(span, routed.trace.as_ref());
}

/// Marks a span failed with a JSON-RPC error code (semantic conventions: `error.type` and
/// `rpc.response.status_code` are the code; the message, which may quote what the user sent, is
/// not recorded).
fn record_error(span: &tracing::Span, code: i64) {
    let code = code.to_string();
    span.record("error.type", code.as_str());
    span.record("rpc.response.status_code", code.as_str());
    span.record("otel.status_code", "error");
}

/// The trace context a new task keeps: its create's span where an OpenTelemetry layer records
/// it (so every run is a child of the create), else the caller's own context.
fn task_trace(caller: Option<TraceContext>) -> Option<TraceContext> {
    trace::handed_on(&tracing::Span::current(), caller)
}

/// Records a task's outcome: its result, or the error its tool raised.
async fn finish(ctx: TaskContext, outcome: Result<serde_json::Value, RpcError>) -> Result<bool, EngineError> {
    match outcome {
        Ok(result) => ctx.complete(result).await,
        Err(error) => ctx.fail(error).await,
    }
}

/// Runs tool code, turning a panic into the server-fault error (-32603) it is, so a panicking
/// tool answers a synchronous call with an error (never a dropped connection) and fails its task
/// with the panic's message (never leaves it `working`).
async fn unpanicked<T>(work: impl std::future::Future<Output = Result<T, RpcError>>) -> Result<T, RpcError> {
    use futures::FutureExt;
    std::panic::AssertUnwindSafe(work).catch_unwind().await.unwrap_or_else(|panic| {
        let message = panic_message(panic.as_ref());
        tracing::error!(panic = %message, "tool code panicked");
        Err(RpcError::internal(format!("tool panicked: {message}")))
    })
}

/// The message a caught panic carries (`"unknown panic"` for a payload that is no string), for the
/// error a panic in tool code is reported as (`tool panicked: {message}`).
fn panic_message(panic: &(dyn std::any::Any + Send)) -> String {
    panic
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "unknown panic".to_owned())
}

/// What performing a routed request gave.
#[allow(clippy::large_enum_variant)] // consumed at once
enum Performed {
    Reply(Reply),
    Listen(Subscription, ListenFrames),
}

/// What a routed `tools/call` answers with.
enum Answer {
    /// A result object (a synchronous tool's result, an MRTR round).
    Result(serde_json::Value),
    /// The task it created.
    Created(crate::protocol::CreateTaskResult),
}

/// A failure of a routed `tools/call`: a protocol error (status from the error table) or an
/// error the tool itself raised while running synchronously.
enum Failure {
    Protocol(ProtocolError),
    Tool(RpcError),
}

/// Whether the server behind (if any) has `tool`, for the dispatcher; when it cannot tell, the
/// reason goes to `unknowable` and the answer is yes, so the caller answers the call with it.
pub(crate) fn serves(
    delegate: Option<&Arc<dyn Delegate>>,
    tool: &str,
    unknowable: &std::cell::RefCell<Option<String>>,
) -> bool {
    match delegate.map(|d| d.serves_tool(tool)) {
        None | Some(Ok(true)) => true,
        Some(Ok(false)) => false,
        Some(Err(why)) => {
            *unknowable.borrow_mut() = Some(why);
            true
        }
    }
}

impl From<ProtocolError> for Failure {
    fn from(e: ProtocolError) -> Self {
        Self::Protocol(e)
    }
}

/// The [`BodyTimeout`] in an error's source chain, if reading the body failed for it.
fn body_timeout(error: &(dyn std::error::Error + 'static)) -> Option<BodyTimeout> {
    let mut next = Some(error);
    while let Some(e) = next {
        if let Some(late) = e.downcast_ref::<BodyTimeout>() {
            return Some(*late);
        }
        next = e.source();
    }
    None
}

/// The axum response of a dispatcher [`Reply`].
fn http_reply(mut reply: Reply) -> Response {
    let status = StatusCode::from_u16(reply.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let content_type = reply.content_type();
    let extra = std::mem::take(&mut reply.headers);
    let mut response = Response::new(axum::body::Body::from(reply.into_body()));
    *response.status_mut() = status;
    let headers = response.headers_mut();
    for (name, value) in content_type.map(|ct| ("content-type", ct)).into_iter().chain(extra) {
        headers.insert(HeaderName::from_static(name), HeaderValue::from_static(value));
    }
    response
}

enum ListenPhase {
    Ack,
    Updates,
    Done,
}

/// How long a listen stream may go without a frame before it gets an SSE comment, so that
/// proxies and clients that time out quiet streams keep it (axum's `KeepAlive` default).
const LISTEN_KEEP_ALIVE: std::time::Duration = std::time::Duration::from_secs(15);

pin_project_lite::pin_project! {
    /// The listen stream as SSE events, framed by the dispatcher's [`ListenFrames`]: the
    /// acknowledgement, every state, then the graceful close once every accepted task is
    /// terminal; a comment after [`LISTEN_KEEP_ALIVE`] without one. A body of its own, not a
    /// stream of futures, so an open stream holds only this (~300 B) until its next state.
    struct ListenBody {
        phase: ListenPhase,
        subscription: Subscription,
        frames: ListenFrames,
        #[pin]
        keep_alive: tokio::time::Sleep,
    }
}

impl ListenBody {
    fn response(frames: ListenFrames, subscription: Subscription) -> Response {
        let body =
            Self { phase: ListenPhase::Ack, subscription, frames, keep_alive: tokio::time::sleep(LISTEN_KEEP_ALIVE) };
        let mut response = Response::new(Body::new(body));
        let headers = response.headers_mut();
        headers.insert(header::CONTENT_TYPE, HeaderValue::from_static("text/event-stream"));
        headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
        response
    }
}

/// `message` as one SSE `message` event (compact JSON has no newline, so one data line).
fn sse_event(message: &serde_json::Value) -> http_body::Frame<bytes::Bytes> {
    let mut event = b"event: message\ndata: ".to_vec();
    serde_json::to_writer(&mut event, message).expect("a JSON value serializes");
    event.extend_from_slice(b"\n\n");
    http_body::Frame::data(event.into())
}

impl http_body::Body for ListenBody {
    type Data = bytes::Bytes;
    type Error = std::convert::Infallible;

    fn poll_frame(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<http_body::Frame<bytes::Bytes>, Self::Error>>> {
        use std::task::Poll;
        let mut this = self.project();
        let frame = match this.phase {
            ListenPhase::Ack => {
                *this.phase = ListenPhase::Updates;
                sse_event(&this.frames.ack(&this.subscription.accepted))
            }
            ListenPhase::Updates => match this.subscription.poll_next(cx) {
                Poll::Ready(Some(task)) => sse_event(&this.frames.task(task)),
                Poll::Ready(None) => {
                    *this.phase = ListenPhase::Done;
                    sse_event(&this.frames.close())
                }
                Poll::Pending => {
                    if this.keep_alive.as_mut().poll(cx).is_pending() {
                        return Poll::Pending;
                    }
                    http_body::Frame::data(bytes::Bytes::from_static(b":\n\n"))
                }
            },
            ListenPhase::Done => return Poll::Ready(None),
        };
        // Any frame, a comment included, restarts the quiet period.
        this.keep_alive.reset(tokio::time::Instant::now() + LISTEN_KEEP_ALIVE);
        Poll::Ready(Some(Ok(frame)))
    }

    fn is_end_stream(&self) -> bool {
        matches!(self.phase, ListenPhase::Done)
    }
}

async fn post_handler(State(host): State<Host>, request: Request) -> Response {
    let (parts, body) = request.into_parts();
    host.handle(parts, body).await
}

/// Serves `router` on `listener` until `shutdown` resolves, with the default [`ServeLimits`]
/// (header, body and idle timeouts; a connection cap that sheds what has completed no request).
pub async fn serve(
    listener: tokio::net::TcpListener,
    router: Router,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    serve_with(listener, router, ServeLimits::default(), shutdown).await
}
