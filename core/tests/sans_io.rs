//! Guards the layering: the protocol crate (`core/protocol`) depends on nothing that does IO,
//! spawns or reads a clock, and its code calls none of it; the error tables of docs/errors.md are
//! the code's `ERROR_TABLE` and `ERROR_CLASSES`; the repository stands alone.

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
    "now_utc",
    "now_local",
];

/// The only dependencies the protocol crate may have: none of them does IO or reads a clock.
const PROTOCOL_DEPENDENCIES: &[&str] = &["base64", "hmac", "serde", "serde_json", "sha2", "thiserror", "time"];

#[test]
fn protocol_crate_depends_on_nothing_that_does_io() {
    let manifest = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("protocol/Cargo.toml")).unwrap();
    let mut section = "";
    let mut found = Vec::new();
    for line in manifest.lines().map(str::trim) {
        if line.starts_with('[') {
            section = line;
        } else if section.ends_with("dependencies]") && !line.is_empty() && !line.starts_with('#') {
            let name = line.split(['=', '.', ' ']).next().unwrap().to_owned();
            assert!(PROTOCOL_DEPENDENCIES.contains(&name.as_str()), "core/protocol depends on {name} ({section})");
            found.push(name);
        }
    }
    assert!(found.len() >= 5, "expected the protocol crate's dependencies, found {found:?}");
}

#[test]
fn protocol_crate_is_sans_io() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("protocol/src");
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

/// The error tables of docs/errors.md, read once.
fn errors_doc() -> String {
    std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/errors.md")).unwrap()
}

#[test]
fn the_documented_error_table_is_the_code_table() {
    let doc = errors_doc();
    for row in mcp_tasks::protocol::ERROR_TABLE {
        let line = format!("| {} | {} | {} |", row.code, row.http_status, row.when);
        assert!(doc.contains(&line), "docs/errors.md lacks the error-table row:\n{line}");
    }
}

/// The one line allowed to name a sibling folder: `.ci/run` defaults the vendored crates of the
/// Swift machine to the CI machine's copy beside the checkout (anyone else sets CARGO_VENDOR_DIR).
/// Built by concatenation so this file does not match itself.
const CI_VENDOR_LINE: &str = concat!("  export CARGO_VENDOR_DIR=${CARGO_VENDOR_DIR:-$PWD/", "..", "/shared/vendor}");

/// The repository stands alone: no test, script or comment reaches for a sibling folder or for
/// documents that are not in it (the spec is cited by its public URL, schemas are vendored), but
/// for `CI_VENDOR_LINE` in `.ci/run`.
#[test]
fn repository_stands_alone() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    // Built by concatenation so this file does not match itself.
    let outside = [["../", "shared"].concat(), ["DIG", "EST"].concat(), ["NOTES", ".md"].concat()];
    let mut stack = vec![root.to_path_buf()];
    let mut checked = 0;
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            if path.is_dir() {
                if !matches!(name.as_str(), "target" | "node_modules" | ".git" | ".tools" | ".build" | "dist") {
                    stack.push(path);
                }
                continue;
            }
            let Ok(mut text) = std::fs::read_to_string(&path) else { continue };
            if path.ends_with(".ci/run") {
                assert_eq!(text.matches(CI_VENDOR_LINE).count(), 1, ".ci/run lacks its vendor line:\n{CI_VENDOR_LINE}");
                text = text.lines().filter(|line| *line != CI_VENDOR_LINE).collect::<Vec<_>>().join("\n");
            }
            for word in &outside {
                assert!(
                    !text.contains(word.as_str()),
                    "{} mentions {word}, which is outside the repository",
                    path.display()
                );
            }
            checked += 1;
        }
    }
    assert!(checked > 50, "expected the repository's files under {}", root.display());
}

#[test]
fn the_documented_error_class_table_is_the_code_table() {
    let doc = errors_doc();
    for class in mcp_tasks::protocol::ERROR_CLASSES {
        let parent = class.parent.map_or("–".to_owned(), |p| format!("`{p}`"));
        let code = class.code.map_or("–".to_owned(), |c| c.to_string());
        let line = format!("| `{}` | {parent} | {code} | {} |", class.name, class.doc);
        assert!(doc.contains(&line), "docs/errors.md lacks the error-class row:\n{line}");
    }
}
