//! The task engine (tokio): creates tasks durably, runs them through host-supplied work, and
//! answers `tasks/get|update|cancel` and listen subscriptions.
//!
//! Tasks whose work runs in this process are "live": their last committed record is kept in
//! memory so reads never wait on the store, and every change is serialized per task, written to
//! the store with compare-and-set, and only then made visible and broadcast. A task leaves
//! memory when it becomes terminal; terminal tasks are read from the store and cost no RAM.

mod context;
mod executor;
mod listeners;
mod options;
mod serve;
mod sse_listen;

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::{Mutex, RwLock};
use serde_json::Value;
use tokio::sync::{broadcast, oneshot};
use tokio_util::sync::CancellationToken;

pub use context::{NO_RESULT_MESSAGE, TaskContext, TaskHandle};
pub use executor::{ClaimedTask, Execution, Executor};
pub use options::{DEFAULT_STORE, EngineOptions, OpenedEngine};
pub use serve::Served;
pub use sse_listen::SseListen;

use crate::clock::{Clock, IdGenerator, RandomIds, SystemClock};
use crate::protocol::trace::TraceContext;
use crate::protocol::{
    Actor, CreateTaskResult, DetailedTask, Envelope, InputResponses, ProtocolError, ResultType, Resume, StoredCall,
    TaskEvent, TaskRecord, TransitionError,
};
use crate::store::{AdminAction, AdminOutcome, LiveQuota, StoreError, TaskStore, UpdateOutcome};

/// Size limits on what clients and tools hand the engine, in bytes of serialized JSON.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Largest `tools/call` `arguments` object.
    pub max_arguments_bytes: usize,
    /// Largest `inputResponses` object on one `tasks/update` (or MRTR retry).
    pub max_input_responses_bytes: usize,
    /// Largest tool result; a larger one fails the task with -32603.
    pub max_result_bytes: usize,
    /// Largest checkpoint a task's work may save; a larger one is refused (-32602) and the
    /// previous checkpoint stays.
    pub max_checkpoint_bytes: usize,
}

impl Limits {
    /// Refuses `value` with -32602 if its serialized JSON is larger than `limit` bytes.
    pub fn check(what: &'static str, value: &impl serde::Serialize, limit: usize) -> Result<(), ProtocolError> {
        let mut counter = ByteCounter(0);
        let size = serde_json::to_writer(&mut counter, value).map(|()| counter.0).unwrap_or(usize::MAX);
        if size > limit { Err(ProtocolError::TooLarge { what, size, limit }) } else { Ok(()) }
    }
}

/// Counts the bytes written to it: sizes JSON without building it.
struct ByteCounter(usize);

impl std::io::Write for ByteCounter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0 += buf.len();
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_arguments_bytes: 1 << 20,
            max_input_responses_bytes: 1 << 20,
            max_result_bytes: 8 << 20,
            max_checkpoint_bytes: 64 << 10,
        }
    }
}

/// Engine-wide settings. Per-tool TTL and poll interval override the defaults via [`TaskOptions`].
#[derive(Clone, Debug)]
pub struct EngineConfig {
    /// TTL of a task when its tool sets none; `None` is unlimited.
    pub default_ttl_ms: Option<u64>,
    /// `pollIntervalMs` when the tool sets none.
    pub default_poll_interval_ms: u64,
    /// How long a task stays readable (as `failed`, or its terminal state) after its TTL ended
    /// before it is purged and reads answer -32602.
    pub purge_grace_ms: u64,
    /// How often the sweeper expires and purges tasks.
    pub sweep_interval: Duration,
    /// Size limits.
    pub limits: Limits,
    /// At start-up, fail every unfinished task in the store as abandoned by a dead process.
    /// Right for a store only this process writes (SQLite locks its file to ensure that).
    pub recover_orphans: bool,
    /// How many recently finished tasks to keep in memory for reads (a fixed bound, not a cost
    /// per task). Terminal tasks never change, so these copies are never stale.
    pub finished_cache: usize,
    /// On a shared store: how long a worker's lease lasts. Each sweep renews it; once it lapses
    /// (the worker died), any worker's sweep fails the worker's unfinished tasks.
    pub worker_lease: Duration,
    /// The most live (`working` or `input_required`) tasks one principal may have; a create
    /// beyond it is -32010 (`data.reason` `principal_quota`). `None` is no cap.
    pub max_live_tasks_per_principal: Option<u64>,
    /// The most live tasks of all principals together (`server_quota`); `None` is no cap. On a
    /// shared store both caps count every worker's tasks.
    pub max_live_tasks: Option<u64>,
    /// How often a running [`Executor`] looks for tasks that wait for a worker (created for
    /// separate workers, or resumable ones whose worker died) in a store other processes
    /// write; tasks this process enqueues or releases wake it at once.
    pub claim_interval: Duration,
}

impl EngineConfig {
    /// The caps on live tasks.
    pub fn live_quota(&self) -> LiveQuota {
        LiveQuota { per_principal: self.max_live_tasks_per_principal, total: self.max_live_tasks }
    }
}

impl Default for EngineConfig {
    fn default() -> Self {
        Self {
            default_ttl_ms: Some(3_600_000),
            default_poll_interval_ms: 1_000,
            purge_grace_ms: 300_000,
            sweep_interval: Duration::from_secs(1),
            limits: Limits::default(),
            recover_orphans: true,
            finished_cache: 4096,
            worker_lease: Duration::from_secs(15),
            max_live_tasks_per_principal: None,
            max_live_tasks: None,
            claim_interval: Duration::from_millis(250),
        }
    }
}

/// Per-task settings, usually from the tool's registration. As JSON (an adapter's per-tool
/// options): `{"ttlMs": number | null, "pollIntervalMs": number, "resume": {"maxAttempts":
/// number, "backoffMs": number}}`, all optional, `null` unlimited.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TaskOptions {
    /// TTL override: `Some(None)` is unlimited, `None` takes the engine default.
    #[serde(default, deserialize_with = "options::present")]
    pub ttl_ms: Option<Option<u64>>,
    /// Poll interval override.
    pub poll_interval_ms: Option<u64>,
    /// The tool is resumable: when the worker running a task dies, the task waits for another
    /// attempt instead of failing (see [`Resume`]). Takes effect for tasks created with their
    /// call ([`Engine::create_task_for`]), which the next attempt runs again.
    pub resume: Option<Resume>,
}

