//! The stdio transport of the client (MCP 2026-07-28 "Transports",
//! <https://modelcontextprotocol.io/specification/2026-07-28/basic/transports#stdio>):
//! newline-delimited JSON-RPC on a server's stdin and stdout, usually a child process the client
//! starts. One channel carries every request, response and listen stream; a listen's messages are
//! told apart by their subscription id (the listen request's id), and a listen nobody reads any
//! more is cancelled with `notifications/cancelled`.
//!
//! A child is started on the first request, not when the transport is built, so a client can be
//! built outside an async runtime. When the child exits (or writes a line that is not JSON-RPC),
//! the requests in flight fail with a transport error that says so (with its exit status, and its
//! last stderr lines when captured); the next request starts it again, and the listens still read
//! are re-sent to the new child. Closing the transport (or dropping its last clone) ends the child
//! as the spec's shutdown sequence says: its stdin is closed, then SIGTERM, then SIGKILL.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::sync::{mpsc, oneshot};

use super::ClientError;
use super::transport::{ListenStream, Transport, envelope, response_result};
use crate::protocol::number;

/// How many task states a listen buffers before the reader waits for its consumer.
const LISTEN_BUFFER: usize = 256;
/// How much of a captured stderr is kept for error messages (its last bytes).
const STDERR_TAIL: usize = 4096;
/// How long a closing child gets after its stdin closes, then again after SIGTERM.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(2);
/// How long a reader waits for the exit status of a child whose stdout closed.
const EXIT_STATUS_WAIT: Duration = Duration::from_millis(500);

/// What happens to a child's stderr (its log channel; never mixed into the protocol).
#[non_exhaustive]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum StderrMode {
    /// Passed through to this process's stderr (the default).
    #[default]
    Inherit,
    /// Kept (its last 4 KiB) and quoted in the error when the child exits.
    Capture,
    /// Discarded.
    Discard,
}

impl StderrMode {
    /// Parses `inherit`, `capture` or `discard`; anything else is [`ClientError::InvalidOptions`].
    pub fn parse(name: &str) -> Result<Self, ClientError> {
        match name {
            "inherit" => Ok(Self::Inherit),
            "capture" => Ok(Self::Capture),
            "discard" => Ok(Self::Discard),
            other => Err(ClientError::InvalidOptions(format!("stderr {other:?}: use inherit, capture or discard"))),
        }
    }
}

/// How to start a stdio server: a program, its arguments, extra environment variables, a working
/// directory and what to do with its stderr.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct StdioCommand {
    /// The program (looked up on `PATH` when it has no slash).
    pub program: String,
    /// Its arguments.
    pub args: Vec<String>,
    /// Variables added to (or replacing in) the inherited environment.
    pub env: BTreeMap<String, String>,
    /// The working directory (default: this process's).
    pub cwd: Option<PathBuf>,
    /// What happens to its stderr.
    pub stderr: StderrMode,
}

impl StdioCommand {
    /// `program` with no arguments, the inherited environment and stderr passed through.
    pub fn new(program: impl Into<String>) -> Self {
        Self { program: program.into(), ..Self::default() }
    }

    /// Adds arguments.
    #[must_use]
    pub fn args<I: IntoIterator<Item = S>, S: Into<String>>(mut self, args: I) -> Self {
        self.args.extend(args.into_iter().map(Into::into));
        self
    }

    /// Sets one environment variable of the child.
    #[must_use]
    pub fn env(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.env.insert(name.into(), value.into());
        self
    }

    /// Sets the child's working directory.
    #[must_use]
    pub fn cwd(mut self, dir: impl Into<PathBuf>) -> Self {
        self.cwd = Some(dir.into());
        self
    }

    /// Sets what happens to the child's stderr.
    #[must_use]
    pub fn stderr(mut self, mode: StderrMode) -> Self {
        self.stderr = mode;
        self
    }

    /// The endpoint that keys durable task references: `stdio:` and the command line, and the
    /// working directory when one is set (the same command elsewhere may reach another store).
    pub fn endpoint(&self) -> String {
        let line =
            std::iter::once(self.program.as_str()).chain(self.args.iter().map(String::as_str)).collect::<Vec<_>>();
        match &self.cwd {
            Some(dir) => format!("stdio:{} (in {})", line.join(" "), dir.display()),
            None => format!("stdio:{}", line.join(" ")),
        }
    }

