//! Shared `subscriptions/listen` streams: the tasks one client follows share a bounded number of
//! streams, each filtering many task ids, instead of a stream (over HTTP, a connection) per task.
//!
//! A task that wants notifications subscribes with its slot, where its frames go. Ids wait
//! in `pending` until one opener task takes them all (up to [`MAX_TASKS_PER_LISTEN`]) into one new
//! stream, so ids that arrive while a stream is being opened share the next one. At
//! [`MAX_LISTEN_STREAMS`] open streams, the one carrying the fewest live tasks makes room: a stream
//! for its live ids and the pending ones replaces it (every stream sends each task's current
//! state first, so nothing is missed between the two). A pump per stream routes each frame by
//! its `taskId`. A task whose id the server did not accept, or whose stream ended or failed, is
//! told [`Frame::Unlistened`], and its driver polls from then on, as with no listen at all.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use parking_lot::Mutex;
use serde_json::Value;
use tokio::sync::mpsc;

use super::slot::{Frame, Inbound, Slot};
use super::transport::Transport;

/// The most listen streams one client keeps open at once.
pub const MAX_LISTEN_STREAMS: usize = 16;
/// The most task ids one listen stream filters.
pub const MAX_TASKS_PER_LISTEN: usize = 1_024;

/// The listen streams of one client.
pub(crate) struct ListenHub {
    shared: Arc<Shared>,
}

struct Shared {
    transport: Arc<dyn Transport>,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    /// Every task being followed through a stream, or waiting for one.
    subscribers: HashMap<String, Subscriber>,
    /// Ids waiting for a stream, oldest first.
    pending: Vec<String>,
    /// The open streams, by number: the ids each was opened for, and its pump.
    streams: HashMap<u64, Stream>,
    next_stream: u64,
    /// True while an opener task runs (there is at most one).
    opening: bool,
}

struct Subscriber {
    /// Its task's slot, where its frames go.
    slot: Arc<Slot>,
    /// The stream that carries it; `None` while it waits.
    stream: Option<u64>,
}

impl Subscriber {
    /// Tells the driver; false when it is gone.
    fn tell(&self, frame: Frame) -> bool {
        self.slot.push(Inbound::Frame(frame))
    }
}

struct Stream {
    ids: Vec<String>,
    pump: tokio::task::AbortHandle,
}

impl State {
    fn live(&self, id: &str, stream: u64) -> bool {
        self.subscribers.get(id).is_some_and(|s| s.stream == Some(stream) && !s.slot.is_closed())
    }

    /// Stops carrying `id`: its driver polls from now on.
    fn unlisten(&mut self, id: &str) {
        if let Some(s) = self.subscribers.remove(id) {
            s.tell(Frame::Unlistened);
        }
    }

    /// Spawns the opener if ids wait and none runs.
    fn wake_opener(&mut self, shared: &Arc<Shared>) {
        if !self.pending.is_empty() && !self.opening {
            self.opening = true;
            tokio::spawn(open_pending(Arc::clone(shared)));
        }
    }
}

impl ListenHub {
    pub(crate) fn new(transport: Arc<dyn Transport>) -> Self {
        Self { shared: Arc::new(Shared { transport, state: Mutex::new(State::default()) }) }
    }

    /// Follows `task_id` through a shared stream, telling its `slot` [`Frame::Accepted`] once a
    /// stream carries it, then its frames' params, and [`Frame::Unlistened`] when no stream
    /// carries it (not accepted, or its stream ended): then poll.
    pub(crate) fn subscribe(&self, task_id: &str, slot: Arc<Slot>) {
        let mut state = self.shared.state.lock();
        state.subscribers.insert(task_id.to_owned(), Subscriber { slot, stream: None });
        state.pending.push(task_id.to_owned());
        state.wake_opener(&self.shared);
    }

    /// Stops following `task_id` (its driver finished or went away).
    pub(crate) fn unsubscribe(&self, task_id: &str) {
        self.shared.state.lock().subscribers.remove(task_id);
    }

