//! An rmcp server behind [`DurableServer`], followed by an rmcp client through [`RmcpTransport`]:
//! a task created durably and run through rmcp's handler, its status message, the tool's own MRTR
//! round turned into the task's input, a cancel that reaches the tool (its run dropped, its
//! `context.ct` cancelled), a panic that fails the task, a synchronous call and an unknown tool
//! left to rmcp's tools.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

mod common;

use common::{rmcp_client, task, text_of};
use mcp_tasks::client::{Client, Execution, input_fn};
use mcp_tasks::engine::Engine;
use mcp_tasks::protocol::TaskMode;
use mcp_tasks::protocol::client::{CancelMode, Outcome};
use mcp_tasks::store::MemoryStore;
use mcp_tasks_rmcp::{DurableServer, RmcpTransport, TaskRun};
use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::handler::server::tool::InputResponses;
use rmcp::model::{
    CallToolResponse, CallToolResult, ContentBlock, ErrorData, InputRequest, InputRequiredResult, JsonObject,
    ServerCapabilities, ServerConfig,
};
use rmcp::service::{RequestContext, RoleServer};
use rmcp::{ServerHandler, tool, tool_handler, tool_router};
use serde_json::{Value, json};

/// Sets its flag when dropped.
struct SetOnDrop(Arc<AtomicBool>);

impl Drop for SetOnDrop {
    fn drop(&mut self) {
        self.0.store(true, Ordering::SeqCst);
    }
}

#[derive(Clone)]
struct Tools {
    tool_router: ToolRouter<Self>,
    /// Set when `slow`'s run was stopped by its task's cancel.
    saw_cancel: Arc<AtomicBool>,
    /// Set when the work `handed_off` spawned saw its `context.ct` cancelled (at the end of its run).
    ct_cancelled: Arc<AtomicBool>,
}

fn text(text: impl Into<String>) -> CallToolResult {
    CallToolResult::success(vec![ContentBlock::text(text.into())])
}

#[tool_router]
impl Tools {
    // docs:begin tool
    #[tool(description = "Sleeps `ms`, saying so in its status; stopped when its task is cancelled.")]
    async fn slow(&self, args: JsonObject, context: RequestContext<RoleServer>) -> Result<CallToolResult, ErrorData> {
        let ms = args.get("ms").and_then(Value::as_u64).unwrap_or(50);
        let Some(task) = TaskRun::of(&context) else {
            return Ok(text(format!("slept {ms} ms synchronously")));
        };
        task.set_status_message(format!("sleeping {ms} ms")).await?;
        // A cancel drops this future, as core's host drops its tools' runs: what must happen
        // then goes in a drop guard.
        let stopped = SetOnDrop(Arc::clone(&self.saw_cancel));
        tokio::time::sleep(Duration::from_millis(ms)).await;
        std::mem::forget(stopped);
        Ok(text(format!("slept {ms} ms")))
    }
    // docs:end tool

    #[tool(description = "Asks a question the MRTR way (an input_required result), then answers.")]
    async fn ask(&self, InputResponses(responses): InputResponses) -> Result<CallToolResponse, ErrorData> {
        match responses.as_ref().and_then(|r| r.get("ok")) {
            Some(answer) => Ok(CallToolResponse::Complete(text(format!("ok = {}", answer["content"]["ok"])))),
            None => {
                let request: InputRequest = serde_json::from_value(json!({"method": "elicitation/create",
                    "params": {"mode": "form", "message": "Go on?",
                    "requestedSchema": {"type": "object", "properties": {"ok": {"type": "boolean"}}}}}))
                .unwrap();
                let requests = [("ok".to_owned(), request)].into_iter().collect();
                Ok(CallToolResponse::InputRequired(InputRequiredResult::new(Some(requests), Some("round-1".into()))))
            }
        }
    }

