//! A stateless MCP 2026-07-28 Streamable HTTP endpoint on axum, serving tools through the task
//! engine: `server/discover`, `ping`, `tools/list`, `tools/call` (sync, MRTR and task),
//! `tasks/get|update|cancel`, and `subscriptions/listen` as an SSE stream.
//!
//! Every POST is one JSON-RPC message. The reply is `application/json`, or a one-event SSE
//! stream when the client accepts only `text/event-stream`. GET and DELETE answer 405: this
//! revision has no sessions
//! (<https://modelcontextprotocol.io/specification/2026-07-28/basic/transports/streamable-http>).

mod tools;

use std::sync::Arc;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{DefaultBodyLimit, Request, State};
use axum::http::{HeaderMap, StatusCode, header, request::Parts};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use futures::stream::{self, Stream};
use serde_json::{Map, Value, json};
use sha2::Digest;

pub use tools::{Prepared, RunContext, Tool, ToolCall, ToolHandler, error_result, handler_fn, text_result};

use crate::engine::{Engine, EngineError, Subscription};
use crate::protocol::negotiation::{self, Dispatch, SUPPORTED_VERSIONS};
use crate::protocol::request::{self, Incoming, Method};
use crate::protocol::task::with_complete_result_type;
use crate::protocol::{
    AckResult, AcknowledgedParams, DiscoverResult, Envelope, GetTaskResult, InputRequiredResult, ListenFilter,
    ListenResult, ProtocolError, RequestId, ResultType, RpcError, TaskNotificationParams, headers, request_state,
    subscription_meta,
};

/// Derives the caller's principal from the HTTP request (its auth); `None` answers 401.
pub type PrincipalFn = Arc<dyn Fn(&Parts) -> Option<String> + Send + Sync>;

/// How long a sealed MRTR `requestState` stays valid.
const REQUEST_STATE_TTL_MS: u64 = 10 * 60 * 1000;

/// The default principal: a SHA-256 of the `Authorization` header, or `"anonymous"` without
/// one. Hosts with real auth plug in their own [`PrincipalFn`].
pub fn authorization_principal(parts: &Parts) -> Option<String> {
    Some(match parts.headers.get(header::AUTHORIZATION) {
        Some(value) => format!("auth:{}", hex::encode(sha2::Sha256::digest(value.as_bytes()))),
        None => "anonymous".to_owned(),
    })
}

/// Builds a [`Host`].
pub struct HostBuilder {
    engine: Engine,
    tools: Vec<Tool>,
    principal: PrincipalFn,
    server_name: String,
    server_version: String,
    max_body_bytes: usize,
    state_key: Vec<u8>,
}

impl HostBuilder {
    /// Adds a tool.
    #[must_use]
    pub fn tool(mut self, tool: Tool) -> Self {
        self.tools.retain(|t| t.name != tool.name);
        self.tools.push(tool);
        self
    }

    /// Replaces the principal function.
    #[must_use]
    pub fn principal(mut self, f: impl Fn(&Parts) -> Option<String> + Send + Sync + 'static) -> Self {
        self.principal = Arc::new(f);
        self
    }

    /// Sets the `serverInfo` advertised by `server/discover`.
    #[must_use]
    pub fn server_info(mut self, name: impl Into<String>, version: impl Into<String>) -> Self {
        self.server_name = name.into();
        self.server_version = version.into();
        self
    }

    /// Sets the largest accepted HTTP body; larger ones get -32600 with HTTP 413.
    #[must_use]
    pub fn max_body_bytes(mut self, bytes: usize) -> Self {
        self.max_body_bytes = bytes;
        self
    }

    /// Sets the key that seals MRTR `requestState` (random per process by default; set one
    /// shared key when several processes serve the same endpoint).
    #[must_use]
    pub fn request_state_key(mut self, key: impl Into<Vec<u8>>) -> Self {
        self.state_key = key.into();
        self
    }

    /// Builds the host.
    pub fn build(self) -> Host {
        Host { inner: Arc::new(self) }
    }
}

/// The HTTP host. Cheap to clone.
#[derive(Clone)]
pub struct Host {
    inner: Arc<HostBuilder>,
}

impl std::fmt::Debug for Host {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Host").field("tools", &self.inner.tools).finish_non_exhaustive()
    }
}