    /// Closes every stream at once (the client is closing): nothing is followed any more.
    pub(crate) fn close(&self) {
        let mut state = self.shared.state.lock();
        state.subscribers.clear();
        state.pending.clear();
        for (_, stream) in state.streams.drain() {
            stream.pump.abort(); // its receiver goes, and the transport closes the stream
        }
    }
}

/// Opens streams for the pending ids until none wait.
async fn open_pending(shared: Arc<Shared>) {
    loop {
        let (ids, replaced) = {
            let mut state = shared.state.lock();
            let State { pending, subscribers, .. } = &mut *state;
            pending.retain(|id| subscribers.get(id).is_some_and(|s| s.stream.is_none() && !s.slot.is_closed()));
            if state.pending.is_empty() {
                state.opening = false;
                return;
            }
            let mut ids = Vec::new();
            let mut replaced = None;
            if state.streams.len() >= MAX_LISTEN_STREAMS {
                // The stream carrying the fewest live tasks makes room; its live ids move along.
                let fewest =
                    state.streams.iter().map(|(n, s)| (s.ids.iter().filter(|id| state.live(id, *n)).count(), *n)).min();
                if let Some((_, n)) = fewest {
                    ids = state.streams[&n].ids.iter().filter(|id| state.live(id, n)).cloned().collect();
                    replaced = Some(n);
                }
            }
            let room = MAX_TASKS_PER_LISTEN.saturating_sub(ids.len()).min(state.pending.len());
            ids.extend(state.pending.drain(..room));
            (ids, replaced)
        };
        let opened = shared.transport.listen(&ids).await;
        let mut state = shared.state.lock();
        match opened {
            Ok(Some(stream)) => {
                let number = state.next_stream;
                state.next_stream += 1;
                // A set: a stream carries up to MAX_TASKS_PER_LISTEN ids, each looked up here.
                let accepted: HashSet<&str> = stream.accepted.iter().map(String::as_str).collect();
                let mut carried = Vec::with_capacity(accepted.len());
                for id in &ids {
                    let accepted = accepted.contains(id.as_str());
                    match state.subscribers.get_mut(id) {
                        Some(s) if accepted => {
                            // A task moved from a replaced stream was told already.
                            if s.stream.is_none() {
                                s.tell(Frame::Accepted);
                            }
                            s.stream = Some(number);
                            carried.push(id.clone());
                        }
                        // Not accepted: its driver polls.
                        Some(_) => state.unlisten(id),
                        None => {}
                    }
                }
                // With nobody left to carry (the client closed, or every task finished meanwhile),
                // dropping the stream here closes it.
                if !carried.is_empty() {
                    let pump = tokio::spawn(pump(Arc::clone(&shared), number, stream.updates)).abort_handle();
                    state.streams.insert(number, Stream { ids: carried, pump });
                }
                if let Some(old) = replaced.and_then(|n| state.streams.remove(&n)) {
                    old.pump.abort(); // its receiver goes, and the transport closes the stream
                }
            }
            // No listen here, or it failed: these tasks poll (a replaced stream stays as it was).
            _ => {
                for id in &ids {
                    if state.subscribers.get(id).is_some_and(|s| s.stream.is_none()) {
                        state.unlisten(id);
                    }
                }
            }
        }
    }
}

/// Routes one stream's frames to their tasks until it ends; then its tasks poll.
async fn pump(shared: Arc<Shared>, number: u64, mut updates: mpsc::Receiver<Value>) {
    while let Some(params) = updates.recv().await {
        // A frame without a task id is about no task this client follows.
        let Some(id) = params.get("taskId").and_then(Value::as_str).map(str::to_owned) else { continue };
        let mut state = shared.state.lock();
        if let Some(s) = state.subscribers.get(&id)
            && s.stream == Some(number)
            && !s.tell(Frame::Update(params))
        {
            state.subscribers.remove(&id); // its driver is gone
        }
    }
    let mut state = shared.state.lock();
    if let Some(stream) = state.streams.remove(&number) {
        for id in &stream.ids {
            if state.subscribers.get(id).is_some_and(|s| s.stream == Some(number)) {
                state.unlisten(id);
            }
        }
    }
    state.wake_opener(&shared);
}
