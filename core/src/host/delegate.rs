//! The host in front of another MCP server: an SDK's own Streamable HTTP service (rmcp's, through
//! `mcp-tasks-rmcp`). Core answers the extension's traffic (`tasks/*`, listens for tasks, a
//! `tools/call` that becomes a task); everything else reaches the SDK unchanged. A task's tool
//! runs through the SDK's own handler, in an exchange core makes from the stored call
//! ([`call_request`]): the answer settles the task ([`read_call_answer`]), and an
//! `input_required` answer asks the client through the task, then goes round again with the
//! answers, as the TypeScript server does with its SDK.

use std::sync::Arc;

use async_trait::async_trait;
use axum::body::Body;
use axum::response::Response;
use futures::future::BoxFuture;
use serde_json::Value;

use super::tools::{Prepared, RunContext, Tool, ToolCall, ToolHandler};
use crate::protocol::RpcError;
use crate::protocol::server::{CallAnswer, ReplyTo, call_request, read_call_answer, response_message};

/// The MCP server a [`Host`](super::Host) sits in front of ([`HostBuilder::delegate`](super::HostBuilder::delegate)).
pub trait Delegate: Send + Sync + 'static {
    /// Serves a request that is not the extension's traffic, as the client sent it (its body
    /// already read: at most the host's body limit).
    fn serve(&self, request: http::Request<Body>) -> BoxFuture<'static, Response>;

    /// Runs one exchange of a task's tool: a `tools/call` core made from the stored call, its
    /// envelope without the tasks extension, the task's [`RunContext`] in the request's
    /// extensions. By default served as any other request.
    fn exchange(&self, request: http::Request<Body>) -> BoxFuture<'static, Response> {
        self.serve(request)
    }

    /// Whether the server has a tool named `name`: a synchronous call of any other is refused
    /// by core as an unknown tool (-32602, HTTP 400), the same bytes as from every server.
    /// `Err` when it cannot tell (its server could not be made): the call is then answered
    /// -32603 with that reason, a fault of the server, not an unknown tool.
    fn serves_tool(&self, name: &str) -> Result<bool, String>;

    /// Whether it can serve the stdio transport, where each line reaches it as one stateless
    /// POST (no session id to carry): `Err` says why not, and
    /// [`Host::serve_stdio`](super::Host::serve_stdio) refuses to start with it.
    fn serves_stdio(&self) -> Result<(), String> {
        Ok(())
    }
}

/// The largest answer an exchange may give (a tool's result): core's default body limit times
/// sixteen, so a large result still settles and a runaway one fails the task, not the process.
const MAX_ANSWER_BYTES: usize = 64 * 1024 * 1024;

/// The MRTR phase of a delegated tool, run by core before its task is created.
pub type PrepareFn = Arc<dyn Fn(&ToolCall) -> Result<Prepared, RpcError> + Send + Sync>;

/// Runs a task's tool through a [`Delegate`] ([`Tool::delegated`]).
struct Exchange {
    delegate: Arc<dyn Delegate>,
    prepare: Option<PrepareFn>,
}

impl Tool {
    /// A tool the delegate's server runs: a task of it runs the tool through
    /// [`Delegate::exchange`] (its synchronous calls go to the delegate as they are). Set its
    /// [`mode`](Tool::mode) and task options as for any tool. `prepare`, when given, is its
    /// MRTR phase: the rounds a call goes through before its task is created (SEP-2663 has them
    /// finish first), answered by core with sealed `requestState` as for a host's own tool.
    pub fn delegated(name: impl Into<String>, delegate: Arc<dyn Delegate>, prepare: Option<PrepareFn>) -> Self {
        Self::new(name, Exchange { delegate, prepare })
    }
}

#[async_trait]
impl ToolHandler for Exchange {
    async fn prepare(&self, call: &ToolCall) -> Result<Prepared, RpcError> {
        self.prepare.as_ref().map_or(Ok(Prepared::Ready), |prepare| prepare(call))
    }

