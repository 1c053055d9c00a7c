//! The operator's queries over a store's tasks (the web view's list): filters evaluated in the
//! store, keyset pagination on (last change, id), and the counts a list page shows. One SQL
//! text per query for SQLite and PostgreSQL, differing only in how a record's JSON field and a
//! placeholder are written.

use crate::protocol::{TaskRecord, TaskStatus};

/// Which tasks a page shows, newest change first; every set field must match.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TaskQuery {
    /// Any of these statuses (none: every status).
    pub statuses: Vec<TaskStatus>,
    /// Only this tool.
    pub tool: Option<String>,
    /// Only this principal.
    pub principal: Option<String>,
    /// Only these principals (a token limited to them: every query of that token carries it).
    pub principals: Option<Vec<String>>,
    /// Created at or after (Unix ms).
    pub created_from_ms: Option<u64>,
    /// Created before (Unix ms).
    pub created_until_ms: Option<u64>,
    /// Last changed at or after (Unix ms).
    pub updated_from_ms: Option<u64>,
    /// Last changed before (Unix ms).
    pub updated_until_ms: Option<u64>,
    /// Ids starting with this.
    pub id_prefix: Option<String>,
    /// `statusMessage` containing this, ignoring ASCII case.
    pub text: Option<String>,
    /// Unfinished tasks whose TTL ends before this (Unix ms): "expiring soon".
    pub expiring_before_ms: Option<u64>,
    /// The page after this task (keyset pagination).
    pub after: Option<Cursor>,
    /// The most tasks on the page (at least 1, at most [`MAX_PAGE`]).
    pub limit: usize,
}

/// The most tasks one page holds.
pub const MAX_PAGE: usize = 500;

/// Where a page ends: the last task's change time and id, which the next page starts after.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Cursor {
    /// The task's last change (Unix ms).
    pub updated_ms: u64,
    /// The task's id.
    pub id: String,
}

impl Cursor {
    /// The cursor as a URL's query value: `<ms>.<id>`.
    pub fn encode(&self) -> String {
        format!("{}.{}", self.updated_ms, self.id)
    }

    /// Reads [`Cursor::encode`]'s form; `None` for anything else.
    pub fn decode(text: &str) -> Option<Self> {
        let (ms, id) = text.split_once('.')?;
        Some(Self { updated_ms: ms.parse().ok()?, id: id.to_owned() }).filter(|c| !c.id.is_empty())
    }
}

/// One page of tasks, newest change first, and the cursor of the next (none on the last page).
#[derive(Clone, Debug, Default)]
pub struct TaskPage {
    /// The tasks.
    pub tasks: Vec<TaskRecord>,
    /// Where the next page starts, if there is one.
    pub next: Option<Cursor>,
}

/// What the top of a list page counts, over every task the viewer may see.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Overview {
    /// Tasks per status, in [`TaskStatus`] order, zeros included.
    pub by_status: Vec<(TaskStatus, u64)>,
    /// Unfinished tasks whose TTL ends within the next hour.
    pub expiring_within_hour: u64,
}

/// Tasks created and ended in each minute of the last hour (the web view's chart), oldest minute
/// first: from the tasks' records, where a task's creation time is its history's first entry
/// and a finished task's last change is the entry that ended it. A purged task no longer counts.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Activity {
    /// The first minute's start (Unix ms, a whole minute).
    pub first_minute_ms: u64,
    /// One count per minute, [`ACTIVITY_MINUTES`] of them, the last being the current minute.
    pub minutes: Vec<MinuteCounts>,
}

/// What happened in one minute.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MinuteCounts {
    /// Tasks created.
    pub created: u64,
    /// Tasks that completed.
    pub completed: u64,
    /// Tasks that failed.
    pub failed: u64,
    /// Tasks cancelled.
    pub cancelled: u64,
}

/// How many minutes [`Activity`] covers.
pub const ACTIVITY_MINUTES: usize = 60;

/// Every status, in the order pages show them.
pub const STATUSES: [TaskStatus; 5] =
    [TaskStatus::Working, TaskStatus::InputRequired, TaskStatus::Completed, TaskStatus::Failed, TaskStatus::Cancelled];

/// A value bound to a placeholder.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Value {
    Text(String),
    Int(i64),
}

