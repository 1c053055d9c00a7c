//! The host's connection loop: HTTP/1.1 over TCP with the bounds a slow or hostile client cannot
//! hold open. `axum::serve` has none of them, so ~20,000 connections that each sent half a
//! header and stopped held every descriptor of a host until the flood let go.
//!
//! - A connection that owes a request header (a new one, or one whose next request has begun)
//!   is closed when the header has not arrived within [`ServeLimits::header_read_timeout`]; one
//!   idle between requests after [`ServeLimits::idle_timeout`]. A request being served (a
//!   `subscriptions/listen` stream included) has no such deadline.
//! - A request body that has not arrived within [`ServeLimits::body_read_timeout`] of its header
//!   fails with [`BodyTimeout`], which the host answers with the table's 408.
//! - A header section over [`ServeLimits::max_header_bytes`] gets hyper's 431.
//! - At most [`ServeLimits::max_connections`] are open (by default the descriptor limit less a
//!   reserve): at the cap, or when `accept` runs out of descriptors (`EMFILE`, `ENFILE`), the
//!   oldest connection that has not completed a request is shed to make room, so a legitimate
//!   request is served while a flood lasts. Accept errors never end or spin the loop.
//! - A connection whose peer has taken none of the bytes the host has to send (a listen stream's
//!   reader that stopped reading, once the socket's buffers are full) for
//!   [`ServeLimits::write_stall_timeout`] is closed. The reader gets what was buffered, then the
//!   connection's end in the middle of its response; every other connection is written on its
//!   own task, so a stalled one delays none of them meanwhile.
//! - A response marked [`LongLived`] (a listen stream) on an HTTP/1.1 connection whose earlier
//!   bytes have all gone out is written by this loop, not by hyper: hyper's connection is let go
//!   once the request is read, so an open stream does not keep its two 8 KiB buffers (16 of the
//!   16.3 KB of RSS an open stream took). The response says `connection: close`, as the loop
//!   cannot hand the socket back to hyper once the stream ends.

use std::collections::BTreeMap;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::response::Response;
use bytes::Bytes;
use http_body::{Body as _, Frame};
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

pub use crate::limits::{ServeLimits, default_max_connections};

/// A request body that did not arrive within [`ServeLimits::body_read_timeout`]. Reading the
/// body fails with this error (in its source chain), which the host answers with 408.
#[derive(Clone, Copy, Debug, thiserror::Error)]
#[error("the request body did not arrive within {seconds} s of its header")]
pub struct BodyTimeout {
    /// The bound, in seconds.
    pub seconds: u64,
}

/// Marks a response whose body lasts (a `subscriptions/listen` stream), for the connection loop
/// to write itself instead of through hyper's buffers (see the module's documentation). Put in
/// the response's extensions; a response without it is served by hyper as usual.
#[derive(Clone, Copy, Debug)]
pub(crate) struct LongLived;

/// Where a connection is: owing a header since an instant, serving a request, or idle since an
/// instant. Stored in one atomic as nanoseconds from the server's start with the phase in the
/// two low bits, so the reader, the service and the watchdog share it without a lock.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    Head(u64),
    Busy,
    Idle(u64),
}

struct Conn {
    phase: AtomicU64,
    /// Requests served to the end on it.
    served: AtomicU64,
    /// Requests being served (HTTP/1.1 serves one at a time; counted for the rare overlap of a
    /// response body still streaming while the next head is read).
    busy: AtomicU64,
    shed: CancellationToken,
    epoch: Instant,
    /// Since when (nanoseconds from `epoch`, plus one) a write has waited on a socket whose
    /// buffers are full; 0 while writes go through.
    stalled: AtomicU64,
    /// Whether everything hyper asked to write has gone out (its last call on the socket was a
    /// flush that completed), so no earlier response's bytes wait in hyper's buffer.
    drained: AtomicBool,
}

impl Conn {
    /// A connection that owes its first header, on a server started at `epoch`.
    fn new(epoch: Instant) -> Self {
        let conn = Self {
            phase: AtomicU64::new(0),
            served: AtomicU64::new(0),
            busy: AtomicU64::new(0),
            shed: CancellationToken::new(),
            epoch,
            stalled: AtomicU64::new(0),
            drained: AtomicBool::new(true),
        };
        conn.set(Phase::Head(conn.now()));
        conn
    }

