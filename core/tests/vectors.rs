//! Replays every shared vector in `tests/vectors/` against the Rust host: over HTTP on the
//! memory, SQLite and PostgreSQL stores, and over the stdio transport on SQLite, validating every
//! message against the schemas.

mod common;

use std::collections::HashMap;
use std::sync::Arc;

use common::{SseReader, TestHost, WorkStep, meta_with, parse_sse, read_json, request, schemas, standard_headers};
use mcp_tasks::engine::EngineConfig;
use mcp_tasks::protocol::RpcError;
use mcp_tasks::store::{Durability, MemoryStore, SqliteStore, TaskStore};
use serde_json::{Value, json};

/// Matches `actual` against `expected`, where the string "@any" matches any present value.
fn matches(expected: &Value, actual: &Value, path: &str, diffs: &mut Vec<String>) {
    match (expected, actual) {
        (Value::String(s), _) if s == "@any" => {}
        (Value::Object(e), Value::Object(a)) => {
            for (key, ev) in e {
                match a.get(key) {
                    Some(av) => matches(ev, av, &format!("{path}/{key}"), diffs),
                    None => diffs.push(format!("{path}/{key}: missing")),
                }
            }
            for key in a.keys().filter(|k| !e.contains_key(*k)) {
                diffs.push(format!("{path}/{key}: unexpected {}", a[key]));
            }
        }
        (Value::Array(e), Value::Array(a)) if e.len() == a.len() => {
            for (i, (ev, av)) in e.iter().zip(a).enumerate() {
                matches(ev, av, &format!("{path}/{i}"), diffs);
            }
        }
        _ if expected == actual => {}
        _ => diffs.push(format!("{path}: expected {expected}, got {actual}")),
    }
}

fn assert_matches(vector: &str, step: usize, expected: &Value, actual: &Value) {
    let mut diffs = Vec::new();
    matches(expected, actual, "", &mut diffs);
    assert!(diffs.is_empty(), "{vector} step {step}: {diffs:#?}\nactual: {actual:#}");
}

fn substitute(value: &Value, vars: &HashMap<String, Value>) -> Value {
    match value {
        Value::String(s) => {
            let mut out = s.clone();
            for (name, v) in vars {
                out = out.replace(&format!("${{{name}}}"), v.as_str().unwrap_or(""));
            }
            Value::String(out)
        }
        Value::Array(items) => Value::Array(items.iter().map(|v| substitute(v, vars)).collect()),
        Value::Object(map) => Value::Object(map.iter().map(|(k, v)| (k.clone(), substitute(v, vars))).collect()),
        other => other.clone(),
    }
}

fn apply_headers(mut headers: Vec<(String, String)>, overrides: Option<&Value>) -> Vec<(String, String)> {
    if let Some(Value::Object(overrides)) = overrides {
        for (name, value) in overrides {
            headers.retain(|(n, _)| !n.eq_ignore_ascii_case(name));
            if let Some(value) = value.as_str() {
                headers.push((name.clone(), value.to_owned()));
            }
        }
    }
    headers
}

async fn replay(path: &std::path::Path, store: Arc<dyn TaskStore>, config: EngineConfig) {
    let start_ms = start_ms(path);
    replay_on(path, TestHost::with_config(store, start_ms, config).await, "rust").await;
}

/// The clock's start of a vector.
fn start_ms(path: &std::path::Path) -> u64 {
    let vector: Value = serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap();
    vector["start_ms"].as_u64().unwrap()
}

