//! A followed task's slot: the one place where its [`TaskExecution`](super::TaskExecution), its
//! driver and the shared listen streams meet.
//!
//! It holds what the execution reads (the latest state, the outcome), what reaches the driver
//! (commands and listen frames, in the order they came) and, while the task waits for one of
//! those or for its next poll, the driver itself ([`Follow`]). A waiting task has no tokio task,
//! future or channel of its own: a message, or its deadline in the client's [`Timers`], hands the
//! driver to a new step ([`super::step`]), which runs until the task waits again. Following
//! 10,000 tasks at once, a tokio task with its future, two watch channels and a second copy of
//! the reference per task had been more than half of the client's memory per task
//! (`client-bench --only many`).

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};
use std::sync::{Arc, Weak};

use parking_lot::Mutex;
use serde_json::Value;
use tokio::sync::Notify;

use super::{Follow, Inner};
use crate::clock::Clock;
use crate::protocol::DetailedTask;
use crate::protocol::client::{CancelMode, DriverError, Outcome};

/// What the execution asks of its driver.
#[derive(Debug)]
pub(super) enum Command {
    /// Answer input request `.0` with `.1`; `.2` hears whether the driver took it.
    Answer(String, Value, tokio::sync::oneshot::Sender<Result<(), DriverError>>),
    /// Send `tasks/cancel`.
    Cancel(CancelMode),
    /// Stop following (the execution was detached or dropped).
    Detach,
}

/// What a subscribed task hears from the shared listen streams.
#[derive(Debug)]
pub(super) enum Frame {
    /// A stream accepted the task: from now on it reports every change.
    Accepted,
    /// The params of a `notifications/tasks` about the task.
    Update(Value),
    /// No stream carries the task (any more): it was not accepted, or its stream ended. Poll.
    Unlistened,
}

/// One message to a driver.
#[derive(Debug)]
pub(super) enum Inbound {
    /// From the execution.
    Command(Command),
    /// From the listen streams.
    Frame(Frame),
}

/// A followed task's slot (see the module docs).
pub(super) struct Slot {
    state: Mutex<State>,
    /// Wakes the execution's readers when a state or the outcome arrives, or the driver ends.
    changed: Notify,
    /// The client, to run the driver's next step: weak, since the client's listen streams hold
    /// the slots of the tasks they carry.
    client: Weak<Inner>,
}

struct State {
    /// The latest state seen, while a step runs (or the driver is gone); while the driver waits
    /// here, its own copy is read instead. How many states were published (a reader's cursor).
    /// (Both boxed: most of the time a slot holds neither, and inline they were most of it.)
    latest: Option<Box<DetailedTask>>,
    version: u64,
    outcome: Option<Box<Outcome>>,
    /// Messages for the driver, oldest first.
    items: VecDeque<Inbound>,
    /// The driver is gone (with its outcome, detached, or the client closed): nothing more is
    /// taken, and readers stop waiting.
    closed: bool,
    /// The driver, while it waits.
    parked: Option<Box<Follow>>,
    /// The earliest deadline of this slot's entries in [`Timers`] that has not fired yet.
    armed: Option<u64>,
    /// The call's client span, ended with the outcome (boxed: most clients record no spans).
    span: Option<Box<tracing::Span>>,
}

impl Slot {
    /// A slot for a task last seen as `latest`; closed from the start when its `outcome` is
    /// known already (no driver follows it).
    pub(super) fn new(latest: DetailedTask, outcome: Option<Outcome>, client: Weak<Inner>) -> Arc<Self> {
        let closed = outcome.is_some();
        Arc::new(Self {
            state: Mutex::new(State {
                latest: Some(Box::new(latest)),
                version: 1,
                outcome: outcome.map(Box::new),
                items: VecDeque::new(),
                closed,
                parked: None,
                armed: None,
                span: None,
            }),
            changed: Notify::new(),
            client,
        })
    }

    /// Queues `item` for the driver, waking it if it waits; false (and `item` dropped) once the
    /// driver is gone.
    pub(super) fn push(self: &Arc<Self>, item: Inbound) -> bool {
        let parked = {
            let mut state = self.state.lock();
            if state.closed {
                return false;
            }
            if matches!(item, Inbound::Command(Command::Detach)) && state.parked.is_some() {
                // A waiting driver that is told to stop needs no step: it ends here.
                let follow = state.unpark();
                drop(state);
                self.close(None);
                if let (Some(follow), Some(client)) = (follow, self.client.upgrade()) {
                    client.listens.unsubscribe(follow.driver.task_id());
                }
                return true;
            }
            state.items.push_back(item);
            state.unpark()
        };
        if let Some(follow) = parked {
            self.resume(follow);
        }
        true
    }

