//! Several workers (engines) sharing one PostgreSQL database: any worker answers for any task,
//! a cancel or an answer received by one reaches the work running on another, listeners on any
//! worker hear every change, terminal rows stay final under concurrent writers (the database
//! refuses the change), and a dead worker's tasks are failed once its lease lapses.
//!
//! Needs a server: `MCP_TASKS_PG_URL=$(tests/pg/start) cargo test -p mcp-tasks --features postgres
//! --test postgres -- --ignored` (tests/run-all does this).
#![cfg(feature = "postgres")]

mod common;

use std::sync::Arc;
use std::time::Duration;

use mcp_tasks::Engine;
use mcp_tasks::clock::{ManualClock, SequentialIds};
use mcp_tasks::engine::{DEAD_WORKER_MESSAGE, EngineConfig, TaskOptions};
use mcp_tasks::protocol::TaskStatus;
use mcp_tasks::store::{PostgresStore, TaskStore};
use serde_json::{Map, Value, json};

const WITHIN: Duration = Duration::from_secs(10);

async fn worker(url: &str, config: EngineConfig) -> Engine {
    let store = PostgresStore::connect(url).await.expect("connects and migrates");
    Engine::builder(Arc::new(store)).config(config).build().await.expect("builds")
}

async fn workers(n: usize) -> (String, Vec<Engine>) {
    let url = common::pg_database().await;
    let mut engines = Vec::new();
    for _ in 0..n {
        engines.push(worker(&url, EngineConfig::default()).await);
    }
    (url, engines)
}