/// Replays the vector at `path` against `host`, as `runner` (whose unchecked steps, in
/// `skip.json`, are sent but not checked).
async fn replay_on(path: &std::path::Path, host: TestHost, runner: &str) {
    let vector: Value = serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap();
    let name = vector["name"].as_str().unwrap().to_owned();
    let unchecked = unchecked_steps(runner, &name);
    let mut vars: HashMap<String, Value> = HashMap::new();
    let mut streams: HashMap<String, SseReader> = HashMap::new();
    let mut next_id = 1u64;
    for (index, step) in vector["steps"].as_array().unwrap().iter().enumerate() {
        let step = substitute(step, &vars);
        let tasks = step.get("tasks").and_then(Value::as_bool).unwrap_or(true);
        let principal = step.get("principal").and_then(Value::as_str);
        if unchecked.contains(&index) && step.get("send").is_some() {
            // Sent, for what later steps depend on, but not checked (skip.json says why).
            let body = step_request(next_id, &step, tasks);
            next_id += 1;
            let headers = apply_headers(standard_headers(&body, principal), step.get("headers"));
            let _ = host.post_raw(&headers, serde_json::to_vec(&body).unwrap()).await;
            continue;
        }
        if let Some(send) = step.get("send") {
            let method = send["method"].as_str().unwrap();
            let body = step_request(next_id, &step, tasks);
            next_id += 1;
            let headers = apply_headers(standard_headers(&body, principal), step.get("headers"));
            let (status, _, response) = host.post_raw(&headers, serde_json::to_vec(&body).unwrap()).await;
            let json = read_json(response).await;
            schemas().check_response(method, &json);
            assert_eq!(status, step["expect"]["status"].as_u64().unwrap() as u16, "{name} step {index}: {json}");
            assert_matches(&name, index, &step["expect"]["body"], &json);
            if let Some(Value::Object(capture)) = step.get("capture") {
                for (var, pointer) in capture {
                    vars.insert(var.clone(), json.pointer(pointer.as_str().unwrap()).cloned().unwrap());
                }
            }
        } else if let Some(raw) = step.get("send_raw") {
            let body = match raw {
                Value::String(s) => s.clone().into_bytes(),
                _ => raw["repeat"].as_str().unwrap().repeat(raw["times"].as_u64().unwrap() as usize).into_bytes(),
            };
            let headers = apply_headers(
                vec![
                    ("content-type".into(), "application/json".into()),
                    ("accept".into(), "application/json, text/event-stream".into()),
                ],
                step.get("headers"),
            );
            let (status, _, response) = host.post_raw(&headers, body).await;
            let json = read_json(response).await;
            schemas().check_response("", &json);
            assert_eq!(status, step["expect"]["status"].as_u64().unwrap() as u16, "{name} step {index}: {json}");
            assert_matches(&name, index, &step["expect"]["body"], &json);
        } else if run_engine_step(&host, &name, index, &step).await {
        } else if let Some(listen) = step.get("listen") {
            let params = json!({"notifications": listen["notifications"]});
            let body = request(next_id, "subscriptions/listen", params, tasks);
            next_id += 1;
            let headers = standard_headers(&body, principal);
            let (status, content_type, response) = host.post_raw(&headers, serde_json::to_vec(&body).unwrap()).await;
            assert_eq!(status, step["expect"]["status"].as_u64().unwrap() as u16, "{name} step {index}");
            assert!(content_type.starts_with("text/event-stream"), "{name} step {index}: {content_type}");
            streams.insert(listen["stream"].as_str().unwrap().to_owned(), SseReader::new(response));
        } else if let Some(events) = step.get("events") {
            let reader = streams.get_mut(events["stream"].as_str().unwrap()).expect("stream is open");
            for expected in events["expect"].as_array().unwrap() {
                let message = reader.next().await.unwrap_or_else(|| panic!("{name} step {index}: stream ended"));
                schemas().check_listen_message(&message);
                assert_matches(&name, index, expected, &message);
            }
            if events.get("end").and_then(Value::as_bool) == Some(true) {
                assert!(reader.next().await.is_none(), "{name} step {index}: stream should end");
            }
        } else {
            panic!("{name} step {index}: unknown step {step}");
        }
    }
}

/// The request a `send` step makes: the envelope declares the step's `capabilities` when it
/// gives them, else the default (`tasks`).
fn step_request(id: u64, step: &Value, tasks: bool) -> Value {
    let send = &step["send"];
    let mut params = send["params"].clone();
    if let Some(caps) = step.get("capabilities")
        && params.get("_meta").is_none()
    {
        if params.is_null() {
            params = json!({});
        }
        params["_meta"] = meta_with(caps.clone());
    }
    request(id, send["method"].as_str().unwrap(), params, tasks)
}

