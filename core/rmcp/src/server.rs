//! Core in front of an rmcp server: durable tasks, `subscriptions/listen`, resumable work, many
//! workers on PostgreSQL, principals and metrics, for a server written on rmcp.
//!
//! The seam is rmcp's Streamable HTTP service, wrapped rather than changed: [`DurableServer`]
//! builds a core [`Host`] whose [`Delegate`] is an rmcp `StreamableHttpService`. Core's
//! dispatcher decides every request first; the extension's traffic (`tasks/get|update|cancel`,
//! a listen for tasks, a task-mode `tools/call`) is answered by core from the store, with the
//! same bytes as every other server of this project, and everything else reaches rmcp as the
//! client sent it. A task's tool runs through rmcp's own handler, in a stateless 2026-07-28
//! `tools/call` core makes from the stored call (without the tasks extension declared, so the
//! handler runs the tool rather than making an in-memory task of it), handed to the handler's
//! `call_tool` directly; the tool finds its task with [`TaskRun::of`].

use std::sync::Arc;

use futures::FutureExt;
use futures::future::BoxFuture;
use mcp_tasks::Engine;
use mcp_tasks::host::{Delegate, Host, HostBuilder, PrepareFn, Prepared, RunContext, Tool, ToolCall};
use mcp_tasks::protocol::RpcError;
use mcp_tasks::protocol::TaskMode;
use rmcp::ServerHandler;
use rmcp::model::{ErrorData, InputRequest};
use rmcp::service::{RequestContext, RoleServer};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::session::never::NeverSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use serde_json::{Map, Value};

type Factory<S> = Arc<dyn Fn() -> Result<S, std::io::Error> + Send + Sync>;
type Configure = Box<dyn FnOnce(Tool) -> Tool + Send>;
type Serve = Box<dyn Fn(http::Request<axum::body::Body>) -> BoxFuture<'static, axum::response::Response> + Send + Sync>;

/// Builds the core [`Host`] that puts durable tasks in front of an rmcp server.
pub struct DurableServer<S> {
    engine: Engine,
    factory: Factory<S>,
    config: StreamableHttpServerConfig,
    tools: Vec<(String, Configure)>,
    prepares: std::collections::HashMap<String, PrepareFn>,
    host: Option<Box<dyn FnOnce(HostBuilder) -> HostBuilder + Send>>,
}

impl<S> std::fmt::Debug for DurableServer<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let tools: Vec<&str> = self.tools.iter().map(|(name, _)| name.as_str()).collect();
        f.debug_struct("DurableServer").field("tools", &tools).finish_non_exhaustive()
    }
}

