//! [`PostgresStore`]: tasks in PostgreSQL, shared by many server workers.
//!
//! - Rows mirror the SQLite store (`id`, `principal`, `owner`, `status`, `expires_at`, `version`,
//!   and the record as JSON in `body`). Updates are compare-and-set on `version`, and a trigger
//!   refuses any change to a terminal row, so the database itself keeps terminal states final
//!   whichever worker writes.
//! - Every update fires `NOTIFY mcp_tasks, '<id>'` from a trigger in the same transaction; each
//!   store keeps one `LISTEN` connection and hands the ids to [`TaskStore::changes`], which the
//!   engine uses to adopt other workers' writes (a cancel stops local work, answers reach a
//!   waiting work, listeners hear every change).
//! - Workers hold leases (`mcp_tasks_workers`): the engine renews its own on every sweep, and
//!   unfinished tasks whose owner holds no live lease are orphans, failed by any worker's sweep.
//! - A task's history is rows of `mcp_task_events` keyed by (task, version the change wrote,
//!   entry number), written by the same statement as the row they describe (a data-modifying
//!   `WITH`), and deleted with their task (`ON DELETE CASCADE`).
//! - The schema is created and migrated by [`PostgresStore::connect`] under an advisory lock;
//!   `mcp_tasks_schema.version` records the applied version.

use std::sync::Arc;

use async_trait::async_trait;
use futures::StreamExt;
use tokio::sync::broadcast;
use tokio_postgres::AsyncMessage;
use tokio_postgres_rustls::MakeRustlsConnect;

use super::postgres_tls;
use super::{LiveQuota, StoreError, TaskStore, UpdateOutcome, backend, decode, encode, int};
use crate::protocol::history::{HISTORY_LIMIT, may_exceed_limit};
use crate::protocol::{HistoryEntry, TaskHistory, TaskRecord};

/// The channel the change trigger notifies on.
pub(crate) const CHANNEL: &str = "mcp_tasks";

/// The channel the creation trigger notifies on (only `mcp-tasks tail` listens).
pub(crate) const CREATED_CHANNEL: &str = "mcp_tasks_created";