fn text(text: &str) -> Value {
    json!({"content": [{"type": "text", "text": text}]})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a PostgreSQL server in MCP_TASKS_PG_URL (tests/run-all starts one)"]
async fn any_worker_reads_a_task_and_a_cancel_on_one_stops_the_work_on_another() {
    let (_url, w) = workers(3).await;
    let (created, ctx) = w[0].create_task("alice", "job", TaskOptions::default()).await.unwrap();
    let id = created.task.task_id.clone();
    for other in &w[1..] {
        assert_eq!(other.get("alice", &id).await.unwrap().task.status, TaskStatus::Working);
        assert!(other.get("bob", &id).await.is_err(), "another principal sees nothing");
    }
    w[1].cancel("alice", &id).await.unwrap();
    let token = ctx.handle();
    tokio::time::timeout(WITHIN, token.cancelled()).await.expect("the cancel reaches the work on worker 0");
    assert_eq!(w[0].get("alice", &id).await.unwrap().task.status, TaskStatus::Cancelled);
    // The work's late result is discarded: the cancel stands everywhere.
    assert!(!ctx.complete(text("too late")).await.unwrap());
    for engine in &w {
        assert_eq!(engine.get("alice", &id).await.unwrap().task.status, TaskStatus::Cancelled);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a PostgreSQL server in MCP_TASKS_PG_URL (tests/run-all starts one)"]
async fn answers_received_by_one_worker_reach_the_work_waiting_on_another() {
    let (_url, w) = workers(2).await;
    let (created, ctx) = w[0].create_task("alice", "job", TaskOptions::default()).await.unwrap();
    let id = created.task.task_id.clone();
    let handle = ctx.handle();
    let mut ask = Map::new();
    ask.insert(
        "ok".into(),
        json!({"method": "elicitation/create", "params": {"mode": "form", "message": "Go?",
        "requestedSchema": {"type": "object", "properties": {}}}}),
    );
    let waiting = tokio::spawn(async move { handle.request_input(ask).await });
    let mut sub = w[1].subscribe("alice", std::slice::from_ref(&id)).await;
    loop {
        let state = tokio::time::timeout(WITHIN, sub.next()).await.unwrap().unwrap();
        if state.task.status == TaskStatus::InputRequired {
            break;
        }
    }
    let mut answer = Map::new();
    answer.insert("ok".into(), json!({"action": "accept", "content": {}}));
    w[1].update("alice", &id, answer).await.unwrap();
    let answers = tokio::time::timeout(WITHIN, waiting).await.unwrap().unwrap().unwrap();
    assert_eq!(answers["ok"]["action"], "accept");
    assert!(ctx.complete(text("went")).await.unwrap());
    assert_eq!(w[1].get("alice", &id).await.unwrap().result.unwrap()["content"][0]["text"], "went");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a PostgreSQL server in MCP_TASKS_PG_URL (tests/run-all starts one)"]
async fn a_listener_on_one_worker_hears_every_change_made_on_another() {
    let (_url, w) = workers(2).await;
    let (created, ctx) = w[0].create_task("alice", "job", TaskOptions::default()).await.unwrap();
    let id = created.task.task_id.clone();
    let mut sub = w[1].subscribe("alice", std::slice::from_ref(&id)).await;
    assert_eq!(sub.accepted, vec![id.clone()]);
    let first = tokio::time::timeout(WITHIN, sub.next()).await.unwrap().unwrap();
    assert_eq!(first.task.status, TaskStatus::Working);
    ctx.handle().set_status_message("halfway").await.unwrap();
    let next = tokio::time::timeout(WITHIN, sub.next()).await.unwrap().unwrap();
    assert_eq!(next.task.status_message.as_deref(), Some("halfway"));
    assert!(ctx.complete(text("done")).await.unwrap());
    let last = tokio::time::timeout(WITHIN, sub.next()).await.unwrap().unwrap();
    assert_eq!(last.task.status, TaskStatus::Completed);
    assert!(tokio::time::timeout(WITHIN, sub.next()).await.unwrap().is_none(), "the stream ends at the terminal state");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a PostgreSQL server in MCP_TASKS_PG_URL (tests/run-all starts one)"]
async fn terminal_states_stay_final_under_concurrent_writers() {
    let (url, w) = workers(2).await;
    for round in 0..20 {
        let (created, ctx) = w[0].create_task("alice", "job", TaskOptions::default()).await.unwrap();
        let id = created.task.task_id.clone();
        let (completed, cancelled) = tokio::join!(ctx.complete(text("raced")), w[1].cancel("alice", &id));
        cancelled.unwrap();
        let status = w[0].get("alice", &id).await.unwrap().task.status;
        assert_eq!(
            status,
            if completed.unwrap() { TaskStatus::Completed } else { TaskStatus::Cancelled },
            "round {round}"
        );
        assert_eq!(w[1].get("alice", &id).await.unwrap().task.status, status, "round {round}");
    }
    // The database itself refuses to change a terminal row, whoever writes.
    let (client, connection) = tokio_postgres::connect(&url, tokio_postgres::NoTls).await.unwrap();
    tokio::spawn(connection);
    let refused = client.execute("UPDATE mcp_tasks SET status = 'working' WHERE status <> 'working'", &[]).await;
    let refused = refused.unwrap_err();
    let message = refused.as_db_error().map(|e| e.message().to_owned()).unwrap_or_default();
    assert!(message.contains("terminal tasks never change"), "{refused:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a PostgreSQL server in MCP_TASKS_PG_URL (tests/run-all starts one)"]
async fn a_dead_workers_tasks_fail_once_its_lease_lapses_and_a_new_worker_fails_nothing_alive() {
    let url = common::pg_database().await;
    let clock = Arc::new(ManualClock::new(1_788_264_000_000));
    let config = EngineConfig { worker_lease: Duration::from_secs(15), ..EngineConfig::default() };
    let build = |prefix: &str| {
        let (url, clock, config) = (url.clone(), clock.clone(), config.clone());
        let prefix = prefix.to_owned();
        async move {
            let store = PostgresStore::connect(&url).await.unwrap();
            Engine::builder(Arc::new(store))
                .clock(clock)
                .ids(Arc::new(SequentialIds::new(prefix)))
                .config(config)
                .build()
                .await
                .unwrap()
        }
    };
    let doomed = build("a").await;
    let (created, _work) = doomed.create_task("alice", "job", TaskOptions::default()).await.unwrap();
    let id = created.task.task_id.clone();
    // A worker that starts while the first is alive leaves its task alone.
    let survivor = build("b").await;
    assert_eq!(survivor.sweep().await.unwrap().orphaned, 0);
    assert_eq!(survivor.get("alice", &id).await.unwrap().task.status, TaskStatus::Working);
    // The first worker dies (no more lease renewals): after its lease, any sweep fails its task.
    drop(doomed);
    clock.advance(10_000);
    assert_eq!(survivor.sweep().await.unwrap().orphaned, 0, "the lease still holds");
    clock.advance(6_000);
    assert_eq!(survivor.sweep().await.unwrap().orphaned, 1);
    let task = survivor.get("alice", &id).await.unwrap();
    assert_eq!(task.task.status, TaskStatus::Failed);
    assert_eq!(task.error.unwrap().message, DEAD_WORKER_MESSAGE);
    // The survivor's own tasks are untouched by its own sweeps.
    let (mine, _mine_work) = survivor.create_task("alice", "job", TaskOptions::default()).await.unwrap();
    clock.advance(60_000);
    survivor.sweep().await.unwrap();
    assert_eq!(survivor.get("alice", &mine.task.task_id).await.unwrap().task.status, TaskStatus::Working);
    let store = PostgresStore::connect(&url).await.unwrap();
    assert_eq!(store.count().await.unwrap(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a PostgreSQL server in MCP_TASKS_PG_URL (tests/run-all starts one)"]
async fn workers_sweeping_together_expire_each_task_once() {
    let url = common::pg_database().await;
    let clock = Arc::new(ManualClock::new(1_788_264_000_000));
    let mut w = Vec::new();
    for prefix in ["a", "b", "c"] {
        let store = PostgresStore::connect(&url).await.unwrap();
        let engine = Engine::builder(Arc::new(store))
            .clock(clock.clone())
            .ids(Arc::new(SequentialIds::new(prefix)))
            .config(EngineConfig { worker_lease: Duration::from_secs(3_600), ..EngineConfig::default() })
            .build()
            .await
            .unwrap();
        w.push(engine);
    }
    let mut works = Vec::new();
    for (i, engine) in w.iter().enumerate() {
        for _ in 0..20 {
            let options = TaskOptions { ttl_ms: Some(Some(1_000 + i as u64)), ..TaskOptions::default() };
            works.push(engine.create_task("alice", "job", options).await.unwrap());
        }
    }
    clock.advance(5_000);
    let (a, b, c) = tokio::join!(w[0].sweep(), w[1].sweep(), w[2].sweep());
    let expired = a.unwrap().expired + b.unwrap().expired + c.unwrap().expired;
    assert_eq!(expired, 60, "every task expired exactly once across the three sweeps");
    for (created, ctx) in works {
        // A task expired by another worker's sweep reaches its own worker through the feed.
        tokio::time::timeout(WITHIN, ctx.handle().cancelled())
            .await
            .expect("the work of an expired task is told to stop");
        let task = w[2].get("alice", &created.task.task_id).await.unwrap();
        assert_eq!(task.task.status, TaskStatus::Failed);
    }
}

/// Caps on live tasks count every worker's tasks (issue 14, item 8): concurrent creates for one
/// principal on two workers never pass its cap, the server-wide cap holds across workers, a
/// finished task frees its place for any worker, and a worker that joins later counts the live
/// tasks already in the database.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a PostgreSQL server in MCP_TASKS_PG_URL (tests/run-all starts one)"]
async fn caps_on_live_tasks_hold_across_workers() {
    let url = common::pg_database().await;
    let config =
        EngineConfig { max_live_tasks_per_principal: Some(3), max_live_tasks: Some(5), ..EngineConfig::default() };
    let (one, two) = (worker(&url, config.clone()).await, worker(&url, config.clone()).await);
    let creates: Vec<_> = (0..10)
        .map(|i| {
            let engine = if i % 2 == 0 { one.clone() } else { two.clone() };
            async move { engine.create_task("alice", "job", TaskOptions::default()).await }
        })
        .collect();
    let results = futures::future::join_all(creates).await;
    let (made, refused): (Vec<_>, Vec<_>) = results.into_iter().partition(Result::is_ok);
    assert_eq!(made.len(), 3, "alice's cap holds across workers");
    for error in refused {
        let error = error.unwrap_err().to_protocol();
        assert_eq!(error.code(), -32010);
        assert_eq!(error.to_rpc().data.unwrap()["reason"], "principal_quota");
    }
    let (_b1, _c1) = two.create_task("bob", "job", TaskOptions::default()).await.unwrap();
    let (_b2, _c2) = one.create_task("bob", "job", TaskOptions::default()).await.unwrap();
    let error = two.create_task("carol", "job", TaskOptions::default()).await.unwrap_err().to_protocol();
    assert_eq!(error.to_rpc().data.unwrap(), json!({"reason": "server_quota", "limit": 5}));
    // A worker that joins later counts what is live in the database.
    let three = worker(&url, config).await;
    assert!(three.create_task("carol", "job", TaskOptions::default()).await.is_err());
    // Finishing on one worker frees the place for another.
    let mut made = made.into_iter().map(Result::unwrap);
    let (_, ctx) = made.next().unwrap();
    assert!(ctx.complete(text("done")).await.unwrap());
    let (_c, _ctx) = three.create_task("carol", "job", TaskOptions::default()).await.unwrap();
}
