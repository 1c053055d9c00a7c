//! The task client (tokio): calls tools on a tasks server and follows the tasks they create to
//! their outcome — polling at the server's pace, switching to `subscriptions/listen`
//! notifications when the server offers them, answering input requests, cancelling, persisting
//! task references and re-attaching to them after a restart.
//!
//! ```no_run
//! # async fn demo() -> Result<(), mcp_tasks::client::ClientError> {
//! use mcp_tasks::client::{Client, Execution};
//! let client = Client::http("http://127.0.0.1:8080/mcp").build()?;
//! match client.call_tool("build_report", serde_json::json!({"quarter": "Q3"})).await? {
//!     Execution::Immediate(result) => println!("{result}"),
//!     Execution::Task(task) => println!("{:?}", task.result().await?),
//! }
//! # Ok(()) }
//! ```

mod listen;
mod slot;
mod stdio;
mod store;
mod transport;

use std::sync::Arc;
use std::time::Duration;

pub use crate::protocol::client::InputRequest;
use async_trait::async_trait;
pub use listen::{MAX_LISTEN_STREAMS, MAX_TASKS_PER_LISTEN};
use serde_json::{Map, Value, json};

pub use crate::protocol::trace::TraceContext;
use slot::{Command, Frame, Inbound, Slot, Timers};
pub use stdio::{StderrMode, StdioCommand, StdioTransport};
#[cfg(feature = "sqlite")]
pub use store::SqliteClientStore;
pub use store::{ClientStore, MemoryClientStore, TaskReference};
pub use transport::{
    HttpTransport, ListenStream, MAX_CONCURRENT_REQUESTS, Transport, envelope, header_value, response_result,
};

use crate::clock::{Clock, SystemClock};
use crate::protocol::client::{
    CallResult, CancelMode, DriverConfig, DriverError, DriverEvent, InvalidResult, Outcome, Outgoing, TaskDriver,
    classify, input_handler_failed,
};
use crate::protocol::{DetailedTask, ErrorKind, RpcError, Task};

/// Why a client call failed.
#[non_exhaustive]
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// The server answered with a JSON-RPC error.
    #[error("server error: {0}")]
    Rpc(RpcError),
    /// The server answered HTTP without a JSON-RPC body.
    #[error("HTTP {status}: {body}")]
    Http {
        /// The HTTP status.
        status: u16,
        /// The start of the body.
        body: String,
    },
    /// The request could not be sent or the response not read; `source` is the underlying
    /// error, whose chain [`ClientError::causes`] reports.
    #[error("transport failed: {message}")]
    Transport {
        /// What failed.
        message: String,
        /// The underlying error, if any.
        #[source]
        source: Option<Arc<dyn std::error::Error + Send + Sync>>,
    },
    /// The server's result is invalid for the request (e.g. a task where none may be).
    #[error(transparent)]
    InvalidResult(#[from] InvalidResult),
    /// The server created a task whose `CreateTaskResult` this client cannot read, so it cannot
    /// follow it: a best-effort `tasks/cancel` was sent for it.
    #[error(
        "task {task_id}: the server's tools/call answer could not be read ({source}); a tasks/cancel was sent \
         (best effort) so the work does not run on unwatched"
    )]
    UnreadableTask {
        /// The task the server created.
        task_id: String,
        /// What could not be read.
        #[source]
        source: InvalidResult,
    },
    /// The application asked something the task's state forbids.
    #[error(transparent)]
    Driver(#[from] DriverError),
    /// The reference store failed.
    #[error("task reference store failed: {0}")]
    Store(String),
    /// The server asked for input and no input handler is set.
    #[error("the server asked for input ({0}) and no input handler is set")]
    NoInputHandler(String),
    /// The input handler failed on an MRTR round of `tools/call`, before any task existed: it
    /// raised, panicked, or returned something that is no result object. (In a task the same
    /// failure ends the task's outcome instead: see [`Client::call_tool`].)
    #[error("the input handler failed on input request {key:?}: {source}")]
    InputHandler {
        /// The input request's key.
        key: String,
        /// What the handler did.
        #[source]
        source: InputError,
    },
    /// The execution was detached or its driver stopped.
    #[error("the task is no longer driven by this client")]
    Detached,
    /// The client options contradict each other or name nothing ([`ClientOptions::builder`]).
    #[error("invalid client options: {0}")]
    InvalidOptions(String),
    /// A reference-store URL names no store ([`ClientBuilder::store_url`]).
    #[error("unknown store {0:?}: use sqlite:///path or memory://")]
    InvalidStoreUrl(String),
}

impl ClientError {
    /// A transport failure described by `message` alone.
    pub fn transport(message: impl Into<String>) -> Self {
        Self::Transport { message: message.into(), source: None }
    }

    /// A transport failure caused by `source` (its message and chain are kept).
    pub fn transport_from(source: impl std::error::Error + Send + Sync + 'static) -> Self {
        Self::Transport { message: source.to_string(), source: Some(Arc::new(source)) }
    }

    /// The JSON-RPC code: the server's for [`ClientError::Rpc`], -32602 for misuse, else -32603.
    pub fn code(&self) -> i64 {
        match self {
            Self::Rpc(e) => e.code,
            Self::Driver(_) | Self::InvalidStoreUrl(_) | Self::InvalidOptions(_) => ErrorKind::InvalidParams.code(),
            _ => ErrorKind::Internal.code(),
        }
    }