    async fn run(&self, mut call: ToolCall, ctx: RunContext) -> Result<Value, RpcError> {
        // A task holds this future for its whole life, so it keeps the call (which it holds in
        // any case) and little else: each round's stored call and request JSON are made and
        // dropped before the round waits; the rare futures (an answer's body, the client's input)
        // are boxed, so the future does not keep their room.
        let mut request_state: Option<Value> = None;
        for round in 1u64.. {
            let request = {
                let (headers, mut body) = call_request(&call.name, &call.stored(), round);
                if let Some(state) = request_state.take() {
                    body["params"]["requestState"] = state;
                }
                let mut request = http::Request::new(Body::from(body.to_string()));
                *request.method_mut() = http::Method::POST;
                // An SDK validates the Host header against DNS rebinding; this request never left
                // the process.
                request.headers_mut().insert(http::header::HOST, http::HeaderValue::from_static("localhost"));
                for (name, value) in headers {
                    if let Ok(value) = http::HeaderValue::from_str(&value) {
                        request.headers_mut().insert(name, value);
                    }
                }
                request.extensions_mut().insert(ctx.clone());
                request
            };
            let response = self.delegate.exchange(request).await;
            let answer = {
                let bytes = Box::pin(axum::body::to_bytes(response.into_body(), MAX_ANSWER_BYTES))
                    .await
                    .map_err(|e| RpcError::internal(format!("reading the tool's answer failed: {e}")))?;
                read_call_answer(&bytes)
            };
            match answer {
                CallAnswer::Complete(result) => return Ok(result),
                CallAnswer::Failed(error) => return Err(error),
                CallAnswer::InputRequired { input_requests, request_state: state } => {
                    // The task asks the client (checked against what its creating request
                    // declared) and the tool gets the answers in its next round.
                    call.input_responses = Some(Box::new(Box::pin(ctx.request_input(input_requests)).await?));
                    request_state = state;
                }
            }
        }
        unreachable!("rounds are counted by an unbounded range")
    }
}

/// The `Accept` value SDKs require of a Streamable HTTP POST, both media types named.
pub(super) const BOTH_MEDIA_TYPES: &str = "application/json, text/event-stream";

/// Whether the request's `Accept` names both media types literally, as an SDK checks it.
pub(super) fn names_both_media_types(headers: &http::HeaderMap) -> bool {
    let accept: Vec<String> = headers
        .get_all(http::header::ACCEPT)
        .iter()
        .map(|v| String::from_utf8_lossy(v.as_bytes()).to_ascii_lowercase())
        .collect();
    let named = |media: &str| accept.iter().any(|v| v.contains(media));
    named("application/json") && named("text/event-stream")
}

/// Whether a request id is a number an SDK may not read (outside i64, or not an integer).
pub(super) fn id_out_of_range(id: &Value) -> bool {
    id.is_number() && id.as_i64().is_none()
}

/// The request body with an id an SDK reads in place of one it may not: the answer goes back
/// under the client's own id, by [`reframed`].
pub(super) fn with_plain_id(body: &[u8], id: &Value) -> Vec<u8> {
    if !id_out_of_range(id) {
        return body.to_vec();
    }
    match serde_json::from_slice::<Value>(body) {
        Ok(mut message) => {
            message["id"] = Value::from(1);
            message.to_string().into_bytes()
        }
        Err(_) => body.to_vec(),
    }
}

/// The delegate's answer to a request, framed for the client by core: its JSON-RPC result or error
/// as `reply` frames it. An answer that carries no JSON-RPC response (an SDK's own HTTP refusal)
/// goes out as it came.
pub(super) async fn reframed(response: Response, reply: &ReplyTo) -> Response {
    #[derive(serde::Deserialize)]
    struct Answer {
        result: Option<Value>,
        error: Option<RpcError>,
    }
    let (parts, body) = response.into_parts();
    let Ok(bytes) = axum::body::to_bytes(body, MAX_ANSWER_BYTES).await else {
        return super::http_reply(reply.tool_error(&RpcError::internal("reading the server's answer failed")));
    };
    match response_message(&bytes).map(serde_json::from_slice::<Answer>) {
        Some(Ok(Answer { result: Some(result), .. })) => super::http_reply(reply.result(result)),
        Some(Ok(Answer { error: Some(error), .. })) => super::http_reply(reply.tool_error(&error)),
        _ => Response::from_parts(parts, Body::from(bytes)),
    }
}

