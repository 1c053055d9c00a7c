//! Glue for `mcp_tasks::engine`: the engine, a task's work handle, and listen subscriptions.
//! JSON crosses the boundary as Python objects (dicts, lists, ...; `from_py` in, `Pythonized`
//! out); every async method returns an awaitable that runs on the shared tokio runtime without
//! holding the GIL, or is already resolved when the work finished without waiting.

use std::collections::HashMap;
use std::sync::Arc;

use mcp_tasks::clock::{ManualClock, SequentialIds};
use mcp_tasks::engine::{
    ClaimedTask, EngineConfig, Executor, Served, SseListen, Subscription, TaskContext, TaskHandle, TaskOptions,
};
use mcp_tasks::protocol::negotiation::{Dispatch, TaskMode};
use mcp_tasks::protocol::server::{
    Decision, Dispatcher, DispatcherConfig, Headers, HttpRequest, ListenFrames, Reply, Route, Routed, Routing,
    ToolCallRoute, ToolEntry, get_result,
};
use mcp_tasks::protocol::{Envelope, Resume, RpcError, StoredCall};
use mcp_tasks::{Engine, EngineError};
use pyo3::BoundObject;
use pyo3::prelude::*;

use crate::error::{engine_error, protocol_error, store_error};
use crate::{Pythonized, from_py};

/// A JSON object argument; anything else is -32602 naming `what`.
fn object(what: &str, value: &Bound<'_, PyAny>) -> PyResult<serde_json::Map<String, serde_json::Value>> {
    match from_py(what, value)? {
        serde_json::Value::Object(map) => Ok(map),
        _ => {
            Err(protocol_error(&mcp_tasks::protocol::ProtocolError::InvalidParams(format!("{what} must be an object"))))
        }
    }
}

/// The task engine over a store given by URL: `sqlite:///path/to/file.db[?durability=normal|full]`,
/// `postgres://user:pass@host/db` (shared with other workers) or `memory://`.
#[pyclass(name = "Engine", module = "mcp_tasks._native", frozen)]
pub(crate) struct PyEngine {
    inner: Engine,
    /// The manual clock when the engine was built with `clock_start_ms` (tests and vectors).
    clock: Option<Arc<ManualClock>>,
    sweeper: Option<tokio::task::JoinHandle<()>>,
    callbacks: Arc<CancelCallbacks>,
    /// The claim loop of [`PyEngine::start_executor`], while it runs.
    executor: parking_lot::Mutex<Option<tokio::task::JoinHandle<()>>>,
}

/// Task options from the Python keywords: `max_attempts` makes the tool resumable (core's
/// [`Resume`], its backoff default unless `backoff_ms` is given).
fn task_options(
    ttl_ms: Option<u64>,
    unlimited_ttl: bool,
    poll_interval_ms: Option<u64>,
    max_attempts: Option<u32>,
    backoff_ms: Option<u64>,
) -> TaskOptions {
    let ttl = if unlimited_ttl { Some(None) } else { ttl_ms.map(Some) };
    let resume = max_attempts.map(|max_attempts| Resume {
        max_attempts,
        backoff_ms: backoff_ms.unwrap_or_else(|| Resume::default().backoff_ms),
    });
    TaskOptions { ttl_ms: ttl, poll_interval_ms, resume }
}

/// The call a later attempt or a worker runs: the arguments and the MRTR answers it came with.
fn stored_call(
    arguments: serde_json::Map<String, serde_json::Value>,
    input_responses: Option<&Bound<'_, PyAny>>,
    envelope: Option<Envelope>,
) -> PyResult<StoredCall> {
    let input_responses = input_responses.filter(|r| !r.is_none()).map(|r| object("inputResponses", r)).transpose()?;
    Ok(StoredCall { arguments, input_responses, envelope, ..StoredCall::default() })
}

/// The envelope a task made through mcp is bound to: the `clientCapabilities` of its request's
/// `_meta` (a dict), or none when the request carried none (a 2025-era session).
fn client_envelope(client_capabilities: Option<&Bound<'_, PyAny>>) -> PyResult<Option<Envelope>> {
    let Some(caps) = client_capabilities.filter(|c| !c.is_none()) else { return Ok(None) };
    Ok(Some(Envelope {
        protocol_version: mcp_tasks::protocol::PROTOCOL_VERSION.to_owned(),
        client_capabilities: object("clientCapabilities", caps)?,
        client_info: None,
    }))
}

/// Runs claimed tasks through a Python callable on the event loop that started it:
/// `callback(task_context, tool, call)` (`call`: core's stored call as a dict, `arguments`
/// and `input_responses`), scheduled with `call_soon_threadsafe`.
struct PyExecutor {
    tools: Vec<String>,
    event_loop: Py<PyAny>,
    callback: Py<PyAny>,
    callbacks: Arc<CancelCallbacks>,
}

impl Executor for PyExecutor {
    fn tools(&self) -> Vec<String> {
        // An exiting interpreter runs nothing more: what it would claim stays for the next start.
        if crate::shutting_down() { Vec::new() } else { self.tools.clone() }
    }

    fn execute(&self, task: ClaimedTask) {
        let ClaimedTask { context, tool, call, .. } = task;
        let work = PyTaskContext::new(context, Arc::clone(&self.callbacks));
        let handed = crate::attach_unless_shutting_down(|py| -> PyResult<()> {
            let work = Py::new(py, work)?;
            let args = (self.callback.clone_ref(py), work, tool, Pythonized(call));
            self.event_loop.call_method1(py, "call_soon_threadsafe", args)?;
            Ok(())
        });
        if !matches!(handed, Some(Ok(()))) {
            // The loop closed (the process is stopping): nothing here will run it. It stays
            // claimed by this dying process, so the next start (SQLite) or the lapse of this
            // worker's lease (PostgreSQL) hands it to another attempt, as after a crash.
            tracing::warn!("a claimed task could not reach the Python event loop; it resumes after this process");
        }
    }
}

/// A running work's cancel callback: the task's handle, the event loop and the callable.
struct Registered {
    handle: TaskHandle,
    event_loop: Py<PyAny>,
    callback: Py<PyAny>,
    /// On a shared store only: a waiter on the task's token, so a cancel made by another worker
    /// (adopted from the change feed) stops the work at once instead of at the next sweep.
    waiter: Option<tokio::task::AbortHandle>,
}

impl Drop for Registered {
    fn drop(&mut self) {
        if let Some(waiter) = &self.waiter {
            waiter.abort();
        }
    }
}

/// Cancel callbacks of running work, by task id (`TaskContext.on_cancel`). Nothing waits per
/// task: a callback is checked when this process cancels or reads its task, and after every TTL
/// sweep. (A tokio waiter per task cost two thread wake-ups per task, ~50 µs of a create that
/// otherwise takes ~0.2 ms in-process.)
#[derive(Default)]
struct CancelCallbacks {
    map: parking_lot::Mutex<HashMap<String, Registered>>,
    /// The store is shared with other workers (see `Registered::waiter`).
    shared: bool,
}

