//! The one FFI error enum: every core error crosses as [`TasksError`], whose variant is the class
//! core names for it (one variant per row of `ERROR_CLASSES`, the same names as the Python and
//! TypeScript classes), carrying an [`ErrorDetail`] with the code, data and cause chain.

use mcp_tasks::client::ClientError;
use mcp_tasks::protocol::client::OutcomeError;
use mcp_tasks::protocol::{ERROR_CLASSES, ProtocolError};

/// What every [`TasksError`] carries.
#[derive(Clone, Debug, PartialEq, uniffi::Record)]
pub struct ErrorDetail {
    /// The class name (the variant's own name).
    pub class_name: String,
    /// The JSON-RPC code, when there is one (task outcomes have none).
    pub code: Option<i64>,
    /// What went wrong.
    pub message: String,
    /// The error's `data`, as JSON.
    pub data_json: Option<String>,
    /// The messages of the errors that caused it, outermost first.
    pub causes: Vec<String>,
}

macro_rules! error_classes {
    ($($name:ident),* $(,)?) => {
        /// An error from a tasks server or from this library; the variant is its class.
        #[derive(Debug, thiserror::Error, uniffi::Error)]
        pub enum TasksError {
            $(
                #[allow(missing_docs)]
                #[error("{}", detail.message)]
                $name { detail: ErrorDetail },
            )*
        }

        impl TasksError {
            /// The variant for the class core names (`InternalError` for a name it does not know).
            pub(crate) fn of_class(detail: ErrorDetail) -> Self {
                match detail.class_name.as_str() {
                    $(stringify!($name) => Self::$name { detail },)*
                    _ => Self::InternalError { detail: ErrorDetail { class_name: "InternalError".into(), ..detail } },
                }
            }

            /// The detail every variant carries.
            pub fn detail(&self) -> &ErrorDetail {
                match self {
                    $(Self::$name { detail })|* => detail,
                }
            }

            /// Every variant's name, in declaration order.
            #[cfg(test)]
            pub(crate) const NAMES: &'static [&'static str] = &[$(stringify!($name)),*];
        }
    };
}

error_classes!(
    McpTaskError,
    ParseError,
    InvalidRequestError,
    RequestTooLargeError,
    MethodNotFoundError,
    InvalidParamsError,
    TaskNotFoundError,
    HeaderMismatchError,
    MissingCapabilityError,
    UnsupportedVersionError,
    InternalError,
    QuotaExceededError,
    TransportError,
    TaskCancelledError,
    TaskGoneError,
    TaskExpiredError,
);

fn detail(
    class: &str,
    code: Option<i64>,
    message: String,
    data_json: Option<String>,
    causes: Vec<String>,
) -> TasksError {
    TasksError::of_class(ErrorDetail { class_name: class.to_owned(), code, message, data_json, causes })
}

impl From<ClientError> for TasksError {
    fn from(err: ClientError) -> Self {
        match &err {
            ClientError::Rpc(rpc) => detail(
                err.class(),
                Some(rpc.code),
                rpc.message.clone(),
                rpc.data.as_ref().map(|d| d.to_string()),
                Vec::new(),
            ),
            other => detail(
                other.class(),
                Some(other.code()),
                other.to_string(),
                other.data().map(|d| d.to_string()),
                other.causes(),
            ),
        }
    }
}

impl From<ProtocolError> for TasksError {
    fn from(err: ProtocolError) -> Self {
        let rpc = err.to_rpc();
        detail(err.class(), Some(rpc.code), rpc.message, rpc.data.map(|d| d.to_string()), Vec::new())
    }
}

impl From<Box<OutcomeError>> for TasksError {
    fn from(err: Box<OutcomeError>) -> Self {
        let err = *err;
        detail(err.class, err.code, err.message, err.data.map(|d| d.to_string()), Vec::new())
    }
}

/// Core's `ERROR_CLASSES` as JSON (core's serialization), for the tests that compare them with
/// this enum and the generated Swift.
#[uniffi::export]
pub fn error_classes_json() -> String {
    serde_json::to_string(ERROR_CLASSES).expect("the class table serializes")
}

/// Parses a JSON argument; one that does not parse is -32602.
pub(crate) fn parse_json(what: &str, text: &str) -> Result<serde_json::Value, TasksError> {
    serde_json::from_str(text)
        .map_err(|e| ProtocolError::InvalidParams(format!("{what} is not valid JSON: {e}")).into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_variant_per_class_of_the_core_table() {
        let table: Vec<&str> = ERROR_CLASSES.iter().map(|c| c.name).collect();
        assert_eq!(TasksError::NAMES, table.as_slice());
        for name in table {
            let error = detail(name, None, "m".into(), None, Vec::new());
            assert_eq!(error.detail().class_name, name);
            assert_eq!(format!("{error:?}").split_whitespace().next(), Some(name), "{name} maps to its own variant");
        }
    }
}
