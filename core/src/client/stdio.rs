//! The stdio transport of the client (MCP 2026-07-28 "Transports"): newline-delimited JSON-RPC
//! on a server's stdin and stdout, usually a child process the client starts. One channel carries
//! every request, response and listen stream; a listen's messages are told apart by their
//! subscription id (the listen request's id), and a listen nobody reads any more is cancelled with
//! `notifications/cancelled`.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use async_trait::async_trait;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::sync::{mpsc, oneshot};

use super::ClientError;
use super::transport::{ListenStream, Transport, envelope, into_result};
use crate::protocol::DetailedTask;
use crate::protocol::client::parse_detailed;

/// How many task states a listen buffers before the reader waits for its consumer.
const LISTEN_BUFFER: usize = 256;

/// A listen, from its request until its stream ends.
enum Listen {
    /// Waiting for the acknowledgement: the accepted ids, or `None` when the server refused it.
    Opening(oneshot::Sender<Option<Vec<String>>>, mpsc::Sender<DetailedTask>),
    Open(mpsc::Sender<DetailedTask>),
}

#[derive(Default)]
struct State {
    pending: HashMap<u64, oneshot::Sender<Result<Value, ClientError>>>,
    listens: HashMap<u64, Listen>,
    /// Why the channel is dead (the process exited, or wrote a line that is not JSON-RPC).
    failed: Option<String>,
}

struct Inner {
    lines: mpsc::UnboundedSender<String>,
    state: parking_lot::Mutex<State>,
    next_id: AtomicU64,
    capabilities: Value,
    client_info: Value,
    /// The child, killed when the transport is dropped.
    _child: Option<tokio::process::Child>,
}

/// The stdio transport: one server reached through a pair of pipes.
#[derive(Clone)]
pub struct StdioTransport {
    inner: Arc<Inner>,
    endpoint: String,
}

impl std::fmt::Debug for StdioTransport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StdioTransport").field("endpoint", &self.endpoint).finish_non_exhaustive()
    }
}

impl StdioTransport {
    /// Starts `command` with `args` and speaks to it over its stdin and stdout; its stderr is
    /// passed through. The child is killed when the last clone of the transport is dropped. The
    /// endpoint (which keys durable task references) is `stdio:` and the command line.
    pub fn spawn(command: &str, args: &[&str]) -> Result<Self, ClientError> {
        let mut child = tokio::process::Command::new(command)
            .args(args)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::inherit())
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| ClientError::transport(format!("could not start {command}: {e}")))?;
        let (Some(stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
            return Err(ClientError::transport("the child has no stdin or stdout"));
        };
        let endpoint = std::iter::once(command).chain(args.iter().copied()).collect::<Vec<_>>().join(" ");
        Ok(Self::start(stdout, stdin, format!("stdio:{endpoint}"), Some(child)))
    }

    /// Speaks over given halves (a host that started the server itself); `endpoint` names the
    /// server for durable task references.
    pub fn from_io<R, W>(reader: R, writer: W, endpoint: impl Into<String>) -> Self
    where
        R: AsyncRead + Unpin + Send + 'static,
        W: AsyncWrite + Unpin + Send + 'static,
    {
        Self::start(reader, writer, endpoint.into(), None)
    }

    fn start<R, W>(reader: R, writer: W, endpoint: String, child: Option<tokio::process::Child>) -> Self
    where
        R: AsyncRead + Unpin + Send + 'static,
        W: AsyncWrite + Unpin + Send + 'static,
    {
        let (lines, mut outgoing) = mpsc::unbounded_channel::<String>();
        let inner = Arc::new(Inner {
            lines,
            state: parking_lot::Mutex::default(),
            next_id: AtomicU64::new(1),
            capabilities: json!({"elicitation": {}}),
            client_info: json!({"name": "mcp-tasks", "version": env!("CARGO_PKG_VERSION")}),
            _child: child,
        });
        tokio::spawn(async move {
            let mut writer = writer;
            while let Some(line) = outgoing.recv().await {
                let written = async {
                    writer.write_all(line.as_bytes()).await?;
                    writer.write_all(b"\n").await?;
                    writer.flush().await
                };
                if written.await.is_err() {
                    return; // the reader reports the dead channel
                }
            }
        });
        let weak = Arc::downgrade(&inner);
        tokio::spawn(async move {
            let mut lines = BufReader::new(reader).lines();
            let reason = loop {
                let line = match lines.next_line().await {
                    Ok(Some(line)) => line,
                    Ok(None) => break "the server closed its output (the process exited)".to_owned(),
                    Err(e) => break format!("reading the server's output failed: {e}"),
                };
                if line.trim().is_empty() {
                    continue;
                }
                let Some(inner) = weak.upgrade() else { return };
                match serde_json::from_str::<Value>(&line) {
                    Ok(message) if message.is_object() => inner.dispatch(message).await,
                    _ => {
                        let shown: String = line.chars().take(200).collect();
                        break format!("the server wrote a line that is not JSON-RPC: {shown}");
                    }
                }
            };
            if let Some(inner) = weak.upgrade() {
                inner.fail(reason);
            }
        });
        Self { inner, endpoint }
    }

    fn send(&self, id: u64, method: &str, params: Value) -> Result<(), ClientError> {
        let mut params = if params.is_object() { params } else { json!({}) };
        params["_meta"] = envelope(&self.inner.capabilities, &self.inner.client_info);
        let message = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        self.inner.lines.send(message.to_string()).map_err(|_| ClientError::transport("the server's input is closed"))
    }

    fn dead(&self) -> Option<ClientError> {
        self.inner.state.lock().failed.clone().map(ClientError::transport)
    }
}