/// The HTTP request that carries one stdio line to the delegate (stdio has no HTTP of its own: the
/// line goes to the SDK's service as the POST a Streamable HTTP client would send), and the key of
/// its request id when it is a request (to stop it on `notifications/cancelled`).
pub(super) fn stdio_request(line: &[u8]) -> (Option<Value>, http::Request<Body>) {
    let message: Value = serde_json::from_slice(line).unwrap_or(Value::Null);
    let method = message.get("method").and_then(Value::as_str).unwrap_or_default();
    let params = message.get("params");
    let version = params
        .and_then(|p| p.get("_meta"))
        .and_then(|m| m.get(crate::protocol::META_PROTOCOL_VERSION))
        .and_then(Value::as_str);
    let id = message.get("id").filter(|_| !method.is_empty()).cloned();
    let mut request = http::Request::new(Body::from(line.to_vec()));
    *request.method_mut() = http::Method::POST;
    let headers = request.headers_mut();
    headers.insert(http::header::HOST, http::HeaderValue::from_static("localhost"));
    headers.insert(http::header::CONTENT_TYPE, http::HeaderValue::from_static("application/json"));
    headers.insert(http::header::ACCEPT, http::HeaderValue::from_static(BOTH_MEDIA_TYPES));
    if !method.is_empty() {
        for (name, value) in crate::protocol::headers::request_headers(method, params, version) {
            if let Ok(value) = http::HeaderValue::from_str(&value) {
                headers.insert(name, value);
            }
        }
    }
    (id, request)
}

/// Writes the delegate's answer to a stdio line as lines: a JSON answer as one, each message of
/// an SSE answer as one as it arrives (the SDK's notifications before its response included), an
/// empty one (a notification accepted) as none. A request is always answered: an HTTP refusal
/// with no JSON-RPC message, an answer over [`MAX_ANSWER_BYTES`], or a stream that fails or ends
/// before the response to `id` is answered with a -32603 error of `id` saying which (the client
/// would otherwise wait for it forever).
pub(super) async fn write_lines(
    response: Response,
    id: Option<&Value>,
    lines: &tokio::sync::mpsc::UnboundedSender<String>,
) {
    write_lines_within(response, id, lines, MAX_ANSWER_BYTES).await;
}

/// [`write_lines`] with an answer of at most `limit` bytes (an event, for an SSE answer).
async fn write_lines_within(
    response: Response,
    id: Option<&Value>,
    lines: &tokio::sync::mpsc::UnboundedSender<String>,
    limit: usize,
) {
    use futures::StreamExt;
    let fail = |why: String| {
        if let Some(id) = id {
            let _ = lines.send(crate::protocol::error_response(Some(id), &RpcError::internal(why)).to_string());
        }
    };
    let status = response.status();
    let sse = response
        .headers()
        .get(http::header::CONTENT_TYPE)
        .is_some_and(|v| v.as_bytes().starts_with(b"text/event-stream"));
    let body = response.into_body();
    if !sse {
        let bytes = match axum::body::to_bytes(body, limit).await {
            Ok(bytes) => bytes,
            Err(e) => return fail(format!("the server's answer could not be read whole (at most {limit} bytes): {e}")),
        };
        let text = String::from_utf8_lossy(&bytes);
        let text = text.trim();
        if serde_json::from_str::<Value>(text).is_ok() {
            let _ = lines.send(text.to_owned());
        } else if !status.is_success() {
            fail(format!("the server refused the message: HTTP {status} {text}"));
        }
        return;
    }
    let mut pending: Vec<u8> = Vec::new();
    // How far `pending` was searched for an event's end: each chunk is searched once.
    let mut searched = 0;
    let mut answered = false;
    let mut stream = body.into_data_stream();
    let ended = loop {
        let data = match stream.next().await {
            None => break "the server's stream ended before its answer".to_owned(),
            Some(Err(e)) => break format!("the server's stream failed before its answer: {e}"),
            Some(Ok(data)) => data,
        };
        pending.extend_from_slice(&data);
        // One event ends at a blank line; an SDK's JSON-RPC message is one `data:` line.
        while let Some(end) = find_event_end(&pending, searched) {
            let event: Vec<u8> = pending.drain(..end).collect();
            searched = 0;
            for line in event.split(|b| *b == b'\n') {
                let line = line.strip_suffix(b"\r").unwrap_or(line);
                if let Some(data) = line.strip_prefix(b"data:") {
                    let data = String::from_utf8_lossy(data.strip_prefix(b" ").unwrap_or(data)).trim().to_owned();
                    let Ok(message) = serde_json::from_str::<Value>(&data) else { continue };
                    answered |= id.is_some_and(|id| {
                        message.get("id") == Some(id)
                            && (message.get("result").is_some() || message.get("error").is_some())
                    });
                    let _ = lines.send(data);
                }
            }
        }
        searched = pending.len();
        if pending.len() > limit {
            break format!("an event of the server's answer is over {limit} bytes");
        }
    };
    if !answered {
        fail(ended);
    }
}

