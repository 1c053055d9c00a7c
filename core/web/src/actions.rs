//! Carrying out what `POST /actions` asks: cancel or purge tasks by id, or every task matching a
//! filter (counted first, then confirmed, at most the view's bulk limit), or purge finished
//! tasks by age. Many tasks are one request to the store ([`Admin::cancel_tasks`],
//! [`Admin::purge_each`]): a live SQLite host applies it at once, together; elsewhere the view
//! applies it itself. What became of each task comes back typed ([`TaskOutcome`]), and the
//! caller renders it.

use mcp_tasks::admin::query::{MAX_PAGE, TaskQuery};
use mcp_tasks::admin::{Admin, AdminError, Applied};
use mcp_tasks::protocol::{TaskRecord, TaskStatus};
use mcp_tasks::store::{AdminOutcome, TaskOutcome, TaskResult};

use crate::auth::{Viewer, back_of};
use crate::params::{Filters, Params};

/// What `POST /actions` does to the tasks it names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Act {
    Cancel,
    Purge,
}

impl Act {
    pub(crate) fn verb(self) -> &'static str {
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

/// What asking for the count of "everything matching" found, for the confirmation page.
pub(crate) struct Confirm {
    pub(crate) act: Act,
    pub(crate) count: usize,
    pub(crate) capped: bool,
    pub(crate) limit: usize,
    pub(crate) filter_query: String,
    /// The form's pairs, carried into the confirmation.
    pub(crate) pairs: Vec<(String, String)>,
}

/// How an action ended.
pub(crate) enum Outcome {
    /// "Everything matching" was counted: confirm first.
    Confirm(Confirm),
    /// One task, changed as asked, from its own page or the list: back to `back`.
    Back(String),
    /// What became of each task (and `back`, where the page links to).
    Each { act: Act, tasks: Vec<TaskResult>, back: String },
    /// A purge by age: how many went.
    PurgedByAge { count: usize },
    /// The request was queued for the host that owns the store, which had not applied it
    /// within the wait; it will at its next sweep.
    Queued { seq: u64, back: String },
    /// The request was refused: why (the form was wrong, or the token may not do it).
    Refused { forbidden: bool, message: String },
    /// The store failed.
    Store(AdminError),
}

fn refused(message: impl Into<String>) -> Outcome {
    Outcome::Refused { forbidden: false, message: message.into() }
}

fn now_ms() -> u64 {
    mcp_tasks::clock::Clock::now_ms(&mcp_tasks::clock::SystemClock)
}

/// Carries out the form `form` for `viewer`, with at most `limit` tasks at once.
pub(crate) async fn act(admin: &Admin, form: &Params, viewer: &Viewer, limit: usize) -> Outcome {
    let back = back_of(form);
    let act = match form.get("action") {
        Some("cancel") => Act::Cancel,
        Some("purge") if form.get("older_than").is_some() => return purge_by_age(admin, form, viewer).await,
        Some("purge") => Act::Purge,
        _ => return refused("Unknown action: the form names cancel or purge."),
    };
    let matching = form.get("matching").is_some();
    let ids: Vec<String> = if matching {
        let filters = Filters::from_params(form);
        let mut query = filters.query(viewer.principals.clone(), now_ms());
        // Only tasks this action changes.
        let changed = act.statuses();
        query.statuses.retain(|s| changed.contains(s));
        if query.statuses.is_empty() {
            query.statuses = changed;
        }
        query.after = None;
        let found = match collect(admin, query, limit + 1).await {
            Ok(ids) => ids,
            Err(e) => return Outcome::Store(e),
        };
        if form.get("confirm").is_none() {
            return Outcome::Confirm(Confirm {
                act,
                count: found.len().min(limit),
                capped: found.len() > limit,
                limit,
                filter_query: filters.to_query(),
                pairs: carried(form),
            });
        }
        found.into_iter().take(limit).collect()
    } else {
        let mut ids: Vec<String> = Vec::new();
        for id in form.all("id") {
            if !ids.iter().any(|seen| seen == id) {
                ids.push(id.to_owned());
            }
        }
        ids
    };
    if ids.is_empty() {
        return refused("No task was selected.");
    }
    if ids.len() > limit {
        return refused(format!("At most {limit} tasks at once: {} were selected.", ids.len()));
    }
    // A token limited to principals acts on its principals' tasks only; the others are unknown
    // to it (as on every page), and so reported.
    let stored = match admin.show_many(&ids).await {
        Ok(tasks) => tasks,
        Err(e) => return Outcome::Store(e),
    };
    let visible: std::collections::HashSet<String> =
        stored.into_iter().filter(|t| visible(viewer, t)).map(|t| t.id).collect();
    let allowed: Vec<String> = ids.iter().filter(|id| visible.contains(*id)).cloned().collect();
    let operator = viewer.name.clone().unwrap_or_default();
    let applied = if allowed.is_empty() {
        Ok(Applied::Done(AdminOutcome::Each { tasks: Vec::new() }))
    } else {
        match act {
            Act::Cancel => admin.cancel_tasks(&allowed, &operator).await,
            Act::Purge => admin.purge_each(&allowed).await,
        }
    };
    let mut done: std::collections::HashMap<String, TaskOutcome> = match applied {
        Ok(Applied::Done(AdminOutcome::Each { tasks })) => tasks.into_iter().map(|t| (t.task_id, t.outcome)).collect(),
        Ok(Applied::Done(AdminOutcome::Failed { message })) => {
            allowed.iter().map(|id| (id.clone(), TaskOutcome::Failed { message: message.clone() })).collect()
        }
        Ok(Applied::Done(other)) => {
            let message = format!("unexpected outcome {other:?}");
            allowed.iter().map(|id| (id.clone(), TaskOutcome::Failed { message: message.clone() })).collect()
        }
        Ok(Applied::Queued { seq, .. }) => return Outcome::Queued { seq, back },
        Err(e) => return Outcome::Store(e),
    };
    let tasks: Vec<TaskResult> = ids
        .iter()
        .map(|id| TaskResult { task_id: id.clone(), outcome: done.remove(id).unwrap_or(TaskOutcome::NotFound) })
        .collect();
    if let [one] = tasks.as_slice()
        && !matching
        && one.outcome.changed()
    {
        // One task, from its page or the list: back to where the operator was (the list after
        // a purge of the task whose page it was).
        let back = if act == Act::Purge && back.starts_with("/tasks/") { "/".to_owned() } else { back };
        return Outcome::Back(back);
    }
    Outcome::Each { act, tasks, back }
}

/// True when `viewer` may see `task` (a token limited to principals sees only theirs).
pub(crate) fn visible(viewer: &Viewer, task: &TaskRecord) -> bool {
    viewer.principals.as_ref().is_none_or(|principals| principals.contains(&task.principal))
}

/// Ids of the tasks `query` selects, page by page, at most `most`.
async fn collect(admin: &Admin, mut query: TaskQuery, most: usize) -> Result<Vec<String>, AdminError> {
    let mut ids = Vec::new();
    query.limit = MAX_PAGE;
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

/// The form's pairs a confirmation carries (all but `confirm`).
fn carried(form: &Params) -> Vec<(String, String)> {
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
        for value in form.all(name) {
            pairs.push((name.to_owned(), value.to_owned()));
        }
    }
    pairs
}

/// `action=purge&older_than=`: terminal tasks last changed more than `older_than` (30s, 15m, 2h,
/// 7d) ago, as the CLI's purge.
async fn purge_by_age(admin: &Admin, form: &Params, viewer: &Viewer) -> Outcome {
    if viewer.principals.is_some() {
        return Outcome::Refused {
            forbidden: true,
            message: "A token limited to principals cannot purge the whole store.".into(),
        };
    }
    let Some(age) = form.get("older_than").and_then(parse_age) else {
        return refused("Purge needs an age: 30s, 15m, 2h or 7d.");
    };
    let before = now_ms().saturating_sub(age);
    match admin.purge(before).await {
        Ok(Applied::Done(AdminOutcome::Purged { count })) => Outcome::PurgedByAge { count },
        Ok(Applied::Done(AdminOutcome::Failed { message })) => refused(format!("The purge failed: {message}")),
        Ok(Applied::Done(other)) => refused(format!("The purge ended unexpectedly: {other:?}")),
        Ok(Applied::Queued { seq, .. }) => Outcome::Queued { seq, back: "/".into() },
        Err(e) => Outcome::Store(e),
    }
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

/// Writes what an operator's action did to the log (target `mcp_tasks_web::audit`): who, what,
/// how many tasks it changed of how many named. The tasks' histories name the operator too.
pub(crate) fn audit(viewer: &Viewer, outcome: &Outcome) {
    let operator = viewer.name.as_deref().unwrap_or_default();
    match outcome {
        Outcome::Each { act, tasks, .. } => {
            let changed = tasks.iter().filter(|t| t.outcome.changed()).count();
            tracing::info!(target: "mcp_tasks_web::audit", operator, action = act.verb(), changed, named = tasks.len(), "operator action");
        }
        Outcome::Back(_) => {
            tracing::info!(target: "mcp_tasks_web::audit", operator, changed = 1, named = 1, "operator action on one task");
        }
        Outcome::PurgedByAge { count } => {
            tracing::info!(target: "mcp_tasks_web::audit", operator, action = "purge by age", changed = count, "operator action");
        }
        Outcome::Queued { seq, .. } => {
            tracing::info!(target: "mcp_tasks_web::audit", operator, seq, "operator action queued for the host");
        }
        Outcome::Refused { message, .. } => {
            tracing::warn!(target: "mcp_tasks_web::audit", operator, %message, "operator action refused");
        }
        Outcome::Store(e) => {
            tracing::error!(target: "mcp_tasks_web::audit", operator, error = %e, "operator action failed in the store")
        }
        Outcome::Confirm(_) => {}
    }
}