    fn now(&self) -> u64 {
        u64::try_from(self.epoch.elapsed().as_nanos()).unwrap_or(u64::MAX) << 2 >> 2
    }

    fn phase(&self) -> Phase {
        let raw = self.phase.load(Ordering::Acquire);
        match raw & 3 {
            0 => Phase::Head(raw >> 2),
            1 => Phase::Busy,
            _ => Phase::Idle(raw >> 2),
        }
    }

    fn set(&self, phase: Phase) {
        let raw = match phase {
            Phase::Head(at) => at << 2,
            Phase::Busy => 1,
            Phase::Idle(at) => (at << 2) | 2,
        };
        self.phase.store(raw, Ordering::Release);
    }

    /// Bytes arrived: an idle connection now owes a header.
    fn read_some(&self) {
        if let Phase::Idle(_) = self.phase() {
            self.set(Phase::Head(self.now()));
        }
    }

    fn started(&self) {
        self.busy.fetch_add(1, Ordering::AcqRel);
        self.set(Phase::Busy);
    }

    fn finished(&self) {
        self.served.fetch_add(1, Ordering::AcqRel);
        if self.busy.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.set(Phase::Idle(self.now()));
        }
    }

    /// A write found the socket's buffers full: the stall starts now unless one already runs.
    fn write_blocked(&self) {
        let _ = self.stalled.compare_exchange(0, self.now() + 1, Ordering::AcqRel, Ordering::Relaxed);
    }

    fn watch_write(&self, polled: &Poll<std::io::Result<usize>>) {
        self.drained.store(false, Ordering::Release);
        match polled {
            Poll::Pending => self.write_blocked(),
            Poll::Ready(Ok(n)) if *n > 0 => self.wrote(),
            Poll::Ready(_) => {}
        }
    }

    /// A write went through: the peer is reading.
    fn wrote(&self) {
        if self.stalled.load(Ordering::Relaxed) != 0 {
            self.stalled.store(0, Ordering::Release);
        }
    }

    /// When the connection is to be closed if nothing changes: its header or idle bound, or its
    /// stalled write's; `None` while a request is served and its bytes go out.
    fn deadline(&self, limits: &ServeLimits) -> Option<Instant> {
        let at = |since: u64, bound: Duration| self.epoch + Duration::from_nanos(since) + bound;
        let phase = match self.phase() {
            Phase::Head(since) => Some(at(since, limits.header_read_timeout)),
            Phase::Busy => None,
            Phase::Idle(since) => Some(at(since, limits.idle_timeout)),
        };
        let stall = match self.stalled.load(Ordering::Acquire) {
            0 => None,
            since => Some(at(since - 1, limits.write_stall_timeout)),
        };
        match (phase, stall) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }
}

/// The open connections by arrival, for the cap and shedding.
#[derive(Default)]
struct Registry {
    conns: parking_lot::Mutex<BTreeMap<u64, Arc<Conn>>>,
    next: AtomicU64,
    /// Signalled whenever a connection ends (graceful shutdown waits for the last).
    ended: tokio::sync::Notify,
}

impl Registry {
    /// Closes the oldest connection that has completed no request and is not serving one (a
    /// flood's half-sent header, or a client that never sent anything); failing that, the
    /// oldest idle one. False when every connection is serving a request.
    fn shed_one(&self) -> bool {
        let conns = self.conns.lock();
        let unfinished = conns
            .values()
            .find(|c| c.served.load(Ordering::Acquire) == 0 && c.phase() != Phase::Busy && !c.shed.is_cancelled());
        let victim = unfinished
            .or_else(|| conns.values().find(|c| matches!(c.phase(), Phase::Idle(_)) && !c.shed.is_cancelled()));
        match victim {
            Some(conn) => {
                conn.shed.cancel();
                true
            }
            None => false,
        }
    }
}

