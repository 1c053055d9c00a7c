//! Shared test harness: a host with a manual clock, sequential ids and the scripted tool set the
//! JSON vectors in `tests/vectors/` use; an in-process HTTP client over the real router; SSE
//! reading; and JSON Schema validation of every produced message.

#![allow(dead_code, unreachable_pub)]

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use async_trait::async_trait;
use axum::body::Body;
use futures::StreamExt;
use mcp_tasks::Engine;
use mcp_tasks::clock::{ManualClock, SequentialIds};
use mcp_tasks::engine::EngineConfig;
use mcp_tasks::host::{Host, Prepared, RunContext, Tool, ToolCall, ToolHandler, text_result};
use mcp_tasks::protocol::{EXTENSION_ID, PROTOCOL_VERSION, RpcError, TaskMode};
use mcp_tasks::store::TaskStore;
use parking_lot::Mutex;
use serde_json::{Map, Value, json};
use tokio::sync::mpsc;
use tower::ServiceExt;

/// The task of an execution that must have become one.
pub fn task(execution: mcp_tasks::client::Execution) -> mcp_tasks::client::TaskExecution {
    match execution {
        mcp_tasks::client::Execution::Task(task) => task,
        mcp_tasks::client::Execution::Immediate(result) => panic!("expected a task, got {result}"),
    }
}

/// The first text content of a completed outcome.
pub fn text(outcome: &mcp_tasks::protocol::client::Outcome) -> String {
    match outcome {
        mcp_tasks::protocol::client::Outcome::Completed { result } => {
            result["content"][0]["text"].as_str().unwrap_or("").to_owned()
        }
        other => panic!("expected completed, got {other:?}"),
    }
}

/// The repository root.
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_path_buf()
}

pub mod rmcp_face;

/// What the scripted work of a task does next.
#[derive(Debug)]
pub enum WorkStep {
    Status(String),
    Input(Map<String, Value>),
    Complete(Value),
    Fail(RpcError),
}

/// The answers one `request_input` returned.
type InputBatch = Map<String, Value>;

enum Queue {
    Early(Vec<WorkStep>),
    Running(mpsc::UnboundedSender<WorkStep>),
}

/// Work queues of scripted tasks, by task id.
#[derive(Default, Clone)]
pub struct Scripts {
    /// A task's queue, or the steps sent before its work started (the work is spawned after the
    /// CreateTaskResult, so a script can get ahead of it).
    queues: Arc<Mutex<HashMap<String, Queue>>>,
    answers: Arc<Mutex<HashMap<String, Vec<InputBatch>>>>,
    /// The errors `request_input` refused the work's input with (-32021), in order.
    refusals: Arc<Mutex<HashMap<String, Vec<RpcError>>>>,
    answered: Arc<tokio::sync::Notify>,
}

impl Scripts {
    pub fn send(&self, task: &str, step: WorkStep) {
        let mut queues = self.queues.lock();
        match queues.entry(task.to_owned()).or_insert_with(|| Queue::Early(Vec::new())) {
            Queue::Early(steps) => steps.push(step),
            Queue::Running(tx) => {
                // A work that already ended (cancelled, expired) ignores further steps.
                let _ = tx.send(step);
            }
        }
    }

    fn start(&self, task: &str) -> mpsc::UnboundedReceiver<WorkStep> {
        let (tx, rx) = mpsc::unbounded_channel();
        let mut queues = self.queues.lock();
        if let Some(Queue::Early(steps)) = queues.remove(task) {
            for step in steps {
                tx.send(step).unwrap();
            }
        }
        queues.insert(task.to_owned(), Queue::Running(tx));
        rx
    }

    /// The refusals of the work's input requests for `task`, once there are `n`.
    pub async fn refusals(&self, task: &str, n: usize) -> Vec<RpcError> {
        self.recorded(&self.refusals, task, n).await
    }

    /// The input answers the work of `task` received, in order, once it has received `n`
    /// batches (the work records them asynchronously after the update commits).
    pub async fn answers(&self, task: &str, n: usize) -> Vec<Map<String, Value>> {
        self.recorded(&self.answers, task, n).await
    }

    /// What the work of `task` recorded in `records`, once there are `n` (10 s bound).
    async fn recorded<T: Clone>(&self, records: &Mutex<HashMap<String, Vec<T>>>, task: &str, n: usize) -> Vec<T> {
        loop {
            let notified = self.answered.notified();
            let got = records.lock().get(task).cloned().unwrap_or_default();
            if got.len() >= n {
                return got;
            }
            tokio::time::timeout(std::time::Duration::from_secs(10), notified).await.expect("a record within 10 s");
        }
    }
}

