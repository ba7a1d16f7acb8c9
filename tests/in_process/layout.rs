//! The layout the codebase promises (README, "Development"): the API
//! library composes nothing, and no product source file grows past what a
//! reader takes in at once.

use std::path::{Path, PathBuf};

use tocsin_tests::workspace_root;

/// Every `.rs` file below `dir`.
fn sources(dir: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(dir) = pending.pop() {
        for entry in std::fs::read_dir(&dir).expect("a source directory") {
            let path = entry.expect("an entry").path();
            if path.is_dir() {
                pending.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                found.push(path);
            }
        }
    }
    found
}

/// The lines of `path` that are code, not comments.
fn code_lines(path: &Path) -> Vec<String> {
    std::fs::read_to_string(path)
        .expect("a readable source")
        .lines()
        .filter(|line| !line.trim_start().starts_with("//"))
        .map(str::to_owned)
        .collect()
}

/// Only the `ingest` binary's composition root (`main.rs`, `compose.rs`)
/// knows the notifier; the library is the API alone.
#[test]
fn ingests_library_does_not_reach_into_the_notifier() {
    let src = workspace_root().join("ingest/src");
    let composition = [src.join("main.rs"), src.join("compose.rs")];
    let mut arrows = Vec::new();
    for file in sources(&src) {
        if composition.contains(&file) {
            continue;
        }
        for line in code_lines(&file) {
            if line.contains("notifier::") || line.contains("use notifier") {
                arrows.push(format!("{}: {}", file.display(), line.trim()));
            }
        }
    }
    assert!(arrows.is_empty(), "{arrows:#?}");
    // The composition root is where the notifier is wired in.
    let compose = code_lines(&src.join("compose.rs")).join("\n");
    assert!(compose.contains("notifier::Worker::start"), "{compose}");
}

/// No product source file over 400 lines (tests included in the count).
#[test]
fn no_product_source_file_is_over_400_lines() {
    let root = workspace_root();
    let mut long = Vec::new();
    for krate in ["common/src", "ingest/src", "notifier/src"] {
        for file in sources(&root.join(krate)) {
            let lines = std::fs::read_to_string(&file)
                .expect("a readable source")
                .lines()
                .count();
            if lines > 400 {
                long.push(format!("{}: {lines} lines", file.display()));
            }
        }
    }
    assert!(long.is_empty(), "{long:#?}");
}
