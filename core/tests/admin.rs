//! `mcp_tasks::admin`, the operations behind the `mcp-tasks` CLI: reads and filters, a cancel
//! through the transition function (queued for a live SQLite host and applied by its sweep, so
//! the work's token fires; applied directly when no host is live), purges of terminal tasks
//! only, `tail`, and clear errors. The PostgreSQL cases need a server: `MCP_TASKS_PG_URL=$(tests/pg/start)
//! cargo test -p mcp-tasks --features postgres --test admin -- --include-ignored`.

mod common;

use std::sync::Arc;
use std::time::Duration;

use mcp_tasks::Engine;
use mcp_tasks::admin::{Admin, AdminError, Applied, Change, ListFilter};
use mcp_tasks::engine::{EngineConfig, TaskOptions};
use mcp_tasks::protocol::{Actor, HistoryEvent, TaskStatus};
use mcp_tasks::store::{AdminOutcome, SqliteStore, TaskStore};
use serde_json::json;

const WITHIN: Duration = Duration::from_secs(10);

fn fast_sweeps() -> EngineConfig {
    EngineConfig { sweep_interval: Duration::from_millis(50), ..EngineConfig::default() }
}

async fn engine(store: Arc<dyn TaskStore>) -> Engine {
    Engine::builder(store).config(fast_sweeps()).build().await.expect("builds")
}

fn url(dir: &tempfile::TempDir) -> String {
    format!("sqlite://{}", dir.path().join("tasks.db").display())
}

/// Three tasks on a SQLite file whose host then stops: `report` completed, `build` failed,
/// `watch` still working (its process "died" with it).
async fn stopped_host(dir: &tempfile::TempDir) -> [String; 3] {
    let store = Arc::new(SqliteStore::open(dir.path().join("tasks.db")).unwrap());
    let engine = engine(store.clone()).await;
    let (a, done) = engine.create_task("alice", "report", TaskOptions::default()).await.unwrap();
    done.complete(json!({"content": []})).await.unwrap();
    let (b, failed) = engine.create_task("bob", "build", TaskOptions::default()).await.unwrap();
    failed.fail(mcp_tasks::protocol::RpcError::internal("broke")).await.unwrap();
    let (c, working) = engine.create_task("alice", "watch", TaskOptions::default()).await.unwrap();
    std::mem::forget(working); // the process dies with its work: the task stays working
    drop(engine);
    store.close();
    [a.task.task_id, b.task.task_id, c.task.task_id]
}

