//! Durable task references on the client: what a restarted client needs to re-attach to every
//! unfinished task and deliver each outcome exactly once.

use std::collections::HashMap;

use async_trait::async_trait;
use parking_lot::Mutex;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::ClientError;
use crate::protocol::client::{DriverState, Outcome};

/// One task the client follows, as persisted.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TaskReference {
    /// The server endpoint.
    pub endpoint: String,
    /// The task id.
    pub task_id: String,
    /// The tool that was called.
    pub tool: String,
    /// Its arguments.
    pub arguments: Value,
    /// The driver's state: last seen task, surfaced and answered input keys, requested cancel.
    pub state: DriverState,
    /// The outcome, once known.
    pub outcome: Option<Outcome>,
    /// True once the outcome was handed to the application (only a store that keeps delivered
    /// references, through [`ClientStore::forget`]'s default, ever holds one).
    pub delivered: bool,
}

/// Where task references live.
#[async_trait]
pub trait ClientStore: Send + Sync + 'static {
    /// Inserts or replaces a reference.
    async fn save(&self, reference: &TaskReference) -> Result<(), ClientError>;
    /// References of `endpoint` whose outcome was not yet delivered.
    async fn pending(&self, endpoint: &str) -> Result<Vec<TaskReference>, ClientError>;
    /// Reads one reference.
    async fn get(&self, endpoint: &str, task_id: &str) -> Result<Option<TaskReference>, ClientError>;
    /// The outcome of `task_id` was handed to the application: nothing of the reference is needed
    /// again, and [`ClientStore::pending`] must not return it. The built-in stores delete it, so a
    /// client that follows tasks without end keeps a bounded store; this default, for stores
    /// written before the method existed, keeps the reference and marks it delivered.
    async fn forget(&self, endpoint: &str, task_id: &str, outcome: &Outcome) -> Result<(), ClientError> {
        if let Some(mut reference) = self.get(endpoint, task_id).await?
            && !reference.delivered
        {
            reference.delivered = true;
            reference.outcome = Some(outcome.clone());
            self.save(&reference).await?;
        }
        Ok(())
    }
}

/// References in memory (lost on restart).
#[derive(Debug, Default)]
pub struct MemoryClientStore {
    /// Each endpoint's references by task id, as their JSON: a reference is read back only by
    /// [`ClientStore::pending`] and [`ClientStore::get`], and its JSON is about a third of the
    /// memory of the value (`client-bench --only many` keeps one per followed task).
    refs: Mutex<HashMap<String, Bodies>>,
}

/// One endpoint's references: each task id's reference as JSON.
type Bodies = HashMap<String, Box<[u8]>>;

impl MemoryClientStore {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }
}

fn read_reference(body: &[u8]) -> Result<TaskReference, ClientError> {
    serde_json::from_slice(body).map_err(|e| ClientError::Store(e.to_string()))
}

#[async_trait]
impl ClientStore for MemoryClientStore {
    async fn save(&self, reference: &TaskReference) -> Result<(), ClientError> {
        let body = serde_json::to_vec(reference).map_err(|e| ClientError::Store(e.to_string()))?.into_boxed_slice();
        let mut refs = self.refs.lock();
        let tasks = match refs.get_mut(&reference.endpoint) {
            Some(tasks) => tasks,
            None => refs.entry(reference.endpoint.clone()).or_default(),
        };
        match tasks.get_mut(&reference.task_id) {
            Some(saved) => *saved = body,
            None => {
                tasks.insert(reference.task_id.clone(), body);
            }
        }
        Ok(())
    }

    async fn pending(&self, endpoint: &str) -> Result<Vec<TaskReference>, ClientError> {
        let refs = self.refs.lock();
        let bodies = refs.get(endpoint).into_iter().flat_map(Bodies::values);
        let read: Result<Vec<_>, _> = bodies.map(|body| read_reference(body)).collect();
        let mut pending: Vec<_> = read?.into_iter().filter(|r| !r.delivered).collect();
        pending.sort_by(|a, b| a.task_id.cmp(&b.task_id)); // as the map ordered them before
        Ok(pending)
    }

    async fn get(&self, endpoint: &str, task_id: &str) -> Result<Option<TaskReference>, ClientError> {
        let refs = self.refs.lock();
        refs.get(endpoint).and_then(|tasks| tasks.get(task_id)).map(|body| read_reference(body)).transpose()
    }