    /// The error class every binding raises for it (a name from
    /// [`ERROR_CLASSES`](crate::protocol::ERROR_CLASSES)).
    pub fn class(&self) -> &'static str {
        match self {
            Self::Rpc(e) => crate::protocol::class_for_code(e.code, None),
            Self::Http { status: 413, .. } => ErrorKind::TooLarge.class(),
            Self::Http { .. } | Self::Transport { .. } => "TransportError",
            Self::Driver(_) | Self::InvalidStoreUrl(_) | Self::InvalidOptions(_) => ErrorKind::InvalidParams.class(),
            Self::InvalidResult(_)
            | Self::UnreadableTask { .. }
            | Self::Store(_)
            | Self::NoInputHandler(_)
            | Self::InputHandler { .. }
            | Self::Detached => ErrorKind::Internal.class(),
        }
    }

    /// The error's `data`: the server's for [`ClientError::Rpc`]; for a task this client could
    /// not follow or a failing input handler, `{"reason": "unreadable_answer" |
    /// "input_handler_failed", ...}` as the outcomes of such tasks carry it; else `None`.
    pub fn data(&self) -> Option<Value> {
        use crate::protocol::client::{INPUT_HANDLER_FAILED, UNREADABLE_ANSWER};
        match self {
            Self::Rpc(e) => e.data.clone(),
            Self::UnreadableTask { task_id, source } => Some(json!({
                "reason": UNREADABLE_ANSWER, "taskId": task_id, "method": "tools/call", "detail": source.to_string(),
            })),
            Self::InputHandler { key, source } => {
                Some(json!({"reason": INPUT_HANDLER_FAILED, "taskId": null, "key": key, "cause": source.to_string()}))
            }
            _ => None,
        }
    }

    /// The messages of the errors that caused this one, outermost first (empty when none).
    pub fn causes(&self) -> Vec<String> {
        let mut causes = Vec::new();
        let mut next = std::error::Error::source(self);
        while let Some(cause) = next {
            causes.push(cause.to_string());
            next = cause.source();
        }
        causes
    }
}

/// Why an input handler gave no answer: what the application's callback did wrong (it raised or
/// panicked, or its answer is no result object), with the error it raised as the source.
#[derive(Clone, Debug, thiserror::Error)]
#[error("{message}")]
pub struct InputError {
    message: String,
    #[source]
    source: Option<Arc<dyn std::error::Error + Send + Sync>>,
}

impl InputError {
    /// A failure described by `message` alone (a binding's callback that raised: its class and
    /// text).
    pub fn new(message: impl Into<String>) -> Self {
        Self { message: message.into(), source: None }
    }

    /// A failure caused by `source`, whose message and chain are kept.
    pub fn from_error(source: impl std::error::Error + Send + Sync + 'static) -> Self {
        Self { message: source.to_string(), source: Some(Arc::new(source)) }
    }
}

/// Answers the server's input requests (`elicitation/create`, `sampling/createMessage`,
/// `roots/list`), both MRTR rounds on `tools/call` and a task's `inputRequests`.
#[async_trait]
pub trait InputHandler: Send + Sync + 'static {
    /// The response to `request` (e.g. an `ElicitResult`: a JSON object), or `None` to leave it
    /// unanswered (a task's request can then be answered with [`TaskExecution::answer`]).
    /// `request.task_id` is `None` for an MRTR round before any task exists. Every binding hands
    /// its handler the same [`InputRequest`].
    ///
    /// An `Err`, a panic, or an answer that is no JSON object ends the call at once with that
    /// failure as its cause: [`ClientError::InputHandler`] for an MRTR round, and for a task an
    /// [`Outcome::Failed`] whose `data.reason` is `input_handler_failed`, after a best-effort
    /// `tasks/cancel` (the task would otherwise wait for an answer that never comes).
    async fn handle(&self, request: InputRequest) -> Result<Option<Value>, InputError>;
}

/// An [`InputHandler`] from an async closure over an [`InputRequest`] that cannot fail.
pub fn input_fn<F, Fut>(f: F) -> impl InputHandler
where
    F: Fn(InputRequest) -> Fut + Send + Sync + 'static,
    Fut: std::future::Future<Output = Option<Value>> + Send + 'static,
{
    try_input_fn(move |request| {
        let answer = f(request);
        async move { Ok::<_, std::convert::Infallible>(answer.await) }
    })
}

/// An [`InputHandler`] from an async closure that may fail; its error becomes the cause.
pub fn try_input_fn<F, Fut, E>(f: F) -> impl InputHandler
where
    F: Fn(InputRequest) -> Fut + Send + Sync + 'static,
    Fut: std::future::Future<Output = Result<Option<Value>, E>> + Send + 'static,
    E: std::error::Error + Send + Sync + 'static,
{
    struct FnInput<F>(F);

    #[async_trait]
    impl<F, Fut, E> InputHandler for FnInput<F>
    where
        F: Fn(InputRequest) -> Fut + Send + Sync + 'static,
        Fut: std::future::Future<Output = Result<Option<Value>, E>> + Send + 'static,
        E: std::error::Error + Send + Sync + 'static,
    {
        async fn handle(&self, request: InputRequest) -> Result<Option<Value>, InputError> {
            (self.0)(request).await.map_err(InputError::from_error)
        }
    }

    FnInput(f)
}

/// Runs the input handler on `request`: its answer, checked to be a result object, or what it
/// did wrong (an error, a panic, another shape) as an [`InputError`].
async fn ask(handler: &dyn InputHandler, request: InputRequest) -> Result<Option<Value>, InputError> {
    use futures::FutureExt;
    let answer = std::panic::AssertUnwindSafe(handler.handle(request)).catch_unwind().await.map_err(|panic| {
        let message = panic
            .downcast_ref::<&str>()
            .map(|s| (*s).to_owned())
            .or_else(|| panic.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "unknown panic".to_owned());
        InputError::new(format!("the input handler panicked: {message}"))
    })??;
    match &answer {
        Some(value) => crate::protocol::client::check_answer(value).map(|()| answer).map_err(InputError::new),
        None => Ok(None),
    }
}

/// Client settings.
#[derive(Clone, Copy, Debug)]
pub struct ClientConfig {
    /// Polling pace (default and floor).
    pub driver: DriverConfig,
    /// Follow tasks through `subscriptions/listen` when the server offers it: every task of
    /// the client shares at most [`MAX_LISTEN_STREAMS`] streams, each of at most
    /// [`MAX_TASKS_PER_LISTEN`] tasks.
    pub notifications: bool,
    /// The most MRTR rounds one `tools/call` may take.
    pub max_input_rounds: usize,
}

impl Default for ClientConfig {
    fn default() -> Self {
        Self { driver: DriverConfig::default(), notifications: true, max_input_rounds: 8 }
    }
}

