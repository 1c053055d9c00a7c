//! The Rust fragments of docs/ that are not whole programs: each stands here between
//! `docs:begin NAME` and `docs:end NAME`, and tests/docs/check keeps the docs' copy identical to
//! the region (docs/operating.md). Here they compile, and their tools and hosts are built.

use std::sync::Arc;

use mcp_tasks::Engine;
use mcp_tasks::host::{Execution, Host, Tool, handler_fn, text_result};
use mcp_tasks::protocol::TaskMode;
use mcp_tasks::store::MemoryStore;
use serde_json::json;

/// One step of the resumable tool's work.
async fn do_step(_step: u64) {
    tokio::task::yield_now().await;
}

/// The resumable tool of docs/operating.md.
fn build_report() -> Tool {
    // docs:begin resumable
    Tool::new(
        "build_report",
        handler_fn(|_call, ctx| async move {
            let start = ctx.saved_checkpoint().and_then(|c| c["done"].as_u64()).unwrap_or(0);
            for step in start..10 {
                do_step(step).await;
                ctx.checkpoint(json!({ "done": step + 1 })).await?; // durable before it returns
            }
            Ok(text_result(format!("built in attempt {}", ctx.attempt())))
        }),
    )
    .mode(TaskMode::Required)
    .resumable(3, 1_000) // 3 attempts in all; 1 s before the second, 2 s before the third (at most 10 min)
    // docs:end resumable
}

#[tokio::test]
async fn the_separate_workers_fragment_builds_a_front_end_and_a_worker() {
    let engine = Engine::builder(Arc::new(MemoryStore::new())).build().await.unwrap();
    // docs:begin workers
    let front = Host::builder(engine.clone()).execution(Execution::Workers).tool(build_report()).build(); // accepts only
    let worker = Host::builder(engine).tool(build_report()).build();
    let running = worker.spawn_executor(); // runs them
    // docs:end workers
    let _router = front.router("/mcp");
    running.abort();
}

/// docs/operating.md's OTLP export of the Rust host's spans (feature `otel`): without an endpoint
/// in the environment it installs no exporter, and the subscriber still logs.
#[cfg(feature = "otel")]
#[test]
fn the_otel_setup_exports_only_where_an_endpoint_is_configured() -> Result<(), mcp_tasks::otel::OtelError> {
    // docs:begin otel
    use tracing_subscriber::prelude::*;
    let (otel, _flush_at_exit) = mcp_tasks::otel::from_env()?.map(|export| export.into_layer()).unzip();
    tracing_subscriber::registry().with(otel).with(tracing_subscriber::fmt::layer()).init();
    // docs:end otel
    assert_eq!(_flush_at_exit.is_some(), mcp_tasks::otel::configured(), "an exporter exactly where one is configured");
    Ok(())
}
