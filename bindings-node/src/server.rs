//! Glue for the server side: core's dispatcher and engine behind the TypeScript server
//! (`mcp-tasks/server`). One HTTP request goes in (method, raw header pairs, body, principal);
//! what comes out is a finished reply, "the SDK serves this", a listen stream framed by core,
//! or a task call whose task the TypeScript side creates and runs. Every decision, status code,
//! header and byte of JSON is core's; JSON crosses the boundary as strings.

use std::collections::HashMap;
use std::sync::Arc;

use mcp_tasks::clock::ManualClock;
use mcp_tasks::engine::{
    ClaimedTask, EngineOptions, Execution, Executor, Served, SseListen, TaskContext, TaskHandle, TaskOptions,
};
use mcp_tasks::protocol::negotiation::{self, TaskMode};
use mcp_tasks::protocol::request_state;
use mcp_tasks::protocol::server::{
    CallAnswer, Decision, Dispatcher, DispatcherConfig, Headers, HttpRequest, READ_HEADERS, REQUEST_STATE_TTL_MS,
    Reply, ReplyTo, Route, Routed, ToolCallRoute, call_request, input_required_result, read_call_answer,
};
use mcp_tasks::protocol::{InputRequests, ProtocolError, RpcError, StoredCall};
use mcp_tasks::trace::TraceContext;
use mcp_tasks::{Engine, EngineError};
use napi::bindgen_prelude::{Buffer, BufferSlice, Either, Either3};
use napi::threadsafe_function::{ThreadsafeFunction, ThreadsafeFunctionCallMode};
use napi_derive::napi;
use serde_json::Value;

use crate::error::{parse_json, protocol_error};

/// An HTTP reply to send as it is.
#[napi(object)]
pub struct HttpReply {
    /// The HTTP status.
    pub status: u32,
    /// The response headers (lower-case names).
    pub headers: HashMap<String, String>,
    /// The body (empty for none).
    pub body: String,
}

/// An [`HttpReply`] of core's reply, its body moved rather than copied (core's JSON and SSE
/// framing are UTF-8 already).
fn http_reply(reply: Reply) -> HttpReply {
    let headers: HashMap<String, String> = reply.all_headers().map(|(n, v)| (n.to_owned(), v.to_owned())).collect();
    let status = u32::from(reply.status);
    let body =
        String::from_utf8(reply.into_body()).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned());
    HttpReply { status, headers, body }
}

/// The answer to a `tools/call` that created a task: the creation reply to send, and the task
/// to run. One object, so the common task call crosses the boundary once.
#[napi(object, object_from_js = false)]
pub struct TaskReply {
    /// The HTTP status.
    pub status: u32,
    /// The response headers (lower-case names).
    pub headers: HashMap<String, String>,
    /// The body: the `CreateTaskResult`.
    pub body: String,
    /// The created task, for the host to run.
    pub task: NativeTask,
}

impl TaskReply {
    fn new(reply: HttpReply, task: NativeTask) -> Self {
        Self { status: reply.status, headers: reply.headers, body: reply.body, task }
    }
}

fn invalid(message: String) -> napi::Error {
    protocol_error(&ProtocolError::InvalidParams(message))
}

fn engine_error(err: EngineError) -> napi::Error {
    protocol_error(&err.to_protocol())
}

fn parse_mode(mode: &str) -> napi::Result<TaskMode> {
    serde_json::from_value(Value::String(mode.to_owned()))
        .map_err(|_| invalid(format!("task mode {mode:?} is not one of \"forbidden\", \"optional\", \"required\"")))
}

/// What [`NativeServer::handle`] decided. At most one of `reply`, `call`, `listen`,
/// `take_creation()` is set, or `pending` is true (await [`Handled::perform`]); none of them
/// means the SDK serves it.
#[napi]
pub struct Handled {
    reply: Option<HttpReply>,
    call: Option<Arc<CallInner>>,
    listen: Option<Arc<SseListen>>,
    /// A route that needs the store, performed by [`Handled::perform`].
    pending: parking_lot::Mutex<Option<(Routed, Engine)>>,
    /// The task a `tools/call` created, with its creation reply, for the host to run.
    created: Option<TaskReply>,
    /// A task creation still running on the runtime (a store that waits, e.g. PostgreSQL).
    creation: parking_lot::Mutex<Option<Creation>>,
    /// The task a `tasks/*` request names.
    task_id: Option<String>,
    /// A synchronous `tools/call` the SDK runs: the tool, and how to answer in the SDK's stead.
    delegated: Option<(String, ReplyTo)>,
}

impl Handled {
    fn reply(reply: Reply, task_id: Option<String>) -> Self {
        Self { reply: Some(http_reply(reply)), task_id, ..Self::nothing() }
    }

    fn nothing() -> Self {
        Self {
            reply: None,
            call: None,
            listen: None,
            pending: parking_lot::Mutex::new(None),
            created: None,
            creation: parking_lot::Mutex::new(None),
            task_id: None,
            delegated: None,
        }
    }
}

#[napi]
impl Handled {
    /// A task creation still running, once: `wait()` for its `TaskReply`, then send that reply.
    #[napi]
    pub fn take_creation(&self) -> Option<Creation> {
        self.creation.lock().take()
    }

    /// True when the answer needs the store: await `perform()`.
    #[napi(getter)]
    pub fn pending(&self) -> bool {
        self.pending.lock().is_some()
    }

    /// The reply to send, when core answered the request.
    #[napi(getter, js_name = "reply")]
    pub fn get_reply(&self) -> Option<HttpReply> {
        self.reply.as_ref().map(|r| HttpReply { status: r.status, headers: r.headers.clone(), body: r.body.clone() })
    }

