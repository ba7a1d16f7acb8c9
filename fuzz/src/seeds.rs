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

/// What a target checks of one input (it panics on a failure).
type Check = fn(&[u8]);

/// Each target's name (its seeds' directory) and checks.
const TARGETS: [(&str, Check); 5] = [
    ("request_body", crate::request_body::check),
    ("query", crate::query::check),
    ("cursor", crate::cursor::check),
    ("headers", crate::headers::check),
    ("webpush", crate::webpush::check),
];

#[test]
fn every_seed_holds_its_targets_checks() {
    for (target, check) in TARGETS {
        for (path, bytes) in seeds(target) {
            // A failing check panics: the seed it failed on is the last named.
            eprintln!("{}", path.display());
            check(&bytes);
        }
    }
}