impl<S: ServerHandler + Send + 'static> DurableServer<S> {
    /// Tasks kept by `engine` (its store: SQLite, memory, PostgreSQL) in front of the rmcp
    /// server `factory` makes (as for `StreamableHttpService::new`: called for each request).
    pub fn new(engine: Engine, factory: impl Fn() -> Result<S, std::io::Error> + Send + Sync + 'static) -> Self {
        Self {
            engine,
            factory: Arc::new(factory),
            config: StreamableHttpServerConfig::default(),
            tools: Vec::new(),
            prepares: Default::default(),
            host: None,
        }
    }

    /// rmcp's configuration for the traffic it serves (allowed hosts and origins, keep-alive,
    /// legacy sessions for 2025-era clients). The exchanges that run tasks' tools do not use it.
    #[must_use]
    pub fn config(mut self, config: StreamableHttpServerConfig) -> Self {
        self.config = config;
        self
    }

    /// Runs calls of the rmcp tool `name` as durable tasks: in [`TaskMode::Optional`] unless
    /// `configure` sets another [`Tool::mode`]; `configure` also sets its TTL, poll interval and
    /// [`Tool::resumable`] attempts. Calls of other tools, and synchronous calls of this one,
    /// are rmcp's.
    #[must_use]
    pub fn task_tool(mut self, name: impl Into<String>, configure: impl FnOnce(Tool) -> Tool + Send + 'static) -> Self {
        let name = name.into();
        self.tools.retain(|(n, _)| *n != name);
        self.tools.push((name, Box::new(configure)));
        self
    }

    /// Gives the task tool `name` an MRTR phase: `prepare` sees every `tools/call` round
    /// (arguments, `inputResponses`, the opened state of the previous round) before any task
    /// exists, and either lets the call become a task ([`Prepared::Ready`]) or asks for input
    /// ([`Prepared::InputRequired`]; core seals the state for the round). SEP-2663 has these
    /// rounds finish before the task is created, so they run here, not in the rmcp tool.
    #[must_use]
    pub fn prepare(
        mut self,
        name: impl Into<String>,
        prepare: impl Fn(&ToolCall) -> Result<Prepared, RpcError> + Send + Sync + 'static,
    ) -> Self {
        self.prepares.insert(name.into(), Arc::new(prepare));
        self
    }

    /// Further settings of the core host (principal, request-state key, execution, body
    /// limit), applied before the tools.
    #[must_use]
    pub fn host(mut self, configure: impl FnOnce(HostBuilder) -> HostBuilder + Send + 'static) -> Self {
        self.host = Some(Box::new(configure));
        self
    }

    /// The host: serve it with [`Host::router`] (its `tools/call`, `tasks/*` and listens are
    /// core's, the rest rmcp's), start [`Host::spawn_executor`] to run resumable tasks a dead
    /// process left, scrape [`Host::metrics_router`].
    pub fn build(self) -> Host {
        let delegate: Arc<dyn Delegate> = Arc::new(RmcpDelegate::new(Arc::clone(&self.factory), self.config));
        let mut builder = Host::builder(self.engine).delegate(Arc::clone(&delegate));
        if let Some(configure) = self.host {
            builder = configure(builder);
        }
        let mut prepares = self.prepares;
        for (name, configure) in self.tools {
            let prepare = prepares.remove(&name);
            builder =
                builder.tool(configure(Tool::delegated(name, Arc::clone(&delegate), prepare).mode(TaskMode::Optional)));
        }
        builder.build()
    }
}

/// rmcp's Streamable HTTP service as the server behind a core host.
struct RmcpDelegate<S: ServerHandler> {
    factory: Factory<S>,
    /// The traffic rmcp serves, under the caller's configuration.
    public: Serve,
    /// The handler the exchanges call, started at the first (inside the runtime).
    exchanges: parking_lot::Mutex<Option<Arc<Exchanges<S>>>>,
    /// rmcp keeps sessions (2025-era clients): no stdio then.
    legacy_session_mode: bool,
}

fn serving<S, M>(service: StreamableHttpService<S, M>) -> Serve
where
    S: ServerHandler + Send + 'static,
    M: rmcp::transport::streamable_http_server::SessionManager,
{
    Box::new(move |request| {
        let service = service.clone();
        Box::pin(async move {
            match tower::ServiceExt::oneshot(service, request).await {
                Ok(response) => response.map(axum::body::Body::new),
                Err(never) => match never {},
            }
        })
    })
}

impl<S: ServerHandler + Send + 'static> RmcpDelegate<S> {
    fn new(factory: Factory<S>, config: StreamableHttpServerConfig) -> Self {
        let make = {
            let factory = Arc::clone(&factory);
            move || factory()
        };
        let legacy_session_mode = config.legacy_session_mode;
        let public = if legacy_session_mode {
            serving(StreamableHttpService::new(make, Arc::new(LocalSessionManager::default()), config))
        } else {
            serving(StreamableHttpService::new(make, Arc::new(NeverSessionManager::default()), config))
        };
        Self { factory, public, exchanges: parking_lot::Mutex::new(None), legacy_session_mode }
    }

    /// The exchanges' handler, started now if none runs (or the last one's service ended).
    fn exchanges(&self) -> Result<Arc<Exchanges<S>>, std::io::Error> {
        let mut slot = self.exchanges.lock();
        if let Some(running) = slot.as_ref().filter(|e| !e.service.peer().is_transport_closed()) {
            return Ok(Arc::clone(running));
        }
        let started = Arc::new(Exchanges::start(&self.factory)?);
        *slot = Some(Arc::clone(&started));
        Ok(started)
    }
}

