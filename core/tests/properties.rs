//! Property tests of the engine (issue 14): random interleavings of create, status, input
//! request, answer, complete, fail, cancel, clock moves with sweeps, and restarts, over the
//! memory store and SQLite, checked after every step against a model of each task:
//! - a terminal task never changes (every later read is byte-identical until it is purged);
//! - an acknowledged task stays readable until its TTL plus the purge grace has passed, and
//!   reads as not-found after that;
//! - another principal never sees a task;
//! - every answer reaches the waiting work exactly once, and the status always agrees with the
//!   model (expiry and restart included);
//! - a resumable task survives a restart (SQLite) as its next attempt, claimed exactly once,
//!   until its last allowed attempt dies with it; its open questions stay open, answers given
//!   while no work held it reach the next attempt when it asks again, and an expired one is
//!   never claimed.
//!
//! `PROPTEST_CASES` sets the number of cases (64 by default here, for CI);
//! `tests/properties/run` runs 100,000.

mod common;

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use mcp_tasks::clock::ManualClock;
use mcp_tasks::engine::{ClaimedTask, EngineConfig, Executor, TaskContext, TaskOptions};
use mcp_tasks::protocol::{Resume, RpcError, StoredCall, TaskStatus};
use mcp_tasks::store::{MemoryStore, SqliteStore, TaskStore};
use mcp_tasks::{Engine, EngineError};
use proptest::prelude::*;
use serde_json::{Map, Value, json};

const START: u64 = 1_788_264_000_000;
const GRACE: u64 = 2_000;
const PRINCIPALS: [&str; 2] = ["alice", "bob"];

#[derive(Clone, Debug)]
enum Op {
    Create { principal: usize, ttl_ms: Option<u64>, resumable: bool },
    Status { task: usize },
    Ask { task: usize },
    Answer { task: usize, principal: usize },
    Complete { task: usize },
    Fail { task: usize },
    Cancel { task: usize, principal: usize },
    Advance { ms: u64 },
    Sweep,
    Restart,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        3 => (0..2usize, prop_oneof![Just(None), (500..6_000u64).prop_map(Some)], proptest::bool::weighted(0.4))
            .prop_map(|(principal, ttl_ms, resumable)| Op::Create { principal, ttl_ms, resumable }),
        1 => (0..8usize).prop_map(|task| Op::Status { task }),
        2 => (0..8usize).prop_map(|task| Op::Ask { task }),
        2 => (0..8usize, 0..2usize).prop_map(|(task, principal)| Op::Answer { task, principal }),
        2 => (0..8usize).prop_map(|task| Op::Complete { task }),
        1 => (0..8usize).prop_map(|task| Op::Fail { task }),
        1 => (0..8usize, 0..2usize).prop_map(|(task, principal)| Op::Cancel { task, principal }),
        2 => (1..4_000u64).prop_map(|ms| Op::Advance { ms }),
        1 => Just(Op::Sweep),
        1 => Just(Op::Restart),
    ]
}

/// The work's `request_input`, running.
type Asking = tokio::task::JoinHandle<Result<Map<String, Value>, EngineError>>;

/// What the model knows of one task.
struct Model {
    id: String,
    principal: usize,
    expires_at: Option<u64>,
    /// `None` while it runs; the status and the exact read once terminal.
    frozen: Option<(TaskStatus, Value)>,
    /// The keys asked and not answered yet (the task is `input_required` while there are any).
    asked: Vec<String>,
    /// Keys answered while no work waited for them (after a restart), not delivered yet.
    answered: Vec<String>,
    /// Keys an earlier attempt issued that the next one asks again.
    reissuable: Vec<String>,
    /// The work side: finishing consumes it.
    ctx: Option<TaskContext>,
    /// The work waiting for its answers, and the keys it waits for.
    waiting: Option<(Asking, Vec<String>)>,
    /// Keys whose answer reached the work.
    delivered: HashSet<String>,
    /// Resumable: a restart starts its next attempt (of at most [`MAX_ATTEMPTS`]).
    resumable: bool,
    /// The attempt its work runs.
    attempt: u32,
}

const MAX_ATTEMPTS: u32 = 3;

/// An executor that collects what a claim hands it.
struct Collect(parking_lot::Mutex<Vec<ClaimedTask>>);

impl Executor for Collect {
    fn tools(&self) -> Vec<String> {
        vec!["job".to_owned()]
    }

    fn execute(&self, task: ClaimedTask) {
        self.0.lock().push(task);
    }
}

struct Harness {
    sqlite: Option<tempfile::TempDir>,
    store: Arc<dyn TaskStore>,
    sqlite_store: Option<Arc<SqliteStore>>,
    clock: Arc<ManualClock>,
    engine: Engine,
    tasks: Vec<Model>,
    next_key: usize,
    restarts: usize,
}