/// How one SQL dialect writes what the queries need.
#[derive(Clone, Copy)]
pub(crate) struct Dialect {
    /// The tasks table.
    pub table: &'static str,
    /// A text field of the record's JSON.
    pub text_field: fn(&str) -> String,
    /// A number field of the record's JSON.
    pub int_field: fn(&str) -> String,
    /// The last change (Unix ms), written as the store's indexes write it (an expression index
    /// serves only a query that spells the same expression).
    pub updated: &'static str,
    /// The task's tool.
    pub tool: &'static str,
    /// The `n`th placeholder (from 1).
    pub placeholder: fn(usize) -> String,
}

/// SQLite's form.
pub(crate) const SQLITE: Dialect = Dialect {
    table: "tasks",
    text_field: |f| format!("json_extract(CAST(body AS TEXT), '$.{f}')"),
    int_field: |f| format!("json_extract(CAST(body AS TEXT), '$.{f}')"),
    updated: "json_extract(CAST(body AS TEXT), '$.updated_at_ms')",
    tool: "json_extract(CAST(body AS TEXT), '$.tool')",
    placeholder: |n| format!("?{n}"),
};

/// PostgreSQL's form.
#[cfg(feature = "postgres")]
pub(crate) const POSTGRES: Dialect = Dialect {
    table: "mcp_tasks",
    text_field: |f| format!("(convert_from(body, 'UTF8')::jsonb->>'{f}')"),
    int_field: |f| format!("(convert_from(body, 'UTF8')::jsonb->>'{f}')::bigint"),
    updated: "mcp_tasks_updated_ms(body)",
    // A column of its own (migration 6 filled it on rows older than migration 4).
    tool: "tool",
    placeholder: |n| format!("${n}"),
};

fn int(value: u64) -> i64 {
    i64::try_from(value).unwrap_or(i64::MAX)
}

/// A query's text and its values.
pub(crate) struct Sql {
    pub text: String,
    pub values: Vec<Value>,
    dialect: Dialect,
}

impl Sql {
    fn new(dialect: Dialect, text: String) -> Self {
        Self { text, values: Vec::new(), dialect }
    }

    /// Appends `clause`, each `?` in it bound to the next of `values`.
    fn and(&mut self, clause: &str, values: impl IntoIterator<Item = Value>) {
        let mut values = values.into_iter();
        self.text.push_str(" AND ");
        for part in clause.split_inclusive('?') {
            match part.strip_suffix('?') {
                Some(head) => {
                    self.text.push_str(head);
                    self.values.push(values.next().expect("a value for each placeholder"));
                    self.text.push_str(&(self.dialect.placeholder)(self.values.len()));
                }
                None => self.text.push_str(part),
            }
        }
    }
}

/// The page query: the tasks `query` selects, newest change first, one more than the limit
/// (which tells whether a next page exists). Answers `id, body` rows.
pub(crate) fn page(dialect: Dialect, query: &TaskQuery, now_ms: u64) -> Sql {
    let updated = dialect.updated;
    let mut sql = Sql::new(dialect, format!("SELECT id, body FROM {} WHERE 1 = 1", dialect.table));
    filter(&mut sql, query, now_ms);
    if let Some(after) = &query.after {
        let at = int(after.updated_ms);
        // A row value: both stores read it as one range of the (last change, id) index.
        sql.and(&format!("({updated}, id) < (?, ?)"), [Value::Int(at), Value::Text(after.id.clone())]);
    }
    let limit = query.limit.clamp(1, MAX_PAGE) + 1;
    sql.text.push_str(&format!(" ORDER BY {updated} DESC, id DESC LIMIT {limit}"));
    sql
}

/// The counts query: `status, count` rows over what `query`'s principal limits let the viewer
/// see, then one row `expiring, count` of unfinished tasks whose TTL ends within the hour.
pub(crate) fn overview(dialect: Dialect, query: &TaskQuery, now_ms: u64) -> Sql {
    let scope = TaskQuery { principals: query.principals.clone(), ..TaskQuery::default() };
    let mut sql = Sql::new(dialect, format!("SELECT status, count(*) FROM {} WHERE 1 = 1", dialect.table));
    filter(&mut sql, &scope, now_ms);
    sql.text.push_str(" GROUP BY status UNION ALL SELECT 'expiring', count(*) FROM ");
    sql.text.push_str(dialect.table);
    sql.text.push_str(" WHERE 1 = 1");
    let soon = TaskQuery { expiring_before_ms: Some(now_ms.saturating_add(3_600_000)), ..scope };
    filter(&mut sql, &soon, now_ms);
    sql
}

