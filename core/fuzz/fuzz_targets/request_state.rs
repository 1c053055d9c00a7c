//! `requestState` unsealing: nothing but a state this key sealed, for this principal and tool,
//! unexpired and unaltered, ever opens; any string is answered without a panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use mcp_tasks_protocol::request_state::{open, seal};
use serde_json::Value;

const KEY: &[u8] = b"fuzzing key, 32 bytes long......";

fuzz_target!(|data: &[u8]| {
    let Some((&mode, rest)) = data.split_first() else { return };
    let text = String::from_utf8_lossy(rest);
    // Anything the fuzzer writes is a forgery.
    assert!(open(KEY, "alice", "tool", &text, 0).is_err(), "a forged state opened: {text:?}");
    let state: Value = serde_json::from_slice(rest).unwrap_or_else(|_| Value::String(text.clone().into_owned()));
    let sealed = seal(KEY, "alice", "tool", &state, 1_000);
    assert_eq!(open(KEY, "alice", "tool", &sealed, 999).ok().as_ref(), Some(&state));
    assert!(open(KEY, "alice", "tool", &sealed, 1_000).is_err(), "expired");
    assert!(open(KEY, "bob", "tool", &sealed, 0).is_err(), "another principal");
    assert!(open(KEY, "alice", "other", &sealed, 0).is_err(), "another tool");
    // One altered byte (position and value from the input) never opens to anything else.
    if !rest.is_empty() {
        let mut altered = sealed.clone().into_bytes();
        let at = usize::from(rest[0]) * 7 % altered.len();
        altered[at] = if mode == altered[at] { mode.wrapping_add(1) } else { mode };
        if let Ok(altered) = String::from_utf8(altered) {
            if let Ok(opened) = open(KEY, "alice", "tool", &altered, 0) {
                assert_eq!(opened, state, "an altered state opened to another value");
            }
        }
    }
});
