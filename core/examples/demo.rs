//! The end-to-end demo: a tasks server on the embedded SQLite store, driven over real HTTP by the
//! mcp-tasks client (and, for the non-declaring case, by a bare HTTP client).
//!
//! `cargo run -p mcp-tasks --example demo` prints a transcript of:
//! 1. a slow tool driven to completion by polling `tasks/get` (honouring `pollIntervalMs`);
//! 2. the same tool followed through `subscriptions/listen` notifications instead;
//! 3. a cancel that is acknowledged and stays cancelled after the work would have finished;
//! 4. a client that did not declare the extension, which never receives a task handle.
//!
//! With `-- --keep-going` it then goes on calling the tool (a new report every second, one in five
//! cancelled) for up to an hour, and prints the `mcp-tasks web` command that shows its store: open
//! the page and watch the tasks move and their histories fill.

use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::StreamExt;
use mcp_tasks::client::{Client, ClientConfig, Execution};
use mcp_tasks::host::{Host, Tool, handler_fn, text_result};
use mcp_tasks::protocol::TaskMode;
use mcp_tasks::protocol::client::{CancelMode, Outcome};
use mcp_tasks::store::SqliteStore;
use mcp_tasks::{EXTENSION_ID, Engine, PROTOCOL_VERSION};
use serde_json::{Value, json};

const WORK: Duration = Duration::from_millis(1500);

/// A bare HTTP client that builds each request by hand (used where the mcp-tasks client cannot go).
struct BareClient {
    http: reqwest::Client,
    url: String,
    declare_tasks: bool,
    next_id: std::sync::atomic::AtomicU64,
}

impl BareClient {
    fn body(&self, method: &str, mut params: Value) -> Value {
        let caps = if self.declare_tasks { json!({"extensions": {EXTENSION_ID: {}}}) } else { json!({}) };
        params["_meta"] = json!({
            "io.modelcontextprotocol/protocolVersion": PROTOCOL_VERSION,
            "io.modelcontextprotocol/clientCapabilities": caps,
            "io.modelcontextprotocol/clientInfo": {"name": "mcp-tasks-demo", "version": "0.1.0"},
        });
        let id = self.next_id.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params})
    }

    fn post(&self, method: &str, body: &Value) -> reqwest::RequestBuilder {
        let name = body["params"].get("taskId").or_else(|| body["params"].get("name"));
        let mut request = self
            .http
            .post(&self.url)
            .header("accept", "application/json, text/event-stream")
            .header("mcp-protocol-version", PROTOCOL_VERSION)
            .header("mcp-method", method)
            .json(body);
        if let Some(name) = name.and_then(Value::as_str) {
            request = request.header("mcp-name", name);
        }
        request
    }

    async fn call(&self, method: &str, params: Value) -> Value {
        let body = self.body(method, params);
        self.post(method, &body).send().await.expect("server answers").json().await.expect("JSON")
    }
}

fn status_line(task: &Value) -> String {
    let mut line = task["status"].as_str().unwrap_or("?").to_owned();
    if let Some(message) = task["statusMessage"].as_str() {
        line.push_str(&format!(" — {message}"));
    }
    if let Some(text) = task["result"]["content"][0]["text"].as_str() {
        line.push_str(&format!(" — result: {text:?}"));
    }
    line
}

/// Calls `build_report` and prints every state the client sees until the outcome.
async fn follow(client: &Client, quarter: &str, via: &str) {
    let execution = client.call_tool("build_report", json!({"quarter": quarter})).await.expect("call");
    let Execution::Task(task) = execution else { panic!("expected a task") };
    let latest = task.latest();
    println!("→ tools/call build_report {{quarter: {quarter}}} (the client declares {EXTENSION_ID})");
    println!(
        "← resultType \"task\" taskId {} status {} pollIntervalMs {}",
        task.task_id(),
        latest.task.status.as_str(),
        latest.task.poll_interval_ms.unwrap_or(0)
    );
    let started = Instant::now();
    let mut updates = task.updates();
    let mut source = "CreateTaskResult";
    while let Some(state) = updates.next().await {
        let value = serde_json::to_value(&state).expect("task serializes");
        println!("  {:>5} ms  {source} → {}", started.elapsed().as_millis(), status_line(&value));
        source = via;
    }
    println!("← outcome after {} ms: {}", started.elapsed().as_millis(), short(&task.result().await.expect("outcome")));
}

fn short(outcome: &Outcome) -> String {
    match outcome {
        Outcome::Completed { result } => {
            format!("completed — {:?}", result["content"][0]["text"].as_str().unwrap_or(""))
        }
        other => format!("{other:?}"),
    }
}