/// The change id query ([`crate::admin::Admin::change_id`]): the newest last change among the
/// tasks of `principals` (all when `None`) and how many tasks share it. Answers one row
/// `(newest or NULL, count)`. Each principal's newest is read on its own (the index's first
/// column), so a limited scope costs a few index seeks like the whole store does.
pub(crate) fn change_id(dialect: Dialect, principals: Option<&[String]>) -> Sql {
    let (table, updated) = (dialect.table, dialect.updated);
    let Some(principals) = principals else {
        return Sql::new(
            dialect,
            format!(
                "SELECT m, (SELECT count(*) FROM {table} WHERE {updated} = m) \
                 FROM (SELECT max({updated}) AS m FROM {table}) AS newest"
            ),
        );
    };
    if principals.is_empty() {
        return Sql::new(dialect, format!("SELECT max({updated}), count(*) FROM {table} WHERE 1 = 0"));
    }
    let mut sql = Sql::new(dialect, String::new());
    let mark = |sql: &mut Sql, principal: &String| {
        sql.values.push(Value::Text(principal.clone()));
        (dialect.placeholder)(sql.values.len())
    };
    let each: Vec<String> = principals
        .iter()
        .map(|p| format!("SELECT max({updated}) AS m1 FROM {table} WHERE principal = {}", mark(&mut sql, p)))
        .collect();
    let within: Vec<String> = principals.iter().map(|p| mark(&mut sql, p)).collect();
    sql.text = format!(
        "SELECT m, (SELECT count(*) FROM {table} WHERE principal IN ({}) AND {updated} = m) \
         FROM (SELECT max(m1) AS m FROM ({}) AS per) AS newest",
        within.join(", "),
        each.join(" UNION ALL "),
    );
    sql
}

/// The activity query ([`Activity`]): rows `(kind, minute, count)`, `kind` a terminal status
/// (counted by the minute of the last change, through the per-status change index) or
/// `created` (by the minute of creation, among the tasks changed since `since_ms`: every task
/// created since then has).
pub(crate) fn activity(dialect: Dialect, principals: Option<&[String]>, since_ms: u64, now_ms: u64) -> Sql {
    let (table, updated) = (dialect.table, dialect.updated);
    let created = (dialect.int_field)("created_at_ms");
    let scope = TaskQuery { principals: principals.map(<[String]>::to_vec), ..TaskQuery::default() };
    let mut sql = Sql::new(
        dialect,
        format!(
            "SELECT status, {updated} / 60000, count(*) FROM {table} \
             WHERE status IN ('completed', 'failed', 'cancelled')"
        ),
    );
    sql.and(&format!("{updated} >= ?"), [Value::Int(int(since_ms))]);
    filter(&mut sql, &scope, now_ms);
    sql.text.push_str(&format!(
        " GROUP BY 1, 2 UNION ALL SELECT 'created', {created} / 60000, count(*) FROM {table} WHERE 1 = 1"
    ));
    sql.and(&format!("{updated} >= ?"), [Value::Int(int(since_ms))]);
    sql.and(&format!("{created} >= ?"), [Value::Int(int(since_ms))]);
    filter(&mut sql, &scope, now_ms);
    sql.text.push_str(" GROUP BY 2");
    sql
}

/// Turns the activity query's rows into the hour's minutes.
pub(crate) fn read_activity(rows: impl IntoIterator<Item = (String, i64, i64)>, now_ms: u64) -> Activity {
    let last = now_ms / 60_000;
    let first = last + 1 - ACTIVITY_MINUTES as u64;
    let mut minutes = vec![MinuteCounts::default(); ACTIVITY_MINUTES];
    for (kind, minute, count) in rows {
        let (Ok(minute), Ok(count)) = (u64::try_from(minute), u64::try_from(count)) else { continue };
        let Some(slot) = minute.checked_sub(first).and_then(|i| minutes.get_mut(usize::try_from(i).ok()?)) else {
            continue;
        };
        match kind.as_str() {
            "created" => slot.created += count,
            "completed" => slot.completed += count,
            "failed" => slot.failed += count,
            "cancelled" => slot.cancelled += count,
            _ => {}
        }
    }
    Activity { first_minute_ms: first * 60_000, minutes }
}