impl CancelCallbacks {
    /// Schedules the callbacks of the given entries on their event loops.
    fn run(fired: Vec<Registered>) {
        if fired.is_empty() {
            return;
        }
        // At interpreter exit there is no event loop left to call back on.
        crate::attach_unless_shutting_down(|py| {
            for entry in fired {
                // The loop may have closed meanwhile; nothing is left to cancel then.
                let _ = entry.event_loop.call_method1(py, "call_soon_threadsafe", (entry.callback.clone_ref(py),));
            }
        });
    }

    /// Runs `id`'s callback if its task was cancelled or expired.
    fn fire_if_cancelled(&self, id: &str) {
        let fired = {
            let mut map = self.map.lock();
            match map.get(id) {
                Some(entry) if entry.handle.is_cancelled() => map.remove(id),
                _ => None,
            }
        };
        Self::run(fired.into_iter().collect());
    }

    /// Runs the callback of every task that was cancelled or expired.
    fn fire_all_cancelled(&self) {
        let fired: Vec<Registered> = {
            let mut map = self.map.lock();
            let ids: Vec<String> =
                map.iter().filter(|(_, entry)| entry.handle.is_cancelled()).map(|(id, _)| id.clone()).collect();
            ids.iter().filter_map(|id| map.remove(id)).collect()
        };
        Self::run(fired);
    }
}

impl Drop for PyEngine {
    fn drop(&mut self) {
        // The sweeper holds the engine (and its store); stop it with the Python object.
        if let Some(sweeper) = &self.sweeper {
            sweeper.abort();
        }
        if let Some(executor) = self.executor.lock().take() {
            executor.abort();
        }
    }
}

#[pymethods]
impl PyEngine {
    /// Opens the store. Settings left out take core's `EngineConfig` defaults;
    /// `unlimited_ttl=True` makes tasks live until they finish. `clock_start_ms` gives the engine
    /// a manual clock (moved by `advance_clock`, no background sweeper: call `sweep`) and
    /// `id_prefix` sequential ids `{prefix}-1`, `{prefix}-2`, …: both exist so tests and the
    /// shared vectors get predictable bytes. `max_live_tasks_per_principal` and `max_live_tasks`
    /// cap the live tasks (core's `EngineConfig`; a create beyond raises `QuotaExceededError`).
    /// `worker_lease_ms` is how long a worker's lease on a shared store lasts.
    #[new]
    #[pyo3(signature = (store, default_ttl_ms = None, default_poll_interval_ms = None, purge_grace_ms = None, *, unlimited_ttl = false, clock_start_ms = None, id_prefix = None, max_live_tasks_per_principal = None, max_live_tasks = None, worker_lease_ms = None))]
    #[expect(clippy::too_many_arguments, reason = "mirrors the Python keyword arguments")]
    fn new(
        py: Python<'_>,
        store: &str,
        default_ttl_ms: Option<u64>,
        default_poll_interval_ms: Option<u64>,
        purge_grace_ms: Option<u64>,
        unlimited_ttl: bool,
        clock_start_ms: Option<u64>,
        id_prefix: Option<String>,
        max_live_tasks_per_principal: Option<u64>,
        max_live_tasks: Option<u64>,
        worker_lease_ms: Option<u64>,
    ) -> PyResult<Self> {
        let defaults = EngineConfig::default();
        let config = EngineConfig {
            worker_lease: worker_lease_ms.map_or(defaults.worker_lease, std::time::Duration::from_millis),
            default_ttl_ms: if unlimited_ttl { None } else { default_ttl_ms.or(defaults.default_ttl_ms) },
            default_poll_interval_ms: default_poll_interval_ms.unwrap_or(defaults.default_poll_interval_ms),
            purge_grace_ms: purge_grace_ms.unwrap_or(defaults.purge_grace_ms),
            max_live_tasks_per_principal,
            max_live_tasks,
            ..defaults
        };
        let runtime = pyo3_async_runtimes::tokio::get_runtime();
        let store = py.detach(|| runtime.block_on(mcp_tasks::store::open(store))).map_err(store_error)?;
        let clock = clock_start_ms.map(|start| Arc::new(ManualClock::new(start)));
        let shared = store.shared();
        let mut builder = Engine::builder(store).config(config);
        if let Some(clock) = &clock {
            builder = builder.clock(clock.clone());
        }
        if let Some(prefix) = id_prefix {
            builder = builder.ids(Arc::new(SequentialIds::new(prefix)));
        }
        let manual = clock.is_some();
        let callbacks = Arc::new(CancelCallbacks { shared, ..CancelCallbacks::default() });
        let sweeper_callbacks = Arc::clone(&callbacks);
        let built = py.detach(|| {
            runtime.block_on(async move {
                let engine = builder.build().await?;
                // A manual clock never moves on its own, so a background sweeper would only race
                // the caller's explicit sweeps.
                let sweeper =
                    (!manual).then(|| engine.spawn_sweeper_then(move |_| sweeper_callbacks.fire_all_cancelled()));
                Ok::<_, mcp_tasks::store::StoreError>((engine, sweeper))
            })
        });
        let (inner, sweeper) = built.map_err(|e| engine_error(EngineError::Store(e)))?;
        Ok(Self { inner, clock, sweeper, callbacks, executor: parking_lot::Mutex::new(None) })
    }

    /// Moves the manual clock forward; raises RuntimeError unless built with `clock_start_ms`.
    fn advance_clock(&self, ms: u64) -> PyResult<()> {
        match &self.clock {
            Some(clock) => {
                clock.advance(ms);
                Ok(())
            }
            None => Err(pyo3::exceptions::PyRuntimeError::new_err("the engine runs on the system clock")),
        }
    }

    /// The engine's metrics in the Prometheus exposition format (core's text; serve it with
    /// `METRICS_CONTENT_TYPE`).
    fn metrics_text(&self) -> String {
        self.inner.metrics_text()
    }