/// The scripted tool: its work does what the script sends it, step by step.
pub struct Scripted(pub Scripts);

#[async_trait]
impl ToolHandler for Scripted {
    async fn run(&self, call: ToolCall, ctx: RunContext) -> Result<Value, RpcError> {
        let Some(id) = ctx.task_id().map(str::to_owned) else {
            // Run synchronously: echo the arguments.
            return Ok(text_result(format!("ran {} synchronously with {}", call.name, Value::Object(call.arguments))));
        };
        let mut rx = self.0.start(&id);
        while let Some(step) = rx.recv().await {
            match step {
                WorkStep::Status(message) => ctx.set_status_message(message).await?,
                WorkStep::Input(requests) => match ctx.request_input(requests).await {
                    Ok(answers) => {
                        self.0.answers.lock().entry(id.clone()).or_default().push(answers);
                        self.0.answered.notify_waiters();
                    }
                    // Input the client cannot answer: the work goes on without it.
                    Err(e) if e.code == -32021 => {
                        self.0.refusals.lock().entry(id.clone()).or_default().push(e);
                        self.0.answered.notify_waiters();
                    }
                    Err(e) => return Err(e),
                },
                WorkStep::Complete(result) => return Ok(result),
                WorkStep::Fail(error) => return Err(error),
            }
        }
        Err(RpcError::internal("script ended"))
    }
}

/// `ask_name`: one MRTR round for `user_name`, then a task (required).
pub struct AskName(pub Scripts);

#[async_trait]
impl ToolHandler for AskName {
    async fn prepare(&self, call: &ToolCall) -> Result<Prepared, RpcError> {
        let has_answer = call.input_responses.as_ref().is_some_and(|r| r.contains_key("user_name"));
        if has_answer && call.state.as_deref() == Some(&json!({"round": 1})) {
            return Ok(Prepared::Ready);
        }
        let mut requests = Map::new();
        requests.insert(
            "user_name".into(),
            json!({"method": "elicitation/create", "params": {"mode": "form", "message": "Your name?",
                "requestedSchema": {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}}}),
        );
        Ok(Prepared::InputRequired { input_requests: requests, state: Some(json!({"round": 1})) })
    }

    async fn run(&self, call: ToolCall, ctx: RunContext) -> Result<Value, RpcError> {
        let name =
            call.input_responses.as_ref().and_then(|r| r["user_name"]["content"]["name"].as_str().map(str::to_owned));
        let scripted = Scripted(self.0.clone());
        let mut result = scripted.run(call, ctx).await?;
        if let (Some(name), Some(text)) = (name, result.pointer_mut("/content/0/text")) {
            *text = Value::String(text.as_str().unwrap_or("").replace("{user_name}", &name));
        }
        Ok(result)
    }
}

/// A host for tests and vectors.
pub struct TestHost {
    pub host: Host,
    pub router: axum::Router,
    pub engine: Engine,
    pub clock: Arc<ManualClock>,
    pub scripts: Scripts,
    next_id: std::sync::atomic::AtomicU64,
}

/// An engine over `store` with the manual `clock` and ids `{prefix}-1`, `{prefix}-2`, ….
pub async fn test_engine(
    store: Arc<dyn TaskStore>,
    clock: Arc<ManualClock>,
    prefix: &str,
    config: EngineConfig,
) -> Engine {
    Engine::builder(store)
        .clock(clock)
        .ids(Arc::new(SequentialIds::new(prefix)))
        .config(config)
        .build()
        .await
        .expect("engine builds")
}

/// The engine settings vectors assume.
pub fn vector_config() -> EngineConfig {
    EngineConfig {
        default_ttl_ms: Some(60_000),
        default_poll_interval_ms: 1_000,
        purge_grace_ms: 10_000,
        ..EngineConfig::default()
    }
}

impl TestHost {
    /// The vectors' tools written on rmcp, behind core (`mcp-tasks-rmcp`), with the same
    /// scripted work, clock, ids and settings as [`TestHost::with_config`].
    pub async fn rmcp(store: Arc<dyn TaskStore>, start_ms: u64, config: EngineConfig) -> Self {
        let clock = Arc::new(ManualClock::new(start_ms));
        let engine = test_engine(store, clock.clone(), "task", config).await;
        let scripts = Scripts::default();
        let host = rmcp_face::durable(engine.clone(), scripts.clone());
        let router = host.router("/mcp");
        Self { host, router, engine, clock, scripts, next_id: std::sync::atomic::AtomicU64::new(1) }
    }

    pub async fn new(store: Arc<dyn TaskStore>, start_ms: u64) -> Self {
        Self::with_config(store, start_ms, vector_config()).await
    }