/// The `tools/call` of an exchange as rmcp's typed params. They are read as the plain struct
/// they are: reading the whole message as a `ClientJsonRpcMessage` goes through serde's
/// buffering of untagged and flattened enums, which took a tenth of a task's CPU under load.
fn read_exchange(
    body: Result<axum::body::Bytes, axum::Error>,
) -> Result<rmcp::model::CallToolRequestParams, serde_json::Error> {
    let mut message: serde_json::Value = serde_json::from_slice(&body.map_err(serde::de::Error::custom)?)?;
    serde_json::from_value(message["params"].take())
}

/// The exchanges of a host: each calls a handler of its own from the factory, with the peer of one
/// long-lived rmcp service
/// (`serve_directly`, as rmcp's stateless HTTP path serves a request) that gives its calls a
/// [`Peer`](rmcp::Peer). A `tools/call` core made and checked goes to the handler's `call_tool`
/// with a `RequestContext` of its own, as rmcp's service loop would make it, but without the
/// loop: rmcp spawns one future per request sized for every request kind it routes (~8 KB), and
/// a task's call is in flight for the task's whole life. Nothing else goes through the service:
/// what a tool asks of its peer is refused by its transport ([`ExchangeTransport`]).
struct Exchanges<S: ServerHandler> {
    /// The service of one handler: the peer every exchange's context names, and the tool list
    /// [`RmcpDelegate::serves_tool`] reads.
    service: rmcp::service::RunningService<RoleServer, S>,
    /// Each exchange's own handler comes from here, as rmcp's stateless service makes one per
    /// request: state a handler keeps per instance stays with one task's run, and a handler a
    /// panicking run left broken (a poisoned mutex) serves no later task.
    factory: Factory<S>,
    next_id: std::sync::atomic::AtomicI64,
}

impl<S: ServerHandler + Send + 'static> Exchanges<S> {
    fn start(factory: &Factory<S>) -> Result<Self, std::io::Error> {
        let handler = factory()?;
        let (incoming, receiver) = tokio::sync::mpsc::unbounded_channel();
        let transport = ExchangeTransport { receiver, incoming };
        let peer = rmcp::model::InitializeRequestParams::new(Default::default(), Default::default())
            .with_protocol_version(rmcp::model::ProtocolVersion::V_2026_07_28);
        // Dropped with the host's delegate, the service stops (its drop guard). Started outside
        // any span: it lives as long as the host, and rmcp's spawned loop would otherwise hold
        // the span it was started in (the first task's run, made here lazily) open for as long.
        // (Entering `Span::none()` would not do: it leaves the current span as it is.) Its
        // events still reach the application's subscriber, which is the default when they occur.
        let none = tracing::Dispatch::none();
        let service = tracing::dispatcher::with_default(&none, || {
            rmcp::service::serve_directly_with_ct(
                handler,
                transport,
                Some(peer),
                tokio_util::sync::CancellationToken::new(),
            )
        });
        Ok(Self { service, factory: Arc::clone(factory), next_id: std::sync::atomic::AtomicI64::new(1) })
    }

    /// One exchange, made ready now: the handler's answer as the JSON-RPC bytes rmcp's service
    /// would send. The returned future holds the handler's `call_tool` future and a few pointers:
    /// a task holds it for its whole life, so the call's params and context are made here and
    /// reach it boxed, not as values it would keep room for after they moved into the handler.
    /// It runs inside core's run of the task's tool, which turns a panic into the task's -32603
    /// failure and drops the run when the task is cancelled or expires, as for its own tools.
    fn call(
        self: Arc<Self>,
        mut params: rmcp::model::CallToolRequestParams,
        parts: http::request::Parts,
    ) -> BoxFuture<'static, axum::response::Response> {
        use rmcp::model::NumberOrString;
        let id = NumberOrString::Number(self.next_id.fetch_add(1, std::sync::atomic::Ordering::Relaxed));
        let mut context = RequestContext::new(id.clone(), self.service.peer().clone());
        // Where rmcp's service loop puts it: the request's `_meta` in the context.
        if let Some(meta) = params.meta.take() {
            context.meta = meta;
        }
        // The task's context in the context's extensions ([`TaskRun::of`]), and its cancellation
        // as the context's `ct`, for a tool that watches it as rmcp's tools do.
        if let Some(run) = parts.extensions.get::<RunContext>() {
            if run.task_id().is_some() {
                context.ct = run.cancellation().child_token();
            }
            context.extensions.insert(run.clone());
        }
        // The HTTP parts where rmcp's HTTP path puts them, for a tool that extracts them, but
        // without headers: those of an exchange are core's own (a task keeps none of its
        // client's, and may run in another process), and rmcp copies a tool's context whole for
        // each extractor, a header map with it.
        let (mut http, ()) = http::Request::new(()).into_parts();
        http.method = parts.method;
        http.uri = parts.uri;
        http.version = parts.version;
        context.extensions.insert(http);
        // The task's own handler, made now; one the factory cannot make fails the task.
        let handler = match (self.factory)() {
            Ok(handler) => handler,
            Err(e) => {
                let error =
                    ErrorData::internal_error(format!("the rmcp server could not be made for this run: {e}"), None);
                let message = rmcp::model::ServerJsonRpcMessage::error(error, Some(id));
                let bytes = serde_json::to_vec(&message)
                    .unwrap_or_else(|e| failure(format!("rmcp's answer does not serialize: {e}")));
                return futures::future::ready(json_response(bytes)).boxed();
            }
        };
        let job = Box::new((handler, params, context));
        Box::pin(async move {
            use rmcp::model::{CallToolResponse, ServerJsonRpcMessage, ServerResult};
            let (handler, params, context) = {
                let job = job;
                *job
            };
            let outcome = handler.call_tool(params, context).await;
            let message = match outcome {
                // SEP-2663: no task handle to a call that did not declare the extension, which
                // core's exchange never does. The handler made an in-memory task of its own anyway.
                Ok(CallToolResponse::Task(_)) => ServerJsonRpcMessage::error(
                    ErrorData::internal_error("the rmcp tool answered a task's run with a task of its own", None),
                    Some(id),
                ),
                Ok(response) => ServerJsonRpcMessage::response(ServerResult::from(response), id),
                Err(error) => ServerJsonRpcMessage::error(error, Some(id)),
            };
            json_response(
                serde_json::to_vec(&message)
                    .unwrap_or_else(|e| failure(format!("rmcp's answer does not serialize: {e}"))),
            )
        })
    }
}

