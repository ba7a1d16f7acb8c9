//! The committed seeds (`fuzz/corpus/<target>/`) through each target's
//! checks, as a plain test: a change that breaks an invariant on a seed
//! fails `cargo test` without a fuzzing run.

use std::path::PathBuf;

fn seeds(target: &str) -> Vec<(PathBuf, Vec<u8>)> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("corpus")
        .join(target);
    let mut seeds: Vec<_> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|entry| {
            let path = entry.expect("a corpus entry").path();
            let bytes = std::fs::read(&path).expect("a readable seed");
            (path, bytes)
        })
        .collect();
    assert!(!seeds.is_empty(), "{} has no seeds", dir.display());
    seeds.sort();
    seeds
}

fn each_seed(target: &str, check: fn(&[u8])) {
    for (path, bytes) in seeds(target) {
        eprintln!("{}", path.display());
        check(&bytes);
    }
}

#[test]
fn request_body_seeds_hold() {
    each_seed("request_body", crate::request_body::check);
}

#[test]
fn query_seeds_hold() {
    each_seed("query", crate::query::check);
}

#[test]
fn cursor_seeds_hold() {
    each_seed("cursor", crate::cursor::check);
}

#[test]
fn headers_seeds_hold() {
    each_seed("headers", crate::headers::check);
}

#[test]
fn webpush_seeds_hold() {
    each_seed("webpush", crate::webpush::check);
}
