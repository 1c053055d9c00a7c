//! TLS to PostgreSQL by libpq's `sslmode` and `sslrootcert`, against a server that
//! `MCP_TASKS_PG_TLS=1 tests/pg/start` gave a generated certificate (signed by `ca.crt` for the
//! name `localhost` only) and a role, `tls_only`, that the server refuses over plain TCP.
//!
//! Needs that server: `MCP_TASKS_PG_URL` and `MCP_TASKS_PG_TLS_DIR` (its `tls` folder);
//! tests/run-all sets both.
#![cfg(feature = "postgres")]

mod common;

use std::sync::Arc;
use std::time::Duration;

use mcp_tasks::Engine;
use mcp_tasks::engine::TaskOptions;
use mcp_tasks::protocol::TaskStatus;
use mcp_tasks::store::PostgresStore;

/// A fresh database, reached as `tls_only` at `host` with `query` appended.
async fn url(host: &str, query: &str) -> String {
    let plain = common::pg_database().await;
    let rest = plain.split_once('@').map(|(_, rest)| rest).expect("the URL names a user");
    let rest = rest.replacen("127.0.0.1", host, 1);
    format!("postgres://tls_only@{rest}?{query}")
}

fn tls_file(name: &str) -> String {
    let dir = std::env::var("MCP_TASKS_PG_TLS_DIR")
        .expect("MCP_TASKS_PG_TLS_DIR names the tls folder of MCP_TASKS_PG_TLS=1 tests/pg/start");
    format!("{dir}/{name}")
}

/// The error and its causes in one line, for matching.
fn chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

/// Connects twice (two workers on one database) and checks the pool and the `LISTEN`
/// connection both work: a cancel on one worker reaches the work running on the other.
async fn works(url: &str) {
    let store = |url: String| async move {
        let store = PostgresStore::connect(&url).await.unwrap_or_else(|e| panic!("{url}: {}", chain(&e)));
        Engine::builder(Arc::new(store)).build().await.expect("builds")
    };
    let (a, b) = (store(url.to_owned()).await, store(url.to_owned()).await);
    let (created, ctx) = a.create_task("alice", "job", TaskOptions::default()).await.unwrap();
    let id = created.task.task_id;
    assert_eq!(b.get("alice", &id).await.unwrap().task.status, TaskStatus::Working);
    b.cancel("alice", &id).await.unwrap();
    tokio::time::timeout(Duration::from_secs(10), ctx.handle().cancelled())
        .await
        .expect("the cancel crosses the LISTEN connection");
}

async fn refused(url: &str) -> String {
    match PostgresStore::connect(url).await {
        Ok(_) => panic!("{url} connected"),
        Err(e) => chain(&e),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs MCP_TASKS_PG_TLS=1 tests/pg/start (tests/run-all starts one)"]
async fn a_tls_only_role_is_refused_without_tls_and_served_with_it() {
    let error = refused(&url("127.0.0.1", "sslmode=disable").await).await;
    assert!(error.contains("no encryption"), "{error}");
    // prefer (the default, as in libpq) and require encrypt without checking the certificate.
    works(&url("127.0.0.1", "connect_timeout=10").await).await;
    works(&url("127.0.0.1", "sslmode=prefer").await).await;
    works(&url("127.0.0.1", "sslmode=require").await).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs MCP_TASKS_PG_TLS=1 tests/pg/start (tests/run-all starts one)"]
async fn verify_ca_checks_the_chain_and_verify_full_the_name_too() {
    let ca = tls_file("ca.crt");
    let other = tls_file("other-ca.crt");
    // The certificate names localhost, not 127.0.0.1.
    works(&url("127.0.0.1", &format!("sslmode=verify-ca&sslrootcert={ca}")).await).await;
    works(&url("localhost", &format!("sslmode=verify-full&sslrootcert={ca}")).await).await;
    let error = refused(&url("127.0.0.1", &format!("sslmode=verify-full&sslrootcert={ca}")).await).await;
    assert!(error.contains("not valid for name"), "{error}");
    for mode in ["verify-ca", "verify-full", "require"] {
        let error = refused(&url("localhost", &format!("sslmode={mode}&sslrootcert={other}")).await).await;
        assert!(error.contains("UnknownIssuer"), "{mode} with a root that signed nothing: {error}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs MCP_TASKS_PG_TLS=1 tests/pg/start (tests/run-all starts one)"]
async fn a_missing_root_file_is_a_clear_error_before_any_connection() {
    let error = refused(&url("127.0.0.1", "sslmode=verify-full&sslrootcert=/nonexistent/root.crt").await).await;
    assert!(error.contains("sslrootcert /nonexistent/root.crt"), "{error}");
}
