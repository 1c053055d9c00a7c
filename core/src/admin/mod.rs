//! Operating a task store from outside its servers: list, show, cancel, purge, tail and stats
//! over a store URL (`sqlite:///path/tasks.db`, `postgres://...`). The `mcp-tasks` admin CLI
//! (`core/cli`) and `python -m mcp_tasks` are this module with argument parsing and printing.
//!
//! Safe on a live store:
//! - **Reads never block a server.** On SQLite they use a connection of their own (WAL: readers
//!   and the host's writer never wait for each other) and see what the host has committed; its
//!   group commits follow an acknowledged write by milliseconds. On PostgreSQL they are plain
//!   queries.
//! - **Writes go through the same rules as the servers'.** A cancel is the transition function's
//!   `Cancel` applied with a compare-and-set on the record's version, so a terminal task stays as
//!   it is; a purge deletes terminal tasks only. On a SQLite file that a live host process owns,
//!   the admin never writes a task itself: it queues the request in the store, and that host's
//!   engine applies it at its next sweep (every second by default), so the work's cancellation
//!   token fires and listeners hear the change. With no live host, the admin opens the store
//!   itself (replaying the redo log a dead host left) and applies the request. On PostgreSQL the
//!   compare-and-set update fires the change trigger every worker listens to, so the worker
//!   running the task stops its work.

pub mod query;
mod sessions;

pub use sessions::Session;

use std::collections::HashMap;
use std::fs::File;
use std::io::Read as _;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use rusqlite::{Connection, OpenFlags, params_from_iter};

use crate::protocol::{Actor, TaskEvent, TaskHistory, TaskRecord, TaskStatus, TransitionError};
use crate::store::sqlite::{admin_outcome, enqueue_admin};
use crate::store::{
    AdminAction, AdminOutcome, SqliteStore, StoreError, TaskOutcome, TaskResult, TaskStore, UpdateOutcome, int,
};

/// Why an admin operation failed. Nothing was changed.
#[non_exhaustive]
#[derive(Debug, thiserror::Error)]
pub enum AdminError {
    /// The URL names no store this build can operate.
    #[error("store URL {0}")]
    InvalidUrl(String),
    /// The SQLite file does not exist.
    #[error("no task store at {0}: the file does not exist")]
    NoStore(PathBuf),
    /// The database holds no mcp-tasks tables.
    #[error("{0} is not an mcp-tasks store: it has no tasks table (no mcp-tasks server has used it)")]
    NotAStore(String),
    /// The SQLite file stayed locked past the busy timeout.
    #[error("{path} is locked{}", holder_text(*.pid))]
    Locked {
        /// The file.
        path: PathBuf,
        /// The process that holds it, when its lock file names one.
        pid: Option<u32>,
    },
    /// An argument was refused; the message says which and why.
    #[error("{0}")]
    InvalidArgument(String),
    /// The store failed; the source says how.
    #[error(transparent)]
    Store(#[from] StoreError),
}

fn holder_text(pid: Option<u32>) -> String {
    match pid {
        Some(pid) => format!(" by process {pid} (the mcp-tasks host that owns it)"),
        None => " by another process".to_owned(),
    }
}

impl From<rusqlite::Error> for AdminError {
    fn from(e: rusqlite::Error) -> Self {
        Self::Store(StoreError::Backend(Box::new(e)))
    }
}

/// Which tasks `list` shows; every set field must match.
#[derive(Clone, Debug, Default)]
pub struct ListFilter {
    /// Only this status.
    pub status: Option<TaskStatus>,
    /// Only this tool.
    pub tool: Option<String>,
    /// Only this principal.
    pub principal: Option<String>,
    /// Only tasks created at or before this time (Unix ms): older than an age.
    pub created_before_ms: Option<u64>,
    /// Only tasks created at or after this time (Unix ms): younger than an age.
    pub created_after_ms: Option<u64>,
    /// At most this many, newest first (`None`: all).
    pub limit: Option<usize>,
}

/// How many tasks of one tool are in one status.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct StatusCount {
    /// The status.
    pub status: String,
    /// The tool.
    pub tool: String,
    /// How many.
    pub count: u64,
}

/// What became of a cancel or purge.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Applied {
    /// Applied (by the admin itself, or by the live host it was queued for).
    Done(AdminOutcome),
    /// Queued for the live host process `pid`, which had not applied it within the wait; it
    /// applies it at its next sweep.
    Queued {
        /// The request's sequence number.
        seq: u64,
        /// The host process.
        pid: Option<u32>,
    },
}

/// One change `tail` reports.
#[derive(Clone, Debug)]
pub enum Change {
    /// A task's new state.
    Task(Box<TaskRecord>),
    /// A task that was being followed is gone (purged).
    Gone(String),
}

/// A store opened for operating it.
pub struct Admin {
    backend: Backend,
    /// How long a cancel or purge queued for a live SQLite host waits for its outcome.
    wait: Duration,
    /// Who the operator is, as a cancel's history entry names them.
    operator: Option<String>,
    /// Changes this admin made itself (a SQLite connection does not see its own writes in
    /// `data_version`), for [`Admin::change_mark`].
    own_writes: std::sync::atomic::AtomicU64,
    /// True once the web view's sessions table is known to exist.
    sessions_ready: std::sync::atomic::AtomicBool,
    /// PostgreSQL: the change feed [`Admin::change_mark`] counts, started at its first call.
    #[cfg(feature = "postgres")]
    feed: tokio::sync::Mutex<Option<Arc<Feed>>>,
}

