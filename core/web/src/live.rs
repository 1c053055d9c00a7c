//! Live updates: one watcher per view looks at the store's change mark every
//! `LOOK_EVERY` and counts the looks that found a change; `GET {prefix}/changes` answers a page
//! with a Server-Sent Event when that count moves past the one the page saw.
//!
//! Why it costs the store the same at any rate of changes: however many tasks change, and however
//! many pages are open, the store is asked one cheap question per look ([`Admin::change_mark`]:
//! one pragma on SQLite, a counter fed by `LISTEN` on PostgreSQL), and a page reads itself again
//! at most once per event, events being at most one per look and per `RETRY_MS`.
//!
//! Why one event per response: every face serves the view through the same request → response
//! function ([`crate::WebView::handle`]), which the Python and TypeScript bridges hand whole
//! bodies. A `/changes` request is held until something changes (at most `HOLD`), answered
//! with one event and a `retry:` field, and the browser's `EventSource` asks again with
//! `Last-Event-ID` — so a page that was away (a dropped connection, a laptop lid) learns at once
//! that it missed something, and the three faces answer the same bytes.
//!
//! [`Admin::change_mark`]: mcp_tasks::admin::Admin::change_mark

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Weak};
use std::time::Duration;

use bytes::Bytes;
use http::{HeaderValue, Request, Response, StatusCode, header};
use tokio::sync::watch;

use crate::Inner;

/// How often the watcher asks the store whether anything changed.
pub(crate) const LOOK_EVERY: Duration = Duration::from_millis(250);
/// The longest a `/changes` request is held when nothing changes.
pub(crate) const HOLD: Duration = Duration::from_secs(25);
/// How long a browser waits before asking again after an answer (coalesces a busy store's
/// changes into at most two reads of a page per second).
pub(crate) const RETRY_MS: u64 = 500;
/// A watcher nobody used for this long stops; the next page starts another.
const IDLE: Duration = Duration::from_secs(60);

/// The view's watcher and what it counted.
pub(crate) struct Live {
    /// The count of looks that found a change; its receivers are the held requests.
    count: watch::Sender<u64>,
    running: AtomicBool,
    /// When a page or a `/changes` request last asked (ms since `started`).
    last_used_ms: AtomicU64,
    started: std::time::Instant,
    /// Tells this view's counts apart from another run's (a restarted server counts from 0).
    run: String,
    /// Serialises starting the watcher.
    start: tokio::sync::Mutex<()>,
}

impl Live {
    pub(crate) fn new() -> Self {
        let run = format!("{:x}", mcp_tasks::clock::Clock::now_ms(&mcp_tasks::clock::SystemClock));
        Self {
            count: watch::Sender::new(0),
            running: AtomicBool::new(false),
            last_used_ms: AtomicU64::new(0),
            started: std::time::Instant::now(),
            run,
            start: tokio::sync::Mutex::new(()),
        }
    }

    fn touch(&self) {
        self.last_used_ms.store(u64::try_from(self.started.elapsed().as_millis()).unwrap_or(u64::MAX), Relaxed);
    }

    fn id(&self, count: u64) -> String {
        format!("{}-{count}", self.run)
    }
}

/// The id of what the store looks like now, as a page embeds it and `/changes` compares it:
/// starts the watcher when none runs (a page rendered after this call shows every change it
/// does not mark). `None` when the store cannot be watched (the page then polls).
pub(crate) async fn current(inner: &Arc<Inner>) -> Option<String> {
    let live = &inner.live;
    live.touch();
    if !live.running.load(Relaxed) {
        let _starting = live.start.lock().await;
        if !live.running.load(Relaxed) {
            let mark = inner.admin.change_mark().await.ok()?;
            // What happened while no watcher ran is taken as a change.
            live.count.send_modify(|c| *c += 1);
            live.running.store(true, Relaxed);
            tokio::spawn(watch_store(Arc::downgrade(inner), mark));
        }
    }
    Some(live.id(*live.count.borrow()))
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

/// `GET {prefix}/changes`: one `change` event as soon as the store differs from what the page
/// saw (`Last-Event-ID`, else `?since=`), or after `HOLD` a comment that says nothing changed.
pub(crate) async fn changes(inner: &Arc<Inner>, request: &Request<Bytes>) -> Response<Bytes> {
    let since = request.headers().get("last-event-id").and_then(|v| v.to_str().ok()).map(str::to_owned).or_else(|| {
        crate::params::Params::parse(request.uri().query().unwrap_or_default().as_bytes())
            .get("since")
            .map(str::to_owned)
    });
    // Subscribed before looking, so a change between the look and the wait is not missed.
    let mut seen = inner.live.count.subscribe();
    let Some(now) = current(inner).await else {
        return event_stream(
            StatusCode::SERVICE_UNAVAILABLE,
            "retry: 5000\n: the store cannot be watched\n\n".to_owned(),
        );
    };
    if since.as_deref() != Some(now.as_str()) {
        return change(&now);
    }
    let deadline = tokio::time::Instant::now() + HOLD;
    loop {
        let answer = tokio::time::timeout_at(deadline, seen.changed()).await;
        inner.live.touch();
        match answer {
            Ok(Ok(())) => {
                let id = inner.live.id(*seen.borrow_and_update());
                if since.as_deref() != Some(id.as_str()) {
                    return change(&id);
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
