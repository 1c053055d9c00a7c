//! The task record and its state machine. A task's status changes only through
//! [`TaskRecord::apply`], the one transition function:
//!
//! ```text
//!            ┌──────────── RequestInput ───────────┐
//!            v                                     │
//! working ◄──── ProvideInput (last key) ──── input_required
//!    │                                             │
//!    └── Complete | Fail | Cancel | Expire | Abandon ┴──► completed | failed | cancelled
//! ```
//!
//! Terminal states are absorbing: every event on a terminal task is refused with
//! [`TransitionError::Terminal`] and changes nothing, so a result that arrives after a cancel
//! is discarded and a second cancel is a no-op
//! (<https://modelcontextprotocol.github.io/ext-tasks/specification/2026-07-28/tasks.html>, "Task Cancellation").
//!
//! Who runs a task is part of the record too, and changes through the same function. A task is
//! *assigned* to the worker (`owner`) running its current attempt, or *waiting* for one
//! (`runnable_at_ms` set, no owner): a task created for separate workers waits from the start,
//! and a [resumable](Resume) task whose worker died waits again (`Abandon`) until a worker takes
//! it with `Claim`, which starts the next attempt. Both keep the client-visible status
//! (`working` or `input_required`): to the client the task simply goes on.

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::error::{ErrorKind, RpcError};
use super::history::{Actor, HistoryEntry, HistoryEvent};
use super::negotiation::Envelope;
use super::time::format_ms;
use super::types::{DetailedTask, InputRequests, InputResponses, Task, TaskStatus};

/// Everything the server keeps about one task. Stores persist it whole.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TaskRecord {
    /// The unguessable task id.
    pub id: String,
    /// The caller the task is bound to; other principals see "not found".
    pub principal: String,
    /// The engine instance whose process runs the work (for crash recovery).
    pub owner: String,
    /// The tool that was called.
    pub tool: String,
    /// Current status.
    pub status: TaskStatus,
    /// Human-readable status.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status_message: Option<String>,
    /// Creation time, Unix ms.
    pub created_at_ms: u64,
    /// Last change, Unix ms.
    pub updated_at_ms: u64,
    /// Lifetime from creation in ms; `None` is unlimited.
    pub ttl_ms: Option<u64>,
    /// Suggested poll interval in ms.
    pub poll_interval_ms: Option<u64>,
    /// Outstanding input requests.
    #[serde(default, skip_serializing_if = "SparseMap::is_empty")]
    pub input_requests: SparseMap,
    /// Every input key ever issued (keys are unique for the task's life).
    #[serde(default, skip_serializing_if = "BTreeSet::is_empty")]
    pub issued_keys: BTreeSet<String>,
    /// Answers received and not yet handed to the work.
    #[serde(default, skip_serializing_if = "SparseMap::is_empty")]
    pub answers: SparseMap,
    /// The `CallToolResult` once completed. Boxed, as `error`: every running task's record is in
    /// memory, and neither is set before the task ends.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<Box<Value>>,
    /// The JSON-RPC error once failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<Box<RpcError>>,
    /// Incremented on every change; stores use it for compare-and-set.
    pub version: u64,
    /// Attempts started: 1 for a task run where it was created, 0 while a task created for
    /// separate workers waits for its first one, one more at every `Claim`.
    #[serde(default = "first_attempt", skip_serializing_if = "is_first_attempt")]
    pub attempt: u32,
    /// Set when the tool is resumable: its work runs again after its worker dies.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resume: Option<Resume>,
    /// The call to run again (resumable tasks, and tasks that wait for a separate worker).
    /// Boxed, as the checkpoint: most tasks have neither, and every running task's record is
    /// in memory.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub call: Option<Box<StoredCall>>,
    /// The last checkpoint the work saved, handed to the next attempt.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checkpoint: Option<Box<Value>>,
    /// While no worker runs the task: the time (Unix ms) from which one may claim it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runnable_at_ms: Option<u64>,
    /// Input keys an earlier attempt issued that were still unanswered, or answered but not
    /// handed to that attempt, when it stopped: the next attempt may ask them again and gets
    /// their answers rather than a duplicate-key error.
    #[serde(default, skip_serializing_if = "BTreeSet::is_empty")]
    pub reissuable_keys: BTreeSet<String>,
    /// The trace context the task's runs are parented to (SEP-414): the creating request's
    /// span where the server traced it, else the caller's own. Kept with the task so a run on
    /// any worker, after any restart, joins the caller's trace. Boxed: most tasks have none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace: Option<Box<crate::trace::TraceContext>>,
}

/// A JSON object map (a record's input requests or answers) that is one pointer while empty:
/// most tasks never ask for input, every running task's record is in memory, and an empty
/// `Map` is 72 bytes inline. Reads and writes go through `Deref` and `DerefMut` to the map (a
/// write allocates it); `remove` and `clear` free it once empty. Serialized as the map.
#[derive(Clone, Default)]
pub struct SparseMap(Option<Box<Map<String, Value>>>);