struct Inner {
    transport: Arc<dyn Transport>,
    store: Arc<dyn ClientStore>,
    clock: Arc<dyn Clock>,
    input: Option<Arc<dyn InputHandler>>,
    config: ClientConfig,
    /// Cancelled by [`Client::close`]: every driver stops, new calls are refused.
    closed: tokio_util::sync::CancellationToken,
    /// The listen streams every task of this client shares.
    listens: listen::ListenHub,
    /// The deadlines of the tasks that wait for their next poll.
    timers: Arc<Timers>,
    /// The runtime the client's first task was followed on, where a task's next step runs when
    /// something wakes it from a thread outside any runtime (a binding's `cancel`).
    runtime: std::sync::OnceLock<tokio::runtime::Handle>,
}

impl Inner {
    fn check_open(&self) -> Result<(), ClientError> {
        if self.closed.is_cancelled() { Err(ClientError::transport("the client is closed")) } else { Ok(()) }
    }
}

impl Drop for Inner {
    fn drop(&mut self) {
        // Nothing follows a task any more: the timer task ends.
        self.closed.cancel();
    }
}

/// A tasks client for one server. Cheap to clone.
#[derive(Clone)]
pub struct Client {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client").field("endpoint", &self.inner.transport.endpoint()).finish_non_exhaustive()
    }
}

/// How a client is configured, the same in every binding: each converts its own options object
/// (Python keyword arguments, a TypeScript object, a Swift record) into this, so the defaults and
/// their meaning live here only. Absent fields take the defaults of [`ClientConfig`] and
/// [`DriverConfig`].
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase", default, deny_unknown_fields)]
pub struct ClientOptions {
    /// The Streamable HTTP endpoint (give this or `command`).
    pub url: String,
    /// Headers sent with every request (e.g. `Authorization`), in order (HTTP only).
    pub headers: Vec<(String, String)>,
    /// The program of a stdio server the client starts (give this or `url`).
    pub command: Option<String>,
    /// The stdio server's arguments.
    pub args: Vec<String>,
    /// Environment variables set for the stdio server (added to the inherited ones).
    pub env: std::collections::BTreeMap<String, String>,
    /// The stdio server's working directory (default this process's).
    pub cwd: Option<String>,
    /// The stdio server's stderr: `inherit` (default), `capture` (quoted when it exits) or
    /// `discard`.
    pub stderr: Option<String>,
    /// Where task references persist: `sqlite:///path`, `memory://`, or absent for the default
    /// SQLite file ([`default_store_path`]).
    pub store: Option<String>,
    /// `clientInfo.name` sent in every request's `_meta` (default `mcp-tasks`).
    pub client_name: Option<String>,
    /// `clientInfo.version` (default this crate's version).
    pub client_version: Option<String>,
    /// Open `subscriptions/listen` streams when the server offers them (default true).
    pub notifications: Option<bool>,
    /// Poll interval when the server suggests none, in ms (default 1000).
    pub default_poll_ms: Option<u64>,
    /// The shortest poll interval honoured, in ms (default 100).
    pub min_poll_ms: Option<u64>,
    /// The most MRTR rounds one `tools/call` may take (default 8).
    pub max_input_rounds: Option<usize>,
    /// The client capabilities every request declares besides the tasks extension (default
    /// [`default_capabilities`]: form elicitation). Servers ask only for input a request
    /// declares, so declare what the input handler answers (`sampling`, `roots`,
    /// `elicitation.url`). A JSON object.
    pub capabilities: Option<Value>,
}

/// The client capabilities a client declares unless told otherwise: `{"elicitation": {}}`, form
/// elicitation, which a person at the client can answer (by the input handler, or through
/// [`TaskExecution::answer`]).
pub fn default_capabilities() -> Value {
    json!({"elicitation": {}})
}

impl ClientOptions {
    /// The option names, in the wire (camelCase) spelling bindings translate to their own.
    pub const NAMES: &'static [&'static str] = &[
        "url",
        "headers",
        "command",
        "args",
        "env",
        "cwd",
        "stderr",
        "store",
        "clientName",
        "clientVersion",
        "notifications",
        "defaultPollMs",
        "minPollMs",
        "maxInputRounds",
        "capabilities",
    ];

    /// A builder configured from these options: HTTP when `url` is given, stdio when `command`
    /// is. Both, neither, or an option of the other transport is [`ClientError::Transport`].
    pub fn builder(mut self) -> Result<ClientBuilder, ClientError> {
        let builder = match (self.url.is_empty(), self.command.take()) {
            (false, None) if self.has_stdio_options() => {
                return Err(ClientError::InvalidOptions(
                    "args, env, cwd and stderr are options of a stdio command".into(),
                ));
            }
            (false, None) => Client::http(std::mem::take(&mut self.url)),
            (true, Some(_)) if !self.headers.is_empty() => {
                return Err(ClientError::InvalidOptions(
                    "headers are an option of an HTTP url, not a stdio command".into(),
                ));
            }
            (true, Some(program)) => {
                let mut command = StdioCommand::new(program).args(std::mem::take(&mut self.args));
                command.env = std::mem::take(&mut self.env);
                command.cwd = self.cwd.take().map(Into::into);
                if let Some(mode) = self.stderr.take() {
                    command.stderr = StderrMode::parse(&mode)?;
                }
                Client::stdio(command)
            }
            (false, Some(_)) => return Err(ClientError::InvalidOptions("give either url or command, not both".into())),
            (true, None) => return Err(ClientError::InvalidOptions("give the server's url or a stdio command".into())),
        };
        self.configure(builder)
    }

    /// A builder over `transport` (a binding's own, e.g. a host SDK's session) configured from
    /// these options; `url`, `command` and the options of either transport are refused.
    pub fn builder_with(self, transport: Arc<dyn Transport>) -> Result<ClientBuilder, ClientError> {
        let names_a_transport =
            !self.url.is_empty() || self.command.is_some() || !self.headers.is_empty() || self.has_stdio_options();
        if names_a_transport {
            return Err(ClientError::InvalidOptions(
                "a client over a given transport takes no url, command or their options".into(),
            ));
        }
        self.configure(Client::with_transport(transport))
    }

    /// Whether any option of a stdio command besides the command itself is set.
    fn has_stdio_options(&self) -> bool {
        !self.args.is_empty() || !self.env.is_empty() || self.cwd.is_some() || self.stderr.is_some()
    }

    /// Applies the options every transport shares.
    fn configure(self, mut builder: ClientBuilder) -> Result<ClientBuilder, ClientError> {
        let defaults = ClientConfig::default();
        let driver = DriverConfig {
            default_poll_ms: self.default_poll_ms.unwrap_or(defaults.driver.default_poll_ms),
            min_poll_ms: self.min_poll_ms.unwrap_or(defaults.driver.min_poll_ms),
        };
        builder = builder.config(ClientConfig {
            driver,
            notifications: self.notifications.unwrap_or(defaults.notifications),
            max_input_rounds: self.max_input_rounds.unwrap_or(defaults.max_input_rounds),
        });
        for (name, value) in &self.headers {
            builder = builder.header(name, value);
        }
        match self.capabilities {
            Some(capabilities @ Value::Object(_)) => builder = builder.capabilities(capabilities),
            Some(_) => return Err(ClientError::InvalidOptions("capabilities must be a JSON object".into())),
            None => {}
        }
        if self.client_name.is_some() || self.client_version.is_some() {
            builder = builder.client_info(
                self.client_name.as_deref().unwrap_or("mcp-tasks"),
                self.client_version.as_deref().unwrap_or(env!("CARGO_PKG_VERSION")),
            );
        }
        match self.store.as_deref() {
            #[cfg(feature = "sqlite")]
            Some(url) => builder.store_url(url),
            #[cfg(not(feature = "sqlite"))]
            Some("memory://") => Ok(builder.memory_store()),
            #[cfg(not(feature = "sqlite"))]
            Some(url) => Err(ClientError::InvalidStoreUrl(url.to_owned())),
            None => Ok(builder),
        }
    }
}