fn filter(sql: &mut Sql, query: &TaskQuery, now_ms: u64) {
    let dialect = sql.dialect;
    if !query.statuses.is_empty() {
        let marks = vec!["?"; query.statuses.len()].join(", ");
        sql.and(&format!("status IN ({marks})"), query.statuses.iter().map(|s| Value::Text(s.as_str().to_owned())));
    }
    if let Some(principal) = &query.principal {
        sql.and("principal = ?", [Value::Text(principal.clone())]);
    }
    if let Some(principals) = &query.principals {
        if principals.is_empty() {
            sql.and("1 = 0", []);
        } else {
            let marks = vec!["?"; principals.len()].join(", ");
            sql.and(&format!("principal IN ({marks})"), principals.iter().cloned().map(Value::Text));
        }
    }
    if let Some(tool) = &query.tool {
        sql.and(&format!("{} = ?", dialect.tool), [Value::Text(tool.clone())]);
    }
    let created = (dialect.int_field)("created_at_ms");
    let updated = dialect.updated;
    for (bound, clause) in [
        (query.created_from_ms, format!("{created} >= ?")),
        (query.created_until_ms, format!("{created} < ?")),
        (query.updated_from_ms, format!("{updated} >= ?")),
        (query.updated_until_ms, format!("{updated} < ?")),
    ] {
        if let Some(ms) = bound {
            sql.and(&clause, [Value::Int(int(ms))]);
        }
    }
    if let Some(prefix) = query.id_prefix.as_deref().filter(|p| !p.is_empty()) {
        // Compared, not LIKE: no character of the prefix is special.
        sql.and("substr(id, 1, length(?)) = ?", [Value::Text(prefix.to_owned()), Value::Text(prefix.to_owned())]);
    }
    if let Some(text) = query.text.as_deref().filter(|t| !t.is_empty()) {
        sql.and(
            &format!("lower({}) LIKE ? ESCAPE '\\'", (dialect.text_field)("status_message")),
            [Value::Text(format!("%{}%", escape_like(&text.to_ascii_lowercase())))],
        );
    }
    if let Some(before) = query.expiring_before_ms {
        sql.and(
            "status IN ('working', 'input_required') AND expires_at IS NOT NULL AND expires_at >= ? AND expires_at < ?",
            [Value::Int(int(now_ms)), Value::Int(int(before))],
        );
    }
}

/// `text` with LIKE's wildcards and the escape character escaped.
fn escape_like(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if matches!(c, '%' | '_' | '\\') {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// Reads the counts query's rows into an [`Overview`].
pub(crate) fn read_overview(rows: impl IntoIterator<Item = (String, i64)>) -> Overview {
    let mut overview = Overview { by_status: STATUSES.iter().map(|s| (*s, 0)).collect(), expiring_within_hour: 0 };
    for (status, count) in rows {
        let count = u64::try_from(count).unwrap_or(0);
        if status == "expiring" {
            overview.expiring_within_hour = count;
        } else if let Some(slot) = overview.by_status.iter_mut().find(|(s, _)| s.as_str() == status) {
            slot.1 = count;
        }
    }
    overview
}

/// Turns the page query's rows (one more than the limit) into a page.
pub(crate) fn read_page(mut tasks: Vec<TaskRecord>, query: &TaskQuery) -> TaskPage {
    let limit = query.limit.clamp(1, MAX_PAGE);
    let next = (tasks.len() > limit).then(|| {
        tasks.truncate(limit);
        let last = tasks.last().expect("a full page");
        Cursor { updated_ms: last.updated_at_ms, id: last.id.clone() }
    });
    TaskPage { tasks, next }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cursors_round_trip_and_refuse_anything_else() {
        let cursor = Cursor { updated_ms: 17, id: "a.b".into() };
        assert_eq!(Cursor::decode(&cursor.encode()), Some(cursor));
        for bad in ["", "17", "x.y", "17.", "-1.a"] {
            assert_eq!(Cursor::decode(bad), None, "{bad}");
        }
    }

    #[test]
    fn filters_bind_every_value_and_escape_like() {
        let query = TaskQuery {
            statuses: vec![TaskStatus::Working, TaskStatus::Failed],
            text: Some("50%_off".into()),
            id_prefix: Some("01".into()),
            after: Some(Cursor { updated_ms: 5, id: "z".into() }),
            limit: 20,
            ..TaskQuery::default()
        };
        let sql = page(SQLITE, &query, 0);
        assert!(sql.text.contains("status IN (?1, ?2)"), "{}", sql.text);
        assert!(sql.text.ends_with("LIMIT 21"), "{}", sql.text);
        assert!(sql.values.contains(&Value::Text("%50\\%\\_off%".into())), "{:?}", sql.values);
        assert_eq!(sql.text.matches('?').count(), sql.values.len());
    }
}
