//! A task's history: what happened to it, entry by entry, for operators (the admin CLI's
//! `show`, the web view). The transition function ([`TaskRecord::apply`]) says what each event
//! changed as [`HistoryEntry`]s, and a store writes them in the same transaction as the record
//! they describe, so the history never tells of a change the record lost, nor misses one it
//! kept. A task's creation is the record itself ([`HistoryEntry::created`]).
//!
//! The history is not on the wire: the tasks extension shows a client the task's current state
//! only (<https://modelcontextprotocol.github.io/ext-tasks/specification/2026-07-28/tasks.html>).

use std::collections::VecDeque;

use serde::{Deserialize, Serialize};

use super::task::TaskRecord;
use super::types::TaskStatus;

/// The most entries a store keeps per task besides its creation: the newest; older ones are
/// dropped and counted.
pub const HISTORY_LIMIT: usize = 200;

/// The most entries one applied event makes (a store that trims lazily relies on it: a task at
/// version `v` has at most `1 + MAX_ENTRIES_PER_CHANGE × (v − 1)` entries).
pub const MAX_ENTRIES_PER_CHANGE: usize = 2;

/// True when a task at `version` may hold more than [`HISTORY_LIMIT`] entries: a store that
/// trims lazily looks only then.
pub fn may_exceed_limit(version: u64) -> bool {
    1 + MAX_ENTRIES_PER_CHANGE as u64 * version.saturating_sub(1) > HISTORY_LIMIT as u64
}

/// Who asked for a change that a caller, not the work, makes.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Actor {
    /// The client the task belongs to (its principal).
    Client,
    /// An operator, by the name the admin CLI or the web view gave.
    Operator(String),
}

impl Actor {
    /// An operator by the name given, else `"operator"` (a request queued by a CLI that named
    /// none).
    pub fn operator(given: Option<&str>) -> Self {
        Self::Operator(given.filter(|name| !name.is_empty()).unwrap_or("operator").to_owned())
    }
}

/// What one history entry records.
#[non_exhaustive]
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum HistoryEvent {
    /// The task was created.
    Created {
        /// The tool called.
        tool: String,
        /// The caller it belongs to.
        principal: String,
        /// True when it was created to wait for a separate worker rather than run at once.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        queued: bool,
    },
    /// Its status changed.
    Status {
        /// The new status.
        status: TaskStatus,
        /// Its `statusMessage` from then on.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        message: Option<String>,
    },
    /// Its `statusMessage` changed; the status did not.
    Message {
        /// The new message.
        message: String,
    },
    /// The work asked for input.
    InputRequested {
        /// The input keys asked.
        keys: Vec<String>,
    },
    /// Outstanding input was answered.
    InputAnswered {
        /// The keys answered.
        keys: Vec<String>,
        /// Who answered.
        by: Actor,
    },
    /// The work saved a checkpoint for a later attempt.
    Checkpoint,
    /// A cancel was asked for.
    CancelRequested {
        /// Who asked.
        by: Actor,
    },
    /// The TTL ended before the work finished.
    Expired,
    /// The worker running the task stopped (its process died, or its lease lapsed).
    WorkerLost {
        /// The worker.
        owner: String,
        /// The attempt it was running.
        attempt: u32,
    },
    /// A worker took the task, starting an attempt.
    Claimed {
        /// The worker.
        owner: String,
        /// The attempt it starts.
        attempt: u32,
    },
    /// The work's result was recorded.
    Result {
        /// True for a tool error (`isError: true`).
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        is_error: bool,
    },
    /// A JSON-RPC error was recorded.
    Error {
        /// Its code.
        code: i64,
    },
}

/// One entry of a task's history.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct HistoryEntry {
    /// When, Unix ms.
    pub at_ms: u64,
    /// What happened.
    #[serde(flatten)]
    pub event: HistoryEvent,
}

impl HistoryEntry {
    /// The entry a task's creation records, read from the new record.
    pub fn created(task: &TaskRecord) -> Self {
        Self::creation(task, task.is_waiting())
    }

    /// The creation entry of `task` (any later record of it: the creation's facts never change),
    /// `queued` saying whether it was created to wait for a worker.
    pub fn creation(task: &TaskRecord, queued: bool) -> Self {
        Self {
            at_ms: task.created_at_ms,
            event: HistoryEvent::Created { tool: task.tool.clone(), principal: task.principal.clone(), queued },
        }
    }

