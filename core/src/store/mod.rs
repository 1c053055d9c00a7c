//! Durable task storage. [`TaskStore`] is async and speaks only [`TaskRecord`]s, so a networked
//! backend fits without changing the engine. Three backends ship here: [`SqliteStore`] (the
//! embedded default: a redo log in front of WAL group commits), `PostgresStore` (feature `postgres`: many workers share
//! tasks, with a change feed and worker leases) and [`MemoryStore`] (tests, and hosts that want
//! no durability).
//!
//! Every backend must hold three rules itself, not leave them to the engine: an insert is durable
//! when it returns (it survives at least a crash of the process); a terminal record never
//! changes (updates are compare-and-set on `version` and refused once the stored status is
//! terminal); and a task's history ([`TaskStore::history`]) is written with the record it
//! describes, in the same transaction, kept to the newest
//! [`HISTORY_LIMIT`](crate::protocol::history::HISTORY_LIMIT) entries, and deleted with its task.

#[cfg(feature = "store-contract")]
pub mod contract;
mod memory;
#[cfg(feature = "postgres")]
pub(crate) mod postgres;
#[cfg(feature = "postgres")]
mod postgres_tls;
#[cfg(feature = "sqlite")]
pub(crate) mod sqlite;

use std::sync::Arc;

use async_trait::async_trait;

pub use memory::MemoryStore;
#[cfg(feature = "postgres")]
pub use postgres::PostgresStore;
#[cfg(all(feature = "sqlite", feature = "fuzzing"))]
pub use sqlite::fuzz;
#[cfg(feature = "sqlite")]
pub use sqlite::{Durability, SqliteOptions, SqliteStore};

use crate::protocol::{HistoryEntry, TaskHistory, TaskRecord};

/// A record as stored by the SQL backends: its JSON.
#[cfg(any(feature = "sqlite", feature = "postgres"))]
pub(crate) fn encode(task: &TaskRecord) -> Vec<u8> {
    serde_json::to_vec(task).expect("task records serialize")
}

/// Reads a stored record; one that does not decode was changed by something else.
#[cfg(any(feature = "sqlite", feature = "postgres"))]
pub(crate) fn decode(id: &str, body: &[u8]) -> Result<TaskRecord, StoreError> {
    serde_json::from_slice(body).map_err(|e| StoreError::Corrupt { id: id.to_owned(), reason: e.to_string() })
}

/// A count or time as the SQL backends' signed 64-bit integers (saturating).
#[cfg(any(feature = "sqlite", feature = "postgres"))]
pub(crate) fn int(value: u64) -> i64 {
    i64::try_from(value).unwrap_or(i64::MAX)
}

/// The path and query of a `sqlite://` URL: what follows the scheme is the file's path, so
/// `sqlite://tasks.db` is relative to the working directory and `sqlite:///var/lib/tasks.db` absolute.
#[cfg(feature = "sqlite")]
pub(crate) fn sqlite_url(url: &str) -> Option<(&str, &str)> {
    let rest = url.strip_prefix("sqlite://")?;
    Some(rest.split_once('?').unwrap_or((rest, "")))
}

/// An operator's whole purge: [`TaskStore::purge_finished`] in batches until one comes back
/// short; returns how many tasks went.
pub(crate) async fn purge_all_finished(
    store: &dyn TaskStore,
    now_ms: u64,
    updated_before_ms: u64,
) -> Result<usize, StoreError> {
    let mut count = 0;
    loop {
        let n = store.purge_finished(now_ms, updated_before_ms, 4096).await?;
        count += n;
        if n < 4096 {
            return Ok(count);
        }
    }
}

/// Wraps a backend error.
#[cfg(any(feature = "sqlite", feature = "postgres"))]
pub(crate) fn backend(err: impl std::error::Error + Send + Sync + 'static) -> StoreError {
    StoreError::Backend(Box::new(err))
}

