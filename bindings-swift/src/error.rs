//! The one FFI error enum: every core error crosses as [`TasksError`], with its JSON-RPC code.

use mcp_tasks::client::ClientError;
use mcp_tasks::protocol::ProtocolError;

/// An error from a tasks server or from this client.
#[derive(Debug, thiserror::Error, uniffi::Error)]
pub enum TasksError {
    /// The server answered with a JSON-RPC error (`code` as sent; `data_json` its `data`).
    #[error("server error {code}: {message}")]
    Server {
        /// The JSON-RPC code.
        code: i64,
        /// The server's message.
        message: String,
        /// The error's `data`, as JSON.
        data_json: Option<String>,
    },
    /// The call was refused locally: bad JSON, an unknown store, a cancel mode, a finished task
    /// (code -32602 for misuse, -32603 for transport and store failures).
    #[error("client error {code}: {message}")]
    Client {
        /// The JSON-RPC code this maps to.
        code: i64,
        /// What went wrong.
        message: String,
    },
}

impl From<ClientError> for TasksError {
    fn from(err: ClientError) -> Self {
        match err {
            ClientError::Rpc(rpc) => {
                Self::Server { code: rpc.code, message: rpc.message, data_json: rpc.data.map(|d| d.to_string()) }
            }
            other => Self::Client { code: other.code(), message: other.to_string() },
        }
    }
}

impl From<ProtocolError> for TasksError {
    fn from(err: ProtocolError) -> Self {
        Self::Client { code: err.code(), message: err.to_string() }
    }
}

/// Parses a JSON argument; one that does not parse is -32602.
pub(crate) fn parse_json(what: &str, text: &str) -> Result<serde_json::Value, TasksError> {
    serde_json::from_str(text)
        .map_err(|e| ProtocolError::InvalidParams(format!("{what} is not valid JSON: {e}")).into())
}