/// Tasks in every state through `engine`, then the web view's queries through `admin`: filters
/// (several statuses, tool, principal, text, id prefix, a token's principals), keyset pages
/// newest change first, and the counts.
async fn pages_and_counts(engine: &Engine, admin: &Admin) {
    use mcp_tasks::admin::query::{Cursor, TaskQuery};
    let mut ids = Vec::new();
    for n in 0..5 {
        let (t, ctx) = engine.create_task("alice", "a", TaskOptions::default()).await.unwrap();
        ctx.complete(json!({"content": [], "n": n})).await.unwrap();
        ids.push(t.task.task_id);
    }
    let mut running = Vec::new();
    for n in 0..4 {
        let options = TaskOptions { ttl_ms: Some(if n == 0 { Some(600_000) } else { None }), ..TaskOptions::default() };
        let (t, ctx) = engine.create_task("bob", "b", options).await.unwrap();
        ctx.set_status_message(format!("Step {n} of 9 (50%)")).await.unwrap();
        ids.push(t.task.task_id);
        running.push(ctx);
    }
    for _ in 0..2 {
        let (t, ctx) = engine.create_task("carol", "a", TaskOptions::default()).await.unwrap();
        ctx.fail(mcp_tasks::protocol::RpcError::internal("broke")).await.unwrap();
        ids.push(t.task.task_id);
    }
    let (t, _ctx) = engine.create_task("carol", "c", TaskOptions::default()).await.unwrap();
    engine.cancel("carol", &t.task.task_id).await.unwrap();
    ids.push(t.task.task_id);

    let all = TaskQuery { limit: 100, ..TaskQuery::default() };
    let count = |query: TaskQuery| async move { admin.page(&query).await.unwrap().tasks.len() };
    assert_eq!(count(all.clone()).await, 12);
    let statuses = |s: &[TaskStatus]| TaskQuery { statuses: s.to_vec(), ..all.clone() };
    assert_eq!(count(statuses(&[TaskStatus::Working])).await, 4);
    assert_eq!(count(statuses(&[TaskStatus::Completed, TaskStatus::Failed])).await, 7);
    assert_eq!(count(TaskQuery { tool: Some("b".into()), ..all.clone() }).await, 4);
    assert_eq!(count(TaskQuery { principal: Some("carol".into()), ..all.clone() }).await, 3);
    assert_eq!(count(TaskQuery { text: Some("STEP 3".into()), ..all.clone() }).await, 1, "case ignored");
    assert_eq!(count(TaskQuery { text: Some("(50%)".into()), ..all.clone() }).await, 4, "% is a character");
    assert_eq!(count(TaskQuery { text: Some("_".into()), ..all.clone() }).await, 0, "_ is a character");
    let one = ids[7].clone();
    let by_id = admin.page(&TaskQuery { id_prefix: Some(one.clone()), ..all.clone() }).await.unwrap();
    assert_eq!(by_id.tasks.iter().map(|t| t.id.clone()).collect::<Vec<_>>(), [one]);
    let limited = TaskQuery { principals: Some(vec!["alice".into(), "carol".into()]), ..all.clone() };
    assert_eq!(count(limited.clone()).await, 8);
    assert_eq!(count(TaskQuery { principals: Some(vec![]), ..all.clone() }).await, 0, "a token limited to none");
    let soon = TaskQuery { expiring_before_ms: Some(u64::MAX / 2), ..all.clone() };
    assert_eq!(count(soon).await, 1, "the one unfinished task with a TTL");

    // Keyset pages of 5: every task once, newest change first.
    let mut seen = Vec::new();
    let mut after: Option<Cursor> = None;
    loop {
        let page = admin.page(&TaskQuery { limit: 5, after: after.clone(), ..TaskQuery::default() }).await.unwrap();
        assert!(page.tasks.len() <= 5);
        seen.extend(page.tasks.iter().map(|t| (t.updated_at_ms, t.id.clone())));
        match page.next {
            Some(next) => after = Some(next),
            None => break,
        }
    }
    assert_eq!(seen.len(), 12, "{seen:?}");
    let mut sorted = seen.clone();
    sorted.sort_by(|a, b| b.cmp(a));
    assert_eq!(seen, sorted, "newest change first, ties by id");

    let overview = admin.overview(&all).await.unwrap();
    let counts: Vec<u64> = overview.by_status.iter().map(|(_, n)| *n).collect();
    assert_eq!(counts, [4, 0, 5, 2, 1], "working, input_required, completed, failed, cancelled");
    assert_eq!(overview.expiring_within_hour, 1);
    let theirs = admin.overview(&limited).await.unwrap();
    assert_eq!(theirs.by_status.iter().map(|(_, n)| *n).sum::<u64>(), 8, "counts keep to the token's principals");

    // The chart's hour: every task was created in it, and those that ended, ended in it.
    let now = mcp_tasks::clock::Clock::now_ms(&mcp_tasks::clock::SystemClock);
    let hour = admin.activity(None, now).await.unwrap();
    assert_eq!(hour.minutes.len(), 60);
    assert_eq!(hour.first_minute_ms, (now / 60_000 - 59) * 60_000);
    let sum = |f: fn(&mcp_tasks::admin::query::MinuteCounts) -> u64, a: &mcp_tasks::admin::query::Activity| {
        a.minutes.iter().map(f).sum::<u64>()
    };
    assert_eq!(
        [sum(|m| m.created, &hour), sum(|m| m.completed, &hour), sum(|m| m.failed, &hour), sum(|m| m.cancelled, &hour)],
        [12, 5, 2, 1]
    );
    let carols = admin.activity(Some(&["carol".to_owned()]), now).await.unwrap();
    assert_eq!([sum(|m| m.created, &carols), sum(|m| m.failed, &carols), sum(|m| m.completed, &carols)], [3, 2, 0]);
    let later = admin.activity(None, now + 2 * 3_600_000).await.unwrap();
    assert_eq!(sum(|m| m.created, &later), 0, "an hour that holds none of them");
    drop(running);
}

