//! An rmcp client (Streamable HTTP, the 2026-07-28 wire) follows tasks of mcp-tasks' Rust host
//! through [`RmcpTransport`]: a task to its result, an MRTR round then a task, a task's input,
//! a failed task, and a cancel.

use std::sync::Arc;
use std::time::Duration;

mod common;

use common::{rmcp_client, task, text_of};
use mcp_tasks::client::{Client, input_fn};
use mcp_tasks::engine::Engine;
use mcp_tasks::host::{Host, Prepared, RunContext, Tool, ToolCall, ToolHandler, handler_fn, text_result};
use mcp_tasks::protocol::client::{CancelMode, Outcome};
use mcp_tasks::protocol::{RpcError, TaskMode};
use mcp_tasks::store::MemoryStore;
use mcp_tasks_rmcp::RmcpTransport;
use serde_json::{Map, Value, json};

/// One MRTR round for `name`, then a task greeting it.
struct NameThenTask;

#[async_trait::async_trait]
impl ToolHandler for NameThenTask {
    async fn prepare(&self, call: &ToolCall) -> Result<Prepared, RpcError> {
        if call.input_responses.as_ref().is_some_and(|r| r.contains_key("name")) {
            return Ok(Prepared::Ready);
        }
        let mut ask = Map::new();
        ask.insert("name".into(), json!({"method": "elicitation/create", "params": {"mode": "form",
            "message": "Your name?", "requestedSchema": {"type": "object", "properties": {"name": {"type": "string"}}}}}));
        Ok(Prepared::InputRequired { input_requests: ask, state: None })
    }

    async fn run(&self, call: ToolCall, _ctx: RunContext) -> Result<Value, RpcError> {
        let name = call.input_responses.as_ref().and_then(|r| r["name"]["content"]["name"].as_str().map(str::to_owned));
        Ok(text_result(format!("hello {}", name.unwrap_or_default())))
    }
}

/// The Rust host on a loopback port, its URL.
async fn host() -> String {
    let engine = Engine::builder(Arc::new(MemoryStore::new())).build().await.unwrap();
    let slow = handler_fn(|call, ctx: RunContext| async move {
        let ms = call.arguments.get("ms").and_then(Value::as_u64).unwrap_or(50);
        let cancelled = ctx.cancellation();
        tokio::select! {
            () = tokio::time::sleep(Duration::from_millis(ms)) => Ok(text_result(format!("slept {ms} ms"))),
            () = cancelled.cancelled() => Err(RpcError::internal("cancelled")),
        }
    });
    let confirm = handler_fn(|_call, ctx: RunContext| async move {
        let mut ask = Map::new();
        ask.insert(
            "ok".into(),
            json!({"method": "elicitation/create", "params": {"message": "Go on?",
            "requestedSchema": {"type": "object", "properties": {"ok": {"type": "boolean"}}}}}),
        );
        let answers = ctx.request_input(ask).await?;
        Ok(text_result(format!("ok = {}", answers["ok"]["content"]["ok"])))
    });
    let host = Host::builder(engine)
        .tool(Tool::new("slow", slow).mode(TaskMode::Optional).poll_interval_ms(20))
        .tool(Tool::new("confirm", confirm).mode(TaskMode::Required).poll_interval_ms(20))
        .tool(Tool::new("name_then_task", NameThenTask).mode(TaskMode::Required).poll_interval_ms(20))
        .tool(
            Tool::new("boom", handler_fn(|_c, _x| async { Err(RpcError::new(-32603, "boom")) }))
                .mode(TaskMode::Optional)
                .poll_interval_ms(20),
        )
        .build();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/mcp", listener.local_addr().unwrap());
    let router = host.router("/mcp");
    tokio::spawn(async move { mcp_tasks::host::serve(listener, router, std::future::pending()).await.unwrap() });
    url
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_rmcp_client_follows_tasks_to_their_outcome() {
    let url = host().await;
    let rmcp = rmcp_client(&url).await;
    let answer = input_fn(|request| async move {
        Some(match request.key.as_str() {
            "name" => json!({"action": "accept", "content": {"name": "Ada"}}),
            _ => json!({"action": "accept", "content": {"ok": true}}),
        })
    });
    let transport = Arc::new(RmcpTransport::new(rmcp.peer().clone(), url.clone()));
    let client = Client::with_transport(transport).memory_store().input_handler(answer).build().unwrap();

    // A task, polled to its result through rmcp's `tasks/get`.
    let execution = task(client.call_tool("slow", json!({"ms": 100})).await.unwrap());
    assert_eq!(text_of(&execution.result().await.unwrap()), "slept 100 ms");
    // An MRTR round answered by the handler, then the task.
    let execution = task(client.call_tool("name_then_task", json!({})).await.unwrap());
    assert_eq!(text_of(&execution.result().await.unwrap()), "hello Ada");
    // A task's own input, answered through rmcp's `tasks/update`.
    let execution = task(client.call_tool("confirm", json!({})).await.unwrap());
    assert_eq!(text_of(&execution.result().await.unwrap()), "ok = true");
    // A failed task keeps its error.
    match task(client.call_tool("boom", json!({})).await.unwrap()).result().await.unwrap() {
        Outcome::Failed { error } => assert_eq!((error.code, error.message.as_str()), (-32603, "boom")),
        other => panic!("expected failed, got {other:?}"),
    }
    // A cancel goes out through rmcp's `tasks/cancel` and the task ends cancelled.
    let execution = task(client.call_tool("slow", json!({"ms": 60_000})).await.unwrap());
    execution.cancel(CancelMode::Stop).unwrap();
    assert_eq!(execution.result().await.unwrap(), Outcome::Cancelled);
    // A JSON-RPC error stays one: an unknown tool is -32602.
    let error = client.call_tool("no_such_tool", json!({})).await.unwrap_err();
    assert_eq!(error.code(), -32602, "{error:?}");
    rmcp.cancel().await.unwrap();
}
