//! A minimal tasks server: one slow tool, SQLite store, tasks bound to the caller's bearer token.
//! `cargo run -p mcp-tasks --example serve [ADDR]` (default 127.0.0.1:8080), then run a client
//! example (Rust, Python or Node) against it with the same `MCP_TOKEN`. `serve --stdio` serves
//! the same tool over stdin and stdout instead, for a client that starts it as its child (the
//! `stdio_client` examples).

use std::sync::Arc;

use mcp_tasks::Engine;
use mcp_tasks::host::{Host, Tool, handler_fn, text_result};
use mcp_tasks::protocol::TaskMode;
use mcp_tasks::store::SqliteStore;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let arg = std::env::args().nth(1);
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
        // Your auth decides who calls. Here a bearer token is required (401 without one), and tasks
        // are bound to a hash of it, as the default principal does.
        .principal(|req| {
            let token = req.headers.get("authorization")?.to_str().ok()?.strip_prefix("Bearer ")?;
            (!token.is_empty()).then(|| mcp_tasks::host::authorization_principal(req))?
        })
        .build();
    if arg.as_deref() == Some("--stdio") {
        // stdout carries the protocol only; the caller is the process that started us.
        host.serve_stdio(tokio::io::stdin(), tokio::io::stdout()).await?;
        return Ok(());
    }
    let addr = arg.unwrap_or_else(|| "127.0.0.1:8080".into());
    let listener = tokio::net::TcpListener::bind(&addr).await?;
    println!("listening on http://{}/mcp", listener.local_addr()?);
    mcp_tasks::host::serve(listener, host.router("/mcp"), std::future::pending()).await?;
    Ok(())
}