/// Waits (at most 5 s) for `admin`'s change mark to move from `from`; returns where it went.
async fn mark_moves(admin: &Admin, from: u64, what: &str) -> u64 {
    for _ in 0..500 {
        let now = admin.change_mark().await.unwrap();
        if now != from {
            return now;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("the change mark did not move after {what}");
}

/// The mark the web view's live updates watch moves with a creation, a change by another
/// process, and this admin's own cancel.
async fn change_marks(engine: &Engine, admin: &Admin) {
    let first = admin.change_mark().await.unwrap();
    let (t, ctx) = engine.create_task("alice", "mark", TaskOptions::default()).await.unwrap();
    let created = mark_moves(admin, first, "a creation").await;
    ctx.set_status_message("half way").await.unwrap();
    let changed = mark_moves(admin, created, "a change").await;
    admin.cancel_as(&t.task.task_id, "ana").await.unwrap();
    mark_moves(admin, changed, "the admin's own cancel").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_change_mark_moves_with_every_write_on_sqlite() {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open_with(dir.path().join("tasks.db"), mcp_tasks::store::Durability::Full).unwrap();
    let engine = engine(Arc::new(store)).await;
    let _sweeper = engine.spawn_sweeper();
    let admin = Admin::open(&url(&dir)).await.unwrap().with_wait(Duration::from_secs(5));
    change_marks(&engine, &admin).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_web_views_pages_and_counts_on_sqlite() {
    let dir = tempfile::tempdir().unwrap();
    // Durability::Full: each write is in SQLite when it returns, so the admin reads it at once.
    let store = SqliteStore::open_with(dir.path().join("tasks.db"), mcp_tasks::store::Durability::Full).unwrap();
    let engine = engine(Arc::new(store)).await;
    let admin = Admin::open(&url(&dir)).await.unwrap();
    pages_and_counts(&engine, &admin).await;
}

/// What the web view asks of two processes over one store (`a` and `b`, as two workers): the
/// change id is the store's (the same on both, moving with a change, per principal scope), a
/// session one starts the other knows and a sign-out on either ends, and one request cancels
/// many tasks (an outcome each, the operator in every history) and purges them.
async fn two_operator_processes(engine: &Engine, a: &Admin, b: &Admin) {
    use mcp_tasks::admin::Session;
    use mcp_tasks::store::{TaskOutcome, TaskResult};
    let mut ids = Vec::new();
    let mut running = Vec::new();
    for n in 0..40 {
        let (t, ctx) = engine.create_task(["alice", "bob"][n % 2], "many", TaskOptions::default()).await.unwrap();
        ids.push(t.task.task_id);
        running.push(ctx);
    }
    // Both processes see every task before the ids are compared.
    for _ in 0..500 {
        if a.show_many(&ids).await.unwrap().len() == ids.len() && b.show_many(&ids).await.unwrap().len() == ids.len() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let bob = ["bob".to_owned()];
    let (all, bobs) = (a.change_id(None).await.unwrap(), a.change_id(Some(&bob)).await.unwrap());
    assert_eq!(all, b.change_id(None).await.unwrap(), "one id for the store, whichever process reads it");
    assert_eq!(bobs, b.change_id(Some(&bob)).await.unwrap());
    assert_eq!(a.change_id(Some(&[])).await.unwrap(), "0.0", "an empty scope sees nothing");
    // Alice's task changes: the whole store's id moves, bob's scope does not.
    tokio::time::sleep(Duration::from_millis(5)).await;
    running[0].set_status_message("alice's news").await.unwrap();
    let mut moved = all.clone();
    for _ in 0..500 {
        moved = b.change_id(None).await.unwrap();
        if moved != all {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_ne!(moved, all, "a change moves the id");
    assert_eq!(b.change_id(Some(&bob)).await.unwrap(), bobs, "bob's scope hears nothing of alice's task");

    // Sessions: started on a, known to b, ended by b for both.
    let session = Session { operator: "ana".into(), token: [7; 32], expires_at_ms: u64::MAX / 4 };
    assert_eq!(b.session([1; 32], 0).await.unwrap(), None, "no table yet is no session");
    a.start_session([1; 32], &session, 1).await.unwrap();
    assert_eq!(b.session([1; 32], 2).await.unwrap(), Some(session.clone()));
    assert_eq!(b.session([1; 32], u64::MAX / 4).await.unwrap(), None, "ended by its expiry");
    assert!(b.end_session([1; 32]).await.unwrap());
    assert_eq!(a.session([1; 32], 2).await.unwrap(), None);
    assert!(!a.end_session([1; 32]).await.unwrap());

    // Many tasks in one request: one outcome each, in the order named.
    let mut named = ids[..30].to_vec();
    named.push("no-such-task".into());
    let applied = a.cancel_tasks(&named, "ana").await.unwrap();
    let Applied::Done(AdminOutcome::Each { tasks }) = applied else { panic!("{applied:?}") };
    assert_eq!(tasks.len(), 31);
    assert!(tasks[..30].iter().all(|t| t.outcome == TaskOutcome::Cancelled), "{tasks:?}");
    assert_eq!(tasks[30], TaskResult { task_id: "no-such-task".into(), outcome: TaskOutcome::NotFound });
    for id in &ids[..30] {
        let history = b.history(id).await.unwrap();
        assert!(
            history
                .entries
                .iter()
                .any(|e| e.event == HistoryEvent::CancelRequested { by: Actor::Operator("ana".into()) }),
            "{history:?}"
        );
    }
    let again = a.cancel_tasks(&ids[..1], "ana").await.unwrap();
    let Applied::Done(AdminOutcome::Each { tasks }) = again else { panic!("{again:?}") };
    assert!(matches!(tasks[0].outcome, TaskOutcome::AlreadyTerminal { status: TaskStatus::Cancelled }));
    // A purge of cancelled and working tasks: the finished go, the live stay and are named.
    let named = [ids[0].clone(), ids[1].clone(), ids[35].clone(), "no-such-task".to_owned()];
    let applied = b.purge_each(&named).await.unwrap();
    let Applied::Done(AdminOutcome::Each { tasks }) = applied else { panic!("{applied:?}") };
    let outcomes: Vec<&TaskOutcome> = tasks.iter().map(|t| &t.outcome).collect();
    assert_eq!(
        outcomes,
        [
            &TaskOutcome::Purged,
            &TaskOutcome::Purged,
            &TaskOutcome::Unfinished { status: TaskStatus::Working },
            &TaskOutcome::NotFound
        ]
    );
    assert!(a.show(&ids[0]).await.unwrap().is_none() && a.show(&ids[35]).await.unwrap().is_some());
    drop(running);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_processes_share_change_ids_sessions_and_many_task_actions_on_sqlite() {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(dir.path().join("tasks.db")).unwrap();
    let engine = engine(Arc::new(store)).await;
    let _sweeper = engine.spawn_sweeper();
    let a = Admin::open(&url(&dir)).await.unwrap();
    let b = Admin::open(&url(&dir)).await.unwrap();
    two_operator_processes(&engine, &a, &b).await;
}

#[tokio::test]
async fn without_a_live_host_many_tasks_are_cancelled_on_one_opening_of_the_store() {
    let dir = tempfile::tempdir().unwrap();
    let [report, _build, watch] = stopped_host(&dir).await;
    let admin = Admin::open(&url(&dir)).await.unwrap();
    let applied = admin.cancel_tasks(&[watch.clone(), report.clone()], "ana").await.unwrap();
    let Applied::Done(AdminOutcome::Each { tasks }) = applied else { panic!("{applied:?}") };
    assert_eq!(tasks[0].outcome, mcp_tasks::store::TaskOutcome::Cancelled);
    assert!(matches!(tasks[1].outcome, mcp_tasks::store::TaskOutcome::AlreadyTerminal { .. }));
    assert_eq!(admin.show(&watch).await.unwrap().unwrap().status, TaskStatus::Cancelled);
}

#[tokio::test]
async fn reads_filter_by_status_tool_principal_and_age_newest_first() {
    let dir = tempfile::tempdir().unwrap();
    let [report, build, watch] = stopped_host(&dir).await;
    let admin = Admin::open(&url(&dir)).await.unwrap();
    let ids = |tasks: Vec<mcp_tasks::protocol::TaskRecord>| tasks.into_iter().map(|t| t.id).collect::<Vec<_>>();
    let all = admin.list(&ListFilter::default()).await.unwrap();
    assert_eq!(ids(all), [watch.clone(), build.clone(), report.clone()], "newest first");
    let failed = ListFilter { status: Some(TaskStatus::Failed), ..ListFilter::default() };
    assert_eq!(ids(admin.list(&failed).await.unwrap()), [build.as_str()]);
    let alice = ListFilter { principal: Some("alice".into()), ..ListFilter::default() };
    assert_eq!(ids(admin.list(&alice).await.unwrap()), [watch.clone(), report.clone()]);
    let tool = ListFilter { tool: Some("watch".into()), ..ListFilter::default() };
    assert_eq!(ids(admin.list(&tool).await.unwrap()), [watch.as_str()]);
    let future = ListFilter { created_after_ms: Some(u64::MAX / 2), ..ListFilter::default() };
    assert!(admin.list(&future).await.unwrap().is_empty());
    let old = ListFilter { created_before_ms: Some(u64::MAX / 2), limit: Some(1), ..ListFilter::default() };
    assert_eq!(ids(admin.list(&old).await.unwrap()), [watch.as_str()]);

    assert_eq!(admin.show(&build).await.unwrap().unwrap().status, TaskStatus::Failed);
    assert!(admin.show("no-such-task").await.unwrap().is_none());
    let stats: Vec<(String, String, u64)> =
        admin.stats().await.unwrap().into_iter().map(|c| (c.status, c.tool, c.count)).collect();
    assert_eq!(
        stats,
        [
            ("completed".into(), "report".into(), 1),
            ("failed".into(), "build".into(), 1),
            ("working".into(), "watch".into(), 1)
        ]
    );
}

#[tokio::test]
async fn without_a_live_host_a_cancel_and_a_purge_apply_directly_and_terminal_states_stay() {
    let dir = tempfile::tempdir().unwrap();
    let [report, build, watch] = stopped_host(&dir).await;
    let admin = Admin::open(&url(&dir)).await.unwrap();
    assert_eq!(admin.cancel(&watch).await.unwrap(), Applied::Done(AdminOutcome::Cancelled));
    assert_eq!(
        admin.cancel(&report).await.unwrap(),
        Applied::Done(AdminOutcome::AlreadyTerminal { status: TaskStatus::Completed })
    );
    assert_eq!(admin.cancel("no-such-task").await.unwrap(), Applied::Done(AdminOutcome::NotFound));
    // Nothing was last changed before the epoch and no TTL ended: nothing goes.
    assert_eq!(admin.purge(0).await.unwrap(), Applied::Done(AdminOutcome::Purged { count: 0 }));
    assert_eq!(admin.purge(u64::MAX / 2).await.unwrap(), Applied::Done(AdminOutcome::Purged { count: 3 }));

    // The file is free again, and what the admin did is what a host finds.
    let store = SqliteStore::open(dir.path().join("tasks.db")).expect("the admin released the store");
    for id in [report, build, watch] {
        assert!(store.get(&id).await.unwrap().is_none(), "{id} purged");
    }
}

#[tokio::test]
async fn a_purge_never_deletes_a_live_task() {
    let dir = tempfile::tempdir().unwrap();
    let [_, _, watch] = stopped_host(&dir).await;
    let admin = Admin::open(&url(&dir)).await.unwrap();
    assert_eq!(admin.purge(u64::MAX / 2).await.unwrap(), Applied::Done(AdminOutcome::Purged { count: 2 }));
    assert_eq!(admin.show(&watch).await.unwrap().unwrap().status, TaskStatus::Working);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_a_live_host_a_cancel_is_queued_applied_by_its_sweep_and_reaches_the_work() {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(SqliteStore::open(dir.path().join("tasks.db")).unwrap());
    let engine = engine(store.clone()).await;
    let sweeper = engine.spawn_sweeper();
    let (created, ctx) = engine.create_task("alice", "job", TaskOptions::default()).await.unwrap();
    let id = created.task.task_id;
    let token = ctx.handle();

    ctx.set_status_message("halfway").await.unwrap();
    let admin = Admin::open(&url(&dir)).await.unwrap().with_operator("ana");
    assert_eq!(admin.cancel(&id).await.unwrap(), Applied::Done(AdminOutcome::Cancelled));
    tokio::time::timeout(WITHIN, token.cancelled()).await.expect("the host's engine stopped the work");
    // The host's engine wrote the cancel's history with the operator's name, as the CLI reads it.
    let events: Vec<HistoryEvent> = admin.history(&id).await.unwrap().entries.into_iter().map(|e| e.event).collect();
    assert_eq!(
        events,
        [
            HistoryEvent::Created { tool: "job".into(), principal: "alice".into(), queued: false },
            HistoryEvent::Message { message: "halfway".into() },
            HistoryEvent::CancelRequested { by: Actor::Operator("ana".into()) },
            HistoryEvent::Status { status: TaskStatus::Cancelled, message: Some("Task cancelled".into()) },
        ]
    );
    assert_eq!(engine.get("alice", &id).await.unwrap().task.status, TaskStatus::Cancelled);
    assert!(!ctx.complete(json!({"content": []})).await.unwrap(), "a late result is discarded");
    assert_eq!(
        admin.cancel(&id).await.unwrap(),
        Applied::Done(AdminOutcome::AlreadyTerminal { status: TaskStatus::Cancelled })
    );

    // Without waiting, the request is reported queued for this process, and still applied.
    let (second, ctx2) = engine.create_task("alice", "job", TaskOptions::default()).await.unwrap();
    let admin = admin.with_wait(Duration::ZERO);
    match admin.cancel(&second.task.task_id).await.unwrap() {
        Applied::Queued { pid, .. } => assert_eq!(pid, Some(std::process::id())),
        other => panic!("expected a queued request, got {other:?}"),
    }
    tokio::time::timeout(WITHIN, ctx2.handle().cancelled()).await.expect("applied at a later sweep");

    // A purge goes through the host too, and deletes only terminal tasks.
    let (live, _work) = engine.create_task("alice", "job", TaskOptions::default()).await.unwrap();
    let admin = admin.with_wait(WITHIN);
    assert_eq!(admin.purge(u64::MAX / 2).await.unwrap(), Applied::Done(AdminOutcome::Purged { count: 2 }));
    assert_eq!(engine.get("alice", &live.task.task_id).await.unwrap().task.status, TaskStatus::Working);
    sweeper.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tail_reports_creations_changes_and_ends_on_a_live_sqlite_host() {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(SqliteStore::open(dir.path().join("tasks.db")).unwrap());
    let engine = engine(store.clone()).await;
    let admin = Admin::open(&url(&dir)).await.unwrap();
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let tail = tokio::spawn(async move {
        admin.tail(Duration::from_millis(20), move |change| tx.send(change).is_ok()).await.unwrap();
    });
    tokio::time::sleep(Duration::from_millis(100)).await;
    let (created, ctx) = engine.create_task("alice", "job", TaskOptions::default()).await.unwrap();
    let id = created.task.task_id;
    let mut seen = Vec::new();
    let mut next = async || match tokio::time::timeout(WITHIN, rx.recv()).await.expect("a change").unwrap() {
        Change::Task(task) => (task.id.clone(), task.status, task.status_message.clone()),
        Change::Gone(id) => panic!("{id} reported gone"),
    };
    seen.push(next().await);
    ctx.handle().set_status_message("halfway").await.unwrap();
    seen.push(next().await);
    ctx.complete(json!({"content": []})).await.unwrap();
    seen.push(next().await);
    assert_eq!(
        seen,
        [
            (id.clone(), TaskStatus::Working, None),
            (id.clone(), TaskStatus::Working, Some("halfway".to_owned())),
            (id.clone(), TaskStatus::Completed, Some("halfway".to_owned()))
        ]
    );
    tail.abort();
}

#[tokio::test]
async fn wrong_urls_missing_files_and_foreign_databases_are_clear_errors() {
    let dir = tempfile::tempdir().unwrap();
    let missing = format!("sqlite://{}", dir.path().join("absent.db").display());
    assert!(matches!(Admin::open(&missing).await, Err(AdminError::NoStore(_))));
    // The admin never creates a store.
    assert!(!dir.path().join("absent.db").exists());
    let foreign = dir.path().join("other.db");
    rusqlite::Connection::open(&foreign).unwrap().execute_batch("CREATE TABLE notes (x)").unwrap();
    let error = Admin::open(&format!("sqlite://{}", foreign.display())).await.unwrap_err();
    assert!(matches!(error, AdminError::NotAStore(_)), "{error}");
    assert!(error.to_string().contains("no tasks table"), "{error}");
    for bad in ["memory://", "redis://localhost", "tasks.db"] {
        let error = Admin::open(bad).await.unwrap_err();
        assert!(matches!(error, AdminError::InvalidUrl(_)), "{bad}: {error}");
    }
}

#[cfg(feature = "postgres")]
mod postgres {
    use super::*;
    use mcp_tasks::store::PostgresStore;

    async fn worker(url: &str) -> Engine {
        let store = PostgresStore::connect(url).await.expect("connects and migrates");
        Engine::builder(Arc::new(store)).config(fast_sweeps()).build().await.expect("builds")
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    #[ignore = "needs a PostgreSQL server in MCP_TASKS_PG_URL (tests/run-all starts one)"]
    async fn the_web_views_pages_and_counts_on_postgres() {
        let url = common::pg_database().await;
        let w = worker(&url).await;
        let admin = Admin::open(&url).await.unwrap();
        pages_and_counts(&w, &admin).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    #[ignore = "needs a PostgreSQL server in MCP_TASKS_PG_URL (tests/run-all starts one)"]
    async fn two_processes_share_change_ids_sessions_and_many_task_actions_on_postgres() {
        let url = common::pg_database().await;
        let w = worker(&url).await;
        let a = Admin::open(&url).await.unwrap();
        let b = Admin::open(&url).await.unwrap();
        two_operator_processes(&w, &a, &b).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    #[ignore = "needs a PostgreSQL server in MCP_TASKS_PG_URL (tests/run-all starts one)"]
    async fn the_change_mark_moves_with_every_write_on_postgres() {
        let url = common::pg_database().await;
        let w = worker(&url).await;
        let admin = Admin::open(&url).await.unwrap();
        change_marks(&w, &admin).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    #[ignore = "needs a PostgreSQL server in MCP_TASKS_PG_URL (tests/run-all starts one)"]
    async fn on_postgres_reads_a_cancel_reaching_the_worker_a_purge_and_the_change_feed() {
        let url = common::pg_database().await;
        let error = Admin::open(&url).await.unwrap_err();
        assert!(matches!(error, AdminError::NotAStore(_)), "a database no server used: {error}");

        let w = worker(&url).await;
        let admin = Admin::open(&url).await.unwrap();
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let tail_admin = Admin::open(&url).await.unwrap();
        let tail = tokio::spawn(async move {
            tail_admin.tail(Duration::from_millis(20), move |change| tx.send(change).is_ok()).await.unwrap();
        });
        tokio::time::sleep(Duration::from_millis(200)).await;

        let (done, ctx) = w.create_task("alice", "report", TaskOptions::default()).await.unwrap();
        ctx.complete(json!({"content": []})).await.unwrap();
        let (running, work) = w.create_task("bob", "watch", TaskOptions::default()).await.unwrap();
        let (done, running) = (done.task.task_id, running.task.task_id);

        let listed: Vec<String> = admin.list(&ListFilter::default()).await.unwrap().into_iter().map(|t| t.id).collect();
        assert_eq!(listed, [running.clone(), done.clone()], "newest first");
        let bob = ListFilter { principal: Some("bob".into()), tool: Some("watch".into()), ..ListFilter::default() };
        assert_eq!(admin.list(&bob).await.unwrap().len(), 1);
        assert_eq!(admin.stats().await.unwrap().len(), 2);

        assert_eq!(admin.cancel(&running).await.unwrap(), Applied::Done(AdminOutcome::Cancelled));
        tokio::time::timeout(WITHIN, work.handle().cancelled()).await.expect("the worker running it stopped it");
        let history = admin.history(&running).await.unwrap();
        let by = history.entries.iter().find_map(|e| match &e.event {
            HistoryEvent::CancelRequested { by } => Some(by.clone()),
            _ => None,
        });
        assert_eq!(by, Some(Actor::Operator("operator".into())), "{history:?}");
        assert_eq!(admin.history(&done).await.unwrap().entries.len(), 3, "created, result, completed");
        assert_eq!(
            admin.cancel(&done).await.unwrap(),
            Applied::Done(AdminOutcome::AlreadyTerminal { status: TaskStatus::Completed })
        );

        // The change feed showed both tasks from their creation to their end.
        let mut last = std::collections::HashMap::new();
        while last.get(&running) != Some(&TaskStatus::Cancelled) || last.get(&done) != Some(&TaskStatus::Completed) {
            match tokio::time::timeout(WITHIN, rx.recv()).await.expect("a change").unwrap() {
                Change::Task(task) => last.insert(task.id.clone(), task.status),
                Change::Gone(id) => panic!("{id} gone"),
            };
        }
        tail.abort();

        assert_eq!(admin.purge(u64::MAX / 2).await.unwrap(), Applied::Done(AdminOutcome::Purged { count: 2 }));
        assert!(admin.list(&ListFilter::default()).await.unwrap().is_empty());
    }
}
