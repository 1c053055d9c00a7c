//! Handing finished native work back to an asyncio loop: the loop reads a pipe, and a tokio
//! worker that finishes an awaitable's work queues its outcome and writes a byte only when the
//! queue was empty. Without this, each completion was a `loop.call_soon_threadsafe` from the
//! worker (pyo3-async-runtimes' way), which takes the GIL there: with 64 calls in flight the
//! workers queued up for the GIL the event loop held, and the loop waited for them in turn.
//! Outcomes become Python objects on the loop's thread, in one pass per wake-up.

use std::collections::HashMap;
use std::io::{Read, Write};
use std::os::fd::AsRawFd;
use std::sync::{Arc, LazyLock};

use parking_lot::Mutex;
use pyo3::prelude::*;

/// An outcome waiting for the loop: the asyncio future to settle, and how to make its value.
type Completion = (Py<PyAny>, Box<dyn FnOnce(Python<'_>) -> PyResult<Py<PyAny>> + Send>);

/// The completions of one event loop, and the pipe that wakes it.
pub(crate) struct Delivery {
    queue: Mutex<Vec<Completion>>,
    reader: std::io::PipeReader,
    writer: std::io::PipeWriter,
}

/// Each loop's delivery, by the loop's `id()` (`None` for a loop that cannot watch a pipe, so it
/// is not asked again): removed (and its pipe closed) when the loop is collected, before the id
/// can name another loop.
static DELIVERIES: LazyLock<Mutex<HashMap<usize, Option<Arc<Delivery>>>>> = LazyLock::new(Mutex::default);

impl Delivery {
    /// The delivery of `event_loop` (the running loop), made and registered with the loop's
    /// `add_reader` on first use; `None` where the loop cannot watch a pipe (then the caller
    /// falls back to `call_soon_threadsafe`).
    pub(crate) fn of(py: Python<'_>, event_loop: &Bound<'_, PyAny>) -> Option<Arc<Self>> {
        let key = event_loop.as_ptr() as usize;
        if let Some(found) = DELIVERIES.lock().get(&key) {
            return found.clone();
        }
        let (reader, writer) = std::io::pipe().ok()?;
        let fd = reader.as_raw_fd();
        let delivery = Arc::new(Self { queue: Mutex::new(Vec::new()), reader, writer });
        // When the loop goes, so do its delivery and pipe (set up first: a loop that cannot be
        // watched this way gets no reader). Without a finalizer nothing is remembered for it.
        let forget = Bound::new(py, Forget { key }).ok()?;
        py.import("weakref").ok()?.call_method1("finalize", (event_loop, forget)).ok()?;
        let drain = Bound::new(py, Drain { delivery: Arc::clone(&delivery) }).ok()?;
        let watched = event_loop.call_method1("add_reader", (fd, drain)).is_ok().then_some(delivery);
        DELIVERIES.lock().insert(key, watched.clone());
        watched
    }

    /// Queues `future`'s outcome, and wakes the loop if nothing was queued before it. Never
    /// takes the GIL.
    pub(crate) fn push(&self, completion: Completion) {
        let was_empty = {
            let mut queue = self.queue.lock();
            queue.push(completion);
            queue.len() == 1
        };
        if was_empty {
            // At most a byte or two are ever unread (one per empty -> queued change between two
            // drains), so the write never waits for the reader.
            let _ = (&self.writer).write(&[1]);
        }
    }

    /// On the loop's thread: settles every queued future.
    fn drain(&self, py: Python<'_>) {
        // The pipe is emptied before the queue is taken: a completion queued after the take
        // writes a byte that wakes the next drain.
        let mut bytes = [0u8; 64];
        let _ = (&self.reader).read(&mut bytes);
        let completions = std::mem::take(&mut *self.queue.lock());
        for (future, make) in completions {
            let future = future.bind(py);
            // A cancelled (or otherwise settled) future takes no outcome.
            if future.call_method0("done").and_then(|d| d.is_truthy()).unwrap_or(true) {
                continue;
            }
            let settled = match make(py) {
                Ok(value) => future.call_method1("set_result", (value,)),
                Err(error) => future.call_method1("set_exception", (error.into_value(py),)),
            };
            if let Err(e) = settled {
                e.write_unraisable(py, Some(future));
            }
        }
    }
}

/// The loop's reader callback.
#[pyclass(module = "mcp_tasks._native", frozen)]
pub(crate) struct Drain {
    delivery: Arc<Delivery>,
}

#[pymethods]
impl Drain {
    fn __call__(&self, py: Python<'_>) {
        self.delivery.drain(py);
    }
}

/// The loop's finalizer: drops its delivery (the pipe closes with it).
#[pyclass(module = "mcp_tasks._native", frozen)]
pub(crate) struct Forget {
    key: usize,
}

#[pymethods]
impl Forget {
    fn __call__(&self) {
        DELIVERIES.lock().remove(&self.key);
    }
}

/// A future's done callback: a cancelled future stops its native work.
#[pyclass(module = "mcp_tasks._native", frozen)]
pub(crate) struct AbortOnCancel {
    pub(crate) work: tokio::task::AbortHandle,
}

#[pymethods]
impl AbortOnCancel {
    fn __call__(&self, future: &Bound<'_, PyAny>) {
        if future.call_method0("cancelled").and_then(|c| c.is_truthy()).unwrap_or(false) {
            self.work.abort();
        }
    }
}