/// Opens the store a URL names: `memory://`; `sqlite:///path/to/tasks.db` (or a relative
/// `sqlite://tasks.db`) with optional `?durability=normal|full` (feature `sqlite`; `normal` is
/// the default, see [`Durability`]) and `history=on|off` (see [`SqliteOptions`]), joined by `&`;
/// `postgres://user:pass@host:port/db` (feature
/// `postgres`). The one place hosts and bindings turn a configured URL into a store.
pub async fn open(url: &str) -> Result<std::sync::Arc<dyn TaskStore>, StoreError> {
    if url == "memory://" {
        return Ok(std::sync::Arc::new(MemoryStore::new()));
    }
    #[cfg(feature = "sqlite")]
    if let Some((path, query)) = sqlite_url(url) {
        let mut options = SqliteOptions::default();
        for option in query.split('&').filter(|o| !o.is_empty()) {
            match option {
                "durability=full" => options.durability = Durability::Full,
                "durability=normal" => options.durability = Durability::Normal,
                "history=on" => options.history = true,
                "history=off" => options.history = false,
                "view_indexes=on" => options.view_indexes = true,
                "view_indexes=off" => options.view_indexes = false,
                _ => {
                    return Err(StoreError::InvalidUrl(format!(
                        "{url:?}: the options are durability=full|normal, history=on|off and view_indexes=on|off"
                    )));
                }
            }
        }
        let path = path.to_owned();
        let store = tokio::task::spawn_blocking(move || SqliteStore::open_with_options(path, options))
            .await
            .map_err(backend)??;
        return Ok(std::sync::Arc::new(store));
    }
    #[cfg(feature = "postgres")]
    if url.starts_with("postgres://") || url.starts_with("postgresql://") {
        return Ok(std::sync::Arc::new(PostgresStore::connect(url).await?));
    }
    Err(StoreError::InvalidUrl(format!("{url:?}: use memory://, sqlite:///path or postgres://...")))
}

/// Why a store operation failed.
#[non_exhaustive]
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The backend failed (IO, SQL, connection); the source says how.
    #[error("task store failed: {0}")]
    Backend(#[source] Box<dyn std::error::Error + Send + Sync>),
    /// A stored record could not be decoded; the database was changed by something else.
    #[error("stored task {id} is unreadable: {reason}")]
    Corrupt {
        /// The task id.
        id: String,
        /// What was wrong.
        reason: String,
    },
    /// Another process holds the store (an embedded SQLite file serves one host process).
    #[error("task store {0} is in use by another process")]
    Locked(String),
    /// An insert reused an existing id.
    #[error("task {0} already exists")]
    Duplicate(String),
    /// The store was shut down.
    #[error("task store is closed")]
    Closed,
    /// A store URL names no store this build can open.
    #[error("store URL {0}")]
    InvalidUrl(String),
    /// [`TaskStore::insert_within`] found the cap reached; nothing was written.
    #[error("{scope} cap of {limit} live tasks reached")]
    QuotaExceeded {
        /// Which cap.
        scope: crate::protocol::QuotaScope,
        /// Its value.
        limit: u64,
    },
}

/// Caps on live (`working` or `input_required`) tasks that a new task must stay within; `None`
/// is no cap.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LiveQuota {
    /// The most live tasks one principal may have.
    pub per_principal: Option<u64>,
    /// The most live tasks of every principal together.
    pub total: Option<u64>,
}

impl LiveQuota {
    /// True when either cap is set.
    pub fn is_set(&self) -> bool {
        self.per_principal.is_some() || self.total.is_some()
    }

    /// The first cap that `principal_live` (the principal's live tasks) and `total_live` reach.
    pub fn reached(&self, principal_live: u64, total_live: u64) -> Option<(crate::protocol::QuotaScope, u64)> {
        use crate::protocol::QuotaScope;
        if let Some(limit) = self.total.filter(|limit| total_live >= *limit) {
            return Some((QuotaScope::Server, limit));
        }
        self.per_principal.filter(|limit| principal_live >= *limit).map(|limit| (QuotaScope::Principal, limit))
    }
}

