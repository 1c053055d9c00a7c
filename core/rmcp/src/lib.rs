//! Durable MCP tasks for [rmcp](https://docs.rs/rmcp), the official Rust SDK: an rmcp client
//! follows a task to its outcome through mcp-tasks' client.
//!
//! rmcp's `call_tool` fails when a server answers `tools/call` with a task
//! (`resultType: "task"`, <https://modelcontextprotocol.github.io/ext-tasks/specification/2026-07-28/tasks.html>),
//! leaving its users to poll `tasks/get` by hand. [`RmcpTransport`] puts mcp-tasks'
//! [`Client`](mcp_tasks::client::Client) on top of an rmcp [`Peer<RoleClient>`]: the client's
//! requests go out through rmcp's own typed calls (`call_tool_once`, `get_task`, `update_task`,
//! `cancel_task`), so the connection, its transport and its `_meta` envelope stay rmcp's, and
//! core's driver follows the task: polling at the server's interval, MRTR rounds and task input
//! answered by the input handler, cancellation, and task references kept for `resume_all`.
//!
//! ```no_run
//! # async fn run(peer: rmcp::Peer<rmcp::RoleClient>) -> Result<(), mcp_tasks::client::ClientError> {
//! use std::sync::Arc;
//! let client = mcp_tasks::client::Client::with_transport(Arc::new(mcp_tasks_rmcp::RmcpTransport::new(peer, "my-server")))
//!     .build()?;
//! let execution = client.call_tool("build_report", serde_json::json!({"quarter": "Q3"})).await?;
//! println!("{:?}", execution.result().await?);
//! # Ok(()) }
//! ```
//!
//! The rmcp client must declare the tasks extension itself (its `ClientCapabilities` with
//! `enable_tasks()`), and what its input handler answers (`elicitation`, ...): rmcp stamps every
//! request's envelope from them, and a server creates a task only for a request that declares the
//! extension.

#![warn(missing_docs)]

#[cfg(feature = "server")]
pub mod server;
#[cfg(feature = "server")]
pub use server::{DurableServer, TaskRun};

use async_trait::async_trait;
use mcp_tasks::client::{ClientError, ListenStream, Transport};
use mcp_tasks::protocol::RpcError;
use rmcp::model::{CallToolRequestParams, CallToolResponse, CancelTaskParams, GetTaskParams, UpdateTaskParams};
use rmcp::service::ServiceError;
use rmcp::{Peer, RoleClient};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

/// A [`Transport`] over an rmcp client connection: what mcp-tasks' client sends goes out through
/// the peer's typed SEP-2663 calls. It offers no `subscriptions/listen` (rmcp's client cannot
/// route task notifications), so the client polls at the server's `pollIntervalMs`.
#[derive(Clone)]
pub struct RmcpTransport {
    peer: Peer<RoleClient>,
    endpoint: String,
}

impl std::fmt::Debug for RmcpTransport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RmcpTransport").field("endpoint", &self.endpoint).finish_non_exhaustive()
    }
}

impl RmcpTransport {
    /// A transport over `peer`; `endpoint` names the server in the task references the client
    /// keeps (use the server's URL, or any name stable across restarts).
    pub fn new(peer: Peer<RoleClient>, endpoint: impl Into<String>) -> Self {
        Self { peer, endpoint: endpoint.into() }
    }
}

#[async_trait]
impl Transport for RmcpTransport {
    async fn request(&self, method: &str, mut params: Value) -> Result<Value, ClientError> {
        // rmcp stamps each request's `_meta` envelope from its own client info.
        if let Value::Object(params) = &mut params {
            params.remove("_meta");
        }
        match method {
            "tools/call" => {
                let params: CallToolRequestParams = decode(method, params)?;
                let answer = self.peer.call_tool_once(params).await.map_err(service_error)?;
                match answer {
                    CallToolResponse::Complete(result) => encode(&result, "complete"),
                    CallToolResponse::InputRequired(round) => encode(&round, "input_required"),
                    CallToolResponse::Task(created) => encode(&created, "task"),
                    // A later rmcp's new kind of answer, which this crate cannot put in words.
                    _ => Err(ClientError::Transport {
                        message: "rmcp answered tools/call with a kind of result this crate does not know".into(),
                        source: None,
                    }),
                }
            }
            "tasks/get" => {
                let params: GetTaskParams = decode(method, params)?;
                encode(&self.peer.get_task(params).await.map_err(service_error)?, "complete")
            }
            "tasks/update" => {
                let params: UpdateTaskParams = decode(method, params)?;
                self.peer.update_task(params).await.map_err(service_error)?;
                Ok(json!({"resultType": "complete"}))
            }
            "tasks/cancel" => {
                let params: CancelTaskParams = decode(method, params)?;
                self.peer.cancel_task(params).await.map_err(service_error)?;
                Ok(json!({"resultType": "complete"}))
            }
            other => Err(ClientError::Transport {
                message: format!("the rmcp transport sends tools/call and tasks/*, not {other}"),
                source: None,
            }),
        }
    }

    async fn listen(&self, _task_ids: &[String]) -> Result<Option<ListenStream>, ClientError> {
        Ok(None)
    }

    fn endpoint(&self) -> &str {
        &self.endpoint
    }
}

/// rmcp's typed params for `method`, from the JSON the client built.
fn decode<T: DeserializeOwned>(method: &str, params: Value) -> Result<T, ClientError> {
    serde_json::from_value(params).map_err(|e| ClientError::Transport {
        message: format!("rmcp cannot carry these {method} params"),
        source: Some(std::sync::Arc::new(e)),
    })
}

/// rmcp's typed result as the JSON the client reads, with its `resultType` (`kind`) where rmcp's
/// model leaves it out.
fn encode<T: Serialize>(result: &T, kind: &str) -> Result<Value, ClientError> {
    let mut value = serde_json::to_value(result).map_err(|e| ClientError::Transport {
        message: "rmcp's result does not serialize".into(),
        source: Some(std::sync::Arc::new(e)),
    })?;
    if let Value::Object(map) = &mut value
        && !kind.is_empty()
    {
        map.entry("resultType").or_insert_with(|| Value::String(kind.to_owned()));
    }
    Ok(value)
}

/// A JSON-RPC error the server answered stays one (its code, message and data); anything else
/// rmcp reports is the transport's failure, its error kept as the cause.
fn service_error(error: ServiceError) -> ClientError {
    match error {
        ServiceError::McpError(e) => {
            let mut rpc = RpcError::new(i64::from(e.code.0), e.message.into_owned());
            if let Some(data) = e.data {
                rpc = rpc.with_data(data);
            }
            ClientError::Rpc(rpc)
        }
        other => ClientError::Transport { message: "rmcp failed".into(), source: Some(std::sync::Arc::new(other)) },
    }
}