    /// The `tools/call` that runs as a task, when it is one.
    #[napi(getter)]
    pub fn call(&self) -> Option<NativeToolCall> {
        self.call.clone().map(|inner| NativeToolCall { inner })
    }

    /// The listen stream to send, when the request is a listen for tasks.
    #[napi(getter)]
    pub fn listen(&self) -> Option<NativeListen> {
        self.listen.clone().map(|inner| NativeListen { inner })
    }

    /// The tool of a synchronous `tools/call` the SDK runs (`null` for anything else): check
    /// the SDK serves it (else answer `unknownToolReply()`), and answer a protocol error the
    /// tool raises with `toolErrorReply`, which the SDK would turn into a result.
    #[napi(getter)]
    pub fn delegated_tool(&self) -> Option<String> {
        self.delegated.as_ref().map(|(tool, _)| tool.clone())
    }

    /// The reply to a delegated `tools/call` of a tool the SDK does not serve: core's -32602,
    /// HTTP 400, as from every server.
    #[napi]
    pub fn unknown_tool_reply(&self) -> napi::Result<HttpReply> {
        let (tool, reply) =
            self.delegated.as_ref().ok_or_else(|| napi::Error::from_reason("no delegated tools/call"))?;
        Ok(http_reply(reply.unknown_tool(tool)))
    }

    /// The reply carrying a protocol error the delegated call's tool raised (JSON-RPC error,
    /// HTTP 200, as the Rust host and the Python server answer it).
    #[napi]
    pub fn tool_error_reply(&self, code: i64, message: String, data_json: Option<String>) -> napi::Result<HttpReply> {
        let (_, reply) = self.delegated.as_ref().ok_or_else(|| napi::Error::from_reason("no delegated tools/call"))?;
        Ok(http_reply(reply.tool_error(&rpc_error(code, message, data_json)?)))
    }

    /// The task a `tasks/get|update|cancel` request names (to stop its work at once when the
    /// request cancelled it or noticed its expiry).
    #[napi(getter)]
    pub fn task_id(&self) -> Option<String> {
        self.task_id.clone()
    }

    /// Performs a pending route (`tasks/*` that needs the store, a listen): resolves to what
    /// to send, a reply or a listen stream. Throws if nothing is pending.
    #[napi]
    pub async fn perform(&self) -> napi::Result<Self> {
        let Some((routed, engine)) = self.pending.lock().take() else {
            return Err(napi::Error::from_reason("nothing is pending: perform() runs once, after handle()"));
        };
        let task_id = self.task_id.clone();
        let Routed { reply, principal, route, .. } = routed;
        Ok(match engine.serve(&principal, route).await {
            Err(error) => Self::reply(reply.error(&error), task_id),
            Ok(Served::Result(result)) => Self::reply(reply.result(result), task_id),
            Ok(Served::Task(task)) => Self::reply(reply.task(&task), task_id),
            Ok(Served::Listen(subscription)) => {
                let listen = SseListen::new(subscription, reply.listen_frames());
                Self { listen: Some(Arc::new(listen)), ..Self::nothing() }
            }
            Ok(Served::CallTool(_)) => unreachable!("tools/call is taken by handle(), never pending"),
        })
    }
}

/// Core's dispatcher and engine for one TypeScript server.
#[napi]
pub struct NativeServer {
    dispatcher: Arc<parking_lot::RwLock<Dispatcher>>,
    engine: Engine,
    clock: Option<Arc<ManualClock>>,
    sweeper: parking_lot::Mutex<Option<tokio::task::JoinHandle<()>>>,
    /// Seals MRTR `requestState` (core's `request_state`), bound to principal and tool.
    state_key: Arc<Vec<u8>>,
    /// The runtime the engine runs on.
    runtime: tokio::runtime::Handle,
    /// Per tool: its task options, and whether a `prepare` (an MRTR phase in JavaScript) runs
    /// before its task is created.
    tools: parking_lot::RwLock<HashMap<String, (TaskOptions, bool)>>,
    /// The claim loop of [`NativeServer::start_executor`], while it runs.
    executor: parking_lot::Mutex<Option<tokio::task::JoinHandle<()>>>,
    /// Where task calls run (`workers`: this server only accepts them).
    execution: Execution,
}

/// `(claim) => void`, called on the JavaScript thread for each task this process claims.
type ClaimFn = ThreadsafeFunction<NativeClaim, (), NativeClaim, napi::Status, false, true>;

/// Hands claimed tasks to the TypeScript server, which runs their tools through the SDK.
struct JsExecutor {
    tools: Vec<String>,
    callback: ClaimFn,
    runtime: tokio::runtime::Handle,
}

impl Executor for JsExecutor {
    fn tools(&self) -> Vec<String> {
        self.tools.clone()
    }

    fn execute(&self, task: ClaimedTask) {
        let ClaimedTask { context, tool, principal, call } = task;
        let (headers, body) = call_request(&tool, &call, 1);
        let headers = headers.into_iter().flat_map(|(name, value)| [name.to_owned(), value]).collect();
        // A claimed task was answered for when it was created, elsewhere or earlier.
        let task = NativeTask::new(context, self.runtime.clone());
        let claim = NativeClaim {
            task: parking_lot::Mutex::new(Some(task)),
            tool,
            principal,
            headers,
            body: body.to_string().into_bytes(),
        };
        // Queued for the JavaScript thread; if its environment is gone, the dropped context
        // ends the attempt (the task fails, or waits for its next attempt if resumable).
        let _ = self.callback.call(claim, ThreadsafeFunctionCallMode::NonBlocking);
    }
}

