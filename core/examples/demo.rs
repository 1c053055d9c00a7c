//! The end-to-end demo: a tasks server on the embedded SQLite store, driven over real HTTP.
//!
//! `cargo run -p mcp-tasks --example demo` prints a transcript of:
//! 1. a slow tool driven to completion by polling `tasks/get` (honouring `pollIntervalMs`);
//! 2. the same tool followed through `subscriptions/listen` notifications instead;
//! 3. a cancel that is acknowledged and stays cancelled after the work would have finished;
//! 4. a client that did not declare the extension, which never receives a task handle.

use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::StreamExt;
use mcp_tasks::host::{Host, Tool, handler_fn, text_result};
use mcp_tasks::protocol::TaskMode;
use mcp_tasks::store::SqliteStore;
use mcp_tasks::{EXTENSION_ID, Engine, PROTOCOL_VERSION};
use serde_json::{Value, json};

const WORK: Duration = Duration::from_millis(1500);

struct Client {
    http: reqwest::Client,
    url: String,
    declare_tasks: bool,
    next_id: std::sync::atomic::AtomicU64,
}

impl Client {
    fn body(&self, method: &str, mut params: Value) -> (u64, Value) {
        let caps = if self.declare_tasks { json!({"extensions": {EXTENSION_ID: {}}}) } else { json!({}) };
        params["_meta"] = json!({
            "io.modelcontextprotocol/protocolVersion": PROTOCOL_VERSION,
            "io.modelcontextprotocol/clientCapabilities": caps,
            "io.modelcontextprotocol/clientInfo": {"name": "mcp-tasks-demo", "version": "0.1.0"},
        });
        let id = self.next_id.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        (id, json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))
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
        let (_, body) = self.body(method, params);
        self.post(method, &body).send().await.expect("server answers").json().await.expect("JSON")
    }
}

fn show(value: &Value) -> String {
    let mut text = value.to_string();
    if text.len() > 160 {
        text.truncate(157);
        text.push_str("...");
    }
    text
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
    let client = |declare_tasks| Client {
        http: reqwest::Client::new(),
        url: url.clone(),
        declare_tasks,
        next_id: std::sync::atomic::AtomicU64::new(1),
    };
    let tasks = client(true);

    let discover = tasks.call("server/discover", json!({})).await;
    println!("→ server/discover");
    println!("← capabilities {}\n", discover["result"]["capabilities"]);

    // 1. Polling.
    println!("== 1. A slow tool driven to completion by polling ==");
    let created = tasks.call("tools/call", json!({"name": "build_report", "arguments": {"quarter": "Q3"}})).await;
    let task = &created["result"];
    let id = task["taskId"].as_str().expect("a task").to_owned();
    println!("→ tools/call build_report (client declares {EXTENSION_ID})");
    println!(
        "← resultType {} taskId {id} status {} pollIntervalMs {}",
        task["resultType"], task["status"], task["pollIntervalMs"]
    );
    let started = Instant::now();
    let mut last = String::new();
    loop {
        let got = tasks.call("tasks/get", json!({"taskId": id})).await;
        let task = &got["result"];
        let line = status_line(task);
        if line != last {
            println!("  {:>5} ms  tasks/get → {line}", started.elapsed().as_millis());
            last = line;
        }
        if ["completed", "failed", "cancelled"].contains(&task["status"].as_str().unwrap_or("")) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(task["pollIntervalMs"].as_u64().unwrap_or(1000))).await;
    }

    // 2. Notifications.
    println!("\n== 2. The same tool followed by notifications (subscriptions/listen) ==");
    let created = tasks.call("tools/call", json!({"name": "build_report", "arguments": {"quarter": "Q4"}})).await;
    let id = created["result"]["taskId"].as_str().unwrap().to_owned();
    println!("→ tools/call build_report → task {id}");
    let (listen_id, body) = tasks.body("subscriptions/listen", json!({"notifications": {"taskIds": [id]}}));
    println!("→ subscriptions/listen {{taskIds: [{id}]}} (request id {listen_id})");
    let response = tasks.post("subscriptions/listen", &body).send().await.unwrap();
    let mut stream = response.bytes_stream();
    let mut buffer = String::new();
    let started = Instant::now();
    'listen: while let Some(chunk) = stream.next().await {
        buffer.push_str(&String::from_utf8_lossy(&chunk.unwrap()));
        while let Some(end) = buffer.find("\n\n") {
            let event: String = buffer.drain(..end + 2).collect();
            let Some(data) = event.lines().find_map(|l| l.strip_prefix("data: ")) else { continue };
            let message: Value = serde_json::from_str(data).unwrap();
            let at = started.elapsed().as_millis();
            match message["method"].as_str() {
                Some("notifications/subscriptions/acknowledged") => {
                    println!("  {at:>5} ms  ← acknowledged taskIds {}", message["params"]["notifications"]["taskIds"]);
                }
                Some("notifications/tasks") => {
                    println!("  {at:>5} ms  ← notifications/tasks: {}", status_line(&message["params"]));
                }
                _ => {
                    println!("  {at:>5} ms  ← stream closed: {}", show(&message["result"]));
                    break 'listen;
                }
            }
        }
    }

    // 3. Cancel.
    println!("\n== 3. A cancel that is acknowledged and stays cancelled ==");
    let created = tasks.call("tools/call", json!({"name": "build_report", "arguments": {"quarter": "Q1"}})).await;
    let id = created["result"]["taskId"].as_str().unwrap().to_owned();
    println!("→ tools/call build_report → task {id}");
    tokio::time::sleep(Duration::from_millis(300)).await;
    let ack = tasks.call("tasks/cancel", json!({"taskId": id})).await;
    println!("→ tasks/cancel ← {}", show(&ack["result"]));
    let got = tasks.call("tasks/get", json!({"taskId": id})).await;
    println!("→ tasks/get ← {}", status_line(&got["result"]));
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
}
