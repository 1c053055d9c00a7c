//! Glue for the server side: core's dispatcher and engine behind the TypeScript server
//! (`mcp-tasks/server`). One HTTP request goes in (method, raw header pairs, body, principal);
//! what comes out is a finished reply, "the SDK serves this", a listen stream framed by core,
//! or a task call whose task the TypeScript side creates and runs. Every decision, status code,
//! header and byte of JSON is core's; JSON crosses the boundary as strings.

use std::collections::HashMap;
use std::sync::Arc;

use mcp_tasks::clock::ManualClock;
use mcp_tasks::engine::{EngineOptions, Served, Subscription, TaskContext, TaskHandle, TaskOptions};
use mcp_tasks::protocol::negotiation::{self, TaskMode};
use mcp_tasks::protocol::request_state;
use mcp_tasks::protocol::server::{
    Decision, Dispatcher, DispatcherConfig, Headers, HttpRequest, ListenFrames, REQUEST_STATE_TTL_MS, Reply, Routed,
    ToolCallRoute, input_required_result, sse_event,
};
use mcp_tasks::protocol::{InputRequests, ProtocolError, RpcError};
use mcp_tasks::{Engine, EngineError};
use napi::bindgen_prelude::Buffer;
use napi_derive::napi;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

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

fn http_reply(reply: &Reply) -> HttpReply {
    let mut headers: HashMap<String, String> =
        reply.headers.iter().map(|(n, v)| ((*n).to_owned(), (*v).to_owned())).collect();
    if let Some(content_type) = reply.content_type() {
        headers.insert("content-type".to_owned(), content_type.to_owned());
    }
    HttpReply { status: u32::from(reply.status), headers, body: String::from_utf8_lossy(&reply.body()).into_owned() }
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

/// What [`NativeServer::handle`] decided. Exactly one of its fields is set.
#[napi]
pub struct Handled {
    reply: Option<HttpReply>,
    call: Option<Arc<CallInner>>,
    listen: Option<Arc<ListenInner>>,
}

#[napi]
impl Handled {
    /// True when the SDK serves the request (send it the request unchanged).
    #[napi(getter)]
    pub fn delegate(&self) -> bool {
        self.reply.is_none() && self.call.is_none() && self.listen.is_none()
    }

    /// The reply to send, when core answered the request itself.
    #[napi(getter)]
    pub fn reply(&self) -> Option<HttpReply> {
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
        let opened = options.open().await.map_err(|e| engine_error(EngineError::Store(e)))?;
        // A manual clock never moves on its own: the caller sweeps (tests and vectors).
        let sweeper = opened.clock.is_none().then(|| opened.engine.spawn_sweeper());
        Ok(Self {
            dispatcher: Arc::new(parking_lot::RwLock::new(Dispatcher::new(config))),
            engine: opened.engine,
            clock: opened.clock,
            sweeper: parking_lot::Mutex::new(sweeper),
            state_key: Arc::new(request_state_key.map_or_else(random_key, String::into_bytes)),
        })
    }

    /// Stops the background sweeper, which holds the engine and its store (also done when the
    /// server is garbage-collected).
    #[napi]
    pub fn close(&self) {
        if let Some(sweeper) = self.sweeper.lock().take() {
            sweeper.abort();
        }
    }

    /// Sets how `tool` runs: `forbidden`, `optional` or `required`.
    #[napi]
    pub fn configure(&self, tool: String, mode: String) -> napi::Result<()> {
        let mode = parse_mode(&mode)?;
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

    /// The capabilities the server advertises for the extension (JSON), to merge into the SDK
    /// server's own.
    #[napi]
    pub fn capabilities(&self) -> String {
        negotiation::server_capabilities().to_string()
    }

    /// Decides one HTTP request. `headers` are the raw pairs as received, flat
    /// (`[name, value, name, value, ...]`, repeats kept); `body` is `null` when it was over
    /// [`NativeServer::max_body_bytes`]; `principal` is the caller (`null` answers 401).
    #[napi]
    pub async fn handle(
        &self,
        method: String,
        headers: Vec<String>,
        body: Option<Buffer>,
        principal: Option<String>,
    ) -> napi::Result<Handled> {
        let pairs: Vec<(&str, &str)> =
            headers.chunks(2).filter_map(|p| Some((p[0].as_str(), p.get(1)?.as_str()))).collect();
        let request = HttpRequest { method: &method, headers: Headers(&pairs), body: body.as_deref() };
        let routed = match self.dispatcher.read().handle_http(&request, principal.as_deref()) {
            Decision::Reply(reply) => return Ok(Handled { reply: Some(http_reply(&reply)), call: None, listen: None }),
            Decision::Delegate => return Ok(Handled { reply: None, call: None, listen: None }),
            Decision::Route(routed) => routed,
        };
        let engine = self.engine.clone();
        let served = engine.serve(&routed.principal, routed.route.clone()).await;
        let reply = |reply: Reply| Ok(Handled { reply: Some(http_reply(&reply)), call: None, listen: None });
        match served {
            Err(error) => reply(routed.error(&error)),
            Ok(Served::Result(result)) => reply(routed.result(result)),
            Ok(Served::Listen(subscription)) => {
                let frames = routed.listen_frames();
                let ack = sse_event(&frames.ack(&subscription.accepted));
                let listen = ListenInner { frames, ack, subscription: tokio::sync::Mutex::new(subscription) };
                Ok(Handled { reply: None, call: None, listen: Some(Arc::new(listen)) })
            }
            Ok(Served::CallTool(call)) => {
                // The previous MRTR round's state comes back sealed: open it, or refuse the call.
                let key = Arc::clone(&self.state_key);
                let state = match call.request_state.as_deref() {
                    None => None,
                    Some(sealed) => {
                        match request_state::open(&key, &routed.principal, &call.name, sealed, engine.now_ms()) {
                            Ok(state) => Some(state),
                            Err(error) => return reply(routed.error(&error)),
                        }
                    }
                };
                let inner = CallInner { routed, call, state, engine, key };
                Ok(Handled { reply: None, call: Some(Arc::new(inner)), listen: None })
            }
        }
    }

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

    /// Runs one TTL sweep now; resolves to `[expired, purged]`.
    #[napi]
    pub async fn sweep(&self) -> napi::Result<Vec<u32>> {
        let report = self.engine.sweep().await.map_err(|e| engine_error(EngineError::Store(e)))?;
        Ok(vec![count(report.expired), count(report.purged)])
    }
}

/// A fresh 32-byte key from the OS's generator, which lives as long as the process.
fn random_key() -> Vec<u8> {
    let mut key = vec![0u8; 32];
    getrandom::fill(&mut key).expect("the OS CSPRNG is available");
    key
}

fn count(n: usize) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
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
        Ok(http_reply(&inner.routed.result(input_required_result(requests, sealed))))
    }

    /// The reply refusing the call with a JSON-RPC error before any task exists.
    #[napi]
    pub fn error(&self, code: i64, message: String, data_json: Option<String>) -> napi::Result<HttpReply> {
        let error = rpc_error(code, message, data_json)?;
        Ok(http_reply(&self.inner.routed.tool_error(&error)))
    }

    /// Creates the task durably with core's `TaskOptions` (JSON: `ttlMs` absent for the
    /// default or `null` for unlimited, `pollIntervalMs`); the task's `creationReply` is the
    /// answer to send.
    #[napi]
    pub async fn create_task(&self, options_json: String) -> napi::Result<NativeTask> {
        let options: TaskOptions = serde_json::from_value(parse_json("task options", &options_json)?)
            .map_err(|e| invalid(format!("task options: {e}")))?;
        let inner = &self.inner;
        let (created, ctx) =
            inner.engine.create_task(&inner.routed.principal, &inner.call.name, options).await.map_err(engine_error)?;
        let created = serde_json::to_value(created).expect("results serialize");
        Ok(NativeTask {
            id: ctx.task_id().to_owned(),
            handle: ctx.handle(),
            ctx: parking_lot::Mutex::new(Some(ctx)),
            reply: http_reply(&inner.routed.result(created)),
            finished: CancellationToken::new(),
            runtime: tokio::runtime::Handle::current(),
        })
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
    ctx: parking_lot::Mutex<Option<TaskContext>>,
    reply: HttpReply,
    /// Cancelled when the work finishes, so [`NativeTask::cancelled`] stops waiting.
    finished: CancellationToken,
    /// The runtime the task was created on, where dropping its context fails it.
    runtime: tokio::runtime::Handle,
}

impl Drop for NativeTask {
    fn drop(&mut self) {
        self.finished.cancel();
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

    /// The answer to the `tools/call` that created the task.
    #[napi(getter)]
    pub fn creation_reply(&self) -> HttpReply {
        HttpReply { status: self.reply.status, headers: self.reply.headers.clone(), body: self.reply.body.clone() }
    }

    /// True once the task was cancelled or expired.
    #[napi]
    pub fn is_cancelled(&self) -> bool {
        self.handle.is_cancelled()
    }

    /// Resolves to true when the task is cancelled or expires (here, by another worker, or by a
    /// sweep), or to false once the work finished first.
    #[napi]
    pub async fn cancelled(&self) -> bool {
        tokio::select! {
            () = self.handle.cancelled() => true,
            () = self.finished.cancelled() => false,
        }
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

    /// Completes with a `CallToolResult` (JSON); resolves to false when the task was already
    /// terminal (the result is discarded).
    #[napi]
    pub async fn complete(&self, result_json: String) -> napi::Result<bool> {
        let result = parse_json("result", &result_json)?;
        let ctx = self.take();
        match ctx {
            Some(ctx) => ctx.complete(result).await.map_err(engine_error),
            None => Ok(false),
        }
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
    fn take(&self) -> Option<TaskContext> {
        self.finished.cancel();
        self.ctx.lock().take()
    }

    async fn fail_with(&self, error: RpcError) -> napi::Result<bool> {
        match self.take() {
            Some(ctx) => ctx.fail(error).await.map_err(engine_error),
            None => Ok(false),
        }
    }
}

struct ListenInner {
    frames: ListenFrames,
    ack: String,
    subscription: tokio::sync::Mutex<Subscription>,
}

/// One `subscriptions/listen` stream for tasks, framed by core as SSE events: send `ack`, then
/// every event `next()` resolves to, then `closeEvent`.
#[napi]
pub struct NativeListen {
    inner: Arc<ListenInner>,
}

#[napi]
impl NativeListen {
    /// The acknowledgement (one SSE event).
    #[napi(getter)]
    pub fn ack(&self) -> String {
        self.inner.ack.clone()
    }

    /// The next `notifications/tasks` (one SSE event), or null once every accepted task is
    /// terminal and reported.
    #[napi]
    pub async fn next(&self) -> Option<String> {
        let task = self.inner.subscription.lock().await.next().await?;
        Some(sse_event(&self.inner.frames.task(task)))
    }

    /// The listen request's result (one SSE event), which ends the stream gracefully.
    #[napi(getter)]
    pub fn close_event(&self) -> String {
        sse_event(&self.inner.frames.close())
    }
}