/// A count of the PostgreSQL change feed's notifications, fed by a task of its own.
#[cfg(feature = "postgres")]
struct Feed {
    count: Arc<std::sync::atomic::AtomicU64>,
    /// False once the feed's connection ended: the next look starts another.
    alive: Arc<std::sync::atomic::AtomicBool>,
    task: tokio::task::JoinHandle<()>,
}

#[cfg(feature = "postgres")]
impl Drop for Feed {
    fn drop(&mut self) {
        self.task.abort();
    }
}

enum Backend {
    Sqlite(SqliteAdmin),
    #[cfg(feature = "postgres")]
    Postgres {
        store: Box<crate::store::PostgresStore>,
        url: String,
    },
}

impl std::fmt::Debug for Admin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let kind = match &self.backend {
            Backend::Sqlite(s) => format!("sqlite {}", s.path.display()),
            #[cfg(feature = "postgres")]
            Backend::Postgres { .. } => "postgres".to_owned(),
        };
        f.debug_struct("Admin").field("store", &kind).finish_non_exhaustive()
    }
}

impl Admin {
    /// Opens the store `url` names for operating it, without creating anything: a missing
    /// SQLite file, or a database no server has used, is an error.
    pub async fn open(url: &str) -> Result<Self, AdminError> {
        let wait = Duration::from_secs(10);
        if let Some((path, _query)) = crate::store::sqlite_url(url) {
            let path = PathBuf::from(path);
            let admin = tokio::task::spawn_blocking(move || SqliteAdmin::open(path))
                .await
                .map_err(|e| StoreError::Backend(Box::new(e)))??;
            return Ok(Self::with_backend(Backend::Sqlite(admin), wait));
        }
        if url.starts_with("postgres://") || url.starts_with("postgresql://") {
            #[cfg(feature = "postgres")]
            {
                if !crate::store::postgres::has_tables(url).await? {
                    return Err(AdminError::NotAStore("the PostgreSQL database".to_owned()));
                }
                let store = Box::new(crate::store::PostgresStore::connect(url).await?);
                return Ok(Self::with_backend(Backend::Postgres { store, url: url.to_owned() }, wait));
            }
            #[cfg(not(feature = "postgres"))]
            return Err(AdminError::InvalidUrl(format!("{url:?}: this build has no PostgreSQL support")));
        }
        if url == "memory://" {
            return Err(AdminError::InvalidUrl(
                "\"memory://\": a memory store lives inside its server process; nothing outside it can see it".into(),
            ));
        }
        Err(AdminError::InvalidUrl(format!("{url:?}: use sqlite:///path/to/tasks.db or postgres://user@host/db")))
    }

    fn with_backend(backend: Backend, wait: Duration) -> Self {
        Self {
            backend,
            wait,
            operator: None,
            own_writes: std::sync::atomic::AtomicU64::new(0),
            sessions_ready: std::sync::atomic::AtomicBool::new(false),
            #[cfg(feature = "postgres")]
            feed: tokio::sync::Mutex::new(None),
        }
    }

    /// A number that changes when any process creates, changes or deletes a task (and may change
    /// for other writes to the store): what a view polls to know it should read again, at a cost
    /// that does not grow with the store or its rate of changes. On SQLite it is the file's
    /// `PRAGMA data_version` (one look at shared memory) plus this admin's own writes; on
    /// PostgreSQL a count of the change feed's notifications, fed by a `LISTEN` connection
    /// started at the first call (a task deleted by another process shows at the next change).
    pub async fn change_mark(&self) -> Result<u64, AdminError> {
        use std::sync::atomic::Ordering::Relaxed;
        let own = self.own_writes.load(Relaxed);
        match &self.backend {
            Backend::Sqlite(s) => {
                let version = s
                    .blocking(|s| {
                        let conn = s.conn.lock();
                        conn.query_row("PRAGMA data_version", [], |row| row.get::<_, i64>(0)).map_err(|e| s.map_busy(e))
                    })
                    .await?;
                Ok(u64::try_from(version).unwrap_or(0).wrapping_add(own.wrapping_mul(1 << 32)))
            }
            #[cfg(feature = "postgres")]
            Backend::Postgres { url, .. } => {
                let mut slot = self.feed.lock().await;
                let feed = match slot.as_ref() {
                    Some(feed) if feed.alive.load(Relaxed) => Arc::clone(feed),
                    _ => {
                        // A new feed counts from where the last one stopped, plus one: what
                        // happened while none listened is taken as a change.
                        let base = slot.as_ref().map_or(0, |f| f.count.load(Relaxed) + 1);
                        let feed = start_feed(url, base).await?;
                        *slot = Some(Arc::clone(&feed));
                        feed
                    }
                };
                Ok(feed.count.load(Relaxed).wrapping_add(own.wrapping_mul(1 << 32)))
            }
        }
    }

