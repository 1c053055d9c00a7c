//! Streamable HTTP standard-header rules
//! (<https://modelcontextprotocol.io/specification/2026-07-28/basic/transports/streamable-http>):
//! `MCP-Protocol-Version` equals the `_meta` version, `Mcp-Method` equals the method, and `Mcp-Name` equals `params.name` on `tools/call`
//! and `prompts/get`, `params.uri` on `resources/read`, and `params.taskId` on `tasks/*`.
//! A missing or different value is -32020 with HTTP 400. The messages are the ones mcp 2.3.0
//! sends for the same rules (`shared/inbound.py`), so our servers under mcp and alone agree.

use base64::Engine as _;
use serde_json::Value;

use super::error::ProtocolError;

/// The three standard header values of one request, as received (not yet decoded).
#[derive(Clone, Copy, Debug, Default)]
pub struct StandardHeaders<'a> {
    /// `MCP-Protocol-Version`.
    pub protocol_version: Option<&'a str>,
    /// `Mcp-Method`.
    pub method: Option<&'a str>,
    /// `Mcp-Name`.
    pub name: Option<&'a str>,
}

/// Encodes a header value the way [`decode_value`] reads it back: plain if it is visible ASCII
/// without surrounding whitespace, else `=?base64?…?=` (a plain value that looks like that form
/// is encoded too, so it is not mistaken for one).
pub fn encode_value(value: &str) -> String {
    let plain = value.bytes().all(|b| (0x20..0x7f).contains(&b))
        && value.trim() == value
        && !(value.starts_with("=?base64?") && value.ends_with("?="));
    if plain {
        value.to_owned()
    } else {
        format!("=?base64?{}?=", base64::engine::general_purpose::STANDARD.encode(value))
    }
}

/// Decodes a header value: trims optional whitespace (RFC 9110 §5.5) and decodes the
/// `=?base64?…?=` form used for values that are not plain ASCII.
pub fn decode_value(raw: &str) -> Result<String, ProtocolError> {
    let trimmed = raw.trim_matches(|c| c == ' ' || c == '\t');
    if let Some(inner) = trimmed.strip_prefix("=?base64?").and_then(|rest| rest.strip_suffix("?=")) {
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(inner)
            .map_err(|_| ProtocolError::HeaderMismatch("header value is not valid =?base64?...?= encoding".into()))?;
        return String::from_utf8(bytes)
            .map_err(|_| ProtocolError::HeaderMismatch("base64 header value is not UTF-8".into()));
    }
    Ok(trimmed.to_owned())
}

/// The body value that `Mcp-Name` must mirror for `method`, or `None` when the method has none.
pub fn name_source<'a>(method: &str, params: Option<&'a Value>) -> Option<(&'static str, Option<&'a str>)> {
    let field = match method {
        "tools/call" | "prompts/get" => "name",
        "resources/read" => "uri",
        "tasks/get" | "tasks/update" | "tasks/cancel" => "taskId",
        _ => return None,
    };
    Some((field, params.and_then(|p| p.get(field)).and_then(Value::as_str)))
}

/// Checks the standard headers of one request against its body.
pub fn validate(
    method: &str,
    params: Option<&Value>,
    meta_version: &str,
    headers: StandardHeaders<'_>,
) -> Result<(), ProtocolError> {
    let version_matches = match headers.protocol_version {
        Some(version) => decode_value(version)? == meta_version,
        None => false,
    };
    if !version_matches {
        return Err(ProtocolError::HeaderMismatch(
            "mcp-protocol-version header does not match the request envelope's protocol version".into(),
        ));
    }
    let method_matches = match headers.method {
        Some(header_method) => decode_value(header_method)? == method,
        None => false,
    };
    if !method_matches {
        return Err(ProtocolError::HeaderMismatch("mcp-method header does not match the request body's method".into()));
    }
    if let Some((field, Some(expected))) = name_source(method, params) {
        let name_matches = match headers.name {
            Some(name) => decode_value(name)? == expected,
            None => false,
        };
        if !name_matches {
            return Err(ProtocolError::HeaderMismatch(format!(
                "mcp-name header does not match the request body's '{field}' parameter"
            )));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn headers<'a>(method: &'a str, name: Option<&'a str>) -> StandardHeaders<'a> {
        StandardHeaders { protocol_version: Some("2026-07-28"), method: Some(method), name }
    }

    #[test]
    fn tasks_name_is_the_task_id() {
        let params = json!({"taskId": "abc"});
        assert!(validate("tasks/get", Some(&params), "2026-07-28", headers("tasks/get", Some("abc"))).is_ok());
        assert!(validate("tasks/get", Some(&params), "2026-07-28", headers("tasks/get", Some(" abc "))).is_ok());
        let err = validate("tasks/get", Some(&params), "2026-07-28", headers("tasks/get", Some("zzz"))).unwrap_err();
        assert_eq!(err.code(), -32020);
        assert_eq!(err.http_status(), 400);
        assert!(validate("tasks/get", Some(&params), "2026-07-28", headers("tasks/get", None)).is_err());
    }

    #[test]
    fn method_and_version_must_match() {
        let params = json!({"name": "greet"});
        assert!(validate("tools/call", Some(&params), "2026-07-28", headers("tasks/get", Some("greet"))).is_err());
        let mut wrong_version = headers("tools/call", Some("greet"));
        wrong_version.protocol_version = Some("2025-11-25");
        assert!(validate("tools/call", Some(&params), "2026-07-28", wrong_version).is_err());
    }

    #[test]
    fn base64_values_are_decoded() {
        let params = json!({"name": "grüßen"});
        let encoded = format!("=?base64?{}?=", base64::engine::general_purpose::STANDARD.encode("grüßen"));
        assert!(validate("tools/call", Some(&params), "2026-07-28", headers("tools/call", Some(&encoded))).is_ok());
    }
}
