//! An engine's metrics (Prometheus exposition text): every outcome is counted once under its
//! name, the in-flight gauge follows the running tasks, and the host serves the text only on the
//! route it was asked for. (Trace events: `traces.rs`.)

use std::sync::Arc;

use mcp_tasks::clock::{ManualClock, SequentialIds};
use mcp_tasks::engine::{EngineConfig, TaskOptions};
use mcp_tasks::host::{Host, Tool, handler_fn, text_result};
use mcp_tasks::protocol::RpcError;
use mcp_tasks::store::MemoryStore;
use mcp_tasks::{Engine, metrics};
use serde_json::json;

const START: u64 = 1_788_264_000_000;

async fn engine(clock: Arc<ManualClock>) -> Engine {
    Engine::builder(Arc::new(MemoryStore::new()))
        .clock(clock)
        .ids(Arc::new(SequentialIds::new("task")))
        .config(EngineConfig { default_ttl_ms: Some(1_000), ..EngineConfig::default() })
        .build()
        .await
        .unwrap()
}

/// The value of the sample `name{labels}` in `text`.
fn sample(text: &str, series: &str) -> Option<f64> {
    text.lines().find_map(|line| line.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
}

#[tokio::test]
async fn each_outcome_is_counted_once_with_durations_and_the_gauge_follows_running_tasks() {
    let clock = Arc::new(ManualClock::new(START));
    let engine = engine(clock.clone()).await;
    let (_, done) = engine.create_task("alice", "report", TaskOptions::default()).await.unwrap();
    let (_, broke) = engine.create_task("alice", "report", TaskOptions::default()).await.unwrap();
    let (cancelled, _work) = engine.create_task("alice", "report", TaskOptions::default()).await.unwrap();
    let (_, _lapses) = engine.create_task("bob", "watch", TaskOptions::default()).await.unwrap();
    let (_, _runs) =
        engine.create_task("bob", "watch", TaskOptions { ttl_ms: Some(None), ..TaskOptions::default() }).await.unwrap();
    let text = engine.metrics_text();
    assert_eq!(sample(&text, "mcp_tasks_tasks_in_flight"), Some(5.0), "{text}");

    clock.advance(250);
    done.complete(json!({"content": []})).await.unwrap();
    broke.fail(RpcError::internal("broke")).await.unwrap();
    engine.cancel("alice", &cancelled.task.task_id).await.unwrap();
    clock.advance(1_000);
    assert_eq!(engine.sweep().await.unwrap().expired, 1);

    let text = engine.metrics_text();
    assert!(text.ends_with("# EOF\n"), "OpenMetrics text ends with # EOF");
    assert_eq!(sample(&text, r#"mcp_tasks_tasks_created_total{tool="report"}"#), Some(3.0));
    assert_eq!(sample(&text, r#"mcp_tasks_tasks_created_total{tool="watch"}"#), Some(2.0));
    for (tool, outcome) in
        [("report", "completed"), ("report", "failed"), ("report", "cancelled"), ("watch", "expired")]
    {
        let series = format!(r#"mcp_tasks_tasks_finished_total{{tool="{tool}",outcome="{outcome}"}}"#);
        assert_eq!(sample(&text, &series), Some(1.0), "{series} in\n{text}");
    }
    assert_eq!(sample(&text, "mcp_tasks_tasks_in_flight"), Some(1.0));
    assert_eq!(sample(&text, r#"mcp_tasks_task_duration_seconds_count{tool="report"}"#), Some(3.0));
    assert_eq!(sample(&text, r#"mcp_tasks_task_duration_seconds_sum{tool="report"}"#), Some(0.75));
    assert_eq!(sample(&text, r#"mcp_tasks_store_write_seconds_count{op="insert"}"#), Some(5.0));
    // A second cancel changes nothing and counts nothing.
    engine.cancel("alice", &cancelled.task.task_id).await.unwrap();
    let again = engine.metrics_text();
    assert_eq!(sample(&again, r#"mcp_tasks_tasks_finished_total{tool="report",outcome="cancelled"}"#), Some(1.0));
}

#[tokio::test]
async fn the_host_serves_metrics_only_on_the_route_it_was_given() {
    use tower::ServiceExt as _;
    let clock = Arc::new(ManualClock::new(START));
    let engine = engine(clock).await;
    let tool = Tool::new("greet", handler_fn(|_call, _ctx| async move { Ok(text_result("hi")) }));
    let host = Host::builder(engine).tool(tool).build();
    let app = host.router("/mcp").merge(host.metrics_router("/metrics"));
    let get = |path: &str| http::Request::get(path).body(axum::body::Body::empty()).unwrap();
    let answer = app.clone().oneshot(get("/metrics")).await.unwrap();
    assert_eq!(answer.status(), 200);
    assert_eq!(answer.headers()["content-type"], metrics::CONTENT_TYPE);
    let body = axum::body::to_bytes(answer.into_body(), 1 << 20).await.unwrap();
    assert!(String::from_utf8_lossy(&body).contains("# TYPE mcp_tasks_tasks_in_flight gauge"));
    // Without the opt-in route nothing answers there.
    let bare = host.router("/mcp");
    assert_eq!(bare.oneshot(get("/metrics")).await.unwrap().status(), 404);
}

#[tokio::test]
async fn the_listen_gauge_counts_subscriptions_until_they_are_dropped() {
    let engine = engine(Arc::new(ManualClock::new(START))).await;
    let (created, _work) = engine.create_task("alice", "report", TaskOptions::default()).await.unwrap();
    let ids = [created.task.task_id.clone()];
    assert_eq!(sample(&engine.metrics_text(), "mcp_tasks_listen_streams"), Some(0.0));
    let first = engine.subscribe("alice", &ids).await;
    let second = engine.subscribe("bob", &ids).await; // accepts nothing, but is a stream all the same
    assert_eq!(sample(&engine.metrics_text(), "mcp_tasks_listen_streams"), Some(2.0));
    drop(first);
    assert_eq!(sample(&engine.metrics_text(), "mcp_tasks_listen_streams"), Some(1.0));
    drop(second);
    assert_eq!(sample(&engine.metrics_text(), "mcp_tasks_listen_streams"), Some(0.0));
}

#[tokio::test]
async fn a_closed_sse_listen_ends_its_waiting_call_and_lets_its_subscription_go() {
    use mcp_tasks::engine::SseListen;
    use mcp_tasks::protocol::server::ListenFrames;
    let engine = engine(Arc::new(ManualClock::new(START))).await;
    let (created, _work) = engine.create_task("alice", "report", TaskOptions::default()).await.unwrap();
    let ids = [created.task.task_id.clone()];
    let streams = || sample(&engine.metrics_text(), "mcp_tasks_listen_streams");
    let listen = Arc::new(SseListen::new(engine.subscribe("alice", &ids).await, ListenFrames::new(json!(1))));
    assert!(listen.ack().starts_with("event: message\n") && listen.ack().contains(&ids[0]), "{}", listen.ack());
    let current = listen.next_events().await.unwrap();
    assert!(current.contains("\"working\""), "{current}");
    // Nothing waits to be reported: the next call waits, until the client goes away.
    let waiting = tokio::spawn({
        let listen = Arc::clone(&listen);
        async move { listen.next_events().await }
    });
    tokio::task::yield_now().await;
    assert!(!waiting.is_finished());
    assert_eq!(streams(), Some(1.0));
    listen.close();
    assert_eq!(waiting.await.unwrap(), None);
    assert_eq!(streams(), Some(0.0), "the waiting call let the subscription go");
    assert_eq!(listen.next_events().await, None, "and every later call ends at once");
    assert!(listen.close_event().contains("\"result\""), "{}", listen.close_event());
    // Closed with no call waiting: let go by close itself.
    let idle = SseListen::new(engine.subscribe("alice", &ids).await, ListenFrames::new(json!(2)));
    assert_eq!(streams(), Some(1.0));
    idle.close();
    assert_eq!(streams(), Some(0.0));
    assert_eq!(idle.next_events().await, None);
}