/// Versioned migrations; entry `n` brings the schema from version `n` to `n + 1`.
const MIGRATIONS: &[&str] = &[
    r"
CREATE TABLE mcp_tasks (
    id TEXT PRIMARY KEY,
    principal TEXT NOT NULL,
    owner TEXT NOT NULL,
    status TEXT NOT NULL,
    expires_at BIGINT,
    version BIGINT NOT NULL,
    body BYTEA NOT NULL
);
CREATE INDEX mcp_tasks_unfinished ON mcp_tasks (owner) WHERE status IN ('working', 'input_required');
CREATE INDEX mcp_tasks_expiry ON mcp_tasks (expires_at) WHERE expires_at IS NOT NULL;
CREATE FUNCTION mcp_tasks_terminal_immutable() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF OLD.status IN ('completed', 'failed', 'cancelled') THEN
        RAISE EXCEPTION 'terminal tasks never change (task %)', OLD.id;
    END IF;
    RETURN NEW;
END $$;
CREATE TRIGGER mcp_tasks_terminal_immutable BEFORE UPDATE ON mcp_tasks
    FOR EACH ROW EXECUTE FUNCTION mcp_tasks_terminal_immutable();
CREATE FUNCTION mcp_tasks_notify() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('mcp_tasks', NEW.id);
    RETURN NULL;
END $$;
CREATE TRIGGER mcp_tasks_changed AFTER UPDATE ON mcp_tasks
    FOR EACH ROW EXECUTE FUNCTION mcp_tasks_notify();
CREATE TABLE mcp_tasks_workers (
    owner TEXT PRIMARY KEY,
    lease_until BIGINT NOT NULL
);
",
    r"
CREATE INDEX mcp_tasks_live_principal ON mcp_tasks (principal) WHERE status IN ('working', 'input_required');
",
    // Creations on their own channel, which the workers do not listen to: `mcp-tasks tail`
    // does, to show a task from its creation (updates come on `mcp_tasks`).
    r"
CREATE FUNCTION mcp_tasks_notify_created() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('mcp_tasks_created', NEW.id);
    RETURN NULL;
END $$;
CREATE TRIGGER mcp_tasks_created AFTER INSERT ON mcp_tasks
    FOR EACH ROW EXECUTE FUNCTION mcp_tasks_notify_created();
",
    // Tasks that wait for a worker (created for separate workers, or resumable ones whose
    // worker died): from when one may claim them (null while a worker runs it), and the tool,
    // which a worker's claim filters on (written at insert; null on rows older than this).
    r"
ALTER TABLE mcp_tasks ADD COLUMN runnable_at BIGINT, ADD COLUMN tool TEXT;
CREATE INDEX mcp_tasks_runnable ON mcp_tasks (runnable_at) WHERE runnable_at IS NOT NULL;
",
    // Every task's history, and how many of its oldest entries were dropped.
    r"
CREATE TABLE mcp_task_events (
    task_id TEXT NOT NULL REFERENCES mcp_tasks (id) ON DELETE CASCADE,
    version BIGINT NOT NULL,
    n INTEGER NOT NULL,
    at BIGINT NOT NULL,
    event TEXT NOT NULL,
    PRIMARY KEY (task_id, version, n)
);
CREATE TABLE mcp_task_events_dropped (
    task_id TEXT PRIMARY KEY REFERENCES mcp_tasks (id) ON DELETE CASCADE,
    dropped BIGINT NOT NULL
);
",
    // The web view's list (`mcp_tasks::admin::query`): newest change first overall, within a
    // status, within a principal. The last change is in the record's JSON only; an index needs
    // an immutable expression and `convert_from` is only stable (its encoding is fixed here:
    // the bodies are UTF-8), hence the function, which the queries call by the same name.
    r"
CREATE FUNCTION mcp_tasks_updated_ms(body BYTEA) RETURNS BIGINT LANGUAGE sql IMMUTABLE PARALLEL SAFE
    AS $$ SELECT (convert_from(body, 'UTF8')::jsonb->>'updated_at_ms')::bigint $$;
CREATE INDEX mcp_tasks_by_change ON mcp_tasks (mcp_tasks_updated_ms(body), id);
CREATE INDEX mcp_tasks_by_status_change ON mcp_tasks (status, mcp_tasks_updated_ms(body), id);
CREATE INDEX mcp_tasks_by_principal_change ON mcp_tasks (principal, mcp_tasks_updated_ms(body), id);
-- The tool column (written at insert since the fourth migration) on older rows too, so the list
-- filters on it: past the triggers that freeze terminal rows and announce changes, since this
-- writes what the record already says.
ALTER TABLE mcp_tasks DISABLE TRIGGER mcp_tasks_terminal_immutable, DISABLE TRIGGER mcp_tasks_changed;
UPDATE mcp_tasks SET tool = convert_from(body, 'UTF8')::jsonb->>'tool' WHERE tool IS NULL;
ALTER TABLE mcp_tasks ENABLE TRIGGER mcp_tasks_terminal_immutable, ENABLE TRIGGER mcp_tasks_changed;
",
];

/// The insert every create runs (plain and within a quota), with the history's first entry.
const INSERT: &str = "WITH t AS (INSERT INTO mcp_tasks (id, principal, owner, status, expires_at, version, body, \
                      runnable_at, tool) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) RETURNING id) \
                      INSERT INTO mcp_task_events (task_id, version, n, at, event) SELECT id, $6, 0, $10, $11 FROM t";