/// Reads and writes through to the socket, telling the connection when bytes arrive and when a
/// write waits on the peer.
struct Watched {
    stream: tokio::net::TcpStream,
    conn: Arc<Conn>,
}

impl AsyncRead for Watched {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let polled = Pin::new(&mut self.stream).poll_read(cx, buf);
        if buf.filled().len() > before {
            self.conn.read_some();
        }
        polled
    }
}

impl AsyncWrite for Watched {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<std::io::Result<usize>> {
        let polled = Pin::new(&mut self.stream).poll_write(cx, buf);
        self.conn.watch_write(&polled);
        polled
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        let polled = Pin::new(&mut self.stream).poll_flush(cx);
        // hyper flushes the socket only once its own buffer is empty.
        if matches!(polled, Poll::Ready(Ok(()))) {
            self.conn.drained.store(true, Ordering::Release);
        }
        polled
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.stream).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        let polled = Pin::new(&mut self.stream).poll_write_vectored(cx, bufs);
        self.conn.watch_write(&polled);
        polled
    }

    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }
}

/// A request body that fails with [`BodyTimeout`] once its deadline passes unfinished.
struct Deadline {
    inner: hyper::body::Incoming,
    sleep: Pin<Box<tokio::time::Sleep>>,
    seconds: u64,
}

impl http_body::Body for Deadline {
    type Data = Bytes;
    type Error = axum::BoxError;

    fn poll_frame(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        if let Poll::Ready(frame) = Pin::new(&mut self.inner).poll_frame(cx) {
            return Poll::Ready(frame.map(|f| f.map_err(Into::into)));
        }
        match self.sleep.as_mut().poll(cx) {
            Poll::Ready(()) => Poll::Ready(Some(Err(Box::new(BodyTimeout { seconds: self.seconds })))),
            Poll::Pending => Poll::Pending,
        }
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.inner.size_hint()
    }
}

/// A response body that tells its connection when it has been sent (or dropped).
struct Served {
    inner: Body,
    conn: Option<Arc<Conn>>,
}

impl Served {
    fn done(&mut self) {
        if let Some(conn) = self.conn.take() {
            conn.finished();
        }
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        self.done();
    }
}

impl http_body::Body for Served {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        let polled = Pin::new(&mut self.inner).poll_frame(cx);
        if matches!(polled, Poll::Ready(None | Some(Err(_)))) {
            self.done();
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.inner.size_hint()
    }
}

/// Serves `router` on `listener` with `limits` until `shutdown` resolves, then stops accepting
/// and waits for the open connections to finish their requests (as `axum::serve` does).
pub async fn serve_with(
    listener: tokio::net::TcpListener,
    router: Router,
    limits: ServeLimits,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let max = limits.max_connections.unwrap_or_else(default_max_connections).max(1);
    let registry = Arc::new(Registry::default());
    let stopping = CancellationToken::new();
    let epoch = Instant::now();
    tokio::pin!(shutdown);
    loop {
        let accepted = tokio::select! {
            () = &mut shutdown => break,
            accepted = listener.accept() => accepted,
        };
        let stream = match accepted {
            Ok((stream, _)) => stream,
            Err(e) if matches!(e.raw_os_error(), Some(23 | 24)) => {
                // EMFILE / ENFILE: free a descriptor the way the cap does, and give it a moment
                // to close before accepting again (no spinning on the same error).
                let shed = registry.shed_one();
                tracing::warn!(error = %e, shed, "accept ran out of descriptors");
                tokio::time::sleep(Duration::from_millis(5)).await;
                continue;
            }
            Err(e) => {
                // A connection reset before it was accepted, or another passing fault.
                tracing::debug!(error = %e, "accept failed");
                tokio::time::sleep(Duration::from_millis(1)).await;
                continue;
            }
        };
        if registry.conns.lock().len() >= max && !registry.shed_one() {
            // Every connection is serving a request: this one waits its turn elsewhere.
            tracing::warn!(max, "connection cap reached with every connection busy; refused one");
            drop(stream);
            continue;
        }
        // Small writes (a listen's notifications) go out at once, not after the peer's delayed
        // ACK (Nagle held the second frame of a listen ~40 ms).
        let _ = stream.set_nodelay(true);
        let conn = Arc::new(Conn::new(epoch));
        let id = registry.next.fetch_add(1, Ordering::Relaxed);
        registry.conns.lock().insert(id, Arc::clone(&conn));
        let registry = Arc::clone(&registry);
        let router = router.clone();
        let stopping = stopping.clone();
        tokio::spawn(async move {
            serve_connection(stream, router, &conn, &limits, &stopping).await;
            registry.conns.lock().remove(&id);
            registry.ended.notify_waiters();
        });
    }
    stopping.cancel();
    // The open connections finish the requests they are serving; idle ones close now.
    loop {
        let ended = registry.ended.notified();
        if registry.conns.lock().is_empty() {
            return Ok(());
        }
        ended.await;
    }
}

