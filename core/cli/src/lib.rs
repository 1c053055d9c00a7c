//! The `mcp-tasks` admin CLI: operating a task store from outside its servers.
//!
//! ```text
//! mcp-tasks --store sqlite:///var/lib/app/tasks.db list --status failed --older-than 1h
//! mcp-tasks --store postgres://app@db/app show TASK_ID
//! mcp-tasks cancel TASK_ID            # the store from $MCP_TASKS_STORE
//! mcp-tasks purge --older-than 7d
//! mcp-tasks tail --json
//! mcp-tasks stats
//! mcp-tasks web --listen 127.0.0.1:8765 --token-file ops.tokens
//! ```
//!
//! Every operation is `mcp_tasks::admin` (safe on a live store: see there); this crate parses
//! arguments and prints. [`run`] is the whole program, so `python -m mcp_tasks` runs the same
//! code through the Python package's native module.
//!
//! Exit status: 0 done; 1 an error (printed to stderr) or no such task; 2 bad usage; 3 a cancel
//! or purge queued for a live host that had not applied it when the wait ended.

#![warn(missing_docs)]

use std::ffi::OsString;
use std::io::Write;
use std::time::Duration;

use clap::{Parser, Subcommand};
use mcp_tasks::admin::{Admin, AdminError, Applied, Change, ListFilter, StatusCount};
use mcp_tasks::clock::{Clock as _, SystemClock};
use mcp_tasks::protocol::server::get_result;
use mcp_tasks::protocol::time::format_ms;
use mcp_tasks::protocol::{HistoryEntry, TaskRecord, TaskStatus};
use mcp_tasks::store::AdminOutcome;
use serde_json::Value;

/// Operate an mcp-tasks store from outside its servers (safe on a live store).
#[derive(Debug, Parser)]
#[command(name = "mcp-tasks", version)]
struct Cli {
    /// The store: sqlite:///path/to/tasks.db or postgres://user@host/db (libpq's sslmode and
    /// sslrootcert apply).
    #[arg(short, long, env = "MCP_TASKS_STORE", global = true)]
    store: Option<String>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// List tasks, newest first.
    List {
        /// Only this status: working, input_required, completed, failed, cancelled.
        #[arg(long)]
        status: Option<String>,
        /// Only this tool.
        #[arg(long)]
        tool: Option<String>,
        /// Only this principal.
        #[arg(long)]
        principal: Option<String>,
        /// Only tasks created longer ago than this (30s, 15m, 2h, 7d).
        #[arg(long, value_parser = parse_age)]
        older_than: Option<Duration>,
        /// Only tasks created more recently than this.
        #[arg(long, value_parser = parse_age)]
        newer_than: Option<Duration>,
        /// At most this many.
        #[arg(long, default_value_t = 100)]
        limit: usize,
        /// Every matching task (no limit).
        #[arg(long, conflicts_with = "limit")]
        all: bool,
        /// One JSON object per line instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Show one task as `tasks/get` answers it (with its tool and principal), and its history.
    Show {
        /// The task id.
        id: String,
    },
    /// Cancel a task as `tasks/cancel` would; a terminal task stays as it is.
    Cancel {
        /// The task id.
        id: String,
        /// Who is cancelling, as the task's history records it (default: $USER).
        #[arg(long, env = "MCP_TASKS_OPERATOR")]
        operator: Option<String>,
        /// How long to wait for a live host to apply it (SQLite), in seconds.
        #[arg(long, default_value_t = 10.0)]
        wait: f64,
    },
    /// Delete terminal tasks whose TTL ended or that last changed longer ago than an age, or the
    /// named ones (finished ones only: a live task is left alone).
    Purge {
        /// Terminal tasks last changed longer ago than this go (30s, 15m, 2h, 7d).
        #[arg(long, value_parser = parse_age, required_unless_present = "ids", conflicts_with = "ids")]
        older_than: Option<Duration>,
        /// These tasks go, when finished.
        #[arg(value_name = "ID")]
        ids: Vec<String>,
        /// How long to wait for a live host to apply it (SQLite), in seconds.
        #[arg(long, default_value_t = 10.0)]
        wait: f64,
    },
    /// Print tasks as they are created and change, until interrupted.
    Tail {
        /// One JSON object per line instead of a table.
        #[arg(long)]
        json: bool,
        /// How often SQLite is looked at, in milliseconds (PostgreSQL pushes changes).
        #[arg(long, default_value_t = 250)]
        interval_ms: u64,
    },
    /// Serve the operator's web view of the store (loopback only, unless given a token file).
    Web(WebFlags),
    /// Count tasks by status and tool.
    Stats {
        /// JSON instead of a table.
        #[arg(long)]
        json: bool,
    },
}

/// Parses `30s`, `15m`, `2h`, `7d` (or a bare number of seconds).
fn parse_age(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    let split = text.find(|c: char| !c.is_ascii_digit()).unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let number: u64 = number.parse().map_err(|_| format!("{text:?} is not an age like 30s, 15m, 2h or 7d"))?;
    let seconds = match unit {
        "" | "s" => 1,
        "m" => 60,
        "h" => 3_600,
        "d" => 86_400,
        _ => return Err(format!("{text:?}: the unit is one of s, m, h, d")),
    };
    Ok(Duration::from_secs(number.saturating_mul(seconds)))
}

fn parse_status(text: &str) -> Result<TaskStatus, AdminError> {
    serde_json::from_value(Value::String(text.to_owned())).map_err(|_| {
        AdminError::InvalidArgument(format!(
            "status {text:?} is not one of working, input_required, completed, failed, cancelled"
        ))
    })
}

/// Runs the CLI with `args` (the program name first) and returns the exit status. Output goes
/// to this process's stdout and stderr.
pub fn run<I, T>(args: I) -> i32
where
    I: IntoIterator<Item = T>,
    T: Into<OsString> + Clone,
{
    let cli = match Cli::try_parse_from(args) {
        Ok(cli) => cli,
        Err(e) => {
            let _ = e.print();
            return if e.use_stderr() { 2 } else { 0 };
        }
    };
    let runtime = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("mcp-tasks: error: cannot start a runtime: {e}");
            return 1;
        }
    };
    // With the `otel` feature and an OTLP endpoint in the environment, the command's span
    // (an operator's cancel linked to the task's trace) is exported; flushed when this returns.
    #[cfg(feature = "otel")]
    let _otel = otel::install();
    let span = command_span(&cli.command);
    let mut out = std::io::stdout().lock();
    match runtime.block_on(tracing::Instrument::instrument(execute(cli, &mut out), span)) {
        Ok(code) => code,
        // A closed pipe (`mcp-tasks list | head`) ends the output, not in an error.
        Err(Failure::Output(e)) if e.kind() == std::io::ErrorKind::BrokenPipe => 0,
        Err(e) => {
            let _ = out.flush();
            eprintln!("mcp-tasks: error: {e}");
            let mut source = std::error::Error::source(&e);
            while let Some(cause) = source {
                eprintln!("  caused by: {cause}");
                source = cause.source();
            }
            // Bad usage is 2, as a parse error is (the module docs' exit statuses).
            if matches!(e, Failure::Usage(_)) { 2 } else { 1 }
        }
    }
}