/// The compare-and-set update with the change's history entries (`$9` their times, `$10` their
/// events); answers the rows updated. The status condition keeps the trigger for writers that
/// bypass this library.
const UPDATE: &str = "WITH u AS (UPDATE mcp_tasks SET status = $2, expires_at = $3, version = $4, body = $5, \
                      owner = $6, runnable_at = $7 WHERE id = $1 AND version = $8 \
                      AND status IN ('working', 'input_required') RETURNING id), \
                      e AS (INSERT INTO mcp_task_events (task_id, version, n, at, event) \
                      SELECT u.id, $4, h.n - 1, h.at, h.event FROM u, \
                      unnest($9::bigint[], $10::text[]) WITH ORDINALITY AS h (at, event, n)) \
                      SELECT count(*) FROM u";

/// Drops the entries of task `$1` beyond the newest `$2`, counting them; its creation (the row of
/// the insert's version, the lowest) stays.
const TRIM: &str = "WITH d AS (DELETE FROM mcp_task_events WHERE task_id = $1 AND (version, n) IN \
                    (SELECT version, n FROM mcp_task_events WHERE task_id = $1 AND version > \
                    (SELECT min(version) FROM mcp_task_events WHERE task_id = $1) \
                    ORDER BY version DESC, n DESC OFFSET $2) RETURNING 1) \
                    INSERT INTO mcp_task_events_dropped (task_id, dropped) SELECT $1, count(*) FROM d \
                    HAVING count(*) > 0 ON CONFLICT (task_id) \
                    DO UPDATE SET dropped = mcp_task_events_dropped.dropped + EXCLUDED.dropped";

/// Runs [`UPDATE`] on `client` (a pooled connection or a transaction); true when it wrote.
async fn update_row(
    client: &impl deadpool_postgres::GenericClient,
    task: &TaskRecord,
    expected_version: u64,
    history: &[HistoryEntry],
) -> Result<bool, StoreError> {
    let statement = client.prepare_cached(UPDATE).await.map_err(backend)?;
    let values = row(task);
    let expected = int(expected_version);
    let ats: Vec<i64> = history.iter().map(|e| int(e.at_ms)).collect();
    let events: Vec<String> = history.iter().map(HistoryEntry::event_json).collect();
    let [a, b, c, d, e, f, g, h] = values.update(&expected);
    let written: i64 =
        client.query_one(&statement, &[a, b, c, d, e, f, g, h, &ats, &events]).await.map_err(backend)?.get(0);
    if written == 1 && may_exceed_limit(task.version) {
        // Past the point where a task may hold more entries than kept; a failed trim only
        // leaves a few more entries until the next change.
        let trim = async {
            let statement = client.prepare_cached(TRIM).await?;
            client.execute(&statement, &[&task.id, &(HISTORY_LIMIT as i64)]).await
        };
        if let Err(e) = trim.await {
            tracing::warn!(task_id = %task.id, error = %e, "trimming a task's history failed");
        }
    }
    Ok(written == 1)
}

/// Tasks in a PostgreSQL database, shared by any number of server processes.
pub struct PostgresStore {
    pool: deadpool_postgres::Pool,
    changes: broadcast::Sender<String>,
    listener: tokio::task::JoinHandle<()>,
}

impl std::fmt::Debug for PostgresStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PostgresStore").finish_non_exhaustive()
    }
}

impl Drop for PostgresStore {
    fn drop(&mut self) {
        self.listener.abort();
    }
}

impl PostgresStore {
    /// Connects to `url` (`postgres://user:pass@host:port/db`, with libpq's `sslmode` and
    /// `sslrootcert` for TLS: see the `postgres_tls` module), creates or migrates the schema,
    /// and starts listening for other workers' changes. The role needs to create tables,
    /// functions and triggers on first use (or have them created by a role that can), then
    /// `SELECT, INSERT, UPDATE, DELETE` on `mcp_tasks` and `mcp_tasks_workers`.
    pub async fn connect(url: &str) -> Result<Self, StoreError> {
        let postgres_tls::Connection { config, tls } = postgres_tls::parse(url)?;
        let manager = deadpool_postgres::Manager::from_config(
            config.clone(),
            tls.clone(),
            deadpool_postgres::ManagerConfig { recycling_method: deadpool_postgres::RecyclingMethod::Fast },
        );
        let pool = deadpool_postgres::Pool::builder(manager).max_size(16).build().map_err(backend)?;
        migrate(&pool).await?;
        let (changes, _) = broadcast::channel(4096);
        let listener = listen(config, tls, changes.clone()).await?;
        Ok(Self { pool, changes, listener })
    }