fn config() -> EngineConfig {
    EngineConfig { purge_grace_ms: GRACE, finished_cache: 0, ..EngineConfig::default() }
}

impl Harness {
    async fn new(sqlite: bool) -> Self {
        let clock = Arc::new(ManualClock::new(START));
        let (dir, store, sqlite_store): (_, Arc<dyn TaskStore>, _) = if sqlite {
            let dir = tempfile::tempdir().unwrap();
            let s = Arc::new(SqliteStore::open(dir.path().join("p.db")).unwrap());
            (Some(dir), s.clone(), Some(s))
        } else {
            (None, Arc::new(MemoryStore::new()), None)
        };
        let engine = common::test_engine(store.clone(), clock.clone(), "p0", config()).await;
        Self { sqlite: dir, store, sqlite_store, clock, engine, tasks: Vec::new(), next_key: 0, restarts: 0 }
    }

    fn now(&self) -> u64 {
        self.engine.now_ms()
    }

    fn pick(&self, task: usize) -> Option<usize> {
        (!self.tasks.is_empty()).then(|| task % self.tasks.len())
    }

    /// A running task whose TTL passed is expired by the engine on its next read or sweep.
    fn settle_expiry(&mut self, i: usize) {
        let now = self.now();
        let t = &mut self.tasks[i];
        if t.frozen.is_none() && t.expires_at.is_some_and(|at| now >= at) {
            t.frozen = Some((TaskStatus::Failed, Value::Null));
        }
    }

