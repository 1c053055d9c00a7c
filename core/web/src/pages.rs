//! The pages: what each route reads from the store and renders.

use askama::Template;
use bytes::Bytes;
use http::{HeaderValue, Request, Response, StatusCode, header};
use mcp_tasks::admin::AdminError;
use mcp_tasks::admin::query::{Overview, STATUSES};
use mcp_tasks::protocol::{Actor, HistoryEntry, HistoryEvent, TaskRecord, TaskStatus};
use mcp_tasks::store::{TaskOutcome, TaskResult};

use crate::WebView;
use crate::actions::{Act, Confirm, Outcome, visible};
use crate::auth::{Refusal, Viewer};
use crate::params::{Filters, Params, When, show_time};

/// The stylesheet, embedded.
pub(crate) const APP_CSS: &str = include_str!("../assets/app.css");
/// The icon, embedded (a page without one makes browsers ask for `/favicon.ico`).
pub(crate) const FAVICON: &str = include_str!("../assets/favicon.svg");
/// The script, embedded: progressive (select all, confirmations); every page works without it.
pub(crate) const APP_JS: &str = include_str!("../assets/app.js");

/// What every page's frame shows.
struct Frame {
    prefix: String,
    title: String,
    /// The operator signed in, if any.
    operator: Option<String>,
    /// Whether a login link makes sense (tokens exist, nobody signed in).
    can_login: bool,
    read_only: bool,
    /// The store's change id the page shows, when the page follows changes (its script asks
    /// `{prefix}/changes` with it).
    live: Option<String>,
}

impl Frame {
    fn new(view: &WebView, title: impl Into<String>, viewer: Option<&Viewer>) -> Self {
        let options = view.options();
        let operator = viewer.and_then(|v| v.name.clone());
        Self {
            prefix: options.prefix.clone(),
            title: title.into(),
            can_login: operator.is_none() && !options.tokens.is_empty(),
            operator,
            read_only: options.read_only,
            live: None,
        }
    }

    fn following(mut self, live: Option<String>) -> Self {
        self.live = live;
        self
    }
}

#[derive(Template)]
#[template(path = "error.html")]
struct ErrorPage {
    frame: Frame,
    message: String,
}

/// The page for a request sent to a host the view does not answer: no frame, no stylesheet, no
/// script, nothing that would ask that host for more.
#[derive(Template)]
#[template(path = "refused.html")]
struct RefusedPage {
    message: String,
}

#[derive(Template)]
#[template(path = "login.html")]
struct LoginPage {
    frame: Frame,
    message: Option<String>,
}

/// One row of the list.
struct Row {
    id: String,
    status: &'static str,
    tool: String,
    principal: String,
    message: String,
    created: When,
    updated: When,
}

/// One count of the list's header.
struct Count {
    label: &'static str,
    status: &'static str,
    count: u64,
    selected: bool,
}

#[derive(Template)]
#[template(path = "list.html")]
struct ListPage {
    frame: Frame,
    counts: Vec<Count>,
    expiring: u64,
    filters: Filters,
    /// The filters' query string (page position left out), for links and forms.
    filter_query: String,
    any_filter: bool,
    rows: Vec<Row>,
    next: Option<String>,
    first_page: bool,
    can_act: bool,
    statuses: Vec<(&'static str, bool)>,
    /// The last hour's chart, when the store could count it.
    chart: Option<crate::chart::Chart>,
}

/// One entry of a detail page's timeline.
struct Moment {
    at: When,
    event: String,
    detail: String,
}

#[derive(Template)]
#[template(path = "detail.html")]
struct DetailPage {
    frame: Frame,
    task: TaskView,
    timeline: Vec<Moment>,
    dropped: u64,
    can_act: bool,
}

/// A task as its detail page shows it.
struct TaskView {
    id: String,
    status: &'static str,
    message: String,
    tool: String,
    principal: String,
    created: When,
    updated: When,
    ttl: String,
    poll: String,
    attempt: u32,
    resumable: bool,
    /// The task's trace id (W3C trace context it keeps), and its link where the operator set a
    /// trace URL template.
    trace_id: Option<String>,
    trace_link: Option<String>,
    checkpoint: Option<String>,
    waiting_for: Vec<String>,
    waiting_since: Option<When>,
    payload_label: &'static str,
    payload: Option<String>,
    payload_hidden: bool,
    live: bool,
}

#[derive(Template)]
#[template(path = "confirm.html")]
struct ConfirmPage {
    frame: Frame,
    action: &'static str,
    count: usize,
    capped: bool,
    limit: usize,
    filter_query: String,
    pairs: Vec<(String, String)>,
}

#[derive(Template)]
#[template(path = "done.html")]
struct DonePage {
    frame: Frame,
    summary: String,
    lines: Vec<Line>,
    back: String,
}

/// What became of one task, as the done page lists it.
struct Line {
    id: String,
    /// The outcome's name (`cancelled`, `not_found`...), for scripts and tests.
    outcome: &'static str,
    text: String,
}

fn html(status: StatusCode, body: String) -> Response<Bytes> {
    let mut response = Response::new(Bytes::from(body));
    *response.status_mut() = status;
    response.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("text/html; charset=utf-8"));
    response
}

