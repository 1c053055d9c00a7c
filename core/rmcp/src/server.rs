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
    /// The exchanges that run tasks' tools: stateless, answered as JSON, no Host check (they
    /// never leave the process).
    exchanges: Serve,
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
            serving(StreamableHttpService::new(make.clone(), Arc::new(LocalSessionManager::default()), config))
        } else {
            serving(StreamableHttpService::new(make.clone(), Arc::new(NeverSessionManager::default()), config))
        };
        let exchange_config = StreamableHttpServerConfig::default()
            .with_legacy_session_mode(false)
            .with_json_response(true)
            .with_sse_keep_alive(None)
            .disable_allowed_hosts()
            .disable_allowed_origins();
        // rmcp runs a handler in a task of its own, where a panic ends the task but not the
        // exchange waiting for its answer: the exchanges' handler turns a panic into an error.
        let unpanicking = move || make().map(Unpanicking);
        let exchanges =
            serving(StreamableHttpService::new(unpanicking, Arc::new(NeverSessionManager::default()), exchange_config));
        Self { factory, public, exchanges }
    }
}

impl<S: ServerHandler + Send + 'static> Delegate for RmcpDelegate<S> {
    fn serve(&self, request: http::Request<axum::body::Body>) -> BoxFuture<'static, axum::response::Response> {
        (self.public)(request)
    }

    fn exchange(&self, request: http::Request<axum::body::Body>) -> BoxFuture<'static, axum::response::Response> {
        (self.exchanges)(request)
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
        std::panic::AssertUnwindSafe(self.0.call_tool(request, context)).catch_unwind().await.unwrap_or_else(|panic| {
            let message = panic
                .downcast_ref::<&str>()
                .map(|s| (*s).to_owned())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "unknown panic".to_owned());
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
