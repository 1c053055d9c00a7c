//! Engine tests with an injected clock and ids; nothing sleeps. Each scenario runs over the
//! in-memory store and over SQLite.

mod common;

use std::sync::Arc;

use common::schemas;
use mcp_tasks::clock::ManualClock;
use mcp_tasks::engine::{ABANDONED_MESSAGE, EngineConfig, Limits, NO_RESULT_MESSAGE, TaskOptions};
use mcp_tasks::protocol::{RpcError, TaskStatus};
use mcp_tasks::store::{Durability, MemoryStore, SqliteStore, StoreError, TaskStore, UpdateOutcome};
use mcp_tasks::{Engine, EngineError};
use serde_json::{Map, Value, json};

const START: u64 = 1_788_264_000_000;

struct Rig {
    engine: Engine,
    clock: Arc<ManualClock>,
    _dir: Option<tempfile::TempDir>,
}

async fn rig(sqlite: bool, config: EngineConfig) -> Rig {
    let (store, dir): (Arc<dyn TaskStore>, _) = if sqlite {
        let dir = tempfile::tempdir().unwrap();
        (Arc::new(SqliteStore::open(dir.path().join("t.db")).unwrap()), Some(dir))
    } else {
        (Arc::new(MemoryStore::new()), None)
    };
    let clock = Arc::new(ManualClock::new(START));
    let engine = common::test_engine(store, clock.clone(), "t", config).await;
    Rig { engine, clock, _dir: dir }
}

fn detailed(task: &mcp_tasks::protocol::DetailedTask) -> Value {
    let value = serde_json::to_value(task).unwrap();
    schemas().assert_valid(true, "DetailedTask", &value);
    value
}

fn code(err: &EngineError) -> i64 {
    err.to_protocol().code()
}

async fn each_store(f: impl AsyncFn(bool)) {
    f(false).await;
    f(true).await;
}

#[tokio::test]
async fn create_is_durable_before_it_returns() {
    each_store(async |sqlite| {
        let rig = rig(sqlite, EngineConfig::default()).await;
        let (created, _ctx) = rig.engine.create_task("alice", "tool", TaskOptions::default()).await.unwrap();
        let value = serde_json::to_value(&created).unwrap();
        schemas().assert_valid(true, "CreateTaskResult", &value);
        assert_eq!(value["resultType"], "task");
        let stored = rig.engine.store().get(&created.task.task_id).await.unwrap().expect("stored before return");
        assert_eq!(stored.status, TaskStatus::Working);
        assert_eq!(stored.principal, "alice");
    })
    .await;
}

#[tokio::test]
async fn other_principals_see_not_found() {
    each_store(async |sqlite| {
        let rig = rig(sqlite, EngineConfig::default()).await;
        let (created, _ctx) = rig.engine.create_task("alice", "tool", TaskOptions::default()).await.unwrap();
        let id = created.task.task_id;
        assert_eq!(code(&rig.engine.get("bob", &id).await.unwrap_err()), -32602);
        assert_eq!(code(&rig.engine.cancel("bob", &id).await.unwrap_err()), -32602);
        assert_eq!(code(&rig.engine.update("bob", &id, Map::new()).await.unwrap_err()), -32602);
        assert_eq!(code(&rig.engine.get("alice", "unknown").await.unwrap_err()), -32602);
        assert_eq!(rig.engine.get("alice", &id).await.unwrap().task.status, TaskStatus::Working);
    })
    .await;
}

#[tokio::test]
async fn get_cached_answers_from_memory_exactly_as_get_or_not_at_all() {
    each_store(async |sqlite| {
        let rig = rig(sqlite, EngineConfig { default_ttl_ms: Some(1_000), ..EngineConfig::default() }).await;
        let (created, ctx) = rig.engine.create_task("alice", "tool", TaskOptions::default()).await.unwrap();
        let id = created.task.task_id;
        // A running task and a just-finished one are in memory: the same answer as `get`.
        let running = rig.engine.get_cached("alice", &id).expect("live in memory").unwrap();
        assert_eq!(detailed(&running.to_detailed()), detailed(&rig.engine.get("alice", &id).await.unwrap()));
        assert_eq!(code(&rig.engine.get_cached("bob", &id).expect("answered").unwrap_err()), -32602);
        ctx.complete(json!({"content": []})).await.unwrap();
        let finished = rig.engine.get_cached("alice", &id).expect("recently finished").unwrap();
        assert_eq!(finished.status, TaskStatus::Completed);
        // A task that memory does not hold needs the store.
        assert!(rig.engine.get_cached("alice", "unknown").is_none());
        // An expiry due to be recorded is the async read's to record.
        let (other, _work) = rig.engine.create_task("alice", "tool", TaskOptions::default()).await.unwrap();
        rig.clock.advance(1_000);
        assert!(rig.engine.get_cached("alice", &other.task.task_id).is_none());
        assert_eq!(rig.engine.get("alice", &other.task.task_id).await.unwrap().task.status, TaskStatus::Failed);
    })
    .await;
}