    pub(crate) async fn client(&self) -> Result<deadpool_postgres::Object, StoreError> {
        self.pool.get().await.map_err(backend)
    }

    pub(crate) async fn records(
        &self,
        sql: &str,
        params: &[&(dyn tokio_postgres::types::ToSql + Sync)],
    ) -> Result<Vec<TaskRecord>, StoreError> {
        let client = self.client().await?;
        let statement = client.prepare_cached(sql).await.map_err(backend)?;
        let rows = client.query(&statement, params).await.map_err(backend)?;
        rows.iter().map(|row| decode(row.get::<_, &str>(0), row.get::<_, &[u8]>(1))).collect()
    }
}

/// Applies the missing migrations under a transaction-scoped advisory lock, so workers starting
/// together migrate once.
async fn migrate(pool: &deadpool_postgres::Pool) -> Result<(), StoreError> {
    let mut client = pool.get().await.map_err(backend)?;
    let tx = client.transaction().await.map_err(backend)?;
    tx.batch_execute(
        "SELECT pg_advisory_xact_lock(7293047561); \
         CREATE TABLE IF NOT EXISTS mcp_tasks_schema (version INTEGER NOT NULL); \
         INSERT INTO mcp_tasks_schema (version) SELECT 0 WHERE NOT EXISTS (SELECT 1 FROM mcp_tasks_schema);",
    )
    .await
    .map_err(backend)?;
    let current: i32 = tx.query_one("SELECT version FROM mcp_tasks_schema", &[]).await.map_err(backend)?.get(0);
    let current = usize::try_from(current).unwrap_or(0);
    if current > MIGRATIONS.len() {
        return Err(StoreError::Backend(
            format!("database schema version {current} is newer than this library's {}", MIGRATIONS.len()).into(),
        ));
    }
    for (version, sql) in MIGRATIONS.iter().enumerate().skip(current) {
        tx.batch_execute(sql).await.map_err(backend)?;
        let next = i32::try_from(version + 1).unwrap_or(i32::MAX);
        tx.execute("UPDATE mcp_tasks_schema SET version = $1", &[&next]).await.map_err(backend)?;
    }
    tx.commit().await.map_err(backend)
}

/// Opens the `LISTEN` connection and forwards notified ids to `changes` until aborted. A lost
/// connection is reopened after a pause; changes made meanwhile are seen by the next poll or read.
/// True when the database at `url` has this library's tables (a server used it), without
/// creating them as [`PostgresStore::connect`] would.
pub(crate) async fn has_tables(url: &str) -> Result<bool, StoreError> {
    let postgres_tls::Connection { config, tls } = postgres_tls::parse(url)?;
    let (client, connection) = config.connect(tls).await.map_err(backend)?;
    let driver = tokio::spawn(connection);
    let row = client.query_one("SELECT to_regclass('mcp_tasks') IS NOT NULL", &[]).await.map_err(backend);
    drop(client);
    let _ = driver.await;
    Ok(row?.get(0))
}