/// Why an engine call failed.
#[non_exhaustive]
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    /// The request is wrong (unknown task, oversized input, ...); answer with its code.
    #[error(transparent)]
    Protocol(#[from] ProtocolError),
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The work asked for something the task's state forbids (it is terminal, a key was reused).
    #[error(transparent)]
    Transition(#[from] TransitionError),
    /// The task was cancelled (or expired) while the work waited.
    #[error("task was cancelled")]
    Cancelled,
    /// Another worker took the task over (this worker's lease had lapsed): this attempt's
    /// writes no longer count, and its work is cancelled.
    #[error("another worker took this task over")]
    Superseded,
}

impl EngineError {
    /// The protocol error a client sees for this failure.
    pub fn to_protocol(&self) -> ProtocolError {
        match self {
            Self::Protocol(e) => e.clone(),
            Self::Store(StoreError::QuotaExceeded { scope, limit }) => {
                ProtocolError::QuotaExceeded { scope: *scope, limit: *limit }
            }
            Self::Store(e) => ProtocolError::Internal(e.to_string()),
            Self::Transition(e) => ProtocolError::Internal(e.to_string()),
            Self::Cancelled => ProtocolError::Internal("task was cancelled".into()),
            Self::Superseded => ProtocolError::Internal(self.to_string()),
        }
    }
}

/// What one sweep did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SweepReport {
    /// Unfinished tasks whose TTL ended, now `failed`.
    pub expired: usize,
    /// Tasks deleted after their TTL and grace period.
    pub purged: usize,
    /// Unfinished tasks of dead workers, now `failed` (shared stores).
    pub orphaned: usize,
    /// Operator requests applied (`mcp-tasks cancel|purge` on a store this process owns).
    pub admin: usize,
    /// Resumable tasks of dead workers, now waiting for another attempt (shared stores).
    pub released: usize,
}

pub(crate) struct Waiter {
    keys: Vec<String>,
    tx: oneshot::Sender<InputResponses>,
}

pub(crate) struct Live {
    /// The task id: one allocation, shared by the live set's key and every handle of the work.
    id: Arc<str>,
    /// The last committed record; reads clone the `Arc` and never wait on the store.
    committed: RwLock<Arc<TaskRecord>>,
    /// Serializes changes to this task so compare-and-set writes go out in order.
    write_lock: tokio::sync::Mutex<()>,
    cancel: CancellationToken,
    waiters: Mutex<Vec<Waiter>>,
}

pub(crate) struct Inner {
    store: Arc<dyn TaskStore>,
    clock: Arc<dyn Clock>,
    ids: Arc<dyn IdGenerator>,
    owner: String,
    config: EngineConfig,
    live: Mutex<LiveSet>,
    finished: Mutex<FinishedCache>,
    /// The open subscriptions, by the task ids they follow (`listeners.rs`).
    listeners: listeners::Listeners,
    /// The subscriptions alive (`mcp_tasks_listen_streams`): counted up by `subscribe`, down
    /// when one is dropped.
    subscriptions: std::sync::atomic::AtomicUsize,
    metrics: crate::metrics::Metrics,
    /// Woken when this process makes a task wait for a worker, so a running executor claims it
    /// at once instead of at its next look.
    runnable: tokio::sync::Notify,
    /// The envelopes tasks are bound to, shared ([`Engine::share_envelope`]).
    envelopes: Envelopes,
}

/// The envelopes of recent tool calls (and their tasks), shared between the calls that sent the same one. A
/// running task keeps its call's envelope for its whole life, and a parsed envelope is a few
/// small JSON maps (about 1 KB); clients send the same one with every call, so ten thousand
/// tasks of a few clients share a few copies. Bounded: once it holds [`Envelopes::MAX`], new
/// envelopes are simply not shared.
#[derive(Default)]
pub(crate) struct Envelopes(parking_lot::Mutex<std::collections::HashMap<String, Arc<Envelope>>>);

impl Envelopes {
    const MAX: usize = 256;

    pub(crate) fn share(&self, envelope: Envelope) -> Arc<Envelope> {
        let key =
            serde_json::to_string(&(&envelope.protocol_version, &envelope.client_capabilities, &envelope.client_info))
                .expect("JSON values serialize");
        let mut known = self.0.lock();
        if let Some(shared) = known.get(&key) {
            return Arc::clone(shared);
        }
        let envelope = Arc::new(envelope);
        if known.len() < Self::MAX {
            known.insert(key, Arc::clone(&envelope));
        }
        envelope
    }
}

/// The tasks this process runs, and, when the engine enforces the live-task caps itself (a
/// store only it writes, where its tasks are all the live ones), how many each principal has:
/// a create reserves its place before the store write, so concurrent creates cannot pass a cap.
#[derive(Default)]
struct LiveSet {
    tasks: HashMap<Arc<str>, Arc<Live>>,
    /// On a store only this engine writes: the tasks that wait for a worker (enqueued here, or
    /// resumable tasks the last process left), by principal. They keep their place under the
    /// caps until claimed (then they count as running) or finished.
    waiting: HashMap<String, String>,
    quota: LiveQuota,
    /// Live tasks and reservations per principal (kept only with a per-principal cap).
    per_principal: HashMap<String, u64>,
    /// Live tasks and reservations in total (kept only with a cap).
    total: u64,
}

impl LiveSet {
    /// Takes a place for a task of `principal`, or says which cap is reached.
    fn reserve(&mut self, principal: &str) -> Result<(), ProtocolError> {
        if !self.quota.is_set() {
            return Ok(());
        }
        let own = self.per_principal.get(principal).copied().unwrap_or(0);
        if let Some((scope, limit)) = self.quota.reached(own, self.total) {
            return Err(ProtocolError::QuotaExceeded { scope, limit });
        }
        self.total += 1;
        if self.quota.per_principal.is_some() {
            *self.per_principal.entry(principal.to_owned()).or_default() += 1;
        }
        Ok(())
    }

    /// Counts a task this process took over (a claim): it was live already, so no cap refuses it.
    fn adopt(&mut self, principal: &str) {
        if !self.quota.is_set() {
            return;
        }
        self.total += 1;
        if self.quota.per_principal.is_some() {
            *self.per_principal.entry(principal.to_owned()).or_default() += 1;
        }
    }

