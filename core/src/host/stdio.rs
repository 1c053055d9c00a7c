//! The host over the stdio transport (MCP 2026-07-28 "Transports": newline-delimited JSON-RPC
//! on a child process's stdin and stdout). The same dispatcher decides every line as over HTTP
//! ([`Dispatcher::handle_stdio`](crate::protocol::server::Dispatcher::handle_stdio)); answers and
//! listen streams share the one output, each listen's messages stamped with its subscription id
//! by core, and a listen ends early on `notifications/cancelled` naming its request.

use std::collections::HashMap;
use std::sync::Arc;

use tokio::io::{AsyncBufRead, AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::sync::mpsc;

use super::{Host, Performed};
use crate::protocol::RequestId;
use crate::protocol::server::{Route, StdioDecision};

/// The principal of the process at the other end of the pipes: stdio has no per-request
/// authentication, and one client owns the channel.
pub const STDIO_PRINCIPAL: &str = "stdio";

impl Host {
    /// Serves the stdio transport until `input` ends: one JSON-RPC message per line in (a line
    /// over the body limit, or one that is not JSON, is answered with its error and the rest
    /// goes on), one per line out, written in the order they are ready. Requests run
    /// concurrently, so a long synchronous tool does not hold up a `tasks/get`. Tasks keep
    /// running after the input ends; listens stop.
    pub async fn serve_stdio<R, W>(&self, input: R, output: W) -> std::io::Result<()>
    where
        R: AsyncRead + Unpin,
        W: AsyncWrite + Unpin + Send + 'static,
    {
        if let Some(Err(why)) = self.inner.delegate.as_ref().map(|d| d.serves_stdio()) {
            return Err(std::io::Error::new(std::io::ErrorKind::Unsupported, why));
        }
        let (lines, mut outgoing) = mpsc::unbounded_channel::<String>();
        let writer = tokio::spawn(async move {
            let mut output = output;
            while let Some(line) = outgoing.recv().await {
                output.write_all(line.as_bytes()).await?;
                output.write_all(b"\n").await?;
                output.flush().await?;
            }
            Ok::<_, std::io::Error>(())
        });
        let listens: Arc<parking_lot::Mutex<HashMap<String, tokio::task::AbortHandle>>> = Arc::default();
        // Requests the server behind is serving (a host in front of one), by id: stopped by
        // `notifications/cancelled`, and, unlike listens, left to finish when the input ends.
        let delegated: Arc<parking_lot::Mutex<HashMap<String, tokio::task::AbortHandle>>> = Arc::default();
        let limit = self.inner.dispatcher.config().max_body_bytes;
        let mut input = BufReader::new(input);
        let mut line = Vec::new();
        loop {
            let read = read_line(&mut input, &mut line, limit).await?;
            let Some(complete) = read else { break };
            let text = trim_line_end(&line);
            if text.is_empty() {
                continue;
            }
            let line = complete.then_some(text);
            let delegate = self.inner.delegate.as_ref();
            let (decision, unknowable) = {
                let unknowable = std::cell::RefCell::new(None::<String>);
                let serves = |tool: &str| super::serves(delegate, tool, &unknowable);
                (self.inner.dispatcher.handle_stdio_with(line, STDIO_PRINCIPAL, &serves), unknowable.into_inner())
            };
            if let (StdioDecision::Delegate, Some(why)) = (&decision, unknowable) {
                let (id, _) = super::delegate::stdio_request(text);
                let error = crate::protocol::RpcError::internal(why);
                let _ = lines.send(crate::protocol::error_response(id.as_ref(), &error).to_string());
                continue;
            }
            match decision {
                StdioDecision::Reply(message) => {
                    let _ = lines.send(message.to_string());
                }
                StdioDecision::Ignore => {}
                StdioDecision::Delegate => {
                    let delegate = Arc::clone(delegate.expect("a dispatcher without a delegate never delegates"));
                    // One exchange with the server behind, its answer written as it arrives; a
                    // request in flight is stopped by `notifications/cancelled`, as a listen is.
                    let (id, request) = super::delegate::stdio_request(text);
                    let lines = lines.clone();
                    let registry = Arc::clone(&delegated);
                    let mut open = delegated.lock();
                    let key_of = id.as_ref().map(key);
                    let done = key_of.clone();
                    let work = tokio::spawn(async move {
                        let response = delegate.serve(request).await;
                        super::delegate::write_lines(response, id.as_ref(), &lines).await;
                        if let Some(done) = done {
                            registry.lock().remove(&done);
                        }
                    });
                    if let Some(id) = key_of {
                        open.insert(id, work.abort_handle());
                    }
                }
                StdioDecision::Cancel(id) => {
                    let running = listens.lock().remove(&key(&id)).or_else(|| delegated.lock().remove(&key(&id)));
                    if let Some(running) = running {
                        running.abort();
                    }
                }
                StdioDecision::Route(routed) => {
                    let host = self.clone();
                    let lines = lines.clone();
                    let registry = Arc::clone(&listens);
                    let listen = matches!(routed.route, Route::Listen { .. }).then(|| key(&routed.reply.id));
                    // Held while spawning, so a listen that ends at once cannot remove its entry
                    // before it is made.
                    let mut open = listens.lock();
                    let span = super::request_span(routed.route.method());
                    super::describe_request(&span, &routed);
                    let work = tokio::spawn(async move {
                        let id = routed.reply.id.clone();
                        match tracing::Instrument::instrument(host.performed(routed), span).await {
                            Performed::Reply(reply) => {
                                if let Some(json) = reply.json() {
                                    let _ = lines.send(json.to_owned());
                                }
                            }
                            Performed::Listen(mut subscription, frames) => {
                                let _ = lines.send(frames.ack(&subscription.accepted).to_string());
                                while let Some(task) = subscription.next().await {
                                    let _ = lines.send(frames.task(task).to_string());
                                }
                                let _ = lines.send(frames.close().to_string());
                                registry.lock().remove(&key(&id));
                            }
                        }
                    });
                    // Only a listen lasts, so only a listen can be cancelled.
                    if let Some(id) = listen {
                        open.insert(id, work.abort_handle());
                    }
                }
            }
        }
        for (_, listen) in listens.lock().drain() {
            listen.abort();
        }
        drop(lines);
        writer.await.map_err(std::io::Error::other)?
    }
}

/// The registry key of a request id (its JSON text: `7` and `"7"` are different requests).
fn key(id: &RequestId) -> String {
    id.to_string()
}

/// Reads one line into `line` (cleared first), at most `limit` bytes of it: `Some(true)` for a
/// whole line, `Some(false)` for one that was longer (the rest of it is skipped), `None` at the
/// end of the input.
async fn read_line<R: AsyncBufRead + Unpin>(
    input: &mut R,
    line: &mut Vec<u8>,
    limit: usize,
) -> std::io::Result<Option<bool>> {
    line.clear();
    let mut whole = true;
    loop {
        let buffer = input.fill_buf().await?;
        if buffer.is_empty() {
            return Ok((!line.is_empty() || !whole).then_some(whole));
        }
        let (used, done) = match buffer.iter().position(|b| *b == b'\n') {
            Some(end) => (end + 1, true),
            None => (buffer.len(), false),
        };
        // Past the limit (plus the line end) the bytes are dropped, not kept.
        let room = (limit + 2).saturating_sub(line.len());
        if used > room {
            whole = false;
        }
        line.extend_from_slice(&buffer[..used.min(room)]);
        input.consume(used);
        if done {
            return Ok(Some(whole && line.len() <= limit + 2));
        }
    }
}

/// A line without its `\n` or `\r\n`.
fn trim_line_end(line: &[u8]) -> &[u8] {
    let line = line.strip_suffix(b"\n").unwrap_or(line);
    line.strip_suffix(b"\r").unwrap_or(line)
}
