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
//! handler runs the tool rather than making an in-memory task of it); the tool finds its task
//! with [`TaskRun::of`].

use std::sync::Arc;

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
struct RmcpDelegate<S> {
    factory: Factory<S>,
    /// The traffic rmcp serves, under the caller's configuration.
    public: Serve,
    /// The service the exchanges go through, started at the first (inside the runtime).
    exchanges: parking_lot::Mutex<Option<Arc<Exchanges>>>,
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
        let public = if config.legacy_session_mode {
            serving(StreamableHttpService::new(make, Arc::new(LocalSessionManager::default()), config))
        } else {
            serving(StreamableHttpService::new(make, Arc::new(NeverSessionManager::default()), config))
        };
        Self { factory, public, exchanges: parking_lot::Mutex::new(None) }
    }

    /// The exchanges' service, started now if none runs (or the last one ended).
    fn exchanges(&self) -> Result<Arc<Exchanges>, std::io::Error> {
        let mut slot = self.exchanges.lock();
        if let Some(running) = slot.as_ref().filter(|e| !e.incoming.is_closed()) {
            return Ok(Arc::clone(running));
        }
        let started = Arc::new(Exchanges::start(&self.factory)?);
        *slot = Some(Arc::clone(&started));
        Ok(started)
    }
}

/// The `tools/call` of an exchange as rmcp's typed request. Its params are read as the plain
/// struct they are: reading the whole message as a `ClientJsonRpcMessage` goes through serde's
/// buffering of untagged and flattened enums, which took a tenth of a task's CPU under load.
fn read_exchange(body: &[u8]) -> Result<rmcp::model::JsonRpcRequest<rmcp::model::ClientRequest>, serde_json::Error> {
    use rmcp::model::{CallToolRequestParams, ClientRequest, JsonRpcRequest, NumberOrString, Request};
    let mut message: serde_json::Value = serde_json::from_slice(body)?;
    let params: CallToolRequestParams = serde_json::from_value(message["params"].take())?;
    // Core numbers an exchange's rounds; the id goes no further than this process.
    let id = message["id"].as_i64().map_or(NumberOrString::Number(1), NumberOrString::Number);
    Ok(JsonRpcRequest::new(id, ClientRequest::CallToolRequest(Request::new(params))))
}

/// The one rmcp service every exchange of a host goes through: a handler from the factory,
/// served by rmcp (`serve_directly`, as its stateless HTTP path serves one request) over a
/// transport of this crate that stays open. A `tools/call` core made and checked goes to it as a
/// message, without HTTP framing, header checks or JSON text in between, and its answer comes
/// back by request id. One service, not one per exchange: a service holds its channels (tens of
/// KB) for as long as its tool runs, which for a task is the whole task.
struct Exchanges {
    incoming: tokio::sync::mpsc::UnboundedSender<rmcp::model::ClientJsonRpcMessage>,
    waiting: Waiting,
    next_id: std::sync::atomic::AtomicI64,
    /// Stops the service when the host is dropped.
    _stop: tokio_util::sync::DropGuard,
}

type Waiting = Arc<parking_lot::Mutex<std::collections::HashMap<i64, tokio::sync::oneshot::Sender<Vec<u8>>>>>;

impl Exchanges {
    fn start<S: ServerHandler + Send + 'static>(factory: &Factory<S>) -> Result<Self, std::io::Error> {
        let handler = factory()?;
        let (incoming, receiver) = tokio::sync::mpsc::unbounded_channel();
        let waiting: Waiting = Arc::default();
        let transport = ExchangeTransport { receiver, waiting: Arc::clone(&waiting), incoming: incoming.clone() };
        let stop = tokio_util::sync::CancellationToken::new();
        let peer = rmcp::model::InitializeRequestParams::new(Default::default(), Default::default())
            .with_protocol_version(rmcp::model::ProtocolVersion::V_2026_07_28);
        let service = rmcp::service::serve_directly_with_ct(Unpanicking(handler), transport, Some(peer), stop.clone());
        tokio::spawn(async move {
            let _ = service.waiting().await;
        });
        Ok(Self { incoming, waiting, next_id: std::sync::atomic::AtomicI64::new(1), _stop: stop.drop_guard() })
    }

    /// Runs one exchange: its answer as JSON-RPC bytes, or `None` when the service is gone.
    async fn run(&self, mut request: rmcp::model::JsonRpcRequest<rmcp::model::ClientRequest>) -> Option<Vec<u8>> {
        let id = self.next_id.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        request.id = rmcp::model::NumberOrString::Number(id);
        let (answer, answered) = tokio::sync::oneshot::channel();
        self.waiting.lock().insert(id, answer);
        // A dropped exchange (its task cancelled) leaves no waiter behind; the handler stops on
        // the task's cancellation (`Unpanicking`).
        let forget = Forget { waiting: &self.waiting, id };
        if self.incoming.send(rmcp::model::ClientJsonRpcMessage::Request(request)).is_err() {
            return None;
        }
        let answer = answered.await.ok();
        drop(forget);
        answer
    }
}

/// Removes an exchange's waiter when the exchange ends, answered or dropped.
struct Forget<'a> {
    waiting: &'a Waiting,
    id: i64,
}

impl Drop for Forget<'_> {
    fn drop(&mut self) {
        self.waiting.lock().remove(&self.id);
    }
}

