//! How the client reaches a server: the [`Transport`] trait ("send one JSON-RPC request", "open a
//! listen stream"), so bindings can plug a host SDK in, and [`HttpTransport`], the built-in
//! MCP 2026-07-28 Streamable HTTP client (reqwest with rustls; connections are reused).

use std::collections::HashMap;

use async_trait::async_trait;
use futures::StreamExt;
use serde_json::{Value, json};
use tokio::sync::mpsc;

use super::ClientError;
use crate::protocol::client::InvalidResult;
use crate::protocol::number;
use crate::protocol::trace::TraceContext;
use crate::protocol::{
    EXTENSION_ID, ErrorKind, META_CLIENT_CAPABILITIES, META_CLIENT_INFO, META_PROTOCOL_VERSION, PROTOCOL_VERSION,
    RpcError,
};

/// A live `subscriptions/listen` stream for task notifications.
#[derive(Debug)]
pub struct ListenStream {
    /// The ids the server agreed to report on (poll the others).
    pub accepted: Vec<String>,
    /// The params of each `notifications/tasks` as they arrived (the task driver reads them, and
    /// answers one it cannot read with a poll); closed when the stream ends.
    pub updates: mpsc::Receiver<Value>,
}

/// Sends requests to one MCP server.
#[async_trait]
pub trait Transport: Send + Sync + 'static {
    /// Sends one request with the 2026-07-28 envelope. `Ok` is the `result`; a JSON-RPC error
    /// is [`ClientError::Rpc`].
    async fn request(&self, method: &str, params: Value) -> Result<Value, ClientError>;

    /// Opens a listen stream for `task_ids`; `Ok(None)` when the server does not offer one.
    async fn listen(&self, task_ids: &[String]) -> Result<Option<ListenStream>, ClientError>;

    /// A stable name of the server endpoint, keying persisted task references.
    fn endpoint(&self) -> &str;

    /// Releases what the transport holds (a stdio child ends); later requests fail. The default
    /// does nothing (an HTTP connection pool needs no closing).
    async fn close(&self) {}
}

/// Builds the per-request `_meta` envelope declaring the tasks extension plus `capabilities`.
pub fn envelope(capabilities: &Value, client_info: &Value) -> Value {
    let mut caps = if capabilities.is_object() { capabilities.clone() } else { json!({}) };
    if !caps.get("extensions").is_some_and(Value::is_object) {
        caps["extensions"] = json!({});
    }
    caps["extensions"][EXTENSION_ID] = json!({});
    json!({
        META_PROTOCOL_VERSION: PROTOCOL_VERSION,
        META_CLIENT_CAPABILITIES: caps,
        META_CLIENT_INFO: client_info,
    })
}

/// Encodes a header value: plain if it is safe visible ASCII, else `=?base64?…?=` (the protocol
/// crate's rule, kept under the client's name).
pub use crate::protocol::headers::encode_value as header_value;

/// The Streamable HTTP transport.
#[derive(Clone, Debug)]
pub struct HttpTransport {
    http: reqwest::Client,
    url: String,
    /// `url` parsed once (a URL parse was ~4% of a quick task's client time); `None` when it
    /// is no URL, which every request then reports.
    parsed_url: Option<reqwest::Url>,
    headers: HashMap<String, String>,
    capabilities: Value,
    client_info: Value,
    /// The `_meta` envelope of every request as JSON text, written again when `capabilities` or
    /// `client_info` change: building it per request was another ~4%.
    meta: std::sync::Arc<str>,
    next_id: std::sync::Arc<std::sync::atomic::AtomicU64>,
    /// Set once the endpoint answered `subscriptions/listen` with -32601: it has no listen, so
    /// no later task opens one (every clone of this transport shares the answer).
    listen_unsupported: std::sync::Arc<std::sync::atomic::AtomicBool>,
    /// Bounds the requests in flight (every clone shares it), and so the connections.
    requests: std::sync::Arc<tokio::sync::Semaphore>,
}

/// The most requests one [`HttpTransport`] has in flight at once; more wait their turn. HTTP/1.1
/// carries one request per connection, so without a bound every call of a burst (10,000 tasks
/// started at once) would open a connection of its own and keep it in the pool. Listen streams
/// are bounded apart ([`super::MAX_LISTEN_STREAMS`]).
pub const MAX_CONCURRENT_REQUESTS: usize = 64;