/// Runs a step that acts on the server's engine and clock rather than its wire (`advance_ms`,
/// `work`, `sweep`, `answers`); false for a wire step.
async fn run_engine_step(host: &TestHost, name: &str, index: usize, step: &Value) -> bool {
    if let Some(ms) = step.get("advance_ms") {
        host.clock.advance(ms.as_u64().unwrap());
    } else if let Some(work) = step.get("work") {
        let task = work["task"].as_str().unwrap();
        let owner = host.engine.store().get(task).await.unwrap().expect("work on a known task");
        if owner.status.is_terminal() {
            return true; // The work already ended; "it would have finished now".
        }
        if let Some(text) = work.get("status").and_then(Value::as_str) {
            host.scripts.send(task, WorkStep::Status(text.to_owned()));
            host.wait_for(&owner.principal, task, |t| t["statusMessage"] == text).await;
        } else if let Some(Value::Object(requests)) = work.get("input") {
            let before = host.scripts.refusals(task, 0).await.len();
            host.scripts.send(task, WorkStep::Input(requests.clone()));
            if let Some(refused) = work.get("refused") {
                // The work's request is refused and nothing changes: it goes on.
                let got = host.scripts.refusals(task, before + 1).await;
                assert_matches(name, index, refused, &serde_json::to_value(&got[before]).unwrap());
            } else {
                host.wait_for(&owner.principal, task, |t| t["status"] == "input_required").await;
            }
        } else if let Some(result) = work.get("complete") {
            host.scripts.send(task, WorkStep::Complete(result.clone()));
            host.wait_for(&owner.principal, task, |t| t["status"] != "working").await;
        } else if let Some(error) = work.get("fail") {
            let error: RpcError = serde_json::from_value(error.clone()).unwrap();
            host.scripts.send(task, WorkStep::Fail(error));
            host.wait_for(&owner.principal, task, |t| t["status"] != "working").await;
        } else {
            panic!("{name} step {index}: unknown work {work}");
        }
    } else if let Some(expect) = step.get("sweep") {
        let report = host.engine.sweep().await.unwrap();
        assert_eq!(json!({"expired": report.expired, "purged": report.purged}), *expect, "{name} step {index}: sweep");
    } else if let Some(answers) = step.get("answers") {
        let want = answers["expect"].as_array().unwrap().len();
        let got: Vec<Value> = host
            .scripts
            .answers(answers["task"].as_str().unwrap(), want)
            .await
            .into_iter()
            .map(Value::Object)
            .collect();
        assert_matches(name, index, &answers["expect"], &Value::Array(got));
    } else {
        return false;
    }
    true
}

/// The steps of one vector the stdio replay does not check, with the reason (runner
/// `rust-stdio` in `skip.json`): HTTP statuses, headers and principals have no stdio form.
/// The steps of `vector` that `skip.json` leaves unchecked for `runner`, each with a reason.
fn unchecked_steps(runner: &str, vector: &str) -> Vec<usize> {
    let skip: Value =
        serde_json::from_slice(&std::fs::read(common::repo_root().join("tests/vectors/skip.json")).unwrap()).unwrap();
    let mut steps = Vec::new();
    for entry in skip["unchecked_steps"].as_array().unwrap() {
        if entry["runner"] == runner && entry["vector"] == vector {
            assert!(!entry["reason"].as_str().unwrap_or("").is_empty(), "{vector}: an unchecked step needs a reason");
            steps.extend(entry["steps"].as_array().unwrap().iter().map(|v| v.as_u64().unwrap() as usize));
        }
    }
    steps
}

/// The client end of a stdio channel to the host: lines out, messages in, listen messages kept
/// apart by subscription id.
struct StdioPeer {
    writer: tokio::io::WriteHalf<tokio::io::DuplexStream>,
    lines: tokio::io::Lines<tokio::io::BufReader<tokio::io::ReadHalf<tokio::io::DuplexStream>>>,
    /// Listen messages read while waiting for a response, by subscription id.
    streams: HashMap<u64, std::collections::VecDeque<Value>>,
    /// Responses read while waiting for another one.
    held: Vec<Value>,
}

impl StdioPeer {
    async fn write(&mut self, line: &[u8]) {
        use tokio::io::AsyncWriteExt;
        self.writer.write_all(line).await.unwrap();
        self.writer.write_all(b"\n").await.unwrap();
    }

    /// Reads one message (10 s bound), filing listen messages under their stream.
    async fn read(&mut self) -> Option<Value> {
        let line = tokio::time::timeout(std::time::Duration::from_secs(10), self.lines.next_line())
            .await
            .expect("a message within 10 s")
            .unwrap()?;
        let message: Value = serde_json::from_str(&line).unwrap_or_else(|e| panic!("not JSON ({e}): {line}"));
        if let Some(id) = message["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"].as_u64() {
            self.streams.entry(id).or_default().push_back(message);
            return Some(Value::Null);
        }
        Some(message)
    }

    /// The response `pick` accepts (responses are written in the order they are ready).
    async fn response(&mut self, pick: impl Fn(&Value) -> bool) -> Value {
        if let Some(i) = self.held.iter().position(&pick) {
            return self.held.remove(i);
        }
        loop {
            match self.read().await.expect("the host's output is open") {
                Value::Null => {}
                message if pick(&message) => return message,
                message => self.held.push(message),
            }
        }
    }