    fn start(&self) -> Result<(tokio::process::Child, Option<StderrTail>), ClientError> {
        if self.program.is_empty() {
            return Err(ClientError::transport("the stdio command is empty"));
        }
        let mut command = tokio::process::Command::new(&self.program);
        command
            .args(&self.args)
            .envs(&self.env)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(match self.stderr {
                StderrMode::Inherit => std::process::Stdio::inherit(),
                StderrMode::Capture => std::process::Stdio::piped(),
                StderrMode::Discard => std::process::Stdio::null(),
            })
            .kill_on_drop(true);
        if let Some(dir) = &self.cwd {
            command.current_dir(dir);
        }
        let mut child =
            command.spawn().map_err(|e| ClientError::transport(format!("could not start {}: {e}", self.program)))?;
        let tail = child.stderr.take().map(|mut stderr| {
            let tail = Arc::new(parking_lot::Mutex::new(VecDeque::with_capacity(STDERR_TAIL)));
            let keep = Arc::clone(&tail);
            let (ended, drained) = tokio::sync::watch::channel(false);
            tokio::spawn(async move {
                let mut chunk = [0u8; 1024];
                while let Ok(n) = stderr.read(&mut chunk).await {
                    if n == 0 {
                        break;
                    }
                    let mut tail = keep.lock();
                    tail.extend(&chunk[..n]);
                    let excess = tail.len().saturating_sub(STDERR_TAIL);
                    tail.drain(..excess);
                }
                let _ = ended.send(true);
            });
            StderrTail { bytes: tail, drained }
        });
        Ok((child, tail))
    }
}

/// The last bytes of a captured stderr, and whether it reached its end.
struct StderrTail {
    bytes: Arc<parking_lot::Mutex<VecDeque<u8>>>,
    drained: tokio::sync::watch::Receiver<bool>,
}

/// A listen, from its request until its stream ends.
struct Listen {
    task_ids: Vec<String>,
    updates: mpsc::Sender<Value>,
    /// Set until the acknowledgement: it gets the accepted ids, or `None` when refused.
    ack: Option<oneshot::Sender<Option<Vec<String>>>>,
}

#[derive(Default)]
struct State {
    pending: HashMap<u64, oneshot::Sender<Result<Value, ClientError>>>,
    listens: HashMap<u64, Listen>,
    /// Why the channel is dead (the process exited, or wrote a line that is not JSON-RPC).
    failed: Option<String>,
}

/// One live channel: a child (or given halves) from its start until it dies.
struct Conn {
    /// Lines to write; taken on close, which closes the child's stdin.
    lines: parking_lot::Mutex<Option<mpsc::UnboundedSender<String>>>,
    state: parking_lot::Mutex<State>,
    child: tokio::sync::Mutex<Option<tokio::process::Child>>,
    stderr_tail: Option<StderrTail>,
}

impl Drop for Conn {
    fn drop(&mut self) {
        // The last user is gone: end the child gracefully when a runtime can wait for it; else
        // `kill_on_drop` kills it.
        let child = self.child.get_mut().take();
        if let (Some(child), Ok(runtime)) = (child, tokio::runtime::Handle::try_current()) {
            runtime.spawn(shut_down(child));
        }
    }
}

/// Ends a child whose stdin is closed (or about to be): waits, then SIGTERM, waits, then SIGKILL.
async fn shut_down(mut child: tokio::process::Child) {
    if tokio::time::timeout(SHUTDOWN_GRACE, child.wait()).await.is_ok() {
        return;
    }
    #[cfg(unix)]
    if let Some(pid) = child.id().and_then(|id| rustix::process::Pid::from_raw(id.cast_signed())) {
        let _ = rustix::process::kill_process(pid, rustix::process::Signal::TERM);
        if tokio::time::timeout(SHUTDOWN_GRACE, child.wait()).await.is_ok() {
            return;
        }
    }
    let _ = child.kill().await;
}

/// Where channels come from.
enum Source {
    /// A command started (again) on demand.
    Command(StdioCommand),
    /// Halves given once by a host that started the server itself; no restart.
    Given(parking_lot::Mutex<Option<(BoxedReader, BoxedWriter)>>),
}

type BoxedReader = Box<dyn AsyncRead + Unpin + Send>;
type BoxedWriter = Box<dyn AsyncWrite + Unpin + Send>;