impl HttpTransport {
    /// A transport for the endpoint at `url` (e.g. `http://127.0.0.1:8080/mcp`).
    pub fn new(url: impl Into<String>) -> Self {
        // Idle connections beyond what the request bound can use would only hold descriptors.
        let http = reqwest::Client::builder()
            .pool_max_idle_per_host(MAX_CONCURRENT_REQUESTS)
            .build()
            .unwrap_or_else(|_| reqwest::Client::new());
        let url = url.into();
        let capabilities = super::default_capabilities();
        let client_info = json!({"name": "mcp-tasks", "version": env!("CARGO_PKG_VERSION")});
        Self {
            http,
            parsed_url: reqwest::Url::parse(&url).ok(),
            url,
            headers: HashMap::new(),
            meta: meta_text(&capabilities, &client_info),
            capabilities,
            client_info,
            next_id: std::sync::Arc::new(std::sync::atomic::AtomicU64::new(1)),
            listen_unsupported: std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false)),
            requests: std::sync::Arc::new(tokio::sync::Semaphore::new(MAX_CONCURRENT_REQUESTS)),
        }
    }

    /// Adds a header to every request (e.g. `Authorization`).
    #[must_use]
    pub fn header(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.headers.insert(name.into(), value.into());
        self
    }

    /// Sets the client capabilities declared besides the tasks extension (default
    /// [`super::default_capabilities`]).
    #[must_use]
    pub fn capabilities(mut self, capabilities: Value) -> Self {
        self.capabilities = capabilities;
        self.meta = meta_text(&self.capabilities, &self.client_info);
        self
    }

    /// Sets the `clientInfo` sent with every request.
    #[must_use]
    pub fn client_info(mut self, name: &str, version: &str) -> Self {
        self.client_info = json!({"name": name, "version": version});
        self.meta = meta_text(&self.capabilities, &self.client_info);
        self
    }

    fn post(&self, method: &str, params: Value) -> (u64, reqwest::RequestBuilder) {
        use reqwest::header::{ACCEPT, CONTENT_TYPE, HeaderValue};
        let id = self.next_id.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let name_field = match method {
            "tools/call" | "prompts/get" => Some("name"),
            "resources/read" => Some("uri"),
            "tasks/get" | "tasks/update" | "tasks/cancel" => Some("taskId"),
            _ => None,
        };
        let name = name_field.and_then(|f| params.get(f)).and_then(Value::as_str).map(header_value);
        let mut request = match &self.parsed_url {
            Some(url) => self.http.post(url.clone()),
            None => self.http.post(&self.url), // fails when sent, naming the URL
        };
        request = request
            .header(CONTENT_TYPE, HeaderValue::from_static("application/json"))
            .header(ACCEPT, HeaderValue::from_static("application/json, text/event-stream"))
            .header("mcp-protocol-version", HeaderValue::from_static(PROTOCOL_VERSION))
            .header("mcp-method", method)
            .body(request_body(id, method, params, &self.meta));
        if let Some(name) = name {
            request = request.header("mcp-name", name);
        }
        for (k, v) in &self.headers {
            request = request.header(k, v);
        }
        (id, request)
    }
}

/// The `_meta` envelope ([`envelope`]) as JSON text.
fn meta_text(capabilities: &Value, client_info: &Value) -> std::sync::Arc<str> {
    envelope(capabilities, client_info).to_string().into()
}

