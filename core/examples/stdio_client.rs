//! A client that starts its server as a child and speaks stdio to it:
//! `cargo run -p mcp-tasks --example stdio_client -- target/debug/examples/serve --stdio`.

use mcp_tasks::client::{Client, Execution, StdioCommand};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut argv = std::env::args().skip(1);
    let program = argv.next().ok_or("usage: stdio_client COMMAND [ARGS...]")?;
    let client = Client::stdio(StdioCommand::new(program).args(argv)).build()?;
    for task in client.resume_all().await? {
        println!("picked up {}: {:?}", task.task_id(), task.result().await?);
    }
    match client.call_tool("build_report", serde_json::json!({"quarter": "Q3"})).await? {
        Execution::Immediate(result) => println!("{result}"),
        Execution::Task(task) => {
            println!("{}", serde_json::to_string(&task.latest())?); // {"taskId": ..., "status": "working", ...}
            println!("{:?}", task.result().await?); // Completed { result: {"content": [...]} }, Failed, ...
        }
    }
    client.close().await; // the child's stdin closes and it exits
    Ok(())
}