fn render(status: StatusCode, page: &impl Template) -> Response<Bytes> {
    match page.render() {
        Ok(body) => html(status, body),
        Err(e) => html(StatusCode::INTERNAL_SERVER_ERROR, format!("<!doctype html><title>error</title><p>{e}</p>")),
    }
}

/// A page saying what went wrong, with its status.
pub(crate) fn error(view: &WebView, status: StatusCode, message: &str) -> Response<Bytes> {
    render(status, &ErrorPage { frame: Frame::new(view, "Error", None), message: message.to_owned() })
}

fn store_error(view: &WebView, e: &AdminError) -> Response<Bytes> {
    // The store's own words name files and hosts, never a token or a payload.
    error(view, StatusCode::SERVICE_UNAVAILABLE, &format!("The store could not answer: {e}"))
}

/// An embedded asset, cacheable for an hour.
pub(crate) fn asset(content_type: &'static str, body: &'static str) -> Response<Bytes> {
    let mut response = Response::new(Bytes::from_static(body.as_bytes()));
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("public, max-age=3600"));
    response
}

/// The sign-in form.
pub(crate) fn login(view: &WebView, message: Option<&str>) -> Response<Bytes> {
    let status = if message.is_some() { StatusCode::UNAUTHORIZED } else { StatusCode::OK };
    // Without tokens nobody can sign in: say so rather than ask for one.
    let message = if view.options().tokens.is_empty() {
        Some("This view accepts no token: its application configured none, so nobody can sign in.")
    } else {
        message
    };
    render(status, &LoginPage { frame: Frame::new(view, "Sign in", None), message: message.map(str::to_owned) })
}

/// A 303 to `path` (under the prefix), optionally setting a cookie.
pub(crate) fn redirect(view: &WebView, path: &str, cookie: Option<String>) -> Response<Bytes> {
    let mut response = Response::new(Bytes::new());
    *response.status_mut() = StatusCode::SEE_OTHER;
    if let Ok(location) = HeaderValue::from_str(&view.href(path)) {
        response.headers_mut().insert(header::LOCATION, location);
    }
    if let Some(cookie) = cookie.and_then(|c| HeaderValue::from_str(&c).ok()) {
        response.headers_mut().insert(header::SET_COOKIE, cookie);
    }
    response
}

/// The page that says why a request was refused.
pub(crate) fn refusal(view: &WebView, refusal: Refusal) -> Response<Bytes> {
    match refusal {
        Refusal::SignIn => login(view, Some("Sign in with a token to read this view.")),
        Refusal::NoToken => error(view, StatusCode::UNAUTHORIZED, "Sign in with a token to change anything."),
        Refusal::ReadOnly => error(view, StatusCode::FORBIDDEN, "This view is read-only."),
        Refusal::CrossSite => error(view, StatusCode::FORBIDDEN, "Refused: the request came from another site."),
        Refusal::Host(host) => {
            let shown = if host.is_empty() { "no host".to_owned() } else { format!("the host {host:?}") };
            let message = format!(
                "Refused: this request was sent to {shown}, and this view answers only this machine's own names \
                 (localhost, 127.0.0.1, [::1]) and the hosts its operator allowed. Behind a proxy, allow the \
                 name the browser uses (mcp-tasks web --allowed-host, allowed_hosts in Python, allowedHosts in \
                 TypeScript, WebOptions::allowed_hosts in Rust)."
            );
            render(StatusCode::FORBIDDEN, &RefusedPage { message })
        }
        Refusal::Store(e) => store_error(view, &e),
    }
}