    pub async fn with_config(store: Arc<dyn TaskStore>, start_ms: u64, config: EngineConfig) -> Self {
        let clock = Arc::new(ManualClock::new(start_ms));
        let engine = test_engine(store, clock.clone(), "task", config).await;
        let scripts = Scripts::default();
        let host = Host::builder(engine.clone())
            .server_info("mcp-tasks-test", "0.0.0")
            .max_body_bytes(64 * 1024)
            .request_state_key(vec![7u8; 32])
            .tool(Tool::new("echo", Scripted(scripts.clone())).description("Synchronous only."))
            .tool(Tool::new("job", Scripted(scripts.clone())).mode(TaskMode::Optional).poll_interval_ms(500))
            .tool(
                Tool::new("job_required", Scripted(scripts.clone()))
                    .mode(TaskMode::Required)
                    .ttl_ms(Some(5_000))
                    .poll_interval_ms(250),
            )
            .tool(Tool::new("job_unlimited", Scripted(scripts.clone())).mode(TaskMode::Optional).ttl_ms(None))
            .tool(Tool::new("ask_name", AskName(scripts.clone())).mode(TaskMode::Required))
            .build();
        let router = host.router("/mcp");
        Self { host, router, engine, clock, scripts, next_id: std::sync::atomic::AtomicU64::new(1) }
    }

    pub fn next_request_id(&self) -> u64 {
        self.next_id.fetch_add(1, std::sync::atomic::Ordering::SeqCst)
    }

    /// Sends one raw POST and returns status, content type and body.
    pub async fn post_raw(&self, headers: &[(String, String)], body: Vec<u8>) -> (u16, String, Body) {
        // Every HTTP/1.1 request names its host (an SDK behind core checks it against DNS
        // rebinding).
        let mut request = http::Request::builder().method("POST").uri("/mcp").header("host", "localhost");
        for (name, value) in headers {
            request = request.header(name, value);
        }
        let response = self.router.clone().oneshot(request.body(Body::from(body)).unwrap()).await.unwrap();
        let status = response.status().as_u16();
        let content_type =
            response.headers().get("content-type").map(|v| v.to_str().unwrap().to_owned()).unwrap_or_default();
        (status, content_type, response.into_body())
    }

    /// Sends a JSON-RPC request built by [`request`] with standard headers and returns status and
    /// the JSON body (which is validated against the schemas).
    pub async fn send(&self, method: &str, params: Value, principal: Option<&str>, tasks: bool) -> (u16, Value) {
        let id = self.next_request_id();
        let body = request(id, method, params, tasks);
        let headers = standard_headers(&body, principal);
        let (status, _, body) = self.post_raw(&headers, serde_json::to_vec(&body).unwrap()).await;
        let json = read_json(body).await;
        schemas().check_response(method, &json);
        (status, json)
    }

    /// Waits until the committed state of `task` satisfies `done` (event-driven, no sleeping).
    pub async fn wait_for(&self, principal: &str, task: &str, done: impl Fn(&Value) -> bool) -> Value {
        let mut sub = self.engine.subscribe(principal, &[task.to_owned()]).await;
        loop {
            let current = serde_json::to_value(self.engine.get(principal, task).await.unwrap()).unwrap();
            if done(&current) {
                return current;
            }
            let next = tokio::time::timeout(std::time::Duration::from_secs(10), sub.next())
                .await
                .expect("state change within 10 s")
                .map(|t| serde_json::to_value(t).unwrap());
            if let Some(next) = next.filter(|n| done(n)) {
                return next;
            }
        }
    }
}

/// The `_meta` envelope, declaring the tasks extension (and form elicitation, so a task's work
/// may ask) when `tasks`, nothing otherwise (tests/vectors/README.md).
pub fn meta(tasks: bool) -> Value {
    let caps = if tasks { json!({"extensions": {EXTENSION_ID: {}}, "elicitation": {}}) } else { json!({}) };
    meta_with(caps)
}

/// The `_meta` envelope declaring `caps`.
pub fn meta_with(caps: Value) -> Value {
    json!({
        "io.modelcontextprotocol/protocolVersion": PROTOCOL_VERSION,
        "io.modelcontextprotocol/clientCapabilities": caps,
        "io.modelcontextprotocol/clientInfo": {"name": "mcp-tasks-tests", "version": "0"},
    })
}

/// A JSON-RPC request with the envelope added to `params` unless it has a `_meta`.
pub fn request(id: u64, method: &str, params: Value, tasks: bool) -> Value {
    let mut params = if params.is_null() { json!({}) } else { params };
    if params.get("_meta").is_none() {
        params["_meta"] = meta(tasks);
    }
    json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params})
}