struct Shared {
    source: Source,
    conn: tokio::sync::Mutex<Option<Arc<Conn>>>,
    next_id: AtomicU64,
    closed: AtomicBool,
}

/// The stdio transport: one server reached through a pair of pipes. Cheap to clone; the child
/// ends when the transport is closed or its last clone is dropped.
#[derive(Clone)]
pub struct StdioTransport {
    shared: Arc<Shared>,
    endpoint: String,
    /// Declared in every request's `_meta`, per clone (as [`super::HttpTransport`] keeps them).
    capabilities: Value,
    client_info: Value,
}

impl std::fmt::Debug for StdioTransport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StdioTransport").field("endpoint", &self.endpoint).finish_non_exhaustive()
    }
}

impl StdioTransport {
    /// A transport that starts `command` on its first request (and again after the child died).
    pub fn command(command: StdioCommand) -> Self {
        let endpoint = command.endpoint();
        Self::new(Source::Command(command), endpoint)
    }

    /// A transport for `program` with `args` (stderr passed through); see [`Self::command`].
    pub fn spawn(program: &str, args: &[&str]) -> Self {
        Self::command(StdioCommand::new(program).args(args.iter().copied()))
    }

    /// Speaks over given halves (a host that started the server itself); `endpoint` names the
    /// server for durable task references. Once the halves close, every request fails.
    pub fn from_io<R, W>(reader: R, writer: W, endpoint: impl Into<String>) -> Self
    where
        R: AsyncRead + Unpin + Send + 'static,
        W: AsyncWrite + Unpin + Send + 'static,
    {
        let halves: (BoxedReader, BoxedWriter) = (Box::new(reader), Box::new(writer));
        Self::new(Source::Given(parking_lot::Mutex::new(Some(halves))), endpoint.into())
    }

    fn new(source: Source, endpoint: String) -> Self {
        Self {
            shared: Arc::new(Shared {
                source,
                conn: tokio::sync::Mutex::new(None),
                next_id: AtomicU64::new(1),
                closed: AtomicBool::new(false),
            }),
            endpoint,
            capabilities: super::default_capabilities(),
            client_info: json!({"name": "mcp-tasks", "version": env!("CARGO_PKG_VERSION")}),
        }
    }

    /// Sets the `clientInfo` sent with every request through this transport (a clone made
    /// earlier keeps its own).
    #[must_use]
    pub fn client_info(mut self, name: &str, version: &str) -> Self {
        self.client_info = json!({"name": name, "version": version});
        self
    }

    /// Sets the client capabilities declared besides the tasks extension (default
    /// [`super::default_capabilities`]), as [`Self::client_info`] does.
    #[must_use]
    pub fn capabilities(mut self, capabilities: Value) -> Self {
        self.capabilities = capabilities;
        self
    }