    /// Runs the driver's next step; with the client gone, the task is followed no more.
    fn resume(self: &Arc<Self>, follow: Box<Follow>) {
        match self.client.upgrade() {
            Some(client) => super::run_step(client, Arc::clone(self), follow),
            None => self.close(None),
        }
    }

    /// The oldest message for the driver, if any.
    pub(super) fn take(&self) -> Option<Inbound> {
        let mut state = self.state.lock();
        let item = state.items.pop_front();
        if state.items.is_empty() && state.items.capacity() > 0 {
            // Messages are few (a task's changes); room kept for them would stay with every
            // followed task.
            state.items = VecDeque::new();
        }
        item
    }

    /// Leaves the driver here until a message comes or `follow.wake_at` (when the returned
    /// deadline is `Some`, the caller enters it in [`Timers`]); gives it back when a message
    /// came meanwhile.
    pub(super) fn park(&self, follow: Box<Follow>) -> Result<Option<u64>, Box<Follow>> {
        let mut state = self.state.lock();
        if !state.items.is_empty() {
            return Err(follow);
        }
        let at = follow.wake_at;
        state.parked = Some(follow);
        state.latest = None; // the parked driver's copy is read meanwhile
        // An earlier entry fires first and enters this one then (`timer_fired`).
        if state.armed.is_some_and(|armed| armed <= at) {
            return Ok(None);
        }
        state.armed = Some(at);
        Ok(Some(at))
    }

    /// A deadline of this slot's came at `now`: runs a waiting driver that is due, or gives the
    /// deadline it waits for to enter in [`Timers`].
    pub(super) fn timer_fired(self: &Arc<Self>, now: u64) -> Option<u64> {
        let due = {
            let mut state = self.state.lock();
            state.armed = None;
            match state.parked.as_ref().map(|follow| follow.wake_at) {
                Some(at) if at > now => {
                    state.armed = Some(at);
                    return Some(at);
                }
                Some(_) => state.unpark(),
                None => None,
            }
        };
        if let Some(follow) = due {
            self.resume(follow);
        }
        None
    }

    /// Publishes a newer state of the task.
    pub(super) fn publish(&self, latest: Box<DetailedTask>) {
        {
            let mut state = self.state.lock();
            state.latest = Some(latest);
            state.version += 1;
        }
        self.changed.notify_waiters();
    }

    /// The driver is gone, with the task's `outcome` if it had one: later pushes fail, what
    /// waits is dropped (an answer's sender with it, so its caller hears the task is finished),
    /// and readers are woken.
    pub(super) fn close(&self, outcome: Option<Outcome>) {
        let (items, span) = {
            let mut state = self.state.lock();
            if let Some(outcome) = outcome {
                state.outcome = Some(Box::new(outcome));
            }
            state.closed = true;
            state.unpark();
            let span = state.outcome.is_some().then(|| state.span.take()).flatten();
            (std::mem::take(&mut state.items), span.map(|span| (span, state.outcome.clone())))
        };
        drop(items);
        if let Some((span, outcome)) = span {
            end_span(&span, outcome.as_deref());
        }
        self.changed.notify_waiters();
    }

    /// Holds the call's client span until the task's outcome (ends it now if that is known).
    pub(super) fn keep_span(&self, span: tracing::Span) {
        if span.is_disabled() {
            return;
        }
        let mut state = self.state.lock();
        match state.outcome.clone() {
            Some(outcome) if state.closed => {
                drop(state);
                end_span(&span, Some(&outcome));
            }
            _ => state.span = Some(Box::new(span)),
        }
    }

    /// Whether the driver is gone.
    pub(super) fn is_closed(&self) -> bool {
        self.state.lock().closed
    }

    /// The latest state seen.
    pub(super) fn latest(&self) -> DetailedTask {
        self.state.lock().latest().clone()
    }

    /// Whether the outcome is known.
    pub(super) fn has_outcome(&self) -> bool {
        self.state.lock().outcome.is_some()
    }

    /// The outcome, once known; `None` when the driver ended without one.
    pub(super) async fn outcome(&self) -> Option<Outcome> {
        loop {
            let changed = self.changed.notified();
            tokio::pin!(changed);
            // Registered before the state is read, so a change in between still wakes it.
            changed.as_mut().enable();
            {
                let state = self.state.lock();
                if state.outcome.is_some() || state.closed {
                    return state.outcome.as_deref().cloned();
                }
            }
            changed.await;
        }
    }

