//! Guards the layering: the protocol layer does no IO, spawns nothing and reads no clock, and
//! the README's error table is the code's `ERROR_TABLE`.

use std::path::Path;

const FORBIDDEN: &[&str] = &[
    "tokio",
    "SystemTime",
    "Instant::now",
    "std::fs",
    "std::net",
    "std::thread",
    "getrandom",
    "rusqlite",
    "axum",
    "reqwest",
    "async fn",
];

#[test]
fn protocol_layer_is_sans_io() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/protocol");
    let mut checked = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        let text = std::fs::read_to_string(&path).unwrap();
        for (n, line) in text.lines().enumerate() {
            let code = line.split("//").next().unwrap_or("");
            for word in FORBIDDEN {
                assert!(!code.contains(word), "{}:{} uses {word}: {line}", path.display(), n + 1);
            }
        }
        checked += 1;
    }
    assert!(checked >= 8, "expected the protocol modules in {}", dir.display());
}

#[test]
fn readme_error_table_is_the_code_table() {
    let readme = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../README.md")).unwrap();
    for row in mcp_tasks::protocol::ERROR_TABLE {
        let line = format!("| {} | {} | {} |", row.code, row.http_status, row.when);
        assert!(readme.contains(&line), "README.md lacks the error-table row:\n{line}");
    }
}

/// Asserts the README quotes `examples/{file}` from the line starting with `first_line` on.
fn assert_readme_quotes_example(file: &str, first_line: &str) {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let readme = std::fs::read_to_string(root.join("../README.md")).unwrap();
    let example = std::fs::read_to_string(root.join("examples").join(file)).unwrap();
    let body = &example[example.find(first_line).unwrap()..];
    assert!(readme.contains(body), "README.md's copy of core/examples/{file} differs from the file");
}

#[test]
fn readme_examples_are_the_compiled_examples() {
    assert_readme_quotes_example("serve.rs", "use std::sync::Arc;");
    assert_readme_quotes_example("client.rs", "use futures::StreamExt;");
}