    /// The live channel, starting the child when there is none or the last one died (the
    /// listens still read move over to the new one).
    async fn connection(&self) -> Result<Arc<Conn>, ClientError> {
        let mut slot = self.shared.conn.lock().await;
        if self.shared.closed.load(Ordering::Acquire) {
            return Err(ClientError::transport("the stdio transport is closed"));
        }
        if let Some(conn) = slot.as_ref()
            && conn.state.lock().failed.is_none()
        {
            return Ok(Arc::clone(conn));
        }
        let (reader, writer, child, tail): (BoxedReader, BoxedWriter, _, _) = match &self.shared.source {
            Source::Command(command) => {
                let (mut child, tail) = command.start()?;
                let (Some(stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
                    return Err(ClientError::transport("the child has no stdin or stdout"));
                };
                (Box::new(stdout), Box::new(stdin), Some(child), tail)
            }
            Source::Given(halves) => match halves.lock().take() {
                Some((reader, writer)) => (reader, writer, None, None),
                None => {
                    let reason = slot.as_ref().and_then(|c| c.state.lock().failed.clone());
                    return Err(ClientError::transport(reason.unwrap_or_else(|| "the stdio channel closed".into())));
                }
            },
        };
        let conn = Conn::start(reader, writer, child, tail);
        if let Some(old) = slot.take() {
            self.move_listens(&old, &conn);
        }
        *slot = Some(Arc::clone(&conn));
        Ok(conn)
    }

    /// Re-sends to a new child the listens of a dead one whose streams are still read; their
    /// consumers see one stream across the restart.
    fn move_listens(&self, old: &Conn, new: &Conn) {
        let survivors: Vec<Listen> =
            old.state.lock().listens.drain().map(|(_, l)| l).filter(|l| !l.updates.is_closed()).collect();
        for listen in survivors {
            let id = self.shared.next_id.fetch_add(1, Ordering::Relaxed);
            let params = json!({"notifications": {"taskIds": listen.task_ids}});
            new.state.lock().listens.insert(id, listen);
            let _ = self.send(new, id, "subscriptions/listen", params);
        }
    }

    fn send(&self, conn: &Conn, id: u64, method: &str, params: Value) -> Result<(), ClientError> {
        let mut params = if params.is_object() { params } else { json!({}) };
        // The caller's trace context (SEP-414) rides beside the envelope, as over HTTP.
        let trace =
            params.get("_meta").and_then(Value::as_object).and_then(crate::protocol::trace::TraceContext::from_meta);
        params["_meta"] = envelope(&self.capabilities, &self.client_info);
        if let (Some(trace), Some(meta)) = (trace, params["_meta"].as_object_mut()) {
            trace.write_meta(meta);
        }
        let message = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        conn.write(message.to_string())
    }
}

impl Conn {
    fn start(
        reader: BoxedReader,
        writer: BoxedWriter,
        child: Option<tokio::process::Child>,
        stderr_tail: Option<StderrTail>,
    ) -> Arc<Self> {
        let (lines, mut outgoing) = mpsc::unbounded_channel::<String>();
        let conn = Arc::new(Self {
            lines: parking_lot::Mutex::new(Some(lines)),
            state: parking_lot::Mutex::default(),
            child: tokio::sync::Mutex::new(child),
            stderr_tail,
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
            // Every sender is gone (closed or dropped): dropping the writer closes the stdin.
        });
        let weak = Arc::downgrade(&conn);
        tokio::spawn(async move {
            let mut lines = BufReader::new(reader).lines();
            let reason = loop {
                let line = match lines.next_line().await {
                    Ok(Some(line)) => line,
                    Ok(None) => break None,
                    Err(e) => break Some(format!("reading the server's output failed: {e}")),
                };
                if line.trim().is_empty() {
                    continue;
                }
                let Some(conn) = weak.upgrade() else { return };
                match serde_json::from_str::<Value>(&line) {
                    Ok(message) if message.is_object() => conn.dispatch(message).await,
                    _ => {
                        let shown: String = line.chars().take(200).collect();
                        break Some(format!("the server wrote a line that is not JSON-RPC: {shown}"));
                    }
                }
            };
            if let Some(conn) = weak.upgrade() {
                let reason = match reason {
                    Some(reason) => reason,
                    None => conn.exit_reason().await,
                };
                conn.fail(reason);
            }
        });
        conn
    }

    fn write(&self, line: String) -> Result<(), ClientError> {
        let lines = self.lines.lock();
        let sent = lines.as_ref().is_some_and(|lines| lines.send(line).is_ok());
        if sent { Ok(()) } else { Err(ClientError::transport("the server's input is closed")) }
    }

    /// Why the output closed: the child's exit status when it exited, and its last stderr.
    async fn exit_reason(&self) -> String {
        let status = match self.child.lock().await.as_mut() {
            Some(child) => tokio::time::timeout(EXIT_STATUS_WAIT, child.wait()).await.ok().and_then(Result::ok),
            None => None,
        };
        let mut reason = match status {
            Some(status) => format!("the server exited ({status})"),
            None => "the server closed its output".to_owned(),
        };
        if let Some(tail) = &self.stderr_tail {
            // The child's last words may still be in the pipe when its stdout closes.
            let mut drained = tail.drained.clone();
            let _ = tokio::time::timeout(EXIT_STATUS_WAIT, drained.wait_for(|ended| *ended)).await;
            let bytes: Vec<u8> = tail.bytes.lock().iter().copied().collect();
            let text = String::from_utf8_lossy(&bytes).trim().to_owned();
            if !text.is_empty() {
                reason.push_str("; its stderr ended with: ");
                reason.push_str(&text);
            }
        }
        reason
    }

