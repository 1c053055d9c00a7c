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

fn tokens() -> Vec<Token> {
    vec![Token::new("ana", SECRET, None), Token::new("bob-ops", BOB_SECRET, Some(vec!["bob".into()]))]
}

/// A view as `mcp-tasks web` serves it on loopback: reads open, to this machine's names only.
fn options() -> WebOptions {
    WebOptions { prefix: "/tasks".into(), tokens: tokens(), open_reads: true, ..WebOptions::default() }
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
    assert!(!cookie.contains(SECRET) && !cookie.contains("Secure"), "a session id, over plain HTTP: {cookie}");
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
    assert!(refused.contains(&format!(r#"<li data-id="{alice}" data-outcome="not_found">"#)), "{refused}");
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
        answer.contains("purged 1 finished task<")
            && answer.contains(&format!(r#"<li data-id="{working}" data-outcome="unfinished">"#))
            && answer.contains(&format!(r#"<li data-id="{done}" data-outcome="purged">"#)),
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

/// `request` with `name: value` added.
fn with(mut request: Request<Bytes>, name: &'static str, value: &str) -> Request<Bytes> {
    request.headers_mut().insert(name, value.parse().unwrap());
    request
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mount_reads_only_with_a_token_unless_its_application_opens_reads() {
    let f = fixture().await;
    // The embedded mount as docs/operating.md shows it, reached under a public name.
    let view = view(&f, WebOptions { prefix: "/tasks".into(), tokens: tokens(), ..WebOptions::default() }).await;
    for path in ["/tasks/", &format!("/tasks/tasks/{}", f.ids[0]), "/tasks/changes?since=x"] {
        let page = view.handle(with(get(path), "host", "app.example.com")).await;
        assert_eq!(page.status(), StatusCode::UNAUTHORIZED, "{path}");
        let html = body(&page);
        assert!(html.contains("name=\"token\"") && f.ids.iter().all(|id| !html.contains(id.as_str())), "{html}");
    }
    let (name, value) = bearer(SECRET);
    let page = view.handle(with(with(get("/tasks/"), "host", "app.example.com"), name, &value)).await;
    assert_eq!(page.status(), StatusCode::OK);
    assert_eq!(row_ids(&body(&page)).len(), 6);
    // Without any token nobody reads, and the sign-in form says why.
    let none = view_with(&f, WebOptions { prefix: "/tasks".into(), ..WebOptions::default() }).await;
    let page = none.handle(get("/tasks/")).await;
    assert_eq!(page.status(), StatusCode::UNAUTHORIZED);
    assert!(body(&page).contains("accepts no token"), "{}", body(&page));
}

async fn view_with(f: &Fixture, options: WebOptions) -> WebView {
    view(f, options).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn open_reads_answer_only_this_machines_names_and_the_allowed_hosts() {
    let f = fixture().await;
    let view = view(&f, options()).await;
    // DNS rebinding: a page on evil.example whose name now points at 127.0.0.1.
    for path in ["/tasks/", "/tasks/login", "/tasks/changes", &format!("/tasks/tasks/{}", f.ids[2])] {
        let page = view.handle(with(get(path), "host", "evil.example:8765")).await;
        assert_eq!(page.status(), StatusCode::FORBIDDEN, "{path}");
        let html = body(&page);
        assert!(html.contains("this view answers only this machine") && html.contains("evil.example:8765"), "{html}");
        assert!(f.ids.iter().all(|id| !html.contains(id.as_str())));
    }
    let login = post("/tasks/login", &format!("token={SECRET}"), &[("sec-fetch-site", "same-origin")]);
    let login = view.handle(with(login, "host", "evil.example")).await;
    assert_eq!(login.status(), StatusCode::FORBIDDEN);
    assert!(login.headers().get(header::SET_COOKIE).is_none());
    let no_host = view.handle(Request::get("/tasks/").body(Bytes::new()).unwrap()).await;
    assert_eq!(no_host.status(), StatusCode::FORBIDDEN);
    for host in ["localhost:8765", "[::1]:8765", "127.0.0.2"] {
        assert_eq!(view.handle(with(get("/tasks/"), "host", host)).await.status(), StatusCode::OK, "{host}");
    }
    // Behind a proxy: the name the browser uses, allowed by the operator.
    let proxied = view_with(&f, WebOptions { allowed_hosts: vec!["tasks.example.com".into()], ..options() }).await;
    assert_eq!(proxied.handle(with(get("/tasks/"), "host", "tasks.example.com")).await.status(), StatusCode::OK);
    assert_eq!(proxied.handle(with(get("/tasks/"), "host", "evil.example")).await.status(), StatusCode::FORBIDDEN);
    // Allowed hosts are checked with reads closed too.
    let closed =
        view_with(&f, WebOptions { open_reads: false, allowed_hosts: vec!["tasks.example.com".into()], ..options() })
            .await;
    let (name, value) = bearer(SECRET);
    let foreign = closed.handle(with(with(get("/tasks/"), "host", "evil.example"), name, &value)).await;
    assert_eq!(foreign.status(), StatusCode::FORBIDDEN);
}

/// Signs in on `view` and answers the `Set-Cookie` header.
async fn sign_in(view: &WebView, request: Request<Bytes>) -> String {
    let answer = view.handle(request).await;
    assert_eq!(answer.status(), StatusCode::SEE_OTHER, "{}", body(&answer));
    answer.headers()[header::SET_COOKIE].to_str().unwrap().to_owned()
}

fn login_form(secret: &str) -> Request<Bytes> {
    post("/tasks/login", &format!("token={secret}"), &[("sec-fetch-site", "same-origin")])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sessions_live_in_the_store_end_on_sign_out_everywhere_expire_and_are_secure_over_https() {
    let f = fixture().await;
    let closed = || WebOptions { open_reads: false, ..options() };
    let worker_a = view(&f, closed()).await;
    let worker_b = view(&f, closed()).await;
    let set = sign_in(&worker_a, login_form(SECRET)).await;
    assert!(set.contains("Max-Age=28800") && !set.contains(SECRET), "{set}");
    let cookie = set.split(';').next().unwrap().to_owned();
    let id = cookie.split('=').nth(1).unwrap();
    assert_eq!(id.len(), 64, "a random id: {cookie}");
    // Another worker over the same store knows the session.
    let page = worker_b.handle(with(get("/tasks/"), "cookie", &cookie)).await;
    assert_eq!(page.status(), StatusCode::OK);
    assert!(body(&page).contains("signed in as <b>ana</b>"));
    // A made-up id, or the secret itself as a cookie, is no session.
    let guess = format!("mcp_tasks_web={}", "0".repeat(64));
    assert_eq!(worker_b.handle(with(get("/tasks/"), "cookie", &guess)).await.status(), StatusCode::UNAUTHORIZED);
    let raw = format!("mcp_tasks_web={SECRET}");
    assert_eq!(worker_b.handle(with(get("/tasks/"), "cookie", &raw)).await.status(), StatusCode::UNAUTHORIZED);

    // Signing out on B ends it on A too.
    let out =
        worker_b.handle(post("/tasks/logout", "", &[("cookie", &cookie), ("sec-fetch-site", "same-origin")])).await;
    assert_eq!(out.status(), StatusCode::SEE_OTHER);
    assert!(out.headers()[header::SET_COOKIE].to_str().unwrap().contains("Max-Age=0"));
    assert_eq!(worker_a.handle(with(get("/tasks/"), "cookie", &cookie)).await.status(), StatusCode::UNAUTHORIZED);
    let cancel = post(
        "/tasks/actions",
        &format!("action=cancel&id={}", f.ids[2]),
        &[("cookie", &cookie), ("sec-fetch-site", "same-origin")],
    );
    assert_eq!(worker_a.handle(cancel).await.status(), StatusCode::UNAUTHORIZED, "an ended session acts on nothing");

    // A token taken out of the file ends its sessions.
    let set = sign_in(&worker_a, login_form(BOB_SECRET)).await;
    let bobs = set.split(';').next().unwrap().to_owned();
    let without_bob = view(&f, WebOptions { tokens: vec![Token::new("ana", SECRET, None)], ..closed() }).await;
    assert_eq!(without_bob.handle(with(get("/tasks/"), "cookie", &bobs)).await.status(), StatusCode::UNAUTHORIZED);

    // Sessions expire.
    let short = view(&f, WebOptions { session_ttl: std::time::Duration::from_millis(200), ..closed() }).await;
    let set = sign_in(&short, login_form(SECRET)).await;
    let brief = set.split(';').next().unwrap().to_owned();
    assert_eq!(short.handle(with(get("/tasks/"), "cookie", &brief)).await.status(), StatusCode::OK);
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    assert_eq!(short.handle(with(get("/tasks/"), "cookie", &brief)).await.status(), StatusCode::UNAUTHORIZED);

    // Secure over HTTPS: said by the face, or by the proxy header the operator named (and only then).
    let mut over_tls = login_form(SECRET);
    over_tls.extensions_mut().insert(mcp_tasks_web::ViaHttps);
    assert!(sign_in(&worker_a, over_tls).await.contains("; Secure"));
    let forwarded = with(login_form(SECRET), "x-forwarded-proto", "https");
    assert!(!sign_in(&worker_a, forwarded).await.contains("Secure"), "an unnamed header is not trusted");
    let proxied = view(&f, WebOptions { forwarded_proto_header: Some("x-forwarded-proto".into()), ..closed() }).await;
    let forwarded = with(login_form(SECRET), "x-forwarded-proto", "https");
    assert!(sign_in(&proxied, forwarded).await.contains("; Secure"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_form_goes_back_to_this_views_pages_only_and_a_failed_action_says_so() {
    let f = fixture().await;
    let (name, value) = bearer(SECRET);
    for prefix in ["", "/tasks"] {
        let view = view(&f, WebOptions { prefix: prefix.into(), ..options() }).await;
        for back in ["/\\evil.example", "//evil.example", "https://evil.example/", "/%5Cevil.example"] {
            // An already finished task: the action changes nothing, and the page says why.
            let form = format!("action=cancel&id={}&back={}", f.ids[0], urlencode(back));
            let answer = view.handle(post(&format!("{prefix}/actions"), &form, &[(name, &value)])).await;
            assert_eq!(answer.status(), StatusCode::OK, "{back}");
            let html = body(&answer);
            assert!(html.contains(r#"data-outcome="already_terminal""#), "{html}");
            assert!(html.contains(&format!(r#"<a href="{prefix}/">Back</a>"#)), "{back}: {html}");
        }
        // A change that works goes back, to this view's own page only.
        let form = format!("action=cancel&id={}&back={}", f.ids[2 + prefix.len().min(1)], urlencode("/\\evil.example"));
        let answer = view.handle(post(&format!("{prefix}/actions"), &form, &[(name, &value)])).await;
        assert_eq!(answer.status(), StatusCode::SEE_OTHER, "{}", body(&answer));
        assert_eq!(answer.headers()[header::LOCATION], format!("{prefix}/"));
    }
}

fn urlencode(text: &str) -> String {
    text.bytes().map(|b| format!("%{b:02X}")).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_tasks_are_cancelled_in_one_request_with_an_outcome_each_and_the_operator_in_every_history() {
    let f = fixture().await;
    let mut ids = Vec::new();
    let mut running = Vec::new();
    for n in 0..300 {
        let (t, ctx) = f.engine.create_task(["alice", "bob"][n % 2], "bulk", TaskOptions::default()).await.unwrap();
        ids.push(t.task.task_id);
        running.push(ctx);
    }
    let view = view(&f, options()).await;
    let (name, value) = bearer(SECRET);
    let mut form: String = ids.iter().map(|id| format!("id={id}&")).collect();
    form.push_str(&format!("id={}&id=no-such-task&action=cancel", f.ids[0]));
    let started = std::time::Instant::now();
    let answer = view.handle(post("/tasks/actions", &form, &[(name, &value)])).await;
    let took = started.elapsed();
    let html = body(&answer);
    assert_eq!(answer.status(), StatusCode::OK, "{html}");
    assert_eq!(html.matches(r#"data-outcome="cancelled""#).count(), 300, "{html}");
    assert!(html.contains(&format!(r#"<li data-id="{}" data-outcome="already_terminal">"#, f.ids[0])));
    assert!(html.contains(r#"<li data-id="no-such-task" data-outcome="not_found">"#));
    assert!(html.contains("cancelled 300 of 302 tasks"), "{html}");
    // One request to the host, applied together: not a sweep per task (the figure is the
    // benchmark's; this only says it is not one per second).
    assert!(took < std::time::Duration::from_secs(30), "{took:?}");
    let admin = Admin::open(&f.url).await.unwrap();
    for id in &ids {
        assert_eq!(admin.show(id).await.unwrap().unwrap().status, TaskStatus::Cancelled);
        let history = admin.history(id).await.unwrap();
        assert!(
            history
                .entries
                .iter()
                .any(|e| e.event == HistoryEvent::CancelRequested { by: Actor::Operator("ana".into()) }),
            "{history:?}"
        );
    }
    // A limited token's request names others' tasks: they are unknown to it, and unchanged.
    let fresh: Vec<String> = {
        let mut fresh = Vec::new();
        for principal in ["alice", "bob"] {
            let (t, ctx) = f.engine.create_task(principal, "bulk", TaskOptions::default()).await.unwrap();
            fresh.push(t.task.task_id);
            running.push(ctx);
        }
        fresh
    };
    let (name, value) = bearer(BOB_SECRET);
    let form = format!("action=cancel&id={}&id={}", fresh[0], fresh[1]);
    let html = body(&view.handle(post("/tasks/actions", &form, &[(name, &value)])).await);
    assert!(html.contains(&format!(r#"<li data-id="{}" data-outcome="not_found">"#, fresh[0])), "{html}");
    assert!(html.contains(&format!(r#"<li data-id="{}" data-outcome="cancelled">"#, fresh[1])), "{html}");
    assert_eq!(admin.show(&fresh[0]).await.unwrap().unwrap().status, TaskStatus::Working);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn any_worker_holds_a_pages_changes_and_a_limited_token_hears_of_its_principals_only() {
    let mut f = fixture().await;
    let worker_a = view(&f, options()).await;
    let worker_b = view(&f, options()).await;
    let page = body(&worker_a.handle(get("/tasks/")).await);
    let id = since(&page);
    // The id is the store's: B holds A's page's request instead of answering "changed" at once.
    let held = tokio::spawn({
        let worker_b = worker_b.clone();
        let id = id.clone();
        async move { worker_b.handle(get(&format!("/tasks/changes?since={id}"))).await }
    });
    // And bob-ops, following bob's tasks only, on B.
    let (_, bobs_auth) = bearer(BOB_SECRET);
    let bobs_page = body(&worker_a.handle(with(get("/tasks/"), "authorization", &bobs_auth)).await);
    let bobs_id = since(&bobs_page);
    assert_ne!(bobs_id, id, "a scope of its own");
    let bobs = tokio::spawn({
        let worker_b = worker_b.clone();
        let bobs_id = bobs_id.clone();
        let auth = bobs_auth.clone();
        async move { worker_b.handle(with(get(&format!("/tasks/changes?since={bobs_id}")), "authorization", &auth)).await }
    });
    tokio::time::sleep(std::time::Duration::from_millis(700)).await;
    assert!(!held.is_finished() && !bobs.is_finished(), "nothing changed yet");
    // Alice's task completes: the whole view hears of it, bob-ops does not.
    let alices = f._running.remove(0);
    alices.complete(json!({"content": []})).await.unwrap();
    let answer = tokio::time::timeout(std::time::Duration::from_secs(10), held).await.unwrap().unwrap();
    assert!(body(&answer).contains("event: change"), "{}", body(&answer));
    tokio::time::sleep(std::time::Duration::from_millis(700)).await;
    assert!(!bobs.is_finished(), "bob-ops learns nothing of alice's tasks");
    // Bob's task changes: now bob-ops hears.
    let bobs_work = f._running.remove(0);
    bobs_work.set_status_message("bob's news").await.unwrap();
    let answer = tokio::time::timeout(std::time::Duration::from_secs(10), bobs).await.unwrap().unwrap();
    assert!(body(&answer).contains("event: change"), "{}", body(&answer));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn held_changes_are_bounded_per_process_and_per_operator() {
    let f = fixture().await;
    let view = view(&f, WebOptions { max_held: 5, ..options() }).await;
    let id = since(&body(&view.handle(get("/tasks/")).await));
    let hold = |auth: Option<String>| {
        let view = view.clone();
        let id = id.clone();
        tokio::spawn(async move {
            let request = get(&format!("/tasks/changes?since={id}"));
            let request = match auth {
                Some(auth) => with(request, "authorization", &auth),
                None => request,
            };
            view.handle(request).await
        })
    };
    // Four anonymous readers are held; the fifth is answered at once, told to ask later.
    let held: Vec<_> = (0..4).map(|_| hold(None)).collect();
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    assert!(held.iter().all(|h| !h.is_finished()));
    let fifth = tokio::time::timeout(std::time::Duration::from_secs(2), hold(None)).await.unwrap().unwrap();
    assert_eq!(fifth.status(), StatusCode::OK);
    assert!(body(&fifth).starts_with("retry: 5000\n:"), "{}", body(&fifth));
    // Another operator is held until the process's bound (five), then answered at once too.
    let (_, auth) = bearer(SECRET);
    let ana = hold(Some(auth.clone()));
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    assert!(!ana.is_finished());
    let over = tokio::time::timeout(std::time::Duration::from_secs(2), hold(Some(auth))).await.unwrap().unwrap();
    assert!(body(&over).starts_with("retry: 5000\n:"), "{}", body(&over));
    for h in held {
        h.abort();
    }
    ana.abort();
}

/// The chart's `data-total` of `series`.
fn chart_total(html: &str, series: &str) -> u64 {
    let marker = format!(r#"data-series="{series}" data-total=""#);
    html.split(&marker).nth(1).expect("the series").split('"').next().unwrap().parse().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_list_charts_the_last_hour_per_minute_and_shows_times_with_their_zone() {
    let f = fixture().await;
    let view = view(&f, options()).await;
    let html = body(&view.handle(get("/tasks/")).await);
    assert!(html.contains(r#"<figure class="activity" id="activity">"#), "{html}");
    assert_eq!(
        ["created", "completed", "failed", "cancelled"].map(|s| chart_total(&html, s)),
        [6, 1, 1, 0],
        "six created, one completed, one failed in the last hour"
    );
    let points = html.split(r#"data-series="created""#).nth(1).unwrap().split("points=\"").nth(1).unwrap();
    assert_eq!(points.split('"').next().unwrap().split(' ').count(), 60, "a point a minute");
    assert!(!html.contains("style="), "no inline style: the policy allows none");
    // Times say their zone, and carry their instant for the browser's.
    assert!(html.contains(" UTC</time>") && html.contains(r#"<time datetime=""#), "{html}");
    // A token limited to bob's tasks charts bob's only.
    let (_, auth) = bearer(BOB_SECRET);
    let bobs = body(&view.handle(with(get("/tasks/"), "authorization", &auth)).await);
    assert_eq!(["created", "failed"].map(|s| chart_total(&bobs, s)), [2, 1]);
}

/// Two views over one PostgreSQL database, as two workers: a page of one is held by the other
/// until a change, a limited token hears only of its principals, and a session one starts the
/// other knows. Needs a server: `MCP_TASKS_PG_URL=$(tests/pg/start) cargo test -p mcp-tasks-web
/// --features axum,postgres --test web -- --include-ignored`.
#[cfg(feature = "postgres")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a PostgreSQL server in MCP_TASKS_PG_URL (tests/run-all starts one)"]
async fn two_views_over_postgres_follow_the_same_changes_and_share_sessions() {
    let base = std::env::var("MCP_TASKS_PG_URL").expect("MCP_TASKS_PG_URL names a PostgreSQL server");
    let (client, connection) = tokio_postgres::connect(&base, tokio_postgres::NoTls).await.expect("connects");
    tokio::spawn(connection);
    let name = format!("mcp_tasks_web_test_{}", std::process::id());
    client.batch_execute(&format!("CREATE DATABASE {name}")).await.expect("creates a database");
    let url = format!("{}/{name}", &base[..base.rfind('/').expect("a database part")]);
    let store = mcp_tasks::store::PostgresStore::connect(&url).await.expect("connects and migrates");
    let engine = Engine::builder(Arc::new(store)).build().await.unwrap();
    let (_, alices) = engine.create_task("alice", "watch", TaskOptions::default()).await.unwrap();
    let (_, bobs) = engine.create_task("bob", "watch", TaskOptions::default()).await.unwrap();
    let open = |options: WebOptions| {
        let url = url.clone();
        async move { WebView::new(Admin::open(&url).await.unwrap(), options) }
    };
    let (a, b) = (open(options()).await, open(options()).await);
    let id = since(&body(&a.handle(get("/tasks/")).await));
    let held = tokio::spawn({
        let (b, id) = (b.clone(), id.clone());
        async move { b.handle(get(&format!("/tasks/changes?since={id}"))).await }
    });
    let (_, auth) = bearer(BOB_SECRET);
    let bobs_id = since(&body(&a.handle(with(get("/tasks/"), "authorization", &auth)).await));
    let bobs_held = tokio::spawn({
        let (b, bobs_id, auth) = (b.clone(), bobs_id.clone(), auth.clone());
        async move { b.handle(with(get(&format!("/tasks/changes?since={bobs_id}")), "authorization", &auth)).await }
    });
    tokio::time::sleep(std::time::Duration::from_millis(700)).await;
    assert!(!held.is_finished() && !bobs_held.is_finished(), "the other view holds the page: nothing changed");
    alices.set_status_message("alice's news").await.unwrap();
    let answer = tokio::time::timeout(std::time::Duration::from_secs(10), held).await.unwrap().unwrap();
    assert!(body(&answer).contains("event: change"), "{}", body(&answer));
    tokio::time::sleep(std::time::Duration::from_millis(700)).await;
    assert!(!bobs_held.is_finished(), "bob-ops hears nothing of alice's task");
    bobs.set_status_message("bob's news").await.unwrap();
    let answer = tokio::time::timeout(std::time::Duration::from_secs(10), bobs_held).await.unwrap().unwrap();
    assert!(body(&answer).contains("event: change"), "{}", body(&answer));

    let closed = || WebOptions { open_reads: false, ..options() };
    let (a, b) = (open(closed()).await, open(closed()).await);
    let set = sign_in(&a, login_form(SECRET)).await;
    let cookie = set.split(';').next().unwrap().to_owned();
    assert_eq!(b.handle(with(get("/tasks/"), "cookie", &cookie)).await.status(), StatusCode::OK);
    let out = b.handle(post("/tasks/logout", "", &[("cookie", &cookie), ("sec-fetch-site", "same-origin")])).await;
    assert_eq!(out.status(), StatusCode::SEE_OTHER);
    assert_eq!(a.handle(with(get("/tasks/"), "cookie", &cookie)).await.status(), StatusCode::UNAUTHORIZED);
}

/// A writer the test's subscriber logs into.
#[derive(Clone, Default)]
struct Captured(Arc<std::sync::Mutex<Vec<u8>>>);

impl std::io::Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// The log of this test binary: a global subscriber (a scoped one misses events that tests on
/// other threads hit first, as tracing caches a call site's interest).
fn captured() -> Captured {
    static LOG: std::sync::OnceLock<Captured> = std::sync::OnceLock::new();
    LOG.get_or_init(|| {
        let captured = Captured::default();
        let writer = captured.clone();
        let subscriber = tracing_subscriber::fmt().with_writer(move || writer.clone()).with_ansi(false).finish();
        tracing::subscriber::set_global_default(subscriber).expect("the only subscriber of this binary");
        captured
    })
    .clone()
}

const AUDITOR_SECRET: &str = "0123456789abcdef-auditor";

/// Sign-ins, refusals, actions and sign-outs are logged by operator (target
/// `mcp_tasks_web::audit`), never with a secret or a session id.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_audit_trail_names_operators_and_never_a_secret_or_a_session() {
    let captured = captured();
    let f = fixture().await;
    let tokens = vec![Token::new("auditor-7", AUDITOR_SECRET, None)];
    let view = view(&f, WebOptions { open_reads: false, tokens, ..options() }).await;
    let set = sign_in(&view, login_form(AUDITOR_SECRET)).await;
    let cookie = set.split(';').next().unwrap().to_owned();
    let session = cookie.split('=').nth(1).unwrap().to_owned();
    let refused = view.handle(login_form("a-wrong-token-of-enough-length")).await;
    assert_eq!(refused.status(), StatusCode::UNAUTHORIZED);
    let form = format!("action=cancel&id={}&id={}", f.ids[2], f.ids[0]);
    let done =
        view.handle(post("/tasks/actions", &form, &[("cookie", &cookie), ("sec-fetch-site", "same-origin")])).await;
    assert_eq!(done.status(), StatusCode::OK, "{}", body(&done));
    let out = view.handle(post("/tasks/logout", "", &[("cookie", &cookie), ("sec-fetch-site", "same-origin")])).await;
    assert_eq!(out.status(), StatusCode::SEE_OTHER);
    let log = String::from_utf8(captured.0.lock().unwrap().clone()).unwrap();
    let mine: Vec<&str> = log.lines().filter(|l| l.contains("auditor-7")).collect();
    assert!(mine.iter().any(|l| l.contains("operator signed in")), "{log}");
    assert!(
        mine.iter().any(|l| l.contains("operator action")
            && l.contains("action=\"cancel\"")
            && l.contains("changed=1 named=2")),
        "{log}"
    );
    assert!(mine.iter().any(|l| l.contains("operator signed out")), "{log}");
    assert!(log.contains("sign-in refused"), "{log}");
    for secret in [AUDITOR_SECRET, SECRET, BOB_SECRET, "a-wrong-token", session.as_str()] {
        assert!(!log.contains(secret), "the log holds {secret:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tasks_page_shows_its_trace_id_and_links_it_only_to_an_http_template() {
    let f = fixture().await;
    let trace = mcp_tasks::trace::TraceContext::from_parts(
        "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
        None,
        Some("user=alice"),
    );
    let (t, ctx) = f.engine.create_task_traced("alice", "traced", TaskOptions::default(), None, trace).await.unwrap();
    ctx.complete(json!({"content": []})).await.unwrap();
    let path = format!("/tasks/tasks/{}", t.task.task_id);
    let plain = body(&view(&f, options()).await.handle(get(&path)).await);
    assert!(plain.contains(r#"<dt>Trace</dt><dd><code id="trace">4bf92f3577b34da6a3ce929d0e0e4736</code>"#), "{plain}");
    assert!(!plain.contains("user=alice"), "baggage is never shown");
    let linked = WebOptions { ..options() }.with_trace_url("https://jaeger.example/trace/{trace_id}?x=1&y=2").unwrap();
    let page = body(&view(&f, linked).await.handle(get(&path)).await);
    assert!(
        page.contains(r#"href="https://jaeger.example/trace/4bf92f3577b34da6a3ce929d0e0e4736?x=1&#38;y=2""#),
        "{page}"
    );
    // A task without a trace has no row.
    let untraced = body(&view(&f, options()).await.handle(get(&format!("/tasks/tasks/{}", f.ids[0]))).await);
    assert!(!untraced.contains("<dt>Trace</dt>"));
    for bad in ["javascript:alert(1)//{trace_id}", "https://jaeger.example/no-placeholder", "/trace/{trace_id}"] {
        assert!(WebOptions::default().with_trace_url(bad).is_err(), "{bad}");
        // Set on the public field instead, it is dropped by the view: the id shown, nothing linked.
        let direct = WebOptions { trace_url: Some(bad.to_owned()), ..options() };
        let page = body(&view(&f, direct).await.handle(get(&path)).await);
        assert!(page.contains(r#"<code id="trace">4bf92f3577b34da6a3ce929d0e0e4736</code>"#), "{page}");
        assert!(
            !page.contains("href=\"javascript") && !page.contains("no-placeholder") && !page.contains("/trace/4bf9"),
            "{page}"
        );
    }
}