    /// Gives back a place (the task was not created, or is no longer live).
    fn release(&mut self, principal: &str) {
        if !self.quota.is_set() {
            return;
        }
        self.total = self.total.saturating_sub(1);
        if let Some(own) = self.per_principal.get_mut(principal) {
            *own = own.saturating_sub(1);
            if *own == 0 {
                self.per_principal.remove(principal);
            }
        }
    }

    /// Counts task `id` of `principal` as waiting for a worker (released, not running here):
    /// it keeps a place under the caps, as a running one does.
    fn park(&mut self, id: &str, principal: &str) {
        self.adopt(principal);
        self.waiting.insert(id.to_owned(), principal.to_owned());
    }

    /// Takes a waiting task out of `waiting` as it is claimed (its place goes with it); false
    /// when this engine did not count it.
    fn unwait(&mut self, id: &str) -> bool {
        self.waiting.remove(id).is_some()
    }

    /// Gives back the place of a waiting task that finished without being claimed.
    fn finish_waiting(&mut self, id: &str) {
        if let Some(principal) = self.waiting.remove(id) {
            self.release(&principal);
        }
    }

    fn remove(&mut self, id: &str) -> Option<Arc<Live>> {
        let live = self.tasks.remove(id)?;
        let principal = live.committed.read().principal.clone();
        self.release(&principal);
        Some(live)
    }
}

/// A bounded first-in-first-out cache of terminal records.
#[derive(Default)]
struct FinishedCache {
    records: HashMap<String, Arc<TaskRecord>>,
    /// Oldest first; the same records (a pointer each, not another copy of the id).
    order: std::collections::VecDeque<Arc<TaskRecord>>,
}

impl FinishedCache {
    fn insert(&mut self, record: Arc<TaskRecord>, capacity: usize) {
        if capacity == 0 || self.records.contains_key(&record.id) {
            return;
        }
        while self.order.len() >= capacity {
            if let Some(old) = self.order.pop_front() {
                self.records.remove(&old.id);
            }
        }
        self.order.push_back(Arc::clone(&record));
        self.records.insert(record.id.clone(), record);
    }
}

/// The task engine. Cheap to clone; all clones share one state.
#[derive(Clone)]
pub struct Engine {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Engine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Engine").field("owner", &self.inner.owner).finish_non_exhaustive()
    }
}

/// Builds an [`Engine`].
pub struct EngineBuilder {
    store: Arc<dyn TaskStore>,
    clock: Arc<dyn Clock>,
    ids: Arc<dyn IdGenerator>,
    config: EngineConfig,
}

impl EngineBuilder {
    /// Uses `clock` instead of the system clock.
    #[must_use]
    pub fn clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.clock = clock;
        self
    }

    /// Uses `ids` instead of 128-bit CSPRNG ids.
    #[must_use]
    pub fn ids(mut self, ids: Arc<dyn IdGenerator>) -> Self {
        self.ids = ids;
        self
    }

    /// Replaces the configuration.
    #[must_use]
    pub fn config(mut self, config: EngineConfig) -> Self {
        self.config = config;
        self
    }

    /// Builds the engine and, if configured, fails the tasks a dead process left unfinished.
    /// Call inside a tokio runtime.
    pub async fn build(self) -> Result<Engine, StoreError> {
        // The owner id is internal (never on the wire), so it does not consume an id from the
        // injected generator and vector task ids stay `task-1`, `task-2`, ….
        let owner = RandomIds.next_id();
        // A shared store counts every worker's tasks itself (`insert_within`); otherwise this
        // engine's own tasks are all the live ones (the rest were failed by recovery).
        let quota = if self.store.shared() { LiveQuota::default() } else { self.config.live_quota() };
        let engine = Engine {
            inner: Arc::new(Inner {
                store: self.store,
                clock: self.clock,
                ids: self.ids,
                owner,
                config: self.config,
                live: Mutex::new(LiveSet { quota, ..LiveSet::default() }),
                finished: Mutex::new(FinishedCache::default()),
                listeners: listeners::Listeners::default(),
                subscriptions: std::sync::atomic::AtomicUsize::new(0),
                metrics: crate::metrics::Metrics::default(),
                runnable: tokio::sync::Notify::new(),
                envelopes: Envelopes::default(),
            }),
        };
        if engine.inner.store.shared() {
            // Other live workers run tasks in this store: take a lease, and leave orphans to the
            // lease check in every sweep.
            engine.renew_lease().await?;
            engine.watch_changes();
        } else if engine.inner.config.recover_orphans {
            engine.recover_orphans().await?;
        }
        Ok(engine)
    }
}

/// The statusMessage and error message of a task whose worker stopped renewing its lease.
pub const DEAD_WORKER_MESSAGE: &str =
    "Task failed: the server worker running it stopped (its lease expired) before it finished";

/// The statusMessage and error message of a task whose process died.
pub const ABANDONED_MESSAGE: &str =
    "Task failed: the server process running it stopped before it finished (recovered after restart)";

/// How much SSE text a binding's listen writer takes from [`Subscription::next_events`] per
/// write: past Node's and asyncio's write buffers (16 and 64 KiB), within a socket's send buffer.
pub const LISTEN_WRITE_BYTES: usize = 64 * 1024;

impl Engine {
    /// Starts building an engine over `store`.
    pub fn builder(store: Arc<dyn TaskStore>) -> EngineBuilder {
        EngineBuilder { store, clock: Arc::new(SystemClock), ids: Arc::new(RandomIds), config: EngineConfig::default() }
    }

    /// The configuration.
    pub fn config(&self) -> &EngineConfig {
        &self.inner.config
    }

    /// The clock the engine reads.
    pub fn now_ms(&self) -> u64 {
        self.inner.clock.now_ms()
    }

    /// The store.
    pub fn store(&self) -> &Arc<dyn TaskStore> {
        &self.inner.store
    }

    /// How many tasks this process is running (non-terminal, in memory).
    pub fn live_count(&self) -> usize {
        self.inner.live.lock().tasks.len()
    }

    /// This engine's metrics in the Prometheus exposition format (OpenMetrics text; serve it
    /// with [`crate::metrics::CONTENT_TYPE`]). The names are listed in [`crate::metrics`].
    pub fn metrics_text(&self) -> String {
        let subscriptions = self.inner.subscriptions.load(std::sync::atomic::Ordering::Relaxed);
        self.inner.metrics.render(self.live_count(), subscriptions)
    }

