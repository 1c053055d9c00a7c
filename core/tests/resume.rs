//! Work that outlives its worker, at the engine: resumable tasks run again after their process
//! dies (SQLite, found at the next start; PostgreSQL, once the worker's lease lapsed), reading
//! their checkpoint; plain ones fail as before; a cancel while no worker holds a task is final;
//! attempts stop at the maximum; workers racing to claim never run one attempt twice; and a
//! worker whose lease lapsed cannot complete a task another worker took over.
//!
//! "Dies" here is what kill -9 leaves behind: the work's context is forgotten (no drop code
//! runs) and the store is closed with the task unfinished. `tests/fixtures/tests/resume.rs`
//! does the same to real processes with SIGKILL. The SQLite tests use a manual clock and never
//! sleep; the PostgreSQL ones (`--ignored`, run by tests/run-all) wait on real leases.

mod common;

use std::sync::Arc;

use mcp_tasks::Engine;
use mcp_tasks::clock::ManualClock;
use mcp_tasks::engine::{ClaimedTask, EngineConfig, Executor, TaskOptions};
use mcp_tasks::protocol::task::ATTEMPTS_EXHAUSTED;
use mcp_tasks::protocol::{Resume, StoredCall, TaskStatus};
use mcp_tasks::store::SqliteStore;
use serde_json::{Map, Value, json};
use tokio::sync::mpsc;

const START: u64 = 1_788_264_000_000;

/// An executor that hands every claimed task to the test.
struct Collect {
    tools: Vec<String>,
    tx: mpsc::UnboundedSender<ClaimedTask>,
}

fn collector(tools: &[&str]) -> (Arc<Collect>, mpsc::UnboundedReceiver<ClaimedTask>) {
    let (tx, rx) = mpsc::unbounded_channel();
    (Arc::new(Collect { tools: tools.iter().map(|t| (*t).to_owned()).collect(), tx }), rx)
}

impl Executor for Collect {
    fn tools(&self) -> Vec<String> {
        self.tools.clone()
    }

    fn execute(&self, task: ClaimedTask) {
        let _ = self.tx.send(task);
    }
}

fn resumable(max_attempts: u32) -> TaskOptions {
    TaskOptions { resume: Some(Resume { max_attempts, backoff_ms: 100 }), ..TaskOptions::default() }
}

fn call(arguments: Value) -> StoredCall {
    StoredCall { arguments: arguments.as_object().cloned().unwrap_or_default(), ..StoredCall::default() }
}

fn text(text: &str) -> Value {
    json!({"content": [{"type": "text", "text": text}]})
}

/// One SQLite file whose "process" can die and start again.
struct Process {
    path: std::path::PathBuf,
    clock: Arc<ManualClock>,
    store: Arc<SqliteStore>,
    engine: Engine,
    starts: usize,
}

impl Process {
    async fn start(path: std::path::PathBuf, clock: Arc<ManualClock>, starts: usize) -> Self {
        let store = Arc::new(SqliteStore::open(&path).unwrap());
        // Each start has its own id prefix: a real process's ids never repeat an earlier one's.
        let engine =
            common::test_engine(store.clone(), clock.clone(), &format!("p{starts}"), EngineConfig::default()).await;
        Self { path, clock, store, engine, starts }
    }

    /// kill -9: nothing of the running work gets to finish, then the same file opens again.
    async fn crash_and_restart(self, running: Vec<mcp_tasks::TaskContext>) -> Self {
        for ctx in running {
            std::mem::forget(ctx);
        }
        self.store.close();
        let Self { path, clock, starts, .. } = self;
        Self::start(path, clock, starts + 1).await
    }
}

async fn process() -> (tempfile::TempDir, Process) {
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(ManualClock::new(START));
    let process = Process::start(dir.path().join("tasks.db"), clock, 1).await;
    (dir, process)
}

