//! Reading the numbers of the messages a client receives as JSON means them.
//!
//! JSON has one number type: `500` and `500.0` are the same number, and the schemas of the
//! extension and of MCP 2026-07-28 type `ttlMs`, `pollIntervalMs` and error codes as `number`
//! (TypeScript) or `integer`, which JSON Schema also matches for `500.0`
//! (<https://json-schema.org/draft/2020-12/json-schema-core#section-6.3>). A server written in a
//! language whose numbers are all floats (JavaScript, Lua) or that passes them through a float
//! writes `500.0`, so every reader here takes any finite JSON number: durations round up to
//! whole milliseconds (a wait is never shortened) and saturate past `u64::MAX`; codes and ids
//! must be whole. Negative durations and fractional codes are refused with a message naming
//! the value. Our servers keep writing integers.

use serde::de::Error as _;
use serde::{Deserialize, Deserializer};
use serde_json::{Number, Value};

/// Milliseconds from a JSON number: any finite non-negative number, a fraction rounded up (so a
/// suggested wait is never shortened), a value past `u64::MAX` saturated. A negative number is
/// refused with a message naming it. (`serde_json` parses no NaN or infinity, and reads a
/// literal too large for `f64` as an error of its own.)
pub fn millis(number: &Number) -> Result<u64, String> {
    if let Some(ms) = number.as_u64() {
        return Ok(ms);
    }
    if number.as_i64().is_some() {
        return Err(format!("{number} is negative, not a number of milliseconds"));
    }
    match number.as_f64() {
        // -0.0 is zero, not a negative duration.
        Some(ms) if ms.is_finite() && ms >= 0.0 => {
            // `as` saturates at u64::MAX; ceil keeps a fractional wait from shrinking.
            Ok(ms.ceil() as u64)
        }
        Some(ms) if ms.is_finite() => Err(format!("{number} is negative, not a number of milliseconds")),
        _ => Err(format!("{number} is not a finite number of milliseconds")),
    }
}

/// [`millis`] of a JSON value; `Err` names what the value is when it is no number.
pub fn millis_of(value: &Value) -> Result<u64, String> {
    match value {
        Value::Number(number) => millis(number),
        other => Err(format!("{} is {}, not a number of milliseconds", short(other), kind(other))),
    }
}

/// A whole number (a JSON-RPC error code, a request id) from any JSON number of whole value:
/// `-32602` and `-32602.0` alike. A fraction, or a value outside `i64`, is refused.
pub fn whole(number: &Number) -> Result<i64, String> {
    if let Some(n) = number.as_i64() {
        return Ok(n);
    }
    match number.as_f64() {
        // 2^63 itself is not an i64; the bounds are exact in f64.
        Some(n) if n.fract() == 0.0 && (-9_223_372_036_854_775_808.0..9_223_372_036_854_775_808.0).contains(&n) => {
            Ok(n as i64)
        }
        _ => Err(format!("{number} is not a whole number")),
    }
}

/// A JSON-RPC error code from a JSON value (`None` when it is not a whole number).
pub fn code_of(value: &Value) -> Option<i64> {
    value.as_number().and_then(|n| whole(n).ok())
}

/// A request id a client sent (a non-negative integer) as a response or a notification carries
/// it back: `7` and `7.0` alike; `None` for anything else.
pub fn id_of(value: &Value) -> Option<u64> {
    let number = value.as_number()?;
    number.as_u64().or_else(|| whole(number).ok().and_then(|n| u64::try_from(n).ok()))
}

/// Whether a response's `id` is the request id `id` a client sent (see [`id_of`]).
pub fn is_id(value: &Value, id: u64) -> bool {
    id_of(value) == Some(id)
}

/// A short rendering of a value for an error message (at most about 60 characters).
pub(crate) fn short(value: &Value) -> String {
    let text = value.to_string();
    if text.chars().count() <= 60 { text } else { format!("{}…", text.chars().take(57).collect::<String>()) }
}

/// The JSON kind of a value, for error messages (`"a string"`, `"null"`, ...).
pub(crate) fn kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// Serde `deserialize_with` for a required number of milliseconds (see [`millis`]).
pub fn de_millis<'de, D: Deserializer<'de>>(deserializer: D) -> Result<u64, D::Error> {
    let number = Number::deserialize(deserializer)?;
    millis(&number).map_err(D::Error::custom)
}

/// Serde `deserialize_with` for an optional number of milliseconds: `null` is `None`. Use with
/// `#[serde(default)]` where the field may be absent.
pub fn de_opt_millis<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<u64>, D::Error> {
    Option::<Number>::deserialize(deserializer)?.map(|n| millis(&n).map_err(D::Error::custom)).transpose()
}

/// Serde `deserialize_with` for a whole number (see [`whole`]).
pub fn de_whole<'de, D: Deserializer<'de>>(deserializer: D) -> Result<i64, D::Error> {
    let number = Number::deserialize(deserializer)?;
    whole(&number).map_err(D::Error::custom)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn number(text: &str) -> Number {
        serde_json::from_str(text).unwrap()
    }

    #[test]
    fn durations_take_any_finite_non_negative_number() {
        for (text, ms) in [("500", 500), ("500.0", 500), ("500.2", 501), ("0.0", 0), ("-0.0", 0), ("1e3", 1_000)] {
            assert_eq!(millis(&number(text)), Ok(ms), "{text}");
        }
        assert_eq!(millis(&number("1e30")), Ok(u64::MAX), "saturates");
        assert_eq!(millis(&number("18446744073709551615")), Ok(u64::MAX));
        for text in ["-1", "-0.5", "-1e30"] {
            let err = millis(&number(text)).unwrap_err();
            assert!(err.contains("negative"), "{text}: {err}");
        }
        assert!(millis_of(&json!("500")).unwrap_err().contains("a string"));
        assert!(millis_of(&json!(null)).unwrap_err().contains("null"));
    }

    #[test]
    fn codes_and_ids_must_be_whole() {
        assert_eq!(whole(&number("-32602")), Ok(-32602));
        assert_eq!(whole(&number("-32602.0")), Ok(-32602));
        assert!(whole(&number("-32602.5")).is_err());
        assert!(whole(&number("1e30")).is_err());
        assert_eq!(code_of(&json!(-32601.0)), Some(-32601));
        assert_eq!(code_of(&json!("-32601")), None);
        assert!(is_id(&json!(7), 7) && is_id(&json!(7.0), 7));
        assert!(!is_id(&json!(7.5), 7) && !is_id(&json!("7"), 7) && !is_id(&json!(8), 7));
    }

    #[test]
    fn serde_readers_accept_floats_and_name_what_they_refuse() {
        #[derive(Deserialize, Debug, PartialEq)]
        struct T {
            #[serde(deserialize_with = "de_millis")]
            a: u64,
            #[serde(default, deserialize_with = "de_opt_millis")]
            b: Option<u64>,
            #[serde(deserialize_with = "de_whole")]
            c: i64,
        }
        let t: T = serde_json::from_value(json!({"a": 1.5, "b": null, "c": -1.0})).unwrap();
        assert_eq!(t, T { a: 2, b: None, c: -1 });
        let t: T = serde_json::from_value(json!({"a": 1, "c": 0})).unwrap();
        assert_eq!(t.b, None);
        let err = serde_json::from_value::<T>(json!({"a": -1, "c": 0})).unwrap_err().to_string();
        assert!(err.contains("negative"), "{err}");
    }
}
