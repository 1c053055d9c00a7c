//! The handle a task's work holds: status messages, input requests, cancellation, and the
//! final result or error.

use std::sync::Arc;

use serde_json::Value;
use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;

use super::{Engine, EngineError, Limits, Live, Waiter};
use crate::protocol::trace::TraceContext;
use crate::protocol::{Envelope, InputRequests, InputResponses, RpcError, TaskEvent, TaskStatus, TransitionError};

/// The work's handle on its task. Finish it with [`TaskContext::complete`] or
/// [`TaskContext::fail`]; dropping it unfinished fails the task with -32603, so a panicking or
/// forgotten work never leaves a task `working` forever (a resumable task waits for its next
/// attempt instead, as when its process dies). Derefs to [`TaskHandle`].
pub struct TaskContext {
    handle: TaskHandle,
    finished: bool,
}

/// A cloneable view of a running task for the work: status messages, input, cancellation.
#[derive(Clone)]
pub struct TaskHandle {
    engine: Engine,
    live: Arc<Live>,
    /// The envelope of the request that created the task, when known: what its client declared
    /// it can answer (see [`TaskContext::bind_envelope`]).
    envelope: Option<Arc<Envelope>>,
}

impl std::fmt::Debug for TaskContext {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TaskContext").field("id", &self.handle.task_id()).finish_non_exhaustive()
    }
}

impl std::fmt::Debug for TaskHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TaskHandle").field("id", &self.task_id()).finish_non_exhaustive()
    }
}

impl std::ops::Deref for TaskContext {
    type Target = TaskHandle;

    fn deref(&self) -> &TaskHandle {
        &self.handle
    }
}

/// The error of a task whose work ended without reporting a result.
pub const NO_RESULT_MESSAGE: &str = "Task failed: its work ended without a result";

impl TaskContext {
    pub(super) fn new(engine: Engine, live: Arc<Live>, envelope: Option<Arc<Envelope>>) -> Self {
        Self { handle: TaskHandle { engine, live, envelope }, finished: false }
    }

    /// Binds the task to the `_meta` envelope of the request that created it, so
    /// [`TaskHandle::request_input`] refuses input its client did not declare it can answer. The
    /// host that created the task binds it, with the envelope it already holds, before handing the
    /// context to the work; the engine binds a claimed task's itself, from its stored call. A task
    /// whose creator binds none has nothing to check input against.
    pub fn bind_envelope(&mut self, envelope: Arc<Envelope>) {
        self.handle.envelope = Some(envelope);
    }

    /// A cloneable handle for the work (everything but finishing).
    pub fn handle(&self) -> TaskHandle {
        self.handle.clone()
    }

    /// Finishes the task with a tool result (`CallToolResult`; `isError: true` still completes).
    /// Returns `false` when the task was already terminal (cancelled, expired) and the result was
    /// discarded. A result over the size limit fails the task with -32603 instead.
    pub async fn complete(mut self, result: Value) -> Result<bool, EngineError> {
        self.finished = true;
        let event = match Limits::check("tool result", &result, self.engine.config().limits.max_result_bytes) {
            Ok(()) => TaskEvent::Complete(result),
            Err(too_large) => TaskEvent::Fail(RpcError::internal(too_large.to_string())),
        };
        self.finish(event).await
    }

    /// Finishes the task as `failed` with a JSON-RPC error (protocol-level failures only; tool
    /// errors complete with `isError: true`). Returns `false` when it was already terminal.
    pub async fn fail(mut self, error: RpcError) -> Result<bool, EngineError> {
        self.finished = true;
        self.finish(TaskEvent::Fail(error)).await
    }

    async fn finish(&self, event: TaskEvent) -> Result<bool, EngineError> {
        match self.engine.change_work(&self.live, event).await {
            Ok(_) => Ok(true),
            Err(EngineError::Transition(TransitionError::Terminal(_))) => Ok(false),
            Err(e) => Err(e),
        }
    }
}

impl TaskHandle {
    /// The task id.
    pub fn task_id(&self) -> &str {
        &self.live.id
    }

    /// The current status as last committed.
    pub fn status(&self) -> TaskStatus {
        self.live.committed.read().status
    }

    /// A token that fires when the task is cancelled or expires; tools select on it to stop.
    pub fn cancellation(&self) -> CancellationToken {
        self.live.cancel.clone()
    }

    /// True once the task was cancelled or expired.
    pub fn is_cancelled(&self) -> bool {
        self.live.cancel.is_cancelled()
    }

    /// Waits until the task is cancelled or expires.
    pub async fn cancelled(&self) {
        self.live.cancel.cancelled().await;
    }