/// A failure answered as a JSON-RPC error.
enum Failure {
    Protocol(ProtocolError),
    Tool(RpcError),
}

impl From<ProtocolError> for Failure {
    fn from(e: ProtocolError) -> Self {
        Self::Protocol(e)
    }
}

impl From<EngineError> for Failure {
    fn from(e: EngineError) -> Self {
        Self::Protocol(e.to_protocol())
    }
}

enum Reply {
    Result(Value),
    Listen(RequestId, Subscription),
}

impl Host {
    /// Starts building a host over `engine`.
    pub fn builder(engine: Engine) -> HostBuilder {
        let mut key = vec![0u8; 32];
        getrandom::fill(&mut key).expect("the OS CSPRNG is available");
        HostBuilder {
            engine,
            tools: Vec::new(),
            principal: Arc::new(authorization_principal),
            server_name: "mcp-tasks".to_owned(),
            server_version: env!("CARGO_PKG_VERSION").to_owned(),
            max_body_bytes: 4 << 20,
            state_key: key,
        }
    }

    /// The engine.
    pub fn engine(&self) -> &Engine {
        &self.inner.engine
    }

    /// An axum router serving the endpoint at `path` (usually `/mcp`).
    pub fn router(&self, path: &str) -> Router {
        Router::new()
            .route(path, post(post_handler).get(method_not_allowed).delete(method_not_allowed))
            .layer(DefaultBodyLimit::disable())
            .with_state(self.clone())
    }

    /// Handles one POST (headers and body) and returns the HTTP response.
    pub async fn handle(&self, parts: Parts, body: Body) -> Response {
        let wants_sse = wants_sse_only(&parts.headers);
        let limit = self.inner.max_body_bytes;
        let bytes = match axum::body::to_bytes(body, limit).await {
            Ok(bytes) => bytes,
            Err(_) => {
                let err = ProtocolError::BodyTooLarge { limit };
                return error_reply(None, &Failure::Protocol(err), wants_sse);
            }
        };
        self.handle_bytes(&parts, &bytes, wants_sse).await
    }

    async fn handle_bytes(&self, parts: &Parts, bytes: &Bytes, wants_sse: bool) -> Response {
        let (id, method, params) = match request::decode(bytes) {
            Ok(Incoming::Request { id, method, params }) => (id, method, params),
            // Notifications and responses get no JSON-RPC answer.
            Ok(Incoming::Notification { .. } | Incoming::Response) => return StatusCode::ACCEPTED.into_response(),
            Err(e) => return error_reply(e.id.as_ref(), &Failure::Protocol(e.error), wants_sse),
        };
        let Some(principal) = (self.inner.principal)(parts) else {
            let mut response =
                error_reply(Some(&id), &Failure::Protocol(ProtocolError::InvalidRequest("unauthorized".into())), false);
            *response.status_mut() = StatusCode::UNAUTHORIZED;
            return response;
        };
        match self.dispatch(&parts.headers, &principal, &id, &method, params).await {
            Ok(Reply::Result(result)) => result_reply(&id, result, wants_sse),
            Ok(Reply::Listen(id, subscription)) => listen_stream(id, subscription).into_response(),
            Err(failure) => error_reply(Some(&id), &failure, wants_sse),
        }
    }