/// Listens on `channels` over one connection of its own (`mcp-tasks tail`): yields each
/// notification's payload (a task id) until the connection ends, which ends the stream.
pub(crate) async fn listen_to(
    url: &str,
    channels: &[&str],
) -> Result<impl futures::Stream<Item = Result<String, StoreError>> + use<>, StoreError> {
    let postgres_tls::Connection { config, tls } = postgres_tls::parse(url)?;
    let (client, mut connection) = config.connect(tls).await.map_err(backend)?;
    let (tx, rx) = futures::channel::mpsc::unbounded();
    let driver = tokio::spawn(async move {
        let mut stream = futures::stream::poll_fn(move |cx| connection.poll_message(cx));
        while let Some(message) = stream.next().await {
            let item = match message {
                Ok(AsyncMessage::Notification(n)) => Ok(n.payload().to_owned()),
                Ok(_) => continue,
                Err(e) => Err(backend(e)),
            };
            let failed = item.is_err();
            if tx.unbounded_send(item).is_err() || failed {
                break;
            }
        }
    });
    for channel in channels {
        client.batch_execute(&format!("LISTEN {channel}")).await.map_err(backend)?;
    }
    // The client must outlive the stream (dropping it closes the connection); the driver task
    // ends with the connection.
    Ok(futures::stream::unfold((rx, client, driver), |(mut rx, client, driver)| async move {
        let item = rx.next().await?;
        Some((item, (rx, client, driver)))
    }))
}

async fn listen(
    config: tokio_postgres::Config,
    tls: MakeRustlsConnect,
    changes: broadcast::Sender<String>,
) -> Result<tokio::task::JoinHandle<()>, StoreError> {
    async fn session(
        config: &tokio_postgres::Config,
        tls: &MakeRustlsConnect,
        changes: &broadcast::Sender<String>,
        ready: Option<tokio::sync::oneshot::Sender<Result<(), StoreError>>>,
    ) {
        let (client, mut connection) = match config.connect(tls.clone()).await {
            Ok(pair) => pair,
            Err(e) => {
                if let Some(ready) = ready {
                    let _ = ready.send(Err(backend(e)));
                }
                return;
            }
        };
        let (tx, mut rx) = futures::channel::mpsc::unbounded();
        let stream = futures::stream::poll_fn(move |cx| connection.poll_message(cx));
        let driver = tokio::spawn(stream.for_each(move |message| {
            let _ = tx.unbounded_send(message);
            futures::future::ready(())
        }));
        let listening = client.batch_execute(&format!("LISTEN {CHANNEL}")).await.map_err(backend);
        let failed = listening.is_err();
        if let Some(ready) = ready {
            let _ = ready.send(listening);
        }
        if failed {
            driver.abort();
            return;
        }
        while let Some(message) = rx.next().await {
            match message {
                Ok(AsyncMessage::Notification(n)) => {
                    let _ = changes.send(n.payload().to_owned());
                }
                Ok(_) => {}
                Err(e) => {
                    tracing::warn!(error = %e, "task change listener lost its connection");
                    break;
                }
            }
        }
        driver.abort();
        drop(client);
    }

    let (ready_tx, ready_rx) = tokio::sync::oneshot::channel();
    let handle = tokio::spawn(async move {
        let mut ready = Some(ready_tx);
        loop {
            session(&config, &tls, &changes, ready.take()).await;
            tokio::time::sleep(std::time::Duration::from_secs(1)).await;
        }
    });
    match ready_rx.await {
        Ok(Ok(())) => Ok(handle),
        Ok(Err(e)) => {
            handle.abort();
            Err(e)
        }
        Err(_) => Err(StoreError::Closed),
    }
}

#[async_trait]
impl TaskStore for PostgresStore {
    async fn insert(&self, task: &Arc<TaskRecord>) -> Result<(), StoreError> {
        let client = self.client().await?;
        let statement = client.prepare_cached(INSERT).await.map_err(backend)?;
        let values = row(task);
        let created = Created::of(task);
        let inserted = client.execute(&statement, &values.insert(&created)).await;
        match inserted {
            Ok(_) => Ok(()),
            Err(e) if e.code() == Some(&tokio_postgres::error::SqlState::UNIQUE_VIOLATION) => {
                Err(StoreError::Duplicate(task.id.clone()))
            }
            Err(e) => Err(backend(e)),
        }
    }

