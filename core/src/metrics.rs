//! An engine's metrics in the Prometheus exposition format (OpenMetrics text, from the official
//! `prometheus-client` crate), and the fields its `tracing` events carry. Every binding exposes
//! the same text: the Rust host on an opt-in route, `TasksExtension.metrics()` in Python and
//! `TasksServer.metrics()` in Node.
//!
//! | metric | type | labels | what |
//! |---|---|---|---|
//! | `mcp_tasks_tasks_created_total` | counter | `tool` | tasks this engine created |
//! | `mcp_tasks_tasks_finished_total` | counter | `tool`, `outcome` | tasks this engine's writes ended: `completed`, `failed`, `cancelled`, `expired`, `abandoned` (their process or worker died), `exhausted` (a resumable task's worker died during its last allowed attempt) |
//! | `mcp_tasks_task_attempts_total` | counter | `tool` | attempts this engine claimed: resumable tasks run again (attempt 2 or more) and tasks enqueued for a worker |
//! | `mcp_tasks_tasks_in_flight` | gauge | | tasks this process runs (`working` or `input_required`) |
//! | `mcp_tasks_listen_streams` | gauge | | `subscriptions/listen` streams this engine serves (a subscription each, let go when its stream ends or its client goes away) |
//! | `mcp_tasks_task_duration_seconds` | histogram | `tool` | from creation to the end, for the tasks counted as finished |
//! | `mcp_tasks_store_write_seconds` | histogram | `op` (`insert`, `update`) | how long the store took to accept a write (with the default redo log: until it is in the log) |
//!
//! Counts are per engine (per process): a task ended by another worker of a PostgreSQL store is
//! counted by that worker, so summing over workers counts each task once.

use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;
use sha2::Digest as _;

use crate::protocol::{TaskRecord, TaskStatus};

