//! Header decoding: any value the standard headers may carry (split from the input at 0xFF;
//! bytes that are not UTF-8 become U+FFFD, as a host's header-to-text step leaves them), for a
//! `tasks/get` whose task id is the last part. Never a panic; an encoded value decodes back to
//! itself; and a request whose headers are exactly the ones a client sends is never refused
//! for its headers.
#![no_main]

use std::sync::LazyLock;

use libfuzzer_sys::fuzz_target;
use mcp_tasks_protocol::headers::{decode_value, encode_value};
use mcp_tasks_protocol::server::{Decision, Dispatcher, DispatcherConfig, Headers, HttpRequest};
use serde_json::json;

static DISPATCHER: LazyLock<Dispatcher> = LazyLock::new(|| Dispatcher::new(DispatcherConfig::default()));

fuzz_target!(|data: &[u8]| {
    let parts: Vec<String> = data.split(|b| *b == 0xFF).map(|p| String::from_utf8_lossy(p).into_owned()).collect();
    for part in &parts {
        let _ = decode_value(part);
        assert_eq!(decode_value(&encode_value(part)).ok().as_deref(), Some(part.as_str()), "{part:?}");
    }
    let task_id = parts.last().cloned().unwrap_or_default();
    let body = json!({
        "jsonrpc": "2.0", "id": 1, "method": "tasks/get",
        "params": {"taskId": task_id, "_meta": {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {"extensions": {"io.modelcontextprotocol/tasks": {}}}
        }}
    })
    .to_string();
    let names = ["MCP-Protocol-Version", "Mcp-Method", "Mcp-Name", "Accept"];
    let mut fuzzed: Vec<(&str, &str)> = names.iter().copied().zip(parts.iter().map(String::as_str)).collect();
    fuzzed.push(("Content-Type", "application/json"));
    let encoded = encode_value(&task_id);
    let proper = [
        ("Content-Type", "application/json"),
        ("MCP-Protocol-Version", "2026-07-28"),
        ("Mcp-Method", "tasks/get"),
        ("Mcp-Name", encoded.as_str()),
    ];
    for (headers, must_pass) in [(&fuzzed[..], false), (&proper[..], true)] {
        let http = HttpRequest { method: "POST", headers: Headers(headers), body: Some(body.as_bytes()) };
        match DISPATCHER.handle_http(&http, Some("alice")) {
            Decision::Reply(reply) if must_pass => {
                let code = reply.message().and_then(|m| m["error"]["code"].as_i64());
                assert_ne!(code, Some(-32020), "a client's own headers were refused: {:?}", reply.json());
            }
            _ => {}
        }
    }
});