/// The transport of [`Exchanges`]' service. Requests reach the handler without it; what comes
/// out is the handler's own traffic with its peer. Its notifications are the exchange's, not the
/// task's, and are dropped; a request it makes of the client (sampling, elicitation outside a
/// task's input) is refused at once, since no client is at the other end.
struct ExchangeTransport {
    receiver: tokio::sync::mpsc::UnboundedReceiver<rmcp::model::ClientJsonRpcMessage>,
    incoming: tokio::sync::mpsc::UnboundedSender<rmcp::model::ClientJsonRpcMessage>,
}

impl rmcp::transport::Transport<RoleServer> for ExchangeTransport {
    type Error = std::io::Error;

    fn send(
        &mut self,
        item: rmcp::model::ServerJsonRpcMessage,
    ) -> impl std::future::Future<Output = Result<(), Self::Error>> + Send + 'static {
        use rmcp::model::{ClientJsonRpcMessage, ErrorCode, ServerJsonRpcMessage};
        if let ServerJsonRpcMessage::Request(request) = &item {
            let refusal = ErrorData::new(
                ErrorCode::METHOD_NOT_FOUND,
                "a tool run as a task reaches its client through the task's input, not requests of its own",
                None,
            );
            let _ = self.incoming.send(ClientJsonRpcMessage::error(refusal, Some(request.id.clone())));
        }
        std::future::ready(Ok(()))
    }

    fn receive(&mut self) -> impl std::future::Future<Output = Option<rmcp::model::ClientJsonRpcMessage>> + Send {
        self.receiver.recv()
    }

    fn close(&mut self) -> impl std::future::Future<Output = Result<(), Self::Error>> + Send {
        std::future::ready(Ok(()))
    }
}

/// A JSON-RPC error answer for an exchange that could not be run.
fn failure(message: String) -> Vec<u8> {
    serde_json::to_vec(&serde_json::json!({"jsonrpc": "2.0", "id": 0, "error": {"code": -32603, "message": message}}))
        .expect("a JSON value serializes")
}