impl SparseMap {
    /// True without entries.
    pub fn is_empty(&self) -> bool {
        self.0.as_ref().is_none_or(|map| map.is_empty())
    }

    /// Removes `key`, returning its value if it was there; frees the map once empty.
    pub fn remove(&mut self, key: &str) -> Option<Value> {
        let map = self.0.as_mut()?;
        let value = map.remove(key);
        if map.is_empty() {
            self.0 = None;
        }
        value
    }

    /// Removes every entry and frees the map.
    pub fn clear(&mut self) {
        self.0 = None;
    }
}

impl std::ops::Deref for SparseMap {
    type Target = Map<String, Value>;

    fn deref(&self) -> &Map<String, Value> {
        static EMPTY: std::sync::OnceLock<Map<String, Value>> = std::sync::OnceLock::new();
        self.0.as_deref().unwrap_or_else(|| EMPTY.get_or_init(Map::new))
    }
}

impl std::ops::DerefMut for SparseMap {
    fn deref_mut(&mut self) -> &mut Map<String, Value> {
        self.0.get_or_insert_default()
    }
}

impl From<Map<String, Value>> for SparseMap {
    fn from(map: Map<String, Value>) -> Self {
        Self((!map.is_empty()).then(|| Box::new(map)))
    }
}

/// Equal when the entries are: an emptied map equals one never written.
impl PartialEq for SparseMap {
    fn eq(&self, other: &Self) -> bool {
        **self == **other
    }
}

impl std::fmt::Debug for SparseMap {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        (**self).fmt(f)
    }
}

impl Serialize for SparseMap {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        (**self).serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for SparseMap {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        Map::deserialize(deserializer).map(Self::from)
    }
}

fn first_attempt() -> u32 {
    1
}

#[allow(clippy::trivially_copy_pass_by_ref)] // serde's skip_serializing_if passes a reference
fn is_first_attempt(attempt: &u32) -> bool {
    *attempt == 1
}

/// How a resumable tool's task runs again after the worker running it dies. As JSON (an
/// adapter's per-tool options): `{"maxAttempts": number, "backoffMs": number}`, both optional.
///
/// Execution is at least once: an attempt that was cut short runs again, from the start of the
/// tool (or from its last checkpoint), so the tool must be idempotent. Completion stays exactly
/// once: every write is compare-and-set, only the assigned worker's writes count, and a
/// terminal task never changes, so two attempts never both complete and a cancel still wins.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Resume {
    /// The most attempts in all, the first included (at least 1; 1 never resumes).
    #[serde(default = "Resume::default_attempts")]
    pub max_attempts: u32,
    /// The wait before the second attempt; each later one waits twice the one before, at most
    /// [`MAX_BACKOFF_MS`].
    #[serde(default = "Resume::default_backoff")]
    pub backoff_ms: u64,
}

/// The longest wait between two attempts of a resumable task (10 minutes).
pub const MAX_BACKOFF_MS: u64 = 600_000;

impl Default for Resume {
    fn default() -> Self {
        Self { max_attempts: Self::default_attempts(), backoff_ms: Self::default_backoff() }
    }
}

impl Resume {
    fn default_attempts() -> u32 {
        3
    }

    fn default_backoff() -> u64 {
        1_000
    }

    /// The wait before attempt `next` (2 or more): `backoff_ms × 2^(next − 2)`, capped.
    pub fn delay_before(&self, next: u32) -> u64 {
        let doublings = next.saturating_sub(2).min(32);
        self.backoff_ms.saturating_mul(1_u64 << doublings).min(MAX_BACKOFF_MS)
    }
}

/// A `tools/call` as a later attempt or a separate worker runs it: what the tool saw the first
/// time, from the arguments to the client's envelope.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct StoredCall {
    /// The arguments object.
    #[serde(default, skip_serializing_if = "Map::is_empty")]
    pub arguments: Map<String, Value>,
    /// MRTR answers the call came with.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input_responses: Option<InputResponses>,
    /// The MRTR state the call came with, as the handler returned it (already verified).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<Value>,
    /// The request's `_meta` envelope.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub envelope: Option<Envelope>,
}

/// What happened to a task. Each is applied by [`TaskRecord::apply`].
#[derive(Clone, Debug, PartialEq)]
pub enum TaskEvent {
    /// The work set its status message.
    SetStatusMessage(String),
    /// The work asks for input; keys must never have been issued before.
    RequestInput(InputRequests),
    /// A `tasks/update` delivered answers; unknown or already-answered keys are ignored.
    ProvideInput(InputResponses),
    /// The work handed over the answers for these keys (they leave `answers`).
    TakeAnswers(Vec<String>),
    /// The work finished with a `CallToolResult` (tool errors included).
    Complete(Value),
    /// The work finished with a protocol error.
    Fail(RpcError),
    /// `tasks/cancel` arrived.
    Cancel,
    /// The TTL passed before the task finished.
    Expire,
    /// The process running the work is gone (crash recovery, or its lease lapsed). A resumable
    /// task with attempts left waits for a worker again (after its backoff); one without fails
    /// with this message; one that already used its last attempt fails saying so. A task no
    /// worker holds is not affected.
    Abandon(String),
    /// The work saved a checkpoint for a later attempt.
    Checkpoint(Value),
    /// Worker `owner` takes a task that waits for one, starting its next attempt; refused with
    /// [`TransitionError::NotRunnable`] if the task is assigned or its backoff has not ended.
    Claim {
        /// The claiming worker.
        owner: String,
    },
}