    async fn renew_lease(&self) -> Result<(), StoreError> {
        let lease = u64::try_from(self.inner.config.worker_lease.as_millis()).unwrap_or(u64::MAX);
        self.inner.store.renew_lease(&self.inner.owner, self.inner.clock.now_ms().saturating_add(lease)).await
    }

    /// Follows a shared store's change feed: every id another process changed is re-read and
    /// adopted, until the engine is dropped.
    fn watch_changes(&self) {
        let Some(mut feed) = self.inner.store.changes() else { return };
        let engine = Arc::downgrade(&self.inner);
        tokio::spawn(async move {
            loop {
                let id = match feed.recv().await {
                    Ok(id) => id,
                    Err(broadcast::error::RecvError::Lagged(missed)) => {
                        tracing::warn!(missed, "task change feed lagged; affected tasks update on their next change");
                        continue;
                    }
                    Err(broadcast::error::RecvError::Closed) => return,
                };
                let Some(inner) = engine.upgrade() else { return };
                Self { inner }.refresh(&id).await;
            }
        });
    }

    /// Adopts the stored state of `id` if another process changed it: work running here sees a
    /// cancel (its token fires) or its answers, and subscribers hear the new state.
    pub(crate) async fn refresh(&self, id: &str) {
        let live = self.live(id);
        if live.is_none() && !self.inner.listeners.any() {
            return; // nobody here runs or watches it
        }
        let stored = match self.inner.store.get(id).await {
            Ok(Some(stored)) => stored,
            Ok(None) => return,
            Err(e) => {
                tracing::warn!(error = %e, id, "re-reading a changed task failed");
                return;
            }
        };
        match live {
            Some(live) => {
                {
                    let _serial = live.write_lock.lock().await;
                    if stored.version <= live.committed.read().version {
                        return; // our own write, or older
                    }
                    self.publish_live(&live, Arc::new(stored));
                }
                // Answers written elsewhere: hand complete sets to the waiting work.
                if !live.waiters.lock().is_empty() {
                    let _ =
                        self.change_live(&live, TaskEvent::ProvideInput(InputResponses::new()), &Actor::Client).await;
                }
            }
            None => {
                let record = Arc::new(stored);
                if record.status.is_terminal() {
                    self.remember_finished(&record);
                }
                self.inner.listeners.publish(&record);
            }
        }
    }

    async fn recover_orphans(&self) -> Result<usize, StoreError> {
        let (mut recovered, mut released) = (0, 0);
        let mut seen = std::collections::HashSet::new();
        loop {
            let batch = self.inner.store.unfinished(None, 1024).await?;
            let fresh: Vec<TaskRecord> = batch.into_iter().filter(|t| seen.insert(t.id.clone())).collect();
            if fresh.is_empty() {
                break;
            }
            for task in fresh {
                // A resumable task waits for its next attempt instead (an executor claims it).
                match self.change_stored(task, TaskEvent::Abandon(ABANDONED_MESSAGE.into()), &Actor::Client).await {
                    Ok(task) if task.is_waiting() => {
                        self.inner.live.lock().park(&task.id, &task.principal);
                        released += 1;
                    }
                    Ok(_) => recovered += 1,
                    Err(_) => {}
                }
            }
        }
        if recovered > 0 {
            tracing::warn!(recovered, "failed tasks left unfinished by a previous process");
        }
        if released > 0 {
            tracing::info!(released, "resumable tasks of a previous process wait for their next attempt");
            self.inner.runnable.notify_one();
        }
        Ok(recovered)
    }

    /// `envelope`, shared with every other holder of an equal one: a task keeps its creating
    /// request's envelope for its whole life ([`TaskContext::bind_envelope`]), and clients send
    /// the same one with every call.
    pub fn share_envelope(&self, envelope: Envelope) -> Arc<Envelope> {
        self.inner.envelopes.share(envelope)
    }

    /// The trace context `principal`'s task `id` keeps (SEP-414), for a span about the task (a
    /// poll, an answer, a cancel) to link to: from memory where the task runs or recently
    /// finished here, else from the store (another worker's task). `None` for a task the
    /// principal cannot see, or one that keeps none.
    pub async fn task_trace(&self, principal: &str, id: &str) -> Option<TraceContext> {
        let task = match self.get_cached(principal, id) {
            Some(cached) => cached.ok()?,
            None => Arc::new(self.inner.store.get(id).await.ok()??),
        };
        (task.principal == principal).then(|| task.trace.as_deref().cloned()).flatten()
    }

    /// Creates a task for `principal` running `tool`: stores it durably, then returns the
    /// `CreateTaskResult` and the handle the work uses. Send the result only after this returns.
    pub async fn create_task(
        &self,
        principal: &str,
        tool: &str,
        options: TaskOptions,
    ) -> Result<(CreateTaskResult, TaskContext), EngineError> {
        self.create_task_for(principal, tool, options, None).await
    }

    /// [`Engine::create_task`] keeping the call with the task when the tool is resumable
    /// (`options.resume`), so a later attempt can run it again after this process dies. Without
    /// `resume`, or without a call, the task fails as before when its worker dies.
    pub async fn create_task_for(
        &self,
        principal: &str,
        tool: &str,
        options: TaskOptions,
        call: Option<StoredCall>,
    ) -> Result<(CreateTaskResult, TaskContext), EngineError> {
        self.create_task_traced(principal, tool, options, call, None).await
    }

    /// [`Engine::create_task_for`] keeping `trace` with the task (SEP-414): every run of it, on
    /// any worker and after any restart, is parented to it ([`TaskHandle::trace`](crate::engine::TaskHandle::trace)).
    pub async fn create_task_traced(
        &self,
        principal: &str,
        tool: &str,
        options: TaskOptions,
        call: Option<StoredCall>,
        trace: Option<TraceContext>,
    ) -> Result<(CreateTaskResult, TaskContext), EngineError> {
        let mut record = self.new_record(principal, tool, options);
        record.trace = trace.map(Box::new);
        if let (Some(resume), Some(call)) = (options.resume, call) {
            record.resume = Some(resume);
            record.call = Some(Box::new(call));
        }
        let record = Arc::new(record);
        self.insert_new(&record).await?;
        let live = Self::new_live(Arc::clone(&record));
        self.inner.live.lock().tasks.insert(Arc::clone(&live.id), Arc::clone(&live));
        self.inner.listeners.publish(&record);
        let result = CreateTaskResult { result_type: ResultType::Task, task: record.to_task() };
        Ok((result, TaskContext::new(self.clone(), live, None)))
    }