    #[tool(description = "Hands a watcher of `context.ct` to a spawned task, sleeps `ms`, names the protocol.")]
    async fn handed_off(
        &self,
        args: JsonObject,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        let ms = args.get("ms").and_then(Value::as_u64).unwrap_or(10);
        let (ct, flag) = (context.ct.clone(), Arc::clone(&self.ct_cancelled));
        tokio::spawn(async move {
            ct.cancelled().await;
            flag.store(true, Ordering::SeqCst);
        });
        tokio::time::sleep(Duration::from_millis(ms)).await;
        let version = context.meta.protocol_version().map(|v| v.as_str().to_owned()).unwrap_or_default();
        Ok(text(format!("protocol {version}")))
    }

    #[tool(description = "Asks for a confirmation mid-run, so it needs its task.")]
    async fn confirm(&self, context: RequestContext<RoleServer>) -> Result<CallToolResult, ErrorData> {
        let task = TaskRun::required(&context)?;
        let ask = json!({"ok": {"method": "elicitation/create", "params": {"mode": "form", "message": "Go on?",
            "requestedSchema": {"type": "object", "properties": {"ok": {"type": "boolean"}}}}}});
        let answers = task.request_inputs(ask.as_object().cloned().unwrap_or_default()).await?;
        Ok(text(format!("ok = {}", answers["ok"]["content"]["ok"])))
    }

    #[tool(description = "Panics.")]
    async fn boom(&self) -> Result<CallToolResult, ErrorData> {
        panic!("boom")
    }

    #[tool(description = "Echoes synchronously.")]
    async fn echo(&self, args: JsonObject) -> Result<CallToolResult, ErrorData> {
        Ok(text(Value::Object(args).to_string()))
    }
}

#[tool_handler(router = self.tool_router)]
impl ServerHandler for Tools {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().enable_tasks().build())
    }
}

/// The rmcp server behind core on a loopback port: its URL, and the flags `slow` and `handed_off` set.
async fn durable() -> (String, Arc<AtomicBool>, Arc<AtomicBool>) {
    let engine = Engine::builder(Arc::new(MemoryStore::new())).build().await.unwrap();
    let (saw_cancel, ct_cancelled) = (Arc::new(AtomicBool::new(false)), Arc::new(AtomicBool::new(false)));
    let tools = Tools {
        tool_router: Tools::tool_router(),
        saw_cancel: Arc::clone(&saw_cancel),
        ct_cancelled: Arc::clone(&ct_cancelled),
    };
    // docs:begin durable
    let host = DurableServer::new(engine, move || Ok(tools.clone()))
        .task_tool("slow", |t| t.poll_interval_ms(20))
        .task_tool("ask", |t| t.mode(TaskMode::Required).poll_interval_ms(20))
        .task_tool("boom", |t| t.poll_interval_ms(20))
        .task_tool("confirm", |t| t.poll_interval_ms(20))
        .task_tool("handed_off", |t| t.poll_interval_ms(20))
        .build();
    let _executor = host.spawn_executor(); // resumable tasks a dead process left
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/mcp", listener.local_addr().unwrap());
    let router = host.router("/mcp").merge(host.metrics_router("/metrics"));
    tokio::spawn(async move { mcp_tasks::host::serve(listener, router, std::future::pending()).await.unwrap() });
    // docs:end durable
    (url, saw_cancel, ct_cancelled)
}

