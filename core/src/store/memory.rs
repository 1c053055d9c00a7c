//! An in-memory [`TaskStore`]: same rules as the durable stores, nothing survives the process.

use std::collections::HashMap;
use std::sync::Arc;

use async_trait::async_trait;
use parking_lot::RwLock;

use super::{StoreError, TaskStore, UpdateOutcome};
use crate::protocol::{HistoryEntry, TaskHistory, TaskRecord};

/// Tasks in a hash map. Not durable across restarts; for tests and for hosts that choose
/// `memory://`.
#[derive(Debug, Default)]
pub struct MemoryStore {
    tasks: RwLock<HashMap<String, Stored>>,
}

/// A task and its history, changed together under the map's lock.
#[derive(Debug)]
struct Stored {
    record: Arc<TaskRecord>,
    history: TaskHistory,
}

impl std::ops::Deref for Stored {
    type Target = TaskRecord;

    fn deref(&self) -> &TaskRecord {
        &self.record
    }
}

impl MemoryStore {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }

    /// Deletes up to `limit` tasks that `doomed` selects (the purges); returns how many.
    fn remove_where(&self, limit: usize, doomed: impl Fn(&TaskRecord) -> bool) -> usize {
        let mut tasks = self.tasks.write();
        let ids: Vec<String> = tasks.values().filter(|t| doomed(t)).take(limit).map(|t| t.id.clone()).collect();
        for id in &ids {
            tasks.remove(id);
        }
        ids.len()
    }
}

#[async_trait]
impl TaskStore for MemoryStore {
    async fn insert(&self, task: &Arc<TaskRecord>) -> Result<(), StoreError> {
        let mut tasks = self.tasks.write();
        if tasks.contains_key(&task.id) {
            return Err(StoreError::Duplicate(task.id.clone()));
        }
        tasks.insert(task.id.clone(), Stored { record: Arc::clone(task), history: TaskHistory::created(task) });
        Ok(())
    }

    async fn get(&self, id: &str) -> Result<Option<TaskRecord>, StoreError> {
        Ok(self.tasks.read().get(id).map(|task| TaskRecord::clone(&task.record)))
    }

    async fn update(
        &self,
        task: &Arc<TaskRecord>,
        expected_version: u64,
        history: &[HistoryEntry],
    ) -> Result<UpdateOutcome, StoreError> {
        let mut tasks = self.tasks.write();
        match tasks.get_mut(&task.id) {
            Some(stored) if stored.version == expected_version && !stored.status.is_terminal() => {
                stored.record = Arc::clone(task);
                stored.history.extend(history.iter().cloned());
                Ok(UpdateOutcome::Written)
            }
            _ => Ok(UpdateOutcome::Conflict),
        }
    }

    async fn unfinished(&self, owner: Option<&str>, limit: usize) -> Result<Vec<TaskRecord>, StoreError> {
        Ok(self
            .tasks
            .read()
            .values()
            .filter(|t| !t.status.is_terminal() && owner.is_none_or(|o| t.owner == o))
            .take(limit)
            .map(|task| TaskRecord::clone(&task.record))
            .collect())
    }

    async fn expired_unfinished(&self, now_ms: u64, limit: usize) -> Result<Vec<TaskRecord>, StoreError> {
        Ok(self
            .tasks
            .read()
            .values()
            .filter(|t| !t.status.is_terminal() && t.is_expired(now_ms))
            .take(limit)
            .map(|task| TaskRecord::clone(&task.record))
            .collect())
    }

    async fn purge(&self, before_ms: u64, limit: usize) -> Result<usize, StoreError> {
        Ok(self.remove_where(limit, |t| t.expires_at_ms().is_some_and(|at| at <= before_ms)))
    }

    async fn history(&self, id: &str) -> Result<TaskHistory, StoreError> {
        Ok(self.tasks.read().get(id).map(|task| task.history.clone()).unwrap_or_default())
    }

    async fn count(&self) -> Result<u64, StoreError> {
        Ok(self.tasks.read().len() as u64)
    }

    async fn purge_tasks(&self, ids: &[String]) -> Result<usize, StoreError> {
        let mut tasks = self.tasks.write();
        let mut deleted = 0;
        for id in ids {
            if tasks.get(id.as_str()).is_some_and(|task| task.record.status.is_terminal()) {
                tasks.remove(id.as_str());
                deleted += 1;
            }
        }
        Ok(deleted)
    }

    async fn purge_finished(&self, now_ms: u64, updated_before_ms: u64, limit: usize) -> Result<usize, StoreError> {
        Ok(self.remove_where(limit, |t| {
            t.status.is_terminal()
                && (t.updated_at_ms <= updated_before_ms || t.expires_at_ms().is_some_and(|at| at <= now_ms))
        }))
    }
}