    /// Runs the query `build` writes in this store's SQL and reads each row it answers with
    /// `sqlite_row` or `postgres_row`: the view's queries, on either store.
    async fn rows<T: Send + 'static>(
        &self,
        build: impl Fn(query::Dialect) -> query::Sql,
        sqlite_row: fn(&rusqlite::Row<'_>) -> rusqlite::Result<T>,
        #[cfg(feature = "postgres")] postgres_row: fn(&tokio_postgres::Row) -> T,
    ) -> Result<Vec<T>, AdminError> {
        match &self.backend {
            Backend::Sqlite(s) => {
                let sql = build(query::SQLITE);
                s.blocking(move |s| {
                    let conn = s.conn.lock();
                    let mut stmt = conn.prepare(&sql.text).map_err(|e| s.map_busy(e))?;
                    let rows = stmt
                        .query_map(params_from_iter(sqlite_values(&sql.values)), sqlite_row)
                        .and_then(|rows| rows.collect::<Result<Vec<_>, _>>())
                        .map_err(|e| s.map_busy(e))?;
                    Ok(rows)
                })
                .await
            }
            #[cfg(feature = "postgres")]
            Backend::Postgres { store, .. } => {
                let sql = build(query::POSTGRES);
                let values = postgres_values(&sql.values);
                let client = store.client().await?;
                let rows = client
                    .query(&sql.text, &postgres_params(&values))
                    .await
                    .map_err(|e| StoreError::Backend(Box::new(e)))?;
                Ok(rows.iter().map(postgres_row).collect())
            }
        }
    }

    fn wrote(&self) {
        self.own_writes.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }

    /// Sets how long a cancel or purge queued for a live SQLite host waits for its outcome
    /// (default 10 s; zero returns [`Applied::Queued`] at once).
    pub fn with_wait(mut self, wait: Duration) -> Self {
        self.wait = wait;
        self
    }

    /// Names the operator whose cancels these are, for the tasks' histories (default
    /// `"operator"`).
    pub fn with_operator(mut self, name: impl Into<String>) -> Self {
        self.operator = Some(name.into());
        self
    }

    /// The tasks `filter` selects, newest first (ids start with their creation time).
    pub async fn list(&self, filter: &ListFilter) -> Result<Vec<TaskRecord>, AdminError> {
        match &self.backend {
            Backend::Sqlite(s) => {
                let filter = filter.clone();
                s.blocking(move |s| s.list(&filter)).await
            }
            #[cfg(feature = "postgres")]
            Backend::Postgres { store, .. } => postgres_list(store, filter).await,
        }
    }

    /// One task, as stored.
    pub async fn show(&self, id: &str) -> Result<Option<TaskRecord>, AdminError> {
        match &self.backend {
            Backend::Sqlite(s) => {
                let id = id.to_owned();
                s.blocking(move |s| s.get(&id)).await
            }
            #[cfg(feature = "postgres")]
            Backend::Postgres { store, .. } => Ok(store.get(id).await?),
        }
    }

    /// A task's history, oldest first (empty for an unknown task, or one stored before the
    /// store kept histories).
    pub async fn history(&self, id: &str) -> Result<TaskHistory, AdminError> {
        match &self.backend {
            Backend::Sqlite(s) => {
                let id = id.to_owned();
                s.blocking(move |s| s.history(&id)).await
            }
            #[cfg(feature = "postgres")]
            Backend::Postgres { store, .. } => Ok(store.history(id).await?),
        }
    }

    /// A page of the tasks `query` selects, newest change first (the web view's list).
    pub async fn page(&self, query: &query::TaskQuery) -> Result<query::TaskPage, AdminError> {
        let now = crate::clock::Clock::now_ms(&crate::clock::SystemClock);
        let tasks = match &self.backend {
            Backend::Sqlite(s) => {
                let sql = query::page(query::SQLITE, query, now);
                s.blocking(move |s| s.records(&sql.text, &sqlite_values(&sql.values))).await?
            }
            #[cfg(feature = "postgres")]
            Backend::Postgres { store, .. } => {
                let sql = query::page(query::POSTGRES, query, now);
                let values = postgres_values(&sql.values);
                store.records(&sql.text, &postgres_params(&values)).await?
            }
        };
        Ok(query::read_page(tasks, query))
    }

    /// The counts a list page shows: tasks per status and those expiring within the hour, over
    /// the principals `query` limits the viewer to.
    pub async fn overview(&self, query: &query::TaskQuery) -> Result<query::Overview, AdminError> {
        let now = crate::clock::Clock::now_ms(&crate::clock::SystemClock);
        let rows = self
            .rows(
                |dialect| query::overview(dialect, query, now),
                |row| Ok((row.get(0)?, row.get(1)?)),
                #[cfg(feature = "postgres")]
                |row| (row.get(0), row.get(1)),
            )
            .await?;
        Ok(query::read_overview(rows))
    }