    async fn run(&mut self, op: &Op) -> Result<(), TestCaseError> {
        match op.clone() {
            Op::Create { principal, ttl_ms, resumable } => {
                let resume = resumable.then_some(Resume { max_attempts: MAX_ATTEMPTS, backoff_ms: 0 });
                let options = TaskOptions { ttl_ms: Some(ttl_ms), poll_interval_ms: None, resume };
                let call = resumable.then(StoredCall::default);
                let (created, ctx) =
                    self.engine.create_task_for(PRINCIPALS[principal], "job", options, call).await.unwrap();
                self.tasks.push(Model {
                    id: created.task.task_id.clone(),
                    principal,
                    expires_at: ttl_ms.map(|ttl| self.now() + ttl),
                    frozen: None,
                    asked: Vec::new(),
                    answered: Vec::new(),
                    reissuable: Vec::new(),
                    ctx: Some(ctx),
                    waiting: None,
                    delivered: HashSet::new(),
                    resumable,
                    attempt: 1,
                });
            }
            Op::Status { task } => {
                let Some(i) = self.pick(task) else { return Ok(()) };
                if let Some(ctx) = &self.tasks[i].ctx {
                    let _ = ctx.set_status_message(format!("step at {}", self.now())).await;
                }
            }
            Op::Ask { task } => {
                let Some(i) = self.pick(task) else { return Ok(()) };
                self.settle_expiry(i);
                let t = &self.tasks[i];
                if t.frozen.is_some() || t.waiting.is_some() || t.ctx.is_none() {
                    return Ok(());
                }
                // A later attempt asks its earlier questions again first; otherwise a new one.
                let keys: Vec<String> = if t.reissuable.is_empty() {
                    self.next_key += 1;
                    vec![format!("k{}", self.next_key)]
                } else {
                    t.reissuable.clone()
                };
                let ask: Map<String, Value> = keys
                    .iter()
                    .map(|k| (k.clone(), json!({"method": "elicitation/create", "params": {"message": "?"}})))
                    .collect();
                let handle = t.ctx.as_ref().unwrap().handle();
                let waiting = tokio::spawn(async move { handle.request_input(ask).await });
                let (principal, id) = (PRINCIPALS[t.principal], t.id.clone());
                let t = &mut self.tasks[i];
                t.reissuable.clear();
                for key in &keys {
                    if !t.asked.contains(key) && !t.answered.contains(key) {
                        t.asked.push(key.clone());
                    }
                }
                if t.asked.is_empty() {
                    // Every key was answered while no work held the task: no question goes out,
                    // the answers come at once.
                    let got = tokio::time::timeout(Duration::from_secs(10), waiting)
                        .await
                        .expect("answers given meanwhile reach the next attempt at once")
                        .unwrap()
                        .map_err(|e| TestCaseError::fail(format!("asking again gave {e:?}")))?;
                    self.delivered(i, &got, &keys)?;
                    return Ok(());
                }
                // The request is committed before the work waits: wait until the engine shows it.
                for _ in 0..1_000 {
                    match self.engine.get(principal, &id).await {
                        Ok(task) if task.task.status == TaskStatus::InputRequired => break,
                        _ => tokio::task::yield_now().await,
                    }
                }
                self.tasks[i].waiting = Some((waiting, keys));
            }
            Op::Answer { task, principal } => {
                let Some(i) = self.pick(task) else { return Ok(()) };
                self.settle_expiry(i);
                let answers: Map<String, Value> =
                    self.tasks[i].asked.iter().map(|k| (k.clone(), json!({"action": "accept"}))).collect();
                let (id, owner) = (self.tasks[i].id.clone(), self.tasks[i].principal);
                let result = self.engine.update(PRINCIPALS[principal], &id, answers.clone()).await;
                let purged = self.purged(i);
                if principal != owner || purged {
                    prop_assert!(result.is_err(), "a foreign or purged task took an update: {result:?}");
                    return Ok(());
                }
                if self.tasks[i].frozen.is_some() || answers.is_empty() {
                    return Ok(());
                }
                prop_assert!(result.is_ok(), "an answer to a running task failed: {result:?}");
                let t = &mut self.tasks[i];
                let asked: Vec<String> = t.asked.drain(..).collect();
                t.answered.extend(asked);
                if let Some((waiting, keys)) = self.tasks[i].waiting.take() {
                    let got = tokio::time::timeout(Duration::from_secs(10), waiting)
                        .await
                        .expect("the answers reach the work within 10 s")
                        .unwrap();
                    let got = got.map_err(|e| TestCaseError::fail(format!("the waiting work got {e:?}")))?;
                    self.delivered(i, &got, &keys)?;
                }
            }
            Op::Complete { task } | Op::Fail { task } => {
                let Some(i) = self.pick(task) else { return Ok(()) };
                self.settle_expiry(i);
                let Some(ctx) = self.tasks[i].ctx.take() else { return Ok(()) };
                let finished = if matches!(op, Op::Complete { .. }) {
                    ctx.complete(json!({"content": [{"type": "text", "text": "done"}]})).await
                } else {
                    ctx.fail(RpcError::internal("work failed")).await
                };
                let was_running = self.tasks[i].frozen.is_none() && !self.purged(i);
                if !self.purged(i) {
                    prop_assert_eq!(finished.unwrap(), was_running, "finishing applies only to a running task");
                }
                if was_running {
                    let status =
                        if matches!(op, Op::Complete { .. }) { TaskStatus::Completed } else { TaskStatus::Failed };
                    self.tasks[i].frozen = Some((status, Value::Null));
                }
                if let Some((waiting, _)) = self.tasks[i].waiting.take() {
                    waiting.abort();
                }
            }
            Op::Cancel { task, principal } => {
                let Some(i) = self.pick(task) else { return Ok(()) };
                self.settle_expiry(i);
                let id = self.tasks[i].id.clone();
                let result = self.engine.cancel(PRINCIPALS[principal], &id).await;
                if principal != self.tasks[i].principal || self.purged(i) {
                    prop_assert!(result.is_err(), "a foreign or purged task was cancelled");
                    return Ok(());
                }
                prop_assert!(result.is_ok(), "{result:?}");
                if self.tasks[i].frozen.is_none() {
                    self.tasks[i].frozen = Some((TaskStatus::Cancelled, Value::Null));
                }
            }
            Op::Advance { ms } => self.clock.advance(ms),
            Op::Sweep => {
                // Exactly the stored records still running past their TTL are expired (a read may
                // already have recorded some expiries, or answered a purged task without one).
                let now = self.now();
                let mut due = 0;
                for t in &self.tasks {
                    if let Some(stored) = self.store.get(&t.id).await.unwrap()
                        && !stored.status.is_terminal()
                        && stored.expires_at_ms().is_some_and(|at| now >= at)
                    {
                        due += 1;
                    }
                }
                let report = self.engine.sweep().await.unwrap();
                prop_assert_eq!(report.expired as usize, due, "the sweep expires exactly the tasks past their TTL");
                for i in 0..self.tasks.len() {
                    self.settle_expiry(i);
                }
            }
            Op::Restart => {
                let (Some(sqlite), Some(dir)) = (self.sqlite_store.take(), self.sqlite.as_ref()) else { return Ok(()) };
                // The process dies: the store closes first, so its work can no longer write
                // (dropping a context after that fails nothing), its waiting work stops, and a
                // new engine reopens the file.
                sqlite.close();
                for t in &mut self.tasks {
                    if let Some((waiting, _)) = t.waiting.take() {
                        waiting.abort();
                    }
                    drop(t.ctx.take());
                }
                let reopened = Arc::new(SqliteStore::open(dir.path().join("p.db")).unwrap());
                self.restarts += 1;
                let prefix = format!("p{}", self.restarts);
                self.engine = common::test_engine(reopened.clone(), self.clock.clone(), &prefix, config()).await;
                self.store = reopened.clone();
                self.sqlite_store = Some(reopened);
                let now = self.now();
                let mut resumed = HashSet::new();
                for t in &mut self.tasks {
                    if t.frozen.is_some() {
                        continue;
                    }
                    if t.resumable && t.attempt < MAX_ATTEMPTS {
                        // It waits for its next attempt; its questions stay as they were.
                        t.reissuable = t.asked.iter().chain(&t.answered).cloned().collect();
                        if t.expires_at.is_none_or(|at| now < at) {
                            resumed.insert(t.id.clone());
                        }
                    } else {
                        // Failed as abandoned (or its attempts used up), or expired if its TTL had
                        // passed: failed either way.
                        t.asked.clear();
                        t.frozen = Some((TaskStatus::Failed, Value::Null));
                    }
                }
                let collect = Collect(parking_lot::Mutex::new(Vec::new()));
                let claimed = self.engine.claim_for(&collect).await.unwrap();
                prop_assert_eq!(claimed, resumed.len(), "every resumable task not expired is claimed");
                for task in collect.0.into_inner() {
                    let id = task.context.task_id().to_owned();
                    prop_assert!(resumed.remove(&id), "{} claimed without being resumable, or twice", id);
                    let t = self.tasks.iter_mut().find(|t| t.id == id).unwrap();
                    prop_assert_eq!(task.context.attempt(), t.attempt + 1, "the next attempt");
                    t.attempt = task.context.attempt();
                    t.ctx = Some(task.context);
                }
                prop_assert_eq!(self.engine.claim_for(&Collect(parking_lot::Mutex::new(Vec::new()))).await.unwrap(), 0);
            }
        }
        Ok(())
    }

