//! The engine's `tracing` events name a task's id, tool and outcome, and a principal by its hash
//! only. Its own test binary: `tracing` caches which events a callsite sends per process, and a
//! test running beside it without a subscriber could make that cache skip this one's.

use std::sync::{Arc, Mutex};

use mcp_tasks::clock::{ManualClock, SequentialIds};
use mcp_tasks::engine::TaskOptions;
use mcp_tasks::store::MemoryStore;
use mcp_tasks::{Engine, metrics};
use serde_json::json;

/// Captures what the `tracing` events of this test write.
#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl std::io::Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[tokio::test]
async fn task_events_carry_id_tool_outcome_and_a_principal_hash_never_the_principal() {
    let captured = Captured::default();
    let writer = captured.clone();
    let subscriber = tracing_subscriber::fmt().with_writer(move || writer.clone()).with_ansi(false).finish();
    let _guard = tracing::subscriber::set_default(subscriber);
    let engine = Engine::builder(Arc::new(MemoryStore::new()))
        .clock(Arc::new(ManualClock::new(1_788_264_000_000)))
        .ids(Arc::new(SequentialIds::new("task")))
        .build()
        .await
        .unwrap();
    let secret = "user:alice@example.com";
    let (created, ctx) = engine.create_task(secret, "report", TaskOptions::default()).await.unwrap();
    ctx.complete(json!({"content": []})).await.unwrap();
    let logs = String::from_utf8(captured.0.lock().unwrap().clone()).unwrap();
    let id = created.task.task_id;
    let hash = metrics::principal_hash(secret);
    assert_eq!(hash.len(), 16);
    assert!(logs.contains(&format!("task created task_id={id} tool=report principal={hash}")), "{logs}");
    assert!(
        logs.contains(&format!("task finished task_id={id} tool=report principal={hash} outcome=\"completed\"")),
        "{logs}"
    );
    assert!(!logs.contains(secret), "the principal itself is never written: {logs}");
}