fn now_ms() -> u64 {
    mcp_tasks::clock::Clock::now_ms(&mcp_tasks::clock::SystemClock)
}

/// The list: counts, filters, a page of tasks.
pub(crate) async fn list(view: &WebView, request: &Request<Bytes>, viewer: &Viewer) -> Response<Bytes> {
    let params = Params::parse(request.uri().query().unwrap_or_default().as_bytes());
    let filters = Filters::from_params(&params);
    // Before the reads: a change after this shows as an event.
    let live = view.live_id(viewer).await;
    let now = now_ms();
    let query = filters.query(viewer.principals.clone(), now);
    let overview = match view.overview(&query).await {
        Ok(overview) => overview,
        Err(e) => return store_error(view, &e),
    };
    let page = match view.admin().page(&query).await {
        Ok(page) => page,
        Err(e) => return store_error(view, &e),
    };
    // The chart is a picture beside the list: a store that cannot count it leaves it out.
    let chart = view.activity(viewer.principals.as_deref(), now).await.ok().map(|a| crate::chart::Chart::of(&a));
    let filter_query = filters.to_query();
    let next = page.next.map(|cursor| {
        let after = format!("after={}", crate::params::encode(&cursor.encode()));
        if filter_query.is_empty() { after } else { format!("{filter_query}&{after}") }
    });
    let Overview { by_status, expiring_within_hour } = overview;
    let counts = by_status
        .iter()
        .map(|(status, count)| Count {
            label: label(*status),
            status: status.as_str(),
            count: *count,
            selected: filters.statuses.contains(status),
        })
        .collect();
    let statuses = STATUSES.iter().map(|s| (s.as_str(), filters.statuses.contains(s))).collect();
    let page = ListPage {
        frame: Frame::new(view, "Tasks", Some(viewer)).following(live),
        counts,
        expiring: expiring_within_hour,
        any_filter: filters.any(),
        first_page: filters.after.is_none(),
        rows: page.tasks.iter().map(row).collect(),
        next,
        can_act: can_act(view, viewer),
        statuses,
        chart,
        filter_query,
        filters,
    };
    render(StatusCode::OK, &page)
}

fn can_act(view: &WebView, viewer: &Viewer) -> bool {
    !view.options().read_only && viewer.name.is_some()
}

fn label(status: TaskStatus) -> &'static str {
    match status {
        TaskStatus::Working => "Working",
        TaskStatus::InputRequired => "Input required",
        TaskStatus::Completed => "Completed",
        TaskStatus::Failed => "Failed",
        TaskStatus::Cancelled => "Cancelled",
    }
}

fn row(task: &TaskRecord) -> Row {
    Row {
        id: task.id.clone(),
        status: task.status.as_str(),
        tool: task.tool.clone(),
        principal: task.principal.clone(),
        message: task.status_message.clone().unwrap_or_default(),
        created: When::at(task.created_at_ms),
        updated: When::at(task.updated_at_ms),
    }
}