#[tokio::test]
async fn cancel_fires_the_token_and_discards_a_later_result() {
    each_store(async |sqlite| {
        let rig = rig(sqlite, EngineConfig::default()).await;
        let (created, ctx) = rig.engine.create_task("p", "tool", TaskOptions::default()).await.unwrap();
        let id = created.task.task_id;
        let token = ctx.cancellation();
        rig.clock.advance(10);
        rig.engine.cancel("p", &id).await.unwrap();
        assert!(token.is_cancelled());
        assert!(!ctx.complete(json!({"content": []})).await.unwrap(), "a result after cancel is discarded");
        let task = detailed(&rig.engine.get("p", &id).await.unwrap());
        assert_eq!(task["status"], "cancelled");
        assert!(task.get("result").is_none());
        // Cancel again: acknowledged, nothing changes.
        rig.clock.advance(10);
        rig.engine.cancel("p", &id).await.unwrap();
        assert_eq!(detailed(&rig.engine.get("p", &id).await.unwrap()), task);
        assert_eq!(rig.engine.live_count(), 0, "terminal tasks leave memory");
    })
    .await;
}

#[tokio::test]
async fn input_round_with_partial_answers() {
    each_store(async |sqlite| {
        let rig = rig(sqlite, EngineConfig::default()).await;
        let (created, ctx) = rig.engine.create_task("p", "tool", TaskOptions::default()).await.unwrap();
        let id = created.task.task_id.clone();
        let mut requests = Map::new();
        for key in ["a", "b"] {
            requests.insert(key.into(), json!({"method": "roots/list", "params": {}}));
        }
        let mut sub = rig.engine.subscribe("p", std::slice::from_ref(&id)).await;
        assert_eq!(sub.next().await.unwrap().task.status, TaskStatus::Working);
        let handle = ctx.handle();
        let work = tokio::spawn(async move { handle.request_input(requests).await });
        assert_eq!(sub.next().await.unwrap().task.status, TaskStatus::InputRequired);

        let mut first = Map::new();
        first.insert("a".into(), json!({"roots": []}));
        first.insert("zzz".into(), json!({"roots": []}));
        rig.engine.update("p", &id, first).await.unwrap();
        let task = detailed(&rig.engine.get("p", &id).await.unwrap());
        assert_eq!(task["status"], "input_required");
        assert_eq!(task["inputRequests"].as_object().unwrap().keys().collect::<Vec<_>>(), vec!["b"]);

        let mut second = Map::new();
        second.insert("b".into(), json!({"roots": [{"uri": "file:///x"}]}));
        rig.engine.update("p", &id, second).await.unwrap();
        let answers = work.await.unwrap().unwrap();
        assert_eq!(answers.len(), 2);
        assert_eq!(answers["b"]["roots"][0]["uri"], "file:///x");
        assert_eq!(rig.engine.get("p", &id).await.unwrap().task.status, TaskStatus::Working);
        // Answers handed to the work do not linger in the stored record.
        assert!(rig.engine.store().get(&id).await.unwrap().unwrap().answers.is_empty());

        // Keys are unique for the task's life.
        let mut again = Map::new();
        again.insert("a".into(), json!({"method": "roots/list", "params": {}}));
        assert!(matches!(ctx.request_input(again).await, Err(EngineError::Transition(_))));
        assert!(ctx.complete(json!({"content": []})).await.unwrap());
    })
    .await;
}

#[tokio::test]
async fn cancel_wakes_a_work_waiting_for_input() {
    let rig = rig(false, EngineConfig::default()).await;
    let (created, ctx) = rig.engine.create_task("p", "tool", TaskOptions::default()).await.unwrap();
    let id = created.task.task_id;
    let mut requests = Map::new();
    requests.insert("k".into(), json!({"method": "roots/list", "params": {}}));
    let mut sub = rig.engine.subscribe("p", std::slice::from_ref(&id)).await;
    sub.next().await.unwrap();
    let handle = ctx.handle();
    let work = tokio::spawn(async move { handle.request_input(requests).await });
    sub.next().await.unwrap();
    rig.engine.cancel("p", &id).await.unwrap();
    assert!(matches!(work.await.unwrap(), Err(EngineError::Cancelled)));
}

