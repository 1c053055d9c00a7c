//! The client's TaskDriver against the engine as a simulated pair: one manual clock, requests
//! handed straight to the engine, time stepped to the driver's next deadline. Nothing sleeps,
//! so every count below is exact.

mod common;

use std::sync::Arc;

use mcp_tasks::clock::{Clock, ManualClock};
use mcp_tasks::engine::{Subscription, TaskOptions};
use mcp_tasks::protocol::client::{CancelMode, DriverConfig, DriverEvent, Outcome, Outgoing, TaskDriver};
use mcp_tasks::store::MemoryStore;
use mcp_tasks::{Engine, EngineConfig, TaskContext};
use serde_json::{Map, json};

const T0: u64 = 1_788_264_000_000;

struct Pair {
    engine: Engine,
    clock: Arc<ManualClock>,
    driver: TaskDriver,
    listen: Option<Subscription>,
    gets: usize,
    events: Vec<DriverEvent>,
}

impl Pair {
    async fn new(options: TaskOptions, config: EngineConfig) -> (Self, TaskContext) {
        let clock = Arc::new(ManualClock::new(T0));
        let engine = common::test_engine(Arc::new(MemoryStore::new()), clock.clone(), "t", config).await;
        let (created, ctx) = engine.create_task("p", "tool", options).await.unwrap();
        let driver = TaskDriver::new(created.task, T0, DriverConfig::default());
        (Self { engine, clock, driver, listen: None, gets: 0, events: Vec::new() }, ctx)
    }

    async fn listen(&mut self) {
        let mut sub = self.engine.subscribe("p", &[self.driver.task_id().to_owned()]).await;
        sub.next().await.unwrap(); // the current state, which the driver already has
        self.listen = Some(sub);
    }

    /// Delivers a pending notification, if the subscription has one ready.
    async fn deliver_notification(&mut self) {
        if let Some(sub) = self.listen.as_mut()
            && let Ok(Some(task)) = tokio::time::timeout(std::time::Duration::ZERO, sub.next()).await
        {
            self.driver.handle_notification(self.clock.now_ms(), task);
        }
    }

    /// Sends everything the driver wants sent, then collects its events.
    async fn flush(&mut self) {
        let now = self.clock.now_ms();
        self.driver.handle_timeout(now);
        while let Some(out) = self.driver.poll_outgoing() {
            let id = self.driver.task_id().to_owned();
            match out {
                Outgoing::Get { .. } => {
                    self.gets += 1;
                    match self.engine.get("p", &id).await {
                        Ok(task) => self.driver.handle_get(now, task),
                        Err(e) => self.driver.handle_get_error(now, &e.to_protocol().to_rpc()),
                    }
                }
                Outgoing::Update { input_responses, .. } => {
                    let result = self.engine.update("p", &id, input_responses).await;
                    self.driver.handle_ack(
                        now,
                        "tasks/update",
                        result.map_err(|e| e.to_protocol().to_rpc()).as_ref().map(|_| ()),
                    );
                }
                Outgoing::Cancel { .. } => {
                    let result = self.engine.cancel("p", &id).await;
                    self.driver.handle_ack(
                        now,
                        "tasks/cancel",
                        result.map_err(|e| e.to_protocol().to_rpc()).as_ref().map(|_| ()),
                    );
                }
            }
        }
        self.events.extend(std::iter::from_fn(|| self.driver.poll_event()));
    }

    /// Moves time to the driver's next deadline (at most `limit_ms` ahead) and flushes.
    async fn step(&mut self, limit_ms: u64) {
        if let Some(at) = self.driver.poll_timeout() {
            self.clock.set(at.min(self.clock.now_ms() + limit_ms));
        }
        self.flush().await;
    }

    fn outcome(&self) -> Option<&Outcome> {
        self.driver.outcome()
    }
}

fn options(ttl_ms: Option<u64>, poll_ms: u64) -> TaskOptions {
    TaskOptions { ttl_ms: Some(ttl_ms), poll_interval_ms: Some(poll_ms), ..TaskOptions::default() }
}