    /// Runs one TTL sweep now; resolves to `(expired, purged)`.
    fn sweep<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let engine = self.inner.clone();
        let callbacks = Arc::clone(&self.callbacks);
        crate::awaitable(py, async move {
            let report = engine.sweep().await.map_err(|e| engine_error(EngineError::Store(e)))?;
            callbacks.fire_all_cancelled();
            Ok((report.expired, report.purged))
        })
    }

    /// Creates a task durably; resolves to `(CreateTaskResult dict, TaskContext)`. `arguments`
    /// (the call's arguments object), when given, is first checked against the size limit.
    /// `max_attempts` makes the task resumable: the arguments are stored with it, and when this
    /// process dies the task runs again (through [`PyEngine::start_executor`]) instead of failing.
    /// `client_capabilities`, the request's `clientCapabilities` (a dict), binds the task's input
    /// to what its client declared: `request_input` refuses the rest with `MissingCapabilityError`.
    /// `trace`, a W3C trace context as a propagator writes it (`{"traceparent": ...}`), is kept
    /// with the task: every run of it is parented to it (`TaskContext.trace`).
    #[pyo3(signature = (principal, tool, ttl_ms = None, unlimited_ttl = false, poll_interval_ms = None, arguments = None, *, max_attempts = None, backoff_ms = None, input_responses = None, client_capabilities = None, trace = None))]
    #[expect(clippy::too_many_arguments, reason = "mirrors the Python keyword arguments")]
    fn create_task<'py>(
        &self,
        py: Python<'py>,
        principal: String,
        tool: String,
        ttl_ms: Option<u64>,
        unlimited_ttl: bool,
        poll_interval_ms: Option<u64>,
        arguments: Option<&Bound<'py, PyAny>>,
        max_attempts: Option<u32>,
        backoff_ms: Option<u64>,
        input_responses: Option<&Bound<'py, PyAny>>,
        client_capabilities: Option<&Bound<'py, PyAny>>,
        trace: Option<HashMap<String, String>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let trace = trace_context(trace);
        let arguments = arguments.map(|a| object("arguments", a)).transpose()?;
        if let Some(arguments) = &arguments {
            self.inner.check_arguments(arguments).map_err(|e| protocol_error(&e))?;
        }
        let envelope = client_envelope(client_capabilities)?;
        let engine = self.inner.clone();
        let options = task_options(ttl_ms, unlimited_ttl, poll_interval_ms, max_attempts, backoff_ms);
        let call = match (options.resume, arguments) {
            (Some(_), Some(arguments)) => Some(stored_call(arguments, input_responses, envelope.clone())?),
            _ => None,
        };
        let callbacks = Arc::clone(&self.callbacks);
        crate::awaitable(py, async move {
            let (created, mut ctx) =
                engine.create_task_traced(&principal, &tool, options, call, trace).await.map_err(engine_error)?;
            if let Some(envelope) = envelope {
                ctx.bind_envelope(engine.share_envelope(envelope));
            }
            Ok((Pythonized(created), PyTaskContext::new(ctx, callbacks)))
        })
    }

    /// Creates a task that waits for a worker instead of running here (a front-end's create):
    /// stored durably with `arguments`, then claimed by a process running
    /// [`PyEngine::start_executor`] for `tool`. Resolves to the `CreateTaskResult` dict.
    #[pyo3(signature = (principal, tool, arguments, ttl_ms = None, unlimited_ttl = false, poll_interval_ms = None, *, max_attempts = None, backoff_ms = None, input_responses = None, client_capabilities = None, trace = None))]
    #[expect(clippy::too_many_arguments, reason = "mirrors the Python keyword arguments")]
    fn enqueue_task<'py>(
        &self,
        py: Python<'py>,
        principal: String,
        tool: String,
        arguments: &Bound<'py, PyAny>,
        ttl_ms: Option<u64>,
        unlimited_ttl: bool,
        poll_interval_ms: Option<u64>,
        max_attempts: Option<u32>,
        backoff_ms: Option<u64>,
        input_responses: Option<&Bound<'py, PyAny>>,
        client_capabilities: Option<&Bound<'py, PyAny>>,
        trace: Option<HashMap<String, String>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let trace = trace_context(trace);
        let arguments = object("arguments", arguments)?;
        self.inner.check_arguments(&arguments).map_err(|e| protocol_error(&e))?;
        let engine = self.inner.clone();
        let options = task_options(ttl_ms, unlimited_ttl, poll_interval_ms, max_attempts, backoff_ms);
        // The worker that claims it checks the task's input against the request's capabilities.
        let call = stored_call(arguments, input_responses, client_envelope(client_capabilities)?)?;
        crate::awaitable(py, async move {
            let created =
                engine.enqueue_task_traced(&principal, &tool, options, call, trace).await.map_err(engine_error)?;
            Ok(Pythonized(created))
        })
    }

    /// Starts claiming tasks of `tools` that wait for a worker (resumable tasks a dead process
    /// left, tasks a front-end enqueued) and hands each to `callback(task_context, tool,
    /// call)` on the running event loop, until [`PyEngine::stop_executor`] or the
    /// engine goes. Replaces a running one.
    fn start_executor(&self, py: Python<'_>, tools: Vec<String>, callback: Py<PyAny>) -> PyResult<()> {
        let event_loop = pyo3_async_runtimes::get_running_loop(py)?.unbind();
        let executor = PyExecutor { tools, event_loop, callback, callbacks: Arc::clone(&self.callbacks) };
        let runtime = pyo3_async_runtimes::tokio::get_runtime();
        let _entered = runtime.enter();
        let handle = self.inner.spawn_executor(Arc::new(executor));
        if let Some(previous) = self.executor.lock().replace(handle) {
            previous.abort();
        }
        Ok(())
    }

    /// Stops claiming tasks (work already handed over keeps running).
    fn stop_executor(&self) {
        if let Some(executor) = self.executor.lock().take() {
            executor.abort();
        }
    }

    /// The W3C trace context `principal`'s task keeps, as a propagator's carrier, for a span
    /// about the task to link to; None when it keeps none (or the principal cannot see it).
    fn task_trace<'py>(&self, py: Python<'py>, principal: String, task_id: String) -> PyResult<Bound<'py, PyAny>> {
        let engine = self.inner.clone();
        crate::awaitable(
            py,
            async move { Ok(engine.task_trace(&principal, &task_id).await.map(|t| trace_carrier(&t))) },
        )
    }

    /// `tasks/get`: resolves to the `DetailedTask` (a dict).
    fn get<'py>(&self, py: Python<'py>, principal: String, task_id: String) -> PyResult<Bound<'py, PyAny>> {
        let engine = self.inner.clone();
        let callbacks = Arc::clone(&self.callbacks);
        crate::awaitable(py, async move {
            let task = engine.get(&principal, &task_id).await.map_err(engine_error)?;
            if task.task.status.is_terminal() {
                // A read can be what notices an expiry: stop the work now, not at the next sweep.
                callbacks.fire_if_cancelled(&task_id);
            }
            Ok(Pythonized(task))
        })
    }

    /// `tasks/update` with `input_responses` (an object: key -> response object).
    fn update<'py>(
        &self,
        py: Python<'py>,
        principal: String,
        task_id: String,
        input_responses: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let responses = object("inputResponses", input_responses)?;
        let engine = self.inner.clone();
        crate::awaitable(py, async move { engine.update(&principal, &task_id, responses).await.map_err(engine_error) })
    }

    /// `tasks/cancel`.
    fn cancel<'py>(&self, py: Python<'py>, principal: String, task_id: String) -> PyResult<Bound<'py, PyAny>> {
        let engine = self.inner.clone();
        let callbacks = Arc::clone(&self.callbacks);
        crate::awaitable(py, async move {
            engine.cancel(&principal, &task_id).await.map_err(engine_error)?;
            callbacks.fire_if_cancelled(&task_id);
            Ok(())
        })
    }

    /// Opens a notification subscription for `task_ids`.
    fn subscribe<'py>(&self, py: Python<'py>, principal: String, task_ids: Vec<String>) -> PyResult<Bound<'py, PyAny>> {
        let engine = self.inner.clone();
        crate::awaitable(py, async move {
            let subscription = engine.subscribe(&principal, &task_ids).await;
            let accepted = subscription.accepted.clone();
            Ok(PySubscription { accepted, inner: Arc::new(tokio::sync::Mutex::new(subscription)) })
        })
    }

    /// Checks the size of a `tools/call` arguments object against the limit.
    fn check_arguments(&self, arguments: &Bound<'_, PyAny>) -> PyResult<()> {
        let map = object("arguments", arguments)?;
        self.inner.check_arguments(&map).map_err(|e| protocol_error(&e))
    }
}