#[tokio::test]
async fn failed_is_for_protocol_errors_and_carries_the_error() {
    each_store(async |sqlite| {
        let rig = rig(sqlite, EngineConfig::default()).await;
        let (created, ctx) = rig.engine.create_task("p", "tool", TaskOptions::default()).await.unwrap();
        ctx.fail(RpcError::new(-32603, "boom").with_data(json!({"retry": false}))).await.unwrap();
        let task = detailed(&rig.engine.get("p", &created.task.task_id).await.unwrap());
        assert_eq!(task["status"], "failed");
        assert_eq!(task["statusMessage"], "boom");
        assert_eq!(task["error"], json!({"code": -32603, "message": "boom", "data": {"retry": false}}));

        let (created, ctx) = rig.engine.create_task("p", "tool", TaskOptions::default()).await.unwrap();
        ctx.complete(json!({"content": [{"type": "text", "text": "no"}], "isError": true})).await.unwrap();
        let task = detailed(&rig.engine.get("p", &created.task.task_id).await.unwrap());
        assert_eq!(task["status"], "completed");
        assert_eq!(task["result"]["isError"], true);
        assert_eq!(task["result"]["resultType"], "complete");
    })
    .await;
}

#[tokio::test]
async fn a_dropped_context_fails_the_task() {
    let rig = rig(false, EngineConfig::default()).await;
    let (created, ctx) = rig.engine.create_task("p", "tool", TaskOptions::default()).await.unwrap();
    let id = created.task.task_id;
    let mut sub = rig.engine.subscribe("p", std::slice::from_ref(&id)).await;
    sub.next().await.unwrap();
    drop(ctx);
    let task = sub.next().await.unwrap();
    assert_eq!(task.task.status, TaskStatus::Failed);
    assert_eq!(task.error.unwrap().message, NO_RESULT_MESSAGE);
}

#[tokio::test]
async fn ttl_expiry_and_purge() {
    each_store(async |sqlite| {
        let config = EngineConfig { purge_grace_ms: 1_000, ..EngineConfig::default() };
        let rig = rig(sqlite, config).await;
        let options = TaskOptions { ttl_ms: Some(Some(500)), poll_interval_ms: Some(100), ..TaskOptions::default() };
        let (created, ctx) = rig.engine.create_task("p", "tool", options).await.unwrap();
        let id = created.task.task_id;
        let (done, done_ctx) = rig.engine.create_task("p", "tool", options).await.unwrap();
        done_ctx.complete(json!({"content": []})).await.unwrap();
        rig.clock.advance(499);
        assert_eq!(rig.engine.sweep().await.unwrap().expired, 0);
        assert_eq!(rig.engine.get("p", &id).await.unwrap().task.status, TaskStatus::Working);
        rig.clock.advance(1);
        let report = rig.engine.sweep().await.unwrap();
        assert_eq!((report.expired, report.purged), (1, 0));
        assert!(ctx.is_cancelled(), "expiry stops the work");
        let task = rig.engine.get("p", &id).await.unwrap();
        assert_eq!(task.task.status, TaskStatus::Failed);
        assert_eq!(task.error.unwrap().data.unwrap()["reason"], "expired");
        // A completed task stays completed past its TTL until purged.
        assert_eq!(rig.engine.get("p", &done.task.task_id).await.unwrap().task.status, TaskStatus::Completed);
        rig.clock.advance(1_000);
        assert_eq!(rig.engine.sweep().await.unwrap().purged, 2);
        assert_eq!(code(&rig.engine.get("p", &id).await.unwrap_err()), -32602);
        assert_eq!(rig.engine.store().count().await.unwrap(), 0);
    })
    .await;
}

#[tokio::test]
async fn size_limits() {
    each_store(async |sqlite| {
        let limits = Limits {
            max_arguments_bytes: 64,
            max_input_responses_bytes: 64,
            max_result_bytes: 64,
            ..Limits::default()
        };
        let rig = rig(sqlite, EngineConfig { limits, ..EngineConfig::default() }).await;
        let mut big = Map::new();
        big.insert("x".into(), json!("y".repeat(100)));
        let err = rig.engine.check_arguments(&big).unwrap_err();
        assert_eq!(err.code(), -32602);
        let (created, ctx) = rig.engine.create_task("p", "tool", TaskOptions::default()).await.unwrap();
        let id = created.task.task_id;
        let before = rig.engine.get("p", &id).await.unwrap();
        let err = rig.engine.update("p", &id, big.clone()).await.unwrap_err();
        assert_eq!(code(&err), -32602);
        assert_eq!(rig.engine.get("p", &id).await.unwrap(), before, "an oversized update changes nothing");
        ctx.complete(json!({"content": [{"type": "text", "text": "z".repeat(100)}]})).await.unwrap();
        let task = rig.engine.get("p", &id).await.unwrap();
        assert_eq!(task.task.status, TaskStatus::Failed);
        assert_eq!(task.error.unwrap().code, -32603);
    })
    .await;
}

