//! Every route, filter and refusal of the web view, in process: a SQLite store with tasks in
//! every state, requests through `WebView::handle` (the function every face calls).

use std::sync::Arc;

use bytes::Bytes;
use http::{Request, Response, StatusCode, header};
use mcp_tasks::Engine;
use mcp_tasks::admin::Admin;
use mcp_tasks::engine::TaskOptions;
use mcp_tasks::protocol::{Actor, HistoryEvent, TaskStatus};
use mcp_tasks::store::{Durability, SqliteStore};
use mcp_tasks_web::{CONTENT_SECURITY_POLICY, Token, WebOptions, WebView};
use serde_json::json;

const SECRET: &str = "0123456789abcdef-ana";
const BOB_SECRET: &str = "0123456789abcdef-bob";

struct Fixture {
    _dir: tempfile::TempDir,
    url: String,
    engine: Engine,
    /// done (alice), failed (bob), working ×3 (alice, bob, carol), input_required (alice).
    ids: Vec<String>,
    _running: Vec<mcp_tasks::TaskContext>,
}

async fn fixture() -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    // Each write is in SQLite when it returns: the view's own connection reads it at once.
    let store = SqliteStore::open_with(dir.path().join("tasks.db"), Durability::Full).unwrap();
    // The view's cancels are queued for this live host, whose sweeps apply them.
    let config = mcp_tasks::EngineConfig { sweep_interval: std::time::Duration::from_millis(20), ..Default::default() };
    let engine = Engine::builder(Arc::new(store)).config(config).build().await.unwrap();
    std::mem::forget(engine.spawn_sweeper());
    let mut ids = Vec::new();
    let mut running = Vec::new();
    let (t, ctx) = engine.create_task("alice", "report", TaskOptions::default()).await.unwrap();
    ctx.complete(json!({"content": [{"type": "text", "text": "secret numbers"}]})).await.unwrap();
    ids.push(t.task.task_id);
    let (t, ctx) = engine.create_task("bob", "build", TaskOptions::default()).await.unwrap();
    ctx.fail(mcp_tasks::protocol::RpcError::internal("compiler crashed")).await.unwrap();
    ids.push(t.task.task_id);
    for principal in ["alice", "bob", "carol"] {
        let (t, ctx) = engine.create_task(principal, "watch", TaskOptions::default()).await.unwrap();
        ctx.set_status_message(format!("watching for {principal}")).await.unwrap();
        ids.push(t.task.task_id);
        running.push(ctx);
    }
    let (t, ctx) = engine.create_task("alice", "deploy", TaskOptions::default()).await.unwrap();
    let asking = ctx.clone();
    tokio::spawn(async move {
        let _ = asking
            .request_input(
                [("approve".to_owned(), json!({"method": "elicitation/create", "params": {"message": "ok?"}}))]
                    .into_iter()
                    .collect(),
            )
            .await;
    });
    ids.push(t.task.task_id.clone());
    running.push(ctx);
    // The input request is written by the spawned work: wait until it is stored.
    for _ in 0..200 {
        if engine.get("alice", &t.task.task_id).await.unwrap().task.status == TaskStatus::InputRequired {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    let url = format!("sqlite://{}", dir.path().join("tasks.db").display());
    Fixture { _dir: dir, url, engine, ids, _running: running }
}

fn options() -> WebOptions {
    WebOptions {
        prefix: "/tasks".into(),
        tokens: vec![Token::new("ana", SECRET, None), Token::new("bob-ops", BOB_SECRET, Some(vec!["bob".into()]))],
        ..WebOptions::default()
    }
}

async fn view(f: &Fixture, options: WebOptions) -> WebView {
    WebView::new(Admin::open(&f.url).await.unwrap(), options)
}

fn get(path: &str) -> Request<Bytes> {
    Request::get(path).header(header::HOST, "127.0.0.1:8765").body(Bytes::new()).unwrap()
}

/// A same-site form post (as a browser sends it) with `auth` headers.
fn post(path: &str, form: &str, auth: &[(&str, &str)]) -> Request<Bytes> {
    let mut builder = Request::post(path)
        .header(header::HOST, "127.0.0.1:8765")
        .header(header::CONTENT_TYPE, "application/x-www-form-urlencoded");
    for (name, value) in auth {
        builder = builder.header(*name, *value);
    }
    builder.body(Bytes::from(form.to_owned())).unwrap()
}

fn body(response: &Response<Bytes>) -> String {
    String::from_utf8_lossy(response.body()).into_owned()
}

/// The `data-id`s of the list's rows.
fn row_ids(html: &str) -> Vec<String> {
    html.split("<tr data-id=\"").skip(1).map(|rest| rest.split('"').next().unwrap().to_owned()).collect()
}

fn bearer(secret: &str) -> (&'static str, String) {
    ("authorization", format!("Bearer {secret}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_list_counts_filters_and_pages_in_the_url_with_a_strict_policy() {
    let f = fixture().await;
    let view = view(&f, options()).await;
    let page = view.handle(get("/tasks/")).await;
    assert_eq!(page.status(), StatusCode::OK);
    let headers = page.headers();
    assert_eq!(headers[header::CONTENT_SECURITY_POLICY], CONTENT_SECURITY_POLICY);
    assert!(CONTENT_SECURITY_POLICY.contains("frame-ancestors 'none'") && !CONTENT_SECURITY_POLICY.contains("unsafe"));
    assert_eq!(headers[header::X_FRAME_OPTIONS], "DENY");
    let html = body(&page);
    assert!(!html.contains("<script>"), "no inline script");
    assert!(html.contains(r#"<script src="/tasks/assets/app.js" defer></script>"#));
    assert_eq!(row_ids(&html).len(), 6);
    for (status, n) in [("working", 3), ("input_required", 1), ("completed", 1), ("failed", 1), ("cancelled", 0)] {
        let count = format!(r#"data-status="{status}"><span class="n">{n}</span>"#);
        assert!(html.contains(&count), "{status}: {n}");
    }
    assert!(!html.contains("name=\"action\""), "no action for a reader without a token");

    let working = body(&view.handle(get("/tasks/?status=working&status=input_required")).await);
    assert_eq!(row_ids(&working).len(), 4);
    let text = body(&view.handle(get("/tasks/?q=WATCHING+FOR+bob")).await);
    assert_eq!(row_ids(&text), [f.ids[3].clone()]);
    let tool = body(&view.handle(get("/tasks/?tool=report&principal=alice")).await);
    assert_eq!(row_ids(&tool), [f.ids[0].clone()]);
    let bad = body(&view.handle(get("/tasks/?status=bogus&created_from=yesterday")).await);
    assert!(bad.contains("Ignored: unknown status") && bad.contains("is not a time"), "{bad}");

    // Pages of 4 then 2, every task once; the next link keeps the filters.
    let first = body(&view.handle(get("/tasks/?limit=4")).await);
    let next = first.split("id=\"next\"").next().unwrap().rsplit("href=\"").next().unwrap().split('"').next().unwrap();
    let next = next.replace("&#38;", "&");
    assert!(next.starts_with("/tasks/?limit=4&after="), "{next}");
    let second = body(&view.handle(get(&next)).await);
    let mut all = row_ids(&first);
    all.extend(row_ids(&second));
    assert_eq!(all.len(), 6);
    all.sort();
    all.dedup();
    assert_eq!(all.len(), 6, "no task twice");
    assert!(!second.contains("id=\"next\""), "the last page has no next");

    let css = view.handle(get("/tasks/assets/app.css")).await;
    assert_eq!(css.headers()[header::CONTENT_TYPE], "text/css; charset=utf-8");
    assert_eq!(view.handle(get("/elsewhere")).await.status(), StatusCode::NOT_FOUND);
    assert_eq!(view.handle(get("/tasks/nope/deeper")).await.status(), StatusCode::NOT_FOUND);
    drop(f.engine);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tasks_detail_shows_its_history_what_it_waits_for_and_hides_payloads_unless_asked() {
    let f = fixture().await;
    let view = view(&f, options()).await;
    let done = body(&view.handle(get(&format!("/tasks/tasks/{}", f.ids[0]))).await);
    assert!(done.contains(r#"<span class="event">created</span>"#), "{done}");
    assert!(done.contains(r#"<span class="event">result</span>"#));
    assert!(done.contains("Result hidden") && !done.contains("secret numbers"), "results are hidden by default");
    let waiting = body(&view.handle(get(&format!("/tasks/tasks/{}", f.ids[5]))).await);
    assert!(waiting.contains("<dt>Waits for</dt><dd>approve since "), "{waiting}");
    assert_eq!(view.handle(get("/tasks/tasks/unknown-id")).await.status(), StatusCode::NOT_FOUND);

    // Shown when the view is started so, through the redaction hook.
    let shown = WebOptions {
        show_payloads: true,
        redact: Some(Arc::new(|value: &serde_json::Value| {
            let mut value = value.clone();
            value["content"] = json!("[redacted]");
            value
        })),
        ..options()
    };
    let view = WebView::new(Admin::open(&f.url).await.unwrap(), shown);
    let done = body(&view.handle(get(&format!("/tasks/tasks/{}", f.ids[0]))).await);
    assert!(done.contains("[redacted]") && !done.contains("secret numbers"), "{done}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn actions_need_a_token_from_this_site_and_name_the_operator() {
    let f = fixture().await;
    let view = view(&f, options()).await;
    let target = f.ids[2].clone();
    let form = format!("action=cancel&id={target}&back=/");

    let anonymous = view.handle(post("/tasks/actions", &form, &[("sec-fetch-site", "same-origin")])).await;
    assert_eq!(anonymous.status(), StatusCode::UNAUTHORIZED);
    let wrong = view.handle(post("/tasks/actions", &form, &[("authorization", "Bearer not-a-token-at-all")])).await;
    assert_eq!(wrong.status(), StatusCode::UNAUTHORIZED);
    let (name, value) = bearer(SECRET);
    let cross = view.handle(post("/tasks/actions", &form, &[(name, &value), ("sec-fetch-site", "cross-site")])).await;
    assert_eq!(cross.status(), StatusCode::FORBIDDEN);
    let foreign =
        view.handle(post("/tasks/actions", &form, &[(name, &value), ("origin", "http://evil.example")])).await;
    assert_eq!(foreign.status(), StatusCode::FORBIDDEN);
    assert_eq!(f.engine.get("alice", &target).await.unwrap().task.status, TaskStatus::Working, "nothing changed");

    // A login turns the token into a cookie for this path; the form then cancels the task.
    let login =
        view.handle(post("/tasks/login", &format!("token={SECRET}"), &[("origin", "http://127.0.0.1:8765")])).await;
    assert_eq!(login.status(), StatusCode::SEE_OTHER);
    let cookie = login.headers()[header::SET_COOKIE].to_str().unwrap().to_owned();
    assert!(cookie.contains("HttpOnly") && cookie.contains("SameSite=Strict") && cookie.contains("Path=/tasks"));
    let cookie = cookie.split(';').next().unwrap().to_owned();
    let bad_login = view.handle(post("/tasks/login", "token=guess", &[("sec-fetch-site", "same-origin")])).await;
    assert_eq!(bad_login.status(), StatusCode::UNAUTHORIZED);
    let signed_in = body(&view.handle(get("/tasks/").map(|b| b)).await);
    assert!(!signed_in.contains("Cancel selected"));
    let mut with_cookie = get("/tasks/");
    with_cookie.headers_mut().insert(header::COOKIE, cookie.parse().unwrap());
    let page = body(&view.handle(with_cookie).await);
    assert!(page.contains("Cancel selected") && page.contains("signed in as <b>ana</b>"), "{page}");

    let done =
        view.handle(post("/tasks/actions", &form, &[("cookie", &cookie), ("sec-fetch-site", "same-origin")])).await;
    assert_eq!(done.status(), StatusCode::SEE_OTHER, "{}", body(&done));
    assert_eq!(f.engine.get("alice", &target).await.unwrap().task.status, TaskStatus::Cancelled);
    let history = Admin::open(&f.url).await.unwrap().history(&target).await.unwrap();
    assert!(
        history.entries.iter().any(|e| e.event == HistoryEvent::CancelRequested { by: Actor::Operator("ana".into()) }),
        "{history:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn everything_matching_is_counted_then_confirmed_and_a_limited_token_sees_its_principals_only() {
    let f = fixture().await;
    let view = view(&f, options()).await;
    let (name, value) = bearer(SECRET);
    let form = "action=cancel&matching=1&tool=watch";
    let confirm = body(&view.handle(post("/tasks/actions", form, &[(name, &value)])).await);
    assert!(confirm.contains("This will cancel <b>3</b> tasks"), "{confirm}");
    for id in &f.ids[2..5] {
        assert_eq!(Admin::open(&f.url).await.unwrap().show(id).await.unwrap().unwrap().status, TaskStatus::Working);
    }
    let done = body(&view.handle(post("/tasks/actions", &format!("{form}&confirm=1"), &[(name, &value)])).await);
    assert_eq!(done.matches(": cancelled").count(), 3, "{done}");

    // bob-ops sees bob's tasks only, and cannot act on another's.
    let (name, value) = bearer(BOB_SECRET);
    let mut request = get("/tasks/");
    request.headers_mut().insert(header::AUTHORIZATION, value.parse().unwrap());
    let page = body(&view.handle(request).await);
    assert_eq!(row_ids(&page).len(), 2, "{page}");
    let mut other = get(&format!("/tasks/tasks/{}", f.ids[0]));
    other.headers_mut().insert(header::AUTHORIZATION, value.parse().unwrap());
    assert_eq!(view.handle(other).await.status(), StatusCode::NOT_FOUND);
    let alice = f.ids[5].clone();
    let refused = body(
        &view
            .handle(post("/tasks/actions", &format!("action=cancel&id={alice}&id={}", f.ids[1]), &[(name, &value)]))
            .await,
    );
    assert!(refused.contains(&format!("{alice}: no such task")), "{refused}");
    assert_eq!(f.engine.get("alice", &alice).await.unwrap().task.status, TaskStatus::InputRequired);
    let purge = view.handle(post("/tasks/actions", "action=purge&older_than=0s", &[(name, &value)])).await;
    assert_eq!(purge.status(), StatusCode::FORBIDDEN);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn read_only_shows_and_takes_no_action_and_closed_reads_ask_for_a_token() {
    let f = fixture().await;
    let view = view(&f, WebOptions { read_only: true, ..options() }).await;
    let (name, value) = bearer(SECRET);
    let mut request = get("/tasks/");
    request.headers_mut().insert(header::AUTHORIZATION, value.parse().unwrap());
    let page = body(&view.handle(request).await);
    assert!(page.contains("id=\"read-only\"") && !page.contains("name=\"action\""), "{page}");
    let mut detail = get(&format!("/tasks/tasks/{}", f.ids[2]));
    detail.headers_mut().insert(header::AUTHORIZATION, value.parse().unwrap());
    assert!(!body(&view.handle(detail).await).contains("id=\"cancel\""));
    let refused =
        view.handle(post("/tasks/actions", &format!("action=cancel&id={}", f.ids[2]), &[(name, &value)])).await;
    assert_eq!(refused.status(), StatusCode::FORBIDDEN);

    let closed = view_closed(&f).await;
    let page = closed.handle(get("/tasks/")).await;
    assert_eq!(page.status(), StatusCode::UNAUTHORIZED);
    assert!(body(&page).contains("name=\"token\""));
    let mut request = get("/tasks/");
    request.headers_mut().insert(header::AUTHORIZATION, value.parse().unwrap());
    assert_eq!(closed.handle(request).await.status(), StatusCode::OK);
}

async fn view_closed(f: &Fixture) -> WebView {
    view(f, WebOptions { open_reads: false, ..options() }).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_axum_router_serves_the_same_bytes_under_its_prefix() {
    use tower::ServiceExt as _;
    let f = fixture().await;
    let view = view(&f, options()).await;
    let direct = view.handle(get("/tasks/?status=failed")).await;
    let router = mcp_tasks_web::router(view);
    let request = Request::get("/tasks/?status=failed")
        .header(header::HOST, "127.0.0.1:8765")
        .body(axum::body::Body::empty())
        .unwrap();
    let response = router.oneshot(request).await.unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    let bytes = axum::body::to_bytes(response.into_body(), usize::MAX).await.unwrap();
    assert_eq!(bytes, direct.body());
}

/// The `data-since` a page follows the store from.
fn since(html: &str) -> String {
    html.split("data-since=\"").nth(1).expect("a live page").split('"').next().unwrap().to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_page_hears_of_a_change_through_one_event_and_resumes_from_its_last_id() {
    let mut f = fixture().await;
    let view = view(&f, options()).await;
    let page = body(&view.handle(get("/tasks/")).await);
    let id = since(&page);
    assert!(page.contains(r#"data-url="/tasks/changes""#), "{page}");

    // Held while nothing changes; answered with one event once a task completes.
    let waiting = tokio::spawn({
        let view = view.clone();
        let id = id.clone();
        async move { view.handle(get(&format!("/tasks/changes?since={id}"))).await }
    });
    tokio::time::sleep(std::time::Duration::from_millis(600)).await;
    assert!(!waiting.is_finished(), "nothing changed yet, so nothing is said");
    let work = f._running.remove(0);
    work.complete(json!({"content": []})).await.unwrap();
    let answer = tokio::time::timeout(std::time::Duration::from_secs(10), waiting).await.unwrap().unwrap();
    assert_eq!(answer.status(), StatusCode::OK);
    assert_eq!(answer.headers()[header::CONTENT_TYPE], "text/event-stream");
    let event = body(&answer);
    let next = event.split("id: ").nth(1).unwrap().split('\n').next().unwrap().to_owned();
    assert_ne!(next, id);
    assert_eq!(event, format!("retry: 500\nid: {next}\nevent: change\ndata: {next}\n\n"));

    // A browser back from an absence sends the last id it saw: it hears at once that it missed
    // something; one that is up to date is held.
    let mut resumed = get("/tasks/changes");
    resumed.headers_mut().insert("last-event-id", id.parse().unwrap());
    assert!(body(&view.handle(resumed).await).contains(&format!("id: {next}\n")));
    let detail = body(&view.handle(get(&format!("/tasks/tasks/{}", f.ids[2]))).await);
    assert!(!detail.contains("data-since"), "a finished task's page follows nothing");
    let working = body(&view.handle(get(&format!("/tasks/tasks/{}", f.ids[3]))).await);
    assert_eq!(since(&working), next);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn purges_take_one_task_a_selection_or_every_finished_task_matching_and_leave_live_ones() {
    let f = fixture().await;
    let view = view(&f, options()).await;
    let (name, value) = bearer(SECRET);
    let admin = Admin::open(&f.url).await.unwrap();
    let (done, failed, working) = (f.ids[0].clone(), f.ids[1].clone(), f.ids[2].clone());

    // A finished task's page offers a purge; a live one's does not.
    let mut page = get(&format!("/tasks/tasks/{done}"));
    page.headers_mut().insert(header::AUTHORIZATION, value.parse().unwrap());
    assert!(body(&view.handle(page).await).contains(r#"id="purge""#));
    let mut page = get(&format!("/tasks/tasks/{working}"));
    page.headers_mut().insert(header::AUTHORIZATION, value.parse().unwrap());
    let live = body(&view.handle(page).await);
    assert!(live.contains(r#"id="cancel""#) && !live.contains(r#"id="purge""#));

    // A selection: the finished task goes with its history, the live one stays and is named.
    let form = format!("action=purge&id={done}&id={working}&back=/");
    let answer = body(&view.handle(post("/tasks/actions", &form, &[(name, &value)])).await);
    assert!(
        answer.contains("purged 1 finished task<") && answer.contains(&format!("{working}: still working")),
        "{answer}"
    );
    assert!(admin.show(&done).await.unwrap().is_none());
    assert!(admin.history(&done).await.unwrap().entries.is_empty(), "its history went with it");
    assert_eq!(admin.show(&working).await.unwrap().unwrap().status, TaskStatus::Working);

    // Everything matching: counted first (finished tasks only), then confirmed.
    let form = "action=purge&matching=1&principal=bob";
    let confirm = body(&view.handle(post("/tasks/actions", form, &[(name, &value)])).await);
    assert!(confirm.contains("This will purge <b>1</b> task."), "{confirm}");
    assert!(admin.show(&failed).await.unwrap().is_some(), "nothing goes before the confirmation");
    let done = body(&view.handle(post("/tasks/actions", &format!("{form}&confirm=1"), &[(name, &value)])).await);
    assert!(done.contains("purged 1 finished task<"), "{done}");
    assert!(admin.show(&failed).await.unwrap().is_none());
    assert_eq!(admin.show(&f.ids[3]).await.unwrap().unwrap().status, TaskStatus::Working, "bob's live task stays");
}