/// The work's handle on its task.
#[pyclass(name = "TaskContext", module = "mcp_tasks._native", frozen)]
pub(crate) struct PyTaskContext {
    id: String,
    handle: TaskHandle,
    ctx: parking_lot::Mutex<Option<TaskContext>>,
    callbacks: Arc<CancelCallbacks>,
}

impl Drop for PyTaskContext {
    fn drop(&mut self) {
        self.callbacks.map.lock().remove(&self.id);
    }
}

impl PyTaskContext {
    fn new(ctx: TaskContext, callbacks: Arc<CancelCallbacks>) -> Self {
        let id = ctx.task_id().to_owned();
        let handle = ctx.handle();
        Self { id, handle, ctx: parking_lot::Mutex::new(Some(ctx)), callbacks }
    }

    /// The work is finishing: its cancel callback must not run any more.
    fn take(&self) -> Option<TaskContext> {
        self.callbacks.map.lock().remove(&self.id);
        self.ctx.lock().take()
    }
}

#[pymethods]
impl PyTaskContext {
    /// The task id.
    #[getter]
    fn task_id(&self) -> &str {
        &self.id
    }

    /// True once the task was cancelled or expired.
    fn is_cancelled(&self) -> bool {
        self.handle.is_cancelled()
    }

    /// This attempt's number: 1 for a first run, 2 or more for a resumable task run again.
    #[getter]
    fn attempt(&self) -> u32 {
        self.handle.attempt()
    }

    /// The W3C trace context the task keeps (`{"traceparent": ..., "tracestate": ...,
    /// "baggage": ...}`), which a run is parented to; None when it keeps none.
    #[getter]
    fn trace(&self) -> Option<HashMap<String, String>> {
        self.handle.trace().map(|t| trace_carrier(&t))
    }

    /// The last checkpoint saved for the task (by this attempt or an earlier one), or None.
    fn saved_checkpoint(&self) -> Pythonized<Option<serde_json::Value>> {
        Pythonized(self.handle.saved_checkpoint())
    }

    /// Saves a checkpoint (a JSON value) durably with the task, for a later attempt.
    fn checkpoint<'py>(&self, py: Python<'py>, value: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyAny>> {
        let value = from_py("checkpoint", value)?;
        let handle = self.handle.clone();
        crate::awaitable(py, async move { handle.checkpoint(value).await.map_err(engine_error) })
    }

    /// Resolves when the task is cancelled or expires.
    fn cancelled<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let handle = self.handle.clone();
        crate::awaitable(py, async move {
            handle.cancelled().await;
            Ok(())
        })
    }

    /// Schedules `callback()` on the running event loop once the task is cancelled (through this
    /// engine's `cancel`) or expires (seen by a read or a TTL sweep), unless the work completes
    /// or fails first. Replaces an earlier callback.
    fn on_cancel(&self, py: Python<'_>, callback: Py<PyAny>) -> PyResult<()> {
        let event_loop = pyo3_async_runtimes::get_running_loop(py)?.unbind();
        let waiter = self.callbacks.shared.then(|| {
            let (handle, callbacks, id) = (self.handle.clone(), Arc::clone(&self.callbacks), self.id.clone());
            let waiter = pyo3_async_runtimes::tokio::get_runtime().spawn(async move {
                handle.cancelled().await;
                callbacks.fire_if_cancelled(&id);
            });
            waiter.abort_handle()
        });
        let entry = Registered { handle: self.handle.clone(), event_loop, callback, waiter };
        self.callbacks.map.lock().insert(self.id.clone(), entry);
        // Cancelled before the callback was set: nothing else would notice.
        self.callbacks.fire_if_cancelled(&self.id);
        Ok(())
    }

    /// Sets the status message.
    fn set_status_message<'py>(&self, py: Python<'py>, message: String) -> PyResult<Bound<'py, PyAny>> {
        let handle = self.handle.clone();
        crate::awaitable(py, async move { handle.set_status_message(message).await.map_err(engine_error) })
    }

    /// Asks for input (`requests`: an `InputRequests` object, key -> request); resolves to the
    /// answers (key -> response).
    fn request_input<'py>(&self, py: Python<'py>, requests: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyAny>> {
        let requests = object("inputRequests", requests)?;
        let handle = self.handle.clone();
        crate::awaitable(py, async move {
            let answers = handle.request_input(requests).await.map_err(engine_error)?;
            Ok(Pythonized(answers))
        })
    }

    /// Completes with a `CallToolResult` (a dict); resolves to False if the task was already
    /// terminal (the result is discarded).
    fn complete<'py>(&self, py: Python<'py>, result: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyAny>> {
        let result = from_py("result", result)?;
        let ctx = self.take();
        crate::awaitable(py, async move {
            match ctx {
                Some(ctx) => ctx.complete(result).await.map_err(engine_error),
                None => Ok(false),
            }
        })
    }

    /// Fails with a JSON-RPC error; resolves to False if the task was already terminal.
    #[pyo3(signature = (code, message, data = None))]
    fn fail<'py>(
        &self,
        py: Python<'py>,
        code: i64,
        message: String,
        data: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let mut error = RpcError::new(code, message);
        if let Some(data) = data {
            error = error.with_data(from_py("data", data)?);
        }
        self.fail_with(py, error)
    }

    /// Fails with the server-fault error (-32603) describing an exception the tool raised
    /// outside the protocol; resolves to False if the task was already terminal.
    fn fail_exception<'py>(&self, py: Python<'py>, exception: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyAny>> {
        let kind = exception.get_type().name()?.to_string();
        let error = RpcError::internal(format!("tool {kind}: {}", exception.str()?));
        self.fail_with(py, error)
    }
}