/// A task this process claimed (a resumable task a dead process left, or one a front-end
/// enqueued): the task to run, and the `tools/call` exchange that runs its tool through the SDK
/// again, made by core from the stored call.
#[napi]
pub struct NativeClaim {
    task: parking_lot::Mutex<Option<NativeTask>>,
    tool: String,
    principal: String,
    headers: Vec<String>,
    body: Vec<u8>,
}

#[napi]
impl NativeClaim {
    /// The task, once (its work runs it to the end, as a created task's does).
    #[napi]
    pub fn take_task(&self) -> Option<NativeTask> {
        self.task.lock().take()
    }

    /// The tool to run.
    #[napi(getter)]
    pub fn tool(&self) -> String {
        self.tool.clone()
    }

    /// The caller the task is bound to.
    #[napi(getter)]
    pub fn principal(&self) -> String {
        self.principal.clone()
    }

    /// The exchange's request headers, flat pairs (`[name, value, ...]`).
    #[napi(getter)]
    pub fn headers(&self) -> Vec<String> {
        self.headers.clone()
    }

    /// The exchange's request body: the `tools/call` as the client made it.
    #[napi(getter)]
    pub fn body(&self) -> Buffer {
        self.body.clone().into()
    }
}

impl Drop for NativeServer {
    fn drop(&mut self) {
        self.close();
    }
}

#[napi]
impl NativeServer {
    /// Opens the store of `options` (core's `EngineOptions`, JSON; absent fields take core's
    /// defaults) and builds a delegating dispatcher whose unconfigured tools run in
    /// `default_mode` (`forbidden` | `optional` | `required`) and which reads bodies of at
    /// most `max_body_bytes` (absent: core's default). `request_state_key` seals MRTR
    /// `requestState` (absent: random per process; set one shared key when several processes
    /// serve the same endpoint).
    #[napi]
    pub async fn open(
        options_json: String,
        default_mode: String,
        max_body_bytes: Option<u32>,
        request_state_key: Option<String>,
    ) -> napi::Result<Self> {
        let options: EngineOptions = serde_json::from_value(parse_json("options", &options_json)?)
            .map_err(|e| invalid(format!("server options: {e}")))?;
        let mut config =
            DispatcherConfig { default_mode: Some(parse_mode(&default_mode)?), delegate: true, ..Default::default() };
        if let Some(limit) = max_body_bytes {
            config.max_body_bytes = limit as usize;
        }
        let execution = options.execution;
        let opened = options.open().await.map_err(|e| engine_error(EngineError::Store(e)))?;
        // A manual clock never moves on its own: the caller sweeps (tests and vectors).
        let sweeper = opened.clock.is_none().then(|| opened.engine.spawn_sweeper());
        Ok(Self {
            dispatcher: Arc::new(parking_lot::RwLock::new(Dispatcher::new(config))),
            engine: opened.engine,
            clock: opened.clock,
            sweeper: parking_lot::Mutex::new(sweeper),
            state_key: Arc::new(request_state_key.map_or_else(mcp_tasks::clock::random_key, String::into_bytes)),
            runtime: tokio::runtime::Handle::current(),
            tools: parking_lot::RwLock::new(HashMap::new()),
            executor: parking_lot::Mutex::new(None),
            execution,
        })
    }

    /// True when this server only accepts task calls (`execution: "workers"`): their tasks wait
    /// in the store for worker processes, and nothing runs here.
    #[napi(getter)]
    pub fn accepts_only(&self) -> bool {
        self.execution == Execution::Workers
    }

    /// Stops the background sweeper and the executor, which hold the engine and its store (also
    /// done when the server is garbage-collected).
    #[napi]
    pub fn close(&self) {
        if let Some(sweeper) = self.sweeper.lock().take() {
            sweeper.abort();
        }
        if let Some(executor) = self.executor.lock().take() {
            executor.abort();
        }
    }

    /// Starts claiming the tasks of the configured task tools that wait for a worker (resumable
    /// tasks a dead process left) and hands each to `callback` on the JavaScript thread, until
    /// `close()`. Replaces a running one.
    #[napi]
    pub fn start_executor(
        &self,
        #[napi(ts_arg_type = "(claim: NativeClaim) => void")] callback: ClaimFn,
    ) -> napi::Result<()> {
        let dispatcher = self.dispatcher.read();
        let tools = (self.tools.read().keys())
            .filter(|name| dispatcher.tool_mode(name).is_some_and(|mode| mode != TaskMode::Forbidden))
            .cloned()
            .collect();
        drop(dispatcher);
        let executor = JsExecutor { tools, callback, runtime: self.runtime.clone() };
        let _inside = self.runtime.enter();
        let handle = self.engine.spawn_executor(Arc::new(executor));
        if let Some(previous) = self.executor.lock().replace(handle) {
            previous.abort();
        }
        Ok(())
    }

    /// Sets how `tool` runs: its mode (`forbidden`, `optional` or `required`), its task options
    /// (core's `TaskOptions` as JSON: `ttlMs`, `pollIntervalMs`), and whether it has a
    /// `prepare` phase (then `handle` hands its calls over instead of creating their tasks).
    #[napi]
    pub fn configure(&self, tool: String, mode: String, options_json: String, prepare: bool) -> napi::Result<()> {
        let mode = parse_mode(&mode)?;
        let options: TaskOptions = serde_json::from_value(parse_json("task options", &options_json)?)
            .map_err(|e| invalid(format!("task options of {tool}: {e}")))?;
        self.tools.write().insert(tool.clone(), (options, prepare));
        let listing = serde_json::json!({ "name": tool });
        self.dispatcher.write().add_tool(mcp_tasks::protocol::server::ToolEntry { name: tool, mode, listing });
        Ok(())
    }

