//! Durable task storage. [`TaskStore`] is async and speaks only [`TaskRecord`]s, so a networked
//! backend (PostgreSQL) fits without changing the engine. Two backends ship here:
//! [`SqliteStore`] (the embedded default: WAL, group commit) and [`MemoryStore`] (tests, and
//! hosts that want no durability).
//!
//! Every backend must hold two rules itself, not leave them to the engine: an insert is durable
//! when it returns, and a terminal record never changes (updates are compare-and-set on
//! `version` and refused once the stored status is terminal).

mod memory;
#[cfg(feature = "sqlite")]
mod sqlite;

use async_trait::async_trait;

pub use memory::MemoryStore;
#[cfg(feature = "sqlite")]
pub use sqlite::{Durability, SqliteStore};

use crate::protocol::TaskRecord;

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

/// Durable storage of task records.
#[async_trait]
pub trait TaskStore: Send + Sync + 'static {
    /// Stores a new task. Returns only once a `get` from any process would find it.
    async fn insert(&self, task: &TaskRecord) -> Result<(), StoreError>;

    /// Reads a task by id.
    async fn get(&self, id: &str) -> Result<Option<TaskRecord>, StoreError>;

    /// Replaces a task if the stored `version` equals `expected_version` and the stored status is
    /// not terminal.
    async fn update(&self, task: &TaskRecord, expected_version: u64) -> Result<UpdateOutcome, StoreError>;

    /// Non-terminal tasks, optionally only those of one owner, at most `limit`.
    async fn unfinished(&self, owner: Option<&str>, limit: usize) -> Result<Vec<TaskRecord>, StoreError>;

    /// Non-terminal tasks whose TTL ended at or before `now_ms`, at most `limit`.
    async fn expired_unfinished(&self, now_ms: u64, limit: usize) -> Result<Vec<TaskRecord>, StoreError>;

    /// Deletes up to `limit` tasks whose TTL ended at or before `before_ms`; returns how many.
    async fn purge(&self, before_ms: u64, limit: usize) -> Result<usize, StoreError>;

    /// How many tasks are stored.
    async fn count(&self) -> Result<u64, StoreError>;
}