    /// Tasks created, completed, failed and cancelled in each minute of the hour before `now_ms`,
    /// among those of `principals` (`None`: every task): the web view's chart.
    pub async fn activity(&self, principals: Option<&[String]>, now_ms: u64) -> Result<query::Activity, AdminError> {
        let since = (now_ms / 60_000 + 1).saturating_sub(query::ACTIVITY_MINUTES as u64) * 60_000;
        let rows = self
            .rows(
                |dialect| query::activity(dialect, principals, since, now_ms),
                |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?)),
                #[cfg(feature = "postgres")]
                |row| (row.get(0), row.get(1), row.get(2)),
            )
            .await?;
        Ok(query::read_activity(rows, now_ms))
    }

    /// Task counts by status and tool.
    pub async fn stats(&self) -> Result<Vec<StatusCount>, AdminError> {
        match &self.backend {
            Backend::Sqlite(s) => s.blocking(SqliteAdmin::stats).await,
            #[cfg(feature = "postgres")]
            Backend::Postgres { store, .. } => {
                let client = store.client().await?;
                let rows = client
                    .query(
                        "SELECT status, convert_from(body, 'UTF8')::jsonb->>'tool', count(*) FROM mcp_tasks \
                         GROUP BY 1, 2 ORDER BY 1, 2",
                        &[],
                    )
                    .await
                    .map_err(|e| StoreError::Backend(Box::new(e)))?;
                Ok(rows
                    .iter()
                    .map(|row| StatusCount {
                        status: row.get(0),
                        tool: row.get::<_, Option<String>>(1).unwrap_or_default(),
                        count: u64::try_from(row.get::<_, i64>(2)).unwrap_or(0),
                    })
                    .collect())
            }
        }
    }

    /// Cancels task `id` as `tasks/cancel` would (see the module docs for how, per store).
    pub async fn cancel(&self, id: &str) -> Result<Applied, AdminError> {
        self.cancel_by(id, self.operator.clone()).await
    }

    /// [`Admin::cancel`] asked for by operator `operator` (the web view's signed-in operator).
    pub async fn cancel_as(&self, id: &str, operator: &str) -> Result<Applied, AdminError> {
        self.cancel_by(id, Some(operator.to_owned())).await
    }

    async fn cancel_by(&self, id: &str, operator: Option<String>) -> Result<Applied, AdminError> {
        let action = AdminAction::Cancel { task_id: id.to_owned(), operator: operator.clone() };
        self.wrote();
        match &self.backend {
            Backend::Sqlite(s) => s.apply(action, self.wait).await,
            #[cfg(feature = "postgres")]
            Backend::Postgres { store, .. } => {
                Ok(Applied::Done(direct_cancel(store.as_ref(), id, operator.as_deref()).await?))
            }
        }
    }

    /// Cancels each of `ids` as operator `operator`, in one request (queued as one for a live
    /// SQLite host, which applies them together; applied here otherwise): the outcome is
    /// [`AdminOutcome::Each`], one typed outcome a task in the order named, and each task's
    /// history names the operator.
    pub async fn cancel_tasks(&self, ids: &[String], operator: &str) -> Result<Applied, AdminError> {
        let action = AdminAction::CancelTasks { task_ids: ids.to_vec(), operator: Some(operator.to_owned()) };
        self.wrote();
        match &self.backend {
            Backend::Sqlite(s) => s.apply(action, self.wait).await,
            #[cfg(feature = "postgres")]
            Backend::Postgres { store, .. } => Ok(Applied::Done(direct_cancel_each(store.as_ref(), &action).await?)),
        }
    }

    /// Purges those of `ids` that are terminal (as [`Admin::purge_tasks`], in one request) and
    /// says what became of each: [`AdminOutcome::Each`] in the order named.
    pub async fn purge_each(&self, ids: &[String]) -> Result<Applied, AdminError> {
        let before: HashMap<String, TaskStatus> =
            self.show_many(ids).await?.into_iter().map(|t| (t.id, t.status)).collect();
        let finished: Vec<String> =
            ids.iter().filter(|id| before.get(*id).is_some_and(|s| s.is_terminal())).cloned().collect();
        if !finished.is_empty() {
            match self.purge_tasks(&finished).await? {
                Applied::Done(AdminOutcome::Failed { message }) => {
                    return Ok(Applied::Done(AdminOutcome::Failed { message }));
                }
                Applied::Done(_) => {}
                queued @ Applied::Queued { .. } => return Ok(queued),
            }
        }
        let left: HashMap<String, TaskStatus> =
            self.show_many(&finished).await?.into_iter().map(|t| (t.id, t.status)).collect();
        let tasks = ids
            .iter()
            .map(|id| {
                let outcome = match (before.get(id), left.get(id)) {
                    (None, _) => TaskOutcome::NotFound,
                    (Some(status), _) if !status.is_terminal() => TaskOutcome::Unfinished { status: *status },
                    (Some(_), None) => TaskOutcome::Purged,
                    (Some(_), Some(_)) => TaskOutcome::Failed { message: "the store kept it".into() },
                };
                TaskResult { task_id: id.clone(), outcome }
            })
            .collect();
        Ok(Applied::Done(AdminOutcome::Each { tasks }))
    }

    /// The stored tasks among `ids` (unknown ids are left out), in no particular order: one
    /// query per 500 ids.
    pub async fn show_many(&self, ids: &[String]) -> Result<Vec<TaskRecord>, AdminError> {
        let mut found = Vec::with_capacity(ids.len());
        for chunk in ids.chunks(500) {
            match &self.backend {
                Backend::Sqlite(s) => {
                    let sql = format!("SELECT id, body FROM tasks WHERE id IN ({})", vec!["?"; chunk.len()].join(","));
                    let values: Vec<rusqlite::types::Value> = chunk.iter().map(|id| id.clone().into()).collect();
                    found.extend(s.blocking(move |s| s.records(&sql, &values)).await?);
                }
                #[cfg(feature = "postgres")]
                Backend::Postgres { store, .. } => {
                    let chunk = chunk.to_vec();
                    found.extend(store.records("SELECT id, body FROM mcp_tasks WHERE id = ANY($1)", &[&chunk]).await?);
                }
            }
        }
        Ok(found)
    }

    /// What a page that follows the store holds: an id of the newest change among the tasks of
    /// `principals` (`None`: every task), the same on every process over the store, so any of
    /// them can tell a page whether something changed since it was read. It is the newest last
    /// change and how many tasks share it; a deleted task changes it only at the next change.
    pub async fn change_id(&self, principals: Option<&[String]>) -> Result<String, AdminError> {
        let rows = self
            .rows(
                |dialect| query::change_id(dialect, principals),
                |row| Ok((row.get::<_, Option<i64>>(0)?, row.get::<_, i64>(1)?)),
                #[cfg(feature = "postgres")]
                |row| (row.get(0), row.get(1)),
            )
            .await?;
        let (newest, at_newest) = rows.into_iter().next().unwrap_or((None, 0));
        Ok(format!("{}.{at_newest}", newest.unwrap_or(0)))
    }

    /// Deletes terminal tasks whose TTL ended, and those that last changed at or before
    /// `updated_before_ms` (Unix ms).
    pub async fn purge(&self, updated_before_ms: u64) -> Result<Applied, AdminError> {
        let action = AdminAction::Purge { updated_before_ms };
        self.wrote();
        match &self.backend {
            Backend::Sqlite(s) => s.apply(action, self.wait).await,
            #[cfg(feature = "postgres")]
            Backend::Postgres { store, .. } => {
                Ok(Applied::Done(direct_purge(store.as_ref(), updated_before_ms).await?))
            }
        }
    }

    /// Deletes those of `ids` that are terminal, with their histories (a live or unknown task is
    /// left alone): the web view's purge of chosen tasks. On a SQLite file a live host owns it is
    /// queued for that host, as a cancel is.
    pub async fn purge_tasks(&self, ids: &[String]) -> Result<Applied, AdminError> {
        let action = AdminAction::PurgeTasks { task_ids: ids.to_vec() };
        self.wrote();
        match &self.backend {
            Backend::Sqlite(s) => s.apply(action, self.wait).await,
            #[cfg(feature = "postgres")]
            Backend::Postgres { store, .. } => {
                Ok(Applied::Done(AdminOutcome::Purged { count: store.purge_tasks(ids).await? }))
            }
        }
    }

    /// Follows the store: calls `each` with every task created or changed from now on (a task
    /// created and finished between two looks on SQLite shows once, in its last state) until
    /// `each` returns false. SQLite is looked at every `interval`; PostgreSQL pushes through its
    /// change feed.
    pub async fn tail(&self, interval: Duration, mut each: impl FnMut(Change) -> bool) -> Result<(), AdminError> {
        match &self.backend {
            Backend::Sqlite(s) => {
                let mut follow = s.blocking(SqliteAdmin::start_tail).await?;
                loop {
                    tokio::time::sleep(interval).await;
                    let (next, changes) = s.blocking(move |s| s.poll_tail(follow)).await?;
                    follow = next;
                    for change in changes {
                        if !each(change) {
                            return Ok(());
                        }
                    }
                }
            }
            #[cfg(feature = "postgres")]
            Backend::Postgres { store, url } => {
                use futures::StreamExt as _;
                let channels = [crate::store::postgres::CHANNEL, crate::store::postgres::CREATED_CHANNEL];
                let mut ids = std::pin::pin!(crate::store::postgres::listen_to(url, &channels).await?);
                let mut seen: HashMap<String, u64> = HashMap::new();
                while let Some(id) = ids.next().await {
                    let id = id?;
                    let change = match store.get(&id).await? {
                        Some(task) if seen.get(&id) == Some(&task.version) => continue,
                        Some(task) => {
                            if task.status.is_terminal() {
                                seen.remove(&id);
                            } else {
                                seen.insert(id, task.version);
                            }
                            Change::Task(Box::new(task))
                        }
                        None => Change::Gone(id),
                    };
                    if !each(change) {
                        return Ok(());
                    }
                }
                Err(StoreError::Backend("the PostgreSQL change feed's connection ended".into()).into())
            }
        }
    }
}

