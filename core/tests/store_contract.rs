//! The TaskStore contract (`mcp_tasks::store::contract`, feature `store-contract`) against the
//! stores that ship: memory, SQLite (both durabilities, reopened after close as a restarted
//! process would), and PostgreSQL (a second worker's handle; needs `MCP_TASKS_PG_URL`, so it is
//! ignored in a plain run and `tests/run-all` runs it).

mod common;

use std::path::PathBuf;
use std::sync::Arc;

use async_trait::async_trait;
use mcp_tasks::store::contract::{StoreUnderTest, assert_contract};
use mcp_tasks::store::{Durability, MemoryStore, SqliteStore, TaskStore};

struct Memory;

#[async_trait]
impl StoreUnderTest for Memory {
    async fn fresh(&self) -> Arc<dyn TaskStore> {
        Arc::new(MemoryStore::new())
    }

    async fn again(&self, _store: Arc<dyn TaskStore>) -> Option<Arc<dyn TaskStore>> {
        None
    }
}

/// SQLite files in one temporary directory; `again` closes the store and opens its file anew.
struct Sqlite {
    dir: tempfile::TempDir,
    durability: Durability,
    opened: parking_lot::Mutex<Vec<(Arc<SqliteStore>, PathBuf)>>,
}

#[async_trait]
impl StoreUnderTest for Sqlite {
    async fn fresh(&self) -> Arc<dyn TaskStore> {
        let mut opened = self.opened.lock();
        let path = self.dir.path().join(format!("{}.db", opened.len()));
        let store = Arc::new(SqliteStore::open_with(&path, self.durability).unwrap());
        opened.push((Arc::clone(&store), path));
        store
    }

    async fn again(&self, store: Arc<dyn TaskStore>) -> Option<Arc<dyn TaskStore>> {
        let (sqlite, path) = {
            let opened = self.opened.lock();
            let found = opened.iter().find(|(s, _)| std::ptr::addr_eq(Arc::as_ptr(s), Arc::as_ptr(&store)))?;
            (Arc::clone(&found.0), found.1.clone())
        };
        sqlite.close();
        Some(Arc::new(SqliteStore::open_with(&path, self.durability).unwrap()))
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_memory_store_keeps_the_contract() {
    assert_contract(&Memory).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sqlite_store_keeps_the_contract() {
    for durability in [Durability::Normal, Durability::Full] {
        let sqlite =
            Sqlite { dir: tempfile::tempdir().unwrap(), durability, opened: parking_lot::Mutex::new(Vec::new()) };
        assert_contract(&sqlite).await;
    }
}

#[cfg(feature = "postgres")]
mod postgres {
    use super::*;
    use mcp_tasks::store::PostgresStore;

    /// A new database per store; `again` is a second worker's connection to the same one. The
    /// stores are kept with their URLs: matched by address, a dropped store's address could be
    /// reused by a later one and name the wrong database.
    struct Postgres(parking_lot::Mutex<Vec<(Arc<dyn TaskStore>, String)>>);

    #[async_trait]
    impl StoreUnderTest for Postgres {
        async fn fresh(&self) -> Arc<dyn TaskStore> {
            let url = common::pg_database().await;
            let store: Arc<dyn TaskStore> = Arc::new(PostgresStore::connect(&url).await.unwrap());
            self.0.lock().push((Arc::clone(&store), url));
            store
        }

        async fn again(&self, store: Arc<dyn TaskStore>) -> Option<Arc<dyn TaskStore>> {
            let url = self.0.lock().iter().find(|(kept, _)| Arc::ptr_eq(kept, &store)).map(|(_, url)| url.clone())?;
            Some(Arc::new(PostgresStore::connect(&url).await.unwrap()))
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    #[ignore = "needs a PostgreSQL server in MCP_TASKS_PG_URL (tests/run-all starts one)"]
    async fn the_postgres_store_keeps_the_contract() {
        assert_contract(&Postgres(parking_lot::Mutex::new(Vec::new()))).await;
    }
}

/// A store that ignores the expected version (a lost-update bug) fails the compare-and-set
/// checks by name (the records' and the histories'), and only those; one that drops the
/// history of updates fails the history's: the suite catches what it claims to.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_store_that_skips_compare_and_set_or_history_is_caught() {
    use mcp_tasks::protocol::{HistoryEntry, TaskHistory, TaskRecord};
    use mcp_tasks::store::{StoreError, UpdateOutcome};

    /// A memory store with one bug: it skips compare-and-set, or (`forgetful`) the history.
    struct Lax(MemoryStore, bool);

    #[async_trait]
    impl TaskStore for Lax {
        async fn insert(&self, task: &Arc<TaskRecord>) -> Result<(), StoreError> {
            self.0.insert(task).await
        }
        async fn get(&self, id: &str) -> Result<Option<TaskRecord>, StoreError> {
            self.0.get(id).await
        }
        async fn update(
            &self,
            task: &Arc<TaskRecord>,
            expected: u64,
            history: &[HistoryEntry],
        ) -> Result<UpdateOutcome, StoreError> {
            if self.1 {
                return self.0.update(task, expected, &[]).await;
            }
            let Some(stored) = self.0.get(&task.id).await? else { return Ok(UpdateOutcome::Conflict) };
            self.0.update(task, stored.version, history).await
        }
        async fn history(&self, id: &str) -> Result<TaskHistory, StoreError> {
            self.0.history(id).await
        }
        async fn unfinished(&self, owner: Option<&str>, limit: usize) -> Result<Vec<TaskRecord>, StoreError> {
            self.0.unfinished(owner, limit).await
        }
        async fn expired_unfinished(&self, now_ms: u64, limit: usize) -> Result<Vec<TaskRecord>, StoreError> {
            self.0.expired_unfinished(now_ms, limit).await
        }
        async fn purge(&self, before_ms: u64, limit: usize) -> Result<usize, StoreError> {
            self.0.purge(before_ms, limit).await
        }
        async fn count(&self) -> Result<u64, StoreError> {
            self.0.count().await
        }
        async fn purge_finished(&self, now_ms: u64, updated_before_ms: u64, limit: usize) -> Result<usize, StoreError> {
            self.0.purge_finished(now_ms, updated_before_ms, limit).await
        }
        async fn purge_tasks(&self, ids: &[String]) -> Result<usize, StoreError> {
            self.0.purge_tasks(ids).await
        }
    }

    struct LaxUnderTest(bool);

    #[async_trait]
    impl StoreUnderTest for LaxUnderTest {
        async fn fresh(&self) -> Arc<dyn TaskStore> {
            Arc::new(Lax(MemoryStore::new(), self.0))
        }
        async fn again(&self, _store: Arc<dyn TaskStore>) -> Option<Arc<dyn TaskStore>> {
            None
        }
    }

    let failures = mcp_tasks::store::contract::check(&LaxUnderTest(false)).await;
    assert_eq!(failures.len(), 2, "{failures:#?}");
    assert!(failures[0].starts_with("compare_and_set:"), "{failures:#?}");
    assert!(failures[1].starts_with("history_goes_with_its_change: a stale update was written"), "{failures:#?}");
    let failures = mcp_tasks::store::contract::check(&LaxUnderTest(true)).await;
    assert_eq!(failures.len(), 1, "{failures:#?}");
    assert!(failures[0].starts_with("history_goes_with_its_change: after an update"), "{failures:#?}");
}