impl TaskEvent {
    /// True for the events only the work itself raises (status, input, checkpoints, its
    /// result): once another worker took the task over, a stale attempt's events are refused.
    pub fn is_from_work(&self) -> bool {
        matches!(
            self,
            Self::SetStatusMessage(_)
                | Self::RequestInput(_)
                | Self::TakeAnswers(_)
                | Self::Complete(_)
                | Self::Fail(_)
                | Self::Checkpoint(_)
        )
    }
}

/// Why an event was refused. Nothing changed.
#[non_exhaustive]
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum TransitionError {
    /// The task is terminal; terminal states never change.
    #[error("task is already {}", .0.as_str())]
    Terminal(TaskStatus),
    /// The work reused an input key (keys are unique for the task's life).
    #[error("input key {0:?} was already used by this task")]
    DuplicateInputKey(String),
    /// The work asked for input with no requests.
    #[error("an input request needs at least one key")]
    EmptyInputRequest,
    /// A claim found the task assigned to a worker, or still in its backoff.
    #[error("task is not waiting for a worker")]
    NotRunnable,
}

/// What an applied event changed.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Applied {
    /// True when the record changed (and its version moved on).
    pub changed: bool,
    /// Keys answered by a `ProvideInput` that were outstanding.
    pub answered: Vec<String>,
    /// What the change records in the task's history (none when nothing changed), for the
    /// store to write with the record.
    pub history: Vec<HistoryEntry>,
}

/// The message of a task that expired before finishing.
pub const EXPIRED_MESSAGE: &str = "Task expired: its ttlMs elapsed before the work finished";

/// `error.data.reason` of a resumable task whose worker died during its last allowed attempt.
pub const ATTEMPTS_EXHAUSTED: &str = "attempts_exhausted";