/// The standard headers for `body` (and `Authorization: Bearer <principal>`).
pub fn standard_headers(body: &Value, principal: Option<&str>) -> Vec<(String, String)> {
    let method = body["method"].as_str().unwrap_or("");
    let mut headers = vec![
        ("content-type".to_owned(), "application/json".to_owned()),
        ("accept".to_owned(), "application/json, text/event-stream".to_owned()),
        ("mcp-protocol-version".to_owned(), PROTOCOL_VERSION.to_owned()),
        ("mcp-method".to_owned(), method.to_owned()),
    ];
    let name_field = match method {
        "tools/call" | "prompts/get" => Some("name"),
        "tasks/get" | "tasks/update" | "tasks/cancel" => Some("taskId"),
        _ => None,
    };
    if let Some(value) = name_field.and_then(|f| body["params"][f].as_str()) {
        headers.push(("mcp-name".to_owned(), value.to_owned()));
    }
    if let Some(principal) = principal {
        headers.push(("authorization".to_owned(), format!("Bearer {principal}")));
    }
    headers
}

/// Reads a whole JSON body (or the single message of a one-event SSE body).
pub async fn read_json(body: Body) -> Value {
    let bytes = axum::body::to_bytes(body, usize::MAX).await.unwrap();
    if bytes.is_empty() {
        return Value::Null;
    }
    serde_json::from_slice(&bytes).unwrap_or_else(|_| {
        let events = parse_sse(&String::from_utf8_lossy(&bytes));
        events.into_iter().next().unwrap_or_else(|| panic!("one SSE event in {:?}", String::from_utf8_lossy(&bytes)))
    })
}

/// Parses complete SSE events (`data:` lines) into JSON messages.
pub fn parse_sse(text: &str) -> Vec<Value> {
    text.split("\n\n")
        .filter_map(|event| {
            let data: Vec<&str> = event
                .lines()
                .filter_map(|l| l.strip_prefix("data:"))
                .map(|d| d.strip_prefix(' ').unwrap_or(d))
                .collect();
            (!data.is_empty()).then(|| serde_json::from_str(&data.join("\n")).expect("SSE data is JSON"))
        })
        .collect()
}

/// An open SSE stream read event by event.
pub struct SseReader {
    stream: std::pin::Pin<Box<dyn futures::Stream<Item = Result<axum::body::Bytes, axum::Error>> + Send>>,
    buffer: String,
}

impl SseReader {
    pub fn new(body: Body) -> Self {
        Self { stream: Box::pin(body.into_data_stream()), buffer: String::new() }
    }

    /// The next JSON message, or `None` when the stream ended.
    pub async fn next(&mut self) -> Option<Value> {
        loop {
            if let Some(end) = self.buffer.find("\n\n") {
                let event: String = self.buffer.drain(..end + 2).collect();
                if let Some(message) = parse_sse(&event).into_iter().next() {
                    return Some(message);
                }
                continue; // keep-alive comment
            }
            let chunk = tokio::time::timeout(std::time::Duration::from_secs(10), self.stream.next())
                .await
                .expect("SSE event within 10 s")?;
            self.buffer.push_str(&String::from_utf8_lossy(&chunk.ok()?));
        }
    }
}

/// The JSON Schemas vendored under `tests/schema` (see its README for their source), compiled once.
pub struct Schemas {
    core: Value,
    ext: Value,
    cache: Mutex<HashMap<(bool, String), Arc<jsonschema::Validator>>>,
}

pub fn schemas() -> &'static Schemas {
    static SCHEMAS: OnceLock<Schemas> = OnceLock::new();
    SCHEMAS.get_or_init(|| {
        let dir = repo_root().join("tests/schema");
        let load = |p: &str| -> Value {
            let path = dir.join(p);
            serde_json::from_slice(&std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))).unwrap()
        };
        Schemas {
            core: load("core-2026-07-28/schema.json"),
            ext: load("ext-tasks-draft/schema.json"),
            cache: Mutex::new(HashMap::new()),
        }
    })
}

impl Schemas {
    fn validator(&self, ext: bool, def: &str) -> Arc<jsonschema::Validator> {
        let key = (ext, def.to_owned());
        if let Some(v) = self.cache.lock().get(&key) {
            return v.clone();
        }
        let doc = if ext { &self.ext } else { &self.core };
        assert!(doc["$defs"].get(def).is_some(), "schema has no $defs/{def}");
        let schema = json!({
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "$defs": doc["$defs"],
            "$ref": format!("#/$defs/{def}"),
        });
        let validator = Arc::new(jsonschema::validator_for(&schema).expect("schema compiles"));
        self.cache.lock().insert(key, validator.clone());
        validator
    }