/// A task's detail and history.
pub(crate) async fn detail(view: &WebView, viewer: &Viewer, id: &str) -> Response<Bytes> {
    let id = crate::params::decode(id);
    let live = view.live_id(viewer).await;
    let task = match view.admin().show(&id).await {
        Ok(Some(task)) if visible(viewer, &task) => task,
        Ok(_) => return error(view, StatusCode::NOT_FOUND, "No such task."),
        Err(e) => return store_error(view, &e),
    };
    let history = match view.admin().history(&id).await {
        Ok(history) => history,
        Err(e) => return store_error(view, &e),
    };
    let waiting_since = (task.status == TaskStatus::InputRequired)
        .then(|| {
            history
                .entries
                .iter()
                .rev()
                .find(|e| matches!(e.event, HistoryEvent::InputRequested { .. }))
                .map(|e| When::at(e.at_ms))
        })
        .flatten();
    let page = DetailPage {
        frame: Frame::new(view, format!("Task {id}"), Some(viewer))
            .following(live.filter(|_| !task.status.is_terminal())),
        task: task_view(view, &task, waiting_since),
        timeline: history.entries.iter().map(moment).collect(),
        dropped: history.dropped,
        can_act: can_act(view, viewer),
    };
    render(StatusCode::OK, &page)
}

fn task_view(view: &WebView, task: &TaskRecord, waiting_since: Option<When>) -> TaskView {
    let options = view.options();
    let now = now_ms();
    let ttl = match task.expires_at_ms() {
        None => "unlimited".to_owned(),
        Some(at) if at <= now => format!("ended {}", show_time(at)),
        Some(at) => format!("{} left (until {})", duration(at - now), show_time(at)),
    };
    let (label, payload) = match (&task.result, &task.error) {
        (Some(result), _) => ("Result", Some(serde_json::Value::clone(result))),
        (_, Some(error)) => ("Error", serde_json::to_value(error.as_ref()).ok()),
        _ => ("Result", None),
    };
    let payload_hidden = payload.is_some() && !options.show_payloads;
    let payload = payload.filter(|_| options.show_payloads).map(|value| {
        let value = match &options.redact {
            Some(redact) => redact(&value),
            None => value,
        };
        let mut text = serde_json::to_string_pretty(&value).unwrap_or_default();
        if text.len() > options.payload_limit {
            let mut cut = options.payload_limit;
            while !text.is_char_boundary(cut) {
                cut -= 1;
            }
            text.truncate(cut);
            text.push_str("\n… (cut at the view's payload limit)");
        }
        text
    });
    TaskView {
        id: task.id.clone(),
        status: task.status.as_str(),
        message: task.status_message.clone().unwrap_or_default(),
        tool: task.tool.clone(),
        principal: task.principal.clone(),
        created: When::at(task.created_at_ms),
        updated: When::at(task.updated_at_ms),
        ttl,
        poll: task.poll_interval_ms.map_or_else(|| "–".to_owned(), |ms| format!("{ms} ms")),
        attempt: task.attempt,
        resumable: task.resume.is_some(),
        trace_id: task.trace.as_ref().map(|t| t.trace_id().to_owned()),
        trace_link: task.trace.as_ref().zip(options.trace_url.as_deref()).map(|(t, url)| t.link(url)),
        checkpoint: task.checkpoint.as_ref().map(|c| {
            let text = c.to_string();
            if text.len() > 200 { format!("{} bytes", text.len()) } else { text }
        }),
        waiting_for: if task.status == TaskStatus::InputRequired {
            task.input_requests.keys().cloned().collect()
        } else {
            Vec::new()
        },
        waiting_since,
        payload_label: label,
        payload,
        payload_hidden,
        live: !task.status.is_terminal(),
    }
}

fn duration(ms: u64) -> String {
    let s = ms / 1000;
    match s {
        0..60 => format!("{s} s"),
        60..3_600 => format!("{} min", s / 60),
        3_600..86_400 => format!("{} h {} min", s / 3_600, s % 3_600 / 60),
        _ => format!("{} d {} h", s / 86_400, s % 86_400 / 3_600),
    }
}

fn actor(by: &Actor) -> String {
    match by {
        Actor::Client => "the client".to_owned(),
        Actor::Operator(name) => format!("operator {name}"),
    }
}

