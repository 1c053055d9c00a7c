//! Sealing MRTR `requestState`. The core spec treats `requestState` as attacker-controlled and
//! requires integrity protection when it drives logic, recommending a binding to principal,
//! expiry and request
//! (<https://modelcontextprotocol.io/specification/2026-07-28/basic/patterns/mrtr>). A sealed state is
//! `base64url(payload) "." base64url(HMAC-SHA256(key, principal | tool | payload))`, with the
//! expiry inside the payload. The key is passed in; nothing here reads a clock.

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use hmac::{Hmac, Mac};
use serde_json::{Value, json};
use sha2::Sha256;

use super::error::ProtocolError;

type HmacSha256 = Hmac<Sha256>;

fn mac(key: &[u8], principal: &str, tool: &str, payload: &[u8]) -> HmacSha256 {
    let mut mac = HmacSha256::new_from_slice(key).expect("HMAC takes keys of any length");
    for part in [principal.as_bytes(), tool.as_bytes()] {
        mac.update(&(part.len() as u64).to_be_bytes());
        mac.update(part);
    }
    mac.update(payload);
    mac
}

/// Seals the tool's `state` for `principal` and `tool`, valid until `expires_at_ms`.
pub fn seal(key: &[u8], principal: &str, tool: &str, state: &Value, expires_at_ms: u64) -> String {
    let payload = serde_json::to_vec(&json!({ "s": state, "exp": expires_at_ms })).expect("json serializes");
    let tag = mac(key, principal, tool, &payload).finalize().into_bytes();
    format!("{}.{}", URL_SAFE_NO_PAD.encode(&payload), URL_SAFE_NO_PAD.encode(tag))
}

/// Opens a sealed state: -32602 when it was forged, altered, made for another principal or
/// tool, or has expired at `now_ms`.
pub fn open(key: &[u8], principal: &str, tool: &str, sealed: &str, now_ms: u64) -> Result<Value, ProtocolError> {
    let invalid = || ProtocolError::InvalidRequestState;
    let (payload, tag) = sealed.split_once('.').ok_or_else(invalid)?;
    let payload = URL_SAFE_NO_PAD.decode(payload).map_err(|_| invalid())?;
    let tag = URL_SAFE_NO_PAD.decode(tag).map_err(|_| invalid())?;
    mac(key, principal, tool, &payload).verify_slice(&tag).map_err(|_| invalid())?;
    let value: Value = serde_json::from_slice(&payload).map_err(|_| invalid())?;
    let expires = value.get("exp").and_then(Value::as_u64).ok_or_else(invalid)?;
    if now_ms >= expires {
        return Err(invalid());
    }
    Ok(value.get("s").cloned().unwrap_or(Value::Null))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_tamper() {
        let key = b"k".repeat(32);
        let sealed = seal(&key, "alice", "tool", &json!({"round": 1}), 10_000);
        assert_eq!(open(&key, "alice", "tool", &sealed, 9_999).unwrap(), json!({"round": 1}));
        assert!(open(&key, "alice", "tool", &sealed, 10_000).is_err());
        assert!(open(&key, "bob", "tool", &sealed, 0).is_err());
        assert!(open(&key, "alice", "other", &sealed, 0).is_err());
        let forged = format!("{}x", sealed);
        assert!(open(&key, "alice", "tool", &forged, 0).is_err());
        assert!(open(&key, "alice", "tool", "garbage", 0).is_err());
    }
}