/// The content type of [`Engine::metrics_text`](crate::Engine::metrics_text)'s text, for an HTTP answer.
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ToolLabels {
    tool: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct FinishedLabels {
    tool: String,
    outcome: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct OpLabels {
    op: String,
}

type Histograms<L> = Family<L, Histogram, fn() -> Histogram>;

/// The metrics of one engine.
pub(crate) struct Metrics {
    registry: Registry,
    created: Family<ToolLabels, Counter>,
    finished: Family<FinishedLabels, Counter>,
    attempts: Family<ToolLabels, Counter>,
    in_flight: Gauge,
    listen_streams: Gauge,
    duration: Histograms<ToolLabels>,
    /// The two series of `mcp_tasks_store_write_seconds`, taken once: every store write
    /// observes one, so it neither allocates a label nor looks the series up.
    insert_write: Histogram,
    update_write: Histogram,
}

fn duration_buckets() -> Histogram {
    // 10 ms to about 3 h.
    Histogram::new(exponential_buckets(0.01, 4.0, 11))
}

fn write_buckets() -> Histogram {
    // 50 µs to about 1.6 s.
    Histogram::new(exponential_buckets(0.000_05, 2.0, 16))
}

impl Default for Metrics {
    fn default() -> Self {
        let mut registry = Registry::default();
        let created = Family::<ToolLabels, Counter>::default();
        let finished = Family::<FinishedLabels, Counter>::default();
        let attempts = Family::<ToolLabels, Counter>::default();
        let in_flight = Gauge::default();
        let listen_streams = Gauge::default();
        let duration: Histograms<ToolLabels> = Family::new_with_constructor(duration_buckets);
        let store_write: Histograms<OpLabels> = Family::new_with_constructor(write_buckets);
        registry.register("mcp_tasks_tasks_created", "Tasks this engine created", created.clone());
        registry.register(
            "mcp_tasks_tasks_finished",
            "Tasks this engine's writes ended, by outcome: completed, failed, cancelled, expired, abandoned, exhausted",
            finished.clone(),
        );
        registry.register(
            "mcp_tasks_task_attempts",
            "Attempts this engine claimed: resumable tasks run again, and tasks enqueued for a worker",
            attempts.clone(),
        );
        registry.register(
            "mcp_tasks_tasks_in_flight",
            "Tasks this process runs (working or input_required)",
            in_flight.clone(),
        );
        registry.register(
            "mcp_tasks_listen_streams",
            "subscriptions/listen streams this engine serves",
            listen_streams.clone(),
        );
        registry.register(
            "mcp_tasks_task_duration_seconds",
            "From creation to the end, for the tasks counted as finished",
            duration.clone(),
        );
        registry.register(
            "mcp_tasks_store_write_seconds",
            "How long the store took to accept a write",
            store_write.clone(),
        );
        let series = |op: &str| store_write.get_or_create(&OpLabels { op: op.to_owned() }).clone();
        let (insert_write, update_write) = (series("insert"), series("update"));
        Self { registry, created, finished, attempts, in_flight, listen_streams, duration, insert_write, update_write }
    }
}

/// What a terminal record's end is called in metrics and traces.
pub(crate) fn outcome(task: &TaskRecord) -> &'static str {
    match task.status {
        TaskStatus::Completed => "completed",
        TaskStatus::Cancelled => "cancelled",
        TaskStatus::Failed => {
            let reason = task.error.as_ref().and_then(|e| e.data.as_ref()).and_then(|d| d.get("reason"));
            match reason.and_then(|r| r.as_str()) {
                Some("expired") => "expired",
                Some("server_restarted") => "abandoned",
                Some(crate::protocol::task::ATTEMPTS_EXHAUSTED) => "exhausted",
                _ => "failed",
            }
        }
        TaskStatus::Working | TaskStatus::InputRequired => "running",
    }
}

/// The `tracing` target of the engine's `task created` and `task finished` events.
pub const TASK_LOG_TARGET: &str = "mcp_tasks::task";

/// A principal as traces name it: the first 8 bytes of its SHA-256 in hex, so a trace ties a
/// task to its caller without writing the caller's identity (a token hash, an email) to logs.
pub fn principal_hash(principal: &str) -> String {
    hex::encode(&sha2::Sha256::digest(principal.as_bytes())[..8])
}

impl Metrics {
    pub(crate) fn created(&self, task: &TaskRecord) {
        self.created.get_or_create(&ToolLabels { tool: task.tool.clone() }).inc();
        tracing::info!(
            target: TASK_LOG_TARGET,
            task_id = %task.id,
            tool = %task.tool,
            principal = %principal_hash(&task.principal),
            "task created"
        );
    }

    /// This engine claimed `task`, starting its attempt `task.attempt`.
    pub(crate) fn claimed(&self, task: &TaskRecord) {
        self.attempts.get_or_create(&ToolLabels { tool: task.tool.clone() }).inc();
    }

    /// A write of this engine made `task` terminal.
    pub(crate) fn finished(&self, task: &TaskRecord) {
        let outcome = outcome(task);
        let tool = task.tool.clone();
        let seconds = task.updated_at_ms.saturating_sub(task.created_at_ms) as f64 / 1000.0;
        self.finished.get_or_create(&FinishedLabels { tool: tool.clone(), outcome: outcome.to_owned() }).inc();
        self.duration.get_or_create(&ToolLabels { tool }).observe(seconds);
        tracing::info!(
            target: TASK_LOG_TARGET,
            task_id = %task.id,
            tool = %task.tool,
            principal = %principal_hash(&task.principal),
            outcome,
            duration_ms = task.updated_at_ms.saturating_sub(task.created_at_ms),
            "task finished"
        );
    }

    /// A store insert (`insert`) or update (not `insert`) took `took`.
    pub(crate) fn store_write(&self, insert: bool, took: Duration) {
        let series = if insert { &self.insert_write } else { &self.update_write };
        series.observe(took.as_secs_f64());
    }

    /// The exposition text, with the gauges set to `in_flight` tasks and `listen_streams`.
    pub(crate) fn render(&self, in_flight: usize, listen_streams: usize) -> String {
        self.in_flight.set(i64::try_from(in_flight).unwrap_or(i64::MAX));
        self.listen_streams.set(i64::try_from(listen_streams).unwrap_or(i64::MAX));
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &self.registry).expect("writing to a String cannot fail");
        text
    }
}