/// Builds a [`Client`].
pub struct ClientBuilder {
    transport: Option<Arc<dyn Transport>>,
    store: Option<Arc<dyn ClientStore>>,
    clock: Arc<dyn Clock>,
    input: Option<Arc<dyn InputHandler>>,
    config: ClientConfig,
    http: Option<HttpTransport>,
    stdio: Option<StdioTransport>,
}

impl ClientBuilder {
    /// Adds a header to every request (HTTP transport only), e.g. `Authorization`.
    #[must_use]
    pub fn header(mut self, name: &str, value: &str) -> Self {
        self.http = self.http.map(|h| h.header(name, value));
        self
    }

    /// Sets the `clientInfo` sent in every request's `_meta` (the built-in transports; a given
    /// [`Transport`] sets its own).
    #[must_use]
    pub fn client_info(mut self, name: &str, version: &str) -> Self {
        self.http = self.http.map(|h| h.client_info(name, version));
        self.stdio = self.stdio.map(|s| s.client_info(name, version));
        self
    }

    /// Persists task references in `store`. The default is a SQLite file at
    /// [`default_store_path`]; use [`ClientBuilder::memory_store`] for none that survives.
    #[must_use]
    pub fn store(mut self, store: Arc<dyn ClientStore>) -> Self {
        self.store = Some(store);
        self
    }

    /// Keeps task references in memory only (lost when the process ends).
    #[must_use]
    pub fn memory_store(self) -> Self {
        self.store(Arc::new(MemoryClientStore::new()))
    }

    /// Persists task references in a SQLite file.
    #[cfg(feature = "sqlite")]
    pub fn sqlite_store(self, path: impl AsRef<std::path::Path>) -> Result<Self, ClientError> {
        Ok(self.store(Arc::new(SqliteClientStore::open(path)?)))
    }

    /// Persists task references where `url` says: `sqlite:///path` (a SQLite file) or
    /// `memory://`. The one parser of client store URLs, shared by the bindings.
    #[cfg(feature = "sqlite")]
    pub fn store_url(self, url: &str) -> Result<Self, ClientError> {
        if url == "memory://" {
            return Ok(self.memory_store());
        }
        match url.strip_prefix("sqlite://") {
            Some(path) => self.sqlite_store(path),
            None => Err(ClientError::InvalidStoreUrl(url.to_owned())),
        }
    }

    /// Sets the client capabilities every request declares besides the tasks extension (the
    /// built-in transports; a given [`Transport`] sets its own). The default is
    /// [`default_capabilities`]; declare what the input handler answers.
    #[must_use]
    pub fn capabilities(mut self, capabilities: Value) -> Self {
        self.http = self.http.map(|h| h.capabilities(capabilities.clone()));
        self.stdio = self.stdio.map(|s| s.capabilities(capabilities));
        self
    }

    /// Answers input requests with `handler`.
    #[must_use]
    pub fn input_handler(mut self, handler: impl InputHandler) -> Self {
        self.input = Some(Arc::new(handler));
        self
    }

    /// Replaces the settings.
    #[must_use]
    pub fn config(mut self, config: ClientConfig) -> Self {
        self.config = config;
        self
    }

    /// Uses `clock` instead of the system clock.
    #[must_use]
    pub fn clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.clock = clock;
        self
    }

    /// Builds the client.
    pub fn build(self) -> Result<Client, ClientError> {
        let transport = match (self.http, self.stdio, self.transport) {
            (Some(http), _, _) => Arc::new(http) as Arc<dyn Transport>,
            (None, Some(stdio), _) => Arc::new(stdio) as Arc<dyn Transport>,
            (None, None, Some(transport)) => transport,
            (None, None, None) => return Err(ClientError::transport("no transport configured")),
        };
        let store = match self.store {
            Some(store) => store,
            None => default_store()?,
        };
        Ok(Client {
            inner: Arc::new(Inner {
                listens: listen::ListenHub::new(Arc::clone(&transport)),
                transport,
                store,
                clock: self.clock,
                input: self.input,
                config: self.config,
                closed: tokio_util::sync::CancellationToken::new(),
                timers: Arc::default(),
                runtime: std::sync::OnceLock::new(),
            }),
        })
    }
}

/// Where task references go by default: `$MCP_TASKS_CLIENT_DB`, else
/// `$XDG_DATA_HOME/mcp-tasks/client.db`, else `~/.local/share/mcp-tasks/client.db`.
pub fn default_store_path() -> std::path::PathBuf {
    if let Some(path) = std::env::var_os("MCP_TASKS_CLIENT_DB") {
        return path.into();
    }
    let base = std::env::var_os("XDG_DATA_HOME")
        .map(std::path::PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|home| std::path::Path::new(&home).join(".local/share")))
        .unwrap_or_else(std::env::temp_dir);
    base.join("mcp-tasks").join("client.db")
}