    async fn insert_within(&self, task: &Arc<TaskRecord>, quota: LiveQuota) -> Result<(), StoreError> {
        if !quota.is_set() {
            return self.insert(task).await;
        }
        let mut client = self.client().await?;
        let tx = client.transaction().await.map_err(backend)?;
        // Creators of the same cap take turns for the transaction, in every worker: a
        // server-wide cap serializes every create, a per-caller cap only that caller's, so no two
        // can both count below the cap and both insert.
        let key = match quota.total {
            Some(_) => "mcp_tasks:live".to_owned(),
            None => format!("mcp_tasks:live:{}", task.principal),
        };
        tx.execute("SELECT pg_advisory_xact_lock(hashtextextended($1, 0))", &[&key]).await.map_err(backend)?;
        let counts = tx
            .query_one(
                "SELECT count(*) FILTER (WHERE principal = $1), count(*) FROM mcp_tasks \
                 WHERE status IN ('working', 'input_required') AND ($2 OR principal = $1)",
                &[&task.principal, &quota.total.is_some()],
            )
            .await
            .map_err(backend)?;
        let (own, total): (i64, i64) = (counts.get(0), counts.get(1));
        let count = |n: i64| u64::try_from(n).unwrap_or(0);
        // Without a server-wide cap only the caller's rows were counted.
        let total = if quota.total.is_some() { count(total) } else { 0 };
        if let Some((scope, limit)) = quota.reached(count(own), total) {
            return Err(StoreError::QuotaExceeded { scope, limit });
        }
        let values = row(task);
        let created = Created::of(task);
        let inserted = tx.execute(INSERT, &values.insert(&created)).await;
        match inserted {
            Ok(_) => tx.commit().await.map_err(backend),
            Err(e) if e.code() == Some(&tokio_postgres::error::SqlState::UNIQUE_VIOLATION) => {
                Err(StoreError::Duplicate(task.id.clone()))
            }
            Err(e) => Err(backend(e)),
        }
    }

    async fn get(&self, id: &str) -> Result<Option<TaskRecord>, StoreError> {
        let client = self.client().await?;
        let statement = client.prepare_cached("SELECT body FROM mcp_tasks WHERE id = $1").await.map_err(backend)?;
        let row = client.query_opt(&statement, &[&id]).await.map_err(backend)?;
        row.map(|row| decode(id, row.get::<_, &[u8]>(0))).transpose()
    }

    async fn update(
        &self,
        task: &Arc<TaskRecord>,
        expected_version: u64,
        history: &[HistoryEntry],
    ) -> Result<UpdateOutcome, StoreError> {
        let client = self.client().await?;
        let written = update_row(&client, task, expected_version, history).await?;
        Ok(if written { UpdateOutcome::Written } else { UpdateOutcome::Conflict })
    }

    async fn history(&self, id: &str) -> Result<TaskHistory, StoreError> {
        let client = self.client().await?;
        let statement = client
            .prepare_cached("SELECT at, event FROM mcp_task_events WHERE task_id = $1 ORDER BY version, n")
            .await
            .map_err(backend)?;
        let entries = client
            .query(&statement, &[&id])
            .await
            .map_err(backend)?
            .iter()
            .filter_map(|row| HistoryEntry::from_stored(u64::try_from(row.get::<_, i64>(0)).unwrap_or(0), row.get(1)))
            .collect();
        let statement = client
            .prepare_cached("SELECT dropped FROM mcp_task_events_dropped WHERE task_id = $1")
            .await
            .map_err(backend)?;
        let dropped =
            client.query_opt(&statement, &[&id]).await.map_err(backend)?.map_or(0, |row| row.get::<_, i64>(0));
        Ok(TaskHistory { entries, dropped: u64::try_from(dropped).unwrap_or(0) })
    }

    async fn unfinished(&self, owner: Option<&str>, limit: usize) -> Result<Vec<TaskRecord>, StoreError> {
        let limit = int(limit as u64);
        match owner {
            Some(owner) => {
                self.records(
                    "SELECT id, body FROM mcp_tasks WHERE owner = $1 AND status IN ('working', 'input_required') LIMIT $2",
                    &[&owner, &limit],
                )
                .await
            }
            None => {
                self.records(
                    "SELECT id, body FROM mcp_tasks WHERE status IN ('working', 'input_required') LIMIT $1",
                    &[&limit],
                )
                .await
            }
        }
    }