#[tokio::test]
async fn subscriptions_report_changes_and_end_at_terminal() {
    let rig = rig(false, EngineConfig::default()).await;
    let (a, a_ctx) = rig.engine.create_task("p", "tool", TaskOptions::default()).await.unwrap();
    let (b, _b_ctx) = rig.engine.create_task("q", "tool", TaskOptions::default()).await.unwrap();
    let ids = vec![a.task.task_id.clone(), b.task.task_id.clone(), "nope".into()];
    let mut sub = rig.engine.subscribe("p", &ids).await;
    assert_eq!(sub.accepted, vec![a.task.task_id.clone()]);
    assert_eq!(sub.next().await.unwrap().task.status, TaskStatus::Working);
    a_ctx.set_status_message("half").await.unwrap();
    assert_eq!(sub.next().await.unwrap().task.status_message.as_deref(), Some("half"));
    a_ctx.complete(json!({"content": []})).await.unwrap();
    assert_eq!(sub.next().await.unwrap().task.status, TaskStatus::Completed);
    assert!(sub.next().await.is_none());
}

#[tokio::test]
async fn next_events_batches_what_is_waiting_up_to_the_bound() {
    use mcp_tasks::protocol::server::{ListenFrames, sse_event};
    let rig = rig(false, EngineConfig::default()).await;
    let mut ids = Vec::new();
    let mut contexts = Vec::new();
    for _ in 0..5 {
        let (created, ctx) = rig.engine.create_task("p", "tool", TaskOptions::default()).await.unwrap();
        ids.push(created.task.task_id.clone());
        contexts.push(ctx);
    }
    let frames = ListenFrames::new(json!(7));
    // The same events, one at a time, from a twin subscription.
    let mut twin = rig.engine.subscribe("p", &ids).await;
    let mut one_by_one = String::new();
    for _ in 0..5 {
        one_by_one.push_str(&sse_event(&frames.task(twin.next().await.unwrap())));
    }
    let mut sub = rig.engine.subscribe("p", &ids).await;
    // A bound of one byte: one event per call.
    let first = sub.next_events(&frames, 1).await.unwrap();
    assert_eq!(first.matches("event: message").count(), 1);
    // No bound: the four other current states in one piece, in order.
    let rest = sub.next_events(&frames, usize::MAX).await.unwrap();
    assert_eq!(rest.matches("event: message").count(), 4);
    assert_eq!(format!("{first}{rest}"), one_by_one);
    // Nothing waiting: the call waits for the next change.
    let waiting = tokio::spawn(async move {
        let text = sub.next_events(&frames, usize::MAX).await;
        (sub, text)
    });
    tokio::task::yield_now().await;
    for ctx in contexts {
        ctx.complete(json!({"content": []})).await.unwrap();
    }
    let (mut sub, text) = waiting.await.unwrap();
    let frames = ListenFrames::new(json!(7));
    let mut events = text.unwrap().matches("\"completed\"").count();
    while let Some(text) = sub.next_events(&frames, usize::MAX).await {
        events += text.matches("\"completed\"").count();
    }
    // Every task reported terminal once, then the end.
    assert_eq!(events, 5);
    assert!(sub.next_events(&frames, usize::MAX).await.is_none());
}

#[tokio::test]
async fn restart_fails_abandoned_tasks_and_keeps_finished_ones() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.db");
    let clock = Arc::new(ManualClock::new(START));
    let (working, waiting, done);
    {
        let store = Arc::new(SqliteStore::open(&path).unwrap());
        assert!(matches!(SqliteStore::open(&path), Err(StoreError::Locked(_))), "one host process per file");
        let engine = Engine::builder(store.clone()).clock(clock.clone()).build().await.unwrap();
        let (w, w_ctx) = engine.create_task("p", "tool", TaskOptions::default()).await.unwrap();
        let (i, i_ctx) = engine.create_task("p", "tool", TaskOptions::default()).await.unwrap();
        let (d, d_ctx) = engine.create_task("p", "tool", TaskOptions::default()).await.unwrap();
        let mut requests = Map::new();
        requests.insert("k".into(), json!({"method": "roots/list", "params": {}}));
        let mut sub = engine.subscribe("p", std::slice::from_ref(&i.task.task_id)).await;
        sub.next().await.unwrap();
        let handle = i_ctx.handle();
        tokio::spawn(async move { handle.request_input(requests).await });
        sub.next().await.unwrap();
        d_ctx.complete(json!({"content": [{"type": "text", "text": "kept"}]})).await.unwrap();
        (working, waiting, done) = (w.task.task_id, i.task.task_id, d.task.task_id);
        // The process "dies": nothing gets to finish or fail the tasks.
        std::mem::forget(w_ctx);
        std::mem::forget(i_ctx);
        store.close();
    }
    clock.advance(60_000);
    let store = Arc::new(SqliteStore::open(&path).unwrap());
    let engine = Engine::builder(store).clock(clock.clone()).build().await.unwrap();
    for id in [&working, &waiting] {
        let task = detailed(&engine.get("p", id).await.unwrap());
        assert_eq!(task["status"], "failed", "{task}");
        assert_eq!(task["statusMessage"], ABANDONED_MESSAGE);
        assert_eq!(task["error"]["data"]["reason"], "server_restarted");
    }
    let task = detailed(&engine.get("p", &done).await.unwrap());
    assert_eq!(task["result"]["content"][0]["text"], "kept");
}