    /// Creates a task that waits for a worker instead of running here: stored durably with its
    /// call, then claimed by whichever process runs an [`Executor`] for `tool` (a separate
    /// worker on a shared store, or this process). Send the result only after this returns.
    pub async fn enqueue_task(
        &self,
        principal: &str,
        tool: &str,
        options: TaskOptions,
        call: StoredCall,
    ) -> Result<CreateTaskResult, EngineError> {
        self.enqueue_task_traced(principal, tool, options, call, None).await
    }

    /// [`Engine::enqueue_task`] keeping `trace` with the task, for the worker that claims it.
    pub async fn enqueue_task_traced(
        &self,
        principal: &str,
        tool: &str,
        options: TaskOptions,
        call: StoredCall,
        trace: Option<TraceContext>,
    ) -> Result<CreateTaskResult, EngineError> {
        let mut record = self.new_record(principal, tool, options);
        record.trace = trace.map(Box::new);
        record.owner = String::new();
        record.attempt = 0;
        record.runnable_at_ms = Some(record.created_at_ms);
        record.resume = options.resume;
        record.call = Some(Box::new(call));
        let record = Arc::new(record);
        self.insert_new(&record).await?;
        // Not live here: the store answers for it until a worker claims it. On a store only
        // this engine writes, it keeps the place it reserved until then.
        if !self.inner.store.shared() {
            self.inner.live.lock().waiting.insert(record.id.clone(), principal.to_owned());
        }
        self.inner.listeners.publish(&record);
        self.inner.runnable.notify_one();
        Ok(CreateTaskResult { result_type: ResultType::Task, task: record.to_task() })
    }

    fn new_record(&self, principal: &str, tool: &str, options: TaskOptions) -> TaskRecord {
        let inner = &self.inner;
        let now = inner.clock.now_ms();
        let ttl = options.ttl_ms.unwrap_or(inner.config.default_ttl_ms);
        let poll = options.poll_interval_ms.unwrap_or(inner.config.default_poll_interval_ms);
        TaskRecord::new(
            inner.ids.next_id(),
            principal.to_owned(),
            inner.owner.clone(),
            tool.to_owned(),
            now,
            ttl,
            Some(poll),
        )
    }

    fn new_live(record: Arc<TaskRecord>) -> Arc<Live> {
        Arc::new(Live {
            id: Arc::from(record.id.as_str()),
            committed: RwLock::new(record),
            write_lock: tokio::sync::Mutex::new(()),
            cancel: CancellationToken::new(),
            waiters: Mutex::new(Vec::new()),
        })
    }

    /// Stores a new task within the live-task caps (the store counts on a shared store; this
    /// engine counts its own otherwise, and keeps the place it reserved).
    async fn insert_new(&self, record: &Arc<TaskRecord>) -> Result<(), EngineError> {
        let inner = &self.inner;
        let principal = record.principal.as_str();
        let started = std::time::Instant::now();
        if inner.store.shared() {
            inner.store.insert_within(record, inner.config.live_quota()).await?;
        } else {
            inner.live.lock().reserve(principal)?;
            if let Err(e) = inner.store.insert(record).await {
                inner.live.lock().release(principal);
                return Err(e.into());
            }
        }
        inner.metrics.store_write(true, started.elapsed());
        inner.metrics.created(record);
        Ok(())
    }

    fn live(&self, id: &str) -> Option<Arc<Live>> {
        self.inner.live.lock().tasks.get(id).cloned()
    }

    fn not_found(id: &str) -> EngineError {
        EngineError::Protocol(ProtocolError::TaskNotFound(id.to_owned()))
    }

    fn is_purged(&self, task: &TaskRecord, now: u64) -> bool {
        task.expires_at_ms().is_some_and(|at| now >= at.saturating_add(self.inner.config.purge_grace_ms))
    }

    /// Reads the task as `tasks/get` shows it. Unknown, purged and other principals' tasks are
    /// all -32602 alike, so existence does not leak.
    pub async fn get(&self, principal: &str, id: &str) -> Result<DetailedTask, EngineError> {
        Ok(self.read(principal, id).await?.to_detailed())
    }

    fn remember_finished(&self, record: &Arc<TaskRecord>) {
        if record.status.is_terminal() {
            self.inner.finished.lock().insert(Arc::clone(record), self.inner.config.finished_cache);
        }
    }

    /// `tasks/get` answered without waiting, when memory has the answer: the task runs in this
    /// process or finished recently, and no expiry is due to be recorded. `None` means the
    /// answer needs the store: await [`Engine::get`]. (Adapters on a single-threaded event
    /// loop use it to skip a thread hop on the hottest request.)
    /// The record comes as `tasks/get` shows it: answer with
    /// [`ReplyTo::task`](crate::protocol::server::ReplyTo::task).
    pub fn get_cached(&self, principal: &str, id: &str) -> Option<Result<Arc<TaskRecord>, EngineError>> {
        let now = self.inner.clock.now_ms();
        let task = self.cached(id)?;
        if task.principal != principal || self.is_purged(&task, now) {
            return Some(Err(Self::not_found(id)));
        }
        if !task.status.is_terminal() && task.is_expired(now) {
            return None;
        }
        Some(Ok(task))
    }

    /// The committed record of a live or recently finished task, from memory.
    fn cached(&self, id: &str) -> Option<Arc<TaskRecord>> {
        let live = self.live(id).map(|live| Arc::clone(&live.committed.read()));
        live.or_else(|| self.inner.finished.lock().records.get(id).cloned())
    }

    async fn read(&self, principal: &str, id: &str) -> Result<Arc<TaskRecord>, EngineError> {
        let now = self.inner.clock.now_ms();
        let task = match self.cached(id) {
            Some(task) => task,
            None => {
                let task = Arc::new(self.inner.store.get(id).await?.ok_or_else(|| Self::not_found(id))?);
                self.remember_finished(&task);
                task
            }
        };
        if task.principal != principal || self.is_purged(&task, now) {
            return Err(Self::not_found(id));
        }
        if !task.status.is_terminal() && task.is_expired(now) {
            // The sweeper may not have reached it yet; never show a task alive past its TTL.
            return match self.change(id, TaskEvent::Expire).await {
                Ok(expired) => Ok(expired),
                // Finished concurrently: whatever it ended as is what the store holds now.
                Err(EngineError::Transition(TransitionError::Terminal(_))) => {
                    let stored = self.inner.store.get(id).await?.ok_or_else(|| Self::not_found(id))?;
                    Ok(Arc::new(stored))
                }
                Err(e) => Err(e),
            };
        }
        Ok(task)
    }

