//! The API manifest (`tests/api/manifest.json`) is core's: its client options are
//! `ClientOptions`' fields, its error classes `ERROR_CLASSES`, its outcome kinds `Outcome`'s.
//! The bindings' own tests check each binding against the same manifest.

use std::path::Path;

use mcp_tasks::client::ClientOptions;
use mcp_tasks::protocol::ERROR_CLASSES;
use mcp_tasks::protocol::client::Outcome;
use serde_json::{Value, json};

fn manifest() -> Value {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/api/manifest.json");
    serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap()
}

fn camel(name: &str) -> String {
    let mut parts = name.split('_');
    let mut out = parts.next().unwrap().to_owned();
    for part in parts {
        let mut chars = part.chars();
        out.extend(chars.next().map(|c| c.to_ascii_uppercase()));
        out.push_str(chars.as_str());
    }
    out
}

#[test]
fn client_options_are_cores() {
    let listed: Vec<String> =
        manifest()["client_options"].as_array().unwrap().iter().map(|v| camel(v.as_str().unwrap())).collect();
    assert_eq!(listed, ClientOptions::NAMES);
    let serialized = serde_json::to_value(ClientOptions::default()).unwrap();
    let fields: Vec<&str> = serialized.as_object().unwrap().keys().map(String::as_str).collect();
    assert_eq!(fields, ClientOptions::NAMES, "NAMES is the serialized field list");
    let refused = serde_json::from_value::<ClientOptions>(json!({"url": "http://x", "pollMs": 5})).unwrap_err();
    assert!(refused.to_string().contains("pollMs"), "{refused}");
}

#[test]
fn error_classes_are_cores() {
    let manifest = manifest();
    let listed: Vec<&str> = manifest["error_classes"].as_array().unwrap().iter().map(|v| v.as_str().unwrap()).collect();
    let table: Vec<&str> = ERROR_CLASSES.iter().map(|c| c.name).collect();
    assert_eq!(listed, table);
}

#[test]
fn outcome_kinds_are_cores() {
    let error = mcp_tasks::protocol::RpcError::new(-32603, "x");
    let kinds: Vec<String> = [
        Outcome::Completed { result: json!({}) },
        Outcome::Failed { error },
        Outcome::Cancelled,
        Outcome::Gone,
        Outcome::Expired,
    ]
    .iter()
    .map(|o| serde_json::to_value(o).unwrap()["kind"].as_str().unwrap().to_owned())
    .collect();
    assert_eq!(manifest()["outcome_kinds"], json!(kinds));
}