fn moment(entry: &HistoryEntry) -> Moment {
    let (event, detail) = match &entry.event {
        HistoryEvent::Created { tool, principal, queued } => {
            ("created", format!("{tool} for {principal}{}", if *queued { ", queued for a worker" } else { "" }))
        }
        HistoryEvent::Status { status, message } => {
            ("status", format!("{}{}", status.as_str(), message.as_ref().map(|m| format!(": {m}")).unwrap_or_default()))
        }
        HistoryEvent::Message { message } => ("message", message.clone()),
        HistoryEvent::InputRequested { keys } => ("input requested", keys.join(", ")),
        HistoryEvent::InputAnswered { keys, by } => ("input answered", format!("{} by {}", keys.join(", "), actor(by))),
        HistoryEvent::Checkpoint => ("checkpoint", String::new()),
        HistoryEvent::CancelRequested { by } => ("cancel requested", format!("by {}", actor(by))),
        HistoryEvent::Expired => ("expired", "its TTL ended".to_owned()),
        HistoryEvent::WorkerLost { owner, attempt } => ("worker lost", format!("{owner}, attempt {attempt}")),
        HistoryEvent::Claimed { owner, attempt } => ("claimed", format!("by {owner}, attempt {attempt}")),
        HistoryEvent::Result { is_error } => ("result", if *is_error { "a tool error" } else { "recorded" }.to_owned()),
        HistoryEvent::Error { code } => ("error", format!("code {code}")),
        _ => ("event", String::new()),
    };
    Moment { at: When::at(entry.at_ms), event: event.to_owned(), detail }
}

/// The page for how an action ended.
pub(crate) fn outcome(view: &WebView, viewer: &Viewer, outcome: Outcome) -> Response<Bytes> {
    let done = |summary: String, lines: Vec<Line>, back: &str| {
        let frame = Frame::new(view, "Done", Some(viewer));
        render(StatusCode::OK, &DonePage { frame, summary, lines, back: view.href(back) })
    };
    match outcome {
        Outcome::Confirm(Confirm { act, count, capped, limit, filter_query, pairs }) => render(
            StatusCode::OK,
            &ConfirmPage {
                frame: Frame::new(view, "Confirm", Some(viewer)),
                action: act.verb(),
                count,
                capped,
                limit,
                filter_query,
                pairs,
            },
        ),
        Outcome::Back(back) => redirect(view, &back, None),
        Outcome::Each { act, tasks, back } => {
            let changed = tasks.iter().filter(|t| t.outcome.changed()).count();
            let summary = match act {
                Act::Cancel => format!("cancelled {changed} of {} task{}", tasks.len(), plural(tasks.len())),
                Act::Purge => format!("purged {changed} finished task{}", plural(changed)),
            };
            done(summary, tasks.iter().map(line).collect(), &back)
        }
        Outcome::PurgedByAge { count } => done(format!("purged {count} terminal tasks"), Vec::new(), "/"),
        Outcome::Queued { seq, back } => {
            let summary = format!(
                "queued as request {seq} for the host that owns the store, which had not applied it yet: it \
                 applies it at its next sweep (the tasks' histories will name you)"
            );
            let mut page = done(summary, Vec::new(), &back);
            *page.status_mut() = StatusCode::ACCEPTED;
            page
        }
        Outcome::Refused { forbidden, message } => {
            error(view, if forbidden { StatusCode::FORBIDDEN } else { StatusCode::BAD_REQUEST }, &message)
        }
        Outcome::Store(e) => store_error(view, &e),
    }
}

fn plural(n: usize) -> &'static str {
    if n == 1 { "" } else { "s" }
}

fn line(task: &TaskResult) -> Line {
    let (outcome, text) = match &task.outcome {
        TaskOutcome::Cancelled => ("cancelled", "cancelled".to_owned()),
        TaskOutcome::Purged => ("purged", "purged with its history".to_owned()),
        TaskOutcome::AlreadyTerminal { status } => {
            ("already_terminal", format!("already {}; unchanged", status.as_str()))
        }
        TaskOutcome::Unfinished { status } => {
            ("unfinished", format!("still {}; a purge leaves unfinished tasks alone", status.as_str()))
        }
        TaskOutcome::NotFound => ("not_found", "no such task".to_owned()),
        TaskOutcome::Failed { message } => ("failed", format!("not changed: {message}")),
        _ => ("other", format!("{:?}", task.outcome)),
    };
    Line { id: task.task_id.clone(), outcome, text }
}