    /// Hands one message from the server to whoever waits for it.
    async fn dispatch(&self, message: Value) {
        let subscription = number::id_of(&message["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"]);
        match (message.get("method").and_then(Value::as_str), subscription) {
            (Some("notifications/subscriptions/acknowledged"), Some(id)) => {
                let accepted: Vec<String> = message["params"]["notifications"]["taskIds"]
                    .as_array()
                    .map(|ids| ids.iter().filter_map(|v| v.as_str().map(str::to_owned)).collect())
                    .unwrap_or_default();
                if let Some(ack) = self.state.lock().listens.get_mut(&id).and_then(|l| l.ack.take()) {
                    let _ = ack.send(Some(accepted));
                }
            }
            (Some("notifications/tasks"), Some(id)) => {
                let sender = self.state.lock().listens.get(&id).map(|l| l.updates.clone());
                if let Some(updates) = sender
                    && updates.send(message["params"].clone()).await.is_err()
                {
                    // Nobody reads this listen any more: end it on the server too.
                    self.state.lock().listens.remove(&id);
                    let cancel = json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
                                        "params": {"requestId": id}});
                    let _ = self.write(cancel.to_string());
                }
            }
            (Some("notifications/cancelled"), _) => {
                // The server ended a listen: its stream ends (the client polls from then on).
                if let Some(id) = number::id_of(&message["params"]["requestId"]) {
                    self.state.lock().listens.remove(&id);
                }
            }
            (Some(_), _) => {} // other notifications (logging, list changes): not the client's
            (None, _) => {
                let Some(id) = message.get("id").and_then(number::id_of) else { return };
                let mut state = self.state.lock();
                if let Some(waiter) = state.pending.remove(&id) {
                    let _ = waiter.send(response_result(message));
                } else if let Some(listen) = state.listens.remove(&id)
                    && let Some(ack) = listen.ack
                {
                    // A refusal before the ack (an open listen's response is its graceful end,
                    // removed all the same).
                    let _ = ack.send(None);
                }
            }
        }
    }

    /// The channel is dead: every waiter gets `reason`; listens not yet acknowledged are
    /// refused, acknowledged ones stay for the next child.
    fn fail(&self, reason: String) {
        tracing::warn!(%reason, "stdio server channel closed");
        let mut state = self.state.lock();
        for (_, waiter) in state.pending.drain() {
            let _ = waiter.send(Err(ClientError::transport(reason.clone())));
        }
        state.listens.retain(|_, listen| match listen.ack.take() {
            Some(ack) => {
                let _ = ack.send(None);
                false
            }
            None => true,
        });
        state.failed = Some(reason);
    }
}

#[async_trait]
impl Transport for StdioTransport {
    async fn request(&self, method: &str, params: Value) -> Result<Value, ClientError> {
        let conn = self.connection().await?;
        let id = self.shared.next_id.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = oneshot::channel();
        conn.state.lock().pending.insert(id, tx);
        if let Err(e) = self.send(&conn, id, method, params) {
            conn.state.lock().pending.remove(&id);
            return Err(e);
        }
        rx.await.unwrap_or_else(|_| Err(ClientError::transport("the stdio channel closed")))
    }

    async fn listen(&self, task_ids: &[String]) -> Result<Option<ListenStream>, ClientError> {
        let conn = self.connection().await?;
        let id = self.shared.next_id.fetch_add(1, Ordering::Relaxed);
        let (ack_tx, ack_rx) = oneshot::channel();
        let (updates_tx, updates) = mpsc::channel(LISTEN_BUFFER);
        let listen = Listen { task_ids: task_ids.to_vec(), updates: updates_tx, ack: Some(ack_tx) };
        conn.state.lock().listens.insert(id, listen);
        self.send(&conn, id, "subscriptions/listen", json!({"notifications": {"taskIds": task_ids}}))?;
        // A refusal (no listen on this server, a filter it does not take) means: poll instead.
        Ok(ack_rx.await.ok().flatten().map(|accepted| ListenStream { accepted, updates }))
    }

    fn endpoint(&self) -> &str {
        &self.endpoint
    }

    async fn close(&self) {
        self.shared.closed.store(true, Ordering::Release);
        let Some(conn) = self.shared.conn.lock().await.take() else { return };
        conn.lines.lock().take(); // the writer ends and closes the child's stdin
        conn.fail("the stdio transport is closed".to_owned());
        let child = conn.child.lock().await.take();
        if let Some(child) = child {
            shut_down(child).await;
        }
    }
}