impl Inner {
    /// Hands one message from the server to whoever waits for it.
    async fn dispatch(&self, message: Value) {
        let subscription = message["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"].as_u64();
        match (message.get("method").and_then(Value::as_str), subscription) {
            (Some("notifications/subscriptions/acknowledged"), Some(id)) => {
                let accepted: Vec<String> = message["params"]["notifications"]["taskIds"]
                    .as_array()
                    .map(|ids| ids.iter().filter_map(|v| v.as_str().map(str::to_owned)).collect())
                    .unwrap_or_default();
                let mut state = self.state.lock();
                if let Some(Listen::Opening(ack, updates)) = state.listens.remove(&id) {
                    let _ = ack.send(Some(accepted));
                    state.listens.insert(id, Listen::Open(updates));
                }
            }
            (Some("notifications/tasks"), Some(id)) => {
                let sender = match self.state.lock().listens.get(&id) {
                    Some(Listen::Open(updates)) => Some(updates.clone()),
                    _ => None,
                };
                if let (Some(updates), Ok(task)) = (sender, parse_detailed(message["params"].clone()))
                    && updates.send(task).await.is_err()
                {
                    // Nobody reads this listen any more: end it on the server too.
                    self.state.lock().listens.remove(&id);
                    let cancel = json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
                                        "params": {"requestId": id}});
                    let _ = self.lines.send(cancel.to_string());
                }
            }
            (Some(_), _) => {} // other notifications (logging, list changes): not the client's
            (None, _) => {
                let Some(id) = message.get("id").and_then(Value::as_u64) else { return };
                let mut state = self.state.lock();
                if let Some(waiter) = state.pending.remove(&id) {
                    let _ = waiter.send(into_result(message));
                } else if let Some(Listen::Opening(ack, _)) = state.listens.remove(&id) {
                    // A refusal before the ack (an open listen's response is its graceful end,
                    // removed above all the same).
                    let _ = ack.send(None);
                }
            }
        }
    }

    /// The channel is dead: every waiter gets `reason`, every listen ends.
    fn fail(&self, reason: String) {
        let mut state = self.state.lock();
        for (_, waiter) in state.pending.drain() {
            let _ = waiter.send(Err(ClientError::transport(reason.clone())));
        }
        for (_, listen) in state.listens.drain() {
            if let Listen::Opening(ack, _) = listen {
                let _ = ack.send(None);
            }
        }
        state.failed = Some(reason);
    }
}

#[async_trait]
impl Transport for StdioTransport {
    async fn request(&self, method: &str, params: Value) -> Result<Value, ClientError> {
        if let Some(dead) = self.dead() {
            return Err(dead);
        }
        let id = self.inner.next_id.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = oneshot::channel();
        self.inner.state.lock().pending.insert(id, tx);
        self.send(id, method, params)?;
        rx.await.unwrap_or_else(|_| Err(self.dead().unwrap_or_else(|| ClientError::transport("the channel closed"))))
    }

    async fn listen(&self, task_ids: &[String]) -> Result<Option<ListenStream>, ClientError> {
        if let Some(dead) = self.dead() {
            return Err(dead);
        }
        let id = self.inner.next_id.fetch_add(1, Ordering::Relaxed);
        let (ack_tx, ack_rx) = oneshot::channel();
        let (updates_tx, updates) = mpsc::channel(LISTEN_BUFFER);
        self.inner.state.lock().listens.insert(id, Listen::Opening(ack_tx, updates_tx));
        self.send(id, "subscriptions/listen", json!({"notifications": {"taskIds": task_ids}}))?;
        // A refusal (no listen on this server, a filter it does not take) means: poll instead.
        Ok(ack_rx.await.ok().flatten().map(|accepted| ListenStream { accepted, updates }))
    }

    fn endpoint(&self) -> &str {
        &self.endpoint
    }
}