impl TaskRecord {
    /// A fresh `working` task created at `now_ms`.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        id: String,
        principal: String,
        owner: String,
        tool: String,
        now_ms: u64,
        ttl_ms: Option<u64>,
        poll_interval_ms: Option<u64>,
    ) -> Self {
        Self {
            id,
            principal,
            owner,
            tool,
            status: TaskStatus::Working,
            status_message: None,
            created_at_ms: now_ms,
            updated_at_ms: now_ms,
            ttl_ms,
            poll_interval_ms,
            input_requests: SparseMap::default(),
            issued_keys: BTreeSet::new(),
            answers: SparseMap::default(),
            result: None,
            error: None,
            version: 1,
            attempt: 1,
            resume: None,
            call: None,
            checkpoint: None,
            runnable_at_ms: None,
            reissuable_keys: BTreeSet::new(),
            trace: None,
        }
    }

    /// True while no worker runs the task: it waits for one to [claim](TaskEvent::Claim) it.
    pub fn is_waiting(&self) -> bool {
        self.runnable_at_ms.is_some()
    }

    /// True when a worker may claim it at `now_ms`: unfinished, waiting, its backoff over, and
    /// its TTL not ended (an expired task is for the sweeper to fail, not for a worker to run).
    pub fn is_runnable(&self, now_ms: u64) -> bool {
        !self.status.is_terminal() && self.runnable_at_ms.is_some_and(|at| now_ms >= at) && !self.is_expired(now_ms)
    }

    /// When the TTL ends (Unix ms), or `None` for an unlimited task.
    pub fn expires_at_ms(&self) -> Option<u64> {
        self.ttl_ms.map(|ttl| self.created_at_ms.saturating_add(ttl))
    }

    /// True once `now_ms` reached `createdAt + ttlMs`; never before (no early expiry).
    pub fn is_expired(&self, now_ms: u64) -> bool {
        self.expires_at_ms().is_some_and(|at| now_ms >= at)
    }

    /// The one transition function: applies `event` at `now_ms`, or refuses it and changes
    /// nothing. Time never moves `lastUpdatedAt` backwards. A cancel or an answer is the
    /// client's; [`TaskRecord::apply_by`] names someone else.
    pub fn apply(&mut self, now_ms: u64, event: TaskEvent) -> Result<Applied, TransitionError> {
        self.apply_by(now_ms, event, &Actor::Client)
    }

    /// [`TaskRecord::apply`], with `by` as who asked for a cancel or gave answers (the history
    /// records it).
    pub fn apply_by(&mut self, now_ms: u64, event: TaskEvent, by: &Actor) -> Result<Applied, TransitionError> {
        if self.status.is_terminal() {
            return Err(TransitionError::Terminal(self.status));
        }
        let status_before = self.status;
        let message_before = self.status_message.clone();
        let mut applied = Applied { changed: true, answered: Vec::new(), history: Vec::new() };
        // What the event itself says; the status or message it changed follows it.
        let mut said: Option<HistoryEvent> = None;
        match event {
            TaskEvent::SetStatusMessage(message) => {
                if self.status_message.as_deref() == Some(message.as_str()) {
                    applied.changed = false;
                } else {
                    self.status_message = Some(message);
                }
            }
            TaskEvent::RequestInput(requests) => {
                if requests.is_empty() {
                    return Err(TransitionError::EmptyInputRequest);
                }
                if let Some(key) =
                    requests.keys().find(|key| self.issued_keys.contains(*key) && !self.reissuable_keys.contains(*key))
                {
                    return Err(TransitionError::DuplicateInputKey(key.clone()));
                }
                said = Some(HistoryEvent::InputRequested { keys: requests.keys().cloned().collect() });
                for (key, request) in requests {
                    // Asked again by a later attempt: still outstanding, or its answer waits
                    // in `answers`; either way the client is not asked twice.
                    if self.reissuable_keys.remove(&key) {
                        continue;
                    }
                    self.issued_keys.insert(key.clone());
                    self.input_requests.insert(key, request);
                }
                if !self.input_requests.is_empty() {
                    self.status = TaskStatus::InputRequired;
                }
            }
            TaskEvent::ProvideInput(responses) => {
                for (key, response) in responses {
                    // Only outstanding keys count; never-issued, already-answered or superseded
                    // keys are ignored silently (the extension's input_required flow).
                    if self.input_requests.remove(&key).is_some() {
                        self.answers.insert(key.clone(), response);
                        applied.answered.push(key);
                    }
                }
                if applied.answered.is_empty() {
                    applied.changed = false;
                } else {
                    said = Some(HistoryEvent::InputAnswered { keys: applied.answered.clone(), by: by.clone() });
                    if self.input_requests.is_empty() {
                        self.status = TaskStatus::Working;
                    }
                }
            }
            TaskEvent::TakeAnswers(keys) => {
                let before = self.answers.len();
                for key in keys {
                    self.answers.remove(&key);
                }
                applied.changed = self.answers.len() != before;
            }
            TaskEvent::Complete(result) => {
                let is_error = result.get("isError").and_then(Value::as_bool).unwrap_or(false);
                said = Some(HistoryEvent::Result { is_error });
                self.finish(TaskStatus::Completed);
                self.result = Some(Box::new(with_complete_result_type(result)));
            }
            TaskEvent::Fail(error) => {
                said = Some(HistoryEvent::Error { code: error.code });
                self.finish(TaskStatus::Failed);
                self.status_message = Some(error.message.clone());
                self.error = Some(Box::new(error));
            }
            TaskEvent::Cancel => {
                said = Some(HistoryEvent::CancelRequested { by: by.clone() });
                self.finish(TaskStatus::Cancelled);
                self.status_message = Some("Task cancelled".to_owned());
            }
            TaskEvent::Expire => {
                said = Some(HistoryEvent::Expired);
                self.finish(TaskStatus::Failed);
                self.status_message = Some(EXPIRED_MESSAGE.to_owned());
                self.error = Some(Box::new(
                    RpcError::new(ErrorKind::Internal.code(), EXPIRED_MESSAGE)
                        .with_data(serde_json::json!({ "reason": "expired" })),
                ));
            }
            TaskEvent::Abandon(message) => {
                if !self.is_waiting() {
                    said = Some(HistoryEvent::WorkerLost { owner: self.owner.clone(), attempt: self.attempt });
                }
                if self.is_waiting() {
                    // No worker ran it: nothing was lost.
                    applied.changed = false;
                } else if let Some(resume) = self.resume.filter(|_| self.call.is_some()) {
                    let max = resume.max_attempts.max(1);
                    if self.attempt < max {
                        let next = self.attempt + 1;
                        self.owner = String::new();
                        self.runnable_at_ms = Some(now_ms.saturating_add(resume.delay_before(next)));
                        self.reissuable_keys = self.input_requests.keys().chain(self.answers.keys()).cloned().collect();
                        self.status_message = Some(format!(
                            "Resuming: the worker running attempt {} stopped; attempt {next} of {max} starts when a worker takes it",
                            self.attempt
                        ));
                    } else {
                        let text = format!(
                            "Task failed: the worker running it stopped during attempt {}, the last of the {max} it may have",
                            self.attempt
                        );
                        self.finish(TaskStatus::Failed);
                        self.status_message = Some(text.clone());
                        self.error =
                            Some(Box::new(RpcError::new(ErrorKind::Internal.code(), text).with_data(
                                serde_json::json!({ "reason": ATTEMPTS_EXHAUSTED, "attempts": self.attempt }),
                            )));
                    }
                } else {
                    self.finish(TaskStatus::Failed);
                    self.status_message = Some(message.clone());
                    self.error = Some(Box::new(
                        RpcError::new(ErrorKind::Internal.code(), message)
                            .with_data(serde_json::json!({ "reason": "server_restarted" })),
                    ));
                }
            }
            TaskEvent::Checkpoint(value) => {
                if self.checkpoint.as_deref() == Some(&value) {
                    applied.changed = false;
                } else {
                    said = Some(HistoryEvent::Checkpoint);
                    self.checkpoint = Some(Box::new(value));
                }
            }
            TaskEvent::Claim { owner } => {
                if !self.is_runnable(now_ms) {
                    return Err(TransitionError::NotRunnable);
                }
                said = Some(HistoryEvent::Claimed { owner: owner.clone(), attempt: self.attempt + 1 });
                self.owner = owner;
                self.runnable_at_ms = None;
                self.attempt += 1;
                if self.attempt > 1 {
                    let max = self.resume.map_or(self.attempt, |r| r.max_attempts.max(self.attempt));
                    self.status_message = Some(format!("Resumed: attempt {} of {max}", self.attempt));
                }
            }
        }
        if applied.changed {
            self.updated_at_ms = self.updated_at_ms.max(now_ms);
            self.version += 1;
            let at_ms = self.updated_at_ms;
            applied.history.extend(said.map(|event| HistoryEntry { at_ms, event }));
            let claimed = applied.history.iter().any(|e| matches!(e.event, HistoryEvent::Claimed { .. }));
            if self.status != status_before {
                let message = self.status_message.clone();
                applied
                    .history
                    .push(HistoryEntry { at_ms, event: HistoryEvent::Status { status: self.status, message } });
            } else if self.status_message != message_before
                && !claimed
                && let Some(message) = self.status_message.clone()
            {
                applied.history.push(HistoryEntry { at_ms, event: HistoryEvent::Message { message } });
            }
            debug_assert!(applied.history.len() <= super::history::MAX_ENTRIES_PER_CHANGE);
        }
        Ok(applied)
    }

    fn finish(&mut self, status: TaskStatus) {
        self.status = status;
        self.input_requests.clear();
        self.answers.clear();
        self.reissuable_keys.clear();
        self.runnable_at_ms = None;
        // What only a later attempt needs goes: a terminal row costs what it did before.
        self.call = None;
        self.checkpoint = None;
    }

    /// The base `Task` as the wire shows it.
    pub fn to_task(&self) -> Task {
        Task {
            task_id: self.id.clone(),
            status: self.status,
            status_message: self.status_message.clone(),
            created_at: format_ms(self.created_at_ms),
            last_updated_at: format_ms(self.updated_at_ms),
            ttl_ms: self.ttl_ms,
            poll_interval_ms: self.poll_interval_ms,
        }
    }

    /// The `DetailedTask` as `tasks/get` and `notifications/tasks` show it.
    pub fn to_detailed(&self) -> DetailedTask {
        DetailedTask {
            task: self.to_task(),
            input_requests: (self.status == TaskStatus::InputRequired)
                .then(|| InputRequests::clone(&self.input_requests)),
            result: if self.status == TaskStatus::Completed { self.result.as_deref().cloned() } else { None },
            error: if self.status == TaskStatus::Failed { self.error.as_deref().cloned() } else { None },
        }
    }
}