    /// The largest body the server reads; a host reads at most one byte more and passes `null`
    /// for a body over it.
    #[napi(getter)]
    pub fn max_body_bytes(&self) -> u32 {
        u32::try_from(self.dispatcher.read().config().max_body_bytes).unwrap_or(u32::MAX)
    }

    /// How often the engine's sweeper runs (core's setting): a host that stops work on a cancel
    /// it did not serve itself checks that often.
    #[napi(getter)]
    pub fn sweep_interval_ms(&self) -> u32 {
        u32::try_from(self.engine.config().sweep_interval.as_millis()).unwrap_or(u32::MAX)
    }

    /// The engine's metrics in the Prometheus exposition format (core's OpenMetrics text; answer
    /// a scrape with `METRICS_CONTENT_TYPE`).
    #[napi]
    pub fn metrics(&self) -> String {
        self.engine.metrics_text()
    }

    /// The capabilities the server advertises for the extension (JSON), to merge into the SDK
    /// server's own.
    #[napi]
    pub fn capabilities(&self) -> String {
        negotiation::server_capabilities().to_string()
    }

    /// Decides one HTTP request, without waiting: what needs no IO is answered at once (every
    /// refusal, `tasks/get` of a task in memory, a `tools/call` that becomes a task), the rest
    /// is `pending`. `headers` are raw pairs, flat (`[name, value, name, value, ...]`, repeats
    /// kept; only core's `READ_HEADERS` matter); `body` is `null` when it was over
    /// [`NativeServer::max_body_bytes`]; `principal` is the caller (`null` answers 401).
    ///
    /// A reply core gave without anything else to do comes back as a plain object (most
    /// answers: refusals, `tasks/get` from memory); everything else as a `Handled`.
    /// A task call of a tool without `prepare` whose task a local store created at once comes
    /// back as a `TaskReply` (send it as the reply, run its `task`'s tool).
    ///
    /// `trace` (a propagator's carrier as JSON: `{"traceparent": ...}`) is the context a task
    /// this request creates keeps (the host's own span of the request); without it, or when
    /// invalid, the task keeps the caller's `_meta` context.
    #[napi(ts_return_type = "HttpReply | TaskReply | Handled")]
    pub fn handle(
        &self,
        method: String,
        headers: Vec<String>,
        // Read in place: the body is parsed before this call returns, so it needs no reference
        // keeping it alive (a `Buffer` argument makes one per request).
        body: Option<BufferSlice<'_>>,
        principal: Option<String>,
        trace: Option<String>,
    ) -> Either3<HttpReply, TaskReply, Handled> {
        let trace = trace.as_deref().and_then(TraceContext::from_carrier_json);
        let mut handled = self.decide(&method, &headers, body.as_deref(), principal.as_deref(), trace);
        if let Some(created) = handled.created.take() {
            return Either3::B(created);
        }
        let plain = handled.call.is_none()
            && handled.listen.is_none()
            && handled.pending.get_mut().is_none()
            && handled.creation.get_mut().is_none();
        match handled.reply.take() {
            Some(reply) if plain => Either3::A(reply),
            reply => {
                handled.reply = reply;
                Either3::C(handled)
            }
        }
    }
}

impl NativeServer {
    fn decide(
        &self,
        method: &str,
        headers: &[String],
        body: Option<&[u8]>,
        principal: Option<&str>,
        trace: Option<TraceContext>,
    ) -> Handled {
        let pairs: Vec<(&str, &str)> =
            headers.chunks(2).filter_map(|p| Some((p[0].as_str(), p.get(1)?.as_str()))).collect();
        let request = HttpRequest { method, headers: Headers(&pairs), body };
        let mut routed = match self.dispatcher.read().handle_http(&request, principal) {
            Decision::Reply(reply) => return Handled::reply(reply, None),
            Decision::Delegate => return Handled::nothing(),
            Decision::DelegateCall { tool, reply } => {
                return Handled { delegated: Some((tool, reply)), ..Handled::nothing() };
            }
            Decision::Route(routed) => routed,
        };
        if trace.is_some() {
            routed.trace = trace;
        }
        let engine = &self.engine;
        let task_id = match &routed.route {
            Route::GetTask { task_id } | Route::UpdateTask { task_id, .. } | Route::CancelTask { task_id } => {
                Some(task_id.clone())
            }
            _ => None,
        };
        match &routed.route {
            Route::GetTask { task_id: id } => match engine.get_cached(&routed.principal, id) {
                Some(Ok(task)) => return Handled::reply(routed.reply.task(&task), task_id),
                Some(Err(error)) => return Handled::reply(routed.reply.error(&error.to_protocol()), task_id),
                None => {}
            },
            Route::CallTool(call) => {
                if let Err(error) = engine.admit_call(call) {
                    return Handled::reply(routed.reply.error(&error), None);
                }
                // The previous MRTR round's state comes back sealed: open it, or refuse the call.
                let state = match call.request_state.as_deref() {
                    None => None,
                    Some(sealed) => {
                        match request_state::open(
                            &self.state_key,
                            &routed.principal,
                            &call.name,
                            sealed,
                            engine.now_ms(),
                        ) {
                            Ok(state) => Some(state),
                            Err(error) => return Handled::reply(routed.reply.error(&error), None),
                        }
                    }
                };
                // The call moves into the task's work; what stays in `routed` is only its reply
                // framing and principal (a call's arguments are not copied).
                let placeholder = Route::CancelTask { task_id: String::new() };
                let Route::CallTool(call) = std::mem::replace(&mut routed.route, placeholder) else {
                    unreachable!("matched above")
                };
                let (options, prepare) = self.tools.read().get(&call.name).copied().unwrap_or_default();
                let key = Arc::clone(&self.state_key);
                let runtime = self.runtime.clone();
                let execution = self.execution;
                let inner = Arc::new(CallInner {
                    routed,
                    call,
                    state,
                    engine: engine.clone(),
                    key,
                    runtime,
                    options,
                    execution,
                });
                if prepare {
                    return Handled { call: Some(inner), ..Handled::nothing() };
                }
                // No MRTR phase: create the task now, in this one call across the boundary.
                return match Arc::clone(&inner).create(options) {
                    Finishing::Done(Ok(Either::A(created))) => Handled { created: Some(created), ..Handled::nothing() },
                    Finishing::Done(Ok(Either::B(reply))) => Handled { reply: Some(reply), ..Handled::nothing() },
                    Finishing::Done(Err(error)) => Handled::reply(inner.routed.reply.error(&error), None),
                    running @ Finishing::Running(_) => {
                        let creation = Creation { state: parking_lot::Mutex::new(Some(running)) };
                        Handled { creation: parking_lot::Mutex::new(Some(creation)), ..Handled::nothing() }
                    }
                };
            }
            _ => {}
        }
        Handled { pending: parking_lot::Mutex::new(Some((routed, engine.clone()))), task_id, ..Handled::nothing() }
    }
}

