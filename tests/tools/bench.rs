//! The benchmark (tests/bench/run.sh) still runs: once, for a second a row,
//! on the debug binaries `cargo build --workspace` made (a release build
//! would add minutes to CI), and prints every row with its figures and the
//! notifier benchmark's result. What the figures are is not checked: speed
//! is measured by running the script on release builds, never asserted.

use std::process::Command;

use tocsin_tests::{process, workspace_root};

/// The rows the script prints, each followed by req/s, ratio, p50, p99, the
/// server's CPU time per request and its memory.
const ROWS: [&str; 8] = [
    "baseline ",
    "baseline + SQLite ",
    "baseline + store ",
    "notify:false ",
    "idempotency-key ",
    "notify:true, no device ",
    "notify:true, 4 devices ",
    "synchronous=normal ",
];

#[test]
fn the_benchmark_runs_and_prints_every_row() {
    let bin_dir = process::binary("ingest")
        .parent()
        .expect("the binaries' directory")
        .to_owned();
    for bench_bin in ["bench-baseline", "bench-notifier"] {
        assert!(
            bin_dir.join(bench_bin).is_file(),
            "{bench_bin} is not built; run `cargo build --workspace`"
        );
    }
    let output = Command::new(workspace_root().join("tests/bench/run.sh"))
        .args(["--bin-dir", &bin_dir.display().to_string()])
        .args(["--duration", "1s", "--connections", "4"])
        .args(["--events", "20", "--latency-ms", "5"])
        .output()
        .expect("run.sh runs (needs wrk: scripts/install-test-tools)");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stdout}\n{stderr}");
    for row in ROWS {
        let line = stdout
            .lines()
            .find(|l| l.starts_with(row))
            .unwrap_or_else(|| panic!("no {row:?} row:\n{stdout}\n{stderr}"));
        let figures: Vec<&str> = line[row.len()..].split_whitespace().collect();
        let rate: f64 = figures[0].parse().unwrap_or(0.0);
        assert!(rate > 0.0, "no req/s in {line:?}");
        assert!(figures[1].parse::<f64>().is_ok(), "no ratio in {line:?}");
        let cpu = figures[4].strip_suffix("us").unwrap_or_default();
        assert!(cpu.parse::<f64>().is_ok(), "no CPU per request in {line:?}");
        assert!(line.contains("MiB"), "no memory in {line:?}");
    }
    for expected in [
        "backlog 0 within 2 s after the load: ",
        "ingest after ",
        "live: backlog drained ",
        // The notifier's own rate, from a backlog let go at once.
        " after release: ",
        "pushes/s",
    ] {
        assert!(stdout.contains(expected), "no {expected:?} in:\n{stdout}");
    }
    assert!(!stderr.contains("were not 201"), "{stderr}");
}