async fn serve_connection(
    stream: tokio::net::TcpStream,
    router: Router,
    conn: &Arc<Conn>,
    limits: &ServeLimits,
    stopping: &CancellationToken,
) {
    // Boxed: hyper's connection and this loop's state around it (~1 KB) are freed when a
    // long-lived response is handed off, instead of staying in this task for the stream's life.
    let Some((mut io, head, body)) = Box::pin(serve_http(stream, router, conn, limits, stopping)).await else {
        return;
    };
    if let Err(e) = write_long_lived(&mut io.stream, head, body, limits.write_stall_timeout).await {
        tracing::debug!(error = %e, "a long-lived response ended early");
    }
    conn.finished();
}

/// Serves the connection through hyper until it ends (`None`), or until a long-lived response is
/// handed off: then the socket, the response's head serialized, and its body.
async fn serve_http(
    stream: tokio::net::TcpStream,
    router: Router,
    conn: &Arc<Conn>,
    limits: &ServeLimits,
    stopping: &CancellationToken,
) -> Option<(Watched, Vec<u8>, Body)> {
    let io = TokioIo::new(Watched { stream, conn: Arc::clone(conn) });
    let service_conn = Arc::clone(conn);
    let body_timeout = limits.body_read_timeout;
    // A long-lived response goes to this loop through here, at most once per connection.
    let (handoff, mut handed) = tokio::sync::oneshot::channel::<Response<Body>>();
    let handoff = Arc::new(parking_lot::Mutex::new(Some(handoff)));
    let service = hyper::service::service_fn(move |request: http::Request<hyper::body::Incoming>| {
        service_conn.started();
        let sleep = Box::pin(tokio::time::sleep(body_timeout));
        let seconds = body_timeout.as_secs();
        // The loop writes chunked HTTP/1.1 only, and never a HEAD response's body.
        let may_hand_off = request.version() == http::Version::HTTP_11 && request.method() != http::Method::HEAD;
        let request = request.map(|inner| Body::new(Deadline { inner, sleep, seconds }));
        let mut router = router.clone();
        let conn = Arc::clone(&service_conn);
        let handoff = Arc::clone(&handoff);
        async move {
            let response = match tower::Service::call(&mut router, request).await {
                Ok(response) => response,
                Err(never) => match never {},
            };
            // Handed off only when no earlier response's bytes still wait in hyper's buffer
            // (a pipelining client); otherwise hyper serves it, buffers and all.
            let taken = (may_hand_off
                && response.extensions().get::<LongLived>().is_some()
                && conn.drained.load(Ordering::Acquire))
            .then(|| handoff.lock().take())
            .flatten();
            let response = if let Some(handoff) = taken {
                match handoff.send(response) {
                    // The loop drops this connection, and this future with it.
                    Ok(()) => std::future::pending().await,
                    Err(response) => response,
                }
            } else {
                response
            };
            Ok::<_, std::convert::Infallible>(response.map(|inner| Body::new(Served { inner, conn: Some(conn) })))
        }
    });
    let mut builder = hyper::server::conn::http1::Builder::new();
    // The header deadline is the watchdog's below (it also covers an idle connection's next
    // request, which hyper's own timer would close after the header timeout instead of the idle
    // one).
    builder.max_buf_size(limits.max_header_bytes.max(8192)).header_read_timeout(None);
    let mut connection = builder.serve_connection(io, service);
    let mut graceful = false;
    let response = loop {
        tokio::select! {
            _ = &mut connection => return None,
            () = conn.shed.cancelled() => return None,
            () = stopping.cancelled(), if !graceful => {
                graceful = true;
                Pin::new(&mut connection).graceful_shutdown();
            }
            () = expired(conn, limits) => return None,
            handed = &mut handed => match handed {
                Ok(response) => break response,
                Err(_) => return None, // the service is gone: so is the connection
            },
        }
    };
    // hyper has read the request and written nothing for it (its service has not answered),
    // and its buffer is empty: the socket is this loop's from here. Bytes the client sent after
    // the request are dropped with hyper's buffer; the connection closes after this response.
    let io = connection.into_parts().io.into_inner();
    let (head, body) = response.into_parts();
    Some((io, long_lived_head(&head), body))
}