#[napi]
impl NativeServer {
    /// Moves the manual clock forward; throws unless opened with `clockStartMs`.
    #[napi]
    pub fn advance_clock(&self, ms: u32) -> napi::Result<()> {
        match &self.clock {
            Some(clock) => {
                clock.advance(u64::from(ms));
                Ok(())
            }
            None => Err(napi::Error::from_reason("the engine runs on the system clock")),
        }
    }

    /// The caller's W3C trace context in a request body's `params._meta` (JSON carrier), as core
    /// reads it (invalid values ignored); `null` without one. Asked only where the application
    /// records spans: the span of the request is that context's child.
    #[napi]
    pub fn trace_of(&self, body: BufferSlice<'_>) -> Option<String> {
        let message: Value = serde_json::from_slice(&body).ok()?;
        let trace = TraceContext::from_params(message.get("params"))?;
        Some(Value::Object(trace.to_meta()).to_string())
    }

    /// The W3C trace context `principal`'s task keeps (JSON carrier, as
    /// [`NativeTask::trace_json`]), for a span about the task to link to; `null` without one.
    #[napi]
    pub async fn task_trace(&self, principal: String, task_id: String) -> Option<String> {
        let trace = self.engine.task_trace(&principal, &task_id).await?;
        Some(Value::Object(trace.to_meta()).to_string())
    }

    /// Runs one TTL sweep now; resolves to `[expired, purged]`.
    #[napi]
    pub async fn sweep(&self) -> napi::Result<Vec<u32>> {
        let report = self.engine.sweep().await.map_err(|e| engine_error(EngineError::Store(e)))?;
        Ok(vec![count(report.expired), count(report.purged)])
    }
}

fn count(n: usize) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

/// Core's default bounds on HTTP connections (JSON, camelCase, milliseconds, the connection cap
/// from this process's descriptor limit): what `handler.nodeServer()` sets on `node:http`.
#[napi]
pub fn serve_limits() -> String {
    mcp_tasks::limits::ServeLimits::default().to_json().to_string()
}

/// The whole HTTP/1.1 response to a connection `node:http` refused before any request reached
/// core (`kind`: `header_timeout`, `body_timeout`, `headers_too_large` or `malformed`), under
/// `limits_json` (as `serveLimits()` gives them): written as it is, then the connection closes.
#[napi]
pub fn refusal_response(kind: String, limits_json: String) -> napi::Result<String> {
    use mcp_tasks::limits::{Refusal, ServeLimits};
    let refusal: Refusal = kind.parse().map_err(invalid)?;
    Ok(refusal.response(&ServeLimits::from_json(&parse_json("limits", &limits_json)?)))
}

/// The request headers core reads (lower case): a host may pass only these to `handle`.
#[napi]
pub fn read_headers() -> Vec<String> {
    READ_HEADERS.iter().map(|h| (*h).to_owned()).collect()
}

/// The principal of a client an SDK's auth named (`client:{id}`), or `anonymous` without auth.
#[napi]
pub fn default_principal(client_id: Option<String>) -> String {
    mcp_tasks::protocol::server::default_principal(client_id.as_deref())
}

struct CallInner {
    routed: Routed,
    call: Box<ToolCallRoute>,
    /// The opened state of the previous MRTR round.
    state: Option<Value>,
    engine: Engine,
    key: Arc<Vec<u8>>,
    runtime: tokio::runtime::Handle,
    /// The task options configured for the tool.
    options: TaskOptions,
    /// `workers`: the task is enqueued for a worker, not run here.
    execution: Execution,
}

/// A `tools/call` the dispatcher routed to a task: answer it with an MRTR round, or create the
/// task durably and answer with the creation.
#[napi]
pub struct NativeToolCall {
    inner: Arc<CallInner>,
}

#[napi]
impl NativeToolCall {
    /// The tool's name.
    #[napi(getter)]
    pub fn name(&self) -> String {
        self.inner.call.name.clone()
    }

    /// The caller the task is bound to.
    #[napi(getter)]
    pub fn principal(&self) -> String {
        self.inner.routed.principal.clone()
    }

    /// The arguments object (JSON).
    #[napi(getter)]
    pub fn arguments_json(&self) -> String {
        Value::Object(self.inner.call.arguments.clone()).to_string()
    }