#[cfg(feature = "sqlite")]
fn default_store() -> Result<Arc<dyn ClientStore>, ClientError> {
    let path = default_store_path();
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(|e| ClientError::Store(format!("{}: {e}", dir.display())))?;
    }
    Ok(Arc::new(SqliteClientStore::open(path)?))
}

#[cfg(not(feature = "sqlite"))]
fn default_store() -> Result<Arc<dyn ClientStore>, ClientError> {
    Ok(Arc::new(MemoryClientStore::new()))
}

/// What a `tools/call` turned into.
#[derive(Debug)]
pub enum Execution {
    /// The server answered at once.
    Immediate(Value),
    /// The server created a task; follow it here.
    Task(TaskExecution),
}

impl Execution {
    /// The outcome: the immediate result as [`Outcome::Completed`], or the task's outcome.
    pub async fn result(&self) -> Result<Outcome, ClientError> {
        match self {
            Self::Immediate(result) => Ok(Outcome::Completed { result: result.clone() }),
            Self::Task(task) => task.result().await,
        }
    }
}

/// A task being followed. Dropping it (or [`TaskExecution::detach`]) stops following; the task
/// keeps running on the server and its reference stays persisted for [`Client::resume_all`].
pub struct TaskExecution {
    task_id: String,
    inner: Arc<Inner>,
    /// Where its driver publishes states and the outcome, and takes commands.
    slot: Arc<Slot>,
    /// How many states [`TaskExecution::next_update`] has handed out so far.
    cursor: tokio::sync::Mutex<u64>,
}

impl std::fmt::Debug for TaskExecution {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TaskExecution").field("task_id", &self.task_id).finish_non_exhaustive()
    }
}

impl TaskExecution {
    /// The task id.
    pub fn task_id(&self) -> &str {
        &self.task_id
    }

    /// The latest state seen.
    pub fn latest(&self) -> DetailedTask {
        self.slot.latest()
    }

    /// The task's states: the latest first, then each newer one (intermediate states may be
    /// coalesced if the consumer is slow). Ends when the task has an outcome.
    pub fn updates(&self) -> impl futures::Stream<Item = DetailedTask> + Send + Unpin + 'static {
        let (slot, closed) = (Arc::clone(&self.slot), self.inner.closed.clone());
        Box::pin(futures::stream::unfold((slot, closed, 0), |(slot, closed, mut seen)| async move {
            let next = next_state(&slot, &closed, &mut seen).await?;
            Some((next, (slot, closed, seen)))
        }))
    }

    /// The next state of [`TaskExecution::updates`] through one shared cursor (the latest first,
    /// then each newer one), or `None` once the task has an outcome. For bindings that hand
    /// states out one call at a time.
    pub async fn next_update(&self) -> Option<DetailedTask> {
        let mut seen = self.cursor.lock().await;
        next_state(&self.slot, &self.inner.closed, &mut seen).await
    }

    /// Waits for the outcome without marking it delivered (for observers; the consumer of the
    /// result calls [`TaskExecution::result`]).
    pub async fn finished(&self) -> Result<Outcome, ClientError> {
        tokio::select! {
            biased;
            outcome = self.slot.outcome() => outcome.ok_or(ClientError::Detached),
            // The client closed: its drivers stopped where they were.
            () = self.inner.closed.cancelled() => Err(ClientError::Detached),
        }
    }

    /// Waits for the outcome and marks it delivered: the store forgets the task's reference
    /// ([`ClientStore::forget`]), so [`Client::resume_all`] does not hand it out again.
    pub async fn result(&self) -> Result<Outcome, ClientError> {
        let outcome = self.finished().await?;
        // The driver saved the reference with its outcome before it published the outcome, so
        // nothing writes the reference again after it is forgotten.
        self.inner.store.forget(self.inner.transport.endpoint(), &self.task_id, &outcome).await?;
        Ok(outcome)
    }

    /// Sends `tasks/cancel`. In [`CancelMode::Stop`] the outcome becomes `Cancelled` once the
    /// server acknowledges; in [`CancelMode::Observe`] the task is followed until terminal.
    pub fn cancel(&self, mode: CancelMode) -> Result<(), ClientError> {
        self.tell(Command::Cancel(mode)).then_some(()).ok_or(ClientError::Detached)
    }

    /// Answers input request `key` with `response` (one `tasks/update` per batch of answers).
    /// A key the server never asked, one already answered, or a finished task is
    /// [`ClientError::Driver`].
    pub async fn answer(&self, key: &str, response: Value) -> Result<(), ClientError> {
        let (reply, accepted) = tokio::sync::oneshot::channel();
        if !self.tell(Command::Answer(key.to_owned(), response, reply)) {
            return Err(if self.slot.has_outcome() {
                ClientError::Driver(DriverError::Finished)
            } else {
                ClientError::Detached
            });
        }
        // The driver is gone once the task has an outcome: answering it is a misuse, like any
        // other the driver refuses.
        accepted.await.unwrap_or(Err(DriverError::Finished)).map_err(ClientError::Driver)
    }

    /// Stops following; the task stays running and persisted.
    pub fn detach(self) {
        // Dropping it tells the driver.
    }

    /// Queues `command` for the driver; false once the driver is gone or the client closed.
    fn tell(&self, command: Command) -> bool {
        !self.inner.closed.is_cancelled() && self.slot.push(Inbound::Command(command))
    }
}

impl Drop for TaskExecution {
    fn drop(&mut self) {
        self.slot.push(Inbound::Command(Command::Detach));
    }
}

/// The first state of `slot` newer than the `seen`th, or `None` once its driver is gone (or the
/// client closed) and every state was handed out.
async fn next_state(slot: &Slot, closed: &tokio_util::sync::CancellationToken, seen: &mut u64) -> Option<DetailedTask> {
    tokio::select! {
        biased;
        next = slot.next_state(seen) => next,
        () = closed.cancelled() => None,
    }
}

