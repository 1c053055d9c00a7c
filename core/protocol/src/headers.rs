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
/// `=?base64?…?=` form used for values that are not plain ASCII. A value carrying anything but
/// visible ASCII as it is (raw UTF-8 bytes, control characters) is refused: the transport rule
/// sends such values in the base64 form, and bytes outside ASCII have no one meaning in an HTTP
/// field (RFC 9110 §5.5: obs-text is opaque), so taking them as UTF-8 would let one server read a
/// name another server refuses.
pub fn decode_value(raw: &str) -> Result<String, ProtocolError> {
    if raw.chars().any(|c| !(c == '\t' || (' '..='~').contains(&c))) {
        return Err(ProtocolError::HeaderMismatch(
            "header value is not visible ASCII: a value that is not is sent as =?base64?...?=".into(),
        ));
    }
    decode_ascii(raw)
}

/// [`decode_value`] of the header `name`, whose errors name it.
fn decode_named(name: &str, raw: &str) -> Result<String, ProtocolError> {
    decode_value(raw).map_err(|e| match e {
        ProtocolError::HeaderMismatch(why) => ProtocolError::HeaderMismatch(format!("{name} {why}")),
        other => other,
    })
}

fn decode_ascii(raw: &str) -> Result<String, ProtocolError> {
    let trimmed = raw.trim_matches(|c| c == ' ' || c == '\t');
    if let Some(inner) = trimmed.strip_prefix("=?base64?").and_then(|rest| rest.strip_suffix("?=")) {
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(inner)
            .map_err(|_| ProtocolError::HeaderMismatch("header value is not valid =?base64?...?= encoding".into()))?;
        return String::from_utf8(bytes)
            .map_err(|_| ProtocolError::HeaderMismatch("header value in base64 is not UTF-8".into()));
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

/// The standard headers a Streamable HTTP client sends with a request (lower-case names):
/// `Mcp-Method`, `Mcp-Name` when the method names something, and `MCP-Protocol-Version` when the
/// request claims a revision (`version`). For an adapter that carries a stdio message to an
/// SDK's HTTP service.
pub fn request_headers(method: &str, params: Option<&Value>, version: Option<&str>) -> Vec<(&'static str, String)> {
    let mut headers = vec![("mcp-method", method.to_owned())];
    if let Some((_, Some(name))) = name_source(method, params) {
        headers.push(("mcp-name", encode_value(name)));
    }
    if let Some(version) = version {
        headers.push(("mcp-protocol-version", version.to_owned()));
    }
    headers
}

/// Checks the standard headers of one request against its body.
pub fn validate(
    method: &str,
    params: Option<&Value>,
    meta_version: &str,
    headers: StandardHeaders<'_>,
) -> Result<(), ProtocolError> {
    let name = name_source(method, params)
        .and_then(|(field, expected)| Some((format!("the request body's '{field}' parameter"), expected?)));
    let rules = [
        Some((
            "mcp-protocol-version",
            headers.protocol_version,
            "the request envelope's protocol version".to_owned(),
            meta_version,
        )),
        Some(("mcp-method", headers.method, "the request body's method".to_owned(), method)),
        name.map(|(what, expected)| ("mcp-name", headers.name, what, expected)),
    ];
    for (header, value, what, expected) in rules.into_iter().flatten() {
        // mcp 2.3.0 says "does not match" for both; a missing header is told apart.
        let Some(value) = value else {
            return Err(ProtocolError::HeaderMismatch(format!("{header} header is missing: it must carry {what}")));
        };
        if decode_named(header, value)? != expected {
            return Err(ProtocolError::HeaderMismatch(format!("{header} header does not match {what}")));
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
    fn a_missing_header_is_told_from_a_different_one() {
        let params = json!({"taskId": "abc"});
        let missing = validate("tasks/get", Some(&params), "2026-07-28", headers("tasks/get", None)).unwrap_err();
        assert_eq!(
            missing.to_string(),
            "mcp-name header is missing: it must carry the request body's 'taskId' parameter"
        );
        let other = validate("tasks/get", Some(&params), "2026-07-28", headers("tasks/get", Some("x"))).unwrap_err();
        assert_eq!(other.to_string(), "mcp-name header does not match the request body's 'taskId' parameter");
        let mut no_method = headers("tasks/get", Some("abc"));
        no_method.method = None;
        let err = validate("tasks/get", Some(&params), "2026-07-28", no_method).unwrap_err();
        assert!(err.to_string().starts_with("mcp-method header is missing"), "{err}");
    }

    #[test]
    fn raw_bytes_outside_ascii_are_refused_not_read_as_utf8() {
        let params = json!({"name": "grüßen"});
        // A host hands such bytes on as it read them (latin-1 or lossy UTF-8): both are refused.
        for raw in ["grüßen", "grÃ¼ÃŸen", "a\u{7f}b"] {
            let err =
                validate("tools/call", Some(&params), "2026-07-28", headers("tools/call", Some(raw))).unwrap_err();
            assert_eq!(err.code(), -32020, "{raw}");
            assert!(err.to_string().contains("not visible ASCII"), "{err}");
        }
    }

    #[test]
    fn base64_values_are_decoded() {
        let params = json!({"name": "grüßen"});
        let encoded = format!("=?base64?{}?=", base64::engine::general_purpose::STANDARD.encode("grüßen"));
        assert!(validate("tools/call", Some(&params), "2026-07-28", headers("tools/call", Some(&encoded))).is_ok());
    }
}