    /// `tasks/update`: delivers answers. Unknown or already-answered keys and updates to
    /// terminal tasks are acknowledged and change nothing.
    pub async fn update(&self, principal: &str, id: &str, responses: InputResponses) -> Result<(), EngineError> {
        self.check_input_responses(&responses)?;
        self.read(principal, id).await?;
        match self.change(id, TaskEvent::ProvideInput(responses)).await {
            Ok(_) | Err(EngineError::Transition(TransitionError::Terminal(_))) => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// `tasks/cancel`: the task becomes `cancelled` at once and its work's cancellation token
    /// fires. On a terminal task it acknowledges and changes nothing.
    pub async fn cancel(&self, principal: &str, id: &str) -> Result<(), EngineError> {
        self.read(principal, id).await?;
        match self.change(id, TaskEvent::Cancel).await {
            Ok(_) | Err(EngineError::Transition(TransitionError::Terminal(_))) => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// Applies `event` to task `id` through the one transition function, wherever the task lives.
    ///
    /// The work is boxed: every tool future that awaits a status change, an input request or
    /// its result would otherwise carry this whole state machine (the store write and the
    /// notifications) inline for its entire life, sleeping or not; boxed, it costs a pointer
    /// and one short-lived allocation per change.
    pub(crate) async fn change(&self, id: &str, event: TaskEvent) -> Result<Arc<TaskRecord>, EngineError> {
        self.change_by(id, event, &Actor::Client).await
    }

    /// [`Engine::change`] asked for by `by` (an operator's cancel), as the history records it.
    async fn change_by(&self, id: &str, event: TaskEvent, by: &Actor) -> Result<Arc<TaskRecord>, EngineError> {
        Box::pin(async move {
            match self.live(id) {
                Some(live) => self.change_live(&live, event, by).await,
                None => {
                    let stored = self.inner.store.get(id).await?.ok_or_else(|| Self::not_found(id))?;
                    self.change_stored(stored, event, by).await
                }
            }
        })
        .await
    }

    async fn change_live(
        &self,
        live: &Arc<Live>,
        event: TaskEvent,
        by: &Actor,
    ) -> Result<Arc<TaskRecord>, EngineError> {
        let _serial = live.write_lock.lock().await;
        // Only a shared store can report a conflict (another process wrote first), which needs
        // the event again for a retry; otherwise it is moved, not copied (a result can be large).
        let shared = self.inner.store.shared();
        let mut event = Some(event);
        for _ in 0..8 {
            let this = if shared { event.clone() } else { event.take() };
            let this = this.ok_or_else(|| StoreError::Backend("an unshared store reported a conflict".into()))?;
            let mut next = TaskRecord::clone(&live.committed.read());
            if next.owner != self.inner.owner && !next.status.is_terminal() {
                // Another worker runs it now (this worker's lease had lapsed): this attempt's
                // own writes no longer count; a client's event still applies, to the store.
                if this.is_from_work() {
                    return Err(EngineError::Superseded);
                }
                return self.change_stored(next, this, by).await;
            }
            let expected = next.version;
            let applied = next.apply_by(self.inner.clock.now_ms(), this, by)?;
            let mut history = applied.history;
            // Answers that complete a waiting request are handed over in the same write (also
            // answers another worker stored, adopted by `refresh`).
            let mut deliveries = Vec::new();
            if !applied.answered.is_empty() || !live.waiters.lock().is_empty() {
                let mut waiters = live.waiters.lock();
                let (ready, waiting): (Vec<Waiter>, Vec<Waiter>) =
                    waiters.drain(..).partition(|w| w.keys.iter().all(|k| next.answers.contains_key(k)));
                *waiters = waiting;
                for waiter in ready {
                    let answers: InputResponses = waiter
                        .keys
                        .iter()
                        .filter_map(|k| next.answers.get(k).map(|v| (k.clone(), v.clone())))
                        .collect();
                    let taken = next.apply(self.inner.clock.now_ms(), TaskEvent::TakeAnswers(waiter.keys.clone()))?;
                    history.extend(taken.history);
                    deliveries.push((waiter, answers));
                }
            }
            if next.version == expected {
                return Ok(Arc::new(next));
            }
            let next = Arc::new(next);
            let started = std::time::Instant::now();
            let outcome = self.inner.store.update(&next, expected, &history).await?;
            self.inner.metrics.store_write(false, started.elapsed());
            match outcome {
                UpdateOutcome::Written => {
                    if next.status.is_terminal() {
                        self.inner.metrics.finished(&next);
                    }
                    self.publish_live(live, Arc::clone(&next));
                    for (waiter, answers) in deliveries {
                        let _ = waiter.tx.send(answers);
                    }
                    return Ok(next);
                }
                UpdateOutcome::Conflict => {
                    // Another writer on a shared store changed it first: put the waiters back,
                    // adopt the stored record and apply the event to that.
                    live.waiters.lock().extend(deliveries.into_iter().map(|(w, _)| w));
                    match self.inner.store.get(&next.id).await? {
                        Some(theirs) => self.publish_live(live, Arc::new(theirs)),
                        None => {
                            self.inner.live.lock().remove(&next.id);
                            return Err(Self::not_found(&next.id));
                        }
                    }
                }
            }
        }
        Err(StoreError::Backend("task kept changing under concurrent writers".into()).into())
    }

    fn publish_live(&self, live: &Arc<Live>, record: Arc<TaskRecord>) {
        *live.committed.write() = Arc::clone(&record);
        if record.status.is_terminal() {
            self.remember_finished(&record);
            self.inner.live.lock().remove(&record.id);
            live.cancel.cancel();
        } else if record.owner != self.inner.owner {
            // This attempt is over here: another worker took the task over while this one's
            // lease had lapsed, or the attempt was cut short and the task waits for the next.
            // The work here stops; whoever claims the task answers for it.
            let waiting = record.is_waiting();
            {
                let mut set = self.inner.live.lock();
                set.remove(&record.id);
                // On a store only this engine writes, it keeps count of its waiting tasks.
                if waiting && !self.inner.store.shared() {
                    set.park(&record.id, &record.principal);
                }
            }
            live.cancel.cancel();
            if waiting {
                tracing::info!(task_id = %record.id, attempt = record.attempt, "attempt ended; the task waits for the next");
                self.inner.runnable.notify_one();
            } else {
                tracing::warn!(task_id = %record.id, "another worker took this task over; its work here stops");
            }
        }
        self.inner.listeners.publish(&record);
    }

    /// A change the work itself makes (status, input, checkpoint, result): through its own live
    /// entry, so once the task finished or another worker took it over the change is refused,
    /// never applied to the record as it is now. Boxed with its event (the change's future is
    /// ~1.7 KB, the event ~200 B): a future that awaits one, such as a sleeping tool's, carries a
    /// pointer for the task's whole life, as a future is as large as its largest await.
    pub(crate) fn change_work<'a>(
        &'a self,
        live: &'a Arc<Live>,
        event: TaskEvent,
    ) -> Pin<Box<dyn Future<Output = Result<Arc<TaskRecord>, EngineError>> + Send + 'a>> {
        Box::pin(self.change_live(live, event, &Actor::Client))
    }

    async fn change_stored(
        &self,
        mut task: TaskRecord,
        event: TaskEvent,
        by: &Actor,
    ) -> Result<Arc<TaskRecord>, EngineError> {
        for _ in 0..8 {
            let expected = task.version;
            let applied = task.apply_by(self.inner.clock.now_ms(), event.clone(), by)?;
            if !applied.changed {
                return Ok(Arc::new(task));
            }
            let record = Arc::new(task);
            let started = std::time::Instant::now();
            let outcome = self.inner.store.update(&record, expected, &applied.history).await?;
            self.inner.metrics.store_write(false, started.elapsed());
            if outcome == UpdateOutcome::Written {
                if record.status.is_terminal() {
                    self.inner.metrics.finished(&record);
                    self.inner.live.lock().finish_waiting(&record.id);
                }
                self.remember_finished(&record);
                self.inner.listeners.publish(&record);
                return Ok(record);
            }
            task = self.inner.store.get(&record.id).await?.ok_or_else(|| Self::not_found(&record.id))?;
        }
        Err(StoreError::Backend("task kept changing under concurrent writers".into()).into())
    }

    /// Opens a notification subscription for `ids`: returns the ids `principal` may see (the
    /// acknowledged set), their current states, and a receiver of every later change of them.
    pub async fn subscribe(&self, principal: &str, ids: &[String]) -> Subscription {
        // Watch before reading so no change between the read and the stream is lost.
        let queue = Arc::new(listeners::Queue::default());
        let mut accepted: Vec<String> = Vec::new();
        let mut current = Vec::new();
        // Duplicates dropped through a set: a listen may name thousands of tasks.
        let mut seen = std::collections::HashSet::with_capacity(ids.len());
        for id in ids {
            if !seen.insert(id.as_str()) {
                continue;
            }
            self.inner.listeners.watch(id, &queue);
            match self.read(principal, id).await {
                Ok(task) => {
                    accepted.push(id.clone());
                    current.push(task);
                }
                Err(_) => self.inner.listeners.unwatch(id, &queue),
            }
        }
        let mut open = accepted.clone();
        open.sort_unstable();
        // Taken from the end.
        current.reverse();
        self.inner.subscriptions.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        Subscription { engine: self.clone(), principal: principal.to_owned(), accepted, open, current, queue }
    }

    /// Expires unfinished tasks past their TTL and purges tasks past TTL plus grace.
    pub async fn sweep(&self) -> Result<SweepReport, StoreError> {
        let now = self.inner.clock.now_ms();
        let mut report = SweepReport::default();
        if self.inner.store.shared() {
            self.renew_lease().await?;
            for task in self.inner.store.orphaned(now, 1024).await? {
                match self.change(&task.id, TaskEvent::Abandon(DEAD_WORKER_MESSAGE.into())).await {
                    Ok(task) if task.is_waiting() => report.released += 1,
                    Ok(_) => report.orphaned += 1,
                    Err(_) => {}
                }
            }
            if report.released > 0 {
                self.inner.runnable.notify_one();
            }
        }
        loop {
            let batch = self.inner.store.expired_unfinished(now, 1024).await?;
            let (n, before) = (batch.len(), report.expired);
            for task in batch {
                if self.change(&task.id, TaskEvent::Expire).await.is_ok() {
                    report.expired += 1;
                }
            }
            // Stop on a short batch, or when a full one made no progress (the next sweep retries).
            if n < 1024 || report.expired == before {
                break;
            }
        }
        let cutoff = now.saturating_sub(self.inner.config.purge_grace_ms);
        loop {
            let n = self.inner.store.purge(cutoff, 4096).await?;
            report.purged += n;
            if n < 4096 {
                break;
            }
        }
        for request in self.inner.store.admin_requests(64).await? {
            let outcome = self.apply_admin(&request.action).await;
            tracing::info!(seq = request.seq, action = ?request.action, outcome = ?outcome, "operator request applied");
            self.inner.store.finish_admin_request(request.seq, &outcome).await?;
            report.admin += 1;
        }
        Ok(report)
    }

    /// Applies an operator's request: a cancel goes through the transition function like
    /// `tasks/cancel` (so terminal states stay final and the work's token fires), a purge
    /// deletes only terminal tasks.
    pub async fn apply_admin(&self, action: &AdminAction) -> AdminOutcome {
        match action {
            AdminAction::Cancel { task_id, operator } => {
                self.operator_cancel(task_id, &Actor::operator(operator.as_deref())).await
            }
            AdminAction::CancelTasks { task_ids, operator } => {
                use futures::StreamExt as _;
                let by = Actor::operator(operator.as_deref());
                // In flight together, in the order named: the store's writer commits whatever is
                // queued as one group, so a thousand cancels cost a few commits, not a thousand.
                // Each future owns what it uses (a borrowing closure here is not `Send` for every
                // lifetime, which the sweeper's spawn needs).
                let cancels: Vec<_> = task_ids
                    .iter()
                    .map(|id| {
                        let (engine, by, task_id) = (self.clone(), by.clone(), id.clone());
                        Box::pin(async move {
                            let outcome =
                                crate::store::TaskOutcome::of_cancel(engine.operator_cancel(&task_id, &by).await);
                            crate::store::TaskResult { task_id, outcome }
                        })
                    })
                    .collect();
                let tasks = futures::stream::iter(cancels).buffered(ADMIN_IN_FLIGHT).collect().await;
                AdminOutcome::Each { tasks }
            }
            AdminAction::Purge { updated_before_ms } => {
                let now = self.inner.clock.now_ms();
                match crate::store::purge_all_finished(self.inner.store.as_ref(), now, *updated_before_ms).await {
                    Ok(count) => AdminOutcome::Purged { count },
                    Err(e) => AdminOutcome::Failed { message: e.to_string() },
                }
            }
            AdminAction::PurgeTasks { task_ids } => match self.inner.store.purge_tasks(task_ids).await {
                Ok(count) => AdminOutcome::Purged { count },
                Err(e) => AdminOutcome::Failed { message: e.to_string() },
            },
        }
    }

    /// An operator's cancel of one task, through the transition function.
    async fn operator_cancel(&self, task_id: &str, by: &Actor) -> AdminOutcome {
        match self.change_by(task_id, TaskEvent::Cancel, by).await {
            Ok(_) => AdminOutcome::Cancelled,
            Err(EngineError::Transition(TransitionError::Terminal(status))) => AdminOutcome::AlreadyTerminal { status },
            Err(EngineError::Protocol(ProtocolError::TaskNotFound(_))) => AdminOutcome::NotFound,
            Err(e) => AdminOutcome::Failed { message: e.to_string() },
        }
    }

    /// Runs [`Engine::sweep`] every `sweep_interval` until the returned handle is aborted.
    pub fn spawn_sweeper(&self) -> tokio::task::JoinHandle<()> {
        self.spawn_sweeper_then(|_| {})
    }

    /// Like [`Engine::spawn_sweeper`], calling `after_each` after every sweep (bindings use it to
    /// stop the work of tasks the sweep expired).
    pub fn spawn_sweeper_then(
        &self,
        after_each: impl Fn(&SweepReport) + Send + 'static,
    ) -> tokio::task::JoinHandle<()> {
        let engine = self.clone();
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(engine.inner.config.sweep_interval);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tick.tick().await;
                match engine.sweep().await {
                    Ok(report) => after_each(&report),
                    Err(e) => tracing::error!(error = %e, "task sweep failed"),
                }
            }
        })
    }

    /// Checks the serialized size of `arguments` against the limit.
    pub fn check_arguments(&self, arguments: &serde_json::Map<String, Value>) -> Result<(), ProtocolError> {
        Limits::check("arguments", arguments, self.inner.config.limits.max_arguments_bytes)
    }

    /// Checks the serialized size of `inputResponses` (a `tasks/update` or an MRTR retry).
    pub fn check_input_responses(&self, responses: &InputResponses) -> Result<(), ProtocolError> {
        Limits::check("inputResponses", responses, self.inner.config.limits.max_input_responses_bytes)
    }
}