/// The span of one command: `mcp-tasks cancel`, with the task it names.
fn command_span(command: &Command) -> tracing::Span {
    let (name, task) = match command {
        Command::List { .. } => ("list", None),
        Command::Show { id } => ("show", Some(id.as_str())),
        Command::Cancel { id, .. } => ("cancel", Some(id.as_str())),
        Command::Purge { .. } => ("purge", None),
        Command::Tail { .. } => ("tail", None),
        Command::Web(_) => ("web", None),
        Command::Stats { .. } => ("stats", None),
    };
    tracing::info_span!(
        "mcp_tasks_command",
        otel.name = format!("mcp-tasks {name}"),
        "mcp.task.id" = task,
        otel.status_code = tracing::field::Empty,
    )
}

/// Links the command's span to the trace `task` keeps (an operator's cancel shows in it).
fn link_task(task: &TaskRecord) {
    if let Some(trace) = &task.trace {
        mcp_tasks::trace::link(&tracing::Span::current(), trace);
    }
}

#[cfg(feature = "otel")]
mod otel {
    use tracing_subscriber::prelude::*;

    /// Installs the OTLP export the environment configures, if any, for this command.
    pub(super) fn install() -> Option<(tracing::subscriber::DefaultGuard, mcp_tasks::otel::OtelGuard)> {
        let export = match mcp_tasks::otel::from_env() {
            Ok(export) => export?,
            Err(e) => {
                eprintln!("mcp-tasks: warning: {e}; nothing is exported");
                return None;
            }
        };
        let (layer, guard) = export.into_layer();
        let filter = tracing_subscriber::filter::Targets::new()
            .with_target("mcp_tasks", tracing::Level::INFO)
            .with_target("mcp_tasks_cli", tracing::Level::INFO)
            .with_target("mcp_tasks_web", tracing::Level::INFO);
        let subscriber = tracing_subscriber::registry().with(layer.with_filter(filter));
        Some((tracing::subscriber::set_default(subscriber), guard))
    }
}