/// A request's JSON-RPC body: `params` (an object; anything else is sent as `{}`) with `meta`
/// (JSON text of an object) as its `_meta`, which replaces one the caller set but for its valid
/// trace context (SEP-414 `traceparent`, `tracestate`, `baggage`), which is carried over.
fn request_body(id: u64, method: &str, params: Value, meta: &str) -> Vec<u8> {
    let mut params = match params {
        Value::Object(params) => params,
        _ => serde_json::Map::new(),
    };
    let trace = params.shift_remove("_meta").as_ref().and_then(Value::as_object).and_then(TraceContext::from_meta);
    let traced;
    let meta = match trace {
        Some(trace) => {
            traced = with_trace(meta, &trace);
            traced.as_str()
        }
        None => meta,
    };
    let mut body = Vec::with_capacity(192 + meta.len());
    body.extend_from_slice(br#"{"jsonrpc":"2.0","id":"#);
    body.extend_from_slice(id.to_string().as_bytes());
    body.extend_from_slice(br#","method":"#);
    // Writing JSON into a Vec fails only for a map key that is no string, which a Map has not.
    let _ = serde_json::to_writer(&mut body, method);
    body.extend_from_slice(br#","params":"#);
    let _ = serde_json::to_writer(&mut body, &params);
    body.pop(); // the object's closing brace: `_meta` goes last
    if !params.is_empty() {
        body.push(b',');
    }
    body.extend_from_slice(br#""_meta":"#);
    body.extend_from_slice(meta.as_bytes());
    body.extend_from_slice(b"}}");
    body
}

/// `meta` (JSON text of an object) with `trace`'s keys added.
fn with_trace(meta: &str, trace: &TraceContext) -> String {
    let mut object: serde_json::Map<String, Value> = serde_json::from_str(meta).unwrap_or_default();
    trace.write_meta(&mut object);
    Value::Object(object).to_string()
}

/// Turns one JSON-RPC response message (`{"result": ...}` or `{"error": {...}}`) into the result
/// or the error: the one reader of responses, for the built-in transports and bindings' own.
/// A response that is neither is [`InvalidResult::MalformedResponse`]: no passing fault, since
/// asking again would be answered the same.
pub fn response_result(mut message: Value) -> Result<Value, ClientError> {
    let malformed = |why: String| ClientError::InvalidResult(InvalidResult::MalformedResponse(why));
    if let Some(error) = message.get_mut("error").map(Value::take) {
        let error: RpcError =
            serde_json::from_value(error).map_err(|e| malformed(format!("the JSON-RPC error cannot be read: {e}")))?;
        return Err(ClientError::Rpc(error));
    }
    message.get_mut("result").map(Value::take).ok_or_else(|| malformed("it has neither result nor error".to_owned()))
}

/// Reads SSE `data:` payloads from a byte stream, one JSON message per event.
struct SseMessages<S> {
    stream: S,
    buffer: String,
}

impl<S, B, E> SseMessages<S>
where
    S: futures::Stream<Item = Result<B, E>> + Unpin,
    B: AsRef<[u8]>,
    E: std::error::Error + Send + Sync + 'static,
{
    async fn next(&mut self) -> Option<Result<Value, ClientError>> {
        loop {
            if let Some(end) = self.buffer.find("\n\n") {
                let event: String = self.buffer.drain(..end + 2).collect();
                let data: Vec<&str> = event
                    .lines()
                    .filter_map(|l| l.strip_prefix("data:"))
                    .map(|d| d.strip_prefix(' ').unwrap_or(d))
                    .collect();
                if data.is_empty() {
                    continue; // a comment or keep-alive
                }
                return Some(
                    serde_json::from_str(&data.join("\n"))
                        .map_err(|e| ClientError::transport(format!("SSE data is not JSON: {e}"))),
                );
            }
            match self.stream.next().await? {
                Ok(chunk) => self.buffer.push_str(&String::from_utf8_lossy(chunk.as_ref()).replace("\r\n", "\n")),
                Err(e) => return Some(Err(ClientError::transport_from(e))),
            }
        }
    }
}

fn is_sse(response: &reqwest::Response) -> bool {
    response
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|ct| ct.starts_with("text/event-stream"))
}

#[async_trait]
impl Transport for HttpTransport {
    async fn request(&self, method: &str, params: Value) -> Result<Value, ClientError> {
        // Held until the answer is read: the connection is free for the next request only then.
        let _turn = self.requests.acquire().await.map_err(ClientError::transport_from)?;
        let (id, request) = self.post(method, params);
        let response = request.send().await.map_err(ClientError::transport_from)?;
        let status = response.status().as_u16();
        if is_sse(&response) {
            let mut messages = SseMessages { stream: response.bytes_stream(), buffer: String::new() };
            while let Some(message) = messages.next().await {
                let message = message?;
                if message.get("id").is_some_and(|v| number::is_id(v, id)) {
                    return response_result(message);
                }
            }
            return Err(ClientError::transport("SSE response ended without an answer"));
        }
        let body = response.bytes().await.map_err(ClientError::transport_from)?;
        match serde_json::from_slice::<Value>(&body) {
            Ok(message) if message.is_object() => response_result(message),
            _ => Err(ClientError::Http { status, body: String::from_utf8_lossy(&body).chars().take(500).collect() }),
        }
    }

    async fn listen(&self, task_ids: &[String]) -> Result<Option<ListenStream>, ClientError> {
        use std::sync::atomic::Ordering;
        if self.listen_unsupported.load(Ordering::Relaxed) {
            return Ok(None);
        }
        let (id, request) = self.post("subscriptions/listen", json!({"notifications": {"taskIds": task_ids}}));
        let response = request.send().await.map_err(ClientError::transport_from)?;
        if !is_sse(&response) {
            // An error means: poll instead. Only "no such method" is remembered for the endpoint;
            // anything else (a refused filter, a passing fault) is asked again for the next task.
            let body: Value = response.json().await.unwrap_or(Value::Null);
            if number::code_of(&body["error"]["code"]) == Some(ErrorKind::MethodNotFound.code()) {
                self.listen_unsupported.store(true, Ordering::Relaxed);
            }
            return Ok(None);
        }
        let mut messages = SseMessages { stream: Box::pin(response.bytes_stream()), buffer: String::new() };
        let accepted = loop {
            match messages.next().await {
                Some(Ok(message)) if message["method"] == "notifications/subscriptions/acknowledged" => {
                    let ids = message["params"]["notifications"]["taskIds"].as_array().cloned().unwrap_or_default();
                    break ids.into_iter().filter_map(|v| v.as_str().map(str::to_owned)).collect::<Vec<_>>();
                }
                Some(Ok(message)) if message.get("id").is_some_and(|v| number::is_id(v, id)) => return Ok(None),
                Some(Ok(_)) => {}
                Some(Err(e)) => return Err(e),
                None => return Ok(None),
            }
        };
        let (tx, rx) = mpsc::channel(64);
        tokio::spawn(async move {
            loop {
                // Nobody listening any more (a shared stream replaced, a client closed) closes the
                // stream at once, not at its next message.
                let message = tokio::select! {
                    message = messages.next() => match message {
                        Some(Ok(message)) => message,
                        _ => return,
                    },
                    () = tx.closed() => return,
                };
                if message["method"] == "notifications/tasks" {
                    let params = message.get("params").cloned().unwrap_or(Value::Null);
                    if tx.send(params).await.is_err() {
                        return; // nobody listens any more: dropping the stream closes it
                    }
                } else if message.get("id").is_some() {
                    return; // the graceful end of the subscription
                }
            }
        });
        Ok(Some(ListenStream { accepted, updates: rx }))
    }

    fn endpoint(&self) -> &str {
        &self.url
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The body written by hand reads as the envelope built as a `Value` would have.
    #[test]
    fn request_bodies_carry_params_and_the_envelope() {
        let meta = envelope(&json!({"elicitation": {}}), &json!({"name": "c", "version": "1"}));
        let text = meta.to_string();
        for (params, expected) in [
            (json!({}), json!({})),
            (json!(null), json!({})),
            (json!({"taskId": "a\"b", "n": [1, {"x": null}]}), json!({"taskId": "a\"b", "n": [1, {"x": null}]})),
            (json!({"_meta": {"mine": 1}, "name": "t"}), json!({"name": "t"})),
            // An invalid trace context is dropped with the rest of the caller's `_meta`.
            (json!({"_meta": {"traceparent": "00-0-0-0"}, "name": "t"}), json!({"name": "t"})),
        ] {
            let body: Value = serde_json::from_slice(&request_body(7, "tasks/get", params, &text)).unwrap();
            let mut expected = expected;
            expected["_meta"] = meta.clone();
            assert_eq!(body, json!({"jsonrpc": "2.0", "id": 7, "method": "tasks/get", "params": expected}));
        }
    }

    /// A valid trace context in the caller's `_meta` (SEP-414) is carried beside the envelope.
    #[test]
    fn request_bodies_carry_the_callers_trace_context_beside_the_envelope() {
        let meta = envelope(&json!({}), &json!({"name": "c", "version": "1"}));
        let traced = json!({"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
                            "tracestate": "rojo=1", "baggage": "k=v"});
        let mut caller = traced.clone();
        caller["mine"] = json!(1);
        let params = json!({"taskId": "t", "_meta": caller});
        let body: Value = serde_json::from_slice(&request_body(3, "tasks/get", params, &meta.to_string())).unwrap();
        let mut expected = meta.clone();
        for (k, v) in traced.as_object().unwrap() {
            expected[k] = v.clone();
        }
        assert_eq!(body["params"]["_meta"], expected, "the trace keys, and none of the caller's others");
    }
}
