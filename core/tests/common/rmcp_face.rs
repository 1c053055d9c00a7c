//! The vectors' tools (`echo`, `job`, `job_required`, `job_unlimited`, `ask_name`) written on
//! rmcp, the official Rust SDK, behind core through `mcp-tasks-rmcp`: each runs the same scripted
//! work as the Rust host's, given the task's context by `TaskRun`.

use std::sync::Arc;

use mcp_tasks::Engine;
use mcp_tasks::host::{Host, RunContext, ToolCall, ToolHandler};
use mcp_tasks::protocol::TaskMode;
use mcp_tasks::protocol::negotiation::Envelope;
use mcp_tasks_rmcp::{DurableServer, TaskRun};
use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::handler::server::tool::{InputResponses, ToolName};
use rmcp::model::{CallToolResult, ErrorData, JsonObject, ServerCapabilities, ServerConfig};
use rmcp::service::{RequestContext, RoleServer};
use rmcp::{ServerHandler, tool, tool_handler, tool_router};
use serde_json::Value;

use super::{AskName, Scripted, Scripts};

#[derive(Clone)]
struct VectorTools {
    tool_router: ToolRouter<Self>,
    scripts: Scripts,
}

/// The core call and context a tool's rmcp arguments make, for the scripted work.
fn call_of(name: &str, arguments: JsonObject, responses: Option<JsonObject>) -> ToolCall {
    ToolCall {
        name: name.to_owned(),
        arguments,
        input_responses: responses.map(Box::new),
        state: None,
        principal: String::new(),
        envelope: Arc::new(Envelope::default()),
    }
}

fn context_of(context: &RequestContext<RoleServer>) -> RunContext {
    TaskRun::of(context).map_or_else(RunContext::synchronous, |task| task.context().clone())
}

fn result(value: Result<Value, mcp_tasks::protocol::RpcError>) -> Result<CallToolResult, ErrorData> {
    match value {
        // As rmcp's `CallToolResult::success` builds it: a 2026-07-28 result names its type.
        Ok(result) => serde_json::from_value(mcp_tasks::protocol::task::with_complete_result_type(result))
            .map_err(|e| ErrorData::internal_error(e.to_string(), None)),
        Err(e) => Err(ErrorData::new(rmcp::model::ErrorCode(e.code as i32), e.message, e.data)),
    }
}

impl VectorTools {
    async fn scripted(
        &self,
        name: &str,
        args: JsonObject,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        result(Scripted(self.scripts.clone()).run(call_of(name, args, None), context_of(&context)).await)
    }
}

#[tool_router]
impl VectorTools {
    #[tool(description = "Synchronous only.")]
    async fn echo(&self, args: JsonObject, context: RequestContext<RoleServer>) -> Result<CallToolResult, ErrorData> {
        self.scripted("echo", args, context).await
    }

    #[tool(description = "A scripted task.")]
    async fn job(&self, args: JsonObject, context: RequestContext<RoleServer>) -> Result<CallToolResult, ErrorData> {
        self.scripted("job", args, context).await
    }

    #[tool(description = "A scripted task, required.")]
    async fn job_required(
        &self,
        args: JsonObject,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        self.scripted("job_required", args, context).await
    }

    #[tool(description = "A scripted task without TTL.")]
    async fn job_unlimited(
        &self,
        args: JsonObject,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        self.scripted("job_unlimited", args, context).await
    }

    #[tool(description = "An MRTR round for user_name, then a scripted task.")]
    async fn ask_name(
        &self,
        ToolName(name): ToolName,
        args: JsonObject,
        InputResponses(responses): InputResponses,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        let responses = responses.map(|r| r.into_iter().collect());
        result(AskName(self.scripts.clone()).run(call_of(&name, args, responses), context_of(&context)).await)
    }
}

#[tool_handler(router = self.tool_router)]
impl ServerHandler for VectorTools {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().enable_tasks().build())
    }
}

/// The host: the vectors' tools on rmcp, their modes and task options as the Rust host's.
pub fn durable(engine: Engine, scripts: Scripts) -> Host {
    let tools = VectorTools { tool_router: VectorTools::tool_router(), scripts: scripts.clone() };
    let config = rmcp::transport::streamable_http_server::StreamableHttpServerConfig::default()
        .with_legacy_session_mode(false)
        .with_json_response(true);
    DurableServer::new(engine, move || Ok(tools.clone()))
        .config(config)
        .host(|host| host.max_body_bytes(64 * 1024).request_state_key(vec![7u8; 32]))
        .task_tool("job", |t| t.poll_interval_ms(500))
        .task_tool("job_required", |t| t.mode(TaskMode::Required).ttl_ms(Some(5_000)).poll_interval_ms(250))
        .task_tool("job_unlimited", |t| t.ttl_ms(None))
        .task_tool("ask_name", |t| t.mode(TaskMode::Required))
        .prepare("ask_name", move |call| {
            // The same MRTR phase as the Rust host's ask_name, synchronously.
            futures::executor::block_on(AskName(scripts.clone()).prepare(call))
        })
        .build()
}