impl Client {
    /// A client for a Streamable HTTP endpoint.
    pub fn http(url: impl Into<String>) -> ClientBuilder {
        ClientBuilder { http: Some(HttpTransport::new(url)), ..Self::builder() }
    }

    /// A client for a stdio server it starts with `command` (on the first call, and again after
    /// the child died).
    pub fn stdio(command: StdioCommand) -> ClientBuilder {
        ClientBuilder { stdio: Some(StdioTransport::command(command)), ..Self::builder() }
    }

    /// A client over any [`Transport`].
    pub fn with_transport(transport: Arc<dyn Transport>) -> ClientBuilder {
        ClientBuilder { transport: Some(transport), ..Self::builder() }
    }

    fn builder() -> ClientBuilder {
        ClientBuilder {
            transport: None,
            store: None,
            clock: Arc::new(SystemClock),
            input: None,
            config: ClientConfig::default(),
            http: None,
            stdio: None,
        }
    }

    /// The transport.
    pub fn transport(&self) -> &Arc<dyn Transport> {
        &self.inner.transport
    }

    /// Stops following every task (their references stay for a later [`Client::resume_all`])
    /// and closes the transport: a stdio server's child ends. Later calls fail with a transport
    /// error. Closing twice does nothing more.
    pub async fn close(&self) {
        self.inner.closed.cancel();
        self.inner.listens.close();
        self.inner.transport.close().await;
    }

    /// Calls a tool. MRTR rounds are answered with the input handler and retried; a task result
    /// is persisted and followed in the background. The call joins the current `tracing` span's
    /// trace where an OpenTelemetry layer records it ([`Client::call_tool_traced`]).
    pub async fn call_tool(&self, name: &str, arguments: Value) -> Result<Execution, ClientError> {
        self.call_tool_traced(name, arguments, None).await
    }

    /// [`Client::call_tool`] inside the caller's trace `trace` (W3C trace context, SEP-414; a
    /// binding passes its language's current context). The call has a client span, a child of
    /// `trace` (or of the current `tracing` span), that lasts until the task's outcome; its
    /// context goes in `_meta` with the `tools/call` and every `tasks/get`, `tasks/update` and
    /// `tasks/cancel` of the task, and is kept with the task reference, so a resumed client
    /// still sends it. Without an OpenTelemetry layer, `trace` itself is sent.
    pub async fn call_tool_traced(
        &self,
        name: &str,
        arguments: Value,
        trace: Option<TraceContext>,
    ) -> Result<Execution, ClientError> {
        self.inner.check_open()?;
        let span = client_span(name);
        crate::trace::adopt(&span, trace.as_ref());
        let sent = crate::trace::handed_on(&span, trace);
        let mut params = json!({ "name": name, "arguments": arguments });
        if let Some(sent) = &sent {
            params["_meta"] = Value::Object(sent.to_meta());
        }
        let execution = tracing::Instrument::instrument(self.call_rounds(name, params, sent), span.clone()).await;
        match &execution {
            Ok(Execution::Task(task)) => {
                span.record("mcp.task.id", task.task_id());
                task.slot.keep_span(span);
            }
            Ok(Execution::Immediate(_)) => {}
            Err(e) => {
                span.record("error.type", e.code().to_string());
                span.record("otel.status_code", "error");
            }
        }
        execution
    }

    async fn call_rounds(
        &self,
        name: &str,
        mut params: Value,
        trace: Option<TraceContext>,
    ) -> Result<Execution, ClientError> {
        for _ in 0..=self.inner.config.max_input_rounds {
            let result = self.inner.transport.request("tools/call", params.clone()).await?;
            let created_id = created_task_id(&result);
            let classified = classify("tools/call", result, true);
            match self.unless_unreadable(classified, created_id).await? {
                CallResult::Complete(result) => return Ok(Execution::Immediate(result)),
                CallResult::InputRequired(round) => {
                    let requests = round.input_requests.unwrap_or_default();
                    let mut answers = Map::new();
                    for (key, request) in &requests {
                        let handler =
                            self.inner.input.as_ref().ok_or_else(|| ClientError::NoInputHandler(key.clone()))?;
                        let answer = ask(handler.as_ref(), InputRequest::new(None, key, request))
                            .await
                            .map_err(|source| ClientError::InputHandler { key: key.clone(), source })?;
                        if let Some(answer) = answer {
                            answers.insert(key.clone(), answer);
                        }
                    }
                    params["inputResponses"] = Value::Object(answers);
                    match round.request_state {
                        Some(state) => params["requestState"] = Value::String(state),
                        None => {
                            if let Some(p) = params.as_object_mut() {
                                p.remove("requestState");
                            }
                        }
                    }
                }
                CallResult::Task(task) => {
                    let arguments = params["arguments"].clone();
                    return Ok(Execution::Task(self.follow_traced(task, name, arguments, trace).await?));
                }
            }
        }
        Err(ClientError::Rpc(RpcError::internal("too many input rounds")))
    }

    /// [`Client::follow`] of a `CreateTaskResult` as it arrived (a host SDK's): one that cannot be
    /// read is [`ClientError::UnreadableTask`], after a best-effort `tasks/cancel` of the task
    /// the server made.
    pub async fn follow_result(
        &self,
        created: Value,
        tool: &str,
        arguments: Value,
    ) -> Result<TaskExecution, ClientError> {
        let created_id = created_task_id(&created);
        let parsed = crate::protocol::client::parse_created(created).map(CallResult::Task);
        match self.unless_unreadable(parsed, created_id).await? {
            CallResult::Task(task) => self.follow(task, tool, arguments).await,
            _ => unreachable!("parse_created reads a task or fails"),
        }
    }

    /// `classified` as it is, unless the server made a task (`created_id`) this client cannot
    /// read: then the task is cancelled (best effort), so its work does not run on unwatched,
    /// and the error says so.
    async fn unless_unreadable(
        &self,
        classified: Result<CallResult, InvalidResult>,
        created_id: Option<String>,
    ) -> Result<CallResult, ClientError> {
        match (classified, created_id) {
            (Err(source), Some(task_id)) => {
                let cancel = self.inner.transport.request("tasks/cancel", json!({"taskId": task_id})).await;
                if let Err(e) = cancel {
                    tracing::warn!(error = %e, task_id, "could not cancel a task whose creation was unreadable");
                }
                Err(ClientError::UnreadableTask { task_id, source })
            }
            (classified, _) => Ok(classified?),
        }
    }