    /// The answers `got` reached the work that waited for `keys`: each exactly once.
    fn delivered(&mut self, i: usize, got: &Map<String, Value>, keys: &[String]) -> Result<(), TestCaseError> {
        let t = &mut self.tasks[i];
        prop_assert_eq!(got.len(), keys.len(), "every key asked is answered");
        for key in got.keys() {
            prop_assert!(keys.contains(key), "answer {} was not asked for", key);
            prop_assert!(t.delivered.insert(key.clone()), "answer {} delivered twice", key);
        }
        t.answered.retain(|k| !got.contains_key(k));
        Ok(())
    }

    fn purged(&self, i: usize) -> bool {
        self.tasks[i].expires_at.is_some_and(|at| self.now() >= at + GRACE)
    }

    /// Every invariant, for every task the model knows.
    async fn check(&mut self) -> Result<(), TestCaseError> {
        for i in 0..self.tasks.len() {
            self.settle_expiry(i);
            let purged = self.purged(i);
            let t = &self.tasks[i];
            let (owner, other) = (PRINCIPALS[t.principal], PRINCIPALS[1 - t.principal]);
            prop_assert!(self.engine.get(other, &t.id).await.is_err(), "{} leaked to {other}", t.id);
            let read = self.engine.get(owner, &t.id).await;
            if purged {
                prop_assert!(read.is_err(), "{} is readable after its TTL and grace", t.id);
                continue;
            }
            let read = read.map_err(|e| TestCaseError::fail(format!("{} unreadable before purge: {e:?}", t.id)))?;
            let value = serde_json::to_value(&read).unwrap();
            let t = &mut self.tasks[i];
            match &mut t.frozen {
                None => {
                    let expected = if t.asked.is_empty() { TaskStatus::Working } else { TaskStatus::InputRequired };
                    prop_assert_eq!(read.task.status, expected, "{} status: {}", t.id, value);
                }
                Some((status, snapshot)) => {
                    prop_assert_eq!(read.task.status, *status, "{} status: {}", t.id, value);
                    if snapshot.is_null() {
                        *snapshot = value;
                    } else {
                        prop_assert_eq!(&value, &*snapshot, "terminal task {} changed", t.id);
                    }
                }
            }
        }
        Ok(())
    }
}

fn run_case(sqlite: bool, ops: &[Op]) -> Result<(), TestCaseError> {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    runtime.block_on(async {
        let mut harness = Harness::new(sqlite).await;
        for op in ops {
            harness.run(op).await?;
            harness.check().await?;
        }
        // Closed before the work is dropped: the end of a case writes nothing more.
        if let Some(sqlite) = &harness.sqlite_store {
            sqlite.close();
        }
        Ok(())
    })
}

fn cases(default: u32) -> ProptestConfig {
    let cases = std::env::var("PROPTEST_CASES").ok().and_then(|n| n.parse().ok()).unwrap_or(default);
    ProptestConfig { cases, failure_persistence: None, ..ProptestConfig::default() }
}

proptest! {
    #![proptest_config(cases(64))]

    #[test]
    fn the_engine_agrees_with_its_model_over_memory(ops in proptest::collection::vec(op(), 1..40)) {
        run_case(false, &ops)?;
    }

    #[test]
    fn the_engine_agrees_with_its_model_over_sqlite(ops in proptest::collection::vec(op(), 1..40)) {
        run_case(true, &ops)?;
    }
}
