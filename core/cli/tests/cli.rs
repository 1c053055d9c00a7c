//! The `mcp-tasks` binary against a SQLite store: its output, its exit statuses and its errors.

use std::process::{Command, Output};
use std::sync::Arc;

use mcp_tasks::Engine;
use mcp_tasks::engine::TaskOptions;
use mcp_tasks::store::SqliteStore;
use serde_json::{Value, json};

fn cli(store: &str, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_mcp-tasks")).arg("--store").arg(store).args(args).output().expect("runs")
}

fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// A store whose host stopped, with a completed `report` and a `watch` left working.
async fn store(dir: &tempfile::TempDir) -> (String, String, String) {
    let store = Arc::new(SqliteStore::open(dir.path().join("tasks.db")).unwrap());
    let engine = Engine::builder(store.clone()).build().await.unwrap();
    let (done, ctx) = engine.create_task("alice", "report", TaskOptions::default()).await.unwrap();
    ctx.complete(json!({"content": [{"type": "text", "text": "ok"}]})).await.unwrap();
    let (working, ctx) = engine.create_task("bob", "watch", TaskOptions::default()).await.unwrap();
    std::mem::forget(ctx);
    drop(engine);
    store.close();
    let url = format!("sqlite://{}", dir.path().join("tasks.db").display());
    (url, done.task.task_id, working.task.task_id)
}

#[tokio::test]
async fn list_show_stats_cancel_and_purge_print_what_they_did() {
    let dir = tempfile::tempdir().unwrap();
    let (url, done, working) = store(&dir).await;

    let list = cli(&url, &["list"]);
    assert!(list.status.success(), "{}", stderr(&list));
    let lines: Vec<String> = stdout(&list).lines().map(str::to_owned).collect();
    assert!(lines[0].starts_with("ID") && lines[0].contains("STATUS"), "{lines:?}");
    assert!(lines[1].starts_with(&working) && lines[2].starts_with(&done), "newest first: {lines:?}");

    let json = cli(&url, &["list", "--status", "completed", "--json"]);
    let rows: Vec<Value> = stdout(&json).lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(rows.len(), 1);
    assert_eq!((rows[0]["taskId"].as_str(), rows[0]["tool"].as_str()), (Some(done.as_str()), Some("report")));

    let show = cli(&url, &["show", &done]);
    let shown: Value = serde_json::from_str(&stdout(&show)).unwrap();
    assert_eq!(shown["status"], "completed");
    assert_eq!(shown["principal"], "alice");
    assert_eq!(shown["resultType"], "complete", "as tasks/get answers it");
    let events: Vec<&str> = shown["history"].as_array().unwrap().iter().map(|e| e["event"].as_str().unwrap()).collect();
    assert_eq!(events, ["created", "result", "status"], "{shown}");
    assert_eq!(shown["history"][0]["tool"], "report");
    assert!(shown["history"][2]["at"].as_str().unwrap().ends_with('Z'), "{shown}");

    let stats = cli(&url, &["stats", "--json"]);
    let counts: Value = serde_json::from_str(&stdout(&stats)).unwrap();
    assert_eq!(counts.as_array().map(Vec::len), Some(2));

    let cancel = cli(&url, &["cancel", "--operator", "ana", &working]);
    assert_eq!((cancel.status.code(), stdout(&cancel)), (Some(0), format!("cancelled {working}\n")));
    let shown: Value = serde_json::from_str(&stdout(&cli(&url, &["show", &working]))).unwrap();
    let history = shown["history"].as_array().unwrap();
    assert_eq!(history[history.len() - 2]["event"], "cancel_requested", "{shown}");
    assert_eq!(history[history.len() - 2]["by"], json!({"operator": "ana"}), "the operator is named");
    assert_eq!(history[history.len() - 1]["status"], "cancelled");
    let again = cli(&url, &["cancel", &done]);
    assert_eq!(stdout(&again), format!("{done} is already completed; unchanged\n"));
    let unknown = cli(&url, &["cancel", "nope"]);
    assert_eq!(unknown.status.code(), Some(1));
    assert!(stderr(&unknown).contains("no task nope"));

    let named = cli(&url, &["purge", &done, "unknown-id"]);
    assert_eq!(stdout(&named), "purged 1 tasks\n", "{}", stderr(&named));
    assert_eq!(cli(&url, &["purge"]).status.code(), Some(2), "a purge names its tasks or an age");
    let purge = cli(&url, &["purge", "--older-than", "0s"]);
    assert_eq!(stdout(&purge), "purged 1 tasks\n");
    assert_eq!(stdout(&cli(&url, &["list"])).lines().last(), Some("(no tasks)"));
}

#[test]
fn bad_stores_and_arguments_are_clear_errors_with_their_exit_statuses() {
    let dir = tempfile::tempdir().unwrap();
    let missing = format!("sqlite://{}", dir.path().join("absent.db").display());
    let output = cli(&missing, &["list"]);
    assert_eq!(output.status.code(), Some(1));
    assert!(stderr(&output).contains("the file does not exist"), "{}", stderr(&output));

    let output = cli("redis://x", &["stats"]);
    assert!(stderr(&output).contains("use sqlite:///path"), "{}", stderr(&output));

    let output = cli(&missing, &["list", "--older-than", "3 weeks"]);
    assert_eq!(output.status.code(), Some(2), "a usage error");

    let output =
        Command::new(env!("CARGO_BIN_EXE_mcp-tasks")).arg("stats").env_remove("MCP_TASKS_STORE").output().unwrap();
    assert!(stderr(&output).contains("--store URL or set MCP_TASKS_STORE"), "{}", stderr(&output));
}

#[tokio::test]
async fn web_serves_the_view_on_loopback_and_refuses_another_address_without_tokens() {
    use std::io::{BufRead as _, BufReader, Read as _, Write as _};
    let dir = tempfile::tempdir().unwrap();
    let (url, done, _working) = store(&dir).await;

    let refused = cli(&url, &["web", "--listen", "0.0.0.0:0"]);
    assert_eq!(refused.status.code(), Some(2), "{}", stderr(&refused));
    assert!(stderr(&refused).contains("needs --token-file"));

    let mut child = Command::new(env!("CARGO_BIN_EXE_mcp-tasks"))
        .args(["--store", &url, "web", "--listen", "127.0.0.1:0", "--prefix", "/ops"])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.as_mut().unwrap()).read_line(&mut line).unwrap();
    let address = line.trim().strip_prefix("serving the web view at http://").unwrap().strip_suffix("/ops/").unwrap();
    let ask = |host: &str| {
        let mut stream = std::net::TcpStream::connect(address).unwrap();
        write!(stream, "GET /ops/tasks/{done} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n").unwrap();
        let mut answer = String::new();
        stream.read_to_string(&mut answer).unwrap();
        answer
    };
    let answer = ask(address);
    // DNS rebinding: a page on another name that now points here reads nothing.
    let port = address.rsplit(':').next().unwrap();
    let rebound = ask(&format!("evil.example:{port}"));
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(rebound.starts_with("HTTP/1.1 403"), "{rebound}");
    assert!(!rebound.contains(&done), "{rebound}");
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert!(answer.contains("content-security-policy: default-src 'none'"), "{answer}");
    assert!(answer.contains(&done) && answer.contains(r#"<span class="event">created</span>"#), "{answer}");
}