    /// Follows a task created by a `tools/call` this client did not send (e.g. one a host SDK
    /// sent and received the `CreateTaskResult` of): persists its reference and drives it.
    pub async fn follow(&self, task: Task, tool: &str, arguments: Value) -> Result<TaskExecution, ClientError> {
        self.follow_traced(task, tool, arguments, None).await
    }

    /// [`Client::follow`] sending `trace` (the creating call's context) with every request
    /// about the task.
    pub async fn follow_traced(
        &self,
        task: Task,
        tool: &str,
        arguments: Value,
        trace: Option<TraceContext>,
    ) -> Result<TaskExecution, ClientError> {
        self.inner.check_open()?;
        let mut driver = TaskDriver::new(task, self.inner.clock.now_ms(), self.inner.config.driver);
        driver.set_trace(trace);
        let reference = TaskReference {
            endpoint: self.inner.transport.endpoint().to_owned(),
            task_id: driver.task_id().to_owned(),
            tool: tool.to_owned(),
            arguments,
            state: driver.state().clone(),
            outcome: None,
            delivered: false,
        };
        self.inner.store.save(&reference).await?;
        Ok(self.spawn(driver, reference))
    }

    /// Re-attaches to every task of this endpoint whose outcome was not delivered yet (after a
    /// restart). Tasks that finished meanwhile resolve at once.
    pub async fn resume_all(&self) -> Result<Vec<TaskExecution>, ClientError> {
        self.inner.check_open()?;
        let endpoint = self.inner.transport.endpoint().to_owned();
        let mut executions = Vec::new();
        for reference in self.inner.store.pending(&endpoint).await? {
            let driver =
                TaskDriver::resume(reference.state.clone(), self.inner.clock.now_ms(), self.inner.config.driver);
            executions.push(self.spawn(driver, reference));
        }
        Ok(executions)
    }

    /// Follows the task `driver` drives, whose reference was saved as `reference`: its first
    /// step runs at once (unless its outcome is known already).
    fn spawn(&self, driver: TaskDriver, reference: TaskReference) -> TaskExecution {
        let TaskReference { task_id, tool, arguments, outcome, .. } = reference;
        let slot = Slot::new(driver.latest().clone(), outcome, Arc::downgrade(&self.inner));
        let execution = TaskExecution {
            task_id,
            inner: Arc::clone(&self.inner),
            slot: Arc::clone(&slot),
            cursor: tokio::sync::Mutex::new(0),
        };
        if !slot.is_closed() {
            if self.inner.runtime.get().is_none() {
                let _ = self.inner.runtime.set(tokio::runtime::Handle::current());
            }
            let saved = driver.revision();
            let mut follow = Box::new(Follow {
                driver,
                tool,
                arguments: arguments.to_string().into_boxed_str(),
                saved,
                listen_tried: !self.inner.config.notifications,
                wake_at: 0,
            });
            // One read at once: a quick task is often finished already, and then it costs a
            // create and a read, with no stream opened. A task still running gets its listen
            // after that read.
            follow.driver.poll_now(self.inner.clock.now_ms());
            run_step(Arc::clone(&self.inner), slot, follow);
        }
        execution
    }
}

/// A followed task's driver and what its reference needs besides the driver's state: what a
/// task's step runs, and what its slot holds while the task waits.
struct Follow {
    driver: TaskDriver,
    tool: String,
    /// The tool's arguments as JSON text: only a save reads them, and a map's `Value` takes
    /// several times the memory of its text.
    arguments: Box<str>,
    /// The driver's revision last saved to the store.
    saved: u64,
    /// Whether the task was handed to the listen streams yet.
    listen_tried: bool,
    /// When the driver wants its timer (client clock milliseconds): the next poll, or expiry.
    wake_at: u64,
}

impl Follow {
    /// The reference to save: the driver's state now, with `outcome`.
    fn reference(&self, inner: &Inner, outcome: Option<Outcome>) -> TaskReference {
        TaskReference {
            endpoint: inner.transport.endpoint().to_owned(),
            task_id: self.driver.task_id().to_owned(),
            tool: self.tool.clone(),
            // Text this client wrote from a `Value`, so it reads back as that `Value`.
            arguments: serde_json::from_str(&self.arguments).unwrap_or_default(),
            state: self.driver.state().clone(),
            outcome,
            delivered: false,
        }
    }
}

/// Runs `follow`'s next step on the client's runtime (this thread's, when it has one).
fn run_step(inner: Arc<Inner>, slot: Arc<Slot>, follow: Box<Follow>) {
    let runtime = tokio::runtime::Handle::try_current().ok().or_else(|| inner.runtime.get().cloned());
    match runtime {
        Some(runtime) => drop(runtime.spawn(step(inner, slot, follow))),
        // Never followed a task on a runtime: nothing can have parked here.
        None => slot.close(None),
    }
}
/// The client span of one `tools/call` (OpenTelemetry semantic conventions for MCP: kind client,
/// named `tools/call {tool}`), held until the task's outcome when the call made a task.
fn client_span(tool: &str) -> tracing::Span {
    tracing::info_span!(
        "mcp_client_call",
        otel.name = format!("tools/call {tool}"),
        otel.kind = "client",
        "mcp.method.name" = "tools/call",
        "gen_ai.tool.name" = tool,
        "gen_ai.operation.name" = "execute_tool",
        "mcp.task.id" = tracing::field::Empty,
        "task.status" = tracing::field::Empty,
        "error.type" = tracing::field::Empty,
        otel.status_code = tracing::field::Empty,
    )
}

/// The id of the task a `tools/call` result says the server created, if it names one (read
/// before the rest of the result, which may not be readable).
fn created_task_id(result: &Value) -> Option<String> {
    (result.get("resultType").and_then(Value::as_str) == Some("task"))
        .then(|| result.get("taskId").and_then(Value::as_str).map(str::to_owned))
        .flatten()
}

/// How long an abandoned task's best-effort `tasks/cancel` may hold up its outcome.
const ABANDON_CANCEL_WAIT: Duration = Duration::from_secs(2);

