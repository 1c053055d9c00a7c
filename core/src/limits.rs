//! The bounds every server puts on its HTTP connections, so slow or hostile clients cannot hold
//! it down: one set of defaults for the Rust host (`host::serve_with`), the Python server
//! (`mcp_tasks.serve`, over uvicorn) and the TypeScript server (`handler.nodeServer()`, over
//! `node:http`).

use std::time::Duration;

/// The bounds of a server's HTTP connections (the Rust host's `host::serve_with`, and what the
/// Python and TypeScript servers set on their HTTP servers); [`ServeLimits::default`] gives the
/// safe defaults named on each field.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ServeLimits {
    /// How long a request's header may take to arrive, from the connection's start or from the
    /// first byte of a later request on it (default 10 s; nginx waits 60 s, hyper 30 s: a
    /// header on any network a client uses arrives in well under a second).
    pub header_read_timeout: Duration,
    /// How long a request's body may take to arrive after its header (default 30 s: a 4 MiB body
    /// at ~140 KB/s).
    pub body_read_timeout: Duration,
    /// How long a connection may stay open between requests (default 60 s; it is cheap to open
    /// again, and a held one costs a descriptor).
    pub idle_timeout: Duration,
    /// The most connections open at once; `None` (the default) takes the process's descriptor
    /// limit less a reserve for its store and logs ([`default_max_connections`]).
    pub max_connections: Option<usize>,
    /// The largest request header section read (default 64 KiB; hyper allows ~400 KiB, a
    /// memory bound 20,000 held connections multiply).
    pub max_header_bytes: usize,
    /// How long a response (a `subscriptions/listen` stream above all) may have bytes to send
    /// that its peer does not take before the connection is closed (default 30 s). A client that
    /// stopped reading fills the socket's buffers and then holds nothing else: its stream's
    /// pending changes are coalesced to one state per task meanwhile, and other streams are
    /// written on their own. The client reads what was buffered, then the connection's end
    /// without the response's end (an incomplete body).
    pub write_stall_timeout: Duration,
}

impl Default for ServeLimits {
    fn default() -> Self {
        Self {
            header_read_timeout: Duration::from_secs(10),
            body_read_timeout: Duration::from_secs(30),
            idle_timeout: Duration::from_secs(60),
            max_connections: None,
            max_header_bytes: 64 << 10,
            write_stall_timeout: Duration::from_secs(30),
        }
    }
}

/// The connection cap when none is set: the soft `RLIMIT_NOFILE` less a sixteenth of it (at
/// least 64) for everything else the process opens (the store, its redo log, logs, a stdio
/// child's pipes). 4,096 where the limit cannot be read.
pub fn default_max_connections() -> usize {
    #[cfg(unix)]
    {
        let limit = rustix::process::getrlimit(rustix::process::Resource::Nofile).current;
        if let Some(limit) = limit.and_then(|l| usize::try_from(l).ok()) {
            return limit.saturating_sub((limit / 16).max(64)).max(1);
        }
    }
    4_096
}

impl ServeLimits {
    /// The limits as bindings read them (camelCase, milliseconds), with the connection cap
    /// resolved: `headerReadTimeoutMs`, `bodyReadTimeoutMs`, `idleTimeoutMs`, `maxConnections`,
    /// `maxHeaderBytes`, `writeStallTimeoutMs`.
    pub fn to_json(&self) -> serde_json::Value {
        let ms = |d: Duration| u64::try_from(d.as_millis()).unwrap_or(u64::MAX);
        serde_json::json!({
            "headerReadTimeoutMs": ms(self.header_read_timeout),
            "bodyReadTimeoutMs": ms(self.body_read_timeout),
            "idleTimeoutMs": ms(self.idle_timeout),
            "maxConnections": self.max_connections.unwrap_or_else(default_max_connections),
            "maxHeaderBytes": self.max_header_bytes,
            "writeStallTimeoutMs": ms(self.write_stall_timeout),
        })
    }
}

impl ServeLimits {
    /// The limits [`ServeLimits::to_json`] wrote (a binding's options object in the same
    /// shape); an absent or unreadable field takes its default, and an absent `maxConnections`
    /// the default cap.
    pub fn from_json(value: &serde_json::Value) -> Self {
        let defaults = Self::default();
        let ms = |field: &str, default: Duration| value[field].as_u64().map_or(default, Duration::from_millis);
        Self {
            header_read_timeout: ms("headerReadTimeoutMs", defaults.header_read_timeout),
            body_read_timeout: ms("bodyReadTimeoutMs", defaults.body_read_timeout),
            idle_timeout: ms("idleTimeoutMs", defaults.idle_timeout),
            max_connections: value["maxConnections"].as_u64().and_then(|n| usize::try_from(n).ok()),
            max_header_bytes: value["maxHeaderBytes"]
                .as_u64()
                .and_then(|n| usize::try_from(n).ok())
                .unwrap_or(defaults.max_header_bytes),
            write_stall_timeout: ms("writeStallTimeoutMs", defaults.write_stall_timeout),
        }
    }
}

