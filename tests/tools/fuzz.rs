//! Property-based fuzzing of the published contract: schemathesis (installed
//! by `scripts/install-test-tools`) reads `/openapi.json` from a live ingest
//! (embedded mode, a real SQLite directory), generates valid and invalid
//! requests for every operation, and runs all of its checks on the answers:
//! no 5xx, every status, header, content type and body as documented, valid
//! data accepted, invalid data rejected, undeclared methods answered 405 with
//! `Allow`, missing credentials refused; and, following the document's
//! links, chains of calls on the records earlier calls created (the
//! stateful phase). It must find nothing.
//!
//! Reproduce a failure with the seed the report prints:
//! `TOCSIN_FUZZ_SEED=<seed> cargo test -p tocsin-tests --test tools fuzz`.
//! Without it every run draws new inputs.

use std::time::Duration;

use tocsin_tests::{StoreKind, TestApp, TestConfig, test_tool};

/// Test cases per operation and phase: under a minute with one worker.
const MAX_EXAMPLES: &str = "150";

/// schemathesis's settings. Only what does not fit this API by design is
/// changed; every check stays on.
const CONFIG: &str = r#"
# A request the schema allows must be accepted: schemathesis's accepted
# statuses. Every valid Idempotency-Key is made fresh before sending
# (schemathesis_hooks.py), so no request meets another's key: a 422 (a key
# reused with another body) or a replayed answer cannot happen by chance.
[checks.positive_data_acceptance]
expected-statuses = ["2xx", "3xx", "401", "403", "404", "409", "429", "5xx"]

# Two rules of a Web Push subscription no schema can state: its endpoint
# must be an https URL whose host is public (or an allow-listed origin), a
# rule over the network; and its p256dh must be a point on the P-256 curve.
# Everything else the schemas say is accepted: the listings' cursors and
# lastEventId have patterns the service accepts exactly, and the chart's
# counts page a long range instead of refusing it.
[[operations]]
include-operation-id = "registerDevice"
[operations.checks.positive_data_acceptance]
expected-statuses = ["2xx", "3xx", "400", "401", "403", "404", "409", "429", "5xx"]

# Two rules of a device's quiet hours the document leaves to the service
# (for registration, above, too): a time zone the IANA database knows (the
# database changes with releases; the document does not freeze its list),
# and an end that differs from the start. Each is a 400 with its path.
[[operations]]
include-operation-id = "updateDevice"
[operations.checks.positive_data_acceptance]
expected-statuses = ["2xx", "3xx", "400", "401", "403", "404", "409", "429", "5xx"]

# Two rules of an event the document leaves to the service: a backfilled
# event's `timestamp` must be in the past and within retention (rules of
# the clock), and its `url` must be a URL a browser can open, host and all
# (the pattern checks the scheme). Each is a 400 at its field.
[[operations]]
include-operation-id = "createEvent"
[operations.checks.positive_data_acceptance]
expected-statuses = ["2xx", "3xx", "400", "401", "403", "404", "409", "429", "5xx"]

# A destination's URL, like a subscription's endpoint, must be https to a
# public address (or an allowed host): a rule over the network. And its
# settings are of its own kind, which a PATCH's `settings` (any kind's
# shape) cannot state.
# An increment the schema allows is refused when the insight's value is not
# a number (a string or a boolean set earlier), or when the sum would leave
# the range a value may hold: a 400 at ["value"] or ["value", "$inc"], from
# the state of the insight, which no schema of the request can state.
[[operations]]
include-operation-id = "incrementInsight"
[operations.checks.positive_data_acceptance]
expected-statuses = ["2xx", "3xx", "400", "401", "403", "404", "409", "429", "5xx"]

[[operations]]
include-operation-id = "adminCreateDestination"
[operations.checks.positive_data_acceptance]
expected-statuses = ["2xx", "3xx", "400", "401", "403", "404", "409", "429", "5xx"]

