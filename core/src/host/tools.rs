//! Tools served by the host: their registration ([`Tool`]), the handler trait with its MRTR
//! `prepare` phase, and the [`RunContext`] the work sees.

use std::sync::Arc;

use async_trait::async_trait;
use serde_json::{Map, Value, json};
use tokio_util::sync::CancellationToken;

use crate::engine::{TaskHandle, TaskOptions};
use crate::protocol::negotiation::missing_tasks_capability;
use crate::protocol::{Envelope, InputRequests, InputResponses, Resume, RpcError, StoredCall, TaskMode};

/// One `tools/call` as the handler sees it.
#[derive(Clone, Debug)]
pub struct ToolCall {
    /// The tool's name.
    pub name: String,
    /// The arguments object.
    pub arguments: Map<String, Value>,
    /// MRTR answers sent with this round, if any. Boxed, as `state`: most calls carry neither,
    /// and a running task's tool future holds its call for the task's whole life.
    pub input_responses: Option<Box<InputResponses>>,
    /// The state the handler returned from the previous MRTR round, verified and opened.
    pub state: Option<Box<Value>>,
    /// The caller's principal.
    pub principal: String,
    /// The request's `_meta` envelope (capabilities, client info), shared with other calls that
    /// sent the same one.
    pub envelope: Arc<Envelope>,
}

impl ToolCall {
    /// The call as a task keeps it for a later attempt or a separate worker.
    pub(crate) fn stored(&self) -> StoredCall {
        StoredCall {
            arguments: self.arguments.clone(),
            input_responses: self.input_responses.as_deref().cloned(),
            state: self.state.as_deref().cloned(),
            envelope: Some(Envelope::clone(&self.envelope)),
        }
    }
}

/// What the MRTR phase decided.
#[derive(Clone, Debug)]
pub enum Prepared {
    /// Run the tool (as a task or synchronously, per its mode).
    Ready,
    /// Answer `resultType: "input_required"`; the client retries the call with the answers and
    /// the (sealed) `state`. No task exists yet.
    InputRequired {
        /// What to ask.
        input_requests: InputRequests,
        /// State to get back on the retry (sealed and bound to principal and tool by the host).
        state: Option<Value>,
    },
}

/// A tool's implementation.
#[async_trait]
pub trait ToolHandler: Send + Sync + 'static {
    /// The synchronous MRTR phase, run on every `tools/call` round before any task is created
    /// (SEP-2663: MRTR rounds finish before the task). The default asks nothing.
    async fn prepare(&self, _call: &ToolCall) -> Result<Prepared, RpcError> {
        Ok(Prepared::Ready)
    }

    /// The work. Returns the `CallToolResult` (tool failures as `isError: true`), or a JSON-RPC
    /// error for protocol-level failures (the task ends `failed`). When run as a task, the future
    /// is dropped if the task is cancelled.
    async fn run(&self, call: ToolCall, ctx: RunContext) -> Result<Value, RpcError>;
}

/// What the work can do while it runs: the task handle when it runs as a task.
#[derive(Clone, Debug)]
pub struct RunContext {
    task: Option<TaskHandle>,
    cancel: CancellationToken,
    /// A synchronous call that would have been a task had its client declared the extension:
    /// asking for input mid-run is then the client's missing declaration (-32021), not a fault.
    undeclared_task: bool,
    /// Set when this call's ask was refused so: the host then answers the call with core's
    /// refusal (its status from the error table), whatever the tool made of it.
    refused: Arc<std::sync::atomic::AtomicBool>,
}

impl RunContext {
    pub(crate) fn task(handle: TaskHandle) -> Self {
        let cancel = handle.cancellation();
        Self { task: Some(handle), cancel, undeclared_task: false, refused: Arc::default() }
    }

    /// The context of a synchronous call of a tool in `mode` by a client with `envelope`.
    pub fn synchronous_call(mode: TaskMode, envelope: &Envelope) -> Self {
        Self { undeclared_task: mode != TaskMode::Forbidden && !envelope.declares_tasks(), ..Self::synchronous() }
    }

    /// The context of a call run synchronously, outside any task (for tool code a host other
    /// than core's runs: an rmcp tool sharing work with core tools).
    pub fn synchronous() -> Self {
        Self { task: None, cancel: CancellationToken::new(), undeclared_task: false, refused: Arc::default() }
    }