/// Waits up to 2 s for `flag`.
async fn eventually(flag: &AtomicBool) -> bool {
    for _ in 0..100 {
        if flag.load(Ordering::SeqCst) {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    flag.load(Ordering::SeqCst)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_rmcp_server_behind_core_runs_durable_tasks_through_its_own_handler() {
    let (url, saw_cancel, ct_cancelled) = durable().await;
    let rmcp = rmcp_client(&url).await;
    let answer = input_fn(|_request| async move { Some(json!({"action": "accept", "content": {"ok": true}})) });
    let transport = Arc::new(RmcpTransport::new(rmcp.peer().clone(), url.clone()));
    let client = Client::with_transport(transport).memory_store().input_handler(answer).build().unwrap();

    // A task made by core, its tool run by rmcp's handler, polled to its result.
    let execution = task(client.call_tool("slow", json!({"ms": 100})).await.unwrap());
    assert_eq!(text_of(&execution.result().await.unwrap()), "slept 100 ms");
    // The tool's own MRTR round becomes the task's input; the answer goes back to the tool.
    let execution = task(client.call_tool("ask", json!({})).await.unwrap());
    assert_eq!(text_of(&execution.result().await.unwrap()), "ok = true");
    // A panicking rmcp tool fails its task; nothing is left working.
    match task(client.call_tool("boom", json!({})).await.unwrap()).result().await.unwrap() {
        Outcome::Failed { error } => assert_eq!(error.code, -32603, "{error:?}"),
        other => panic!("expected failed, got {other:?}"),
    }
    // A cancel ends the task cancelled and reaches the tool.
    let execution = task(client.call_tool("slow", json!({"ms": 60_000})).await.unwrap());
    tokio::time::sleep(Duration::from_millis(100)).await;
    execution.cancel(CancelMode::Stop).unwrap();
    assert_eq!(execution.result().await.unwrap(), Outcome::Cancelled);
    assert!(eventually(&saw_cancel).await, "the cancel stopped the tool's run");
    // The tool's context is the one rmcp's service would give it: the request's `_meta` in
    // `context.meta`, and `context.ct` cancelled with the task, for work the tool handed off.
    let execution = task(client.call_tool("handed_off", json!({"ms": 10})).await.unwrap());
    assert_eq!(text_of(&execution.result().await.unwrap()), "protocol 2026-07-28");
    // (Its `ct` ends with the run, as the task's own token does; the flag is cleared for the cancel.)
    assert!(eventually(&ct_cancelled).await, "the ended run's ct is cancelled");
    ct_cancelled.store(false, Ordering::SeqCst);
    let execution = task(client.call_tool("handed_off", json!({"ms": 60_000})).await.unwrap());
    tokio::time::sleep(Duration::from_millis(100)).await;
    execution.cancel(CancelMode::Stop).unwrap();
    assert_eq!(execution.result().await.unwrap(), Outcome::Cancelled);
    assert!(eventually(&ct_cancelled).await, "the task's cancel reached the handed-off work through context.ct");
    // A tool not run as a task is rmcp's, synchronously.
    match client.call_tool("echo", json!({"a": 1})).await.unwrap() {
        Execution::Immediate(result) => assert_eq!(result["content"][0]["text"], "{\"a\":1}"),
        Execution::Task(_) => panic!("echo is not a task tool"),
    }
    // An unknown tool is core's -32602, as on every server.
    let error = client.call_tool("no_such_tool", json!({})).await.unwrap_err();
    assert_eq!(error.code(), -32602, "{error:?}");
    rmcp.cancel().await.unwrap();
}

/// A tool that needs its task to ask mid-run (`TaskRun::required`), called synchronously by a
/// client that did not declare the extension: -32021 naming it (HTTP 400, the table's), never
/// -32603. Called by a declaring client, it asks and gets its answer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_tool_called_without_the_extension_names_what_the_client_left_out() {
    let (url, _, _) = durable().await;
    let (status, answer) = raw_call(&url, "confirm", json!({"elicitation": {}})).await;
    assert_eq!(status, 400, "-32021's status in the error table (docs/errors.md): {answer}");
    assert_eq!(answer["error"]["code"], -32021, "{answer}");
    assert_eq!(
        answer["error"]["data"]["requiredCapabilities"],
        json!({"extensions": {"io.modelcontextprotocol/tasks": {}}}),
        "{answer}"
    );

    let rmcp = rmcp_client(&url).await;
    let answer = input_fn(|_request| async move { Some(json!({"action": "accept", "content": {"ok": true}})) });
    let transport = Arc::new(RmcpTransport::new(rmcp.peer().clone(), url.clone()));
    let client = Client::with_transport(transport).memory_store().input_handler(answer).build().unwrap();
    let execution = task(client.call_tool("confirm", json!({})).await.unwrap());
    assert_eq!(text_of(&execution.result().await.unwrap()), "ok = true");
    rmcp.cancel().await.unwrap();
}

/// rmcp's `legacy_session_mode` keeps sessions by a header stdio cannot carry: serving stdio with
/// it is refused at start, saying so, instead of answering every line after `initialize` with
/// rmcp's "no session" refusal.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stdio_refuses_rmcps_legacy_session_mode_at_start() {
    let engine = Engine::builder(Arc::new(MemoryStore::new())).build().await.unwrap();
    let tools = Tools { tool_router: Tools::tool_router(), saw_cancel: Arc::default(), ct_cancelled: Arc::default() };
    let mut config = rmcp::transport::streamable_http_server::StreamableHttpServerConfig::default();
    config.legacy_session_mode = true;
    let host = DurableServer::new(engine, move || Ok(tools.clone())).config(config).task_tool("slow", |t| t).build();
    let error = host.serve_stdio(tokio::io::empty(), tokio::io::sink()).await.unwrap_err();
    assert_eq!(error.kind(), std::io::ErrorKind::Unsupported);
    assert!(error.to_string().contains("legacy_session_mode"), "{error}");
}

/// A raw `tools/call` of `tool` from a client that declares `capabilities` (no extension, so
/// it runs synchronously): status and JSON answer.
async fn raw_call(url: &str, tool: &str, capabilities: Value) -> (u16, Value) {
    let meta = json!({"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                      "io.modelcontextprotocol/clientCapabilities": capabilities});
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                      "params": {"name": tool, "arguments": {}, "_meta": meta}});
    let response = reqwest::Client::new()
        .post(url)
        .header("mcp-protocol-version", "2026-07-28")
        .header("mcp-method", "tools/call")
        .header("mcp-name", tool)
        .header("accept", "application/json, text/event-stream")
        .json(&body)
        .send()
        .await
        .unwrap();
    let status = response.status().as_u16();
    let text = response.text().await.unwrap();
    let json = text.lines().find_map(|l| l.strip_prefix("data:")).unwrap_or(&text).trim().to_owned();
    (status, serde_json::from_str(&json).unwrap_or_else(|e| panic!("{e}: {text}")))
}

/// Serves `factory`'s server behind core on a loopback port; its URL.
async fn serve_with(factory: impl Fn() -> Result<Tools, std::io::Error> + Send + Sync + 'static) -> String {
    let engine = Engine::builder(Arc::new(MemoryStore::new())).build().await.unwrap();
    let host = DurableServer::new(engine, factory).task_tool("slow", |t| t.poll_interval_ms(20)).build();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/mcp", listener.local_addr().unwrap());
    let router = host.router("/mcp");
    tokio::spawn(async move { mcp_tasks::host::serve(listener, router, std::future::pending()).await.unwrap() });
    url
}

/// Whether a synchronous call's tool exists is asked of one long-lived handler, not of a new one
/// per call (a factory's side effects ran twice a call); a factory that fails makes the call a
/// server fault (-32603), not an unknown tool (-32602).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_synchronous_call_builds_no_extra_handler_and_a_failing_factory_is_a_server_fault() {
    let made = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let tools = Tools { tool_router: Tools::tool_router(), saw_cancel: Arc::default(), ct_cancelled: Arc::default() };
    let count = Arc::clone(&made);
    let url = serve_with(move || {
        count.fetch_add(1, Ordering::SeqCst);
        Ok(tools.clone())
    })
    .await;
    let (status, first) = raw_call(&url, "echo", json!({})).await;
    assert_eq!(status, 200, "{first}");
    let before = made.load(Ordering::SeqCst);
    for _ in 0..5 {
        let (status, answer) = raw_call(&url, "echo", json!({})).await;
        assert_eq!((status, answer["result"]["content"][0]["text"].clone()), (200, json!("{}")), "{answer}");
    }
    // rmcp's stateless service makes one handler per request it serves, as it does alone; core
    // adds none.
    assert_eq!(made.load(Ordering::SeqCst) - before, 5);

    let url = serve_with(|| Err(std::io::Error::other("no database"))).await;
    let (status, answer) = raw_call(&url, "echo", json!({})).await;
    assert_eq!(status, 500, "{answer}");
    assert_eq!(answer["error"]["code"], -32603, "{answer}");
    assert!(answer["error"]["message"].as_str().unwrap().contains("no database"), "{answer}");
}

