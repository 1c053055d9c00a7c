//! The task client over real loopback HTTP against the Rust host.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use common::{task, text};
use futures::StreamExt;
use mcp_tasks::client::{
    Client, ClientConfig, ClientError, Execution, HttpTransport, ListenStream, SqliteClientStore, Transport, input_fn,
};
use mcp_tasks::host::{Host, Prepared, RunContext, Tool, ToolCall, ToolHandler, handler_fn, text_result};
use mcp_tasks::protocol::client::{CancelMode, DriverConfig, Outcome};
use mcp_tasks::protocol::{RpcError, TaskMode, TaskStatus};
use mcp_tasks::store::MemoryStore;
use mcp_tasks::{Engine, EngineConfig};
use parking_lot::Mutex;
use serde_json::{Map, Value, json};

fn slow() -> impl ToolHandler {
    handler_fn(|call, ctx| async move {
        let ms = call.arguments.get("ms").and_then(Value::as_u64).unwrap_or(100);
        ctx.set_status_message("working").await?;
        tokio::time::sleep(Duration::from_millis(ms)).await;
        Ok(text_result(format!("slept {ms} ms")))
    })
}

struct NameThenTask;

#[async_trait]
impl ToolHandler for NameThenTask {
    async fn prepare(&self, call: &ToolCall) -> Result<Prepared, RpcError> {
        if call.input_responses.as_ref().is_some_and(|r| r.contains_key("name")) {
            return Ok(Prepared::Ready);
        }
        let mut ask = Map::new();
        ask.insert(
            "name".into(),
            json!({"method": "elicitation/create", "params": {"message": "Name?",
            "requestedSchema": {"type": "object", "properties": {"name": {"type": "string"}}}}}),
        );
        Ok(Prepared::InputRequired { input_requests: ask, state: Some(json!(1)) })
    }

    async fn run(&self, call: ToolCall, _ctx: RunContext) -> Result<Value, RpcError> {
        let name = call.input_responses.as_ref().and_then(|r| r["name"]["content"]["name"].as_str().map(str::to_owned));
        Ok(text_result(format!("hello {}", name.unwrap_or_default())))
    }
}

/// Starts the host on 127.0.0.1 and returns its URL.
async fn server() -> String {
    let config = EngineConfig { sweep_interval: Duration::from_millis(50), ..EngineConfig::default() };
    let engine = Engine::builder(Arc::new(MemoryStore::new())).config(config).build().await.unwrap();
    engine.spawn_sweeper();
    let host = Host::builder(engine)
        .tool(Tool::new("echo", handler_fn(|_c, _x| async { Ok(text_result("plain")) })))
        .tool(Tool::new("slow", slow()).mode(TaskMode::Optional).poll_interval_ms(50))
        .tool(
            // Answers with the trace context its run hands on (no OpenTelemetry layer here: the
            // context the task keeps, the caller's).
            Tool::new(
                "traced",
                handler_fn(|_call, ctx| async move {
                    tokio::time::sleep(Duration::from_millis(120)).await;
                    Ok(text_result(ctx.trace().map(|t| t.traceparent).unwrap_or_else(|| "none".into())))
                }),
            )
            .mode(TaskMode::Required)
            .poll_interval_ms(50),
        )
        .tool(Tool::new("slow_hugepoll", slow()).mode(TaskMode::Optional).poll_interval_ms(60_000))
        .tool(Tool::new("short_ttl", slow()).mode(TaskMode::Optional).ttl_ms(Some(300)).poll_interval_ms(1_000))
        .tool(
            Tool::new(
                "ask_two",
                handler_fn(|_call, ctx| async move {
                    let mut ask = Map::new();
                    for key in ["first", "second"] {
                        ask.insert(key.into(), json!({"method": "roots/list", "params": {}}));
                    }
                    let answers = ctx.request_input(ask).await?;
                    Ok(text_result(Value::Object(answers).to_string()))
                }),
            )
            .mode(TaskMode::Optional)
            .poll_interval_ms(50),
        )
        .tool(
            Tool::new("boom", handler_fn(|_c, _x| async { Err(RpcError::new(-32603, "boom")) }))
                .mode(TaskMode::Optional)
                .poll_interval_ms(50),
        )
        .tool(Tool::new("name_then_task", NameThenTask).mode(TaskMode::Required).poll_interval_ms(50))
        .tool(Tool::new("panics_sync", handler_fn(|_c, _x| async { panic!("sync tool blew up") })))
        .tool(Tool::new(
            "asks_sync",
            handler_fn(|_call, ctx| async move {
                let ask = [("first".to_owned(), json!({"method": "roots/list", "params": {}}))].into_iter().collect();
                ctx.request_input(ask).await.map(|answers| text_result(Value::Object(answers).to_string()))
            }),
        ))
        .tool(
            Tool::new("panics_task", handler_fn(|_c, _x| async { panic!("task tool blew up") }))
                .mode(TaskMode::Optional)
                .poll_interval_ms(50),
        )
        .build();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/mcp", listener.local_addr().unwrap());
    let router = host.router("/mcp");
    tokio::spawn(async move { mcp_tasks::host::serve(listener, router, std::future::pending()).await.unwrap() });
    url
}