    /// The first state newer than the `seen`th (the latest, if several came), moving `seen` on;
    /// `None` once the driver is gone and every state was seen.
    pub(super) async fn next_state(&self, seen: &mut u64) -> Option<DetailedTask> {
        loop {
            let changed = self.changed.notified();
            tokio::pin!(changed);
            changed.as_mut().enable();
            {
                let state = self.state.lock();
                if state.version > *seen {
                    *seen = state.version;
                    return Some(state.latest().clone());
                }
                if state.closed {
                    return None;
                }
            }
            changed.await;
        }
    }
}

impl State {
    /// Takes the waiting driver, if one waits, and the slot's own copy of the latest state back
    /// from it.
    fn unpark(&mut self) -> Option<Box<Follow>> {
        let follow = self.parked.take()?;
        self.latest = Some(Box::new(follow.driver.latest().clone()));
        Some(follow)
    }

    /// The latest state seen: the slot's copy, or the waiting driver's.
    fn latest(&self) -> &DetailedTask {
        match (&self.latest, &self.parked) {
            (Some(latest), _) => latest,
            (None, Some(follow)) => follow.driver.latest(),
            // Only a parked driver's copy is ever dropped, and taking it back restores it.
            (None, None) => unreachable!("a slot without its latest state"),
        }
    }
}

/// The deadlines of a client's waiting drivers, in one heap served by one tokio task.
#[derive(Default)]
pub(super) struct Timers {
    heap: Mutex<BinaryHeap<Reverse<Entry>>>,
    /// Wakes the timer task when a deadline earlier than every other enters.
    earlier: Notify,
    /// Whether the timer task runs (started by the first deadline, on the runtime of the step
    /// that entered it).
    started: std::sync::atomic::AtomicBool,
}

struct Entry {
    at: u64,
    slot: Weak<Slot>,
}

impl PartialEq for Entry {
    fn eq(&self, other: &Self) -> bool {
        self.at == other.at
    }
}
impl Eq for Entry {}
impl PartialOrd for Entry {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Entry {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.at.cmp(&other.at)
    }
}

impl Timers {
    /// Enters `slot`'s deadline `at` (client clock milliseconds).
    pub(super) fn arm(self: &Arc<Self>, client: &Inner, slot: &Arc<Slot>, at: u64) {
        let earliest = {
            let mut heap = self.heap.lock();
            let earliest = heap.peek().is_none_or(|Reverse(top)| at < top.at);
            heap.push(Reverse(Entry { at, slot: Arc::downgrade(slot) }));
            earliest
        };
        if !self.started.swap(true, std::sync::atomic::Ordering::AcqRel) {
            tokio::spawn(run_timers(Arc::clone(self), Arc::clone(&client.clock), client.closed.clone()));
        } else if earliest {
            self.earlier.notify_one();
        }
    }
}

/// Fires the deadlines until the client closes (or is dropped, which closes it). Holds no
/// reference to the client: a due slot reaches it through its own.
async fn run_timers(timers: Arc<Timers>, clock: Arc<dyn Clock>, closed: tokio_util::sync::CancellationToken) {
    loop {
        let now = clock.now_ms();
        let mut due = Vec::new();
        {
            let mut heap = timers.heap.lock();
            while heap.peek().is_some_and(|Reverse(top)| top.at <= now) {
                if let Some(Reverse(entry)) = heap.pop() {
                    due.push(entry.slot);
                }
            }
            if heap.is_empty() && heap.capacity() > 64 {
                heap.shrink_to_fit();
            }
        }
        for slot in due.into_iter().filter_map(|slot| slot.upgrade()) {
            if let Some(at) = slot.timer_fired(now) {
                timers.heap.lock().push(Reverse(Entry { at, slot: Arc::downgrade(&slot) }));
            }
        }
        // Read after the due ones ran, which may have entered earlier deadlines.
        let next = timers.heap.lock().peek().map(|Reverse(top)| top.at);
        if next.is_some_and(|at| at <= now) {
            continue;
        }
        let sleep = async {
            match next {
                Some(at) => {
                    let ms = at.saturating_sub(clock.now_ms()).min(3_600_000);
                    tokio::time::sleep(std::time::Duration::from_millis(ms)).await;
                }
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            () = closed.cancelled() => return,
            () = sleep => {}
            () = timers.earlier.notified() => {}
        }
    }
}

/// Records the task's outcome on the call's client span (which ends when dropped).
fn end_span(span: &tracing::Span, outcome: Option<&Outcome>) {
    let status = match outcome {
        Some(Outcome::Completed { .. }) => "completed",
        Some(Outcome::Failed { error }) => {
            span.record("error.type", error.code.to_string());
            span.record("otel.status_code", "error");
            "failed"
        }
        Some(Outcome::Cancelled) => "cancelled",
        Some(Outcome::Gone) => "gone",
        Some(Outcome::Expired) => "expired",
        None => return,
    };
    span.record("task.status", status);
}
