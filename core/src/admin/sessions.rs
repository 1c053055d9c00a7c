//! The web view's sign-in sessions, kept in the store: every process serving a view over one
//! store (uvicorn or gunicorn workers, a Node cluster, several `mcp-tasks web` behind a
//! balancer) knows a session another one started, and a sign-out on any of them ends it
//! everywhere. A session is found by the SHA-256 of its random id (the cookie holds the id; the
//! store only its digest, so reading the store gives no one a session), and names the token it
//! was started with by that token's digest: a token taken out of the view's token file ends its
//! sessions at their next request.
//!
//! The table is the view's own (`mcp_tasks_web_sessions`), made at the first sign-in, beside the
//! tasks and outside the host's write path: a host never reads it.

use std::sync::atomic::Ordering::Relaxed;

use super::{Admin, AdminError, Backend};
#[cfg(feature = "postgres")]
use crate::store::StoreError;
use crate::store::int;

/// One signed-in operator.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Session {
    /// The operator's name (the token's).
    pub operator: String,
    /// The SHA-256 of the token the session was started with.
    pub token: [u8; 32],
    /// When it ends (Unix ms).
    pub expires_at_ms: u64,
}

const SQLITE_TABLE: &str = "CREATE TABLE IF NOT EXISTS mcp_tasks_web_sessions (\
     key BLOB PRIMARY KEY, operator TEXT NOT NULL, token BLOB NOT NULL, expires_at INTEGER NOT NULL) WITHOUT ROWID";

#[cfg(feature = "postgres")]
const POSTGRES_TABLE: &str = "CREATE TABLE IF NOT EXISTS mcp_tasks_web_sessions (\
     key BYTEA PRIMARY KEY, operator TEXT NOT NULL, token BYTEA NOT NULL, expires_at BIGINT NOT NULL)";

fn missing_table(message: &str) -> bool {
    message.contains("no such table") || message.contains("does not exist")
}

#[cfg(feature = "postgres")]
fn pg(e: tokio_postgres::Error) -> AdminError {
    AdminError::Store(StoreError::Backend(Box::new(e)))
}

impl Admin {
    /// Makes the sessions table once per admin (the first sign-in).
    async fn sessions_table(&self) -> Result<(), AdminError> {
        if self.sessions_ready.load(Relaxed) {
            return Ok(());
        }
        match &self.backend {
            Backend::Sqlite(s) => {
                s.blocking(|s| s.conn.lock().execute_batch(SQLITE_TABLE).map_err(|e| s.map_busy(e))).await?;
            }
            #[cfg(feature = "postgres")]
            Backend::Postgres { store, .. } => {
                let client = store.client().await?;
                // Two workers making it at once: one of them loses a race on the catalog, and
                // the table is there all the same.
                if let Err(e) = client.batch_execute(POSTGRES_TABLE).await {
                    client.batch_execute(POSTGRES_TABLE).await.map_err(|_| pg(e))?;
                }
            }
        }
        self.sessions_ready.store(true, Relaxed);
        Ok(())
    }

