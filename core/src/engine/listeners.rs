//! Who listens to which task: a change wakes only the subscriptions that follow its task.
//!
//! Every subscription used to hold a receiver of one broadcast channel of all changes, so each
//! change woke every open listen stream to look at a task it mostly did not follow: with 10,100
//! streams open and 1,000 changes a second, ten million wake-ups a second on two cores
//! (`tests/reliability/listeners.py`, docs/BENCHMARKS.md). Here each subscription has a queue,
//! indexed by the task ids it follows.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::task::{Context, Poll};

use futures::task::AtomicWaker;
use parking_lot::Mutex;

use crate::protocol::TaskRecord;

/// The subscriptions of an engine, by the task ids each follows.
#[derive(Default)]
pub(crate) struct Listeners {
    by_task: Mutex<HashMap<String, Vec<Arc<Queue>>>>,
}

impl Listeners {
    /// Hands `record` to every subscription following its task.
    pub(crate) fn publish(&self, record: &Arc<TaskRecord>) {
        // The queues are cloned out (one, most often) so no queue's lock is taken under the index's.
        let queues = match self.by_task.lock().get(record.id.as_str()) {
            Some(queues) => queues.clone(),
            None => return,
        };
        for queue in queues {
            queue.push(Arc::clone(record));
        }
    }

    /// Whether any subscription follows any task.
    pub(crate) fn any(&self) -> bool {
        !self.by_task.lock().is_empty()
    }

    /// Makes `queue` receive the changes of `id`.
    pub(crate) fn watch(&self, id: &str, queue: &Arc<Queue>) {
        self.by_task.lock().entry(id.to_owned()).or_default().push(Arc::clone(queue));
    }

    /// Stops `queue` receiving the changes of `id`.
    pub(crate) fn unwatch(&self, id: &str, queue: &Arc<Queue>) {
        let mut by_task = self.by_task.lock();
        if let Some(queues) = by_task.get_mut(id) {
            queues.retain(|q| !Arc::ptr_eq(q, queue));
            if queues.is_empty() {
                by_task.remove(id);
            }
        }
    }
}

/// One subscription's changes not yet taken, at most one per task (a newer state of a task
/// replaces an older one still waiting, in its place), so a reader that falls behind holds one
/// state per task it follows, not every change.
#[derive(Default)]
pub(crate) struct Queue {
    pending: Mutex<Pending>,
    /// The one reader's waker (a queue has one subscription reading it): smaller than a
    /// `Notify`, and polled, so a listen body can read its queue without a future of its own.
    ready: AtomicWaker,
}

/// The waiting states: their tasks in arrival order, and each task's newest state. Indexed, so
/// a push to a reader that stopped reading while following 20,000 tasks costs what a push to
/// any other does (finding the waiting state in a list cost the publisher, and so every other
/// stream, a scan of up to 20,000 entries per change).
#[derive(Default)]
struct Pending {
    order: VecDeque<String>,
    newest: HashMap<String, Arc<TaskRecord>>,
}

impl Pending {
    fn push(&mut self, record: Arc<TaskRecord>) {
        match self.newest.entry(record.id.clone()) {
            std::collections::hash_map::Entry::Occupied(mut waiting) => {
                // An older state arriving late leaves the newer one waiting.
                if waiting.get().version <= record.version {
                    waiting.insert(record);
                }
            }
            std::collections::hash_map::Entry::Vacant(slot) => {
                self.order.push_back(record.id.clone());
                slot.insert(record);
            }
        }
    }

    fn pop(&mut self) -> Option<Arc<TaskRecord>> {
        let id = self.order.pop_front()?;
        let record = self.newest.remove(&id);
        if self.order.is_empty() {
            // Room grown by a burst is not kept for the stream's life.
            *self = Self::default();
        }
        record
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.order.len()
    }

    #[cfg(test)]
    fn is_empty(&self) -> bool {
        self.order.is_empty()
    }
}

impl Queue {
    fn push(&self, record: Arc<TaskRecord>) {
        self.pending.lock().push(record);
        self.ready.wake();
    }

    /// The next change, or `Pending` until one arrives (the reader is woken then).
    pub(crate) fn poll_pop(&self, cx: &mut Context<'_>) -> Poll<Arc<TaskRecord>> {
        if let Some(record) = self.pending.lock().pop() {
            return Poll::Ready(record);
        }
        self.ready.register(cx.waker());
        // Looked at again after registering: a push between the first look and the
        // registration woke nobody.
        match self.pending.lock().pop() {
            Some(record) => Poll::Ready(record),
            None => Poll::Pending,
        }
    }

    /// The next change, waiting for one.
    #[cfg(test)]
    pub(crate) async fn pop(&self) -> Arc<TaskRecord> {
        std::future::poll_fn(|cx| self.poll_pop(cx)).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(id: &str, version: u64) -> Arc<TaskRecord> {
        let mut record = TaskRecord::new(id.into(), "p".into(), "o".into(), "t".into(), 0, None, None);
        record.version = version;
        Arc::new(record)
    }

    #[tokio::test]
    async fn a_change_reaches_only_the_queues_following_its_task() {
        let listeners = Listeners::default();
        let (a, b) = (Arc::new(Queue::default()), Arc::new(Queue::default()));
        listeners.watch("t1", &a);
        listeners.watch("t2", &b);
        listeners.publish(&record("t1", 1));
        assert_eq!(a.pop().await.id, "t1");
        assert!(b.pending.lock().is_empty(), "t2's queue heard nothing of t1");
        listeners.unwatch("t1", &a);
        listeners.publish(&record("t1", 2));
        assert!(a.pending.lock().is_empty(), "an unwatched task is not delivered");
        listeners.unwatch("t2", &b);
        assert!(!listeners.any(), "the index forgets a task nobody follows");
    }

    #[tokio::test]
    async fn a_slow_reader_holds_one_state_per_task_the_newest() {
        let listeners = Listeners::default();
        let queue = Arc::new(Queue::default());
        listeners.watch("t1", &queue);
        listeners.watch("t2", &queue);
        for version in 1..=100 {
            listeners.publish(&record("t1", version));
        }
        listeners.publish(&record("t2", 1));
        listeners.publish(&record("t1", 50)); // late and older: the newer state stays
        assert_eq!(queue.pending.lock().len(), 2);
        let first = queue.pop().await;
        assert_eq!((first.id.as_str(), first.version), ("t1", 100));
        assert_eq!(queue.pop().await.id, "t2");
    }

    #[tokio::test]
    async fn a_waiting_reader_is_woken_by_the_next_push_and_an_emptied_queue_keeps_no_room() {
        let queue = Arc::new(Queue::default());
        let reader = tokio::spawn({
            let queue = Arc::clone(&queue);
            async move { queue.pop().await.id.clone() }
        });
        // The test's runtime has one thread: the reader runs to its wait before the push.
        tokio::task::yield_now().await;
        assert!(!reader.is_finished());
        queue.push(record("t1", 1));
        assert_eq!(reader.await.unwrap(), "t1");
        for id in ["a", "b", "c", "d", "e"] {
            queue.push(record(id, 1));
        }
        for _ in 0..5 {
            queue.pop().await;
        }
        let pending = queue.pending.lock();
        assert_eq!((pending.order.capacity(), pending.newest.capacity()), (0, 0));
    }
}
