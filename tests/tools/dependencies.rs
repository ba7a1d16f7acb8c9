//! What the services are built from. The first `cargo run --release` on a
//! fresh machine compiles every crate below ingest and notifier, so the
//! tree is part of the first hour (docs/architecture.md, "Building and
//! testing"): one TLS crypto
//! backend, ring, and none of the C libraries a default feature can drag
//! in behind it. aws-lc-sys (lapin's default backend) alone is CMake and
//! hundreds of C files.

use std::process::Command;

/// Crates that must not be built for the services, and why.
const REFUSED: &[(&str, &str)] = &[
    (
        "aws-lc-sys",
        "a second crypto backend beside ring, built from C with CMake",
    ),
    ("aws-lc-rs", "a second crypto backend beside ring"),
    ("openssl-sys", "a system OpenSSL: C, and a second TLS stack"),
    ("native-tls", "a second TLS stack"),
];

/// Every package ingest and notifier compile for this machine (normal and
/// build dependencies; the tests' own are not in a user's build).
fn service_packages() -> Vec<String> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let output = Command::new(cargo)
        .current_dir(tocsin_tests::workspace_root())
        .args(["tree", "--locked", "-p", "ingest", "-p", "notifier"])
        .args([
            "--edges",
            "normal,build",
            "--prefix",
            "none",
            "--format",
            "{p}",
        ])
        .output()
        .expect("cargo tree runs");
    assert!(
        output.status.success(),
        "cargo tree failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .filter_map(|line| line.split_whitespace().next())
        .map(str::to_owned)
        .collect()
}

#[test]
fn the_services_use_one_crypto_backend_and_no_c_tls_library() {
    let packages = service_packages();
    assert!(
        packages.iter().any(|name| name == "ingest") && packages.iter().any(|name| name == "ring"),
        "cargo tree listed neither ingest nor ring: {packages:?}"
    );
    let refused: Vec<String> = REFUSED
        .iter()
        .filter(|(name, _)| packages.iter().any(|package| package == name))
        .map(|(name, why)| format!("{name} ({why})"))
        .collect();
    assert!(
        refused.is_empty(),
        "the services' build includes {}; `cargo tree -p ingest -e normal,build -i <crate>` shows who brings it",
        refused.join(", ")
    );
}