    async fn dispatch(
        &self,
        http_headers: &HeaderMap,
        principal: &str,
        id: &RequestId,
        name: &str,
        params: Option<Value>,
    ) -> Result<Reply, Failure> {
        let method = Method::parse(name).ok_or_else(|| ProtocolError::MethodNotFound(name.to_owned()))?;
        let envelope = negotiation::parse_envelope(params.as_ref())?;
        headers::validate(name, params.as_ref(), &envelope.protocol_version, standard_headers(http_headers))?;
        let engine = &self.inner.engine;
        let result = match method {
            Method::Discover => self.discover(),
            Method::ToolsList => json!({
                "resultType": "complete",
                "tools": self.inner.tools.iter().map(Tool::listing).collect::<Vec<_>>(),
                // The tool set is fixed for the host's life and the same for every caller.
                "ttlMs": 60_000,
                "cacheScope": "public",
            }),
            Method::ToolsCall => return self.call_tool(principal, envelope, params.as_ref()).await.map(Reply::Result),
            Method::TasksGet => {
                envelope.require_tasks(name)?;
                let p = request::task_id_params(params.as_ref(), name)?;
                let task = engine.get(principal, &p.task_id).await?;
                to_value(GetTaskResult { result_type: ResultType::Complete, task })
            }
            Method::TasksUpdate => {
                envelope.require_tasks(name)?;
                let p = request::update_params(params.as_ref())?;
                engine.update(principal, &p.task_id, p.input_responses).await?;
                to_value(AckResult::new())
            }
            Method::TasksCancel => {
                envelope.require_tasks(name)?;
                let p = request::task_id_params(params.as_ref(), name)?;
                engine.cancel(principal, &p.task_id).await?;
                to_value(AckResult::new())
            }
            Method::SubscriptionsListen => {
                let p = request::listen_params(params.as_ref())?;
                let ids = match p.notifications.task_ids {
                    Some(ids) => {
                        envelope.require_tasks("subscriptions/listen with taskIds")?;
                        ids
                    }
                    None => Vec::new(),
                };
                let subscription = engine.subscribe(principal, &ids).await;
                return Ok(Reply::Listen(id.clone(), subscription));
            }
        };
        Ok(Reply::Result(result))
    }

    fn discover(&self) -> Value {
        let mut meta = Map::new();
        meta.insert(
            crate::protocol::META_SERVER_INFO.to_owned(),
            json!({ "name": self.inner.server_name, "version": self.inner.server_version }),
        );
        to_value(DiscoverResult {
            result_type: ResultType::Complete,
            supported_versions: SUPPORTED_VERSIONS.iter().map(|v| (*v).to_owned()).collect(),
            capabilities: negotiation::server_capabilities(),
            ttl_ms: 60_000,
            cache_scope: "public".to_owned(),
            instructions: None,
            meta: Some(meta),
        })
    }

    /// The `tools/call` interceptor: MRTR rounds first, then a task or a synchronous run.
    async fn call_tool(&self, principal: &str, envelope: Envelope, params: Option<&Value>) -> Result<Value, Failure> {
        let engine = &self.inner.engine;
        let params = request::call_tool_params(params)?;
        let tool = self
            .inner
            .tools
            .iter()
            .find(|t| t.name == params.name)
            .ok_or_else(|| ProtocolError::InvalidParams(format!("Unknown tool: {}", params.name)))?;
        let dispatch = negotiation::decide(tool.mode, envelope.declares_tasks())?;
        engine.check_arguments(&params.arguments)?;
        if let Some(responses) = &params.input_responses {
            engine.check_input_responses(responses)?;
        }
        let key = &self.inner.state_key;
        let state = params
            .request_state
            .as_deref()
            .map(|sealed| request_state::open(key, principal, &tool.name, sealed, engine.now_ms()))
            .transpose()?;
        let call = ToolCall {
            name: params.name.clone(),
            arguments: params.arguments,
            input_responses: params.input_responses,
            state,
            principal: principal.to_owned(),
            envelope,
        };
        if let Prepared::InputRequired { input_requests, state } =
            tool.handler.prepare(&call).await.map_err(Failure::Tool)?
        {
            let expires = engine.now_ms().saturating_add(REQUEST_STATE_TTL_MS);
            let sealed = state.map(|s| request_state::seal(key, principal, &tool.name, &s, expires));
            return Ok(to_value(InputRequiredResult {
                result_type: ResultType::InputRequired,
                input_requests: Some(input_requests),
                request_state: sealed,
            }));
        }
        match dispatch {
            Dispatch::Sync => {
                let result = tool.handler.run(call, RunContext::sync()).await.map_err(Failure::Tool)?;
                Ok(with_complete_result_type(result))
            }
            Dispatch::Task => {
                let (created, ctx) = engine.create_task(principal, &tool.name, tool.options).await?;
                let handler = Arc::clone(&tool.handler);
                tokio::spawn(async move {
                    let cancel = ctx.cancellation();
                    let run = handler.run(call, RunContext::task(ctx.handle()));
                    // Cancellation drops the work future; the task is already `cancelled`.
                    let outcome = tokio::select! {
                        outcome = run => Some(outcome),
                        () = cancel.cancelled() => None,
                    };
                    let finished = match outcome {
                        Some(Ok(result)) => ctx.complete(result).await,
                        Some(Err(error)) => ctx.fail(error).await,
                        None => return,
                    };
                    if let Err(e) = finished {
                        tracing::error!(error = %e, "could not record a task's outcome");
                    }
                });
                Ok(to_value(created))
            }
        }
    }
}

