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

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::error::{ErrorKind, RpcError};
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
    #[serde(default, skip_serializing_if = "Map::is_empty")]
    pub input_requests: InputRequests,
    /// Every input key ever issued (keys are unique for the task's life).
    #[serde(default, skip_serializing_if = "BTreeSet::is_empty")]
    pub issued_keys: BTreeSet<String>,
    /// Answers received and not yet handed to the work.
    #[serde(default, skip_serializing_if = "Map::is_empty")]
    pub answers: InputResponses,
    /// The `CallToolResult` once completed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<Value>,
    /// The JSON-RPC error once failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<RpcError>,
    /// Incremented on every change; stores use it for compare-and-set.
    pub version: u64,
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
    /// The process running the work is gone (crash recovery).
    Abandon(String),
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
}

/// What an applied event changed.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Applied {
    /// True when the record changed (and its version moved on).
    pub changed: bool,
    /// Keys answered by a `ProvideInput` that were outstanding.
    pub answered: Vec<String>,
}

/// The message of a task that expired before finishing.
pub const EXPIRED_MESSAGE: &str = "Task expired: its ttlMs elapsed before the work finished";

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
            input_requests: Map::new(),
            issued_keys: BTreeSet::new(),
            answers: Map::new(),
            result: None,
            error: None,
            version: 1,
        }
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
    /// nothing. Time never moves `lastUpdatedAt` backwards.
    pub fn apply(&mut self, now_ms: u64, event: TaskEvent) -> Result<Applied, TransitionError> {
        if self.status.is_terminal() {
            return Err(TransitionError::Terminal(self.status));
        }
        let mut applied = Applied { changed: true, answered: Vec::new() };
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
                if let Some(key) = requests.keys().find(|key| self.issued_keys.contains(*key)) {
                    return Err(TransitionError::DuplicateInputKey(key.clone()));
                }
                for (key, request) in requests {
                    self.issued_keys.insert(key.clone());
                    self.input_requests.insert(key, request);
                }
                self.status = TaskStatus::InputRequired;
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
                } else if self.input_requests.is_empty() {
                    self.status = TaskStatus::Working;
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
                self.finish(TaskStatus::Completed);
                self.result = Some(with_complete_result_type(result));
            }
            TaskEvent::Fail(error) => {
                self.finish(TaskStatus::Failed);
                self.status_message = Some(error.message.clone());
                self.error = Some(error);
            }
            TaskEvent::Cancel => {
                self.finish(TaskStatus::Cancelled);
                self.status_message = Some("Task cancelled".to_owned());
            }
            TaskEvent::Expire => {
                self.finish(TaskStatus::Failed);
                self.status_message = Some(EXPIRED_MESSAGE.to_owned());
                self.error = Some(
                    RpcError::new(ErrorKind::Internal.code(), EXPIRED_MESSAGE)
                        .with_data(serde_json::json!({ "reason": "expired" })),
                );
            }
            TaskEvent::Abandon(message) => {
                self.finish(TaskStatus::Failed);
                self.status_message = Some(message.clone());
                self.error = Some(
                    RpcError::new(ErrorKind::Internal.code(), message)
                        .with_data(serde_json::json!({ "reason": "server_restarted" })),
                );
            }
        }
        if applied.changed {
            self.updated_at_ms = self.updated_at_ms.max(now_ms);
            self.version += 1;
        }
        Ok(applied)
    }

    fn finish(&mut self, status: TaskStatus) {
        self.status = status;
        self.input_requests.clear();
        self.answers.clear();
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
            input_requests: (self.status == TaskStatus::InputRequired).then(|| self.input_requests.clone()),
            result: if self.status == TaskStatus::Completed { self.result.clone() } else { None },
            error: if self.status == TaskStatus::Failed { self.error.clone() } else { None },
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

    #[test]
    fn time_never_goes_backwards() {
        let mut task = record();
        task.apply(5000, TaskEvent::SetStatusMessage("a".into())).unwrap();
        task.apply(4000, TaskEvent::SetStatusMessage("b".into())).unwrap();
        assert_eq!(task.updated_at_ms, 5000);
    }
}