    /// This round's MRTR answers (JSON), if any.
    #[napi(getter)]
    pub fn input_responses_json(&self) -> Option<String> {
        self.inner.call.input_responses.as_ref().map(|r| serde_json::to_string(r).expect("answers serialize"))
    }

    /// The state the previous MRTR round asked to get back (JSON), opened and verified: sealed
    /// for this principal and tool, unaltered, unexpired.
    #[napi(getter)]
    pub fn state_json(&self) -> Option<String> {
        self.inner.state.as_ref().map(Value::to_string)
    }

    /// The reply asking for input before any task exists (an MRTR round): `input_requests` is
    /// an `InputRequests` object (JSON), `state` (JSON) what to get back on the retry; it is
    /// sealed for this principal and tool, valid for core's `REQUEST_STATE_TTL_MS`.
    #[napi]
    pub fn input_required(&self, input_requests_json: String, state_json: Option<String>) -> napi::Result<HttpReply> {
        let requests: InputRequests = serde_json::from_value(parse_json("inputRequests", &input_requests_json)?)
            .map_err(|e| invalid(format!("inputRequests: {e}")))?;
        let inner = &self.inner;
        let sealed = match state_json {
            None => None,
            Some(text) => {
                let state = parse_json("state", &text)?;
                let expires = inner.engine.now_ms().saturating_add(REQUEST_STATE_TTL_MS);
                Some(request_state::seal(&inner.key, &inner.routed.principal, &inner.call.name, &state, expires))
            }
        };
        // Input the request's client did not declare it can answer is refused (-32021), as
        // from every server.
        Ok(http_reply(match input_required_result(&inner.call.envelope, requests, sealed) {
            Ok(result) => inner.routed.reply.result(result),
            Err(e) => inner.routed.reply.error(&e),
        }))
    }

    /// The reply refusing the call with a JSON-RPC error before any task exists.
    #[napi]
    pub fn error(&self, code: i64, message: String, data_json: Option<String>) -> napi::Result<HttpReply> {
        let error = rpc_error(code, message, data_json)?;
        Ok(http_reply(self.inner.routed.reply.tool_error(&error)))
    }

    /// Creates the task durably with the tool's configured options (after `prepare` let the
    /// call through). A local store (memory, SQLite's redo log) finishes at once: `take()` has
    /// the `TaskReply`. Otherwise `wait()` resolves to it. Send that reply only then: the store
    /// holds the task.
    #[napi]
    pub fn create_task(&self) -> Creation {
        let options = self.inner.options;
        Creation { state: parking_lot::Mutex::new(Some(Arc::clone(&self.inner).create(options))) }
    }
}

/// A created task to run here (with its creation reply), or (a front-end's) the reply for a
/// task enqueued for a worker.
type Created = Either<TaskReply, HttpReply>;

impl CallInner {
    /// The call as a later attempt or a worker makes it again.
    fn stored(&self) -> StoredCall {
        self.call.stored(self.state.clone())
    }

    /// Creates the task (see [`now_or_spawn`]); a failure is the protocol error to answer.
    fn create(self: Arc<Self>, options: TaskOptions) -> Finishing<Result<Created, ProtocolError>> {
        let runtime = self.runtime.clone();
        let future = async move {
            if self.execution == Execution::Workers {
                let created = self
                    .engine
                    .enqueue_task_traced(
                        &self.routed.principal,
                        &self.call.name,
                        options,
                        self.stored(),
                        self.routed.trace.clone(),
                    )
                    .await
                    .map_err(|e| e.to_protocol())?;
                return Ok(Either::B(http_reply(self.routed.reply.result_of(&created))));
            }
            // Only a resumable tool's call is kept: a later attempt makes it again.
            let stored = options.resume.map(|_| self.stored());
            // The task keeps the request's trace context: its runs are that span's children.
            let (created, mut ctx) = self
                .engine
                .create_task_traced(&self.routed.principal, &self.call.name, options, stored, self.routed.trace.clone())
                .await
                .map_err(|e| e.to_protocol())?;
            // The task's input is checked against what this request declared.
            ctx.bind_envelope(self.engine.share_envelope(self.call.envelope.clone()));
            let reply = http_reply(self.routed.reply.result_of(&created));
            Ok(Either::A(TaskReply::new(reply, NativeTask::new(ctx, self.runtime.clone()))))
        };
        now_or_spawn(&runtime, future)
    }
}

/// Polls `future` once on the calling (JavaScript) thread, inside the runtime. A local store
/// (memory, SQLite's redo log) finishes a write without waiting, which saves the two thread hops
/// of an async call (measured here at ~170 µs of latency each on a busy 2-core machine); a
/// future that must wait (PostgreSQL, a redo log past its bound) goes on on the runtime. Safe
/// for any future: a pending one is moved, not dropped, and its next poll registers a real
/// waker.
fn now_or_spawn<F>(runtime: &tokio::runtime::Handle, future: F) -> Finishing<F::Output>
where
    F: std::future::Future + Send + 'static,
    F::Output: Send + 'static,
{
    let _inside = runtime.enter();
    let mut future = Box::pin(future);
    let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
    match future.as_mut().poll(&mut cx) {
        std::task::Poll::Ready(value) => Finishing::Done(value),
        std::task::Poll::Pending => Finishing::Running(runtime.spawn(future)),
    }
}

/// A call [`now_or_spawn`] finished at once, or one still running on the runtime.
enum Finishing<T> {
    Done(T),
    Running(tokio::task::JoinHandle<T>),
}