    async fn forget(&self, endpoint: &str, task_id: &str, _outcome: &Outcome) -> Result<(), ClientError> {
        let mut refs = self.refs.lock();
        if let Some(tasks) = refs.get_mut(endpoint) {
            tasks.remove(task_id);
            if tasks.is_empty() {
                refs.remove(endpoint);
            } else if tasks.capacity() > 64 && tasks.len() < tasks.capacity() / 4 {
                // A burst's room goes back once most of its tasks were delivered.
                tasks.shrink_to_fit();
            }
        }
        Ok(())
    }
}

/// References in a SQLite file (the default for durable clients).
#[cfg(feature = "sqlite")]
pub struct SqliteClientStore {
    conn: Mutex<rusqlite::Connection>,
}

#[cfg(feature = "sqlite")]
impl std::fmt::Debug for SqliteClientStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SqliteClientStore").finish_non_exhaustive()
    }
}

#[cfg(feature = "sqlite")]
fn store_error(e: impl std::fmt::Display) -> ClientError {
    ClientError::Store(e.to_string())
}

#[cfg(feature = "sqlite")]
impl SqliteClientStore {
    /// Opens (creating if needed) the references file at `path`.
    pub fn open(path: impl AsRef<std::path::Path>) -> Result<Self, ClientError> {
        let conn = rusqlite::Connection::open(path).map_err(store_error)?;
        // Several client processes may share the default file.
        conn.busy_timeout(std::time::Duration::from_secs(5)).map_err(store_error)?;
        conn.pragma_update(None, "journal_mode", "WAL").map_err(store_error)?;
        conn.pragma_update(None, "synchronous", "NORMAL").map_err(store_error)?;
        conn.execute_batch(
            "CREATE TABLE IF NOT EXISTS task_refs (
                endpoint TEXT NOT NULL, task_id TEXT NOT NULL, delivered INTEGER NOT NULL, body BLOB NOT NULL,
                PRIMARY KEY (endpoint, task_id));
             PRAGMA user_version = 1;",
        )
        .map_err(store_error)?;
        Ok(Self { conn: Mutex::new(conn) })
    }
}

#[cfg(feature = "sqlite")]
#[async_trait]
impl ClientStore for SqliteClientStore {
    async fn save(&self, reference: &TaskReference) -> Result<(), ClientError> {
        let body = serde_json::to_vec(reference).map_err(store_error)?;
        self.conn
            .lock()
            .execute(
                "INSERT INTO task_refs (endpoint, task_id, delivered, body) VALUES (?1, ?2, ?3, ?4)
                 ON CONFLICT (endpoint, task_id) DO UPDATE SET delivered = excluded.delivered, body = excluded.body",
                rusqlite::params![reference.endpoint, reference.task_id, reference.delivered, body],
            )
            .map_err(store_error)?;
        Ok(())
    }

    async fn pending(&self, endpoint: &str) -> Result<Vec<TaskReference>, ClientError> {
        let conn = self.conn.lock();
        let mut stmt = conn
            .prepare_cached("SELECT body FROM task_refs WHERE endpoint = ?1 AND delivered = 0")
            .map_err(store_error)?;
        let bodies: Vec<Vec<u8>> = stmt
            .query_map([endpoint], |row| row.get(0))
            .map_err(store_error)?
            .collect::<Result<_, _>>()
            .map_err(store_error)?;
        bodies.iter().map(|b| serde_json::from_slice(b).map_err(store_error)).collect()
    }

    async fn get(&self, endpoint: &str, task_id: &str) -> Result<Option<TaskReference>, ClientError> {
        let conn = self.conn.lock();
        let mut stmt = conn
            .prepare_cached("SELECT body FROM task_refs WHERE endpoint = ?1 AND task_id = ?2")
            .map_err(store_error)?;
        let body: Option<Vec<u8>> = rusqlite::OptionalExtension::optional(
            stmt.query_row(rusqlite::params![endpoint, task_id], |row| row.get(0)),
        )
        .map_err(store_error)?;
        body.map(|b| serde_json::from_slice(&b).map_err(store_error)).transpose()
    }

    async fn forget(&self, endpoint: &str, task_id: &str, _outcome: &Outcome) -> Result<(), ClientError> {
        // The row goes: its pages are reused by the next references, so the file stops growing at
        // the size the most tasks followed at once needed.
        self.conn
            .lock()
            .prepare_cached("DELETE FROM task_refs WHERE endpoint = ?1 AND task_id = ?2")
            .and_then(|mut stmt| stmt.execute(rusqlite::params![endpoint, task_id]))
            .map_err(store_error)?;
        Ok(())
    }
}
