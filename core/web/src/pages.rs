//! The pages: what each route reads from the store and renders.

use askama::Template;
use bytes::Bytes;
use http::{HeaderValue, Request, Response, StatusCode, header};
use mcp_tasks::admin::query::{Overview, STATUSES, TaskQuery};
use mcp_tasks::admin::{AdminError, Applied};
use mcp_tasks::protocol::{Actor, HistoryEntry, HistoryEvent, TaskRecord, TaskStatus};
use mcp_tasks::store::AdminOutcome;

use crate::WebView;
use crate::auth::{Viewer, redirect};
use crate::params::{Filters, Params, show_time};

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
    created: String,
    updated: String,
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
}

/// One entry of a detail page's timeline.
struct Moment {
    at: String,
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
    created: String,
    updated: String,
    ttl: String,
    poll: String,
    attempt: u32,
    resumable: bool,
    checkpoint: Option<String>,
    waiting_for: Vec<String>,
    waiting_since: Option<String>,
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
    lines: Vec<String>,
    back: String,
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

/// The login form.
pub(crate) fn login(view: &WebView, _request: &Request<Bytes>, message: Option<&str>) -> Response<Bytes> {
    let status = if message.is_some() { StatusCode::UNAUTHORIZED } else { StatusCode::OK };
    render(status, &LoginPage { frame: Frame::new(view, "Sign in", None), message: message.map(str::to_owned) })
}

fn now_ms() -> u64 {
    mcp_tasks::clock::Clock::now_ms(&mcp_tasks::clock::SystemClock)
}

/// The list: counts, filters, a page of tasks.
pub(crate) async fn list(view: &WebView, request: &Request<Bytes>, viewer: &Viewer) -> Response<Bytes> {
    let params = Params::parse(request.uri().query().unwrap_or_default().as_bytes());
    let filters = Filters::from_params(&params);
    // Before the reads: a change after this shows as an event.
    let live = view.live_id().await;
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
        created: show_time(task.created_at_ms),
        updated: show_time(task.updated_at_ms),
    }
}

/// True when `viewer` may see `task` (a token limited to principals sees only theirs).
fn visible(viewer: &Viewer, task: &TaskRecord) -> bool {
    viewer.principals.as_ref().is_none_or(|principals| principals.contains(&task.principal))
}