impl PyTaskContext {
    fn fail_with<'py>(&self, py: Python<'py>, error: RpcError) -> PyResult<Bound<'py, PyAny>> {
        let ctx = self.take();
        crate::awaitable(py, async move {
            match ctx {
                Some(ctx) => ctx.fail(error).await.map_err(engine_error),
                None => Ok(false),
            }
        })
    }
}

/// A listen subscription: the acknowledged ids, then each state as a `DetailedTask` dict.
#[pyclass(name = "Subscription", module = "mcp_tasks._native", frozen)]
pub(crate) struct PySubscription {
    accepted: Vec<String>,
    inner: Arc<tokio::sync::Mutex<Subscription>>,
}

#[pymethods]
impl PySubscription {
    /// The ids the caller may see.
    #[getter]
    fn accepted(&self) -> Vec<String> {
        self.accepted.clone()
    }

    /// The next state (a dict), or None once every accepted task is terminal.
    fn next<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let inner = Arc::clone(&self.inner);
        crate::awaitable(py, async move { Ok(inner.lock().await.next().await.map(Pythonized)) })
    }
}

/// The server dispatcher over an engine, for the `TasksExtension` under `mcp`'s `MCPServer`:
/// every protocol decision about a request `mcp` has parsed (envelope, header rules, per-tool
/// mode, routing, errors, listen framing) is made here, in core, not in Python.
#[pyclass(name = "Server", module = "mcp_tasks._native", frozen)]
pub(crate) struct PyServer {
    dispatcher: parking_lot::RwLock<Dispatcher>,
    engine: Engine,
    callbacks: Arc<CancelCallbacks>,
    /// Seals MRTR `requestState` for the caller and tool (core's `request_state`), inside the
    /// sealing mcp itself does, which binds it to mcp's own auth only.
    state_key: Vec<u8>,
    /// The `_meta` mcp stamps on the results it serializes (its `serverInfo`), put on the
    /// `CreateTaskResult`s core answers without mcp ([`PyRouted::create`]), so they read the same.
    result_meta: parking_lot::RwLock<Option<Arc<serde_json::Value>>>,
}

/// `(name, value)` header pairs as mcp's request carries them (repeats kept), or `None` off HTTP.
type HeaderPairs = Option<Vec<(String, String)>>;

fn parse_mode(mode: &str) -> PyResult<TaskMode> {
    serde_json::from_value(serde_json::Value::String(mode.to_owned())).map_err(|_| {
        pyo3::exceptions::PyValueError::new_err(format!(
            "task mode {mode:?} is not one of \"forbidden\", \"optional\", \"required\""
        ))
    })
}

impl PyServer {
    fn route(&self, method: &str, params: Option<&Bound<'_, PyAny>>, headers: &HeaderPairs) -> PyResult<Routing> {
        self.route_with(method, params, headers, &|_| true)
    }

    /// [`PyServer::route`] where `sdk_serves` says which tools mcp serves (see
    /// `Dispatcher::route_with`).
    fn route_with(
        &self,
        method: &str,
        params: Option<&Bound<'_, PyAny>>,
        headers: &HeaderPairs,
        sdk_serves: &dyn Fn(&str) -> bool,
    ) -> PyResult<Routing> {
        let params = params.filter(|p| !p.is_none()).map(crate::wire_params).transpose()?;
        let pairs: Option<Vec<(&str, &str)>> =
            headers.as_ref().map(|h| h.iter().map(|(n, v)| (n.as_str(), v.as_str())).collect());
        self.dispatcher
            .read()
            .route_with(method, params.as_ref(), pairs.as_deref().map(Headers), sdk_serves)
            .map_err(|e| protocol_error(&e))
    }
}

#[pymethods]
impl PyServer {
    /// A dispatcher over `engine`; tools without their own mode get `default_mode`.
    /// `request_state_key` seals MRTR `requestState` (random per process when `None`: give every
    /// process serving one endpoint the same key).
    #[new]
    #[pyo3(signature = (engine, default_mode, request_state_key = None))]
    fn new(engine: PyRef<'_, PyEngine>, default_mode: &str, request_state_key: Option<Vec<u8>>) -> PyResult<Self> {
        // mcp owns every request that is not the extension's (see `gate`).
        let config = DispatcherConfig {
            default_mode: Some(parse_mode(default_mode)?),
            delegate: true,
            ..DispatcherConfig::default()
        };
        Ok(Self {
            dispatcher: parking_lot::RwLock::new(Dispatcher::new(config)),
            engine: engine.inner.clone(),
            callbacks: Arc::clone(&engine.callbacks),
            state_key: request_state_key.unwrap_or_else(mcp_tasks::clock::random_key),
            result_meta: parking_lot::RwLock::new(None),
        })
    }

    /// Sets the `_meta` object (mcp's `serverInfo` stamp) put on every `CreateTaskResult` core
    /// answers without mcp; `None` puts none.
    fn set_result_meta(&self, meta: Option<&Bound<'_, PyAny>>) -> PyResult<()> {
        let meta = meta.filter(|m| !m.is_none()).map(|m| object("_meta", m)).transpose()?;
        *self.result_meta.write() = meta.map(|m| Arc::new(serde_json::Value::Object(m)));
        Ok(())
    }

    /// Seals an MRTR round's `requestState` (the text a tool or mcp made) for `principal` and
    /// `tool`, valid for core's `REQUEST_STATE_TTL_MS`.
    fn seal_state(&self, principal: &str, tool: &str, state: String) -> String {
        let expires = self.engine.now_ms().saturating_add(mcp_tasks::protocol::server::REQUEST_STATE_TTL_MS);
        mcp_tasks::protocol::request_state::seal(
            &self.state_key,
            principal,
            tool,
            &serde_json::Value::String(state),
            expires,
        )
    }

    /// Opens a `requestState` [`PyServer::seal_state`] sealed: the text it holds, or raises
    /// `InvalidParamsError` (-32602, "Invalid or expired requestState") when it was forged,
    /// altered, sealed for another caller or tool, or has expired.
    fn open_state(&self, principal: &str, tool: &str, sealed: &str) -> PyResult<String> {
        let now = self.engine.now_ms();
        match mcp_tasks::protocol::request_state::open(&self.state_key, principal, tool, sealed, now) {
            Ok(serde_json::Value::String(state)) => Ok(state),
            Ok(_) => Err(protocol_error(&mcp_tasks::protocol::ProtocolError::InvalidRequestState)),
            Err(e) => Err(protocol_error(&e)),
        }
    }

