//! Live updates: one watcher per view looks at the store's change mark every `LOOK_EVERY` and
//! counts the looks that found a change; `GET {prefix}/changes` answers a page with a
//! Server-Sent Event when the store's change id for what the page's viewer may see differs from
//! the one the page was rendered with.
//!
//! The id is the store's own ([`Admin::change_id`]: the newest last change among the viewer's
//! tasks, and how many share it), not this process's count: a page rendered by one worker can
//! hold its `/changes` on any other worker over the same store (behind a balancer, uvicorn or
//! gunicorn workers, a Node cluster), and a token limited to principals learns only of changes
//! to its principals' tasks. The count only says when to read the id again: ids are read once
//! per scope and look, however many pages wait.
//!
//! Why it costs the store the same at any rate of changes: however many tasks change, and however
//! many pages are open, the store is asked one cheap question per look ([`Admin::change_mark`]:
//! one pragma on SQLite, a counter fed by `LISTEN` on PostgreSQL), and, after a look that found
//! a change, one indexed query per principal scope that pages follow.
//!
//! Why one event per response: every face serves the view through the same request → response
//! function ([`crate::WebView::handle`]), which the Python and TypeScript bridges hand whole
//! bodies. A `/changes` request is held until something changes (at most `HOLD`), answered
//! with one event and a `retry:` field, and the browser's `EventSource` asks again with
//! `Last-Event-ID` — so a page that was away (a dropped connection, a laptop lid) learns at once
//! that it missed something, and the three faces answer the same bytes.
//!
//! Held requests are bounded: at most [`crate::WebOptions::max_held`] per process and
//! `HELD_PER_VIEWER` per operator (a browser opens six connections per host: six tabs each
//! holding one would leave none for the pages). Beyond either, a request is answered at once
//! and its page asks again after `BUSY_RETRY_MS`.
//!
//! [`Admin::change_mark`]: mcp_tasks::admin::Admin::change_mark
//! [`Admin::change_id`]: mcp_tasks::admin::Admin::change_id

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Weak};
use std::time::Duration;

use bytes::Bytes;
use http::{HeaderValue, Request, Response, StatusCode, header};
use tokio::sync::watch;

use crate::Inner;
use crate::auth::Viewer;

/// How often the watcher asks the store whether anything changed.
pub(crate) const LOOK_EVERY: Duration = Duration::from_millis(250);
/// The longest a `/changes` request is held when nothing changes.
pub(crate) const HOLD: Duration = Duration::from_secs(25);
/// How long a browser waits before asking again after an answer (coalesces a busy store's
/// changes into at most two reads of a page per second).
pub(crate) const RETRY_MS: u64 = 500;
/// How long a page whose request was not held waits before asking again.
pub(crate) const BUSY_RETRY_MS: u64 = 5_000;
/// The most `/changes` requests one operator (or the anonymous readers) holds at once.
pub(crate) const HELD_PER_VIEWER: usize = 4;
/// A watcher nobody used for this long stops; the next page starts another.
const IDLE: Duration = Duration::from_secs(60);

/// A principal scope: `None` for every task.
type Scope = Option<Vec<String>>;

/// The view's watcher and what it counted.
pub(crate) struct Live {
    /// The count of looks that found a change; its receivers are the held requests.
    count: watch::Sender<u64>,
    running: AtomicBool,
    /// When a page or a `/changes` request last asked (ms since `started`).
    last_used_ms: AtomicU64,
    started: std::time::Instant,
    /// Serialises starting the watcher.
    start: tokio::sync::Mutex<()>,
    /// The store's change id per scope, as read at a count.
    ids: std::sync::Mutex<HashMap<Scope, (u64, String)>>,
    /// Requests held now, per viewer, and in all.
    held: std::sync::Mutex<(HashMap<String, usize>, usize)>,
}

impl Live {
    pub(crate) fn new() -> Self {
        Self {
            count: watch::Sender::new(0),
            running: AtomicBool::new(false),
            last_used_ms: AtomicU64::new(0),
            started: std::time::Instant::now(),
            start: tokio::sync::Mutex::new(()),
            ids: std::sync::Mutex::default(),
            held: std::sync::Mutex::default(),
        }
    }

    fn touch(&self) {
        self.last_used_ms.store(u64::try_from(self.started.elapsed().as_millis()).unwrap_or(u64::MAX), Relaxed);
    }
}

/// A held request's place, given back when it is answered.
struct Held<'a> {
    live: &'a Live,
    key: String,
}

impl<'a> Held<'a> {
    fn take(live: &'a Live, key: String, most: usize) -> Option<Self> {
        let mut held = live.held.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let (per_viewer, total) = &mut *held;
        let mine = per_viewer.entry(key.clone()).or_default();
        if *total >= most || *mine >= HELD_PER_VIEWER {
            return None;
        }
        *mine += 1;
        *total += 1;
        Some(Self { live, key })
    }
}