    /// The task id when running as a task.
    pub fn task_id(&self) -> Option<&str> {
        self.task.as_ref().map(TaskHandle::task_id)
    }

    /// This run's attempt: 1 for a first run (and a synchronous call), 2 or more when a
    /// [resumable](Tool::resumable) tool runs again after the worker running it died.
    pub fn attempt(&self) -> u32 {
        self.task.as_ref().map_or(1, TaskHandle::attempt)
    }

    /// The W3C trace context to hand on from this run (SEP-414): the run's own span where an
    /// OpenTelemetry layer records it, else the context the task keeps; `None` for a synchronous
    /// call or a task that keeps none. A tool puts it in its own outgoing requests (an MCP
    /// request's `_meta`, HTTP `traceparent` headers) so they join the call's trace.
    pub fn trace(&self) -> Option<crate::trace::TraceContext> {
        let task = self.task.as_ref()?;
        crate::trace::handed_on(&tracing::Span::current(), task.trace())
    }

    /// The checkpoint the task's work saved last (in this attempt or an earlier one), to
    /// resume from; `None` when none was saved or the call runs synchronously.
    pub fn saved_checkpoint(&self) -> Option<Value> {
        self.task.as_ref().and_then(TaskHandle::saved_checkpoint)
    }

    /// Saves a checkpoint (a small JSON value, 64 KiB at most by default) durably with the
    /// task, for a later attempt; does nothing for a synchronous call.
    pub async fn checkpoint(&self, value: Value) -> Result<(), RpcError> {
        match &self.task {
            Some(task) => task.checkpoint(value).await.map_err(|e| e.to_protocol().to_rpc()),
            None => Ok(()),
        }
    }

    /// Sets the task's status message; does nothing for a synchronous call.
    pub async fn set_status_message(&self, message: impl Into<String>) -> Result<(), RpcError> {
        match &self.task {
            Some(task) => task.set_status_message(message).await.map_err(|e| e.to_protocol().to_rpc()),
            None => Ok(()),
        }
    }

    /// Asks the client for input and waits for every answer. Only a task can ask mid-run (ask
    /// in [`ToolHandler::prepare`] otherwise): a synchronous call of a tool that runs as a task
    /// for a client declaring the extension gets -32021 naming it (what the client left out,
    /// [`missing_tasks_capability`]); one of a tool that is never a task, -32603 (the tool's
    /// own fault).
    pub async fn request_input(&self, requests: InputRequests) -> Result<InputResponses, RpcError> {
        match &self.task {
            Some(task) => task.request_input(requests).await.map_err(|e| e.to_protocol().to_rpc()),
            None if self.undeclared_task => {
                self.refused.store(true, std::sync::atomic::Ordering::SeqCst);
                Err(undeclared_ask().to_rpc())
            }
            None => Err(RpcError::internal(
                "this call runs synchronously and cannot ask for input mid-run; ask in prepare() or run as a task",
            )),
        }
    }

    /// The refusal of an ask mid-run this call's client made necessary, if the tool asked.
    pub(crate) fn refusal(&self) -> Option<crate::protocol::ProtocolError> {
        self.refused.load(std::sync::atomic::Ordering::SeqCst).then(undeclared_ask)
    }

    /// Fires when the task is cancelled or expires.
    pub fn cancellation(&self) -> CancellationToken {
        self.cancel.clone()
    }

    /// True once cancelled.
    pub fn is_cancelled(&self) -> bool {
        self.cancel.is_cancelled()
    }
}

/// -32021: a synchronous call asked for input mid-run, which only its task could, and its client
/// did not declare the extension that would have made it one.
pub(crate) fn undeclared_ask() -> crate::protocol::ProtocolError {
    missing_tasks_capability("asking for input mid-run (this tool runs as a task for a client that declares it)")
}

/// A tool registration: what `tools/list` shows plus how calls run.
#[derive(Clone)]
pub struct Tool {
    /// The name clients call.
    pub name: String,
    /// A description for the model.
    pub description: String,
    /// The JSON Schema of the arguments.
    pub input_schema: Value,
    /// Whether calls become tasks.
    pub mode: TaskMode,
    /// TTL and poll interval of its tasks.
    pub options: TaskOptions,
    /// The implementation.
    pub handler: Arc<dyn ToolHandler>,
}