    /// Raises `MissingCapabilityError` (-32021, `data.requiredCapabilities`) when an MRTR round's
    /// `input_requests` ask for input the request's `client_capabilities` (a dict) do not
    /// declare; core's rule, as the other servers apply it.
    fn check_input_requests(
        &self,
        client_capabilities: &Bound<'_, PyAny>,
        input_requests: &Bound<'_, PyAny>,
    ) -> PyResult<()> {
        let caps = object("clientCapabilities", client_capabilities)?;
        let requests = object("inputRequests", input_requests)?;
        mcp_tasks::protocol::negotiation::check_input_requests(&caps, &requests).map_err(|e| protocol_error(&e))
    }

    /// The largest HTTP body [`PyServer::gate`] reads; a longer one is passed as `None`.
    #[getter]
    fn max_body_bytes(&self) -> usize {
        self.dispatcher.read().config().max_body_bytes
    }

    /// Decides one HTTP request before mcp's transport sees it: `(status, headers, body)` to send
    /// as it is, a [`PyRouted`] for a request core can perform itself (`tasks/get|update|cancel`,
    /// or a `tools/call` that makes a task), or `None` to hand the request to mcp unchanged. mcp
    /// 2.3.0 routes by the `MCP-Protocol-Version` header alone, so a request claiming the
    /// 2026-07-28 envelope with the header missing or naming a 2025 revision would reach its
    /// legacy transport (HTTP 200, -32021); core answers those (-32020 or -32022, HTTP 400), and
    /// every other malformed extension request, with the same bytes as the Rust host. `body` is
    /// `None` when it was over [`PyServer::max_body_bytes`]. The caller may still hand a routed
    /// request to mcp (its body unchanged): routing it changed nothing.
    #[pyo3(signature = (method, headers, body))]
    fn gate<'py>(
        &self,
        py: Python<'py>,
        method: &str,
        headers: Vec<(String, String)>,
        body: Option<&[u8]>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let dispatcher = &self.dispatcher;
        let decide = || {
            let pairs: Vec<(&str, &str)> = headers.iter().map(|(n, v)| (n.as_str(), v.as_str())).collect();
            let request = HttpRequest { method, headers: Headers(&pairs), body };
            // The principal is the performer's to give (`PyRouted::perform`): mcp's auth derives
            // it, and a request handed to mcp reaches `handle`/`listen` with it.
            dispatcher.read().handle_http(&request, Some(""))
        };
        // A request's routing takes a few microseconds, less than handing the GIL to a thread
        // that waits for it and taking it back; a large body's parse lets the others run.
        let decision = if body.is_some_and(|b| b.len() > GATE_DETACH_BYTES) { py.detach(decide) } else { decide() };
        match decision {
            Decision::Reply(reply) => reply_tuple(&reply).into_pyobject(py).map(BoundObject::into_any),
            // A synchronous call's tool is checked against mcp's tools by `tool_call`; a listen
            // for tasks streams from here (`PyRouted::open_listen`) or, handed to mcp, through
            // mcp's request.
            Decision::Route(routed) => {
                let (tool, plain) = match &routed.route {
                    Route::CallTool(call) => {
                        (Some(call.name.clone()), call.request_state.is_none() && call.input_responses.is_none())
                    }
                    _ => (None, true),
                };
                let listen = matches!(routed.route, Route::Listen { .. });
                let routed = PyRouted {
                    tool,
                    plain,
                    listen,
                    meta: self.result_meta.read().clone(),
                    routed: parking_lot::Mutex::new(Some(routed)),
                    engine: self.engine.clone(),
                    callbacks: Arc::clone(&self.callbacks),
                };
                Ok(Bound::new(py, routed)?.into_any())
            }
            Decision::Delegate | Decision::DelegateCall { .. } => Ok(py.None().into_bound(py)),
        }
    }

    /// Sets how `tool` runs: `"forbidden"`, `"optional"` or `"required"`.
    fn configure(&self, tool: String, mode: &str) -> PyResult<()> {
        let mode = parse_mode(mode)?;
        let listing = serde_json::json!({ "name": tool });
        self.dispatcher.write().add_tool(ToolEntry { name: tool, mode, listing });
        Ok(())
    }

    /// How a `tools/call` runs: `"sync"` or `"task"`; raises the protocol error instead (a
    /// task-required tool for a non-declaring client, bad headers, arguments over the limit, a
    /// tool that is not configured here and for which `sdk_serves(name)`, when given, is false:
    /// mcp does not serve it either). `protocol_version` is the one mcp negotiated for the
    /// request: under an earlier revision the extension does not exist and the call runs
    /// synchronously.
    #[pyo3(signature = (params, headers, protocol_version, sdk_serves = None))]
    fn tool_call(
        &self,
        params: &Bound<'_, PyAny>,
        headers: HeaderPairs,
        protocol_version: &str,
        sdk_serves: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<&'static str> {
        let dispatch = if protocol_version == mcp_tasks::PROTOCOL_VERSION {
            // A callable that fails to say is taken as "serves": mcp then answers for itself.
            let serves =
                |tool: &str| sdk_serves.is_none_or(|f| f.call1((tool,)).and_then(|r| r.is_truthy()).unwrap_or(true));
            match self.route_with("tools/call", Some(params), &headers, &serves)? {
                Routing::Route(Route::CallTool(call)) => {
                    self.engine.check_arguments(&call.arguments).map_err(|e| protocol_error(&e))?;
                    call.dispatch
                }
                _ => unreachable!("tools/call routes to CallTool"),
            }
        } else {
            let name = params.get_item("name").ok().and_then(|n| n.extract::<String>().ok()).unwrap_or_default();
            self.dispatcher.read().legacy_tool_call(&name).map_err(|e| protocol_error(&e))?
        };
        Ok(match dispatch {
            Dispatch::Sync => "sync",
            Dispatch::Task => "task",
        })
    }

    /// Serves `tasks/get`, `tasks/update` or `tasks/cancel` for `principal`: resolves to the
    /// result object, or raises the protocol error.
    fn handle<'py>(
        &self,
        py: Python<'py>,
        method: &str,
        params: Option<&Bound<'py, PyAny>>,
        headers: HeaderPairs,
        principal: String,
    ) -> PyResult<Bound<'py, PyAny>> {
        let route = match self.route(method, params, &headers)? {
            Routing::Route(route) => route,
            Routing::Answer(_) => return Err(not_tasks("Server.handle", method)),
        };
        let task_id = tasks_task_id(&route).ok_or_else(|| not_tasks("Server.handle", method))?;
        let engine = self.engine.clone();
        let callbacks = Arc::clone(&self.callbacks);
        crate::awaitable(py, async move {
            let served = engine.serve(&principal, route).await.map_err(|e| protocol_error(&e))?;
            // A cancel, or a read that notices an expiry, stops the work now, not at the next sweep.
            callbacks.fire_if_cancelled(&task_id);
            match served {
                Served::Result(result) => Ok(Pythonized(result)),
                Served::Task(task) => Ok(Pythonized(get_result(task.to_detailed()))),
                other => unreachable!("tasks/* serve a result, not {other:?}"),
            }
        })
    }

    /// Serves `subscriptions/listen`: resolves to a [`PyListen`], or to `None` when the filter
    /// names no tasks and `sdk_serves_others` (the SDK's own handler serves that listen).
    #[pyo3(signature = (request_id, params, headers, principal, sdk_serves_others))]
    fn listen<'py>(
        &self,
        py: Python<'py>,
        request_id: &Bound<'py, PyAny>,
        params: Option<&Bound<'py, PyAny>>,
        headers: HeaderPairs,
        principal: String,
        sdk_serves_others: bool,
    ) -> PyResult<Bound<'py, PyAny>> {
        let id = from_py("request id", request_id)?;
        let route = match self.route("subscriptions/listen", params, &headers)? {
            Routing::Route(route) if sdk_serves_others && route.is_sdk_listen() => {
                return crate::awaitable(py, async { Ok(None::<PyListen>) });
            }
            Routing::Route(route @ Route::Listen { .. }) => route,
            _ => unreachable!("subscriptions/listen routes to Listen"),
        };
        let engine = self.engine.clone();
        crate::awaitable(py, async move {
            let Served::Listen(subscription) = engine.serve(&principal, route).await.map_err(|e| protocol_error(&e))?
            else {
                unreachable!("a listen route serves a subscription")
            };
            let frames = ListenFrames::new(id);
            let ack = frames.ack(&subscription.accepted);
            Ok(Some(PyListen { frames, ack, inner: Arc::new(tokio::sync::Mutex::new(subscription)) }))
        })
    }
}

