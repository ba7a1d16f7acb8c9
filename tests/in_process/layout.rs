//! The layout the codebase promises (docs/architecture.md): the ingest
//! library, composition included, never reaches into the notifier; only
//! the binary names it, to pass the embedded mode's worker.

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

/// Only the `ingest` binary (`main.rs`) knows the notifier: the library,
/// its composition root included, takes the embedded worker as an
/// argument. (Cargo cannot check this: the package depends on the notifier
/// for its binary, and a library may use whatever its package depends on.)
#[test]
fn ingests_library_does_not_reach_into_the_notifier() {
    let src = workspace_root().join("ingest/src");
    let binary = src.join("main.rs");
    let mut arrows = Vec::new();
    for file in sources(&src) {
        if file == binary {
            continue;
        }
        for line in code_lines(&file) {
            if line.contains("notifier::") || line.contains("use notifier") {
                arrows.push(format!("{}: {}", file.display(), line.trim()));
            }
        }
    }
    assert!(arrows.is_empty(), "{arrows:#?}");
    // The binary is where the notifier is passed in.
    let main = code_lines(&binary).join("\n");
    assert!(main.contains("notifier::Embedded"), "{main}");
}

/// Every file below `dir` whose code (not comments) contains any of
/// `needles`, with the line.
fn mentions(dir: &Path, needles: &[&str]) -> Vec<(PathBuf, String)> {
    let mut found = Vec::new();
    for file in sources(dir) {
        for line in code_lines(&file) {
            if needles.iter().any(|needle| line.contains(needle)) {
                found.push((file.clone(), line.trim().to_owned()));
            }
        }
    }
    found
}

/// One way to record an event: only the recorder writes events, so the
/// insert, its idempotent outcome and the hand-over to the queue cannot be
/// done another way by another handler or by a middleware.
#[test]
fn events_are_recorded_in_one_place() {
    let src = workspace_root().join("ingest/src");
    let writers: Vec<_> = mentions(&src, &[".insert_event(", ".insert_event_with_outcome("])
        .into_iter()
        .filter(|(file, _)| *file != src.join("record.rs"))
        .collect();
    assert!(writers.is_empty(), "{writers:#?}");
}

/// The tests build the service through the composition its binary uses
/// (`ingest::compose`), never by wiring the API and a worker themselves.
#[test]
fn the_tests_build_the_service_as_its_binary_does() {
    let root = workspace_root();
    let tests = root.join("tests");
    let this_file = tests.join("in_process/layout.rs");
    let rewired: Vec<_> = mentions(&tests, &["Application::build", "Worker::start"])
        .into_iter()
        .filter(|(file, _)| *file != this_file)
        .collect();
    assert!(rewired.is_empty(), "{rewired:#?}");
    let harness = code_lines(&tests.join("lib.rs")).join("\n");
    assert!(harness.contains("compose::Service"), "{harness}");
    let main = code_lines(&root.join("ingest/src/main.rs")).join("\n");
    assert!(main.contains("ingest::compose::serve"), "{main}");
}