    /// Asserts `value` is valid against `$defs/def` of the core (`ext = false`) or tasks schema.
    pub fn assert_valid(&self, ext: bool, def: &str, value: &Value) {
        let validator = self.validator(ext, def);
        let errors: Vec<String> =
            validator.iter_errors(value).map(|e| format!("{} at {}", e, e.instance_path())).collect();
        assert!(errors.is_empty(), "not a valid {def}: {errors:?}\n{value:#}");
    }

    /// Validates a JSON-RPC response to `method` against the schema of its result or error.
    pub fn check_response(&self, method: &str, message: &Value) {
        if message.is_null() {
            return;
        }
        if let Some(error) = message.get("error") {
            self.assert_valid(false, "JSONRPCErrorResponse", message);
            let def = match error["code"].as_i64() {
                Some(-32700) => "ParseError",
                Some(-32600) => "InvalidRequestError",
                Some(-32601) => "MethodNotFoundError",
                Some(-32602) => "InvalidParamsError",
                Some(-32603) => "InternalError",
                Some(-32020) => "HeaderMismatchError",
                Some(-32021) => "MissingRequiredClientCapabilityError",
                Some(-32022) => "UnsupportedProtocolVersionError",
                _ => "Error",
            };
            // Some core error defs describe the whole response, others only the error object.
            if self.core["$defs"][def]["properties"].get("error").is_some() {
                self.assert_valid(false, def, message);
            } else {
                self.assert_valid(false, def, error);
            }
            return;
        }
        self.assert_valid(false, "JSONRPCResultResponse", message);
        let result = &message["result"];
        match (method, result["resultType"].as_str()) {
            ("tools/call", Some("task")) => self.assert_valid(true, "CreateTaskResult", result),
            ("tools/call", Some("input_required")) => self.assert_valid(false, "InputRequiredResult", result),
            ("tools/call", _) => self.assert_valid(false, "CallToolResult", result),
            ("tasks/get", _) => {
                self.assert_valid(true, "GetTaskResult", result);
                if result["status"] == "completed" {
                    self.assert_valid(false, "CallToolResult", &result["result"]);
                }
            }
            ("tasks/update", _) => self.assert_valid(true, "UpdateTaskResult", result),
            ("tasks/cancel", _) => self.assert_valid(true, "CancelTaskResult", result),
            ("server/discover", _) => self.assert_valid(false, "DiscoverResult", result),
            ("tools/list", _) => self.assert_valid(false, "ListToolsResult", result),
            ("subscriptions/listen", _) => self.assert_valid(false, "SubscriptionsListenResult", result),
            _ => self.assert_valid(false, "Result", result),
        }
    }

    /// Validates one message of a listen stream.
    pub fn check_listen_message(&self, message: &Value) {
        match message["method"].as_str() {
            Some("notifications/subscriptions/acknowledged") => {
                self.assert_valid(false, "SubscriptionsAcknowledgedNotification", message);
            }
            Some("notifications/tasks") => {
                self.assert_valid(true, "TaskStatusNotification", message);
                if message["params"]["status"] == "completed" {
                    self.assert_valid(false, "CallToolResult", &message["params"]["result"]);
                }
            }
            Some(other) => panic!("unexpected notification {other}"),
            None => self.check_response("subscriptions/listen", message),
        }
        assert!(
            message["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"].is_number()
                || message["result"]["_meta"]["io.modelcontextprotocol/subscriptionId"].is_number(),
            "every listen message carries the subscription id: {message}"
        );
    }
}

/// A new, empty database on the PostgreSQL server at `$MCP_TASKS_PG_URL` (tests/pg/start).
#[cfg(feature = "postgres")]
pub async fn pg_database() -> String {
    let base = std::env::var("MCP_TASKS_PG_URL")
        .expect("MCP_TASKS_PG_URL names a PostgreSQL server (tests/run-all starts one with tests/pg/start)");
    let (client, connection) = tokio_postgres::connect(&base, tokio_postgres::NoTls).await.expect("connects");
    tokio::spawn(connection);
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let name =
        format!("mcp_tasks_test_{}_{}", std::process::id(), NEXT.fetch_add(1, std::sync::atomic::Ordering::SeqCst));
    client.batch_execute(&format!("CREATE DATABASE {name}")).await.expect("creates a database");
    match base.rfind('/') {
        Some(slash) => format!("{}/{name}", &base[..slash]),
        None => panic!("MCP_TASKS_PG_URL {base} has no database part"),
    }
}
