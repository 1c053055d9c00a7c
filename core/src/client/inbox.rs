//! A followed task's inbox: what its [`TaskExecution`](super::TaskExecution) asks of its driver
//! and what its shared listen stream hears about it, in the order they came.
//!
//! A queue behind a lock and one wake-up, instead of a tokio channel for each: a tokio channel
//! allocates a block of 32 slots up front, and with two per task those blocks were the largest
//! part of a followed task's memory (`client-bench --only many`).

use std::collections::VecDeque;

use parking_lot::Mutex;
use serde_json::Value;
use tokio::sync::Notify;

use crate::protocol::client::{CancelMode, DriverError};

/// What the execution asks of its driver.
#[derive(Debug)]
pub(crate) enum Command {
    /// Answer input request `.0` with `.1`; `.2` hears whether the driver took it.
    Answer(String, Value, tokio::sync::oneshot::Sender<Result<(), DriverError>>),
    /// Send `tasks/cancel`.
    Cancel(CancelMode),
    /// Stop following (the execution was detached or dropped).
    Detach,
}

/// What a subscribed task hears from the shared listen streams.
#[derive(Debug)]
pub(crate) enum Frame {
    /// A stream accepted the task: from now on it reports every change.
    Accepted,
    /// The params of a `notifications/tasks` about the task.
    Update(Value),
    /// No stream carries the task (any more): it was not accepted, or its stream ended. Poll.
    Unlistened,
}

/// One message to a driver.
#[derive(Debug)]
pub(crate) enum Inbound {
    /// From the execution.
    Command(Command),
    /// From the listen streams.
    Frame(Frame),
}

/// A driver's inbox (see the module docs).
#[derive(Debug, Default)]
pub(crate) struct Inbox {
    state: Mutex<State>,
    wake: Notify,
}

#[derive(Debug, Default)]
struct State {
    items: VecDeque<Inbound>,
    /// The driver is gone: nothing more is taken.
    closed: bool,
}

impl Inbox {
    /// Queues `item` for the driver; false (and `item` dropped) once the driver is gone.
    pub(crate) fn push(&self, item: Inbound) -> bool {
        {
            let mut state = self.state.lock();
            if state.closed {
                return false;
            }
            state.items.push_back(item);
        }
        // Stores a permit when the driver is not waiting: its next wait returns at once.
        self.wake.notify_one();
        true
    }

    /// The next message, waiting for one.
    pub(crate) async fn next(&self) -> Inbound {
        loop {
            {
                let mut state = self.state.lock();
                if let Some(item) = state.items.pop_front() {
                    if state.items.is_empty() {
                        // Messages are few (a task's changes); room kept for them would stay
                        // with every followed task.
                        state.items = VecDeque::new();
                    }
                    return item;
                }
            }
            self.wake.notified().await;
        }
    }

    /// The driver is gone: later pushes fail, and what waits is dropped (an answer's sender
    /// with it, so its caller hears the task is finished).
    pub(crate) fn close(&self) {
        let items = {
            let mut state = self.state.lock();
            state.closed = true;
            std::mem::take(&mut state.items)
        };
        drop(items);
    }

    /// Whether the driver is gone.
    pub(crate) fn is_closed(&self) -> bool {
        self.state.lock().closed
    }
}