impl Drop for Held<'_> {
    fn drop(&mut self) {
        let mut held = self.live.held.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let (per_viewer, total) = &mut *held;
        *total = total.saturating_sub(1);
        if let Some(mine) = per_viewer.get_mut(&self.key) {
            *mine = mine.saturating_sub(1);
            if *mine == 0 {
                per_viewer.remove(&self.key);
            }
        }
    }
}

/// The store's change id for what `principals` may see, as a page embeds it and `/changes`
/// compares it: starts the watcher when none runs (a page rendered after this call shows every
/// change it does not mark). `None` when the store cannot be watched (the page then polls).
pub(crate) async fn current(inner: &Arc<Inner>, principals: Option<&[String]>) -> Option<String> {
    let live = &inner.live;
    live.touch();
    if !live.running.load(Relaxed) {
        let _starting = live.start.lock().await;
        if !live.running.load(Relaxed) {
            let mark = inner.admin.change_mark().await.ok()?;
            // What happened while no watcher ran is read afresh: cached ids are stale.
            live.count.send_modify(|c| *c += 1);
            live.running.store(true, Relaxed);
            tokio::spawn(watch_store(Arc::downgrade(inner), mark));
        }
    }
    let count = *live.count.borrow();
    scoped_id(inner, principals, count).await
}

/// The change id of `principals`' scope, read from the store at most once per count.
async fn scoped_id(inner: &Arc<Inner>, principals: Option<&[String]>, count: u64) -> Option<String> {
    let scope: Scope = principals.map(<[String]>::to_vec);
    {
        let ids = inner.live.ids.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some((at, id)) = ids.get(&scope)
            && *at >= count
        {
            return Some(id.clone());
        }
    }
    let id = inner.admin.change_id(principals).await.ok()?;
    let mut ids = inner.live.ids.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    let slot = ids.entry(scope).or_insert_with(|| (count, id.clone()));
    if slot.0 <= count {
        *slot = (count, id.clone());
    }
    Some(id)
}

async fn watch_store(inner: Weak<Inner>, mut mark: u64) {
    loop {
        tokio::time::sleep(LOOK_EVERY).await;
        let Some(inner) = inner.upgrade() else { return };
        let live = &inner.live;
        let idle_for = live.started.elapsed().saturating_sub(Duration::from_millis(live.last_used_ms.load(Relaxed)));
        if live.count.receiver_count() == 0 && idle_for > IDLE {
            live.running.store(false, Relaxed);
            return;
        }
        match inner.admin.change_mark().await {
            Ok(now) if now != mark => {
                mark = now;
                live.count.send_modify(|c| *c += 1);
            }
            Ok(_) => {}
            // A store that cannot answer now: look again next time (the pages say so when read).
            Err(_) => {}
        }
    }
}

/// `GET {prefix}/changes`: one `change` event as soon as the store's id for what `viewer` may
/// see differs from the page's (`Last-Event-ID`, else `?since=`), or after `HOLD` a comment that
/// says nothing changed.
pub(crate) async fn changes(inner: &Arc<Inner>, request: &Request<Bytes>, viewer: &Viewer) -> Response<Bytes> {
    let since = request.headers().get("last-event-id").and_then(|v| v.to_str().ok()).map(str::to_owned).or_else(|| {
        crate::params::Params::parse(request.uri().query().unwrap_or_default().as_bytes())
            .get("since")
            .map(str::to_owned)
    });
    let principals = viewer.principals.as_deref();
    // Subscribed before looking, so a change between the look and the wait is not missed.
    let mut seen = inner.live.count.subscribe();
    let Some(now) = current(inner, principals).await else {
        return event_stream(
            StatusCode::SERVICE_UNAVAILABLE,
            "retry: 5000\n: the store cannot be watched\n\n".to_owned(),
        );
    };
    if since.as_deref() != Some(now.as_str()) {
        return change(&now);
    }
    let Some(_held) = Held::take(&inner.live, viewer.key(), inner.options.max_held) else {
        return event_stream(
            StatusCode::OK,
            format!("retry: {BUSY_RETRY_MS}\n: too many pages follow this view at once; ask again later\n\n"),
        );
    };
    let deadline = tokio::time::Instant::now() + HOLD;
    loop {
        let answer = tokio::time::timeout_at(deadline, seen.changed()).await;
        inner.live.touch();
        match answer {
            Ok(Ok(())) => {
                let count = *seen.borrow_and_update();
                match scoped_id(inner, principals, count).await {
                    Some(id) if since.as_deref() != Some(id.as_str()) => return change(&id),
                    // Nothing this viewer may see changed (or the store did not answer this
                    // time): keep waiting.
                    _ => {}
                }
            }
            _ => return event_stream(StatusCode::OK, format!("retry: {RETRY_MS}\n: nothing changed\n\n")),
        }
    }
}

fn change(id: &str) -> Response<Bytes> {
    event_stream(StatusCode::OK, format!("retry: {RETRY_MS}\nid: {id}\nevent: change\ndata: {id}\n\n"))
}

fn event_stream(status: StatusCode, body: String) -> Response<Bytes> {
    let mut response = Response::new(Bytes::from(body));
    *response.status_mut() = status;
    response.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("text/event-stream"));
    response
}