/// The transport of [`Exchanges`]: requests in from core's exchanges, answers out to whoever
/// waits for their id. The handler's notifications are the exchange's, not the task's, and are
/// dropped; a request it makes of the client (sampling, elicitation outside a task's input) is
/// refused at once, since no client is at the other end.
struct ExchangeTransport {
    receiver: tokio::sync::mpsc::UnboundedReceiver<rmcp::model::ClientJsonRpcMessage>,
    incoming: tokio::sync::mpsc::UnboundedSender<rmcp::model::ClientJsonRpcMessage>,
    waiting: Waiting,
}

impl rmcp::transport::Transport<RoleServer> for ExchangeTransport {
    type Error = std::io::Error;

    fn send(
        &mut self,
        item: rmcp::model::ServerJsonRpcMessage,
    ) -> impl std::future::Future<Output = Result<(), Self::Error>> + Send + 'static {
        use rmcp::model::{ClientJsonRpcMessage, ErrorCode, NumberOrString, ServerJsonRpcMessage};
        let id = match &item {
            ServerJsonRpcMessage::Response(response) => Some(&response.id),
            ServerJsonRpcMessage::Error(error) => error.id.as_ref(),
            ServerJsonRpcMessage::Request(request) => {
                let refusal = ErrorData::new(
                    ErrorCode::METHOD_NOT_FOUND,
                    "a tool run as a task reaches its client through the task's input, not requests of its own",
                    None,
                );
                let _ = self.incoming.send(ClientJsonRpcMessage::error(refusal, Some(request.id.clone())));
                None
            }
            _ => None,
        };
        if let Some(NumberOrString::Number(id)) = id
            && let Some(waiter) = self.waiting.lock().remove(id)
        {
            let bytes = serde_json::to_vec(&item).unwrap_or_default();
            let _ = waiter.send(bytes);
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
    fn serve(&self, request: http::Request<axum::body::Body>) -> BoxFuture<'static, axum::response::Response> {
        (self.public)(request)
    }

    fn exchange(&self, request: http::Request<axum::body::Body>) -> BoxFuture<'static, axum::response::Response> {
        use rmcp::model::GetExtensions;
        let exchanges = self.exchanges();
        Box::pin(async move {
            let (parts, body) = request.into_parts();
            // Core's exchange body is in memory already: this takes it, it does not wait. It is
            // read and dropped before the exchange waits (for the task's whole life).
            let call = match axum::body::to_bytes(body, usize::MAX).await {
                Ok(bytes) => read_exchange(&bytes),
                Err(e) => Err(serde::de::Error::custom(e)),
            };
            let answer = match (exchanges, call) {
                (Err(e), _) => failure(format!("the server factory failed: {e}")),
                (_, Err(e)) => failure(format!("rmcp cannot read the exchange: {e}")),
                (Ok(exchanges), Ok(mut call)) => {
                    // The HTTP parts, with the task's context, where rmcp's HTTP path puts them.
                    call.request.extensions_mut().insert(parts);
                    match exchanges.run(call).await {
                        Some(answer) => answer,
                        None => failure("rmcp's service ended".to_owned()),
                    }
                }
            };
            let mut response = axum::response::Response::new(axum::body::Body::from(answer));
            response
                .headers_mut()
                .insert(http::header::CONTENT_TYPE, http::HeaderValue::from_static("application/json"));
            response
        })
    }

    fn serves_tool(&self, name: &str) -> bool {
        // rmcp's own header validation asks the same question (`get_tool`), which the
        // `#[tool_handler]` macro answers from the tool router.
        (self.factory)().is_ok_and(|handler| handler.get_tool(name).is_some())
    }
}

/// The handler the exchanges run: the rmcp server's, with a panic in `call_tool` answered as the
/// server-fault error (-32603) it is, so the task fails rather than waits forever. An exchange is
/// a `tools/call` only, so only what serving one reads is forwarded.
#[derive(Clone)]
struct Unpanicking<S>(S);

impl<S: ServerHandler> ServerHandler for Unpanicking<S> {
    async fn call_tool(
        &self,
        request: rmcp::model::CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::CallToolResponse, ErrorData> {
        use futures::FutureExt;
        // A cancelled (or expired) task drops its tool's run, as core's host does.
        let cancelled = TaskRun::of(&context).map(|task| task.ctx.cancellation());
        let run = std::panic::AssertUnwindSafe(self.0.call_tool(request, context)).catch_unwind();
        let run = async move {
            match cancelled {
                Some(cancelled) => tokio::select! {
                    outcome = run => Some(outcome),
                    () = cancelled.cancelled() => None,
                },
                None => Some(run.await),
            }
        };
        let Some(outcome) = run.await else {
            return Err(ErrorData::internal_error("the task was cancelled", None));
        };
        outcome.unwrap_or_else(|panic| {
            let message = mcp_tasks::host::panic_message(panic.as_ref());
            Err(ErrorData::internal_error(format!("tool panicked: {message}"), None))
        })
    }

    fn get_tool(&self, name: &str) -> Option<rmcp::model::Tool> {
        self.0.get_tool(name)
    }

    fn get_info(&self) -> rmcp::model::ServerConfig {
        self.0.get_info()
    }

    fn supported_protocol_versions(&self) -> std::borrow::Cow<'static, [rmcp::model::ProtocolVersion]> {
        self.0.supported_protocol_versions()
    }
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
        let parts = context.extensions.get::<http::request::Parts>()?;
        let ctx = parts.extensions.get::<RunContext>()?;
        ctx.task_id().is_some().then(|| Self { ctx: ctx.clone() })
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
fn to_error_data(error: RpcError) -> ErrorData {
    ErrorData::new(rmcp::model::ErrorCode(error.code as i32), error.message, error.data)
}