    /// The entry's event as stored on its own (a store keeps `at_ms` in a column of its own).
    pub fn event_json(&self) -> String {
        serde_json::to_string(&self.event).expect("history events serialize")
    }

    /// An entry from a stored time and event JSON; `None` for JSON this version cannot read
    /// (a newer library's event, or a damaged one).
    pub fn from_stored(at_ms: u64, event: &str) -> Option<Self> {
        serde_json::from_str(event).ok().map(|event| Self { at_ms, event })
    }
}

/// A task's history as a store keeps it, oldest first: its creation, the newest
/// [`HISTORY_LIMIT`] entries after it, and how many entries between them were dropped.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TaskHistory {
    /// The entries kept, oldest first.
    pub entries: VecDeque<HistoryEntry>,
    /// How many older entries were dropped to keep within the limit.
    pub dropped: u64,
}

impl TaskHistory {
    /// A history that starts with `task`'s creation.
    pub fn created(task: &TaskRecord) -> Self {
        Self { entries: VecDeque::from([HistoryEntry::created(task)]), dropped: 0 }
    }

    /// The history of `task` from the entries a store kept after its creation (oldest first)
    /// and the count it dropped: a store may keep the creation as the record itself. Whether the
    /// task was created to wait for a worker shows in the record (no attempt yet) or in the
    /// claim that started its first attempt.
    pub fn from_record(task: &TaskRecord, later: impl IntoIterator<Item = HistoryEntry>, dropped: u64) -> Self {
        let later: Vec<HistoryEntry> = later.into_iter().collect();
        let queued =
            task.attempt == 0 || later.iter().any(|e| matches!(e.event, HistoryEvent::Claimed { attempt: 1, .. }));
        let mut history = Self { entries: VecDeque::from([HistoryEntry::creation(task, queued)]), dropped };
        history.extend(later);
        history
    }

    /// Appends `entries`, dropping (and counting) the oldest beyond [`HISTORY_LIMIT`] after the
    /// creation, which stays.
    pub fn extend(&mut self, entries: impl IntoIterator<Item = HistoryEntry>) {
        self.entries.extend(entries);
        let kept = usize::from(self.entries.front().is_some_and(|e| matches!(e.event, HistoryEvent::Created { .. })));
        while self.entries.len() > HISTORY_LIMIT + kept {
            self.entries.remove(kept);
            self.dropped += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn entries_serialize_flat_with_their_time() {
        let entry = HistoryEntry {
            at_ms: 5,
            event: HistoryEvent::InputAnswered { keys: vec!["k".into()], by: Actor::Operator("ana".into()) },
        };
        let json = serde_json::to_value(&entry).unwrap();
        assert_eq!(json, json!({"at_ms": 5, "event": "input_answered", "keys": ["k"], "by": {"operator": "ana"}}));
        assert_eq!(serde_json::from_value::<HistoryEntry>(json).unwrap(), entry);
        let stored = HistoryEntry { at_ms: 9, event: HistoryEvent::CancelRequested { by: Actor::Client } };
        assert_eq!(stored.event_json(), r#"{"event":"cancel_requested","by":"client"}"#);
        assert_eq!(HistoryEntry::from_stored(9, &stored.event_json()), Some(stored));
        assert_eq!(HistoryEntry::from_stored(9, r#"{"event":"from_the_future"}"#), None);
    }

    #[test]
    fn a_history_keeps_the_newest_entries_and_counts_the_rest() {
        let mut history = TaskHistory::default();
        history
            .extend((0..HISTORY_LIMIT as u64 + 5).map(|at_ms| HistoryEntry { at_ms, event: HistoryEvent::Checkpoint }));
        assert_eq!(history.entries.len(), HISTORY_LIMIT);
        assert_eq!(history.dropped, 5);
        assert_eq!(history.entries.front().unwrap().at_ms, 5);
        // The creation stays first, whatever follows it.
        let task = TaskRecord::new("t".into(), "p".into(), "o".into(), "tool".into(), 7, None, None);
        let later = (0..HISTORY_LIMIT as u64 + 3).map(|at_ms| HistoryEntry { at_ms, event: HistoryEvent::Checkpoint });
        let history = TaskHistory::from_record(&task, later, 10);
        assert_eq!(history.entries.len(), HISTORY_LIMIT + 1);
        assert_eq!(history.entries[0], HistoryEntry::created(&task));
        assert_eq!((history.entries[1].at_ms, history.dropped), (3, 13));
    }
}