/// How many of an operator's many-task request's changes are in flight at once.
const ADMIN_IN_FLIGHT: usize = 64;

/// A notification subscription from [`Engine::subscribe`]; dropping it stops its queue
/// receiving changes.
pub struct Subscription {
    engine: Engine,
    principal: String,
    /// The ids the caller may see; only these are reported.
    pub accepted: Vec<String>,
    /// Accepted ids not yet reported terminal, sorted (looked up on every change).
    open: Vec<String>,
    /// The accepted tasks' states at subscription, last first.
    current: Vec<Arc<TaskRecord>>,
    queue: Arc<listeners::Queue>,
}

impl Subscription {
    /// The next state to report: first the current state of every accepted task, then each
    /// change. `None` once every accepted task is terminal and reported (or none was accepted).
    pub async fn next(&mut self) -> Option<DetailedTask> {
        std::future::poll_fn(|cx| self.poll_next(cx)).await
    }

    /// The next states as one piece of SSE text, each event framed by `frames`: waits for the
    /// first, then takes every state already waiting until the text reaches `max_bytes` (one
    /// state more can pass it). `None` once the stream is over, as [`Subscription::next`]. For a
    /// writer that pays per write or per call into it (a binding's event loop): a reader
    /// joining 20,000 tasks gets its first states in a few writes instead of 20,000.
    pub async fn next_events(
        &mut self,
        frames: &crate::protocol::server::ListenFrames,
        max_bytes: usize,
    ) -> Option<String> {
        use crate::protocol::server::sse_event;
        let first = self.next().await?;
        let mut text = sse_event(&frames.task(first));
        // A waker that does nothing: this look only takes what is already there. The next
        // `poll_next` with a real waker registers it before it looks, so no change is missed.
        let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
        while text.len() < max_bytes {
            match self.poll_next(&mut cx) {
                std::task::Poll::Ready(Some(task)) => text.push_str(&sse_event(&frames.task(task))),
                // The end (`Ready(None)`) is what the next call returns.
                _ => break,
            }
        }
        Some(text)
    }