/// The outcome of a compare-and-set update.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UpdateOutcome {
    /// The record was written.
    Written,
    /// The stored version differed from the expected one, the stored record is terminal, or it
    /// is gone; nothing was written.
    Conflict,
}

/// An operator's request (`mcp-tasks cancel|purge` on a store that a live host process owns),
/// queued in the store for that process's engine, which applies it at its next sweep.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AdminRequest {
    /// The request's sequence number in the store.
    pub seq: u64,
    /// What to do.
    pub action: AdminAction,
}

/// What an operator asked for.
#[non_exhaustive]
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(tag = "action", rename_all = "snake_case")]
pub enum AdminAction {
    /// Cancel one task, as `tasks/cancel` would (its work's cancellation token fires).
    Cancel {
        /// The task.
        task_id: String,
        /// Who asked, as the task's history records it (requests queued by an older CLI have
        /// none: see [`Actor::operator`](crate::protocol::Actor::operator)).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        operator: Option<String>,
    },
    /// Delete terminal tasks whose TTL ended, or that last changed at or before `updated_before_ms`.
    Purge {
        /// Unix ms: terminal tasks last changed at or before it go.
        updated_before_ms: u64,
    },
    /// Delete the named tasks that are terminal (the web view's purge of chosen tasks).
    PurgeTasks {
        /// The tasks; a live or unknown one is left alone.
        task_ids: Vec<String>,
    },
    /// Cancel each of the named tasks, as `tasks/cancel` would, in one request (the web view's
    /// cancel of a selection): answered with [`AdminOutcome::Each`].
    CancelTasks {
        /// The tasks, in the order the outcome lists them.
        task_ids: Vec<String>,
        /// Who asked, as each task's history records it.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        operator: Option<String>,
    },
}

/// How an [`AdminRequest`] ended.
#[non_exhaustive]
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum AdminOutcome {
    /// The task was cancelled (it was `working` or `input_required`).
    Cancelled,
    /// The task was terminal already and stays as it was.
    AlreadyTerminal {
        /// Its status.
        status: crate::protocol::TaskStatus,
    },
    /// No such task.
    NotFound,
    /// A purge deleted this many tasks.
    Purged {
        /// How many.
        count: usize,
    },
    /// The request could not be applied; the message says why.
    Failed {
        /// Why.
        message: String,
    },
    /// What a request naming many tasks did to each, in the order it named them.
    Each {
        /// One outcome a task.
        tasks: Vec<TaskResult>,
    },
}

/// What an operator's action did to one task it named.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct TaskResult {
    /// The task.
    pub task_id: String,
    /// What became of it.
    #[serde(flatten)]
    pub outcome: TaskOutcome,
}

/// What an operator's cancel or purge did to one task.
#[non_exhaustive]
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum TaskOutcome {
    /// Cancelled (it was `working` or `input_required`).
    Cancelled,
    /// Deleted with its history (it was terminal).
    Purged,
    /// A cancel found it terminal already; it stays as it was.
    AlreadyTerminal {
        /// Its status.
        status: crate::protocol::TaskStatus,
    },
    /// A purge found it unfinished and left it alone.
    Unfinished {
        /// Its status.
        status: crate::protocol::TaskStatus,
    },
    /// No such task (or none the operator may see).
    NotFound,
    /// It could not be changed; the message says why.
    Failed {
        /// Why.
        message: String,
    },
}

impl TaskOutcome {
    /// True when the action changed the task.
    pub fn changed(&self) -> bool {
        matches!(self, Self::Cancelled | Self::Purged)
    }

    /// The outcome of one task's cancel, from the single-task form.
    pub fn of_cancel(outcome: AdminOutcome) -> Self {
        match outcome {
            AdminOutcome::Cancelled => Self::Cancelled,
            AdminOutcome::AlreadyTerminal { status } => Self::AlreadyTerminal { status },
            AdminOutcome::NotFound => Self::NotFound,
            AdminOutcome::Failed { message } => Self::Failed { message },
            other => Self::Failed { message: format!("unexpected outcome {other:?}") },
        }
    }
}