    async fn stream_message(&mut self, subscription: u64) -> Option<Value> {
        loop {
            if let Some(message) = self.streams.get_mut(&subscription).and_then(std::collections::VecDeque::pop_front) {
                return Some(message);
            }
            match self.read().await? {
                Value::Null => {}
                message if message.get("id") == Some(&json!(subscription)) => return None, // the stream's end
                message => self.held.push(message),
            }
        }
    }
}

/// Replays one vector over the stdio transport of the same host: the same requests as lines,
/// the same bodies expected (HTTP statuses aside), listen streams demultiplexed from the one
/// channel. Steps listed for `rust-stdio` in `skip.json` are run but not checked.
async fn replay_stdio(path: &std::path::Path, store: Arc<dyn TaskStore>, config: EngineConfig) -> Vec<String> {
    let host = TestHost::with_config(store, start_ms(path), config).await;
    replay_stdio_on(path, host, &["rust-stdio"]).await
}

/// Replays the vector at `path` over the stdio transport of `host`, leaving unchecked the steps
/// `skip.json` lists for any of `runners`; the failures.
async fn replay_stdio_on(path: &std::path::Path, host: TestHost, runners: &[&str]) -> Vec<String> {
    use tokio::io::AsyncBufReadExt;
    let vector: Value = serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap();
    let name = vector["name"].as_str().unwrap().to_owned();
    let unchecked: Vec<usize> = runners.iter().flat_map(|runner| unchecked_steps(runner, &name)).collect();
    let (client, server) = tokio::io::duplex(1 << 20);
    let (server_in, server_out) = tokio::io::split(server);
    let serving = host.host.clone();
    tokio::spawn(async move { serving.serve_stdio(server_in, server_out).await });
    let (client_in, writer) = tokio::io::split(client);
    let mut peer = StdioPeer {
        writer,
        lines: tokio::io::BufReader::new(client_in).lines(),
        streams: HashMap::new(),
        held: Vec::new(),
    };
    let mut vars: HashMap<String, Value> = HashMap::new();
    let mut streams: HashMap<String, u64> = HashMap::new();
    let mut next_id = 1u64;
    let mut failures = Vec::new();
    let mut check_step = |index: usize, expected: &Value, actual: &Value| {
        let mut diffs = Vec::new();
        matches(expected, actual, "", &mut diffs);
        if !diffs.is_empty() && !unchecked.contains(&index) {
            failures.push(format!("{name} step {index}: {diffs:?} (got {actual})"));
        }
    };
    for (index, step) in vector["steps"].as_array().unwrap().iter().enumerate() {
        let step = substitute(step, &vars);
        let tasks = step.get("tasks").and_then(Value::as_bool).unwrap_or(true);
        if let Some(send) = step.get("send") {
            let method = send["method"].as_str().unwrap();
            let id = next_id;
            let body = step_request(id, &step, tasks);
            next_id += 1;
            peer.write(&serde_json::to_vec(&body).unwrap()).await;
            let json = peer.response(|m| m.get("id") == Some(&json!(id))).await;
            schemas().check_response(method, &json);
            check_step(index, &step["expect"]["body"], &json);
            if let Some(Value::Object(capture)) = step.get("capture") {
                for (var, pointer) in capture {
                    vars.insert(var.clone(), json.pointer(pointer.as_str().unwrap()).cloned().unwrap());
                }
            }
        } else if let Some(raw) = step.get("send_raw") {
            let body = match raw {
                Value::String(s) => s.clone(),
                _ => raw["repeat"].as_str().unwrap().repeat(raw["times"].as_u64().unwrap() as usize),
            };
            let expected = &step["expect"]["body"];
            peer.write(body.as_bytes()).await;
            if expected.is_null() {
                // No answer expected: a request sent after it must be the next answer.
                let id = next_id + 1_000_000;
                let probe = request(id, "tasks/get", json!({"taskId": "probe"}), true);
                peer.write(&serde_json::to_vec(&probe).unwrap()).await;
                let next = peer.response(|_| true).await;
                check_step(index, &json!({"id": id}), &json!({"id": next["id"]}));
                continue;
            }
            let json = peer.response(|_| true).await;
            schemas().check_response("", &json);
            check_step(index, expected, &json);
        } else if run_engine_step(&host, &name, index, &step).await {
        } else if let Some(listen) = step.get("listen") {
            let params = json!({"notifications": listen["notifications"]});
            let body = request(next_id, "subscriptions/listen", params, tasks);
            streams.insert(listen["stream"].as_str().unwrap().to_owned(), next_id);
            next_id += 1;
            peer.write(&serde_json::to_vec(&body).unwrap()).await;
        } else if let Some(events) = step.get("events") {
            let subscription = streams[events["stream"].as_str().unwrap()];
            for expected in events["expect"].as_array().unwrap() {
                let message = peer
                    .stream_message(subscription)
                    .await
                    .unwrap_or_else(|| panic!("{name} step {index}: stream ended"));
                schemas().check_listen_message(&message);
                check_step(index, expected, &message);
            }
            // A stream that should end but does not would hold the replay for the read bound:
            // an unchecked step does not wait for its end.
            if events.get("end").and_then(Value::as_bool) == Some(true) && !unchecked.contains(&index) {
                let next = peer.stream_message(subscription).await;
                check_step(index, &json!({"stream": "ended"}), &json!({"stream": next.unwrap_or(json!("ended"))}));
            }
        } else {
            panic!("{name} step {index}: unknown step {step}");
        }
    }
    failures
}
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn vectors_over_stdio() {
    let mut failures = Vec::new();
    for file in vector_files() {
        let dir = tempfile::tempdir().unwrap();
        let store = SqliteStore::open(dir.path().join("tasks.db")).unwrap();
        failures.extend(replay_stdio(&file, Arc::new(store), common::vector_config()).await);
    }
    assert!(failures.is_empty(), "{failures:#?}");
}