/// Resolves once the connection is past a deadline (its header, idle or stalled-write bound),
/// looking again whenever that deadline moves.
async fn expired(conn: &Conn, limits: &ServeLimits) {
    let recheck = limits.header_read_timeout.min(limits.idle_timeout).min(limits.write_stall_timeout);
    loop {
        match conn.deadline(limits) {
            Some(at) => tokio::time::sleep_until(at).await,
            // Serving: look again later (the phase and a stall change without waking this task).
            None => tokio::time::sleep(recheck).await,
        }
        if conn.deadline(limits).is_some_and(|at| at <= Instant::now()) {
            if conn.stalled.load(Ordering::Acquire) != 0 {
                closed_stalled(limits.write_stall_timeout);
            }
            return;
        }
    }
}

/// Logs the close of a connection whose peer took none of its bytes for `bound` (the watchdog's,
/// or a long-lived response's write).
fn closed_stalled(bound: Duration) {
    tracing::info!(
        seconds = bound.as_secs_f64(),
        "closed a connection whose peer took none of its response's bytes within the bound"
    );
}

/// `head` as HTTP/1.1 bytes for a chunked body that closes its connection.
fn long_lived_head(head: &http::response::Parts) -> Vec<u8> {
    use http::header::{CONNECTION, CONTENT_LENGTH, DATE, TRANSFER_ENCODING};
    let mut out = Vec::with_capacity(512);
    out.extend_from_slice(b"HTTP/1.1 ");
    out.extend_from_slice(head.status.as_str().as_bytes());
    out.push(b' ');
    out.extend_from_slice(head.status.canonical_reason().unwrap_or("").as_bytes());
    out.extend_from_slice(b"\r\n");
    for (name, value) in &head.headers {
        // Framing is this writer's: chunked, then close.
        if [CONNECTION, CONTENT_LENGTH, TRANSFER_ENCODING].contains(name) {
            continue;
        }
        out.extend_from_slice(name.as_str().as_bytes());
        out.extend_from_slice(b": ");
        out.extend_from_slice(value.as_bytes());
        out.extend_from_slice(b"\r\n");
    }
    if !head.headers.contains_key(DATE) {
        // RFC 9110 §6.6.1: an origin server with a clock sends Date on a 2xx (hyper did).
        out.extend_from_slice(b"date: ");
        out.extend_from_slice(httpdate::fmt_http_date(std::time::SystemTime::now()).as_bytes());
        out.extend_from_slice(b"\r\n");
    }
    out.extend_from_slice(b"transfer-encoding: chunked\r\nconnection: close\r\n\r\n");
    out
}