/// A handler with state of its own per instance, as the factory makes it.
struct Fresh {
    tool_router: ToolRouter<Self>,
    instance: usize,
    guard: std::sync::Mutex<u32>,
}

#[tool_router]
impl Fresh {
    #[tool(description = "Names the handler instance that runs it.")]
    async fn whoami(&self) -> Result<CallToolResult, ErrorData> {
        Ok(text(format!("instance {}", self.instance)))
    }

    #[tool(description = "Panics holding its instance's lock (poisoning it).")]
    async fn poison(&self) -> Result<CallToolResult, ErrorData> {
        let _held = self.guard.lock().unwrap();
        panic!("poisoned")
    }

    #[tool(description = "Takes its instance's lock.")]
    async fn guarded(&self) -> Result<CallToolResult, ErrorData> {
        let mut count = self.guard.lock().map_err(|_| ErrorData::internal_error("a poisoned handler", None))?;
        *count += 1;
        Ok(text("ok"))
    }
}

#[tool_handler(router = self.tool_router)]
impl ServerHandler for Fresh {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
    }
}

/// Each task's tool runs on a handler the factory made for it, as rmcp's stateless service
/// makes one per request: per-instance state is not shared across tasks, and a handler one
/// task's panic left poisoned serves no later task.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_tasks_run_has_a_handler_of_its_own() {
    let engine = Engine::builder(Arc::new(MemoryStore::new())).build().await.unwrap();
    let next = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let host = DurableServer::new(engine, move || {
        let instance = next.fetch_add(1, Ordering::SeqCst);
        Ok(Fresh { tool_router: Fresh::tool_router(), instance, guard: std::sync::Mutex::new(0) })
    })
    .task_tool("whoami", |t| t.poll_interval_ms(20))
    .task_tool("poison", |t| t.poll_interval_ms(20))
    .task_tool("guarded", |t| t.poll_interval_ms(20))
    .build();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/mcp", listener.local_addr().unwrap());
    let router = host.router("/mcp");
    tokio::spawn(async move { mcp_tasks::host::serve(listener, router, std::future::pending()).await.unwrap() });
    let rmcp = rmcp_client(&url).await;
    let transport = Arc::new(RmcpTransport::new(rmcp.peer().clone(), url.clone()));
    let client = Client::with_transport(transport).memory_store().build().unwrap();
    let first = text_of(&task(client.call_tool("whoami", json!({})).await.unwrap()).result().await.unwrap());
    let second = text_of(&task(client.call_tool("whoami", json!({})).await.unwrap()).result().await.unwrap());
    assert_ne!(first, second, "two tasks, two handlers");
    match task(client.call_tool("poison", json!({})).await.unwrap()).result().await.unwrap() {
        Outcome::Failed { error } => assert_eq!(error.code, -32603, "{error:?}"),
        other => panic!("expected failed, got {other:?}"),
    }
    let after = task(client.call_tool("guarded", json!({})).await.unwrap()).result().await.unwrap();
    assert_eq!(text_of(&after), "ok", "a later task does not meet the poisoned handler");
    rmcp.cancel().await.unwrap();
}