fn vector_files() -> Vec<std::path::PathBuf> {
    let dir = common::repo_root().join("tests/vectors");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "json") && p.file_name().is_some_and(|n| n != "skip.json"))
        .collect();
    files.sort();
    assert!(files.len() >= 10, "vectors are missing from {}", dir.display());
    files
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn vectors_over_memory_store() {
    for file in vector_files() {
        replay(&file, Arc::new(MemoryStore::new()), common::vector_config()).await;
    }
}

/// The vectors over stdio against the rmcp server behind core: the stdio runner's unchecked
/// steps and the rmcp runner's both apply.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn vectors_over_stdio_against_an_rmcp_server() {
    let mut failures = Vec::new();
    for file in vector_files() {
        let dir = tempfile::tempdir().unwrap();
        let store = SqliteStore::open(dir.path().join("tasks.db")).unwrap();
        let host = TestHost::rmcp(Arc::new(store), start_ms(&file), common::vector_config()).await;
        failures.extend(replay_stdio_on(&file, host, &["rust-stdio", "rmcp"]).await);
    }
    assert!(failures.is_empty(), "{failures:#?}");
}

/// The vectors against an rmcp server (the same tools and scripted work, written on rmcp) behind
/// core through mcp-tasks-rmcp, on SQLite.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn vectors_over_an_rmcp_server() {
    for file in vector_files() {
        let dir = tempfile::tempdir().unwrap();
        let store = SqliteStore::open(dir.path().join("tasks.db")).unwrap();
        let host = TestHost::rmcp(Arc::new(store), start_ms(&file), common::vector_config()).await;
        replay_on(&file, host, "rmcp").await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn vectors_over_sqlite_store() {
    // The default durability: writes go to the redo log and are committed in the background.
    for file in vector_files() {
        let dir = tempfile::tempdir().unwrap();
        let store = SqliteStore::open(dir.path().join("tasks.db")).unwrap();
        // No finished-task cache: every read of a terminal task goes to SQLite, which checks that
        // reused read snapshots never hide an acknowledged write.
        let config = EngineConfig { finished_cache: 0, ..common::vector_config() };
        replay(&file, Arc::new(store), config).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn vectors_over_sqlite_store_with_fsync() {
    // Durability::Full: every write waits for its group commit.
    for file in vector_files() {
        let dir = tempfile::tempdir().unwrap();
        let store = SqliteStore::open_with(dir.path().join("tasks.db"), Durability::Full).unwrap();
        let config = EngineConfig { finished_cache: 0, ..common::vector_config() };
        replay(&file, Arc::new(store), config).await;
    }
}

#[cfg(feature = "postgres")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a PostgreSQL server in MCP_TASKS_PG_URL (tests/run-all starts one)"]
async fn vectors_over_postgres_store() {
    for file in vector_files() {
        let url = common::pg_database().await;
        let store = mcp_tasks::store::PostgresStore::connect(&url).await.unwrap();
        let config = EngineConfig { finished_cache: 0, ..common::vector_config() };
        replay(&file, Arc::new(store), config).await;
    }
}

#[test]
fn sse_parsing_skips_comments() {
    let events = parse_sse(": keep-alive\n\nevent: message\ndata: {\"a\":1}\n\n");
    assert_eq!(events, vec![json!({"a": 1})]);
}

/// Replays the vectors from the client side: every answer the server gave is fed to the client
/// protocol layer (`classify`, `parse_detailed`, one `TaskDriver` per task), which must accept
/// it and reach the outcome the final state implies.
#[test]
fn vectors_from_the_client_side() {
    use mcp_tasks::protocol::client::{
        CallResult, DriverConfig, DriverEvent, Outcome, TaskDriver, classify, parse_detailed,
    };
    let mut checked = 0;
    for file in vector_files() {
        let vector: Value = serde_json::from_slice(&std::fs::read(&file).unwrap()).unwrap();
        let name = vector["name"].as_str().unwrap();
        let mut now = vector["start_ms"].as_u64().unwrap();
        let mut drivers: HashMap<String, TaskDriver> = HashMap::new();
        for step in vector["steps"].as_array().unwrap() {
            if let Some(ms) = step.get("advance_ms") {
                now += ms.as_u64().unwrap();
            }
            let Some(send) = step.get("send") else {
                if let Some(events) = step.get("events") {
                    for message in events["expect"].as_array().unwrap() {
                        if message["method"] == "notifications/tasks" {
                            let task = parse_detailed(message["params"].clone()).expect(name);
                            if let Some(driver) = drivers.get_mut(&task.task.task_id) {
                                driver.handle_notification(now, task);
                            }
                            checked += 1;
                        }
                    }
                }
                continue;
            };
            let body = &step["expect"]["body"];
            let tasks = step.get("tasks").and_then(Value::as_bool).unwrap_or(true);
            match (send["method"].as_str().unwrap(), body.get("result")) {
                ("tools/call", Some(result)) => {
                    match classify("tools/call", result.clone(), tasks).unwrap_or_else(|e| panic!("{name}: {e}")) {
                        CallResult::Task(task) => {
                            assert_eq!(result["resultType"], "task");
                            drivers.insert(task.task_id.clone(), TaskDriver::new(task, now, DriverConfig::default()));
                        }
                        CallResult::Complete(_) => assert_ne!(result["resultType"], "task"),
                        CallResult::InputRequired(round) => assert!(round.input_requests.is_some(), "{name}"),
                    }
                    // The same answer to a client that did not declare the extension is invalid.
                    if result["resultType"] == "task" {
                        assert!(classify("tools/call", result.clone(), false).is_err());
                    }
                }
                ("tasks/get", Some(result)) => {
                    let task = parse_detailed(result.clone()).unwrap_or_else(|e| panic!("{name}: {e}"));
                    if let Some(driver) = drivers.get_mut(&task.task.task_id) {
                        driver.handle_get(now, task);
                    }
                }
                ("tasks/get", None) => {
                    let id = send["params"]["taskId"].as_str().unwrap_or("");
                    let error: RpcError = serde_json::from_value(body["error"].clone()).unwrap();
                    if let Some(driver) = drivers.get_mut(id) {
                        let known = driver.outcome().is_some();
                        driver.handle_get_error(now, &error);
                        // The first outcome stands: a task read as failed and later purged stays failed.
                        if error.code == -32602 && !known {
                            assert_eq!(driver.outcome(), Some(&Outcome::Gone), "{name}: -32602 means gone");
                        }
                    }
                }
                _ => {}
            }
            checked += 1;
        }
        for (id, driver) in &mut drivers {
            while let Some(event) = driver.poll_event() {
                if let DriverEvent::Finished(outcome) = event {
                    let status = driver.latest().task.status;
                    let consistent = match &outcome {
                        Outcome::Completed { .. } => status == mcp_tasks::protocol::TaskStatus::Completed,
                        Outcome::Failed { .. } => status == mcp_tasks::protocol::TaskStatus::Failed,
                        Outcome::Cancelled => status == mcp_tasks::protocol::TaskStatus::Cancelled,
                        Outcome::Gone | Outcome::Expired => true,
                    };
                    assert!(consistent, "{name} {id}: outcome {outcome:?} with last status {status:?}");
                }
            }
        }
    }
    assert!(checked >= 80, "only {checked} messages checked");
}