fn to_value(value: impl serde::Serialize) -> Value {
    serde_json::to_value(value).expect("protocol types serialize")
}

fn standard_headers(map: &HeaderMap) -> headers::StandardHeaders<'_> {
    let get = |name: &str| map.get(name).and_then(|v| v.to_str().ok());
    headers::StandardHeaders {
        protocol_version: get("mcp-protocol-version"),
        method: get("mcp-method"),
        name: get("mcp-name"),
    }
}

/// True when the client accepts SSE but not JSON.
fn wants_sse_only(map: &HeaderMap) -> bool {
    let accept = map.get(header::ACCEPT).and_then(|v| v.to_str().ok()).unwrap_or("");
    accept.contains("text/event-stream") && !accept.contains("application/json") && !accept.contains("*/*")
}

fn json_body(status: StatusCode, message: &Value, sse: bool) -> Response {
    if sse {
        let event = Event::default().event("message").data(message.to_string());
        let stream = stream::iter([Ok::<_, std::convert::Infallible>(event)]);
        return (status, Sse::new(stream)).into_response();
    }
    (status, [(header::CONTENT_TYPE, "application/json")], message.to_string()).into_response()
}

fn result_reply(id: &RequestId, result: Value, sse: bool) -> Response {
    json_body(StatusCode::OK, &crate::protocol::response(id, result), sse)
}

fn error_reply(id: Option<&RequestId>, failure: &Failure, sse: bool) -> Response {
    let (status, error) = match failure {
        Failure::Protocol(e) => (e.http_status(), e.to_rpc()),
        Failure::Tool(e) => (200, e.clone()),
    };
    let status = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    json_body(status, &crate::protocol::error_response(id, &error), sse)
}

enum ListenPhase {
    Ack,
    Updates,
    Done,
}

/// The listen stream: the acknowledgement first, then `notifications/tasks` with the full
/// `DetailedTask` (current states, then every change), then — once every accepted task is
/// terminal — the graceful-close result. Every message carries the subscription id.
fn listen_stream(
    id: RequestId,
    subscription: Subscription,
) -> Sse<impl Stream<Item = Result<Event, std::convert::Infallible>>> {
    let events = stream::unfold((ListenPhase::Ack, subscription, id), |(phase, mut sub, id)| async move {
        let message = match phase {
            ListenPhase::Ack => {
                let params = AcknowledgedParams {
                    meta: subscription_meta(&id),
                    notifications: ListenFilter { task_ids: Some(sub.accepted.clone()), other: Map::new() },
                };
                let message = crate::protocol::notification("notifications/subscriptions/acknowledged", params);
                return Some((
                    Ok(Event::default().event("message").data(message.to_string())),
                    (ListenPhase::Updates, sub, id),
                ));
            }
            ListenPhase::Updates => match sub.next().await {
                Some(task) => {
                    let params = TaskNotificationParams { meta: subscription_meta(&id), task };
                    let message = crate::protocol::notification("notifications/tasks", params);
                    return Some((
                        Ok(Event::default().event("message").data(message.to_string())),
                        (ListenPhase::Updates, sub, id),
                    ));
                }
                None => crate::protocol::response(
                    &id,
                    to_value(ListenResult { result_type: ResultType::Complete, meta: subscription_meta(&id) }),
                ),
            },
            ListenPhase::Done => return None,
        };
        Some((Ok(Event::default().event("message").data(message.to_string())), (ListenPhase::Done, sub, id)))
    });
    Sse::new(events).keep_alive(KeepAlive::default())
}

async fn post_handler(State(host): State<Host>, request: Request) -> Response {
    let (parts, body) = request.into_parts();
    host.handle(parts, body).await
}

async fn method_not_allowed() -> Response {
    (StatusCode::METHOD_NOT_ALLOWED, [(header::ALLOW, "POST")]).into_response()
}

/// Serves `router` on `listener` until `shutdown` resolves.
pub async fn serve(
    listener: tokio::net::TcpListener,
    router: Router,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    axum::serve(listener, router).with_graceful_shutdown(shutdown).await
}