/// The end (past the blank line) of the first complete SSE event in `buffer`, whose first
/// `searched` bytes held none (a blank line may straddle that point: three bytes back are looked
/// at again).
fn find_event_end(buffer: &[u8], searched: usize) -> Option<usize> {
    let from = searched.saturating_sub(3);
    let rest = &buffer[from..];
    let lf = rest.windows(2).position(|w| w == b"\n\n").map(|at| from + at + 2);
    let crlf = rest.windows(4).position(|w| w == b"\r\n\r\n").map(|at| from + at + 4);
    match (lf, crlf) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// An SSE answer made of these chunks (an `Err` fails the stream there).
    fn sse(chunks: Vec<Result<&'static str, std::io::Error>>) -> Response {
        let stream =
            futures::stream::iter(chunks.into_iter().map(|c| c.map(|s| axum::body::Bytes::from_static(s.as_bytes()))));
        Response::builder().header("content-type", "text/event-stream").body(Body::from_stream(stream)).unwrap()
    }

    async fn written(response: Response, id: Option<&Value>, limit: usize) -> Vec<Value> {
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        write_lines_within(response, id, &tx, limit).await;
        drop(tx);
        let mut out = Vec::new();
        while let Some(line) = rx.recv().await {
            out.push(serde_json::from_str(&line).unwrap());
        }
        out
    }

    const NOTE: &str = r#"data: {"jsonrpc":"2.0","method":"notifications/progress"}"#;
    const ANSWER: &str = r#"data: {"jsonrpc":"2.0","id":5,"result":{}}"#;

    #[tokio::test]
    async fn an_sse_answer_split_anywhere_is_written_a_message_a_line_once_each() {
        let id = json!(5);
        // The blank lines straddle chunks; one event ends in CRLFs.
        let response = sse(vec![Ok(NOTE), Ok("\n"), Ok("\n"), Ok(ANSWER), Ok("\r\n\r"), Ok("\n")]);
        let lines = written(response, Some(&id), 1 << 20).await;
        assert_eq!(lines.len(), 2, "{lines:?}");
        assert_eq!(lines[0]["method"], "notifications/progress");
        assert_eq!(lines[1], json!({"jsonrpc": "2.0", "id": 5, "result": {}}));
    }

    #[tokio::test]
    async fn a_stream_that_fails_ends_early_or_runs_over_still_answers_the_request() {
        let id = json!(5);
        let failed = sse(vec![Ok(NOTE), Ok("\n\n"), Err(std::io::Error::other("reset"))]);
        let lines = written(failed, Some(&id), 1 << 20).await;
        assert_eq!(lines.len(), 2, "{lines:?}");
        assert_eq!((lines[1]["id"].clone(), lines[1]["error"]["code"].clone()), (json!(5), json!(-32603)));
        assert!(lines[1]["error"]["message"].as_str().unwrap().contains("failed before its answer"), "{lines:?}");
        let ended = written(sse(vec![Ok(NOTE), Ok("\n\n")]), Some(&id), 1 << 20).await;
        assert!(ended[1]["error"]["message"].as_str().unwrap().contains("ended before its answer"), "{ended:?}");
        // An event that never ends is cut at the limit, not buffered without end.
        let endless =
            sse(vec![Ok("data: "), Ok("xxxxxxxxxxxxxxxxxxxxxxxx"), Ok("xxxxxxxxxxxxxxxxxxxxxxxx"), Ok("\n\n")]);
        let over = written(endless, Some(&id), 32).await;
        assert_eq!(over.len(), 1, "{over:?}");
        assert!(over[0]["error"]["message"].as_str().unwrap().contains("over 32 bytes"), "{over:?}");
        // A notification (no id) gets nothing more.
        assert_eq!(written(sse(vec![Ok(NOTE), Ok("\n\n")]), None, 1 << 20).await.len(), 1);
        // A plain answer over the limit, or an HTTP refusal without JSON, is answered too.
        let big = Response::builder().body(Body::from(vec![b' '; 64])).unwrap();
        assert_eq!(written(big, Some(&id), 32).await[0]["error"]["code"], -32603);
        let refused = Response::builder().status(400).body(Body::from("Bad Request: no")).unwrap();
        assert!(
            written(refused, Some(&id), 1 << 20).await[0]["error"]["message"].as_str().unwrap().contains("HTTP 400")
        );
    }
}