async fn serve(db: &std::path::Path) -> (String, tokio::task::JoinHandle<()>) {
    let store = Arc::new(SqliteStore::open(db).expect("open SQLite store"));
    let engine = Engine::builder(store).build().await.expect("engine");
    engine.spawn_sweeper();
    let report = handler_fn(|call, ctx| async move {
        let quarter = call.arguments.get("quarter").and_then(Value::as_str).unwrap_or("Q3").to_owned();
        for (i, step) in ["gathering figures", "crunching numbers", "rendering charts"].iter().enumerate() {
            ctx.set_status_message(format!("{step} ({}/3)", i + 1)).await?;
            tokio::time::sleep(WORK / 3).await;
        }
        Ok(text_result(format!("{quarter} report: revenue up 12%")))
    });
    let host = Host::builder(engine)
        .server_info("mcp-tasks-demo", env!("CARGO_PKG_VERSION"))
        .tool(
            Tool::new("build_report", report)
                .description("Builds a quarterly report; takes a while.")
                .mode(TaskMode::Optional)
                .poll_interval_ms(400),
        )
        .build();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let url = format!("http://{}/mcp", listener.local_addr().unwrap());
    let router = host.router("/mcp");
    let server = tokio::spawn(async move {
        mcp_tasks::host::serve(listener, router, std::future::pending()).await.unwrap();
    });
    (url, server)
}

#[tokio::main]
async fn main() {
    let dir = tempfile::tempdir().expect("temp dir");
    let db = dir.path().join("tasks.db");
    let (url, _server) = serve(&db).await;
    println!("mcp-tasks demo — a tasks server on {url}, durable store {}\n", db.display());
    let client = |declare_tasks| BareClient {
        http: reqwest::Client::new(),
        url: url.clone(),
        declare_tasks,
        next_id: std::sync::atomic::AtomicU64::new(1),
    };
    let tasks = client(true);

    let discover = tasks.call("server/discover", json!({})).await;
    println!("→ server/discover");
    println!("← capabilities {}\n", discover["result"]["capabilities"]);

    // 1. Polling, with the mcp-tasks client (listen streams off, so only tasks/get drives it).
    println!("== 1. A slow tool driven to completion by polling ==");
    let polling = Client::http(&url)
        .config(ClientConfig { notifications: false, ..ClientConfig::default() })
        .sqlite_store(dir.path().join("client-refs.db"))
        .expect("client store")
        .build()
        .expect("client");
    follow(&polling, "Q3", "tasks/get").await;

    // 2. Notifications: the same client with listen streams on (the default).
    println!("\n== 2. The same tool followed by notifications (subscriptions/listen) ==");
    let listening = Client::http(&url).memory_store().build().expect("client");
    follow(&listening, "Q4", "notifications/tasks").await;

    // 3. Cancel.
    println!("\n== 3. A cancel that is acknowledged and stays cancelled ==");
    let Execution::Task(task) = polling.call_tool("build_report", json!({"quarter": "Q1"})).await.expect("call") else {
        panic!("expected a task");
    };
    let id = task.task_id().to_owned();
    println!("→ tools/call build_report → task {id}");
    tokio::time::sleep(Duration::from_millis(300)).await;
    task.cancel(CancelMode::Observe).expect("cancel");
    println!("→ tasks/cancel (then keep observing until terminal)");
    println!("← outcome: {:?}", task.result().await.expect("outcome"));
    tokio::time::sleep(WORK + Duration::from_millis(300)).await;
    let got = tasks.call("tasks/get", json!({"taskId": id})).await;
    println!("… {} ms later, after the work would have finished:", (WORK + Duration::from_millis(300)).as_millis());
    println!("→ tasks/get ← {} (terminal states never change)", status_line(&got["result"]));

    // 4. A client that did not declare the extension.
    println!("\n== 4. A client that did not declare the extension ==");
    let plain = client(false);
    let started = Instant::now();
    let result = plain.call("tools/call", json!({"name": "build_report", "arguments": {"quarter": "Q2"}})).await;
    println!("→ tools/call build_report (no extension in clientCapabilities)");
    println!(
        "← after {} ms, resultType {}, taskId present: {} — {}",
        started.elapsed().as_millis(),
        result["result"]["resultType"],
        result["result"].get("taskId").is_some(),
        status_line(&json!({"status": "synchronous", "result": result["result"]}))
    );
    let refused = plain.call("tasks/get", json!({"taskId": id})).await;
    println!(
        "→ tasks/get ← error {} {:?}",
        refused["error"]["code"],
        refused["error"]["message"].as_str().unwrap_or("")
    );
    println!("\nDone: every task above is in {} and would survive a restart.", db.display());
    if std::env::args().any(|a| a == "--keep-going") {
        keep_going(&polling, &db).await;
    }
}

/// Goes on calling `build_report` (one in five cancelled) for an hour, or until Ctrl-C.
async fn keep_going(client: &Client, db: &std::path::Path) {
    println!("\nStill running, a new report every second. In another terminal:");
    println!("  cargo run -p mcp-tasks-cli -- web --store sqlite://{}", db.display());
    println!("then open http://127.0.0.1:8765/ (Ctrl-C here ends the demo).");
    let until = Instant::now() + Duration::from_secs(3600);
    let mut n = 0u32;
    let mut running = Vec::new();
    while Instant::now() < until {
        n += 1;
        let quarter = format!("Q{}", n % 4 + 1);
        if let Ok(Execution::Task(task)) = client.call_tool("build_report", json!({"quarter": quarter})).await {
            if n.is_multiple_of(5) {
                let _ = task.cancel(CancelMode::Observe);
            }
            running.push(task);
        }
        // The handles of finished tasks are let go; the tasks stay in the store.
        running.retain(|task| !task.latest().task.status.is_terminal());
        tokio::select! {
            _ = tokio::time::sleep(Duration::from_secs(1)) => {}
            _ = tokio::signal::ctrl_c() => break,
        }
    }
}