#[tokio::test]
async fn sqlite_refuses_to_change_a_terminal_row() {
    for durability in [Durability::Normal, Durability::Full] {
        sqlite_refuses_to_change_a_terminal_row_with(durability).await;
    }
}

async fn sqlite_refuses_to_change_a_terminal_row_with(durability: Durability) {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open_with(dir.path().join("t.db"), durability).unwrap();
    let mut task = mcp_tasks::protocol::TaskRecord::new("x".into(), "p".into(), "o".into(), "t".into(), 0, None, None);
    store.insert(&Arc::new(task.clone())).await.unwrap();
    let v = task.version;
    task.apply(1, mcp_tasks::protocol::TaskEvent::Cancel).unwrap();
    assert_eq!(store.update(&Arc::new(task.clone()), v, &[]).await.unwrap(), UpdateOutcome::Written);
    // Even a writer that skips the transition function cannot move a terminal row.
    let mut forged = task.clone();
    forged.status = TaskStatus::Completed;
    forged.version += 1;
    assert_eq!(store.update(&Arc::new(forged.clone()), task.version, &[]).await.unwrap(), UpdateOutcome::Conflict);
    assert_eq!(store.get("x").await.unwrap().unwrap().status, TaskStatus::Cancelled);
    assert!(matches!(store.insert(&Arc::new(task.clone())).await, Err(StoreError::Duplicate(_))));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_creates_all_land() {
    let dir = tempfile::tempdir().unwrap();
    let store: Arc<dyn TaskStore> = Arc::new(SqliteStore::open(dir.path().join("t.db")).unwrap());
    let engine = Engine::builder(store.clone()).build().await.unwrap();
    let mut joins = Vec::new();
    for _ in 0..32 {
        let engine = engine.clone();
        joins.push(tokio::spawn(async move {
            let mut ids = Vec::new();
            for _ in 0..50 {
                let (created, ctx) = engine.create_task("p", "tool", TaskOptions::default()).await.unwrap();
                ctx.complete(json!({"content": []})).await.unwrap();
                ids.push(created.task.task_id);
            }
            ids
        }));
    }
    let mut all = std::collections::HashSet::new();
    for join in joins {
        let ids = join.await.unwrap();
        assert!(ids.windows(2).all(|w| w[0] < w[1]), "ids increase within a process");
        for id in ids {
            assert_eq!(id.len(), 48, "64-bit time prefix and 128 random bits, hex");
            assert!(all.insert(id));
        }
    }
    assert_eq!(store.count().await.unwrap(), 1600);
    assert_eq!(engine.live_count(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_reads_see_every_acknowledged_write() {
    use mcp_tasks::protocol::{TaskEvent, TaskRecord};
    for durability in [Durability::Normal, Durability::Full] {
        let dir = tempfile::tempdir().unwrap();
        let store = Arc::new(SqliteStore::open_with(dir.path().join("t.db"), durability).unwrap());
        // Reads keep their snapshot between commits, and with the redo log a write moves from
        // memory to SQLite in the background; each acknowledged write must still be visible to
        // the very next read, from any reader, whichever side of that move it is on. Four
        // writers at once keep the background commits busy.
        let mut joins = Vec::new();
        for w in 0..4u64 {
            let store = Arc::clone(&store);
            joins.push(tokio::spawn(async move {
                for n in 0..150u64 {
                    let id = format!("task-{w}-{n}");
                    assert!(store.get(&id).await.unwrap().is_none());
                    let mut task = TaskRecord::new(id.clone(), "p".into(), "o".into(), "t".into(), n, None, None);
                    store.insert(&Arc::new(task.clone())).await.unwrap();
                    assert_eq!(store.get(&id).await.unwrap().unwrap().version, 1, "insert {id} visible");
                    for version in 2..=3 {
                        let before = task.version;
                        task.apply(n + version, TaskEvent::SetStatusMessage(format!("m{version}"))).unwrap();
                        assert_eq!(
                            store.update(&Arc::new(task.clone()), before, &[]).await.unwrap(),
                            UpdateOutcome::Written
                        );
                        for _ in 0..3 {
                            let got = store.get(&id).await.unwrap().unwrap().version;
                            assert_eq!(got, version, "update {id} visible to every reader ({durability:?})");
                        }
                    }
                }
            }));
        }
        for join in joins {
            join.await.unwrap();
        }
        assert_eq!(store.count().await.unwrap(), 600);
        assert_eq!(store.unfinished(None, 1000).await.unwrap().len(), 600);
    }
}

/// The child half of `sqlite_redo_log_survives_a_dead_process`: writes while another connection
/// holds SQLite's write lock (so nothing reaches the database file), then exits at once.
fn redo_child(path: &str) {
    use mcp_tasks::protocol::{TaskEvent, TaskRecord};
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let store = SqliteStore::open(path).unwrap();
    let blocker = rusqlite::Connection::open(path).unwrap();
    blocker.execute_batch("BEGIN IMMEDIATE").unwrap();
    runtime.block_on(async {
        for n in 0..50u64 {
            let mut task = TaskRecord::new(format!("task-{n}"), "p".into(), "o".into(), "t".into(), n, None, None);
            store.insert(&Arc::new(task.clone())).await.unwrap();
            if n % 2 == 0 {
                task.apply(n + 1, TaskEvent::Cancel).unwrap();
                assert_eq!(store.update(&Arc::new(task.clone()), 1, &[]).await.unwrap(), UpdateOutcome::Written);
            }
        }
    });
    // No close, no destructors: the process dies with every write only in the redo log.
    std::process::exit(0);
}

#[test]
fn sqlite_redo_log_survives_a_dead_process() {
    if let Ok(path) = std::env::var("MCP_TASKS_REDO_CHILD") {
        redo_child(&path);
    }
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.db");
    let status = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "sqlite_redo_log_survives_a_dead_process", "--test-threads=1"])
        .env("MCP_TASKS_REDO_CHILD", &path)
        .stdout(std::process::Stdio::null())
        .status()
        .unwrap();
    assert!(status.success());
    let redo = dir.path().join("t.db-redo");
    assert!(std::fs::metadata(&redo).unwrap().len() > 0, "the writes were left in the redo log");
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let store = SqliteStore::open(&path).unwrap();
        assert_eq!(std::fs::metadata(&redo).unwrap().len(), 0, "replayed into SQLite");
        assert_eq!(store.count().await.unwrap(), 50);
        for n in 0..50u64 {
            let task = store.get(&format!("task-{n}")).await.unwrap().expect("every acknowledged insert");
            let expected = if n % 2 == 0 { TaskStatus::Cancelled } else { TaskStatus::Working };
            assert_eq!(task.status, expected, "task-{n}");
        }
    });
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn closing_while_sqlite_is_locked_keeps_logged_writes_for_the_next_open() {
    use mcp_tasks::protocol::TaskRecord;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.db");
    let store = SqliteStore::open(&path).unwrap();
    // Another connection holds the write lock: the writer thread's commits fail (after SQLite's
    // busy timeout) and it keeps retrying until the store closes.
    let blocker = rusqlite::Connection::open(&path).unwrap();
    blocker.execute_batch("BEGIN IMMEDIATE").unwrap();
    let task = TaskRecord::new("kept".into(), "p".into(), "o".into(), "t".into(), 0, None, None);
    store.insert(&Arc::new(task)).await.unwrap();
    assert!(store.get("kept").await.unwrap().is_some(), "readable before SQLite has it");
    tokio::task::spawn_blocking(move || store.close()).await.unwrap();
    blocker.execute_batch("ROLLBACK").unwrap();
    drop(blocker);
    let again = SqliteStore::open(&path).unwrap();
    assert!(again.get("kept").await.unwrap().is_some(), "replayed from the redo log");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pause_in_writes_empties_the_wal() {
    use mcp_tasks::protocol::TaskRecord;
    for durability in [Durability::Normal, Durability::Full] {
        let dir = tempfile::tempdir().unwrap();
        let store = SqliteStore::open_with(dir.path().join("t.db"), durability).unwrap();
        for n in 0..200 {
            let task = TaskRecord::new(format!("task-{n}"), "p".into(), "o".into(), "t".into(), 0, None, None);
            store.insert(&Arc::new(task)).await.unwrap();
        }
        assert!(store.get("task-7").await.unwrap().is_some(), "a reader holds a snapshot now");
        let wal = dir.path().join("t.db-wal");
        // The writer checkpoints once writes pause for 50 ms, ending idle readers' snapshots
        // first; poll for it rather than guess how long that takes on a loaded machine.
        let mut size = u64::MAX;
        for _ in 0..500 {
            size = std::fs::metadata(&wal).map(|m| m.len()).unwrap_or(0);
            if size == 0 {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
        assert_eq!(size, 0, "{durability:?}: the WAL was moved into the database file");
        assert_eq!(store.count().await.unwrap(), 200);
        assert!(store.get("task-199").await.unwrap().is_some());
    }
}

fn quota_error(result: Result<impl std::fmt::Debug, EngineError>) -> Value {
    let error = result.expect_err("over the cap").to_protocol();
    assert_eq!(error.code(), -32010, "{error:?}");
    assert_eq!(error.http_status(), 200, "as the SDKs send codes the spec gives no status");
    assert_eq!(error.class(), "QuotaExceededError");
    error.to_rpc().data.expect("data says which cap")
}

/// Caps on live tasks (issue 14, item 8): a principal's cap and the server-wide one refuse the
/// create beyond them with -32010 and `data.reason`, other principals are not affected by
/// someone else's cap, a finished (completed, failed, cancelled or expired) task frees its
/// place, and concurrent creates cannot pass a cap.
#[tokio::test]
async fn caps_on_live_tasks_refuse_the_create_beyond_them() {
    for sqlite in [false, true] {
        let config = EngineConfig {
            max_live_tasks_per_principal: Some(2),
            max_live_tasks: Some(3),
            default_ttl_ms: Some(10_000),
            ..EngineConfig::default()
        };
        let rig = rig(sqlite, config).await;
        let engine = &rig.engine;
        let (a1, ctx_a1) = engine.create_task("alice", "job", TaskOptions::default()).await.unwrap();
        let (_a2, ctx_a2) = engine.create_task("alice", "job", TaskOptions::default()).await.unwrap();
        let data = quota_error(engine.create_task("alice", "job", TaskOptions::default()).await);
        assert_eq!(data, json!({"reason": "principal_quota", "limit": 2}));
        let (b1, _ctx_b1) = engine.create_task("bob", "job", TaskOptions::default()).await.unwrap();
        let data = quota_error(engine.create_task("carol", "job", TaskOptions::default()).await);
        assert_eq!(data, json!({"reason": "server_quota", "limit": 3}));
        // Finishing frees a place, whichever way the task ends.
        assert!(ctx_a1.complete(json!({"content": []})).await.unwrap());
        let (_c1, _ctx_c1) = engine.create_task("carol", "job", TaskOptions::default()).await.unwrap();
        quota_error(engine.create_task("carol", "job", TaskOptions::default()).await);
        engine.cancel("bob", &b1.task.task_id).await.unwrap();
        assert!(ctx_a2.fail(RpcError::internal("boom")).await.unwrap());
        let (_a3, _ctx_a3) = engine.create_task("alice", "job", TaskOptions::default()).await.unwrap();
        let (_a4, _ctx_a4) = engine.create_task("alice", "job", TaskOptions::default()).await.unwrap();
        quota_error(engine.create_task("alice", "job", TaskOptions::default()).await);
        // Expiry frees places too (c1, a3, a4 all expire).
        rig.clock.advance(10_001);
        assert_eq!(engine.sweep().await.unwrap().expired, 3);
        let creates: Vec<_> = (0..3).map(|_| engine.create_task("dave", "job", TaskOptions::default())).collect();
        let results = futures::future::join_all(creates).await;
        assert_eq!(results.iter().filter(|r| r.is_ok()).count(), 2, "two of three concurrent creates fit");
        let _ = a1;
    }
}

/// On a store only one process writes, the caps count after a restart as before it: the tasks
/// the dead process left are failed at start, so they hold no place.
#[tokio::test]
async fn caps_count_right_after_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.db");
    let config = EngineConfig { max_live_tasks_per_principal: Some(1), ..EngineConfig::default() };
    {
        let store = Arc::new(SqliteStore::open(&path).unwrap());
        let clock = Arc::new(ManualClock::new(START));
        let engine = common::test_engine(store.clone(), clock, "a", config.clone()).await;
        let (_t, ctx) = engine.create_task("alice", "job", TaskOptions::default()).await.unwrap();
        quota_error(engine.create_task("alice", "job", TaskOptions::default()).await);
        std::mem::forget(ctx); // the process dies with its task running
        store.close();
    }
    let store = Arc::new(SqliteStore::open(&path).unwrap());
    let clock = Arc::new(ManualClock::new(START));
    let engine = common::test_engine(store, clock, "b", config).await;
    let (_t, _ctx) = engine.create_task("alice", "job", TaskOptions::default()).await.unwrap();
    quota_error(engine.create_task("alice", "job", TaskOptions::default()).await);
}

#[tokio::test]
async fn input_is_checked_against_the_creating_requests_capabilities() {
    use mcp_tasks::protocol::{Envelope, Resume, StoredCall};
    each_store(async |sqlite| {
        let rig = rig(sqlite, EngineConfig::default()).await;
        let roots = |key: &str| {
            let mut requests = Map::new();
            requests.insert(key.into(), json!({"method": "roots/list"}));
            requests
        };
        let envelope = |caps: Value| Envelope {
            protocol_version: mcp_tasks::protocol::PROTOCOL_VERSION.into(),
            client_capabilities: caps.as_object().unwrap().clone(),
            client_info: None,
        };

        // Bound by the host: refused with -32021 naming what is missing, and nothing changes.
        let (created, mut ctx) = rig.engine.create_task("p", "tool", TaskOptions::default()).await.unwrap();
        ctx.bind_envelope(rig.engine.share_envelope(envelope(json!({"elicitation": {}}))));
        let refused = ctx.request_input(roots("a")).await.unwrap_err().to_protocol().to_rpc();
        assert_eq!(refused.code, -32021);
        assert_eq!(refused.data.unwrap()["requiredCapabilities"], json!({"roots": {}}));
        let task = detailed(&rig.engine.get("p", &created.task.task_id).await.unwrap());
        assert_eq!((task["status"].as_str(), task.get("inputRequests")), (Some("working"), None));
        // The key was not used up: the work may ask it again for what the client declared.
        assert_eq!(ctx.envelope().unwrap().client_capabilities["elicitation"], json!({}));
        let mut again = Map::new();
        again.insert("a".into(), json!({"method": "elicitation/create", "params": {"message": "m"}}));
        let mut sub = rig.engine.subscribe("p", std::slice::from_ref(&created.task.task_id)).await;
        sub.next().await.unwrap();
        let handle = ctx.handle();
        let work = tokio::spawn(async move { handle.request_input(again).await });
        assert_eq!(sub.next().await.unwrap().task.status, TaskStatus::InputRequired);
        rig.engine.cancel("p", &created.task.task_id).await.unwrap();
        assert!(matches!(work.await.unwrap(), Err(EngineError::Cancelled)));

        // A resumable task's stored call keeps the envelope; the worker that claims the task is
        // bound to it by the engine.
        let options = TaskOptions { resume: Some(Resume { max_attempts: 2, backoff_ms: 0 }), ..TaskOptions::default() };
        let call = StoredCall { envelope: Some(envelope(json!({"roots": {}}))), ..StoredCall::default() };
        let (created, ctx) = rig.engine.create_task_for("p", "tool", options, Some(call.clone())).await.unwrap();
        let handle = ctx.handle();
        let mut sub = rig.engine.subscribe("p", std::slice::from_ref(&created.task.task_id)).await;
        sub.next().await.unwrap();
        let work = tokio::spawn(async move { handle.request_input(roots("b")).await });
        assert_eq!(sub.next().await.unwrap().task.status, TaskStatus::InputRequired);
        rig.engine.cancel("p", &created.task.task_id).await.unwrap();
        assert!(matches!(work.await.unwrap(), Err(EngineError::Cancelled)));
        let created = rig.engine.enqueue_task("p", "tool", options, call).await.unwrap();
        struct Take(tokio::sync::mpsc::UnboundedSender<mcp_tasks::engine::ClaimedTask>);
        impl mcp_tasks::engine::Executor for Take {
            fn tools(&self) -> Vec<String> {
                vec!["tool".into()]
            }
            fn execute(&self, task: mcp_tasks::engine::ClaimedTask) {
                self.0.send(task).unwrap();
            }
        }
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        rig.engine.claim_for(&Take(tx)).await.unwrap();
        let claimed = rx.recv().await.unwrap();
        assert_eq!(claimed.context.task_id(), created.task.task_id);
        let mut elicit = Map::new();
        elicit.insert("c".into(), json!({"method": "elicitation/create", "params": {"message": "m"}}));
        let refused = claimed.context.request_input(elicit).await.unwrap_err().to_protocol().to_rpc();
        assert_eq!(refused.data.unwrap()["requiredCapabilities"], json!({"elicitation": {"form": {}}}));
        claimed.context.complete(json!({"content": []})).await.unwrap();
    })
    .await;
}