    /// Records a new session under `key` (the SHA-256 of its id), and drops those that ended
    /// before `now_ms`.
    pub async fn start_session(&self, key: [u8; 32], session: &Session, now_ms: u64) -> Result<(), AdminError> {
        self.sessions_table().await?;
        let Session { operator, token, expires_at_ms } = session.clone();
        match &self.backend {
            Backend::Sqlite(s) => {
                s.blocking(move |s| {
                    let mut conn = s.conn.lock();
                    let tx = conn.transaction().map_err(|e| s.map_busy(e))?;
                    tx.execute("DELETE FROM mcp_tasks_web_sessions WHERE expires_at <= ?1", [int(now_ms)])
                        .and_then(|_| {
                            tx.execute(
                                "INSERT INTO mcp_tasks_web_sessions (key, operator, token, expires_at) \
                                 VALUES (?1, ?2, ?3, ?4)",
                                rusqlite::params![key.as_slice(), operator, token.as_slice(), int(expires_at_ms)],
                            )
                        })
                        .and_then(|_| tx.commit())
                        .map_err(|e| s.map_busy(e))
                })
                .await
            }
            #[cfg(feature = "postgres")]
            Backend::Postgres { store, .. } => {
                let client = store.client().await?;
                client
                    .execute("DELETE FROM mcp_tasks_web_sessions WHERE expires_at <= $1", &[&int(now_ms)])
                    .await
                    .map_err(pg)?;
                client
                    .execute(
                        "INSERT INTO mcp_tasks_web_sessions (key, operator, token, expires_at) VALUES ($1, $2, $3, $4)",
                        &[&key.as_slice(), &operator, &token.as_slice(), &int(expires_at_ms)],
                    )
                    .await
                    .map_err(pg)?;
                Ok(())
            }
        }
    }

    /// The session under `key`, unless it ended at or before `now_ms` (or none was ever
    /// started on this store).
    pub async fn session(&self, key: [u8; 32], now_ms: u64) -> Result<Option<Session>, AdminError> {
        let row: Option<(String, Vec<u8>, i64)> = match &self.backend {
            Backend::Sqlite(s) => {
                s.blocking(move |s| {
                    let conn = s.conn.lock();
                    let found = conn.query_row(
                        "SELECT operator, token, expires_at FROM mcp_tasks_web_sessions WHERE key = ?1",
                        [key.as_slice()],
                        |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?)),
                    );
                    match found {
                        Ok(row) => Ok(Some(row)),
                        Err(rusqlite::Error::QueryReturnedNoRows) => Ok(None),
                        Err(e) if missing_table(&e.to_string()) => Ok(None),
                        Err(e) => Err(s.map_busy(e)),
                    }
                })
                .await?
            }
            #[cfg(feature = "postgres")]
            Backend::Postgres { store, .. } => {
                let client = store.client().await?;
                match client
                    .query_opt(
                        "SELECT operator, token, expires_at FROM mcp_tasks_web_sessions WHERE key = $1",
                        &[&key.as_slice()],
                    )
                    .await
                {
                    Ok(row) => row.map(|row| (row.get(0), row.get(1), row.get(2))),
                    Err(e) if e.as_db_error().is_some_and(|d| missing_table(d.message())) => None,
                    Err(e) => return Err(pg(e)),
                }
            }
        };
        Ok(row.and_then(|(operator, token, expires_at)| {
            let expires_at_ms = u64::try_from(expires_at).unwrap_or(0);
            let token = <[u8; 32]>::try_from(token.as_slice()).ok()?;
            (expires_at_ms > now_ms).then_some(Session { operator, token, expires_at_ms })
        }))
    }

    /// Ends the session under `key` (a sign-out); true when there was one.
    pub async fn end_session(&self, key: [u8; 32]) -> Result<bool, AdminError> {
        let deleted = match &self.backend {
            Backend::Sqlite(s) => {
                s.blocking(move |s| {
                    let conn = s.conn.lock();
                    match conn.execute("DELETE FROM mcp_tasks_web_sessions WHERE key = ?1", [key.as_slice()]) {
                        Ok(n) => Ok(n),
                        Err(e) if missing_table(&e.to_string()) => Ok(0),
                        Err(e) => Err(s.map_busy(e)),
                    }
                })
                .await?
            }
            #[cfg(feature = "postgres")]
            Backend::Postgres { store, .. } => {
                let client = store.client().await?;
                match client.execute("DELETE FROM mcp_tasks_web_sessions WHERE key = $1", &[&key.as_slice()]).await {
                    Ok(n) => usize::try_from(n).unwrap_or(0),
                    Err(e) if e.as_db_error().is_some_and(|d| missing_table(d.message())) => 0,
                    Err(e) => return Err(pg(e)),
                }
            }
        };
        Ok(deleted > 0)
    }
}