/// What [`TaskStore::claim`] calls on each task it may take: the claimed record and the history
/// entries of the claim, or `None` to leave the task.
pub type Claim<'a> = dyn for<'r> Fn(&'r TaskRecord) -> Option<(TaskRecord, Vec<HistoryEntry>)> + Send + Sync + 'a;

/// Durable storage of task records.
#[async_trait]
pub trait TaskStore: Send + Sync + 'static {
    /// Stores a new task, its history starting with [`HistoryEntry::created`]. Returns only once
    /// the task survives this process dying (at least) and every later `get` through this store,
    /// or any store sharing the data, finds it. Records come in an `Arc` so a store that keeps
    /// them in memory shares them instead of copying.
    async fn insert(&self, task: &Arc<TaskRecord>) -> Result<(), StoreError>;

    /// Stores a new task unless its principal, or the store as a whole, already has as many live
    /// tasks as `quota` allows ([`StoreError::QuotaExceeded`], nothing written). The engine
    /// calls it on a [shared](TaskStore::shared) store, where other processes create tasks too,
    /// so it must count and insert as one step against them (the PostgreSQL store locks the cap
    /// for the transaction); on a store only one engine writes, the engine counts its own tasks
    /// and calls [`TaskStore::insert`]. This default counts with [`TaskStore::unfinished`] and
    /// is not atomic across processes: a shared store should replace it.
    async fn insert_within(&self, task: &Arc<TaskRecord>, quota: LiveQuota) -> Result<(), StoreError> {
        if quota.is_set() {
            let live = self.unfinished(None, usize::MAX).await?;
            let own = live.iter().filter(|t| t.principal == task.principal).count() as u64;
            if let Some((scope, limit)) = quota.reached(own, live.len() as u64) {
                return Err(StoreError::QuotaExceeded { scope, limit });
            }
        }
        self.insert(task).await
    }

    /// Reads a task by id.
    async fn get(&self, id: &str) -> Result<Option<TaskRecord>, StoreError>;

    /// Unfinished tasks that wait for a worker ([`TaskRecord::is_waiting`]), oldest first, at
    /// most `limit`. This default scans [`TaskStore::unfinished`].
    async fn waiting(&self, limit: usize) -> Result<Vec<TaskRecord>, StoreError> {
        let mut waiting: Vec<TaskRecord> =
            self.unfinished(None, usize::MAX).await?.into_iter().filter(TaskRecord::is_waiting).collect();
        waiting.sort_by_key(|t| (t.runnable_at_ms, t.created_at_ms));
        waiting.truncate(limit);
        Ok(waiting)
    }

    /// Takes up to `limit` tasks of the tools in `tools` that wait for a worker and are
    /// runnable at `now_ms`: `claim` turns each into the claimed record and its history entries
    /// (the engine applies [`TaskEvent::Claim`](crate::protocol::TaskEvent::Claim) through the
    /// transition function) or `None` to leave it, and each is written with compare-and-set, so two claimers never
    /// both take one task. Returns the records written. This default reads
    /// [`TaskStore::waiting`] and updates them one at a time; the PostgreSQL store locks the
    /// rows it takes (`FOR UPDATE SKIP LOCKED`), so workers claiming at once take different ones.
    async fn claim(
        &self,
        now_ms: u64,
        tools: &[String],
        limit: usize,
        claim: &Claim<'_>,
    ) -> Result<Vec<Arc<TaskRecord>>, StoreError> {
        let mut claimed = Vec::new();
        for task in self.waiting(usize::MAX).await? {
            if claimed.len() >= limit {
                break;
            }
            if !task.is_runnable(now_ms) || !tools.contains(&task.tool) {
                continue;
            }
            let Some((next, history)) = claim(&task) else { continue };
            let next = Arc::new(next);
            if self.update(&next, task.version, &history).await? == UpdateOutcome::Written {
                claimed.push(next);
            }
        }
        Ok(claimed)
    }

    /// Replaces a task if the stored `version` equals `expected_version` and the stored status is
    /// not terminal, appending `history` (what the change did, from
    /// [`Applied::history`](crate::protocol::task::Applied::history)) to the task's history in
    /// the same transaction: both are written or neither.
    async fn update(
        &self,
        task: &Arc<TaskRecord>,
        expected_version: u64,
        history: &[HistoryEntry],
    ) -> Result<UpdateOutcome, StoreError>;

    /// A task's history, oldest first: its newest entries and how many older ones were dropped.
    /// Empty for an unknown task, and for one stored before this store kept histories.
    async fn history(&self, id: &str) -> Result<TaskHistory, StoreError>;

    /// Non-terminal tasks, optionally only those of one owner, at most `limit`.
    async fn unfinished(&self, owner: Option<&str>, limit: usize) -> Result<Vec<TaskRecord>, StoreError>;

    /// Non-terminal tasks whose TTL ended at or before `now_ms`, at most `limit`.
    async fn expired_unfinished(&self, now_ms: u64, limit: usize) -> Result<Vec<TaskRecord>, StoreError>;

    /// Deletes up to `limit` tasks whose TTL ended at or before `before_ms`; returns how many.
    async fn purge(&self, before_ms: u64, limit: usize) -> Result<usize, StoreError>;

    /// How many tasks are stored.
    async fn count(&self) -> Result<u64, StoreError>;

    /// Deletes up to `limit` terminal tasks whose TTL ended at or before `now_ms` or that last
    /// changed at or before `updated_before_ms` (an operator's purge); returns how many. Never
    /// touches a task that is still `working` or `input_required`. This default refuses.
    async fn purge_finished(&self, _now_ms: u64, _updated_before_ms: u64, _limit: usize) -> Result<usize, StoreError> {
        Err(StoreError::Backend("this store does not support operator purges".into()))
    }

    /// Deletes those of `ids` that are terminal (an operator's purge of chosen tasks); returns
    /// how many went. Never touches a task that is still `working` or `input_required`, nor an
    /// unknown id. This default refuses.
    async fn purge_tasks(&self, _ids: &[String]) -> Result<usize, StoreError> {
        Err(StoreError::Backend("this store does not support operator purges".into()))
    }

    /// Operator requests waiting for the engine that owns this store, oldest first, at most
    /// `limit` (the SQLite store, which one host process owns; none otherwise).
    async fn admin_requests(&self, _limit: usize) -> Result<Vec<AdminRequest>, StoreError> {
        Ok(Vec::new())
    }

    /// Records how the engine applied operator request `seq`.
    async fn finish_admin_request(&self, _seq: u64, _outcome: &AdminOutcome) -> Result<(), StoreError> {
        Ok(())
    }

    /// True when other processes write this store too. The engine then does not fail every
    /// unfinished task at start-up; worker leases decide which tasks are orphans.
    fn shared(&self) -> bool {
        false
    }

    /// Ids of tasks changed by any process (a shared store's change feed), or `None`.
    fn changes(&self) -> Option<tokio::sync::broadcast::Receiver<String>> {
        None
    }

    /// Records that worker `owner` is alive until `until_ms` (shared stores; a no-op otherwise).
    async fn renew_lease(&self, _owner: &str, _until_ms: u64) -> Result<(), StoreError> {
        Ok(())
    }

    /// Unfinished tasks whose owner holds no live lease at `now_ms`, at most `limit` (shared
    /// stores; none otherwise). Tasks that wait for a worker have no owner and are not orphans.
    async fn orphaned(&self, _now_ms: u64, _limit: usize) -> Result<Vec<TaskRecord>, StoreError> {
        Ok(Vec::new())
    }
}