    /// Sets the task's `statusMessage` (visible to `tasks/get` and listeners once this returns).
    pub async fn set_status_message(&self, message: impl Into<String>) -> Result<(), EngineError> {
        self.engine.change_work(&self.live, TaskEvent::SetStatusMessage(message.into())).await.map(|_| ())
    }

    /// This attempt's number: 1 for the task's first run, 2 or more for a resumable task run
    /// again after its worker died.
    pub fn attempt(&self) -> u32 {
        self.live.committed.read().attempt
    }

    /// The JSON-RPC error code the task failed with, once it failed.
    pub fn error_code(&self) -> Option<i64> {
        self.live.committed.read().error.as_ref().map(|e| e.code)
    }

    /// The trace context the task keeps (SEP-414): its create's span, or its caller's context
    /// where the creating server traced nothing; a run is parented to it.
    pub fn trace(&self) -> Option<TraceContext> {
        self.live.committed.read().trace.as_deref().cloned()
    }

    /// The last checkpoint saved with [`TaskHandle::checkpoint`], by this attempt or an earlier
    /// one; `None` when none was saved.
    pub fn saved_checkpoint(&self) -> Option<Value> {
        self.live.committed.read().checkpoint.as_deref().cloned()
    }

    /// Saves `value` with the task (durably, as every task write), for a later attempt to
    /// resume from if this one is cut short. A value over `Limits::max_checkpoint_bytes` is
    /// refused with -32602 and the previous checkpoint stays.
    pub async fn checkpoint(&self, value: Value) -> Result<(), EngineError> {
        Limits::check("checkpoint", &value, self.engine.config().limits.max_checkpoint_bytes)?;
        self.engine.change_work(&self.live, TaskEvent::Checkpoint(value)).await.map(|_| ())
    }

    /// The `_meta` envelope of the request that created the task, when bound
    /// ([`TaskContext::bind_envelope`]): its `client_capabilities` say what input the client can
    /// answer.
    pub fn envelope(&self) -> Option<&Envelope> {
        self.envelope.as_deref()
    }

    /// Asks the client for input: the task becomes `input_required` with `requests` (keys must
    /// be new for this task) and this waits until every key is answered through `tasks/update`,
    /// returning the answers. Fails with [`EngineError::Cancelled`] if the task is cancelled or
    /// expires first. Input the creating request's client did not declare it can answer (no
    /// `elicitation` for an `elicitation/create`, ...) is refused with -32021
    /// ([`ProtocolError::MissingCapability`](crate::protocol::ProtocolError::MissingCapability),
    /// naming what is missing) and changes nothing: the work may ask otherwise, or fail.
    pub async fn request_input(&self, requests: InputRequests) -> Result<InputResponses, EngineError> {
        if let Some(envelope) = &self.envelope {
            envelope.check_input_requests(&requests)?;
        }
        let (tx, rx) = oneshot::channel();
        let keys: Vec<String> = requests.keys().cloned().collect();
        self.live.waiters.lock().push(Waiter { keys: keys.clone(), tx });
        if let Err(e) = self.engine.change_work(&self.live, TaskEvent::RequestInput(requests)).await {
            self.live.waiters.lock().retain(|w| w.keys != keys);
            return Err(e);
        }
        // Span events of the run (its keys' count only: requests and answers may carry what
        // the user typed, which no span holds).
        tracing::info!(target: "mcp_tasks::run", keys = keys.len(), "task.input_requested");
        let answers = tokio::select! {
            answers = rx => answers.map_err(|_| EngineError::Cancelled),
            () = self.live.cancel.cancelled() => Err(EngineError::Cancelled),
        };
        if answers.is_ok() {
            tracing::info!(target: "mcp_tasks::run", keys = keys.len(), "task.input_received");
        }
        answers
    }
}

impl Drop for TaskContext {
    fn drop(&mut self) {
        if self.finished {
            return;
        }
        let resumable = {
            let committed = self.live.committed.read();
            // Finished, or another worker runs it now: nothing of this attempt's to fail.
            if committed.status.is_terminal() || committed.owner != self.handle.engine.inner.owner {
                return;
            }
            committed.resume.is_some() && committed.call.is_some()
        };
        // A resumable task's attempt was cut short (its future dropped: the process is stopping,
        // or the work forgot its context): the task waits for another attempt, as after a
        // crash, instead of failing. A panic is not this: the host reports it as a failure.
        let event = if resumable {
            TaskEvent::Abandon(NO_RESULT_MESSAGE.to_owned())
        } else {
            TaskEvent::Fail(RpcError::internal(NO_RESULT_MESSAGE))
        };
        let engine = self.handle.engine.clone();
        let live = Arc::clone(&self.handle.live);
        if let Ok(handle) = tokio::runtime::Handle::try_current() {
            handle.spawn(async move {
                let _ = engine.change_work(&live, event).await;
            });
        }
    }
}
