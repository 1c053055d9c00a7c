//! The executor seam: where the engine hands over tasks that wait for a worker.
//!
//! A task waits for a worker when it was created for separate workers
//! ([`Engine::enqueue_task`]) or when it is resumable and the worker running it died (found at
//! the next start on SQLite, or when the worker's lease lapsed on PostgreSQL). An [`Executor`]
//! runs the tool code of some tools; [`Engine::spawn_executor`] claims every runnable task of
//! those tools (compare-and-set through the transition function, so two workers never run the
//! same attempt) and hands each to [`Executor::execute`] as a [`ClaimedTask`]. The host's tools
//! are one executor; a job system of your own is another: implement the trait, finish each task
//! through its context, and the engine keeps the protocol, the store and the notifications.

use std::sync::Arc;

use super::{Engine, TaskContext};
use crate::protocol::{StoredCall, TaskEvent, TaskRecord};
use crate::store::StoreError;

/// Where a server runs the work of the tasks it creates. As JSON (an adapter's option):
/// `"local"` or `"workers"`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Execution {
    /// In this process, as each task is created (the default).
    #[default]
    Local,
    /// On separate worker processes: the server stores each task with its call
    /// ([`Engine::enqueue_task`]) and answers; a worker running an [`Executor`] for the same
    /// tools over the same shared store claims and runs it. Cancels, input requests and answers
    /// cross through the store.
    Workers,
}

/// Runs the work of claimed tasks.
pub trait Executor: Send + Sync + 'static {
    /// The tools whose tasks this executor runs; the engine claims only tasks of these.
    fn tools(&self) -> Vec<String>;

    /// Starts the work of a claimed task and returns without waiting for it (spawn it). The
    /// work finishes the task through `task.context` exactly as the work of a task created here
    /// does; dropping the context unfinished fails the task (a resumable one waits for its next
    /// attempt). The attempt number and the saved checkpoint are the context's
    /// ([`TaskHandle::attempt`](super::TaskHandle::attempt),
    /// [`TaskHandle::saved_checkpoint`](super::TaskHandle::saved_checkpoint)).
    fn execute(&self, task: ClaimedTask);
}

/// A task this process claimed: the context its work uses, and what the work needs to run
/// (again).
pub struct ClaimedTask {
    /// The work's handle on the task.
    pub context: TaskContext,
    /// The tool to run.
    pub tool: String,
    /// The caller the task is bound to.
    pub principal: String,
    /// The call as the client made it.
    pub call: StoredCall,
}

impl std::fmt::Debug for ClaimedTask {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClaimedTask")
            .field("task_id", &self.context.task_id())
            .field("tool", &self.tool)
            .field("attempt", &self.context.attempt())
            .finish_non_exhaustive()
    }
}

/// How many tasks one claim takes at most; a full batch is followed by another at once.
const CLAIM_BATCH: usize = 64;

impl Engine {
    /// One look for work: claims every task of `executor`'s tools that waits for a worker and
    /// is runnable now, and hands each to it. Returns how many it claimed.
    pub async fn claim_for(&self, executor: &dyn Executor) -> Result<usize, StoreError> {
        let tools = executor.tools();
        // On a store only this engine writes, every waiting task is one it knows of (enqueued
        // here, or released at start-up): with none, there is nothing to ask the store.
        if tools.is_empty() || (!self.inner.store.shared() && self.inner.live.lock().waiting.is_empty()) {
            return Ok(0);
        }
        let owner = self.inner.owner.clone();
        let mut total = 0;
        loop {
            let now = self.inner.clock.now_ms();
            let claim = |task: &TaskRecord| {
                let mut next = task.clone();
                let applied = next.apply(now, TaskEvent::Claim { owner: owner.clone() }).ok()?;
                Some((next, applied.history))
            };
            let claimed = self.inner.store.claim(now, &tools, CLAIM_BATCH, &claim).await?;
            let n = claimed.len();
            for record in claimed {
                tracing::info!(task_id = %record.id, tool = %record.tool, attempt = record.attempt, "task claimed");
                self.inner.metrics.claimed(&record);
                executor.execute(self.adopt_claimed(record));
            }
            total += n;
            if n < CLAIM_BATCH {
                return Ok(total);
            }
        }
    }

    /// Makes a claimed task live here, as a created one is.
    fn adopt_claimed(&self, record: Arc<TaskRecord>) -> ClaimedTask {
        let live = Self::new_live(Arc::clone(&record));
        {
            let mut set = self.inner.live.lock();
            if !set.unwait(&record.id) {
                set.adopt(&record.principal);
            }
            set.tasks.insert(Arc::clone(&live.id), Arc::clone(&live));
        }
        self.inner.listeners.publish(&record);
        let call = record.call.as_deref().cloned().unwrap_or_default();
        // The stored call's envelope is the creating request's: input is checked against it.
        let envelope = call.envelope.clone().map(|e| self.share_envelope(e));
        ClaimedTask {
            context: TaskContext::new(self.clone(), live, envelope),
            tool: record.tool.clone(),
            principal: record.principal.clone(),
            call,
        }
    }

    /// Runs `executor` until the returned handle is aborted: claims at once, then whenever this
    /// process makes a task wait for a worker, and every `claim_interval` (tasks other
    /// processes enqueued or released, backoffs that ended).
    pub fn spawn_executor(&self, executor: Arc<dyn Executor>) -> tokio::task::JoinHandle<()> {
        let engine = self.clone();
        tokio::spawn(async move {
            loop {
                if let Err(e) = engine.claim_for(executor.as_ref()).await {
                    tracing::error!(error = %e, "claiming tasks failed");
                }
                tokio::select! {
                    () = engine.inner.runnable.notified() => {}
                    () = tokio::time::sleep(engine.inner.config.claim_interval) => {}
                }
            }
        })
    }
}