/// Why the CLI stopped.
#[derive(Debug, thiserror::Error)]
enum Failure {
    #[error(transparent)]
    Admin(#[from] AdminError),
    #[error("writing the output: {0}")]
    Output(#[from] std::io::Error),
    #[error("{0}")]
    Usage(String),
}
fn now_ms() -> u64 {
    SystemClock.now_ms()
}

fn ms(age: Duration) -> u64 {
    u64::try_from(age.as_millis()).unwrap_or(u64::MAX)
}

fn wait(seconds: f64) -> Result<Duration, Failure> {
    Duration::try_from_secs_f64(seconds)
        .map_err(|_| Failure::Usage(format!("--wait {seconds}: not a number of seconds")))
}

async fn execute(cli: Cli, out: &mut impl Write) -> Result<i32, Failure> {
    let Some(url) = cli.store else {
        return Err(Failure::Usage("no store: pass --store URL or set MCP_TASKS_STORE".into()));
    };
    let admin = Admin::open(&url).await?;
    match cli.command {
        Command::List { status, tool, principal, older_than, newer_than, limit, all, json } => {
            let now = now_ms();
            let filter = ListFilter {
                status: status.as_deref().map(parse_status).transpose()?,
                tool,
                principal,
                created_before_ms: older_than.map(|age| now.saturating_sub(ms(age))),
                created_after_ms: newer_than.map(|age| now.saturating_sub(ms(age))),
                limit: (!all).then_some(limit),
            };
            let tasks = admin.list(&filter).await?;
            if json {
                for task in &tasks {
                    writeln!(out, "{}", line_json(task))?;
                }
            } else {
                print_table(out, &tasks)?;
            }
            Ok(0)
        }
        Command::Show { id } => match admin.show(&id).await? {
            Some(task) => {
                link_task(&task);
                let mut shown = with_owner(get_result(task.to_detailed()), &task);
                let history = admin.history(&id).await?;
                if let Value::Object(map) = &mut shown {
                    map.insert("history".into(), Value::Array(history.entries.iter().map(history_json).collect()));
                    if history.dropped > 0 {
                        map.insert("historyDropped".into(), history.dropped.into());
                    }
                }
                writeln!(out, "{}", serde_json::to_string_pretty(&shown).expect("JSON values serialize"))?;
                Ok(0)
            }
            None => {
                eprintln!("mcp-tasks: no task {id}");
                Ok(1)
            }
        },
        Command::Cancel { id, operator, wait: seconds } => {
            let operator = operator.or_else(|| std::env::var("USER").ok()).unwrap_or_else(|| "operator".into());
            if mcp_tasks::trace::recorded(&tracing::Span::current())
                && let Some(task) = admin.show(&id).await?
            {
                link_task(&task);
            }
            let applied = admin.with_wait(wait(seconds)?).with_operator(operator).cancel(&id).await?;
            report(out, &id, applied)
        }
        Command::Purge { older_than, ids, wait: seconds } => {
            let admin = admin.with_wait(wait(seconds)?);
            let applied = match older_than {
                Some(age) => admin.purge(now_ms().saturating_sub(ms(age))).await?,
                None => admin.purge_tasks(&ids).await?,
            };
            report(out, "", applied)
        }
        Command::Tail { json, interval_ms } => {
            let mut failed = None;
            admin
                .tail(Duration::from_millis(interval_ms.max(10)), |change| {
                    let line = match (&change, json) {
                        (Change::Task(task), true) => line_json(task).to_string(),
                        (Change::Task(task), false) => format!(
                            "{}  {}  {:<14}  {}  {}",
                            format_ms(task.updated_at_ms),
                            task.id,
                            task.status.as_str(),
                            task.tool,
                            task.status_message.as_deref().unwrap_or("")
                        ),
                        (Change::Gone(id), true) => serde_json::json!({ "taskId": id, "purged": true }).to_string(),
                        (Change::Gone(id), false) => format!("{}  {id}  purged", format_ms(now_ms())),
                    };
                    match writeln!(out, "{line}").and_then(|()| out.flush()) {
                        Ok(()) => true,
                        Err(e) => {
                            failed = Some(e);
                            false
                        }
                    }
                })
                .await?;
            match failed {
                Some(e) => Err(e.into()),
                None => Ok(0),
            }
        }
        Command::Web(flags) => web(admin, flags, out).await,
        Command::Stats { json } => {
            let counts = admin.stats().await?;
            if json {
                writeln!(out, "{}", serde_json::to_string(&counts).expect("counts serialize"))?;
            } else {
                print_stats(out, &counts)?;
            }
            Ok(0)
        }
    }
}

/// What `mcp-tasks web` was asked for.
#[derive(Debug, clap::Args)]
pub struct WebFlags {
    /// Where to listen. A non-loopback address needs --token-file.
    #[arg(long, default_value = "127.0.0.1:8765")]
    listen: std::net::SocketAddr,
    /// Tokens that may read (off loopback) and act, one per line: NAME:SECRET or
    /// NAME:SECRET:PRINCIPAL,PRINCIPAL.
    #[arg(long)]
    token_file: Option<std::path::PathBuf>,
    /// Hide and refuse every action.
    #[arg(long)]
    read_only: bool,
    /// The path to serve under, such as /tasks.
    #[arg(long, default_value = "")]
    prefix: String,
    /// Show results and error data on a task's page (hidden by default).
    #[arg(long)]
    show_payloads: bool,
    /// A host name the browser uses to reach the view through a proxy (`tasks.example.com`,
    /// `name:port`, or `.example.com` for a domain): answered besides this machine's own
    /// names, which are the only ones answered otherwise. Repeat for several.
    #[arg(long = "allowed-host", value_name = "HOST")]
    allowed_hosts: Vec<String>,
    /// The header a trusted proxy in front of the view sets to the browser's scheme
    /// (`x-forwarded-proto`): the sign-in cookie is `Secure` when it says https.
    #[arg(long, value_name = "HEADER")]
    forwarded_proto_header: Option<String>,
    /// Links a task's trace id to your tracing UI: an http(s) URL with {trace_id}, such as
    /// http://jaeger:16686/trace/{trace_id}.
    #[arg(long, value_name = "URL", env = "MCP_TASKS_TRACE_URL")]
    trace_url: Option<String>,
}

/// `mcp-tasks web`: serves the view until interrupted.
async fn web(admin: Admin, flags: WebFlags, out: &mut impl Write) -> Result<i32, Failure> {
    let WebFlags {
        listen,
        token_file,
        read_only,
        prefix,
        show_payloads,
        allowed_hosts,
        forwarded_proto_header,
        trace_url,
    } = flags;
    let trace_url = trace_url
        .map(|url| mcp_tasks_web::check_trace_url(&url).map_err(|e| Failure::Usage(format!("--trace-url: {e}"))))
        .transpose()?;
    if let Some(bad) = allowed_hosts.iter().find(|h| h.trim().is_empty() || h.contains(['/', ' '])) {
        return Err(Failure::Usage(format!("--allowed-host {bad:?}: a host name such as tasks.example.com")));
    }
    let tokens = match &token_file {
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .map_err(|e| Failure::Usage(format!("--token-file {}: {e}", path.display())))?;
            mcp_tasks_web::parse_tokens(&text)
                .map_err(|e| Failure::Usage(format!("--token-file {}: {e}", path.display())))?
        }
        None => Vec::new(),
    };
    let loopback = listen.ip().is_loopback();
    if !loopback && tokens.is_empty() {
        return Err(Failure::Usage(format!(
            "--listen {listen}: a non-loopback address needs --token-file (anyone who reaches it could read every task)"
        )));
    }
    if !prefix.is_empty() && (!prefix.starts_with('/') || prefix.ends_with('/')) {
        return Err(Failure::Usage(format!("--prefix {prefix:?}: a path such as /tasks, without a trailing slash")));
    }
    let options = mcp_tasks_web::WebOptions {
        prefix: prefix.clone(),
        read_only,
        tokens,
        // Reading is open on loopback (to this machine's host names and the allowed ones only);
        // elsewhere it takes a token too.
        open_reads: loopback,
        allowed_hosts,
        forwarded_proto_header,
        show_payloads,
        trace_url,
        ..mcp_tasks_web::WebOptions::default()
    };
    let listener =
        tokio::net::TcpListener::bind(listen).await.map_err(|e| Failure::Usage(format!("--listen {listen}: {e}")))?;
    let address = listener.local_addr()?;
    writeln!(out, "serving the web view at http://{address}{prefix}/")?;
    out.flush()?;
    let router = mcp_tasks_web::router(mcp_tasks_web::WebView::new(admin, options));
    axum::serve(listener, router)
        .with_graceful_shutdown(async {
            let _ = tokio::signal::ctrl_c().await;
        })
        .await?;
    Ok(0)
}

/// A history entry as `show` prints it: its time as an RFC 3339 `at`, then the event's fields.
fn history_json(entry: &HistoryEntry) -> Value {
    let mut value = serde_json::to_value(&entry.event).expect("history events serialize");
    if let Value::Object(map) = &mut value {
        map.insert("at".into(), Value::String(format_ms(entry.at_ms)));
    }
    value
}

/// A task as one JSON object: what `tasks/get` shows, plus its tool and principal.
fn line_json(task: &TaskRecord) -> Value {
    with_owner(serde_json::to_value(task.to_detailed()).expect("tasks serialize"), task)
}

/// `value` (a task's JSON object) with the task's tool and principal added.
fn with_owner(mut value: Value, task: &TaskRecord) -> Value {
    if let Value::Object(map) = &mut value {
        map.insert("tool".into(), Value::String(task.tool.clone()));
        map.insert("principal".into(), Value::String(task.principal.clone()));
        // The trace the task's runs belong to (SEP-414), for the operator's tracing UI.
        if let Some(trace) = &task.trace {
            map.insert("traceparent".into(), Value::String(trace.traceparent.clone()));
        }
    }
    value
}

fn report(out: &mut impl Write, id: &str, applied: Applied) -> Result<i32, Failure> {
    match applied {
        Applied::Done(AdminOutcome::Cancelled) => writeln!(out, "cancelled {id}")?,
        Applied::Done(AdminOutcome::AlreadyTerminal { status }) => {
            writeln!(out, "{id} is already {}; unchanged", status.as_str())?;
        }
        Applied::Done(AdminOutcome::NotFound) => {
            eprintln!("mcp-tasks: no task {id}");
            return Ok(1);
        }
        Applied::Done(AdminOutcome::Purged { count }) => writeln!(out, "purged {count} tasks")?,
        Applied::Done(AdminOutcome::Failed { message }) => {
            eprintln!("mcp-tasks: error: {message}");
            return Ok(1);
        }
        Applied::Done(other) => {
            eprintln!("mcp-tasks: error: unexpected outcome {other:?}");
            return Ok(1);
        }
        Applied::Queued { seq, pid } => {
            let host = pid.map_or_else(|| "the host process".to_owned(), |pid| format!("process {pid}"));
            writeln!(out, "queued as request {seq} for {host}, which owns the store; it applies it at its next sweep")?;
            return Ok(3);
        }
    }
    Ok(0)
}

fn print_table(out: &mut impl Write, tasks: &[TaskRecord]) -> std::io::Result<()> {
    let rows: Vec<[String; 7]> = tasks
        .iter()
        .map(|t| {
            let message: String = t.status_message.as_deref().unwrap_or("").chars().take(60).collect();
            [
                t.id.clone(),
                t.status.as_str().to_owned(),
                t.tool.clone(),
                t.principal.chars().take(24).collect(),
                format_ms(t.created_at_ms),
                format_ms(t.updated_at_ms),
                message,
            ]
        })
        .collect();
    let header = ["ID", "STATUS", "TOOL", "PRINCIPAL", "CREATED", "UPDATED", "MESSAGE"].map(str::to_owned);
    let mut widths = header.clone().map(|h| h.chars().count());
    for row in &rows {
        for (width, cell) in widths.iter_mut().zip(row) {
            *width = (*width).max(cell.chars().count());
        }
    }
    for row in std::iter::once(&header).chain(&rows) {
        let cells: Vec<String> = row.iter().zip(widths).map(|(cell, width)| format!("{cell:<width$}")).collect();
        writeln!(out, "{}", cells.join("  ").trim_end())?;
    }
    if rows.is_empty() {
        writeln!(out, "(no tasks)")?;
    }
    Ok(())
}

fn print_stats(out: &mut impl Write, counts: &[StatusCount]) -> std::io::Result<()> {
    let width = counts.iter().map(|c| c.tool.chars().count()).max().unwrap_or(4).max(4);
    writeln!(out, "{:<14}  {:<width$}  {:>9}", "STATUS", "TOOL", "COUNT")?;
    for c in counts {
        writeln!(out, "{:<14}  {:<width$}  {:>9}", c.status, c.tool, c.count)?;
    }
    let total: u64 = counts.iter().map(|c| c.count).sum();
    writeln!(out, "{:<14}  {:<width$}  {:>9}", "total", "", total)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ages_parse_with_their_units_and_refuse_others() {
        assert_eq!(parse_age("30s"), Ok(Duration::from_secs(30)));
        assert_eq!(parse_age("15m"), Ok(Duration::from_secs(900)));
        assert_eq!(parse_age("2h"), Ok(Duration::from_secs(7_200)));
        assert_eq!(parse_age("7d"), Ok(Duration::from_secs(604_800)));
        assert_eq!(parse_age("45"), Ok(Duration::from_secs(45)));
        assert!(parse_age("7w").unwrap_err().contains("unit"));
        assert!(parse_age("soon").unwrap_err().contains("not an age"));
    }
}
