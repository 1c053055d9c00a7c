//! What the rmcp tests share: an rmcp client on the 2026-07-28 wire, and reading what core's
//! client made of a call.
#![allow(dead_code, unreachable_pub)]

use mcp_tasks::client::{Execution, TaskExecution};
use mcp_tasks::protocol::client::Outcome;
use rmcp::model::{ClientCapabilities, ClientConfig, ProtocolVersion};
use rmcp::service::RunningService;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::{ClientLifecycleMode, ClientServiceExt, RoleClient};
use serde_json::json;

/// An rmcp client on the 2026-07-28 wire declaring the tasks extension and form elicitation.
pub async fn rmcp_client(url: &str) -> RunningService<RoleClient, ClientConfig> {
    let capabilities: ClientCapabilities =
        serde_json::from_value(json!({"extensions": {"io.modelcontextprotocol/tasks": {}}, "elicitation": {}}))
            .unwrap();
    let mut config = ClientConfig::default();
    config.capabilities = capabilities;
    let transport = StreamableHttpClientTransport::from_config(StreamableHttpClientTransportConfig::with_uri(url));
    config
        .serve_with_lifecycle(
            transport,
            ClientLifecycleMode::Discover { preferred_versions: vec![ProtocolVersion::V_2026_07_28] },
        )
        .await
        .expect("the rmcp client starts")
}

/// The task the server made of a call.
pub fn task(execution: Execution) -> TaskExecution {
    match execution {
        Execution::Task(task) => task,
        Execution::Immediate(result) => panic!("expected a task, got {result}"),
    }
}

/// The text of a completed outcome's first content block.
pub fn text_of(outcome: &Outcome) -> String {
    match outcome {
        Outcome::Completed { result } => result["content"][0]["text"].as_str().unwrap_or("").to_owned(),
        other => panic!("expected completed, got {other:?}"),
    }
}
