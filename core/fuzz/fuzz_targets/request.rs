//! Request decoding and the server dispatcher's decision on any body: never a panic, and every
//! reply a well-formed JSON-RPC response with an HTTP status. The standard headers are derived
//! from the body when it is a request, so inputs get past the header rules to the routing.
#![no_main]

use std::sync::LazyLock;

use libfuzzer_sys::fuzz_target;
use mcp_tasks_protocol::headers::{encode_value, name_source};
use mcp_tasks_protocol::negotiation::TaskMode;
use mcp_tasks_protocol::request;
use mcp_tasks_protocol::server::{
    Decision, Dispatcher, DispatcherConfig, Headers, HttpRequest, StdioDecision, ToolEntry,
};
use serde_json::{Value, json};

/// A host's dispatcher (its own tools) and an SDK adapter's (delegates what is not the extension's).
static DISPATCHERS: LazyLock<[Dispatcher; 2]> = LazyLock::new(|| {
    [false, true].map(|delegate| {
        let mut d = Dispatcher::new(DispatcherConfig {
            max_body_bytes: 64 * 1024,
            default_mode: delegate.then_some(TaskMode::Optional),
            delegate,
            ..DispatcherConfig::default()
        });
        for (name, mode) in [("sync", TaskMode::Forbidden), ("job", TaskMode::Optional), ("must", TaskMode::Required)] {
            d.add_tool(ToolEntry {
                name: name.into(),
                mode,
                listing: json!({ "name": name, "inputSchema": {"type": "object"} }),
            });
        }
        d
    })
});

fn check_response(message: &Value) {
    assert_eq!(message["jsonrpc"], "2.0", "{message}");
    let id = &message["id"];
    assert!(id.is_string() || id.is_i64() || id.is_u64() || id.is_null(), "id {id}");
    match (message.get("result"), message.get("error")) {
        (Some(_), None) => {}
        (None, Some(error)) => {
            assert!(error["code"].is_i64(), "{message}");
            assert!(error["message"].is_string(), "{message}");
        }
        _ => panic!("neither or both of result and error: {message}"),
    }
}

fuzz_target!(|data: &[u8]| {
    let _ = request::decode(data);
    let parsed: Option<Value> = serde_json::from_slice(data).ok();
    let method = parsed.as_ref().and_then(|v| v.get("method")).and_then(Value::as_str).unwrap_or("tasks/get");
    let name = name_source(method, parsed.as_ref().and_then(|v| v.get("params")))
        .and_then(|(_, value)| value)
        .map(encode_value);
    let mut headers = vec![
        ("Content-Type", "application/json"),
        ("MCP-Protocol-Version", "2026-07-28"),
        ("Mcp-Method", method),
        ("Accept", if data.first().is_some_and(|b| b % 2 == 0) { "text/event-stream" } else { "application/json" }),
    ];
    if let Some(name) = &name {
        headers.push(("Mcp-Name", name));
    }
    for dispatcher in DISPATCHERS.iter() {
        let http = HttpRequest { method: "POST", headers: Headers(&headers), body: Some(data) };
        match dispatcher.handle_http(&http, Some("alice")) {
            Decision::Reply(reply) => {
                assert!((200..600).contains(&reply.status));
                if let Some(message) = reply.message() {
                    check_response(&message);
                }
                let _ = reply.body();
            }
            Decision::Route(routed) => {
                check_response(&routed.reply.result(json!({})).message().expect("a result has a body"));
            }
            Decision::Delegate => {}
            Decision::DelegateCall { reply, tool } => {
                check_response(&reply.unknown_tool(&tool).message().expect("an error has a body"));
            }
        }
        match dispatcher.handle_stdio(Some(data), "alice") {
            StdioDecision::Reply(message) => check_response(&message),
            StdioDecision::Route(routed) => {
                check_response(&routed.reply.result(json!({})).message().expect("a result has a body"));
            }
            StdioDecision::Cancel(_) | StdioDecision::Ignore | StdioDecision::Delegate => {}
        }
    }
});