/// The task a `tasks/get`, `tasks/update` or `tasks/cancel` route names; `None` for any other.
fn tasks_task_id(route: &Route) -> Option<String> {
    match route {
        Route::GetTask { task_id } | Route::CancelTask { task_id } | Route::UpdateTask { task_id, .. } => {
            Some(task_id.clone())
        }
        _ => None,
    }
}

/// The misuse of calling `what` (which serves `tasks/*`) with another `method`.
fn not_tasks(what: &str, method: &str) -> PyErr {
    pyo3::exceptions::PyValueError::new_err(format!(
        "{what} serves tasks/get, tasks/update and tasks/cancel, not {method}"
    ))
}

/// Bodies up to this size are routed by [`PyServer::gate`] without releasing the GIL.
const GATE_DETACH_BYTES: usize = 64 * 1024;

/// An HTTP reply as the ASGI glue sends it: `(status, headers, body)`.
type ReplyTuple = (u16, Vec<(String, String)>, Vec<u8>);

fn reply_tuple(reply: &Reply) -> ReplyTuple {
    let headers = reply.all_headers().map(|(n, v)| (n.to_owned(), v.to_owned())).collect();
    (reply.status, headers, reply.body())
}

/// A `CreateTaskResult` with the `_meta` mcp stamps on results (see `PyServer::set_result_meta`).
#[derive(serde::Serialize)]
struct Stamped<'a> {
    #[serde(flatten)]
    created: &'a mcp_tasks::protocol::CreateTaskResult,
    #[serde(rename = "_meta", skip_serializing_if = "Option::is_none")]
    meta: Option<&'a serde_json::Value>,
}

/// A request [`PyServer::gate`] routed, for core to perform without mcp: `tasks/*` through
/// [`PyRouted::perform`], a `tools/call` that makes a task through [`PyRouted::create`]. Each
/// performs once; a routed request the caller hands to mcp instead is simply dropped.
#[pyclass(name = "Routed", module = "mcp_tasks._native", frozen)]
pub(crate) struct PyRouted {
    tool: Option<String>,
    plain: bool,
    listen: bool,
    meta: Option<Arc<serde_json::Value>>,
    routed: parking_lot::Mutex<Option<Routed>>,
    engine: Engine,
    callbacks: Arc<CancelCallbacks>,
}

impl PyRouted {
    fn take(&self, principal: String) -> PyResult<Routed> {
        let mut routed = self
            .routed
            .lock()
            .take()
            .ok_or_else(|| pyo3::exceptions::PyRuntimeError::new_err("this request was performed already"))?;
        routed.principal = principal;
        Ok(routed)
    }
}

#[pymethods]
impl PyRouted {
    /// The tool a routed `tools/call` names (it makes a task), or `None` for `tasks/*`.
    #[getter]
    fn tool(&self) -> Option<&str> {
        self.tool.as_deref()
    }

    /// False for a `tools/call` that carries MRTR answers or a `requestState`: a round of input
    /// that the tool's request-bound code (mcp's) must see.
    #[getter]
    fn plain(&self) -> bool {
        self.plain
    }

    /// True for a `subscriptions/listen` for tasks: open it with [`PyRouted::open_listen`].
    #[getter]
    fn listen(&self) -> bool {
        self.listen
    }