/// A transport that records the methods it sends.
struct Recording {
    inner: HttpTransport,
    methods: Mutex<Vec<String>>,
    /// Each request's method and the `traceparent` its params' `_meta` carried.
    traced: Mutex<Vec<(String, Option<String>)>>,
    listens: AtomicUsize,
    /// The most task ids one listen asked for.
    widest_listen: AtomicUsize,
    /// Listen streams the client holds now, and the most it held at once.
    open_listens: Arc<AtomicUsize>,
    most_open_listens: Arc<AtomicUsize>,
}

#[async_trait]
impl Transport for Recording {
    async fn request(&self, method: &str, params: Value) -> Result<Value, ClientError> {
        self.methods.lock().push(method.to_owned());
        let traceparent = params["_meta"]["traceparent"].as_str().map(str::to_owned);
        self.traced.lock().push((method.to_owned(), traceparent));
        self.inner.request(method, params).await
    }

    async fn listen(&self, task_ids: &[String]) -> Result<Option<ListenStream>, ClientError> {
        self.listens.fetch_add(1, Ordering::SeqCst);
        self.widest_listen.fetch_max(task_ids.len(), Ordering::SeqCst);
        let Some(mut stream) = self.inner.listen(task_ids).await? else { return Ok(None) };
        // Counts the stream as open until it ends or the client drops it.
        let (tx, updates) = tokio::sync::mpsc::channel(64);
        let (open, most) = (Arc::clone(&self.open_listens), Arc::clone(&self.most_open_listens));
        most.fetch_max(open.fetch_add(1, Ordering::SeqCst) + 1, Ordering::SeqCst);
        let mut inner = std::mem::replace(&mut stream.updates, updates);
        tokio::spawn(async move {
            loop {
                tokio::select! {
                    update = inner.recv() => match update {
                        Some(update) => {
                            if tx.send(update).await.is_err() {
                                break;
                            }
                        }
                        None => break,
                    },
                    () = tx.closed() => break,
                }
            }
            open.fetch_sub(1, Ordering::SeqCst);
        });
        Ok(Some(stream))
    }

    fn endpoint(&self) -> &str {
        self.inner.endpoint()
    }
}

impl Recording {
    /// How many requests of `method` were sent.
    fn sent(&self, method: &str) -> usize {
        self.methods.lock().iter().filter(|m| *m == method).count()
    }
}

fn recording(url: &str) -> Arc<Recording> {
    Arc::new(Recording {
        // `ask_two` asks for roots: the client declares it can answer them.
        inner: HttpTransport::new(url).capabilities(json!({"elicitation": {}, "roots": {}})),
        methods: Mutex::new(Vec::new()),
        traced: Mutex::new(Vec::new()),
        listens: AtomicUsize::new(0),
        widest_listen: AtomicUsize::new(0),
        open_listens: Arc::default(),
        most_open_listens: Arc::default(),
    })
}

fn polling_only() -> ClientConfig {
    ClientConfig { notifications: false, ..ClientConfig::default() }
}

#[tokio::test]
async fn the_callers_trace_context_reaches_the_run_and_rides_every_poll() {
    let url = server().await;
    let transport = recording(&url);
    let client = Client::with_transport(transport.clone()).config(polling_only()).memory_store().build().unwrap();
    let parent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
    let trace = mcp_tasks::client::TraceContext::from_parts(parent, Some("rojo=1"), None);
    let execution = task(client.call_tool_traced("traced", json!({}), trace).await.unwrap());
    assert_eq!(text(&execution.result().await.unwrap()), parent, "the run hands on what the task keeps");
    let traced = transport.traced.lock().clone();
    assert!(traced.iter().filter(|(m, _)| m == "tasks/get").count() >= 2, "{traced:?}");
    for (method, sent) in &traced {
        assert_eq!(sent.as_deref(), Some(parent), "{method}");
    }
    // Without a context: none sent, none kept, none handed on.
    transport.traced.lock().clear();
    let execution = task(client.call_tool("traced", json!({})).await.unwrap());
    assert_eq!(text(&execution.result().await.unwrap()), "none");
    assert!(transport.traced.lock().iter().all(|(_, sent)| sent.is_none()));
}