impl<S: ServerHandler + Send + 'static> Delegate for RmcpDelegate<S> {
    fn serves_stdio(&self) -> Result<(), String> {
        if self.legacy_session_mode {
            return Err("rmcp's legacy_session_mode keeps sessions by the Mcp-Session-Id header, which stdio has no \
                        way to carry: build the server for stdio without it (StreamableHttpServerConfig's default)"
                .to_owned());
        }
        Ok(())
    }

    fn serve(&self, request: http::Request<axum::body::Body>) -> BoxFuture<'static, axum::response::Response> {
        (self.public)(request)
    }

    fn exchange(&self, request: http::Request<axum::body::Body>) -> BoxFuture<'static, axum::response::Response> {
        let exchanges = self.exchanges();
        let (parts, body) = request.into_parts();
        // Core's exchange body is in memory already: it is read now, not in the future a task
        // holds for its whole life (which then keeps only what the handler's run needs).
        let mut reading = Box::pin(axum::body::to_bytes(body, usize::MAX));
        let Some(read) = reading.as_mut().now_or_never() else {
            return Box::pin(async move { answered(exchanges, read_exchange(reading.await), parts).await });
        };
        answered(exchanges, read_exchange(read), parts)
    }

    fn serves_tool(&self, name: &str) -> Result<bool, String> {
        // rmcp's own header validation asks the same question (`get_tool`), which the
        // `#[tool_handler]` macro answers from the tool router: asked of the exchanges'
        // long-lived handler, not of a new one per call (the factory's side effects would run
        // each time).
        let exchanges = self.exchanges().map_err(|e| format!("the rmcp server could not be made: {e}"))?;
        Ok(exchanges.service.service().get_tool(name).is_some())
    }
}

/// The HTTP answer to an exchange: the handler's JSON-RPC answer, or a -32603 error when the
/// exchange could not be run.
fn answered<S: ServerHandler + Send + 'static>(
    exchanges: Result<Arc<Exchanges<S>>, std::io::Error>,
    call: Result<rmcp::model::CallToolRequestParams, serde_json::Error>,
    parts: http::request::Parts,
) -> BoxFuture<'static, axum::response::Response> {
    let refusal = match (exchanges, call) {
        (Ok(exchanges), Ok(call)) => return exchanges.call(call, parts),
        (Err(e), _) => format!("the server factory failed: {e}"),
        (_, Err(e)) => format!("rmcp cannot read the exchange: {e}"),
    };
    futures::future::ready(json_response(failure(refusal))).boxed()
}

/// A JSON answer's HTTP response.
fn json_response(body: Vec<u8>) -> axum::response::Response {
    let mut response = axum::response::Response::new(axum::body::Body::from(body));
    response.headers_mut().insert(http::header::CONTENT_TYPE, http::HeaderValue::from_static("application/json"));
    response
}

/// The durable task a tool call runs in, when core runs it as one: what rmcp's
/// `task_manager::TaskContext` gives a tool, kept in the store.
#[derive(Clone, Debug)]
pub struct TaskRun {
    ctx: RunContext,
}

impl TaskRun {
    /// The task of the call `context` belongs to; `None` for a synchronous call.
    pub fn of(context: &RequestContext<RoleServer>) -> Option<Self> {
        let ctx = context.extensions.get::<RunContext>()?;
        ctx.task_id().is_some().then(|| Self { ctx: ctx.clone() })
    }

    /// The task of the call, for a tool that needs one (it asks for input mid-run). A call that
    /// runs synchronously because its client did not declare the tasks extension is answered
    /// -32021 naming it (the client's missing declaration, not a server fault); one whose
    /// client did declare it (the tool is not a task tool of this server) is -32603.
    pub fn required(context: &RequestContext<RoleServer>) -> Result<Self, ErrorData> {
        if let Some(run) = Self::of(context) {
            return Ok(run);
        }
        let declared = context
            .meta
            .get(mcp_tasks::protocol::META_CLIENT_CAPABILITIES)
            .and_then(|c| c.get("extensions"))
            .and_then(|e| e.get(mcp_tasks::protocol::EXTENSION_ID))
            .is_some_and(Value::is_object);
        let error = if declared {
            RpcError::internal("this tool runs synchronously and cannot ask for input mid-run: make it a task tool")
        } else {
            mcp_tasks::protocol::negotiation::missing_tasks_capability(
                "asking for input mid-run (this tool runs as a task for a client that declares it)",
            )
            .to_rpc()
        };
        Err(to_error_data(error))
    }