    async fn expired_unfinished(&self, now_ms: u64, limit: usize) -> Result<Vec<TaskRecord>, StoreError> {
        self.records(
            "SELECT id, body FROM mcp_tasks WHERE expires_at IS NOT NULL AND expires_at <= $1 \
             AND status IN ('working', 'input_required') LIMIT $2",
            &[&int(now_ms), &int(limit as u64)],
        )
        .await
    }

    async fn purge(&self, before_ms: u64, limit: usize) -> Result<usize, StoreError> {
        let client = self.client().await?;
        let statement = client
            .prepare_cached(
                "DELETE FROM mcp_tasks WHERE id IN \
                 (SELECT id FROM mcp_tasks WHERE expires_at IS NOT NULL AND expires_at <= $1 LIMIT $2)",
            )
            .await
            .map_err(backend)?;
        let deleted = client.execute(&statement, &[&int(before_ms), &int(limit as u64)]).await.map_err(backend)?;
        Ok(usize::try_from(deleted).unwrap_or(usize::MAX))
    }

    async fn purge_tasks(&self, ids: &[String]) -> Result<usize, StoreError> {
        let client = self.client().await?;
        // The history's rows go with their task (ON DELETE CASCADE).
        let statement = client
            .prepare_cached(
                "DELETE FROM mcp_tasks WHERE id = ANY($1) AND status IN ('completed', 'failed', 'cancelled')",
            )
            .await
            .map_err(backend)?;
        let deleted = client.execute(&statement, &[&ids]).await.map_err(backend)?;
        Ok(usize::try_from(deleted).unwrap_or(usize::MAX))
    }

    async fn purge_finished(&self, now_ms: u64, updated_before_ms: u64, limit: usize) -> Result<usize, StoreError> {
        let client = self.client().await?;
        // The last change is only in the record's JSON: an operator's purge scans terminal
        // rows, which no hot path does.
        let statement = client
            .prepare_cached(
                "DELETE FROM mcp_tasks WHERE id IN (SELECT id FROM mcp_tasks \
                 WHERE status IN ('completed', 'failed', 'cancelled') AND \
                 ((expires_at IS NOT NULL AND expires_at <= $1) \
                  OR (convert_from(body, 'UTF8')::jsonb->>'updated_at_ms')::bigint <= $2) LIMIT $3)",
            )
            .await
            .map_err(backend)?;
        let deleted = client
            .execute(&statement, &[&int(now_ms), &int(updated_before_ms), &int(limit as u64)])
            .await
            .map_err(backend)?;
        Ok(usize::try_from(deleted).unwrap_or(usize::MAX))
    }

    async fn waiting(&self, limit: usize) -> Result<Vec<TaskRecord>, StoreError> {
        self.records(
            "SELECT id, body FROM mcp_tasks WHERE runnable_at IS NOT NULL \
             AND status IN ('working', 'input_required') ORDER BY runnable_at LIMIT $1",
            &[&int(limit as u64)],
        )
        .await
    }

    async fn claim(
        &self,
        now_ms: u64,
        tools: &[String],
        limit: usize,
        claim: &super::Claim<'_>,
    ) -> Result<Vec<Arc<TaskRecord>>, StoreError> {
        let mut client = self.client().await?;
        let tx = client.transaction().await.map_err(backend)?;
        // Rows another worker is claiming right now are skipped, not waited for: workers that
        // claim at once take different tasks, and none blocks on another.
        let rows = tx
            .query(
                "SELECT id, body FROM mcp_tasks WHERE runnable_at IS NOT NULL AND runnable_at <= $1 \
                 AND status IN ('working', 'input_required') AND tool = ANY($2) \
                 AND (expires_at IS NULL OR expires_at > $1) \
                 ORDER BY runnable_at LIMIT $3 FOR UPDATE SKIP LOCKED",
                &[&int(now_ms), &tools, &int(limit as u64)],
            )
            .await
            .map_err(backend)?;
        let mut claimed = Vec::new();
        for found in &rows {
            let task = decode(found.get::<_, &str>(0), found.get::<_, &[u8]>(1))?;
            let Some((next, history)) = claim(&task) else { continue };
            let next = Arc::new(next);
            // The row is locked, so the version cannot have moved; the condition still guards
            // against a row changed by a writer that does not lock.
            if update_row(&tx, &next, task.version, &history).await? {
                claimed.push(next);
            }
        }
        tx.commit().await.map_err(backend)?;
        Ok(claimed)
    }

