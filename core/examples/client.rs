//! A minimal tasks client: `cargo run -p mcp-tasks --example client [URL]` against
//! `examples/serve.rs` (default URL http://127.0.0.1:8080/mcp).

use futures::StreamExt;
use mcp_tasks::client::{Client, Execution, input_fn};
use serde_json::json;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let url = std::env::args().nth(1).unwrap_or_else(|| "http://127.0.0.1:8080/mcp".into());
    let client = Client::http(url)
        .header("authorization", &format!("Bearer {}", std::env::var("MCP_TOKEN").unwrap_or_default()))
        .sqlite_store("client-tasks.db")? // task references survive a restart
        .input_handler(input_fn(|request| async move {
            println!("server asks ({}): {}", request.method, request.params);
            Some(json!({"action": "accept", "content": {"confirm": true}}))
        }))
        .build()?;
    for task in client.resume_all().await? {
        println!("re-attached to {}: {:?}", task.task_id(), task.result().await?);
    }
    match client.call_tool("build_report", json!({"quarter": "Q3"})).await? {
        Execution::Immediate(result) => println!("immediate: {result}"),
        Execution::Task(task) => {
            let mut updates = task.updates();
            while let Some(state) = updates.next().await {
                println!("{} {:?}", state.task.status.as_str(), state.task.status_message);
            }
            println!("outcome: {:?}", task.result().await?);
        }
    }
    Ok(())
}