/// Writes `head` (from [`long_lived_head`]) and `body` as its chunks, until the body ends, the
/// peer goes away (read end closed), or a write waits `stall` with no byte taken (a reader that
/// stopped reading: [`ServeLimits::write_stall_timeout`]). What the peer sends is dropped.
async fn write_long_lived(
    io: &mut tokio::net::TcpStream,
    head: Vec<u8>,
    mut body: Body,
    stall: Duration,
) -> std::io::Result<()> {
    write_within(io, &head, stall).await?;
    drop(head);
    loop {
        // The body's next frame, or `None` once the peer has gone away (read end closed).
        let frame = std::future::poll_fn(|cx| {
            if let Poll::Ready(frame) = Pin::new(&mut body).poll_frame(cx) {
                return Poll::Ready(Some(frame));
            }
            let mut scratch = [0_u8; 16];
            loop {
                let mut buf = ReadBuf::new(&mut scratch);
                match Pin::new(&mut *io).poll_read(cx, &mut buf) {
                    Poll::Ready(Ok(())) if !buf.filled().is_empty() => {} // dropped; tokio's budget bounds this loop
                    Poll::Ready(_) => return Poll::Ready(None),
                    Poll::Pending => return Poll::Pending,
                }
            }
        })
        .await;
        let Some(frame) = frame else {
            return Ok(()); // nobody reads the rest
        };
        let data = match frame {
            None => return write_within(io, b"0\r\n\r\n", stall).await,
            Some(Err(e)) => return Err(std::io::Error::other(e)),
            // Trailers are not sent (a listen has none).
            Some(Ok(frame)) => match frame.into_data() {
                Ok(data) if !data.is_empty() => data,
                _ => continue,
            },
        };
        let mut chunk = Vec::with_capacity(data.len() + 12);
        chunk.extend_from_slice(format!("{:x}\r\n", data.len()).as_bytes());
        chunk.extend_from_slice(&data);
        chunk.extend_from_slice(b"\r\n");
        drop(data);
        write_within(io, &chunk, stall).await?;
    }
}

/// Writes all of `bytes`, failing once a write has waited `stall` with no byte taken.
async fn write_within(io: &mut tokio::net::TcpStream, mut bytes: &[u8], stall: Duration) -> std::io::Result<()> {
    while !bytes.is_empty() {
        match tokio::time::timeout(stall, io.write(bytes)).await {
            Ok(Ok(0)) => return Err(std::io::ErrorKind::WriteZero.into()),
            Ok(Ok(n)) => bytes = &bytes[n..],
            Ok(Err(e)) => return Err(e),
            Err(_) => {
                closed_stalled(stall);
                return Err(std::io::ErrorKind::TimedOut.into());
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_phase_round_trips_through_its_atomic() {
        let conn = Conn::new(Instant::now());
        for phase in [Phase::Head(0), Phase::Head(123_456_789), Phase::Busy, Phase::Idle(42)] {
            conn.set(phase);
            assert_eq!(conn.phase(), phase);
        }
        conn.set(Phase::Idle(7));
        conn.read_some();
        assert!(matches!(conn.phase(), Phase::Head(_)), "bytes on an idle connection owe a header");
        conn.started();
        conn.read_some();
        assert_eq!(conn.phase(), Phase::Busy, "a body's bytes change nothing");
        conn.finished();
        assert!(matches!(conn.phase(), Phase::Idle(_)));
        assert_eq!(conn.served.load(Ordering::Relaxed), 1);
    }

    #[test]
    fn a_stalled_write_gives_a_served_connection_a_deadline_until_bytes_go_out() {
        let conn = Conn::new(Instant::now());
        let limits = ServeLimits::default();
        conn.started();
        assert_eq!(conn.deadline(&limits), None, "serving, and writing freely");
        conn.watch_write(&Poll::Pending);
        let first = conn.deadline(&limits).expect("a stalled write has a bound");
        conn.watch_write(&Poll::Pending);
        assert_eq!(conn.deadline(&limits), Some(first), "a stall keeps its start");
        conn.watch_write(&Poll::Ready(Ok(0)));
        assert_eq!(conn.deadline(&limits), Some(first), "no byte went out");
        conn.watch_write(&Poll::Ready(Ok(10)));
        assert_eq!(conn.deadline(&limits), None, "the peer read again");
    }

    #[test]
    fn the_default_cap_leaves_a_reserve_under_the_descriptor_limit() {
        let cap = default_max_connections();
        #[cfg(unix)]
        if let Some(limit) = rustix::process::getrlimit(rustix::process::Resource::Nofile).current {
            assert!((cap as u64) < limit, "{cap} under {limit}");
        }
        assert!(cap >= 1);
    }
}