    async fn count(&self) -> Result<u64, StoreError> {
        let client = self.client().await?;
        let row = client.query_one("SELECT count(*) FROM mcp_tasks", &[]).await.map_err(backend)?;
        Ok(u64::try_from(row.get::<_, i64>(0)).unwrap_or(0))
    }

    fn shared(&self) -> bool {
        true
    }

    fn changes(&self) -> Option<broadcast::Receiver<String>> {
        Some(self.changes.subscribe())
    }

    async fn renew_lease(&self, owner: &str, until_ms: u64) -> Result<(), StoreError> {
        let client = self.client().await?;
        let statement = client
            .prepare_cached(
                "INSERT INTO mcp_tasks_workers (owner, lease_until) VALUES ($1, $2) \
                 ON CONFLICT (owner) DO UPDATE SET lease_until = EXCLUDED.lease_until",
            )
            .await
            .map_err(backend)?;
        client.execute(&statement, &[&owner, &int(until_ms)]).await.map_err(backend)?;
        Ok(())
    }

    async fn orphaned(&self, now_ms: u64, limit: usize) -> Result<Vec<TaskRecord>, StoreError> {
        // Unfinished tasks whose owner holds no live lease: it died, or never registered. A
        // task that waits for a worker has none to lose.
        self.records(
            "SELECT t.id, t.body FROM mcp_tasks t \
             WHERE t.status IN ('working', 'input_required') AND t.owner <> '' AND NOT EXISTS \
             (SELECT 1 FROM mcp_tasks_workers w WHERE w.owner = t.owner AND w.lease_until > $1) LIMIT $2",
            &[&int(now_ms), &int(limit as u64)],
        )
        .await
    }
}

/// The column values of `task`'s row, for [`INSERT`] and [`UPDATE`].
struct Row<'a> {
    task: &'a TaskRecord,
    status: &'static str,
    expires: Option<i64>,
    version: i64,
    body: Vec<u8>,
    runnable_at: Option<i64>,
}

fn row(task: &TaskRecord) -> Row<'_> {
    Row {
        task,
        status: task.status.as_str(),
        expires: task.expires_at_ms().map(int),
        version: int(task.version),
        body: encode(task),
        runnable_at: task.runnable_at_ms.map(int),
    }
}

/// The history's first entry, as [`INSERT`] writes it.
struct Created {
    at: i64,
    event: String,
}

impl Created {
    fn of(task: &TaskRecord) -> Self {
        let entry = HistoryEntry::created(task);
        Self { at: int(entry.at_ms), event: entry.event_json() }
    }
}

impl<'a> Row<'a> {
    /// The values of [`INSERT`].
    fn insert(&'a self, created: &'a Created) -> [&'a (dyn tokio_postgres::types::ToSql + Sync); 11] {
        let task = self.task;
        [
            &task.id,
            &task.principal,
            &task.owner,
            &self.status,
            &self.expires,
            &self.version,
            &self.body,
            &self.runnable_at,
            &task.tool,
            &created.at,
            &created.event,
        ]
    }

    /// The values of [`UPDATE`] over `expected` (the version the row must still have).
    fn update(&'a self, expected: &'a i64) -> [&'a (dyn tokio_postgres::types::ToSql + Sync); 8] {
        let task = self.task;
        [&task.id, &self.status, &self.expires, &self.version, &self.body, &task.owner, &self.runnable_at, expected]
    }
}