/// A task's detail and history.
pub(crate) async fn detail(view: &WebView, request: &Request<Bytes>, viewer: &Viewer, id: &str) -> Response<Bytes> {
    let id = crate::params::decode(id);
    let live = view.live_id().await;
    let task = match view.admin().show(&id).await {
        Ok(Some(task)) if visible(viewer, &task) => task,
        Ok(_) => return error(view, StatusCode::NOT_FOUND, "No such task."),
        Err(e) => return store_error(view, &e),
    };
    let history = match view.admin().history(&id).await {
        Ok(history) => history,
        Err(e) => return store_error(view, &e),
    };
    let _ = request;
    let waiting_since = (task.status == TaskStatus::InputRequired)
        .then(|| {
            history
                .entries
                .iter()
                .rev()
                .find(|e| matches!(e.event, HistoryEvent::InputRequested { .. }))
                .map(|e| show_time(e.at_ms))
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

fn task_view(view: &WebView, task: &TaskRecord, waiting_since: Option<String>) -> TaskView {
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
        created: show_time(task.created_at_ms),
        updated: show_time(task.updated_at_ms),
        ttl,
        poll: task.poll_interval_ms.map_or_else(|| "–".to_owned(), |ms| format!("{ms} ms")),
        attempt: task.attempt,
        resumable: task.resume.is_some(),
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
    Moment { at: show_time(entry.at_ms), event: event.to_owned(), detail }
}

/// What `POST /actions` does to the tasks it names.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Act {
    Cancel,
    Purge,
}

impl Act {
    fn verb(self) -> &'static str {
        match self {
            Self::Cancel => "cancel",
            Self::Purge => "purge",
        }
    }

    /// The statuses this action changes: a cancel ends live tasks, a purge deletes finished ones.
    fn statuses(self) -> Vec<TaskStatus> {
        match self {
            Self::Cancel => vec![TaskStatus::Working, TaskStatus::InputRequired],
            Self::Purge => vec![TaskStatus::Completed, TaskStatus::Failed, TaskStatus::Cancelled],
        }
    }
}

/// `POST /actions`: cancel or purge tasks by id, or every task matching a filter (its count
/// shown first, then confirmed, at most the view's bulk limit); or purge finished tasks by age.
pub(crate) async fn act(view: &WebView, request: &Request<Bytes>, viewer: &Viewer) -> Response<Bytes> {
    let form = Params::parse(request.body());
    let admin = view.admin();
    let back = form.get("back").filter(|b| b.starts_with('/') && !b.starts_with("//")).unwrap_or("/").to_owned();
    let act = match form.get("action") {
        Some("cancel") => Act::Cancel,
        Some("purge") if form.get("older_than").is_some() => return purge_by_age(view, admin, &form, viewer).await,
        Some("purge") => Act::Purge,
        _ => return error(view, StatusCode::BAD_REQUEST, "Unknown action: the form names cancel or purge."),
    };
    let limit = view.options().bulk_limit;
    let ids: Vec<String> = if form.get("matching").is_some() {
        let filters = Filters::from_params(&form);
        let mut query = filters.query(viewer.principals.clone(), now_ms());
        // Only tasks this action changes.
        let changed = act.statuses();
        query.statuses.retain(|s| changed.contains(s));
        if query.statuses.is_empty() {
            query.statuses = changed;
        }
        query.after = None;
        let matching = match collect(admin, query, limit + 1).await {
            Ok(ids) => ids,
            Err(e) => return store_error(view, &e),
        };
        if form.get("confirm").is_none() {
            let pairs = strip(&form, &["confirm"]);
            return render(
                StatusCode::OK,
                &ConfirmPage {
                    frame: Frame::new(view, "Confirm", Some(viewer)),
                    action: act.verb(),
                    count: matching.len().min(limit),
                    capped: matching.len() > limit,
                    limit,
                    filter_query: filters.to_query(),
                    pairs,
                },
            );
        }
        matching.into_iter().take(limit).collect()
    } else {
        form.all("id").map(str::to_owned).collect()
    };
    if ids.is_empty() {
        return error(view, StatusCode::BAD_REQUEST, "No task was selected.");
    }
    if ids.len() > limit {
        let message = format!("At most {limit} tasks at once: {} were selected.", ids.len());
        return error(view, StatusCode::BAD_REQUEST, &message);
    }
    // A token limited to principals acts on its principals' tasks only; the others are unknown to it.
    let mut lines = Vec::new();
    let mut allowed = Vec::with_capacity(ids.len());
    for id in &ids {
        match admin.show(id).await {
            Ok(Some(task)) if visible(viewer, &task) => allowed.push(task),
            Ok(_) => lines.push(format!("{id}: no such task")),
            Err(e) => return store_error(view, &e),
        }
    }
    match act {
        Act::Cancel => cancel_each(admin, viewer, &allowed, &mut lines).await,
        Act::Purge => {
            if let Err(e) = purge_each(admin, &allowed, &mut lines).await {
                return store_error(view, &e);
            }
        }
    }
    if ids.len() == 1 && form.get("matching").is_none() && lines.iter().all(|l| !l.contains("no such task")) {
        // One task from its page: back to where the operator was (the list after a purge).
        let back = if act == Act::Purge && back.starts_with("/tasks/") { "/".to_owned() } else { back };
        return redirect(view, &back, None);
    }
    render(StatusCode::OK, &DonePage { frame: Frame::new(view, "Done", Some(viewer)), lines, back: view.href(&back) })
}

async fn cancel_each(admin: &mcp_tasks::admin::Admin, viewer: &Viewer, tasks: &[TaskRecord], lines: &mut Vec<String>) {
    let operator = viewer.name.clone().unwrap_or_default();
    for task in tasks {
        let id = &task.id;
        lines.push(match admin.cancel_as(id, &operator).await {
            Ok(Applied::Done(AdminOutcome::Cancelled)) => format!("{id}: cancelled"),
            Ok(Applied::Done(AdminOutcome::AlreadyTerminal { status })) => {
                format!("{id}: already {}; unchanged", status.as_str())
            }
            Ok(Applied::Done(AdminOutcome::NotFound)) => format!("{id}: no such task"),
            Ok(Applied::Done(other)) => format!("{id}: {other:?}"),
            Ok(Applied::Queued { .. }) => format!("{id}: queued for the host that owns the store"),
            Err(e) => format!("{id}: {e}"),
        });
    }
}

/// Deletes the finished ones of `tasks` in one request to the store (a live one is left alone,
/// and said so).
async fn purge_each(
    admin: &mcp_tasks::admin::Admin,
    tasks: &[TaskRecord],
    lines: &mut Vec<String>,
) -> Result<(), AdminError> {
    let (finished, live): (Vec<&TaskRecord>, Vec<&TaskRecord>) = tasks.iter().partition(|t| t.status.is_terminal());
    for task in live {
        lines.push(format!("{}: still {}; a purge leaves unfinished tasks alone", task.id, task.status.as_str()));
    }
    if finished.is_empty() {
        return Ok(());
    }
    let ids: Vec<String> = finished.iter().map(|t| t.id.clone()).collect();
    lines.push(match admin.purge_tasks(&ids).await? {
        Applied::Done(AdminOutcome::Purged { count }) => {
            format!("purged {count} finished task{}", if count == 1 { "" } else { "s" })
        }
        Applied::Done(other) => format!("{other:?}"),
        Applied::Queued { .. } => "queued for the host that owns the store".to_owned(),
    });
    Ok(())
}

/// Ids of the tasks `query` selects, page by page, at most `most`.
async fn collect(
    admin: &mcp_tasks::admin::Admin,
    mut query: TaskQuery,
    most: usize,
) -> Result<Vec<String>, AdminError> {
    let mut ids = Vec::new();
    query.limit = mcp_tasks::admin::query::MAX_PAGE;
    loop {
        let page = admin.page(&query).await?;
        ids.extend(page.tasks.into_iter().map(|t| t.id));
        match page.next {
            Some(next) if ids.len() < most => query.after = Some(next),
            _ => break,
        }
    }
    ids.truncate(most);
    Ok(ids)
}

/// The form's pairs without `names`, to carry into a confirmation.
fn strip(form: &Params, names: &[&str]) -> Vec<(String, String)> {
    let mut pairs = Vec::new();
    for name in [
        "action",
        "matching",
        "back",
        "status",
        "tool",
        "principal",
        "q",
        "id",
        "created_from",
        "created_until",
        "updated_from",
        "updated_until",
        "expiring",
    ] {
        if names.contains(&name) {
            continue;
        }
        for value in form.all(name) {
            pairs.push((name.to_owned(), value.to_owned()));
        }
    }
    pairs
}

/// `action=purge&older_than=`: terminal tasks last changed more than `older_than` (30s, 15m, 2h,
/// 7d) ago, as the CLI's purge.
async fn purge_by_age(
    view: &WebView,
    admin: &mcp_tasks::admin::Admin,
    form: &Params,
    viewer: &Viewer,
) -> Response<Bytes> {
    if viewer.principals.is_some() {
        return error(view, StatusCode::FORBIDDEN, "A token limited to principals cannot purge the whole store.");
    }
    let Some(age) = form.get("older_than").and_then(parse_age) else {
        return error(view, StatusCode::BAD_REQUEST, "Purge needs an age: 30s, 15m, 2h or 7d.");
    };
    let before = now_ms().saturating_sub(age);
    let line = match admin.purge(before).await {
        Ok(Applied::Done(AdminOutcome::Purged { count })) => format!("purged {count} terminal tasks"),
        Ok(Applied::Done(other)) => format!("{other:?}"),
        Ok(Applied::Queued { .. }) => "queued for the host that owns the store".to_owned(),
        Err(e) => return store_error(view, &e),
    };
    render(
        StatusCode::OK,
        &DonePage { frame: Frame::new(view, "Done", Some(viewer)), lines: vec![line], back: view.href("/") },
    )
}

/// `30s`, `15m`, `2h`, `7d` in ms.
fn parse_age(text: &str) -> Option<u64> {
    let text = text.trim();
    let split = text.find(|c: char| !c.is_ascii_digit()).unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let number: u64 = number.parse().ok()?;
    let unit = match unit {
        "" | "s" => 1_000,
        "m" => 60_000,
        "h" => 3_600_000,
        "d" => 86_400_000,
        _ => return None,
    };
    number.checked_mul(unit)
}