#[tokio::test]
async fn polls_to_completion() {
    let url = server().await;
    let transport = recording(&url);
    let client = Client::with_transport(transport.clone()).config(polling_only()).memory_store().build().unwrap();
    let execution = task(client.call_tool("slow", json!({"ms": 300})).await.unwrap());
    let mut updates = execution.updates();
    let outcome = execution.result().await.unwrap();
    assert_eq!(text(&outcome), "slept 300 ms");
    let mut last = None;
    while let Some(state) = updates.next().await {
        last = Some(state.task.status);
    }
    assert_eq!(last, Some(TaskStatus::Completed));
    let methods = transport.methods.lock().clone();
    assert!(methods.iter().filter(|m| *m == "tasks/get").count() >= 2, "{methods:?}");
    assert_eq!(transport.listens.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn notifications_finish_it_despite_a_huge_poll_interval() {
    let url = server().await;
    let transport = recording(&url);
    let client = Client::with_transport(transport.clone()).memory_store().build().unwrap();
    let started = Instant::now();
    let execution = task(client.call_tool("slow_hugepoll", json!({"ms": 400})).await.unwrap());
    let outcome = execution.result().await.unwrap();
    assert_eq!(text(&outcome), "slept 400 ms");
    // The server suggests polling every 60 s; only the listen stream can finish it sooner.
    assert!(started.elapsed() < Duration::from_secs(30), "took {:?}", started.elapsed());
    assert_eq!(transport.listens.load(Ordering::SeqCst), 1);
    let gets = transport.sent("tasks/get");
    assert_eq!(gets, 1, "one read right after the creation, then no poll was due");
}

/// Many tasks followed at once share a few listen streams: each stream filters many task ids,
/// never more than `MAX_LISTEN_STREAMS` are open, and every task is still finished by its
/// notification (its server suggests polling every 60 s).
#[tokio::test]
async fn many_tasks_share_a_bounded_number_of_listen_streams() {
    let url = server().await;
    let transport = recording(&url);
    let client = Arc::new(Client::with_transport(transport.clone()).memory_store().build().unwrap());
    let started = Instant::now();
    let calls: Vec<_> = (0..200)
        .map(|_| {
            let client = Arc::clone(&client);
            tokio::spawn(async move {
                let execution = task(client.call_tool("slow_hugepoll", json!({"ms": 300})).await.unwrap());
                text(&execution.result().await.unwrap())
            })
        })
        .collect();
    for call in calls {
        assert_eq!(call.await.unwrap(), "slept 300 ms");
    }
    assert!(started.elapsed() < Duration::from_secs(30), "took {:?}", started.elapsed());
    let (listens, widest) = (transport.listens.load(Ordering::SeqCst), transport.widest_listen.load(Ordering::SeqCst));
    assert!(widest > 1 && listens < 200, "{listens} listens for 200 tasks, the widest of {widest} ids");
    let most = transport.most_open_listens.load(Ordering::SeqCst);
    assert!(most <= mcp_tasks::client::MAX_LISTEN_STREAMS, "{most} streams open at once");
    let gets = transport.sent("tasks/get");
    assert_eq!(gets, 200, "one read each, right after its creation; notifications did the rest");
}

/// Closing the client closes its shared listen streams at once, not when their tasks end.
#[tokio::test]
async fn closing_the_client_closes_its_listen_streams() {
    let url = server().await;
    let transport = recording(&url);
    let client = Client::with_transport(transport.clone()).memory_store().build().unwrap();
    let execution = task(client.call_tool("slow_hugepoll", json!({"ms": 20_000})).await.unwrap());
    wait_until("no listen stream was opened", || transport.open_listens.load(Ordering::SeqCst) > 0).await;
    client.close().await;
    wait_until("the listen stream outlived the client", || transport.open_listens.load(Ordering::SeqCst) == 0).await;
    drop(execution);
}

/// A task that waits for its stream or its next poll has no tokio task of its own: a cancel
/// from a thread outside any runtime (a binding's) wakes it, and closing the client ends the
/// waiting tasks at once, with their references kept for `resume_all`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiting_task_wakes_from_any_thread_and_ends_with_its_client() {
    let url = server().await;
    let transport = recording(&url);
    let client = Client::with_transport(transport.clone()).memory_store().build().unwrap();
    let execution = Arc::new(task(client.call_tool("slow_hugepoll", json!({"ms": 20_000})).await.unwrap()));
    wait_until("no listen stream was opened", || transport.open_listens.load(Ordering::SeqCst) > 0).await;
    let (cancelling, observer) = (Arc::clone(&execution), execution.updates());
    std::thread::spawn(move || cancelling.cancel(CancelMode::Stop).unwrap()).join().unwrap();
    let outcome = tokio::time::timeout(Duration::from_secs(10), execution.result()).await;
    assert_eq!(outcome.expect("the cancel did not wake the task").unwrap(), Outcome::Cancelled);
    let states: Vec<_> = observer.collect().await;
    assert!(!states.is_empty(), "the updates end once the task has its outcome");

    let waiting = task(client.call_tool("slow_hugepoll", json!({"ms": 20_000})).await.unwrap());
    let mut updates = waiting.updates();
    assert_eq!(updates.next().await.unwrap().task.status, TaskStatus::Working);
    wait_until("the second task was not carried", || transport.open_listens.load(Ordering::SeqCst) > 0).await;
    client.close().await;
    let ended = tokio::time::timeout(Duration::from_secs(10), waiting.finished()).await;
    assert!(matches!(ended.expect("close left the task waiting"), Err(ClientError::Detached)));
    // States not yet handed out still are, then the updates end.
    let rest = tokio::time::timeout(Duration::from_secs(10), updates.collect::<Vec<_>>()).await;
    assert!(rest.expect("close left the updates open").iter().all(|s| s.task.status == TaskStatus::Working));
    assert!(matches!(waiting.cancel(CancelMode::Stop), Err(ClientError::Detached)));
}

/// Waits until `done()` holds, checking every 10 ms; fails with `failure` after 10 s.
async fn wait_until(failure: &str, done: impl Fn() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !done() {
        assert!(Instant::now() < deadline, "{failure}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// A task that is finished by the time the client first reads it costs a create and that one
/// read: no listen stream is opened for it.
#[tokio::test]
async fn a_quick_task_costs_a_create_and_one_read() {
    let url = server().await;
    let transport = recording(&url);
    let client = Client::with_transport(transport.clone()).memory_store().build().unwrap();
    // The tool returns at once, and its server suggests polling every 60 s: the one read finds it
    // finished (or, if the completion is still being written, the listen opened after the read
    // finishes it), never a second poll.
    let execution = task(client.call_tool("slow_hugepoll", json!({"ms": 0})).await.unwrap());
    assert_eq!(text(&execution.result().await.unwrap()), "slept 0 ms");
    let methods = transport.methods.lock().clone();
    assert_eq!(methods.iter().filter(|m| *m == "tasks/get").count(), 1, "{methods:?}");
    assert!(transport.listens.load(Ordering::SeqCst) <= 1);
}

#[tokio::test]
async fn cancel_stays_cancelled() {
    let url = server().await;
    let client = Client::http(&url).config(polling_only()).memory_store().build().unwrap();
    let execution = task(client.call_tool("slow", json!({"ms": 600})).await.unwrap());
    execution.cancel(CancelMode::Observe).unwrap();
    assert_eq!(execution.result().await.unwrap(), Outcome::Cancelled);
    // After the work would have finished, the server still says cancelled.
    tokio::time::sleep(Duration::from_millis(800)).await;
    let got = HttpTransport::new(&url).request("tasks/get", json!({"taskId": execution.task_id()})).await.unwrap();
    assert_eq!(got["status"], "cancelled");

    let stopped = task(client.call_tool("slow", json!({"ms": 600})).await.unwrap());
    stopped.cancel(CancelMode::Stop).unwrap();
    assert_eq!(stopped.result().await.unwrap(), Outcome::Cancelled);
}

#[tokio::test]
async fn two_keys_answered_in_two_updates() {
    let url = server().await;
    let transport = recording(&url);
    let client = Client::with_transport(transport.clone()).config(polling_only()).memory_store().build().unwrap();
    let execution = task(client.call_tool("ask_two", json!({})).await.unwrap());
    let mut updates = execution.updates();
    let mut answered = Vec::new();
    while let Some(state) = updates.next().await {
        let Some(requests) = state.input_requests else { continue };
        if let Some(key) = requests.keys().find(|k| !answered.contains(*k)).cloned() {
            // A key the server never asked is refused, not silently dropped.
            let unknown = execution.answer("never-asked", json!({})).await.unwrap_err();
            assert!(matches!(unknown, ClientError::Driver(_)), "{unknown:?}");
            assert_eq!((unknown.code(), unknown.class()), (-32602, "InvalidParamsError"));
            execution.answer(&key, json!({"roots": [{"uri": format!("file:///{key}")}]})).await.unwrap();
            answered.push(key);
        }
        if answered.len() == 2 {
            break;
        }
    }
    let outcome = execution.result().await.unwrap();
    let late = execution.answer("k", json!({})).await.unwrap_err();
    assert!(matches!(late, ClientError::Driver(_)), "answering a finished task: {late:?}");
    let answers: Value = serde_json::from_str(&text(&outcome)).unwrap();
    assert_eq!(answers["first"]["roots"][0]["uri"], "file:///first");
    assert_eq!(answers["second"]["roots"][0]["uri"], "file:///second");
    let updates = transport.sent("tasks/update");
    assert_eq!(updates, 2);
}

#[tokio::test]
async fn input_handler_answers_mrtr_rounds_and_task_requests() {
    let url = server().await;
    let client = Client::http(&url)
        .memory_store()
        .capabilities(json!({"elicitation": {}, "roots": {}}))
        .input_handler(input_fn(|request| async move {
            Some(match request.key.as_str() {
                "name" => json!({"action": "accept", "content": {"name": "Ada"}}),
                _ => json!({"roots": []}),
            })
        }))
        .build()
        .unwrap();
    let outcome = task(client.call_tool("name_then_task", json!({})).await.unwrap()).result().await.unwrap();
    assert_eq!(text(&outcome), "hello Ada");
    let outcome = task(client.call_tool("ask_two", json!({})).await.unwrap()).result().await.unwrap();
    assert!(text(&outcome).contains("first"));
}

#[tokio::test]
async fn input_the_client_did_not_declare_is_never_asked() {
    let url = server().await;
    let answer = input_fn(|_request| async move { Some(json!({"action": "accept", "content": {"name": "Ada"}})) });
    // The default declares form elicitation only: a task asking for roots is refused the ask
    // (-32021, naming `roots`), and this tool does not catch it, so the task fails with it.
    let client = Client::http(&url).memory_store().input_handler(answer).build().unwrap();
    match task(client.call_tool("ask_two", json!({})).await.unwrap()).result().await.unwrap() {
        Outcome::Failed { error } => {
            assert_eq!(error.code, -32021);
            assert_eq!(error.data.unwrap()["requiredCapabilities"], json!({"roots": {}}));
        }
        other => panic!("expected failed, got {other:?}"),
    }
    // Declaring no elicitation: the MRTR round asking for a name is -32021 instead.
    let answer = input_fn(|_request| async move { Some(json!({"action": "accept", "content": {"name": "Ada"}})) });
    let client = Client::http(&url).memory_store().capabilities(json!({})).input_handler(answer).build().unwrap();
    let refused = client.call_tool("name_then_task", json!({})).await.unwrap_err();
    assert_eq!((refused.code(), refused.class()), (-32021, "MissingCapabilityError"), "{refused:?}");
}

#[tokio::test]
async fn failed_and_expired_are_told_apart() {
    let url = server().await;
    let client = Client::http(&url).config(polling_only()).memory_store().build().unwrap();
    match task(client.call_tool("boom", json!({})).await.unwrap()).result().await.unwrap() {
        Outcome::Failed { error } => assert_eq!((error.code, error.message.as_str()), (-32603, "boom")),
        other => panic!("{other:?}"),
    }
    let outcome = task(client.call_tool("short_ttl", json!({"ms": 10_000})).await.unwrap()).result().await.unwrap();
    assert_eq!(outcome, Outcome::Expired);
}

#[tokio::test]
async fn plain_results_need_no_task_traffic() {
    let url = server().await;
    let transport = recording(&url);
    let client = Client::with_transport(transport.clone()).memory_store().build().unwrap();
    match client.call_tool("echo", json!({})).await.unwrap() {
        Execution::Immediate(result) => assert_eq!(result["content"][0]["text"], "plain"),
        Execution::Task(t) => panic!("unexpected task {}", t.task_id()),
    }
    assert_eq!(*transport.methods.lock(), vec!["tools/call".to_owned()]);
    assert_eq!(transport.listens.load(Ordering::SeqCst), 0);
}

const CHILD_ENV: &str = "MCP_TASKS_CLIENT_CHILD";

/// Run as a child process by `resumes_after_a_killed_client_exactly_once`: starts a task and
/// waits forever (the parent kills it with SIGKILL).
#[tokio::test]
async fn child_client_role() {
    let Ok(spec) = std::env::var(CHILD_ENV) else { return };
    let (url, db) = spec.split_once('|').unwrap();
    let client = Client::http(url).config(polling_only()).sqlite_store(db).unwrap().build().unwrap();
    let execution = task(client.call_tool("slow", json!({"ms": 1_500})).await.unwrap());
    println!("started {}", execution.task_id());
    std::future::pending::<()>().await;
}

#[tokio::test]
async fn resumes_after_a_killed_client_exactly_once() {
    if std::env::var(CHILD_ENV).is_ok() {
        return;
    }
    let url = server().await;
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("refs.db");
    let mut child = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "child_client_role", "--nocapture", "--test-threads", "1"])
        .env(CHILD_ENV, format!("{url}|{}", db.display()))
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    // Wait until the child persisted its task reference, then kill it mid-task.
    let store = SqliteClientStore::open(&db);
    let deadline = Instant::now() + Duration::from_secs(20);
    let reference = loop {
        if let Ok(store) = &store
            && let Some(r) = mcp_tasks::client::ClientStore::pending(store, &url).await.unwrap().into_iter().next()
        {
            break r;
        }
        assert!(Instant::now() < deadline, "the child never persisted a task");
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();

    let client = Client::http(&url).config(polling_only()).sqlite_store(&db).unwrap().build().unwrap();
    let resumed = client.resume_all().await.unwrap();
    assert_eq!(resumed.len(), 1);
    assert_eq!(resumed[0].task_id(), reference.task_id);
    let outcome = resumed[0].result().await.unwrap();
    assert_eq!(text(&outcome), "slept 1500 ms");
    // Delivered once: another restart finds nothing left to hand out.
    let again = Client::http(&url).sqlite_store(&db).unwrap().build().unwrap();
    assert!(again.resume_all().await.unwrap().is_empty());
}

/// A client following tasks without end keeps a bounded store: each delivered outcome's reference
/// is deleted, from memory and from the SQLite file, and taking the result again still works.
#[tokio::test]
async fn a_delivered_outcome_leaves_nothing_in_the_store() {
    use mcp_tasks::client::{ClientStore, MemoryClientStore};
    let url = server().await;
    let dir = tempfile::tempdir().unwrap();
    let sqlite: Arc<dyn ClientStore> = Arc::new(SqliteClientStore::open(dir.path().join("refs.db")).unwrap());
    let memory: Arc<dyn ClientStore> = Arc::new(MemoryClientStore::new());
    for store in [sqlite, memory] {
        let client = Client::http(&url).config(polling_only()).store(Arc::clone(&store)).build().unwrap();
        for _ in 0..3 {
            let execution = task(client.call_tool("slow", json!({"ms": 10})).await.unwrap());
            let id = execution.task_id().to_owned();
            assert!(store.get(&url, &id).await.unwrap().is_some(), "a followed task is persisted");
            assert_eq!(text(&execution.result().await.unwrap()), "slept 10 ms");
            assert_eq!(store.get(&url, &id).await.unwrap(), None, "a delivered outcome is forgotten");
            assert_eq!(text(&execution.result().await.unwrap()), "slept 10 ms", "and can be taken again");
        }
        assert!(store.pending(&url).await.unwrap().is_empty());
        assert!(client.resume_all().await.unwrap().is_empty());
    }
}

#[tokio::test]
async fn poll_floor_applies_to_tiny_intervals() {
    let config = ClientConfig { driver: DriverConfig { default_poll_ms: 1_000, min_poll_ms: 200 }, ..polling_only() };
    let url = server().await;
    let transport = recording(&url);
    let client = Client::with_transport(transport.clone()).config(config).memory_store().build().unwrap();
    let outcome = task(client.call_tool("slow", json!({"ms": 500})).await.unwrap()).result().await.unwrap();
    assert_eq!(text(&outcome), "slept 500 ms");
    // The server suggests 50 ms; the floor keeps it to a few polls over ~500 ms.
    let polls = transport.sent("tasks/get");
    assert!(polls <= 6, "{polls} polls");
}

/// A server that knows nothing of the extension: it answers `tools/call` like a pre-2026 server,
/// without `resultType`, and would refuse anything else.
struct UnawareServer {
    methods: Mutex<Vec<String>>,
}

#[async_trait]
impl Transport for UnawareServer {
    async fn request(&self, method: &str, _params: Value) -> Result<Value, ClientError> {
        self.methods.lock().push(method.to_owned());
        match method {
            "tools/call" => Ok(json!({"content": [{"type": "text", "text": "plain"}]})),
            _ => Err(ClientError::Rpc(RpcError::new(-32601, "Method not found"))),
        }
    }

    async fn listen(&self, _task_ids: &[String]) -> Result<Option<ListenStream>, ClientError> {
        self.methods.lock().push("subscriptions/listen".to_owned());
        Ok(None)
    }

    fn endpoint(&self) -> &str {
        "unaware"
    }
}

#[tokio::test]
async fn a_server_unaware_of_the_extension_gets_plain_calls_only() {
    let server = Arc::new(UnawareServer { methods: Mutex::new(Vec::new()) });
    let client = Client::with_transport(server.clone()).memory_store().build().unwrap();
    let execution = client.call_tool("anything", json!({})).await.unwrap();
    assert!(matches!(&execution, Execution::Immediate(r) if r["content"][0]["text"] == "plain"));
    assert_eq!(
        execution.result().await.unwrap(),
        Outcome::Completed { result: json!({"content": [{"type": "text", "text": "plain"}]}) }
    );
    assert_eq!(*server.methods.lock(), vec!["tools/call".to_owned()], "no task traffic at all");
}

/// A server without `subscriptions/listen` (it answers -32601) is asked once per endpoint, not
/// once per task: the HTTP transport remembers the answer and later tasks poll straight away.
#[tokio::test]
async fn a_server_without_listen_is_asked_once() {
    let url = server().await;
    let listens = Arc::new(AtomicUsize::new(0));
    let counted = Arc::clone(&listens);
    let upstream = reqwest::Client::new();
    let proxy = axum::Router::new().route(
        "/mcp",
        axum::routing::post(move |headers: axum::http::HeaderMap, body: axum::body::Bytes| {
            let (counted, upstream, url) = (Arc::clone(&counted), upstream.clone(), url.clone());
            async move {
                let method = headers.get("mcp-method").and_then(|v| v.to_str().ok()).unwrap_or("").to_owned();
                if method == "subscriptions/listen" {
                    counted.fetch_add(1, Ordering::SeqCst);
                    let id = serde_json::from_slice::<Value>(&body).unwrap()["id"].clone();
                    let error =
                        json!({"jsonrpc": "2.0", "id": id, "error": {"code": -32601, "message": "Method not found"}});
                    return (
                        axum::http::StatusCode::NOT_FOUND,
                        [("content-type", "application/json")],
                        error.to_string(),
                    );
                }
                let mut request = upstream.post(&url).body(body);
                for (name, value) in &headers {
                    request = request.header(name, value);
                }
                let response = request.send().await.unwrap();
                let status = axum::http::StatusCode::from_u16(response.status().as_u16()).unwrap();
                (status, [("content-type", "application/json")], response.text().await.unwrap())
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let proxy_url = format!("http://{}/mcp", listener.local_addr().unwrap());
    tokio::spawn(async move { mcp_tasks::host::serve(listener, proxy, std::future::pending()).await.unwrap() });
    // JSON answers only, so the proxy can relay them as they are.
    let client = Client::with_transport(Arc::new(HttpTransport::new(proxy_url))).memory_store().build().unwrap();
    for _ in 0..3 {
        let execution = task(client.call_tool("slow", json!({"ms": 50})).await.unwrap());
        assert_eq!(text(&execution.result().await.unwrap()), "slept 50 ms");
    }
    assert_eq!(listens.load(Ordering::SeqCst), 1, "one listen request for three tasks");
}

/// A transport failure keeps its cause chain (down to the OS error) and has its class.
#[tokio::test]
async fn a_transport_failure_keeps_its_causes() {
    // Nothing listens on port 1 of the loopback: the connection is refused at once.
    let client = Client::http("http://127.0.0.1:1/mcp").memory_store().build().unwrap();
    let error = client.call_tool("anything", json!({})).await.unwrap_err();
    assert!(matches!(error, ClientError::Transport { .. }), "{error:?}");
    assert_eq!((error.code(), error.class()), (-32603, "TransportError"));
    let causes = error.causes();
    assert!(!causes.is_empty(), "no cause chain for {error}");
    assert!(causes.iter().any(|c| c.to_lowercase().contains("refused")), "{causes:?}");
}

/// A panicking tool answers a synchronous call with -32603 (the connection is not dropped) and
/// fails its task with the panic's message (it never stays `working`).
#[tokio::test]
async fn a_panicking_tool_is_a_server_fault_not_a_dropped_connection() {
    let url = server().await;
    let client = Client::http(&url).memory_store().build().unwrap();
    let error = client.call_tool("panics_sync", json!({})).await.unwrap_err();
    let ClientError::Rpc(rpc) = &error else { panic!("expected a JSON-RPC error, got {error:?}") };
    assert_eq!(rpc.code, -32603);
    assert!(rpc.message.contains("sync tool blew up"), "{rpc:?}");
    let execution = task(client.call_tool("panics_task", json!({})).await.unwrap());
    match execution.result().await.unwrap() {
        Outcome::Failed { error } => {
            assert_eq!(error.code, -32603);
            assert!(error.message.contains("task tool blew up"), "{error:?}");
        }
        other => panic!("expected failed, got {other:?}"),
    }
    // The same server still answers.
    assert!(matches!(client.call_tool("echo", json!({})).await.unwrap(), Execution::Immediate(_)));
    // A synchronous tool's own error goes out with HTTP 200, as mcp and @modelcontextprotocol/server
    // send every handler error (tests/hostile/requests.json has the same case for all three
    // servers); 500 is for faults of the server itself (a store failure), docs/errors.md.
    let meta = json!({"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                      "io.modelcontextprotocol/clientCapabilities": {}});
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                      "params": {"name": "panics_sync", "arguments": {}, "_meta": meta}});
    let response = reqwest::Client::new()
        .post(&url)
        .header("mcp-protocol-version", "2026-07-28")
        .header("mcp-method", "tools/call")
        .header("mcp-name", "panics_sync")
        .header("accept", "application/json, text/event-stream")
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status().as_u16(), 200);
    let answer: serde_json::Value = response.json().await.unwrap();
    assert_eq!(answer["error"]["code"], -32603, "{answer}");
}

/// A synchronous call whose tool asks for input mid-run: for a tool that is a task for a
/// declaring client, the client left the extension out (-32021 naming it, HTTP 400 as the error
/// table says, whatever the tool made of the refusal); for a tool that is never a task, the
/// tool is at fault (-32603, HTTP 200 as every tool's own error).
#[tokio::test]
async fn asking_mid_run_in_a_synchronous_call_is_the_clients_missing_declaration_or_the_tools_fault() {
    let url = server().await;
    let call = |tool: &'static str| {
        let url = url.clone();
        async move {
            let meta = json!({"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                              "io.modelcontextprotocol/clientCapabilities": {"roots": {}}});
            let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                              "params": {"name": tool, "arguments": {}, "_meta": meta}});
            let response = reqwest::Client::new()
                .post(&url)
                .header("mcp-protocol-version", "2026-07-28")
                .header("mcp-method", "tools/call")
                .header("mcp-name", tool)
                .header("accept", "application/json, text/event-stream")
                .json(&body)
                .send()
                .await
                .unwrap();
            (response.status().as_u16(), response.json::<Value>().await.unwrap())
        }
    };
    let (status, answer) = call("ask_two").await;
    assert_eq!(status, 400, "-32021's status in the error table (docs/errors.md)");
    assert_eq!(answer["error"]["code"], -32021, "{answer}");
    assert_eq!(
        answer["error"]["data"]["requiredCapabilities"],
        json!({"extensions": {"io.modelcontextprotocol/tasks": {}}}),
        "{answer}"
    );
    let (status, answer) = call("asks_sync").await;
    assert_eq!(status, 200);
    assert_eq!(answer["error"]["code"], -32603, "a tool that is never a task cannot ask: {answer}");
}

/// A host whose engine caps live tasks answers the call beyond the cap with -32010
/// (`QuotaExceededError` in every binding) and HTTP 200, and serves again once a task finished.
#[tokio::test]
async fn the_call_beyond_a_live_task_cap_is_a_quota_error() {
    let config = EngineConfig { max_live_tasks: Some(1), ..EngineConfig::default() };
    let engine = Engine::builder(Arc::new(MemoryStore::new())).config(config).build().await.unwrap();
    let host =
        Host::builder(engine).tool(Tool::new("slow", slow()).mode(TaskMode::Optional).poll_interval_ms(50)).build();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/mcp", listener.local_addr().unwrap());
    tokio::spawn(mcp_tasks::host::serve(listener, host.router("/mcp"), std::future::pending()));
    let client = Client::http(&url).memory_store().build().unwrap();
    let first = task(client.call_tool("slow", json!({"ms": 300})).await.unwrap());
    let error = client.call_tool("slow", json!({"ms": 10})).await.unwrap_err();
    assert_eq!(error.class(), "QuotaExceededError", "{error}");
    let ClientError::Rpc(rpc) = &error else { panic!("{error:?}") };
    assert_eq!(rpc.code, -32010);
    assert_eq!(rpc.data, Some(json!({"reason": "server_quota", "limit": 1})));
    first.result().await.unwrap();
    assert!(matches!(client.call_tool("slow", json!({"ms": 10})).await.unwrap(), Execution::Task(_)));
}
