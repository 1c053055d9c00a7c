//! Serde types for every message of the tasks extension and the parts of MCP 2026-07-28 it
//! touches (<https://modelcontextprotocol.github.io/ext-tasks/specification/2026-07-28/tasks.html>,
//! <https://modelcontextprotocol.io/specification/2026-07-28>). Field names follow the wire
//! (`camelCase`); optional fields are omitted when absent, except `ttlMs`, which the schema requires and which is `null` for an
//! unlimited lifetime.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::error::RpcError;

/// The extension identifier a client declares and a server advertises.
pub const EXTENSION_ID: &str = "io.modelcontextprotocol/tasks";
/// The MCP revision this crate speaks.
pub const PROTOCOL_VERSION: &str = "2026-07-28";
/// `_meta` key carrying the request's protocol version.
pub const META_PROTOCOL_VERSION: &str = "io.modelcontextprotocol/protocolVersion";
/// `_meta` key carrying the request's client capabilities.
pub const META_CLIENT_CAPABILITIES: &str = "io.modelcontextprotocol/clientCapabilities";
/// `_meta` key carrying the client's self-reported identity.
pub const META_CLIENT_INFO: &str = "io.modelcontextprotocol/clientInfo";
/// `_meta` key carrying the server's identity on `server/discover`.
pub const META_SERVER_INFO: &str = "io.modelcontextprotocol/serverInfo";
/// `_meta` key stamped on every message of a `subscriptions/listen` stream.
pub const META_SUBSCRIPTION_ID: &str = "io.modelcontextprotocol/subscriptionId";

/// `InputRequests`: server-chosen keys mapped to `{method, params}` request objects.
pub type InputRequests = Map<String, Value>;
/// `InputResponses`: the same keys mapped to the matching results.
pub type InputResponses = Map<String, Value>;
/// A JSON-RPC request id (string or number).
pub type RequestId = Value;

/// The `resultType` discriminator of MCP 2026-07-28 results.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ResultType {
    /// A final result.
    Complete,
    /// An MRTR `InputRequiredResult`.
    InputRequired,
    /// A `CreateTaskResult` (reserved by this extension).
    Task,
}

/// A task's status (the extension's `TaskStatus`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TaskStatus {
    /// The work is running.
    Working,
    /// The work waits for answers to `inputRequests`.
    InputRequired,
    /// Terminal: `result` holds the tool's `CallToolResult` (also for `isError: true`).
    Completed,
    /// Terminal: `error` holds a JSON-RPC error.
    Failed,
    /// Terminal: the task was cancelled.
    Cancelled,
}

impl TaskStatus {
    /// True for `completed`, `failed` and `cancelled`, which never change again.
    pub fn is_terminal(self) -> bool {
        matches!(self, Self::Completed | Self::Failed | Self::Cancelled)
    }

    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Working => "working",
            Self::InputRequired => "input_required",
            Self::Completed => "completed",
            Self::Failed => "failed",
            Self::Cancelled => "cancelled",
        }
    }

    /// Parses a wire name.
    pub fn parse(text: &str) -> Option<Self> {
        Some(match text {
            "working" => Self::Working,
            "input_required" => Self::InputRequired,
            "completed" => Self::Completed,
            "failed" => Self::Failed,
            "cancelled" => Self::Cancelled,
            _ => return None,
        })
    }
}

/// The base `Task` fields shared by `CreateTaskResult`, `tasks/get` and `notifications/tasks`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Task {
    /// Server-generated, unguessable id.
    pub task_id: String,
    /// Current status.
    pub status: TaskStatus,
    /// Human-readable status, set by the work (and always when `failed`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status_message: Option<String>,
    /// ISO 8601 creation time.
    pub created_at: String,
    /// ISO 8601 time of the last change.
    pub last_updated_at: String,
    /// Lifetime from `createdAt` in milliseconds; `null` means unlimited. Always serialized;
    /// read from any non-negative JSON number (`60000.0` too, see [`crate::number`]).
    #[serde(deserialize_with = "crate::number::de_opt_millis")]
    pub ttl_ms: Option<u64>,
    /// Suggested polling interval in milliseconds (read as `ttl_ms` is).
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "crate::number::de_opt_millis")]
    pub poll_interval_ms: Option<u64>,
}

/// A `DetailedTask`: the `Task` plus what its status carries (the extension's `DetailedTask` variants).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DetailedTask {
    /// The base fields.
    #[serde(flatten)]
    pub task: Task,
    /// Outstanding input requests; present exactly when `input_required`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input_requests: Option<InputRequests>,
    /// The full `CallToolResult` (with `resultType: "complete"`); present exactly when `completed`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<Value>,
    /// The JSON-RPC error; present exactly when `failed`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<RpcError>,
}

/// The flat `CreateTaskResult` answered to a task-augmented `tools/call`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CreateTaskResult {
    /// Always [`ResultType::Task`].
    pub result_type: ResultType,
    /// The task, flat at the top level.
    #[serde(flatten)]
    pub task: Task,
}

/// The result of `tasks/get`: `resultType: "complete"` plus the `DetailedTask`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GetTaskResult {
    /// Always [`ResultType::Complete`].
    pub result_type: ResultType,
    /// The task.
    #[serde(flatten)]
    pub task: DetailedTask,
}

/// The empty acknowledgement answered to `tasks/update` and `tasks/cancel`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AckResult {
    /// Always [`ResultType::Complete`].
    pub result_type: ResultType,
}

impl AckResult {
    /// The `{resultType: "complete"}` ack.
    pub fn new() -> Self {
        Self { result_type: ResultType::Complete }
    }
}