    /// [`Subscription::next`] as a poll: `Pending` until the next state (the task of `cx` is
    /// woken then), for a stream or body that holds the subscription without a future.
    pub fn poll_next(&mut self, cx: &mut std::task::Context<'_>) -> std::task::Poll<Option<DetailedTask>> {
        use std::task::Poll;
        if let Some(task) = self.current.pop() {
            if self.current.is_empty() {
                self.current = Vec::new(); // its room is not kept for the stream's life
            }
            self.note_terminal(&task);
            return Poll::Ready(Some(task.to_detailed()));
        }
        loop {
            if self.open.is_empty() {
                return Poll::Ready(None);
            }
            let Poll::Ready(task) = self.queue.poll_pop(cx) else {
                return Poll::Pending;
            };
            if self.open.binary_search(&task.id).is_ok() && task.principal == self.principal {
                self.note_terminal(&task);
                return Poll::Ready(Some(task.to_detailed()));
            }
        }
    }

    fn note_terminal(&mut self, task: &TaskRecord) {
        if task.status.is_terminal()
            && let Ok(at) = self.open.binary_search(&task.id)
        {
            self.open.remove(at);
            self.engine.inner.listeners.unwatch(&task.id, &self.queue);
        }
    }
}

impl Drop for Subscription {
    fn drop(&mut self) {
        self.engine.inner.subscriptions.fetch_sub(1, std::sync::atomic::Ordering::Relaxed);
        for id in &self.open {
            self.engine.inner.listeners.unwatch(id, &self.queue);
        }
    }
}