/// Starts counting the PostgreSQL change feed (changes and creations) from `base`.
#[cfg(feature = "postgres")]
async fn start_feed(url: &str, base: u64) -> Result<Arc<Feed>, AdminError> {
    use futures::StreamExt as _;
    use std::sync::atomic::Ordering::Relaxed;
    let channels = [crate::store::postgres::CHANNEL, crate::store::postgres::CREATED_CHANNEL];
    let ids = crate::store::postgres::listen_to(url, &channels).await?;
    let count = Arc::new(std::sync::atomic::AtomicU64::new(base));
    let alive = Arc::new(std::sync::atomic::AtomicBool::new(true));
    let (c, a) = (Arc::clone(&count), Arc::clone(&alive));
    let task = tokio::spawn(async move {
        let mut ids = std::pin::pin!(ids);
        while let Some(Ok(_)) = ids.next().await {
            c.fetch_add(1, Relaxed);
        }
        a.store(false, Relaxed);
    });
    Ok(Arc::new(Feed { count, alive, task }))
}

/// Cancels through the transition function with a compare-and-set, on a store nothing else
/// runs the task of (no live SQLite host), or whose workers adopt the change (PostgreSQL).
async fn direct_cancel(store: &dyn TaskStore, id: &str, operator: Option<&str>) -> Result<AdminOutcome, AdminError> {
    let by = Actor::operator(operator);
    for _ in 0..8 {
        let Some(mut task) = store.get(id).await? else {
            return Ok(AdminOutcome::NotFound);
        };
        let expected = task.version;
        let now = crate::clock::Clock::now_ms(&crate::clock::SystemClock);
        let history = match task.apply_by(now, TaskEvent::Cancel, &by) {
            Ok(applied) => applied.history,
            Err(TransitionError::Terminal(status)) => return Ok(AdminOutcome::AlreadyTerminal { status }),
            Err(e) => return Ok(AdminOutcome::Failed { message: e.to_string() }),
        };
        if store.update(&Arc::new(task), expected, &history).await? == UpdateOutcome::Written {
            return Ok(AdminOutcome::Cancelled);
        }
        // Another writer changed it first: read it again and decide again.
    }
    Ok(AdminOutcome::Failed { message: "the task kept changing under concurrent writers".into() })
}