impl Default for AckResult {
    fn default() -> Self {
        Self::new()
    }
}

/// An MRTR `InputRequiredResult` on `tools/call`, answered before any task exists.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct InputRequiredResult {
    /// Always [`ResultType::InputRequired`].
    pub result_type: ResultType,
    /// The requests the client answers by re-sending the call with `inputResponses`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input_requests: Option<InputRequests>,
    /// Opaque state the client echoes back (sealed by the host, see `protocol::request_state`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_state: Option<String>,
}

/// `tools/call` params (the core `CallToolRequestParams`; a legacy `task` member is ignored).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CallToolParams {
    /// The tool's name.
    pub name: String,
    /// The tool's arguments.
    #[serde(default)]
    pub arguments: Map<String, Value>,
    /// Answers to an earlier MRTR round.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input_responses: Option<InputResponses>,
    /// State echoed from an earlier MRTR round.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_state: Option<String>,
}

/// `tasks/get` and `tasks/cancel` params.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TaskIdParams {
    /// The task.
    pub task_id: String,
}

/// `tasks/update` params.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct UpdateTaskParams {
    /// The task.
    pub task_id: String,
    /// Answers keyed like the task's `inputRequests`; unknown or answered keys are ignored.
    pub input_responses: InputResponses,
}

/// `subscriptions/listen` params: the notification filter with the extension's `taskIds`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ListenParams {
    /// The filter; core keys (`toolsListChanged`, ...) are kept as they came.
    pub notifications: ListenFilter,
}

/// A `SubscriptionFilter` with the tasks extension's `taskIds`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ListenFilter {
    /// Task ids to receive `notifications/tasks` for. Absent is `None`; `null` is refused (the
    /// schema allows only an array), so every host answers it with -32602 rather than pass it
    /// on as "no filter".
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "present_array")]
    pub task_ids: Option<Vec<String>>,
    /// Core filter keys, untouched.
    #[serde(flatten)]
    pub other: Map<String, Value>,
}

/// A field that, when present, must be an array of strings (`null` included is an error).
fn present_array<'de, D: serde::Deserializer<'de>>(deserializer: D) -> Result<Option<Vec<String>>, D::Error> {
    Vec::<String>::deserialize(deserializer).map(Some)
}

/// A JSON-RPC notification as sent on a listen stream.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Notification<P> {
    /// Always `"2.0"`.
    pub jsonrpc: String,
    /// The notification method.
    pub method: String,
    /// Its params.
    pub params: P,
}

/// `notifications/subscriptions/acknowledged` params.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AcknowledgedParams {
    /// `{"io.modelcontextprotocol/subscriptionId": <listen request id>}`.
    #[serde(rename = "_meta")]
    pub meta: Map<String, Value>,
    /// The subset of the filter the server honours.
    pub notifications: ListenFilter,
}

/// `notifications/tasks` params: the full `DetailedTask` plus the subscription `_meta`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TaskNotificationParams {
    /// `{"io.modelcontextprotocol/subscriptionId": <listen request id>}`.
    #[serde(rename = "_meta")]
    pub meta: Map<String, Value>,
    /// The task as `tasks/get` would return it now.
    #[serde(flatten)]
    pub task: DetailedTask,
}

/// The graceful end of a listen stream: `{resultType: "complete", _meta: {subscriptionId}}`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ListenResult {
    /// Always [`ResultType::Complete`].
    pub result_type: ResultType,
    /// `{"io.modelcontextprotocol/subscriptionId": <listen request id>}`.
    #[serde(rename = "_meta")]
    pub meta: Map<String, Value>,
}

/// The `server/discover` result (core `DiscoverResult`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DiscoverResult {
    /// Always [`ResultType::Complete`].
    pub result_type: ResultType,
    /// Protocol versions the server speaks.
    pub supported_versions: Vec<String>,
    /// `ServerCapabilities`, with the extension under `extensions`.
    pub capabilities: Value,
    /// How long the client may cache this result (read from any non-negative JSON number).
    #[serde(deserialize_with = "crate::number::de_millis")]
    pub ttl_ms: u64,
    /// `"public"` or `"private"`.
    pub cache_scope: String,
    /// Optional instructions for the model.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instructions: Option<String>,
    /// `{"io.modelcontextprotocol/serverInfo": {name, version}}`.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Map<String, Value>>,
}

/// Builds the `{"io.modelcontextprotocol/subscriptionId": id}` `_meta` object.
pub fn subscription_meta(subscription_id: &RequestId) -> Map<String, Value> {
    let mut meta = Map::new();
    meta.insert(META_SUBSCRIPTION_ID.to_owned(), subscription_id.clone());
    meta
}

/// Builds a JSON-RPC success response.
pub fn response(id: &RequestId, result: Value) -> Value {
    serde_json::json!({ "jsonrpc": "2.0", "id": id, "result": result })
}

/// Builds a JSON-RPC error response. When the request's id could not be read, `id` is
/// omitted: the 2026-07-28 schema (`JSONRPCErrorResponse`) makes it optional but only allows a
/// string or integer, so JSON-RPC 2.0's `"id": null` would fail schema validation.
pub fn error_response(id: Option<&RequestId>, error: &RpcError) -> Value {
    match id {
        Some(id) => serde_json::json!({ "jsonrpc": "2.0", "id": id, "error": error }),
        None => serde_json::json!({ "jsonrpc": "2.0", "error": error }),
    }
}

/// Builds a JSON-RPC notification value.
pub fn notification<P: Serialize>(method: &str, params: P) -> Value {
    serde_json::to_value(Notification { jsonrpc: "2.0".to_owned(), method: method.to_owned(), params })
        .expect("notification params serialize")
}
