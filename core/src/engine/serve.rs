//! Performing a request the [`protocol::server::Dispatcher`](crate::protocol::server::Dispatcher)
//! routed: the one place that turns a [`Route`] into engine calls, shared by every adapter (the
//! axum host, the Python extension, the TypeScript server). What stays with the adapter is how
//! a tool runs: its MRTR phase and its work.

use std::sync::Arc;

use serde_json::Value;

use super::{Engine, Subscription};
use crate::protocol::server::{Route, ToolCallRoute, ack_result};
use crate::protocol::{ProtocolError, TaskRecord};

/// What performing a [`Route`] produced.
#[allow(clippy::large_enum_variant)] // consumed at once by the adapter
pub enum Served {
    /// The result object to answer with (`tasks/update|cancel`).
    Result(Value),
    /// The task `tasks/get` shows, as the engine read it for the caller: answer with
    /// [`ReplyTo::task`](crate::protocol::server::ReplyTo::task) (or
    /// [`get_result`](crate::protocol::server::get_result) of its
    /// [`to_detailed`](TaskRecord::to_detailed) where an SDK wants the result as a value).
    Task(Arc<TaskRecord>),
    /// A listen subscription: stream it with the request's
    /// [`ListenFrames`](crate::protocol::server::ListenFrames).
    Listen(Subscription),
    /// A `tools/call` whose sizes were admitted: the adapter runs the MRTR phase, then the tool
    /// synchronously or through [`Engine::create_task`], as [`ToolCallRoute::dispatch`] says.
    CallTool(Box<ToolCallRoute>),
}

impl std::fmt::Debug for Served {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Result(v) => f.debug_tuple("Result").field(v).finish(),
            Self::Task(t) => f.debug_tuple("Task").field(&t.id).finish(),
            Self::Listen(s) => f.debug_struct("Listen").field("accepted", &s.accepted).finish_non_exhaustive(),
            Self::CallTool(c) => f.debug_tuple("CallTool").field(c).finish(),
        }
    }
}

impl Engine {
    /// Performs `route` for `principal`. Errors are protocol errors with their table rows
    /// (unknown, purged or foreign task ids are -32602; store failures -32603).
    pub async fn serve(&self, principal: &str, route: Route) -> Result<Served, ProtocolError> {
        Ok(match route {
            Route::GetTask { task_id } => {
                Served::Task(self.read(principal, &task_id).await.map_err(|e| e.to_protocol())?)
            }
            Route::UpdateTask { task_id, input_responses } => {
                self.update(principal, &task_id, input_responses).await.map_err(|e| e.to_protocol())?;
                Served::Result(ack_result())
            }
            Route::CancelTask { task_id } => {
                self.cancel(principal, &task_id).await.map_err(|e| e.to_protocol())?;
                Served::Result(ack_result())
            }
            Route::Listen { task_ids, .. } => {
                Served::Listen(self.subscribe(principal, task_ids.as_deref().unwrap_or_default()).await)
            }
            Route::CallTool(call) => {
                self.admit_call(&call)?;
                Served::CallTool(call)
            }
        })
    }

    /// What [`Engine::serve`] checks of a routed `tools/call` before the adapter runs it (the
    /// size limits of its arguments and MRTR answers), for adapters that take the call without
    /// awaiting `serve`: it needs no IO.
    pub fn admit_call(&self, call: &ToolCallRoute) -> Result<(), ProtocolError> {
        self.check_arguments(&call.arguments)?;
        if let Some(responses) = &call.input_responses {
            self.check_input_responses(responses)?;
        }
        Ok(())
    }
}