    /// Opens a routed `subscriptions/listen` for `principal`: resolves to `(None, stream)`, the
    /// [`PySseListen`] to send as `text/event-stream`, or to `((status, headers, body), None)`,
    /// the protocol error a refused listen gets, as the Rust host answers it.
    fn open_listen<'py>(&self, py: Python<'py>, principal: String) -> PyResult<Bound<'py, PyAny>> {
        let Routed { reply, principal, route, .. } = self.take(principal)?;
        if !matches!(route, Route::Listen { .. }) {
            return Err(pyo3::exceptions::PyValueError::new_err("Routed.open_listen serves subscriptions/listen"));
        }
        let frames = reply.listen_frames();
        let engine = self.engine.clone();
        crate::awaitable(py, async move {
            match engine.serve(&principal, route).await {
                Ok(Served::Listen(subscription)) => {
                    Ok((None, Some(PySseListen(Arc::new(SseListen::new(subscription, frames))))))
                }
                Ok(other) => unreachable!("a listen route serves a subscription, not {other:?}"),
                Err(e) => Ok((Some(reply_tuple(&reply.error(&e))), None)),
            }
        })
    }

    /// Performs `tasks/get`, `tasks/update` or `tasks/cancel` for `principal`: resolves to
    /// `(status, headers, body)`, the reply (a protocol error included) as the Rust host sends it.
    fn perform<'py>(&self, py: Python<'py>, principal: String) -> PyResult<Bound<'py, PyAny>> {
        let Routed { reply, principal, route, .. } = self.take(principal)?;
        let task_id = tasks_task_id(&route).ok_or_else(|| not_tasks("Routed.perform", "tools/call"))?;
        let (engine, callbacks) = (self.engine.clone(), Arc::clone(&self.callbacks));
        crate::awaitable(py, async move {
            let answer = match engine.serve(&principal, route).await {
                Ok(Served::Task(task)) => reply.task(&task),
                Ok(Served::Result(result)) => reply.result(result),
                Ok(other) => unreachable!("tasks/* serve a result, not {other:?}"),
                Err(e) => reply.error(&e),
            };
            // A cancel, or a read that notices an expiry, stops the work now, not at the next sweep.
            callbacks.fire_if_cancelled(&task_id);
            Ok(reply_tuple(&answer))
        })
    }

    /// Creates the task a routed `tools/call` makes, for `principal`, with the tool's options
    /// (as `Engine.create_task` takes them; `max_attempts` keeps the call with it). Resolves to
    /// `((status, headers, body), task, arguments)`: the reply (the `CreateTaskResult`, or the
    /// protocol error a refused create gets, then `task` is `None`), the work's `TaskContext`
    /// and the call's arguments for the caller to run the tool with.
    #[pyo3(signature = (principal, ttl_ms = None, unlimited_ttl = false, poll_interval_ms = None, max_attempts = None, backoff_ms = None))]
    #[expect(clippy::too_many_arguments, reason = "mirrors the Python keyword arguments")]
    fn create<'py>(
        &self,
        py: Python<'py>,
        principal: String,
        ttl_ms: Option<u64>,
        unlimited_ttl: bool,
        poll_interval_ms: Option<u64>,
        max_attempts: Option<u32>,
        backoff_ms: Option<u64>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let Routed { reply, principal, route, trace } = self.take(principal)?;
        let Route::CallTool(call) = route else {
            return Err(pyo3::exceptions::PyValueError::new_err("Routed.create serves tools/call: use perform"));
        };
        let options = task_options(ttl_ms, unlimited_ttl, poll_interval_ms, max_attempts, backoff_ms);
        let (engine, callbacks, meta) = (self.engine.clone(), Arc::clone(&self.callbacks), self.meta.clone());
        crate::awaitable(py, async move {
            if let Err(e) = engine.admit_call(&call) {
                return Ok((reply_tuple(&reply.error(&e)), None, None));
            }
            let ToolCallRoute { name, arguments, input_responses, envelope, .. } = *call;
            // Only a resumable tool's call is kept: a later attempt runs it again.
            let stored = options.resume.map(|_| StoredCall {
                arguments: arguments.clone(),
                input_responses,
                envelope: Some(envelope.clone()),
                ..StoredCall::default()
            });
            // Core performs this request without the SDK's span: the task keeps its caller's
            // trace context.
            match engine.create_task_traced(&principal, &name, options, stored, trace).await {
                Ok((created, mut ctx)) => {
                    // The task's input is checked against what this request declared.
                    ctx.bind_envelope(engine.share_envelope(envelope));
                    Ok((
                        reply_tuple(&reply.result_of(&Stamped { created: &created, meta: meta.as_deref() })),
                        Some(PyTaskContext::new(ctx, callbacks)),
                        Some(Pythonized(arguments)),
                    ))
                }
                Err(e) => Ok((reply_tuple(&reply.error(&e.to_protocol())), None, None)),
            }
        })
    }
}

/// One `subscriptions/listen` stream opened by [`PyRouted::open_listen`], framed by core as SSE
/// events (the bytes the Rust host sends): send [`PySseListen::ack`], then every event
/// [`PySseListen::next`] resolves to, then [`PySseListen::close_event`]; [`PySseListen::close`]
/// when the client went away (dropping it does the same).
#[pyclass(name = "SseListen", module = "mcp_tasks._native", frozen)]
pub(crate) struct PySseListen(Arc<SseListen>);

#[pymethods]
impl PySseListen {
    /// The acknowledgement (one SSE event).
    #[getter]
    fn ack(&self) -> &[u8] {
        self.0.ack().as_bytes()
    }

    /// The next task states as SSE events: at least one, then every state already waiting
    /// (up to core's `LISTEN_WRITE_BYTES`, 64 KiB), so a stream with many states waiting takes
    /// few sends; None once every accepted task is terminal and reported, or the stream was
    /// closed.
    fn next<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let listen = Arc::clone(&self.0);
        crate::awaitable(py, async move { Ok(listen.next_events().await.map(String::into_bytes)) })
    }

    /// The listen request's result (one SSE event), which ends the stream gracefully.
    #[getter]
    fn close_event(&self) -> Vec<u8> {
        self.0.close_event().into_bytes()
    }

    /// Stops the stream: a `next` waiting, and every later one, resolves to None, and the
    /// subscription is let go.
    fn close(&self) {
        self.0.close();
    }
}

impl Drop for PySseListen {
    fn drop(&mut self) {
        self.close();
    }
}

/// One `subscriptions/listen` stream, framed by core: send [`PyListen::ack`], then every message
/// [`PyListen::next`] resolves to, then answer the request with [`PyListen::close_result`].
#[pyclass(name = "Listen", module = "mcp_tasks._native", frozen)]
pub(crate) struct PyListen {
    frames: ListenFrames,
    ack: serde_json::Value,
    inner: Arc<tokio::sync::Mutex<Subscription>>,
}

#[pymethods]
impl PyListen {
    /// The acknowledgement notification (a JSON-RPC message dict).
    #[getter]
    fn ack(&self) -> Pythonized<serde_json::Value> {
        Pythonized(self.ack.clone())
    }

    /// The next `notifications/tasks` message (a dict), or None once every accepted task is
    /// terminal and reported.
    fn next<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let inner = Arc::clone(&self.inner);
        let frames = self.frames.clone();
        crate::awaitable(
            py,
            async move { Ok(inner.lock().await.next().await.map(|task| Pythonized(frames.task(task)))) },
        )
    }

    /// The listen request's result, which ends the stream gracefully.
    #[getter]
    fn close_result(&self) -> Pythonized<serde_json::Value> {
        Pythonized(self.frames.close_result())
    }
}

/// A trace context from a propagator's carrier (`traceparent`, `tracestate`, `baggage`); `None`
/// without a valid `traceparent`.
pub(crate) fn trace_context(carrier: Option<HashMap<String, String>>) -> Option<mcp_tasks::trace::TraceContext> {
    use mcp_tasks::protocol::trace::{META_BAGGAGE, META_TRACEPARENT, META_TRACESTATE};
    let carrier = carrier?;
    let text = |key: &str| carrier.get(key).map(String::as_str);
    mcp_tasks::trace::TraceContext::from_parts(text(META_TRACEPARENT)?, text(META_TRACESTATE), text(META_BAGGAGE))
}

/// A trace context as a propagator's carrier.
fn trace_carrier(trace: &mcp_tasks::trace::TraceContext) -> HashMap<String, String> {
    trace.to_meta().into_iter().filter_map(|(k, v)| Some((k, v.as_str()?.to_owned()))).collect()
}