impl std::fmt::Debug for Tool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tool").field("name", &self.name).field("mode", &self.mode).finish_non_exhaustive()
    }
}

impl Tool {
    /// A tool with an empty-object input schema, `forbidden` task mode and default options.
    pub fn new(name: impl Into<String>, handler: impl ToolHandler) -> Self {
        Self {
            name: name.into(),
            description: String::new(),
            input_schema: json!({"type": "object"}),
            mode: TaskMode::Forbidden,
            options: TaskOptions::default(),
            handler: Arc::new(handler),
        }
    }

    /// Sets the description.
    #[must_use]
    pub fn description(mut self, text: impl Into<String>) -> Self {
        self.description = text.into();
        self
    }

    /// Sets the input schema.
    #[must_use]
    pub fn input_schema(mut self, schema: Value) -> Self {
        self.input_schema = schema;
        self
    }

    /// Sets the task mode.
    #[must_use]
    pub fn mode(mut self, mode: TaskMode) -> Self {
        self.mode = mode;
        self
    }

    /// Sets the TTL of its tasks (`None` is unlimited).
    #[must_use]
    pub fn ttl_ms(mut self, ttl: Option<u64>) -> Self {
        self.options.ttl_ms = Some(ttl);
        self
    }

    /// Sets the poll interval of its tasks.
    #[must_use]
    pub fn poll_interval_ms(mut self, ms: u64) -> Self {
        self.options.poll_interval_ms = Some(ms);
        self
    }

    /// Makes the tool resumable: when the process running one of its tasks dies, the task is
    /// run again (under the same task id, up to `max_attempts` attempts in all, waiting
    /// `backoff_ms` before the second and twice as long before each later one) instead of
    /// failing. The tool must be idempotent: an attempt cut short runs again, from the start
    /// or from its [checkpoint](RunContext::checkpoint). Its calls are stored with their tasks.
    #[must_use]
    pub fn resumable(mut self, max_attempts: u32, backoff_ms: u64) -> Self {
        self.options.resume = Some(Resume { max_attempts, backoff_ms });
        self
    }

    pub(crate) fn listing(&self) -> Value {
        let mut tool = json!({ "name": self.name, "inputSchema": self.input_schema });
        if !self.description.is_empty() {
            tool["description"] = Value::String(self.description.clone());
        }
        tool
    }
}

/// A [`ToolHandler`] from an async closure `(call, ctx) -> Result<Value, RpcError>`.
pub fn handler_fn<F, Fut>(f: F) -> impl ToolHandler
where
    F: Fn(ToolCall, RunContext) -> Fut + Send + Sync + 'static,
    Fut: std::future::Future<Output = Result<Value, RpcError>> + Send + 'static,
{
    struct FnHandler<F>(F);

    #[async_trait]
    impl<F, Fut> ToolHandler for FnHandler<F>
    where
        F: Fn(ToolCall, RunContext) -> Fut + Send + Sync + 'static,
        Fut: std::future::Future<Output = Result<Value, RpcError>> + Send + 'static,
    {
        // Written out (not `async fn`): boxing the closure's future itself, instead of an async
        // block awaiting it, keeps one copy of the call in memory for the task's life, not two.
        fn run<'life0, 'async_trait>(
            &'life0 self,
            call: ToolCall,
            ctx: RunContext,
        ) -> std::pin::Pin<Box<dyn std::future::Future<Output = Result<Value, RpcError>> + Send + 'async_trait>>
        where
            'life0: 'async_trait,
            Self: 'async_trait,
        {
            Box::pin((self.0)(call, ctx))
        }
    }

    FnHandler(f)
}

/// A text-content `CallToolResult`.
pub fn text_result(text: impl Into<String>) -> Value {
    json!({ "content": [{ "type": "text", "text": text.into() }], "isError": false })
}

/// A text-content `CallToolResult` with `isError: true` (a tool-level failure).
pub fn error_result(text: impl Into<String>) -> Value {
    json!({ "content": [{ "type": "text", "text": text.into() }], "isError": true })
}