#[tokio::test]
async fn a_resumable_task_runs_again_from_its_checkpoint_after_a_restart_and_a_plain_one_fails() {
    let (_dir, p) = process().await;
    let (job, work) =
        p.engine.create_task_for("alice", "report", resumable(3), Some(call(json!({"rows": 10})))).await.unwrap();
    let job = job.task.task_id;
    assert_eq!(work.attempt(), 1);
    work.checkpoint(json!({"done": 4})).await.unwrap();
    let (plain, plain_work) = p.engine.create_task("alice", "build", TaskOptions::default()).await.unwrap();
    let plain = plain.task.task_id;

    let p = p.crash_and_restart(vec![work, plain_work]).await;
    let failed = p.engine.get("alice", &plain).await.unwrap();
    assert_eq!(failed.task.status, TaskStatus::Failed);
    assert_eq!(failed.error.unwrap().data.unwrap()["reason"], "server_restarted");
    let waiting = p.engine.get("alice", &job).await.unwrap();
    assert_eq!(waiting.task.status, TaskStatus::Working, "to the client the task goes on");
    assert!(waiting.task.status_message.as_deref().unwrap().starts_with("Resuming"), "{waiting:?}");

    let (executor, mut claimed) = collector(&["report", "build"]);
    assert_eq!(p.engine.claim_for(executor.as_ref()).await.unwrap(), 0, "not before its backoff");
    p.clock.advance(100);
    assert_eq!(p.engine.claim_for(executor.as_ref()).await.unwrap(), 1, "only the resumable task");
    let task = claimed.try_recv().unwrap();
    assert_eq!((task.context.task_id(), task.context.attempt(), task.tool.as_str()), (job.as_str(), 2, "report"));
    assert_eq!(task.call.arguments["rows"], 10);
    assert_eq!(task.context.saved_checkpoint(), Some(json!({"done": 4})));
    assert_eq!(p.engine.claim_for(executor.as_ref()).await.unwrap(), 0, "claimed once");
    assert!(p.engine.metrics_text().contains(r#"mcp_tasks_task_attempts_total{tool="report"} 1"#));
    assert!(task.context.complete(text("all 10 rows")).await.unwrap());
    let done = p.engine.get("alice", &job).await.unwrap();
    assert_eq!(done.task.status, TaskStatus::Completed);
    // A terminal row keeps neither the call nor the checkpoint.
    let stored = p.engine.store().get(&job).await.unwrap().unwrap();
    assert_eq!((stored.call, stored.checkpoint, stored.attempt), (None, None, 2));
}

#[tokio::test]
async fn attempts_stop_at_the_maximum_with_a_failure_that_says_so() {
    let (_dir, p) = process().await;
    let (job, work) = p.engine.create_task_for("alice", "report", resumable(2), Some(call(json!({})))).await.unwrap();
    let job = job.task.task_id;
    let p = p.crash_and_restart(vec![work]).await;
    p.clock.advance(100);
    let (executor, mut claimed) = collector(&["report"]);
    p.engine.claim_for(executor.as_ref()).await.unwrap();
    let second = claimed.try_recv().unwrap();
    assert_eq!(second.context.attempt(), 2);
    let p = p.crash_and_restart(vec![second.context]).await;
    let failed = p.engine.get("alice", &job).await.unwrap();
    assert_eq!(failed.task.status, TaskStatus::Failed);
    let error = failed.error.unwrap();
    assert_eq!(error.data.as_ref().unwrap()["reason"], ATTEMPTS_EXHAUSTED);
    assert_eq!(error.data.as_ref().unwrap()["attempts"], 2);
    assert!(error.message.contains("the last of the 2"), "{}", error.message);
    let metrics = p.engine.metrics_text();
    assert!(metrics.contains(r#"mcp_tasks_tasks_finished_total{tool="report",outcome="exhausted"} 1"#), "{metrics}");
    p.clock.advance(10_000);
    assert_eq!(p.engine.claim_for(executor.as_ref()).await.unwrap(), 0);
}

#[tokio::test]
async fn a_task_cancelled_while_no_worker_holds_it_is_never_run_again() {
    let (_dir, p) = process().await;
    let (job, work) = p.engine.create_task_for("alice", "report", resumable(3), Some(call(json!({})))).await.unwrap();
    let job = job.task.task_id;
    let p = p.crash_and_restart(vec![work]).await;
    p.engine.cancel("alice", &job).await.unwrap();
    p.clock.advance(60_000);
    let (executor, _claimed) = collector(&["report"]);
    assert_eq!(p.engine.claim_for(executor.as_ref()).await.unwrap(), 0);
    let p = p.crash_and_restart(Vec::new()).await;
    p.clock.advance(60_000);
    assert_eq!(p.engine.claim_for(executor.as_ref()).await.unwrap(), 0);
    assert_eq!(p.engine.get("alice", &job).await.unwrap().task.status, TaskStatus::Cancelled);
}

#[tokio::test]
async fn a_later_attempt_asking_the_same_question_gets_the_answer_given_meanwhile() {
    let (_dir, p) = process().await;
    let (job, work) = p.engine.create_task_for("alice", "report", resumable(3), Some(call(json!({})))).await.unwrap();
    let job = job.task.task_id;
    let ask = || -> Map<String, Value> {
        let mut ask = Map::new();
        ask.insert("confirm".into(), json!({"method": "elicitation/create", "params": {"message": "Go?"}}));
        ask
    };
    // The question is out when the process dies; the client answers while no worker runs it.
    let handle = work.handle();
    let asking = tokio::spawn(async move { handle.request_input(ask()).await });
    while p.engine.get("alice", &job).await.unwrap().task.status != TaskStatus::InputRequired {
        tokio::task::yield_now().await;
    }
    asking.abort();
    let p = p.crash_and_restart(vec![work]).await;
    assert_eq!(p.engine.get("alice", &job).await.unwrap().task.status, TaskStatus::InputRequired);
    let mut answer = Map::new();
    answer.insert("confirm".into(), json!({"action": "accept", "content": {"go": true}}));
    p.engine.update("alice", &job, answer).await.unwrap();
    p.clock.advance(100);
    let (executor, mut claimed) = collector(&["report"]);
    p.engine.claim_for(executor.as_ref()).await.unwrap();
    let again = claimed.try_recv().unwrap();
    let answers = again.context.request_input(ask()).await.unwrap();
    assert_eq!(answers["confirm"]["content"]["go"], true, "not asked twice");
    assert!(again.context.complete(text("went")).await.unwrap());
}

#[tokio::test]
async fn an_attempt_whose_context_is_dropped_unfinished_runs_again_and_a_plain_task_fails() {
    let (_dir, p) = process().await;
    let (job, work) = p.engine.create_task_for("alice", "report", resumable(2), Some(call(json!({})))).await.unwrap();
    let job = job.task.task_id;
    let (plain, plain_work) = p.engine.create_task("alice", "build", TaskOptions::default()).await.unwrap();
    let plain = plain.task.task_id;
    let (executor, mut claimed) = collector(&["report", "build"]);
    let runner = p.engine.spawn_executor(executor);
    // A stopping runtime drops the work's future (and its context) without finishing it.
    drop((work, plain_work));
    while !p.engine.store().get(&job).await.unwrap().unwrap().is_waiting() {
        tokio::task::yield_now().await;
    }
    p.clock.advance(100);
    let again = tokio::time::timeout(std::time::Duration::from_secs(10), claimed.recv()).await.unwrap().unwrap();
    assert_eq!((again.context.task_id(), again.context.attempt()), (job.as_str(), 2));
    let failed = p.engine.get("alice", &plain).await.unwrap();
    assert_eq!(failed.task.status, TaskStatus::Failed);
    assert_eq!(failed.error.unwrap().message, mcp_tasks::engine::NO_RESULT_MESSAGE);
    // The last attempt dropped too: the attempts are used up.
    drop(again);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let done = loop {
        let got = p.engine.get("alice", &job).await.unwrap();
        if got.task.status != TaskStatus::Working {
            break got;
        }
        assert!(std::time::Instant::now() < deadline, "never failed");
        tokio::task::yield_now().await;
    };
    assert_eq!(done.error.unwrap().data.unwrap()["reason"], ATTEMPTS_EXHAUSTED);
    runner.abort();
}

#[tokio::test]
async fn one_process_both_accepts_and_runs_tasks_enqueued_for_a_worker() {
    let (_dir, p) = process().await;
    let config = EngineConfig { max_live_tasks_per_principal: Some(1), ..EngineConfig::default() };
    let engine =
        common::test_engine(Arc::new(mcp_tasks::store::MemoryStore::new()), p.clock.clone(), "q", config).await;
    let created = engine.enqueue_task("alice", "report", TaskOptions::default(), call(json!({"n": 1}))).await.unwrap();
    let id = created.task.task_id;
    assert_eq!(engine.get("alice", &id).await.unwrap().task.status, TaskStatus::Working);
    // A waiting task holds its place under the caps.
    assert!(engine.enqueue_task("alice", "report", TaskOptions::default(), call(json!({}))).await.is_err());
    let (executor, mut claimed) = collector(&["report"]);
    let runner = engine.spawn_executor(executor);
    let task = claimed.recv().await.unwrap();
    assert_eq!((task.context.attempt(), task.call.arguments["n"].clone()), (1, json!(1)));
    engine.cancel("alice", &id).await.unwrap();
    task.context.cancelled().await;
    assert!(!task.context.complete(text("late")).await.unwrap(), "the cancel wins");
    runner.abort();
    // Finished, it gave its place back.
    engine.enqueue_task("alice", "report", TaskOptions::default(), call(json!({}))).await.unwrap();
}

#[cfg(feature = "postgres")]
mod postgres {
    use std::collections::HashSet;
    use std::time::Duration;

    use mcp_tasks::EngineError;
    use mcp_tasks::store::PostgresStore;

    use super::*;

    async fn worker(url: &str, lease_ms: u64) -> Engine {
        let store = PostgresStore::connect(url).await.expect("connects and migrates");
        let config = EngineConfig { worker_lease: Duration::from_millis(lease_ms), ..EngineConfig::default() };
        Engine::builder(Arc::new(store)).config(config).build().await.expect("builds")
    }

    fn quick() -> TaskOptions {
        TaskOptions { resume: Some(Resume { max_attempts: 3, backoff_ms: 0 }), ..TaskOptions::default() }
    }

    /// Sweeps and claims on `engine` until it has claimed `task`.
    async fn claimed_by(
        engine: &Engine,
        executor: &Collect,
        rx: &mut mpsc::UnboundedReceiver<ClaimedTask>,
    ) -> ClaimedTask {
        let deadline = std::time::Instant::now() + Duration::from_secs(15);
        loop {
            engine.sweep().await.unwrap();
            engine.claim_for(executor).await.unwrap();
            if let Ok(task) = rx.try_recv() {
                return task;
            }
            assert!(std::time::Instant::now() < deadline, "never claimed");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    #[ignore = "needs a PostgreSQL server in MCP_TASKS_PG_URL (tests/run-all starts one)"]
    async fn a_dead_workers_resumable_task_is_finished_by_another_and_the_dead_one_cannot_complete_it() {
        let url = common::pg_database().await;
        let (a, b) = (worker(&url, 300).await, worker(&url, 300).await);
        let (job, work) = a.create_task_for("alice", "report", quick(), Some(call(json!({"rows": 3})))).await.unwrap();
        let job = job.task.task_id;
        let (plain, _plain_work) = a.create_task("alice", "build", TaskOptions::default()).await.unwrap();
        work.checkpoint(json!({"done": 2})).await.unwrap();

        // Worker a stops renewing its lease (it never sweeps again): to the others it is dead.
        let (executor, mut rx) = collector(&["report", "build"]);
        let taken = claimed_by(&b, &executor, &mut rx).await;
        assert_eq!((taken.context.task_id(), taken.context.attempt()), (job.as_str(), 2));
        assert_eq!(taken.context.saved_checkpoint(), Some(json!({"done": 2})));
        let failed = b.get("alice", &plain.task.task_id).await.unwrap();
        assert_eq!(failed.task.status, TaskStatus::Failed, "a plain task fails as before");

        // The stale attempt on a is fenced off: its result does not count, its work is stopped.
        assert!(matches!(work.handle().set_status_message("still here").await, Err(EngineError::Superseded)));
        assert!(work.is_cancelled(), "the stale work's token fired");
        assert!(matches!(work.complete(text("stale")).await, Err(EngineError::Superseded)));
        assert_eq!(b.get("alice", &job).await.unwrap().task.status, TaskStatus::Working);
        assert!(taken.context.complete(text("done on b")).await.unwrap());
        let done = a.get("alice", &job).await.unwrap();
        assert_eq!(done.task.status, TaskStatus::Completed);
        assert_eq!(done.result.unwrap()["content"][0]["text"], "done on b");
    }

    /// Sweeps on `engine` until task `id` waits for a worker (its worker's lease lapsed).
    async fn released(engine: &Engine, id: &str) {
        let deadline = std::time::Instant::now() + Duration::from_secs(15);
        while !engine.store().get(id).await.unwrap().unwrap().is_waiting() {
            assert!(std::time::Instant::now() < deadline, "never released");
            engine.sweep().await.unwrap();
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    #[ignore = "needs a PostgreSQL server in MCP_TASKS_PG_URL (tests/run-all starts one)"]
    async fn on_postgres_the_last_attempt_fails_saying_so_and_a_cancel_while_waiting_is_final() {
        let url = common::pg_database().await;
        let (a, b, c) = (worker(&url, 300).await, worker(&url, 300).await, worker(&url, 300).await);
        let two = TaskOptions { resume: Some(Resume { max_attempts: 2, backoff_ms: 0 }), ..TaskOptions::default() };
        let (job, first) = a.create_task_for("alice", "report", two, Some(call(json!({})))).await.unwrap();
        let job = job.task.task_id;
        let (waiting, _waiting_work) =
            a.create_task_for("alice", "report", quick(), Some(call(json!({})))).await.unwrap();
        let waiting = waiting.task.task_id;
        // a dies: b releases both; the second is cancelled before anyone claims it.
        released(&b, &waiting).await;
        b.cancel("alice", &waiting).await.unwrap();
        let (executor, mut rx) = collector(&["report"]);
        let second = claimed_by(&b, &executor, &mut rx).await;
        assert_eq!(
            (second.context.task_id(), second.context.attempt()),
            (job.as_str(), 2),
            "only the uncancelled task runs"
        );
        // b dies during the last allowed attempt: c fails the task, saying so.
        let deadline = std::time::Instant::now() + Duration::from_secs(15);
        let failed = loop {
            c.sweep().await.unwrap();
            let got = c.get("alice", &job).await.unwrap();
            if got.task.status != TaskStatus::Working {
                break got;
            }
            assert!(std::time::Instant::now() < deadline, "the exhausted task was never failed");
            tokio::time::sleep(Duration::from_millis(50)).await;
        };
        assert_eq!(failed.task.status, TaskStatus::Failed);
        assert_eq!(failed.error.unwrap().data.unwrap()["reason"], ATTEMPTS_EXHAUSTED);
        assert_eq!(c.claim_for(executor.as_ref()).await.unwrap(), 0);
        assert_eq!(c.get("alice", &waiting).await.unwrap().task.status, TaskStatus::Cancelled);
        drop((first, second));
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    #[ignore = "needs a PostgreSQL server in MCP_TASKS_PG_URL (tests/run-all starts one)"]
    async fn workers_racing_to_claim_never_run_the_same_attempt_twice() {
        let url = common::pg_database().await;
        let front = worker(&url, 15_000).await;
        let mut ids = HashSet::new();
        for n in 0..200 {
            let created = front.enqueue_task("alice", "report", quick(), call(json!({"n": n}))).await.unwrap();
            ids.insert(created.task.task_id);
        }
        let workers = [worker(&url, 15_000).await, worker(&url, 15_000).await, worker(&url, 15_000).await];
        let (executor, mut rx) = collector(&["report"]);
        let runners: Vec<_> = workers.iter().map(|w| w.spawn_executor(executor.clone())).collect();
        let mut seen = HashSet::new();
        while seen.len() < ids.len() {
            let task =
                tokio::time::timeout(Duration::from_secs(15), rx.recv()).await.expect("claims keep coming").unwrap();
            assert_eq!(task.context.attempt(), 1);
            assert!(seen.insert(task.context.task_id().to_owned()), "{} claimed twice", task.context.task_id());
            assert!(task.context.complete(text("ok")).await.unwrap());
        }
        assert_eq!(seen, ids);
        tokio::time::sleep(Duration::from_millis(600)).await;
        assert!(rx.try_recv().is_err(), "nothing is claimed again");
        for runner in runners {
            runner.abort();
        }
        let stored = front.store().waiting(1000).await.unwrap();
        assert!(stored.is_empty(), "every task left the queue");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    #[ignore = "needs a PostgreSQL server in MCP_TASKS_PG_URL (tests/run-all starts one)"]
    async fn a_front_end_task_is_cancelled_answered_and_finished_across_processes() {
        let url = common::pg_database().await;
        let (front, back) = (worker(&url, 15_000).await, worker(&url, 15_000).await);
        let created = front.enqueue_task("alice", "report", TaskOptions::default(), call(json!({}))).await.unwrap();
        let id = created.task.task_id;
        // A cancel before any worker took it: never run.
        front.cancel("alice", &id).await.unwrap();
        let (executor, mut rx) = collector(&["report"]);
        assert_eq!(back.claim_for(executor.as_ref()).await.unwrap(), 0);

        let created = front.enqueue_task("alice", "report", TaskOptions::default(), call(json!({}))).await.unwrap();
        let id = created.task.task_id;
        back.claim_for(executor.as_ref()).await.unwrap();
        let task = rx.try_recv().unwrap();
        let mut ask = Map::new();
        ask.insert("k".into(), json!({"method": "elicitation/create", "params": {}}));
        let handle = task.context.handle();
        let asking = tokio::spawn(async move { handle.request_input(ask).await });
        let deadline = std::time::Instant::now() + Duration::from_secs(15);
        while front.get("alice", &id).await.unwrap().task.status != TaskStatus::InputRequired {
            assert!(std::time::Instant::now() < deadline);
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let mut answer = Map::new();
        answer.insert("k".into(), json!({"action": "accept"}));
        front.update("alice", &id, answer).await.unwrap();
        let answers = tokio::time::timeout(Duration::from_secs(15), asking).await.unwrap().unwrap().unwrap();
        assert_eq!(answers["k"]["action"], "accept");
        assert!(task.context.complete(text("answered")).await.unwrap());
        assert_eq!(front.get("alice", &id).await.unwrap().task.status, TaskStatus::Completed);
    }
}