impl<T> Finishing<T> {
    /// The value, waiting for it if it is still running.
    async fn wait(self) -> napi::Result<T> {
        match self {
            Self::Done(value) => Ok(value),
            Self::Running(handle) => {
                handle.await.map_err(|e| napi::Error::from_reason(format!("the call failed: {e}")))
            }
        }
    }
}

/// A task being created: `take()` it when the store already holds it, else `wait()` for it.
/// What comes is a `TaskReply` (the creation reply to send, the task to run), or, on a server
/// that only accepts (`acceptsOnly`), the reply to send for the task enqueued for a worker.
#[napi]
pub struct Creation {
    state: parking_lot::Mutex<Option<Finishing<Result<Created, ProtocolError>>>>,
}

#[napi]
impl Creation {
    /// The created task when its creation finished at once (throws if it failed); `null`
    /// while it is still running: `wait()` then.
    #[napi]
    pub fn take(&self) -> napi::Result<Option<Either<TaskReply, HttpReply>>> {
        let mut state = self.state.lock();
        match state.take() {
            Some(Finishing::Done(result)) => result.map(Some).map_err(|e| protocol_error(&e)),
            other => {
                *state = other;
                Ok(None)
            }
        }
    }

    /// The created task, once the store holds it.
    #[napi]
    pub async fn wait(&self) -> napi::Result<Either<TaskReply, HttpReply>> {
        let state = self.state.lock().take();
        match state {
            Some(finishing) => finishing.wait().await?.map_err(|e| protocol_error(&e)),
            None => Err(napi::Error::from_reason("the task was taken already")),
        }
    }
}

/// A task whose settling goes on on the runtime (a store that waits): `wait()` for it.
#[napi]
pub struct Settling {
    state: parking_lot::Mutex<Option<Finishing<napi::Result<Option<String>>>>>,
}

#[napi]
impl Settling {
    /// The next round's answers (JSON) when the tool asked for input, else `null`.
    #[napi]
    pub async fn wait(&self) -> napi::Result<Option<String>> {
        let state = self.state.lock().take();
        match state {
            Some(finishing) => finishing.wait().await?,
            None => Err(napi::Error::from_reason("settling was waited for already")),
        }
    }
}

fn rpc_error(code: i64, message: String, data_json: Option<String>) -> napi::Result<RpcError> {
    let mut error = RpcError::new(code, message);
    if let Some(data) = data_json {
        error = error.with_data(parse_json("data", &data)?);
    }
    Ok(error)
}

/// A created task, as the work running it sees it.
#[napi]
pub struct NativeTask {
    id: String,
    handle: TaskHandle,
    /// Shared with a settling that is still running, which takes it to end the task.
    ctx: Arc<parking_lot::Mutex<Option<TaskContext>>>,
    /// The runtime the task was created on, where dropping its context fails it.
    runtime: tokio::runtime::Handle,
}

impl Drop for NativeTask {
    fn drop(&mut self) {
        // Dropping an unfinished context fails its task (-32603) on the runtime, which the JS
        // thread (where the garbage collector drops this) is not inside of. At process exit
        // the runtime may be gone: the store's orphan recovery fails the task at the next start.
        if let Some(ctx) = self.ctx.lock().take() {
            let _inside = self.runtime.enter();
            drop(ctx);
        }
    }
}

#[napi]
impl NativeTask {
    /// The task id.
    #[napi(getter)]
    pub fn task_id(&self) -> String {
        self.id.clone()
    }

    /// True once the task was cancelled or expired (here, by another worker adopted from the
    /// store, or by a sweep). Cheap: the host checks it after every `tasks/*` request it served
    /// and on a timer, instead of a waiting thread hop per task.
    #[napi]
    pub fn is_cancelled(&self) -> bool {
        self.handle.is_cancelled()
    }

    /// This attempt's number: 1 for a first run, 2 or more for a resumable task run again.
    #[napi(getter)]
    pub fn attempt(&self) -> u32 {
        self.handle.attempt()
    }

    /// The task's status now (`working`, `input_required`, `completed`, `failed`, `cancelled`).
    #[napi(getter)]
    pub fn status(&self) -> String {
        self.handle.status().as_str().to_owned()
    }

    /// The JSON-RPC error code the task failed with, once it failed; `null` otherwise.
    #[napi(getter)]
    pub fn error_code(&self) -> Option<i64> {
        self.handle.error_code()
    }

    /// The W3C trace context the task keeps, as a propagator's carrier (JSON: `{"traceparent":
    /// ..., "tracestate": ..., "baggage": ...}`), which a run is parented to; `null` without one.
    #[napi(getter)]
    pub fn trace_json(&self) -> Option<String> {
        self.handle.trace().map(|t| Value::Object(t.to_meta()).to_string())
    }

    /// The last checkpoint saved for the task (JSON), or `null`.
    #[napi]
    pub fn saved_checkpoint(&self) -> Option<String> {
        self.handle.saved_checkpoint().map(|value| value.to_string())
    }

    /// Saves a checkpoint (JSON) durably with the task, for a later attempt to resume from.
    #[napi]
    pub async fn checkpoint(&self, value_json: String) -> napi::Result<()> {
        let value = parse_json("checkpoint", &value_json)?;
        self.handle.checkpoint(value).await.map_err(engine_error)
    }

    /// Sets the task's `statusMessage`.
    #[napi]
    pub async fn set_status(&self, message: String) -> napi::Result<()> {
        self.handle.set_status_message(message).await.map_err(engine_error)
    }