#[tokio::test]
async fn polls_at_the_servers_interval_to_completion() {
    let (mut pair, ctx) = Pair::new(options(Some(60_000), 500), EngineConfig::default()).await;
    pair.step(10_000).await; // T0 + 500: working
    assert_eq!((pair.gets, pair.clock.now_ms()), (1, T0 + 500));
    pair.clock.set(T0 + 700);
    ctx.complete(json!({"content": [{"type": "text", "text": "ok"}]})).await.unwrap();
    pair.step(10_000).await; // T0 + 1000: completed
    assert_eq!((pair.gets, pair.clock.now_ms()), (2, T0 + 1_000));
    assert!(matches!(pair.outcome(), Some(Outcome::Completed { .. })));
    assert_eq!(pair.driver.poll_timeout(), None);
}

#[tokio::test]
async fn a_notification_beats_a_huge_poll_interval() {
    let (mut pair, ctx) = Pair::new(options(None, 3_600_000), EngineConfig::default()).await;
    pair.listen().await;
    pair.clock.set(T0 + 40);
    ctx.complete(json!({"content": []})).await.unwrap();
    pair.deliver_notification().await;
    pair.flush().await;
    assert!(matches!(pair.outcome(), Some(Outcome::Completed { .. })));
    assert_eq!(pair.gets, 0, "finished at T0 + 40 ms without one poll");
}

#[tokio::test]
async fn cancel_then_observe_until_terminal() {
    let (mut pair, ctx) = Pair::new(options(Some(60_000), 500), EngineConfig::default()).await;
    pair.driver.cancel(CancelMode::Observe).unwrap();
    pair.flush().await;
    assert!(ctx.is_cancelled());
    pair.step(10_000).await;
    assert_eq!(pair.outcome(), Some(&Outcome::Cancelled));
    assert!(!ctx.complete(json!({"content": []})).await.unwrap(), "the late result is discarded");
}

#[tokio::test]
async fn two_keys_in_two_updates() {
    let (mut pair, ctx) = Pair::new(options(Some(60_000), 200), EngineConfig::default()).await;
    let mut ask = Map::new();
    for key in ["a", "b"] {
        ask.insert(key.into(), json!({"method": "roots/list", "params": {}}));
    }
    let handle = ctx.handle();
    let work = tokio::spawn(async move { handle.request_input(ask).await });
    let mut sub = pair.engine.subscribe("p", &[pair.driver.task_id().to_owned()]).await;
    while sub.next().await.unwrap().task.status != mcp_tasks::protocol::TaskStatus::InputRequired {}
    pair.step(10_000).await;
    let asked: Vec<String> = pair
        .events
        .iter()
        .filter_map(|e| match e {
            DriverEvent::InputRequested { key, .. } => Some(key.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(asked, vec!["a", "b"]);
    for key in ["a", "b"] {
        pair.driver.answer(key, json!({"roots": []})).unwrap();
        pair.flush().await;
        pair.step(10_000).await;
    }
    let answers = work.await.unwrap().unwrap();
    assert_eq!(answers.len(), 2);
    assert!(!pair.events.iter().skip(3).any(|e| matches!(e, DriverEvent::InputRequested { .. })), "asked once");
    ctx.complete(json!({"content": []})).await.unwrap();
    pair.step(10_000).await;
    assert!(matches!(pair.outcome(), Some(Outcome::Completed { .. })));
}

#[tokio::test]
async fn expired_and_gone() {
    // The client's clock passes createdAt + ttlMs before it sees a terminal state.
    let (mut pair, _ctx) = Pair::new(options(Some(1_000), 5_000), EngineConfig::default()).await;
    pair.step(60_000).await;
    assert_eq!((pair.outcome(), pair.gets), (Some(&Outcome::Expired), 0));

    // The server forgot the task (it restarted on a memory store): -32602 is "gone", not "failed".
    let (mut pair, _ctx) = Pair::new(options(Some(60_000), 500), EngineConfig::default()).await;
    pair.engine = Engine::builder(Arc::new(MemoryStore::new())).clock(pair.clock.clone()).build().await.unwrap();
    pair.step(10_000).await;
    assert_eq!(pair.outcome(), Some(&Outcome::Gone));
}