[[operations]]
include-operation-id = "adminUpdateDestination"
[operations.checks.positive_data_acceptance]
expected-statuses = ["2xx", "3xx", "400", "401", "403", "404", "409", "429", "5xx"]
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn schemathesis_finds_nothing() {
    let schemathesis = test_tool("SCHEMATHESIS", ".tools/schemathesis/bin/schemathesis");
    let mut test = TestConfig::new(StoreKind::Sqlite);
    // Operator settings, not the API: schemathesis sends hundreds of requests
    // a minute from one address, many of them on purpose without a valid key
    // (its `ignored_auth` and missing-header checks). At the default 20 failed
    // authentications a minute the address would be locked out, and every
    // later request answered 429, which the checks accept: the run would
    // test nothing. The routes without a key are raised for the same reason.
    test.config.auth_failures_per_minute = 1_000_000.try_into().expect("non-zero");
    test.config.admin_auth_failures_per_minute = 1_000_000.try_into().expect("non-zero");
    // The admin token's own quota is the service default.
    test.config.rate_limit_per_minute = 1_000_000.try_into().expect("non-zero");
    test.config.anonymous_rate_limit_per_minute = 1_000_000.try_into().expect("non-zero");
    let app = TestApp::spawn_with(test).await;
    // Likewise the key's own quota (`ingest keys create --rate-limit`).
    let key = app.create_key("acme", "fuzz", Some(1_000_000)).await;
    let admin = app.create_admin("fuzz").await;
    // schemathesis sends one Authorization header for a whole run, and the
    // two halves of the API take different credentials: the API with the
    // key, then the admin API (tag Admin) with an admin token.
    for (tag, credential) in [("--exclude-tag", &key), ("--include-tag", &admin)] {
        run(&schemathesis, &app, tag, credential).await;
    }
}

/// One schemathesis run over the operations `tag_filter` Admin selects.
async fn run(schemathesis: &std::path::Path, app: &TestApp, tag_filter: &str, credential: &str) {
    // schemathesis writes its reports and example database under the
    // working directory: a temporary one keeps the checkout clean.
    let dir = tempfile::tempdir().expect("temp dir");
    let config = dir.path().join("schemathesis.toml");
    std::fs::write(&config, CONFIG).expect("config written");
    let mut command = tokio::process::Command::new(schemathesis);
    command
        .current_dir(dir.path())
        // Fresh Idempotency-Keys (the module's docstring says why).
        .env("SCHEMATHESIS_HOOKS", "schemathesis_hooks")
        .env(
            "PYTHONPATH",
            tocsin_tests::workspace_root().join("tests/tools"),
        )
        .arg("--config-file")
        .arg(&config)
        .arg("run")
        .arg(app.url("/openapi.json"))
        .args(["--checks", "all", "--max-examples", MAX_EXAMPLES])
        // One worker: with two, schemathesis runs hypothesis in two threads,
        // and CPython 3.11's `ast` module (hypothesis parses its lambdas'
        // source to describe them) shares a recursion counter between them:
        // now and then a run dies with "AST constructor recursion depth
        // mismatch" (cpython gh-106905), a failure of the tool, not the API.
        .args(["--workers", "1", "--generation-database", "none"])
        .args(["--no-color", "--output-truncate", "false"])
        // The live stream answers 200 and then never ends, by design:
        // schemathesis would wait on its body forever. Its parameters are
        // checked by the in_process tests (reading, stream).
        .args(["--exclude-operation-id", "streamEvents"])
        // A destination's test sends to the URL it was made with, by
        // design, and tests send only to loopback: the in_process tests
        // (destinations) send it to local stand-ins instead.
        .args(["--exclude-operation-id", "adminTestDestination"])
        .args([tag_filter, "Admin"])
        .arg("--header")
        .arg(format!("Authorization: Bearer {credential}"))
        .kill_on_drop(true);
    if let Ok(seed) = std::env::var("TOCSIN_FUZZ_SEED") {
        command.args(["--seed", &seed]);
    }
    let output = tokio::time::timeout(Duration::from_secs(300), command.output())
        .await
        .expect("schemathesis finishes within 5 minutes")
        .expect("schemathesis runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "schemathesis found failures ({tag_filter} Admin, {}):\n{stdout}\n{}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(
        stdout.contains(" passed"),
        "schemathesis ran no test cases:\n{stdout}"
    );
    // The stateful phase chains the document's links (an event created,
    // then read; a project created, then given a key, which is rotated and
    // revoked): it must have run, not been skipped for want of links.
    assert!(
        stdout.contains("✅ Stateful"),
        "schemathesis's stateful phase did not run:\n{stdout}"
    );
}