/// [`direct_cancel`] of each task an [`AdminAction::CancelTasks`] names, several in flight at
/// once (the store's writer groups their commits).
async fn direct_cancel_each(store: &dyn TaskStore, action: &AdminAction) -> Result<AdminOutcome, AdminError> {
    use futures::StreamExt as _;
    let AdminAction::CancelTasks { task_ids, operator } = action else {
        return Ok(AdminOutcome::Failed { message: format!("not a cancel of many tasks: {action:?}") });
    };
    // Built in a loop, not a closure: a future from a closure that borrows is not `Send` for
    // every lifetime, which a spawned caller (an axum handler) needs.
    let mut cancels = Vec::with_capacity(task_ids.len());
    for id in task_ids {
        cancels.push(async move {
            let outcome = TaskOutcome::of_cancel(direct_cancel(store, id, operator.as_deref()).await?);
            Ok::<_, AdminError>(TaskResult { task_id: id.clone(), outcome })
        });
    }
    let results: Vec<Result<TaskResult, AdminError>> = futures::stream::iter(cancels).buffered(32).collect().await;
    Ok(AdminOutcome::Each { tasks: results.into_iter().collect::<Result<_, _>>()? })
}

async fn direct_purge(store: &dyn TaskStore, updated_before_ms: u64) -> Result<AdminOutcome, AdminError> {
    let now = crate::clock::Clock::now_ms(&crate::clock::SystemClock);
    let count = crate::store::purge_all_finished(store, now, updated_before_ms).await?;
    Ok(AdminOutcome::Purged { count })
}

#[cfg(feature = "postgres")]
async fn postgres_list(
    store: &crate::store::PostgresStore,
    filter: &ListFilter,
) -> Result<Vec<TaskRecord>, AdminError> {
    use tokio_postgres::types::ToSql;
    let mut sql = String::from("SELECT id, body FROM mcp_tasks WHERE true");
    let mut values: Vec<Box<dyn ToSql + Sync + Send>> = Vec::new();
    let mut bind = |sql: &mut String, clause: &str, value: Box<dyn ToSql + Sync + Send>| {
        values.push(value);
        sql.push_str(&clause.replace('?', &format!("${}", values.len())));
    };
    if let Some(status) = filter.status {
        bind(&mut sql, " AND status = ?", Box::new(status.as_str().to_owned()));
    }
    if let Some(principal) = &filter.principal {
        bind(&mut sql, " AND principal = ?", Box::new(principal.clone()));
    }
    if let Some(tool) = &filter.tool {
        bind(&mut sql, " AND convert_from(body, 'UTF8')::jsonb->>'tool' = ?", Box::new(tool.clone()));
    }
    let created = " AND (convert_from(body, 'UTF8')::jsonb->>'created_at_ms')::bigint";
    if let Some(before) = filter.created_before_ms {
        bind(&mut sql, &format!("{created} <= ?"), Box::new(int(before)));
    }
    if let Some(after) = filter.created_after_ms {
        bind(&mut sql, &format!("{created} >= ?"), Box::new(int(after)));
    }
    sql.push_str(" ORDER BY id DESC");
    if let Some(limit) = filter.limit {
        bind(&mut sql, " LIMIT ?", Box::new(int(limit as u64)));
    }
    let params: Vec<&(dyn ToSql + Sync)> = values.iter().map(|v| v.as_ref() as &(dyn ToSql + Sync)).collect();
    Ok(store.records(&sql, &params).await?)
}

fn sqlite_values(values: &[query::Value]) -> Vec<rusqlite::types::Value> {
    values
        .iter()
        .map(|v| match v {
            query::Value::Text(t) => rusqlite::types::Value::Text(t.clone()),
            query::Value::Int(i) => rusqlite::types::Value::Integer(*i),
        })
        .collect()
}

#[cfg(feature = "postgres")]
fn postgres_values(values: &[query::Value]) -> Vec<Box<dyn tokio_postgres::types::ToSql + Sync + Send>> {
    values
        .iter()
        .map(|v| -> Box<dyn tokio_postgres::types::ToSql + Sync + Send> {
            match v {
                query::Value::Text(t) => Box::new(t.clone()),
                query::Value::Int(i) => Box::new(*i),
            }
        })
        .collect()
}

#[cfg(feature = "postgres")]
fn postgres_params(
    values: &[Box<dyn tokio_postgres::types::ToSql + Sync + Send>],
) -> Vec<&(dyn tokio_postgres::types::ToSql + Sync)> {
    values.iter().map(|v| v.as_ref() as &(dyn tokio_postgres::types::ToSql + Sync)).collect()
}

/// A SQLite file, operated from another process than its host.
struct SqliteAdmin {
    path: PathBuf,
    /// Read-write (to queue requests) but never creating: one connection, used on blocking threads.
    conn: Arc<Mutex<Connection>>,
}

/// What `tail` on SQLite has seen: the last row, and the unfinished tasks with their versions.
struct Follow {
    last_seq: i64,
    live: HashMap<String, u64>,
}

const STATUS_LIVE: &str = "status IN ('working', 'input_required')";

