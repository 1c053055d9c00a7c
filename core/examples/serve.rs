//! A minimal tasks server: one slow tool, SQLite store, principal from an `x-user` header.
//! `cargo run -p mcp-tasks --example serve` then POST MCP 2026-07-28 requests to
//! http://127.0.0.1:8080/mcp.

use std::sync::Arc;

use mcp_tasks::Engine;
use mcp_tasks::host::{Host, Tool, handler_fn, text_result};
use mcp_tasks::protocol::TaskMode;
use mcp_tasks::store::SqliteStore;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let engine = Engine::builder(Arc::new(SqliteStore::open("tasks.db")?)).build().await?;
    engine.spawn_sweeper();
    let report = handler_fn(|call, ctx| async move {
        ctx.set_status_message("crunching").await?;
        // Long work here; select on ctx.cancellation() to stop early, ctx.request_input(..) to ask.
        tokio::time::sleep(std::time::Duration::from_secs(5)).await;
        Ok(text_result(format!("report for {}", call.arguments["quarter"])))
    });
    let host = Host::builder(engine)
        .tool(
            Tool::new("build_report", report).mode(TaskMode::Optional).ttl_ms(Some(3_600_000)).poll_interval_ms(2_000),
        )
        // Bind tasks to your callers; the default hashes the Authorization header.
        .principal(|req| req.headers.get("x-user").and_then(|v| v.to_str().ok()).map(str::to_owned))
        .build();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:8080").await?;
    mcp_tasks::host::serve(listener, host.router("/mcp"), std::future::pending()).await?;
    Ok(())
}