    /// Core's context of the run, for tool code written for core's host (`RunContext`).
    pub fn context(&self) -> &RunContext {
        &self.ctx
    }

    /// The task id.
    pub fn task_id(&self) -> &str {
        self.ctx.task_id().unwrap_or_default()
    }

    /// This run's attempt: 1 for a first run, 2 or more when a resumable task runs again after
    /// the process running it died.
    pub fn attempt(&self) -> u32 {
        self.ctx.attempt()
    }

    /// Asks the client for input under `key` (unique over the task's life) and waits for its
    /// answer through `tasks/update`; the task is `input_required` meanwhile. Input the client
    /// that created the task did not declare it can answer is refused (-32021) and changes
    /// nothing.
    pub async fn request_input(&self, key: impl Into<String>, request: InputRequest) -> Result<Value, ErrorData> {
        let key = key.into();
        let value = serde_json::to_value(&request).map_err(|e| ErrorData::internal_error(e.to_string(), None))?;
        let mut requests = Map::new();
        requests.insert(key.clone(), value);
        let mut answers = self.ctx.request_input(requests).await.map_err(to_error_data)?;
        answers.remove(&key).ok_or_else(|| ErrorData::internal_error(format!("no answer for {key:?}"), None))
    }

    /// Asks the client for several inputs at once (`inputRequests` as JSON, key -> request)
    /// and waits until `tasks/update` has answered every key; the answers, key -> response.
    pub async fn request_inputs(&self, requests: Map<String, Value>) -> Result<Map<String, Value>, ErrorData> {
        self.ctx.request_input(requests).await.map_err(to_error_data)
    }

    /// Sets the task's `statusMessage`, durably.
    pub async fn set_status_message(&self, message: impl Into<String>) -> Result<(), ErrorData> {
        self.ctx.set_status_message(message).await.map_err(to_error_data)
    }

    /// True once the task was cancelled (or expired).
    pub fn is_cancel_requested(&self) -> bool {
        self.ctx.is_cancelled()
    }

    /// Resolves once the task is cancelled (or expires); pair it with `tokio::select!`. The
    /// task is `cancelled` already: whatever the tool returns then is dropped.
    pub async fn cancelled(&self) {
        self.ctx.cancellation().cancelled().await;
    }

    /// The checkpoint saved last (this attempt or an earlier one), to resume from.
    pub fn saved_checkpoint(&self) -> Option<Value> {
        self.ctx.saved_checkpoint()
    }

    /// Saves a checkpoint (a small JSON value) durably with the task, for a later attempt.
    pub async fn checkpoint(&self, value: Value) -> Result<(), ErrorData> {
        self.ctx.checkpoint(value).await.map_err(to_error_data)
    }
}

/// rmcp's error of a core JSON-RPC error (its code, message and data kept).
/// Core's error as rmcp's. rmcp's codes are `i32`: a code outside it (core's are `i64`, and a
/// tool may set any) is not cut to another code but reported as -32603 with the code kept in
/// `data.code`.
fn to_error_data(error: RpcError) -> ErrorData {
    match i32::try_from(error.code) {
        Ok(code) => ErrorData::new(rmcp::model::ErrorCode(code), error.message, error.data),
        Err(_) => {
            let data = serde_json::json!({"code": error.code, "data": error.data});
            ErrorData::new(rmcp::model::ErrorCode::INTERNAL_ERROR, error.message, Some(data))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_error_code_outside_rmcps_range_is_not_cut_to_another() {
        let kept = to_error_data(RpcError::new(-32021, "missing"));
        assert_eq!(kept.code.0, -32021);
        let wide = to_error_data(RpcError::new(-4_294_967_296 - 32_601, "a tool's own code"));
        assert_eq!(wide.code, rmcp::model::ErrorCode::INTERNAL_ERROR, "not -32601, what `as i32` made of it");
        assert_eq!(wide.data.unwrap()["code"], serde_json::json!(-4_294_967_296_i64 - 32_601));
    }
}