impl SqliteAdmin {
    fn open(path: PathBuf) -> Result<Self, AdminError> {
        if !path.exists() {
            return Err(AdminError::NoStore(path));
        }
        let conn =
            Connection::open_with_flags(&path, OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX)?;
        conn.busy_timeout(Duration::from_secs(5))?;
        let tables: i64 =
            conn.query_row("SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'tasks'", [], |row| {
                row.get(0)
            })?;
        if tables == 0 {
            return Err(AdminError::NotAStore(path.display().to_string()));
        }
        let admin = Self { path, conn: Arc::new(Mutex::new(conn)) };
        // A redo log a dead host left holds acknowledged writes SQLite does not have yet: replay
        // it (as the host's next start would) so reads are exact. Only when no host is live.
        if admin.holder().is_none() && admin.redo_path().metadata().is_ok_and(|m| m.len() > 0) {
            admin.owned_store()?.close();
        }
        Ok(admin)
    }

    async fn blocking<T: Send + 'static>(
        &self,
        work: impl FnOnce(&Self) -> Result<T, AdminError> + Send + 'static,
    ) -> Result<T, AdminError> {
        let this = Self { path: self.path.clone(), conn: Arc::clone(&self.conn) };
        tokio::task::spawn_blocking(move || work(&this)).await.map_err(|e| StoreError::Backend(Box::new(e)))?
    }

    fn sibling(&self, suffix: &str) -> PathBuf {
        let mut p = self.path.clone().into_os_string();
        p.push(suffix);
        PathBuf::from(p)
    }

    fn redo_path(&self) -> PathBuf {
        self.sibling("-redo")
    }

    /// The live host process that owns the file, if any: `Some(pid)` (pid unknown: `None`
    /// inside) when its lock is held.
    fn holder(&self) -> Option<Option<u32>> {
        let lock = self.sibling(".lock");
        let Ok(file) = File::options().read(true).write(true).open(&lock) else {
            return None; // never opened by a host, or not ours to lock: no live host
        };
        if file.try_lock().is_ok() {
            return None; // released when `file` drops
        }
        let mut text = String::new();
        let _ = (&file).read_to_string(&mut text);
        Some(text.trim().parse().ok())
    }

    /// The store itself, for a process that owns no live host: takes the lock.
    fn owned_store(&self) -> Result<SqliteStore, AdminError> {
        SqliteStore::open(&self.path).map_err(|e| match e {
            StoreError::Locked(_) => AdminError::Locked { path: self.path.clone(), pid: self.holder().flatten() },
            other => AdminError::Store(other),
        })
    }

    fn map_busy(&self, e: rusqlite::Error) -> AdminError {
        match e.sqlite_error_code() {
            Some(rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked) => {
                AdminError::Locked { path: self.path.clone(), pid: self.holder().flatten() }
            }
            _ => e.into(),
        }
    }

    fn records(&self, sql: &str, values: &[rusqlite::types::Value]) -> Result<Vec<TaskRecord>, AdminError> {
        let conn = self.conn.lock();
        let mut stmt = conn.prepare(sql).map_err(|e| self.map_busy(e))?;
        let rows = stmt
            .query_map(params_from_iter(values), |row| Ok((row.get::<_, String>(0)?, row.get::<_, Vec<u8>>(1)?)))
            .and_then(|rows| rows.collect::<Result<Vec<_>, _>>())
            .map_err(|e| self.map_busy(e))?;
        Ok(rows.iter().map(|(id, body)| crate::store::decode(id, body)).collect::<Result<Vec<_>, StoreError>>()?)
    }

    fn list(&self, filter: &ListFilter) -> Result<Vec<TaskRecord>, AdminError> {
        use rusqlite::types::Value;
        let mut sql = String::from("SELECT id, body FROM tasks WHERE 1");
        let mut values = Vec::new();
        if let Some(status) = filter.status {
            sql.push_str(" AND status = ?");
            values.push(Value::Text(status.as_str().to_owned()));
        }
        if let Some(principal) = &filter.principal {
            sql.push_str(" AND principal = ?");
            values.push(Value::Text(principal.clone()));
        }
        if let Some(tool) = &filter.tool {
            sql.push_str(" AND json_extract(CAST(body AS TEXT), '$.tool') = ?");
            values.push(Value::Text(tool.clone()));
        }
        if let Some(before) = filter.created_before_ms {
            sql.push_str(" AND json_extract(CAST(body AS TEXT), '$.created_at_ms') <= ?");
            values.push(Value::Integer(int(before)));
        }
        if let Some(after) = filter.created_after_ms {
            sql.push_str(" AND json_extract(CAST(body AS TEXT), '$.created_at_ms') >= ?");
            values.push(Value::Integer(int(after)));
        }
        sql.push_str(" ORDER BY id DESC");
        if let Some(limit) = filter.limit {
            sql.push_str(" LIMIT ?");
            values.push(Value::Integer(int(limit as u64)));
        }
        self.records(&sql, &values)
    }

    fn get(&self, id: &str) -> Result<Option<TaskRecord>, AdminError> {
        let found = self.records("SELECT id, body FROM tasks WHERE id = ?", &[id.to_owned().into()])?;
        Ok(found.into_iter().next())
    }

    fn history(&self, id: &str) -> Result<TaskHistory, AdminError> {
        let conn = self.conn.lock();
        crate::store::sqlite::read_history(&conn, id).map_err(|e| self.map_busy(e))
    }

    fn stats(&self) -> Result<Vec<StatusCount>, AdminError> {
        let conn = self.conn.lock();
        let mut stmt = conn
            .prepare(
                "SELECT status, json_extract(CAST(body AS TEXT), '$.tool'), count(*) FROM tasks \
                 GROUP BY 1, 2 ORDER BY 1, 2",
            )
            .map_err(|e| self.map_busy(e))?;
        let rows = stmt
            .query_map([], |row| {
                Ok(StatusCount {
                    status: row.get(0)?,
                    tool: row.get::<_, Option<String>>(1)?.unwrap_or_default(),
                    count: u64::try_from(row.get::<_, i64>(2)?).unwrap_or(0),
                })
            })
            .and_then(|rows| rows.collect::<Result<Vec<_>, _>>())
            .map_err(|e| self.map_busy(e))?;
        Ok(rows)
    }

    async fn apply(&self, action: AdminAction, wait: Duration) -> Result<Applied, AdminError> {
        let queued = {
            let action = action.clone();
            self.blocking(move |s| match s.holder() {
                Some(pid) => {
                    let seq = enqueue_admin(&s.conn.lock(), &action).map_err(|e| s.map_busy(e))?;
                    Ok(Some((seq, pid)))
                }
                None => Ok(None),
            })
            .await?
        };
        let Some((seq, pid)) = queued else {
            // No live host: apply it here, on the store opened as a host would open it.
            let store = self.blocking(Self::owned_store).await?;
            let outcome = match &action {
                AdminAction::Cancel { task_id, operator } => direct_cancel(&store, task_id, operator.as_deref()).await,
                AdminAction::Purge { updated_before_ms } => direct_purge(&store, *updated_before_ms).await,
                AdminAction::PurgeTasks { task_ids } => {
                    store.purge_tasks(task_ids).await.map(|count| AdminOutcome::Purged { count }).map_err(Into::into)
                }
                AdminAction::CancelTasks { .. } => direct_cancel_each(&store, &action).await,
            };
            tokio::task::spawn_blocking(move || store.close()).await.map_err(|e| StoreError::Backend(Box::new(e)))?;
            return Ok(Applied::Done(outcome?));
        };
        let deadline = tokio::time::Instant::now() + wait;
        loop {
            if let Some(outcome) = self.blocking(move |s| Ok(admin_outcome(&s.conn.lock(), seq)?)).await? {
                return Ok(Applied::Done(outcome));
            }
            if tokio::time::Instant::now() >= deadline {
                return Ok(Applied::Queued { seq, pid });
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    fn start_tail(&self) -> Result<Follow, AdminError> {
        let conn = self.conn.lock();
        let last_seq: i64 = conn.query_row("SELECT coalesce(max(seq), 0) FROM tasks", [], |row| row.get(0))?;
        let mut stmt = conn.prepare(&format!("SELECT id, version FROM tasks WHERE {STATUS_LIVE}"))?;
        let live = stmt
            .query_map([], |row| Ok((row.get::<_, String>(0)?, u64::try_from(row.get::<_, i64>(1)?).unwrap_or(0))))?
            .collect::<Result<HashMap<_, _>, _>>()?;
        Ok(Follow { last_seq, live })
    }

    fn poll_tail(&self, mut follow: Follow) -> Result<(Follow, Vec<Change>), AdminError> {
        let mut changes = Vec::new();
        let mut conn = self.conn.lock();
        // One read transaction: the new rows and the live set come from the same snapshot.
        let tx = conn.transaction()?;
        let decode = |(id, body): (String, Vec<u8>)| crate::store::decode(&id, &body);
        let mut fresh = Vec::new();
        {
            let mut stmt = tx.prepare("SELECT seq, id, body FROM tasks WHERE seq > ?1 ORDER BY seq")?;
            let rows =
                stmt.query_map([follow.last_seq], |row| Ok((row.get::<_, i64>(0)?, row.get(1)?, row.get(2)?)))?;
            for row in rows {
                let (seq, id, body): (i64, String, Vec<u8>) = row?;
                follow.last_seq = follow.last_seq.max(seq);
                fresh.push(decode((id, body))?);
            }
        }
        let mut now_live: HashMap<String, TaskRecord> = HashMap::new();
        {
            let mut stmt = tx.prepare(&format!("SELECT id, body FROM tasks WHERE {STATUS_LIVE}"))?;
            for row in stmt.query_map([], |row| Ok((row.get(0)?, row.get(1)?)))? {
                let task = decode(row?)?;
                now_live.insert(task.id.clone(), task);
            }
        }
        let gone: Vec<String> = follow.live.keys().filter(|id| !now_live.contains_key(*id)).cloned().collect();
        let mut ended = Vec::new();
        for id in gone {
            follow.live.remove(&id);
            let mut stmt = tx.prepare_cached("SELECT id, body FROM tasks WHERE id = ?1")?;
            match stmt.query_row([&id], |row| Ok((row.get(0)?, row.get(1)?))) {
                Ok(row) => ended.push(Change::Task(Box::new(decode(row)?))),
                Err(rusqlite::Error::QueryReturnedNoRows) => ended.push(Change::Gone(id)),
                Err(e) => return Err(e.into()),
            }
        }
        drop(tx);
        let fresh_ids: std::collections::HashSet<String> = fresh.iter().map(|t| t.id.clone()).collect();
        for task in fresh {
            if !task.status.is_terminal() {
                follow.live.insert(task.id.clone(), task.version);
            }
            changes.push(Change::Task(Box::new(task)));
        }
        for (id, task) in now_live {
            if fresh_ids.contains(&id) {
                continue;
            }
            if follow.live.get(&id) != Some(&task.version) {
                follow.live.insert(id, task.version);
                changes.push(Change::Task(Box::new(task)));
            }
        }
        changes.extend(ended);
        Ok((follow, changes))
    }
}
