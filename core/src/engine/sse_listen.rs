//! A listen stream as a binding serves it from its own event loop: the subscription, its SSE
//! framing, and a close that any thread may call.

use tokio::sync::{Mutex, Notify};

use super::{LISTEN_WRITE_BYTES, Subscription};
use crate::protocol::server::{ListenFrames, sse_event};

/// One `subscriptions/listen` stream for a writer outside this crate's host (the Node and Python
/// servers): send [`SseListen::ack`], then every piece [`SseListen::next_events`] gives, then
/// [`SseListen::close_event`]. When the client goes away, [`SseListen::close`] ends a waiting
/// call and lets the subscription go at once, so its tasks stop queueing states for a reader
/// that is gone, rather than when the binding's object is collected.
pub struct SseListen {
    frames: ListenFrames,
    ack: String,
    /// Taken out once the stream is over or closed; `None` then answers every later call.
    subscription: Mutex<Option<Subscription>>,
    /// Woken by `close`. Its stored permit (`notify_one`) also ends a call that took the lock
    /// before `close` and has not begun to wait yet, which `notify_waiters` alone would miss.
    closed: Notify,
}

impl SseListen {
    /// The stream of `subscription`, its events framed by `frames` (the listen request's).
    pub fn new(subscription: Subscription, frames: ListenFrames) -> Self {
        let ack = sse_event(&frames.ack(&subscription.accepted));
        Self { frames, ack, subscription: Mutex::new(Some(subscription)), closed: Notify::new() }
    }

    /// The acknowledgement: the stream's first SSE event.
    pub fn ack(&self) -> &str {
        &self.ack
    }

    /// The next task states as SSE text ([`Subscription::next_events`], up to
    /// [`LISTEN_WRITE_BYTES`]): waits for the first. `None` once every accepted task is
    /// terminal and reported, or once [`SseListen::close`] was called; the subscription is let
    /// go then. Calls are served one after another.
    pub async fn next_events(&self) -> Option<String> {
        let mut held = self.subscription.lock().await;
        let subscription = held.as_mut()?;
        let events = tokio::select! {
            () = self.closed.notified() => None,
            events = subscription.next_events(&self.frames, LISTEN_WRITE_BYTES) => events,
        };
        if events.is_none() {
            *held = None;
        }
        events
    }

    /// Stops the stream (its client went away): a [`SseListen::next_events`] waiting, and every
    /// later one, gives `None`. With no call waiting, the subscription is let go here; a waiting
    /// call lets it go as it returns.
    pub fn close(&self) {
        self.closed.notify_one();
        self.closed.notify_waiters();
        if let Ok(mut held) = self.subscription.try_lock() {
            *held = None;
        }
    }

    /// The listen request's result: the SSE event that ends the stream gracefully.
    pub fn close_event(&self) -> String {
        sse_event(&self.frames.close())
    }
}