/// Makes a tool result a full `CallToolResult` with `resultType: "complete"` (a real TS client
/// fails on an inlined result without it: `@modelcontextprotocol/client` 2.4.0) and without the v1 related-task `_meta`.
pub fn with_complete_result_type(result: Value) -> Value {
    match result {
        Value::Object(mut map) => {
            map.insert("resultType".to_owned(), Value::String("complete".to_owned()));
            if let Some(Value::Object(meta)) = map.get_mut("_meta") {
                meta.remove("io.modelcontextprotocol/related-task");
            }
            Value::Object(map)
        }
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_sparse_map_is_a_map_that_frees_itself_when_emptied() {
        let mut map = SparseMap::default();
        assert!(map.is_empty() && map.0.is_none());
        assert_eq!(map.get("a"), None);
        assert_eq!(map.remove("a"), None);
        assert!(map.0.is_none(), "removing from an empty map allocates nothing");
        map.insert("a".into(), json!(1));
        map.insert("b".into(), json!(2));
        assert_eq!(map.len(), 2);
        assert_eq!(map.remove("a"), Some(json!(1)));
        assert!(map.0.is_some());
        assert_eq!(map.remove("b"), Some(json!(2)));
        assert!(map.0.is_none(), "the last removal frees the map");
        // An emptied map equals one never written, and both serialize as `{}`.
        let mut emptied = SparseMap::from(Map::from_iter([("k".to_owned(), json!(true))]));
        emptied.remove("k");
        assert_eq!(emptied, SparseMap::default());
        assert_eq!(serde_json::to_value(&emptied).unwrap(), json!({}));
        let kept: SparseMap = serde_json::from_value(json!({"k": {"x": 1}})).unwrap();
        assert_eq!(serde_json::to_value(&kept).unwrap(), json!({"k": {"x": 1}}));
        let none: SparseMap = serde_json::from_value(json!({})).unwrap();
        assert!(none.0.is_none(), "an empty object decodes to no allocation");
        assert!(serde_json::from_value::<SparseMap>(json!([1])).is_err());
    }

    #[test]
    fn a_records_empty_parts_take_a_pointer_each() {
        // Every running task's record is in memory: what most tasks never set is boxed or
        // sparse (a `Map` inline is 72 bytes, an `RpcError` 104). A guard, not a benchmark.
        #[cfg(target_pointer_width = "64")]
        assert!(std::mem::size_of::<TaskRecord>() <= 448, "{}", std::mem::size_of::<TaskRecord>());
        let mut task = record();
        task.apply(1, TaskEvent::RequestInput(Map::from_iter([("q".to_owned(), json!({}))]))).unwrap();
        task.apply(2, TaskEvent::Complete(json!({"content": []}))).unwrap();
        assert!(task.input_requests.0.is_none() && task.answers.0.is_none(), "a terminal record keeps no maps");
        let back: TaskRecord = serde_json::from_value(serde_json::to_value(&task).unwrap()).unwrap();
        assert_eq!(back, task);
    }

    fn record() -> TaskRecord {
        TaskRecord::new("t1".into(), "p".into(), "o".into(), "tool".into(), 1000, Some(60_000), Some(500))
    }

    fn requests(keys: &[&str]) -> InputRequests {
        keys.iter().map(|k| ((*k).to_owned(), json!({"method": "elicitation/create", "params": {}}))).collect()
    }

    #[test]
    fn terminal_states_never_change() {
        for finish in
            [TaskEvent::Complete(json!({"content": []})), TaskEvent::Fail(RpcError::internal("x")), TaskEvent::Cancel]
        {
            let mut task = record();
            task.apply(2000, finish).unwrap();
            let frozen = task.clone();
            for event in [
                TaskEvent::Cancel,
                TaskEvent::Complete(json!({"content": []})),
                TaskEvent::Fail(RpcError::internal("late")),
                TaskEvent::SetStatusMessage("late".into()),
                TaskEvent::RequestInput(requests(&["a"])),
                TaskEvent::ProvideInput(Map::new()),
                TaskEvent::Expire,
            ] {
                assert!(matches!(task.apply(3000, event), Err(TransitionError::Terminal(_))));
                assert_eq!(task, frozen);
            }
        }
    }

    #[test]
    fn result_after_cancel_is_discarded() {
        let mut task = record();
        task.apply(2000, TaskEvent::Cancel).unwrap();
        assert!(task.apply(3000, TaskEvent::Complete(json!({"content": []}))).is_err());
        assert_eq!(task.status, TaskStatus::Cancelled);
        assert_eq!(task.result, None);
    }

    #[test]
    fn partial_answers_keep_input_required_and_drop_answered_keys() {
        let mut task = record();
        task.apply(2000, TaskEvent::RequestInput(requests(&["a", "b"]))).unwrap();
        let mut answer = Map::new();
        answer.insert("a".into(), json!({"action": "accept"}));
        answer.insert("zzz".into(), json!({"ignored": true}));
        let applied = task.apply(3000, TaskEvent::ProvideInput(answer.clone())).unwrap();
        assert_eq!(applied.answered, vec!["a".to_owned()]);
        assert_eq!(task.status, TaskStatus::InputRequired);
        assert!(!task.to_detailed().input_requests.unwrap().contains_key("a"));
        // Answering the same key again changes nothing.
        let again = task.apply(4000, TaskEvent::ProvideInput(answer)).unwrap();
        assert!(!again.changed);
        let mut rest = Map::new();
        rest.insert("b".into(), json!({"action": "decline"}));
        task.apply(5000, TaskEvent::ProvideInput(rest)).unwrap();
        assert_eq!(task.status, TaskStatus::Working);
        assert_eq!(task.answers.len(), 2);
    }

    #[test]
    fn input_keys_are_unique_for_the_task_life() {
        let mut task = record();
        task.apply(2000, TaskEvent::RequestInput(requests(&["a"]))).unwrap();
        let mut answer = Map::new();
        answer.insert("a".into(), json!({"action": "accept"}));
        task.apply(3000, TaskEvent::ProvideInput(answer)).unwrap();
        assert_eq!(
            task.apply(4000, TaskEvent::RequestInput(requests(&["a"]))),
            Err(TransitionError::DuplicateInputKey("a".into()))
        );
    }

    #[test]
    fn completed_result_carries_result_type_complete() {
        let mut task = record();
        task.apply(2000, TaskEvent::Complete(json!({"content": [], "isError": true}))).unwrap();
        let detailed = task.to_detailed();
        assert_eq!(detailed.result.unwrap()["resultType"], "complete");
        assert_eq!(task.status, TaskStatus::Completed);
    }

    #[test]
    fn no_expiry_before_ttl() {
        let task = record();
        assert!(!task.is_expired(1000 + 59_999));
        assert!(task.is_expired(1000 + 60_000));
        let mut unlimited = record();
        unlimited.ttl_ms = None;
        assert!(!unlimited.is_expired(u64::MAX));
    }

    fn resumable(max_attempts: u32) -> TaskRecord {
        let mut task = record();
        task.resume = Some(Resume { max_attempts, backoff_ms: 100 });
        task.call = Some(Box::default());
        task
    }

    #[test]
    fn a_resumable_task_waits_for_a_worker_then_runs_its_next_attempt() {
        let mut task = resumable(3);
        task.apply(1500, TaskEvent::Checkpoint(json!({"step": 4}))).unwrap();
        task.apply(2000, TaskEvent::Abandon("gone".into())).unwrap();
        assert_eq!(task.status, TaskStatus::Working, "the client sees the task go on");
        assert!(task.is_waiting() && task.owner.is_empty());
        assert_eq!(task.runnable_at_ms, Some(2100));
        // A second death notice while no worker holds it changes nothing.
        assert!(!task.apply(2050, TaskEvent::Abandon("again".into())).unwrap().changed);
        assert_eq!(task.apply(2099, TaskEvent::Claim { owner: "w2".into() }), Err(TransitionError::NotRunnable));
        task.apply(2100, TaskEvent::Claim { owner: "w2".into() }).unwrap();
        assert_eq!((task.attempt, task.owner.as_str(), task.is_waiting()), (2, "w2", false));
        assert_eq!(task.checkpoint.as_deref(), Some(&json!({"step": 4})));
        assert_eq!(task.status_message.as_deref(), Some("Resumed: attempt 2 of 3"));
        // An assigned task cannot be claimed again: two workers never run one attempt.
        assert_eq!(task.apply(9000, TaskEvent::Claim { owner: "w3".into() }), Err(TransitionError::NotRunnable));
        // The third attempt waits twice as long.
        task.apply(3000, TaskEvent::Abandon("gone".into())).unwrap();
        assert_eq!(task.runnable_at_ms, Some(3200));
    }

    #[test]
    fn the_last_attempt_fails_saying_so_and_others_fail_as_before() {
        let mut task = resumable(2);
        task.apply(2000, TaskEvent::Abandon("gone".into())).unwrap();
        task.apply(2100, TaskEvent::Claim { owner: "w2".into() }).unwrap();
        task.apply(3000, TaskEvent::Abandon("gone".into())).unwrap();
        assert_eq!(task.status, TaskStatus::Failed);
        let error = task.error.clone().unwrap();
        assert_eq!(error.data.as_ref().unwrap()["reason"], ATTEMPTS_EXHAUSTED);
        assert!(error.message.contains("attempt 2, the last of the 2"), "{}", error.message);
        assert_eq!((task.call.clone(), task.checkpoint.clone()), (None, None), "a terminal row keeps no call");

        let mut plain = record();
        plain.apply(2000, TaskEvent::Abandon("the process stopped".into())).unwrap();
        assert_eq!(plain.status, TaskStatus::Failed);
        assert_eq!(plain.error.unwrap().data.unwrap()["reason"], "server_restarted");
    }

    #[test]
    fn an_expired_task_is_not_claimed() {
        let mut task = resumable(3);
        task.apply(2000, TaskEvent::Abandon("gone".into())).unwrap();
        let end = task.expires_at_ms().unwrap();
        assert!(task.is_runnable(end - 1));
        assert_eq!(task.apply(end, TaskEvent::Claim { owner: "w".into() }), Err(TransitionError::NotRunnable));
    }

    #[test]
    fn a_cancel_while_waiting_is_final() {
        let mut task = resumable(3);
        task.apply(2000, TaskEvent::Abandon("gone".into())).unwrap();
        task.apply(2010, TaskEvent::Cancel).unwrap();
        assert_eq!(task.status, TaskStatus::Cancelled);
        assert!(!task.is_runnable(u64::MAX));
        assert!(matches!(task.apply(3000, TaskEvent::Claim { owner: "w".into() }), Err(TransitionError::Terminal(_))));
    }

    #[test]
    fn a_later_attempt_may_ask_its_questions_again() {
        let mut task = resumable(3);
        task.apply(1100, TaskEvent::RequestInput(requests(&["taken", "answered", "open"]))).unwrap();
        let mut answers = Map::new();
        answers.insert("taken".into(), json!({"action": "accept"}));
        answers.insert("answered".into(), json!({"action": "decline"}));
        task.apply(1200, TaskEvent::ProvideInput(answers)).unwrap();
        task.apply(1300, TaskEvent::TakeAnswers(vec!["taken".into()])).unwrap();
        task.apply(2000, TaskEvent::Abandon("gone".into())).unwrap();
        assert_eq!(task.status, TaskStatus::InputRequired, "the open question stays visible");
        task.apply(2100, TaskEvent::Claim { owner: "w2".into() }).unwrap();
        // The answer the dead attempt took is gone with it (it should have saved it).
        assert_eq!(
            task.apply(2200, TaskEvent::RequestInput(requests(&["taken"]))),
            Err(TransitionError::DuplicateInputKey("taken".into()))
        );
        task.apply(2200, TaskEvent::RequestInput(requests(&["answered", "open", "new"]))).unwrap();
        let mut open: Vec<&str> = task.input_requests.keys().map(String::as_str).collect();
        open.sort_unstable();
        assert_eq!(open, ["new", "open"]);
        assert!(task.answers.contains_key("answered"));
        assert!(task.reissuable_keys.is_empty());
        // Asked once more within this attempt: a duplicate again.
        assert!(task.apply(2300, TaskEvent::RequestInput(requests(&["open"]))).is_err());
    }

    #[test]
    fn old_records_read_as_first_attempts() {
        let mut value = serde_json::to_value(record()).unwrap();
        assert!(value.get("attempt").is_none(), "a first attempt is not written");
        value.as_object_mut().unwrap().remove("attempt");
        let read: TaskRecord = serde_json::from_value(value).unwrap();
        assert_eq!(read, record());
    }

    #[test]
    fn time_never_goes_backwards() {
        let mut task = record();
        task.apply(5000, TaskEvent::SetStatusMessage("a".into())).unwrap();
        task.apply(4000, TaskEvent::SetStatusMessage("b".into())).unwrap();
        assert_eq!(task.updated_at_ms, 5000);
    }

    #[test]
    fn each_change_says_what_it_did_for_the_history() {
        use crate::history::{Actor, HistoryEvent as H};
        let events = |task: &mut TaskRecord, now: u64, event: TaskEvent, by: &Actor| -> Vec<H> {
            task.apply_by(now, event, by).unwrap().history.into_iter().map(|e| e.event).collect()
        };
        let mut task = record();
        assert_eq!(
            events(&mut task, 1001, TaskEvent::SetStatusMessage("m".into()), &Actor::Client),
            [H::Message { message: "m".into() }]
        );
        assert!(events(&mut task, 1002, TaskEvent::SetStatusMessage("m".into()), &Actor::Client).is_empty());
        assert_eq!(
            events(&mut task, 1003, TaskEvent::RequestInput(requests(&["a"])), &Actor::Client),
            [
                H::InputRequested { keys: vec!["a".into()] },
                H::Status { status: TaskStatus::InputRequired, message: Some("m".into()) }
            ]
        );
        let answers: InputResponses = [("a".to_owned(), json!({"action": "accept"}))].into_iter().collect();
        let by = Actor::Operator("ana".into());
        assert_eq!(
            events(&mut task, 1004, TaskEvent::ProvideInput(answers), &by),
            [
                H::InputAnswered { keys: vec!["a".into()], by: by.clone() },
                H::Status { status: TaskStatus::Working, message: Some("m".into()) }
            ]
        );
        assert!(events(&mut task, 1005, TaskEvent::TakeAnswers(vec!["a".into()]), &Actor::Client).is_empty());
        assert_eq!(events(&mut task, 1006, TaskEvent::Checkpoint(json!(1)), &Actor::Client), [H::Checkpoint]);
        let applied = task.apply_by(1007, TaskEvent::Cancel, &by).unwrap();
        assert_eq!(applied.history.iter().map(|e| e.at_ms).collect::<Vec<_>>(), [1007, 1007]);
        assert_eq!(
            applied.history.into_iter().map(|e| e.event).collect::<Vec<_>>(),
            [
                H::CancelRequested { by },
                H::Status { status: TaskStatus::Cancelled, message: Some("Task cancelled".into()) }
            ]
        );

        let mut task = record();
        assert_eq!(
            events(&mut task, 1001, TaskEvent::Complete(json!({"content": [], "isError": true})), &Actor::Client),
            [H::Result { is_error: true }, H::Status { status: TaskStatus::Completed, message: None }]
        );
        let mut task = record();
        assert_eq!(
            events(&mut task, 1001, TaskEvent::Fail(RpcError::internal("boom")), &Actor::Client),
            [H::Error { code: -32603 }, H::Status { status: TaskStatus::Failed, message: Some("boom".into()) }]
        );
        let mut task = record();
        assert_eq!(
            events(&mut task, 61_000, TaskEvent::Expire, &Actor::Client),
            [H::Expired, H::Status { status: TaskStatus::Failed, message: Some(EXPIRED_MESSAGE.into()) }]
        );

        // A resumable task: its worker is lost, another claims it.
        let mut task = record();
        task.resume = Some(Resume { max_attempts: 3, backoff_ms: 10 });
        task.call = Some(Box::default());
        let lost = events(&mut task, 1001, TaskEvent::Abandon("gone".into()), &Actor::Client);
        assert_eq!(lost[0], H::WorkerLost { owner: "o".into(), attempt: 1 });
        assert!(matches!(&lost[1], H::Message { message } if message.starts_with("Resuming")));
        assert_eq!(
            events(&mut task, 2000, TaskEvent::Claim { owner: "w2".into() }, &Actor::Client),
            [H::Claimed { owner: "w2".into(), attempt: 2 }]
        );
    }
}