/// Why an HTTP server refused a connection's request before any request reached the
/// dispatcher, as the Python and TypeScript servers' HTTP layers report it.
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// The header did not arrive within [`ServeLimits::header_read_timeout`].
    HeaderTimeout,
    /// The request (its body) did not arrive within its bound.
    BodyTimeout,
    /// The header section is over [`ServeLimits::max_header_bytes`].
    HeadersTooLarge,
    /// The bytes are no HTTP/1.1 request (a NUL, a bare CR or an obs-fold line in its header, a
    /// start line that is none).
    Malformed,
}

impl std::str::FromStr for Refusal {
    type Err = String;

    /// A refusal by the name the Python and TypeScript servers report it with: `header_timeout`,
    /// `body_timeout`, `headers_too_large` or `malformed`.
    fn from_str(name: &str) -> Result<Self, String> {
        match name {
            "header_timeout" => Ok(Self::HeaderTimeout),
            "body_timeout" => Ok(Self::BodyTimeout),
            "headers_too_large" => Ok(Self::HeadersTooLarge),
            "malformed" => Ok(Self::Malformed),
            other => Err(format!("refusal {other:?} is not one core knows")),
        }
    }
}

impl Refusal {
    /// The answer to it: the HTTP status and its body, the table's JSON-RPC error (no id: the
    /// request was never read), or nothing for [`Refusal::Malformed`]. Bytes that are no HTTP
    /// request carry no JSON-RPC message to answer, and the Rust host's HTTP layer (hyper) answers
    /// them with an empty 400 that it offers no way to change; the other servers answer the
    /// same (docs/errors.md). The connection closes after it.
    pub fn reply(self, limits: &ServeLimits) -> (u16, String) {
        use crate::protocol::ProtocolError;
        let error = match self {
            Self::HeaderTimeout => {
                ProtocolError::RequestTimeout { what: "request header", seconds: limits.header_read_timeout.as_secs() }
            }
            Self::BodyTimeout => {
                ProtocolError::RequestTimeout { what: "request body", seconds: limits.body_read_timeout.as_secs() }
            }
            Self::HeadersTooLarge => ProtocolError::HeadersTooLarge { limit: limits.max_header_bytes },
            Self::Malformed => return (400, String::new()),
        };
        let reply = crate::protocol::server::error_reply(None, &error, false);
        (reply.status, reply.json().unwrap_or_default().to_owned())
    }

    /// The whole HTTP/1.1 response to write on the refused connection, which then closes: the
    /// status line, `content-type` when there is a body, `content-length`, `connection: close`.
    pub fn response(self, limits: &ServeLimits) -> String {
        let (status, body) = self.reply(limits);
        let reason = match status {
            400 => "Bad Request",
            408 => "Request Timeout",
            431 => "Request Header Fields Too Large",
            _ => "",
        };
        let content_type = if body.is_empty() { "" } else { "content-type: application/json\r\n" };
        format!(
            "HTTP/1.1 {status} {reason}\r\n{content_type}content-length: {}\r\nconnection: close\r\n\r\n{body}",
            body.len()
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refusals_by_name() {
        for refusal in [Refusal::HeaderTimeout, Refusal::BodyTimeout, Refusal::HeadersTooLarge, Refusal::Malformed] {
            let name = match refusal {
                Refusal::HeaderTimeout => "header_timeout",
                Refusal::BodyTimeout => "body_timeout",
                Refusal::HeadersTooLarge => "headers_too_large",
                Refusal::Malformed => "malformed",
            };
            assert_eq!(name.parse::<Refusal>(), Ok(refusal));
        }
        assert_eq!("slow".parse::<Refusal>(), Err("refusal \"slow\" is not one core knows".to_owned()));
    }

    #[test]
    fn bytes_that_are_no_http_request_get_an_empty_400_as_from_hyper() {
        let limits = ServeLimits::default();
        assert_eq!(Refusal::Malformed.reply(&limits), (400, String::new()));
        assert_eq!(
            Refusal::Malformed.response(&limits),
            "HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"
        );
    }

    #[test]
    fn a_refusal_with_an_error_says_its_type_and_length() {
        let response = Refusal::HeadersTooLarge.response(&ServeLimits::default());
        let (head, body) = response.split_once("\r\n\r\n").unwrap();
        assert!(head.starts_with("HTTP/1.1 431 Request Header Fields Too Large\r\n"), "{head}");
        assert!(head.contains("content-type: application/json\r\n"), "{head}");
        assert!(head.contains(&format!("content-length: {}\r\n", body.len())), "{head}");
        assert_eq!(serde_json::from_str::<serde_json::Value>(body).unwrap()["error"]["code"], -32600);
    }
}