/// Sends what the driver wants sent and feeds the answers back. Once the outcome is known it
/// stops, unless `past_outcome`: what is left then (an abandoned task's cancel) is sent by
/// [`step`], within a bound.
async fn flush(inner: &Inner, driver: &mut TaskDriver, past_outcome: bool) {
    while past_outcome || driver.outcome().is_none() {
        let Some(out) = driver.poll_outgoing() else { break };
        let result = inner.transport.request(out.method(), out.params_traced(driver.trace())).await;
        let now = inner.clock.now_ms();
        match (&out, result) {
            // An answer that cannot be read ends the driver (asking again would read the same);
            // a failure to get any answer is retried at the next interval.
            (Outgoing::Get { .. }, Ok(value)) => driver.handle_get_result(now, value),
            (Outgoing::Get { .. }, Err(ClientError::InvalidResult(e))) => driver.handle_unreadable(out.method(), &e),
            (Outgoing::Get { .. }, Err(ClientError::Rpc(e))) => driver.handle_get_error(now, &e),
            (Outgoing::Get { .. }, Err(e)) => driver.handle_get_error(now, &RpcError::internal(e.to_string())),
            (out, Ok(_)) => driver.handle_ack(now, out.method(), Ok(())),
            (out, Err(ClientError::Rpc(e))) => driver.handle_ack(now, out.method(), Err(&e)),
            (out, Err(e)) => {
                tracing::warn!(error = %e, method = out.method(), "task request failed");
                driver.handle_ack(now, out.method(), Err(&RpcError::internal(e.to_string())));
            }
        }
    }
}

/// Drives a followed task from what woke it (the messages in its slot, its timer) until it
/// waits again, parked in its slot, or ends.
async fn step(inner: Arc<Inner>, slot: Arc<Slot>, mut follow: Box<Follow>) {
    loop {
        // What came while it waited, in the order it came.
        while let Some(inbound) = slot.take() {
            let (driver, now) = (&mut follow.driver, inner.clock.now_ms());
            match inbound {
                Inbound::Frame(Frame::Accepted) => driver.handle_listening(now, true),
                Inbound::Frame(Frame::Update(params)) => driver.handle_notification_params(now, params),
                // No stream carries the task (any more): poll at the server's interval.
                Inbound::Frame(Frame::Unlistened) => driver.handle_listening(now, false),
                Inbound::Command(Command::Answer(key, response, reply)) => {
                    let _ = reply.send(driver.answer(&key, response));
                }
                Inbound::Command(Command::Cancel(mode)) => {
                    let _ = driver.cancel(mode);
                }
                Inbound::Command(Command::Detach) => return end(&inner, &slot, &follow, None),
            }
        }
        if inner.closed.is_cancelled() {
            return end(&inner, &slot, &follow, None); // the reference stays for resume_all
        }
        if let Some(outcome) = Box::pin(advance(&inner, &slot, &mut follow)).await {
            return end(&inner, &slot, &follow, Some(outcome));
        }
        if !follow.listen_tried {
            follow.listen_tried = true;
            // A shared stream; an id the server does not accept (or no listen support at all)
            // is told `Unlistened`, and the task is polled.
            inner.listens.subscribe(follow.driver.task_id(), Arc::clone(&slot));
        }
        follow.wake_at = follow.driver.poll_timeout().unwrap_or(u64::MAX);
        if follow.wake_at <= inner.clock.now_ms() {
            continue;
        }
        follow = match slot.park(follow) {
            Ok(deadline) => {
                if let Some(at) = deadline {
                    inner.timers.arm(&inner, &slot, at);
                }
                return;
            }
            Err(follow) => follow, // a message came meanwhile
        };
    }
}

/// One turn of the driver: what is due is sent, its events handled, what changed saved. The
/// outcome, once there is one (after what the driver still had to send, within a bound).
async fn advance(inner: &Inner, slot: &Slot, follow: &mut Follow) -> Option<Outcome> {
    loop {
        let driver = &mut follow.driver;
        driver.handle_timeout(inner.clock.now_ms());
        flush(inner, driver, false).await;
        let mut answered = false;
        let mut outcome = None;
        while let Some(event) = driver.poll_event() {
            match event {
                DriverEvent::Status(task) => slot.publish(task),
                // An abandoned driver asks nothing more of the handler.
                DriverEvent::InputRequested { .. } if driver.outcome().is_some() => {}
                DriverEvent::InputRequested { key, request } => {
                    if let Some(handler) = &inner.input {
                        let request = InputRequest::new(Some(driver.task_id()), &key, &request);
                        match ask(handler.as_ref(), request).await {
                            // Refused only for a key answered meanwhile through `answer()`.
                            Ok(Some(answer)) => answered |= driver.answer(&key, answer).is_ok(),
                            Ok(None) => {}
                            Err(e) => {
                                let error = input_handler_failed(driver.task_id(), &key, &e.to_string());
                                driver.abandon(error);
                            }
                        }
                    }
                }
                DriverEvent::Finished(finished) => outcome = Some(finished),
            }
        }
        // Persist only what changed: a poll that saw nothing new writes nothing.
        if outcome.is_some() || follow.saved != follow.driver.revision() {
            follow.saved = follow.driver.revision();
            // The outcome goes into the reference and back, not copied.
            let mut reference = follow.reference(inner, outcome.take());
            if let Err(e) = inner.store.save(&reference).await {
                tracing::error!(error = %e, "could not persist a task reference");
            }
            outcome = reference.outcome.take();
        }
        if outcome.is_some() {
            // An abandoned task's best-effort cancel goes before the outcome (a caller may close
            // its transport as soon as it has the outcome), within a bound, so a slow server
            // holds the caller up no longer than that.
            let _ = tokio::time::timeout(ABANDON_CANCEL_WAIT, flush(inner, &mut follow.driver, true)).await;
            return outcome;
        }
        if !answered {
            return None;
        }
    }
}

/// The task is followed no more: its slot takes nothing more and hands out `outcome` (when it
/// has one), and no listen stream carries it.
fn end(inner: &Inner, slot: &Slot, follow: &Follow, outcome: Option<Outcome>) {
    slot.close(outcome);
    inner.listens.unsubscribe(follow.driver.task_id());
}