    /// Moves the task to `input_required` with `requests` (an `InputRequests` object, JSON) and
    /// resolves to the answers (JSON, key -> response) once `tasks/update` has given them all.
    #[napi]
    pub async fn request_input(&self, requests_json: String) -> napi::Result<String> {
        let requests = match parse_json("inputRequests", &requests_json)? {
            Value::Object(map) => map,
            _ => return Err(invalid("inputRequests must be an object".to_owned())),
        };
        let answers = self.handle.request_input(requests).await.map_err(engine_error)?;
        Ok(serde_json::to_string(&answers).expect("answers serialize"))
    }

    /// Ends the task with the SDK's answer to the exchange that ran its tool (a JSON-RPC
    /// response, its bytes): a result completes it (without the `serverInfo` stamp the SDK puts
    /// on every result, which describes the exchange, not the tool's result), an error fails it
    /// with that error. When the tool asked for input instead (`resultType: "input_required"`),
    /// the task moves to `input_required`, and once `tasks/update` has answered every key the
    /// settling's `next` is the next round's `{"inputResponses", "requestState"?}` (JSON). The
    /// JSON is read in Rust; a local store settles at once (see `Settling`).
    ///
    /// Resolves at once (a string or `null`) when a local store settled the task without
    /// waiting; otherwise returns a `Settling` to `wait()` for.
    #[napi(ts_return_type = "string | null | Settling")]
    pub fn settle(&self, response: BufferSlice<'_>) -> napi::Result<Either<Option<String>, Settling>> {
        // The bytes as the SDK sent them, read in place (no UTF-16 round trip through a
        // JavaScript string, no copy): parsed here, before the work that may go on later.
        let answer = read_call_answer(&response);
        let future = settle(self.handle.clone(), Arc::clone(&self.ctx), answer);
        Ok(match now_or_spawn(&self.runtime, future) {
            Finishing::Done(result) => Either::A(result?),
            running => Either::B(Settling { state: parking_lot::Mutex::new(Some(running)) }),
        })
    }

    /// Fails with a JSON-RPC error; resolves to false when the task was already terminal.
    #[napi]
    pub async fn fail(&self, code: i64, message: String, data_json: Option<String>) -> napi::Result<bool> {
        self.fail_with(rpc_error(code, message, data_json)?).await
    }

    /// Fails with the server-fault error (-32603) for an exception the tool threw outside the
    /// protocol (`kind` its class name); resolves to false when the task was already terminal.
    #[napi]
    pub async fn fail_exception(&self, kind: String, message: String) -> napi::Result<bool> {
        self.fail_with(RpcError::internal(format!("tool {kind}: {message}"))).await
    }
}

impl NativeTask {
    fn new(ctx: TaskContext, runtime: tokio::runtime::Handle) -> Self {
        Self {
            id: ctx.task_id().to_owned(),
            handle: ctx.handle(),
            ctx: Arc::new(parking_lot::Mutex::new(Some(ctx))),
            runtime,
        }
    }

    fn take(&self) -> Option<TaskContext> {
        self.ctx.lock().take()
    }

    async fn fail_with(&self, error: RpcError) -> napi::Result<bool> {
        match self.take() {
            Some(ctx) => ctx.fail(error).await.map_err(engine_error),
            None => Ok(false),
        }
    }
}

/// [`NativeTask::settle`]'s work: what core read in the SDK's answer, done to the task.
async fn settle(
    handle: TaskHandle,
    slot: Arc<parking_lot::Mutex<Option<TaskContext>>>,
    answer: CallAnswer,
) -> napi::Result<Option<String>> {
    // The context is taken only to end the task; an input round leaves it for the next round.
    let take = || slot.lock().take();
    let fail = |ctx: Option<TaskContext>, error: RpcError| async move {
        match ctx {
            Some(ctx) => ctx.fail(error).await.map(|_| None).map_err(engine_error),
            None => Ok(None),
        }
    };
    match answer {
        CallAnswer::Failed(error) => fail(take(), error).await,
        CallAnswer::InputRequired { input_requests, request_state } => {
            match handle.request_input(input_requests).await {
                Ok(answers) => Ok(Some(CallAnswer::next_round(request_state, answers).to_string())),
                // Input the creating request's client cannot answer (-32021): the round cannot go
                // on, so the task fails with that error, naming what is missing.
                Err(EngineError::Protocol(e)) => fail(take(), e.to_rpc()).await,
                Err(e) => Err(engine_error(e)),
            }
        }
        CallAnswer::Complete(result) => {
            if let Some(ctx) = take() {
                ctx.complete(result).await.map_err(engine_error)?;
            }
            Ok(None)
        }
    }
}

/// One `subscriptions/listen` stream for tasks, framed by core as SSE events: send `ack`, then
/// the events each `nextEvents()` resolves to, then `closeEvent`.
#[napi]
pub struct NativeListen {
    inner: Arc<SseListen>,
}

#[napi]
impl NativeListen {
    /// The acknowledgement (one SSE event).
    #[napi(getter)]
    pub fn ack(&self) -> String {
        self.inner.ack().to_owned()
    }

    /// The next task states as SSE text: at least one event, then every state already waiting
    /// (up to core's `LISTEN_WRITE_BYTES`, 64 KiB), so a stream with many states waiting takes
    /// few calls and writes; null once every accepted task is terminal and reported.
    /// Null too once `close()` was called.
    #[napi]
    pub async fn next_events(&self) -> Option<String> {
        self.inner.next_events().await
    }

    /// Stops the stream (its client went away): a `nextEvents` waiting, and every later one,
    /// resolves to null, so the subscription is let go now rather than at its tasks' next change.
    #[napi]
    pub fn close(&self) {
        self.inner.close();
    }

    /// The listen request's result (one SSE event), which ends the stream gracefully.
    #[napi(getter)]
    pub fn close_event(&self) -> String {
        self.inner.close_event()
    }
}
