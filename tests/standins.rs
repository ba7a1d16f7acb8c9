//! Stand-ins for the notifier's destinations: a Standard Webhooks receiver,
//! a Slack incoming webhook, a Discord webhook, the Telegram Bot API, an
//! ntfy server and an SMTP server, all on loopback, in one Python process
//! (`tests/standins/standins.py`, in the venv `scripts/install-test-tools`
//! makes) because the reference verifiers are Python libraries. Each checks
//! what the real service checks and answers as it answers (see
//! `tests/standins/README.md`); everything received is recorded, and read
//! back as JSON through the stand-ins' control API, which also scripts
//! failures (a 429, a 500, a slow answer) and registers secrets and tokens.
//!
//! The process lives as long as the [`Standins`]: it is killed on drop, and
//! exits by itself when its standard input closes, so a test that dies
//! leaves nothing behind.

use std::{net::SocketAddr, process::Stdio, time::Duration};

use serde_json::{Value, json};
use tokio::{
    io::{AsyncBufReadExt as _, BufReader, Lines},
    process::{Child, ChildStdin, ChildStdout, Command},
};

use crate::{eventually, test_tool, workspace_root};

/// How long the stand-ins may take to start and print their ports.
const START: Duration = Duration::from_secs(30);

/// The running stand-ins.
pub struct Standins {
    /// The HTTP stand-ins and the control API, by path prefix: `/webhook/`,
    /// `/slack/`, `/discord/`, `/telegram/`, `/ntfy`, `/_control/`.
    pub http: SocketAddr,
    /// The SMTP server (plain, no TLS; AUTH PLAIN and LOGIN offered).
    pub smtp: SocketAddr,
    child: Child,
    // Held open for the process's life: it exits when this closes.
    _stdin: ChildStdin,
    _stdout: Lines<BufReader<ChildStdout>>,
    client: reqwest::Client,
}

impl Standins {
    /// Starts the stand-ins and waits until they listen.
    pub async fn start() -> Self {
        let python = test_tool("STANDINS_PYTHON", ".tools/standins/bin/python");
        let script = workspace_root().join("tests/standins/standins.py");
        let mut child = Command::new(&python)
            .arg(&script)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true)
            .spawn()
            .unwrap_or_else(|e| {
                panic!(
                    "starting {} {}: {e} (run scripts/install-test-tools)",
                    python.display(),
                    script.display()
                )
            });
        let stdin = child.stdin.take().expect("piped stdin");
        let mut stdout = BufReader::new(child.stdout.take().expect("piped stdout")).lines();
        let line = match tokio::time::timeout(START, stdout.next_line()).await {
            Ok(Ok(Some(line))) => line,
            Ok(Ok(None)) => panic!(
                "the stand-ins exited before printing their ports ({:?}); \
                 their stderr is above (is .tools/standins current? run scripts/install-test-tools)",
                child.try_wait()
            ),
            Ok(Err(e)) => panic!("reading the stand-ins' ports: {e}"),
            Err(_) => panic!("the stand-ins printed no ports within {START:?}"),
        };
        let ports: Value = serde_json::from_str(&line)
            .unwrap_or_else(|e| panic!("the stand-ins' ready line {line:?}: {e}"));
        let port = |name: &str| {
            let port = ports[name]
                .as_u64()
                .and_then(|p| u16::try_from(p).ok())
                .unwrap_or_else(|| panic!("no {name} port in {line:?}"));
            SocketAddr::from(([127, 0, 0, 1], port))
        };
        Self {
            http: port("http"),
            smtp: port("smtp"),
            child,
            _stdin: stdin,
            _stdout: stdout,
            client: reqwest::Client::builder()
                .timeout(Duration::from_secs(30))
                .build()
                .expect("http client"),
        }
    }

    /// `http://127.0.0.1:<port><path>`.
    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.http)
    }

    /// Registers the signing secret (`whsec_<base64>`) `/webhook/<name>`
    /// verifies with.
    pub async fn set_webhook_secret(&self, name: &str, secret: &str) {
        self.control("webhook-secret", json!({"name": name, "secret": secret}))
            .await;
    }

    /// The next requests under `prefix` (`"smtp"` for mail) get `responses`
    /// in order, each `{"status": N}` (in the service's own error shape;
    /// `"retry_after"`: seconds for a 429), `{"delay_ms": N}` (held that
    /// long, then handled as usual), or both; then normal handling resumes.
    pub async fn script(&self, prefix: &str, responses: Value) {
        self.control(
            "script",
            json!({"path_prefix": prefix, "responses": responses}),
        )
        .await;
    }

    /// Requests under `prefix` must carry `token`: the bot token of a
    /// Telegram URL, the bearer of an ntfy topic (`/ntfy/<topic>`), the last
    /// segment of a Slack or Discord webhook URL, or `user:password` for
    /// SMTP AUTH (`"smtp"`).
    pub async fn expect_token(&self, prefix: &str, token: &str) {
        self.control(
            "expect-token",
            json!({"path_prefix": prefix, "token": token}),
        )
        .await;
    }

    /// Forgets every record, script, secret and token.
    pub async fn reset(&self) {
        self.control("reset", json!({})).await;
    }

    /// Every request recorded under `prefix` (`"smtp"` for mail), in
    /// arrival order: accepted, rejected (`problem` says why) or scripted.
    pub async fn received(&self, prefix: &str) -> Vec<Value> {
        let response = self
            .client
            .get(self.url("/_control/received"))
            .query(&[("prefix", prefix)])
            .send()
            .await
            .expect("the stand-ins answer");
        assert_eq!(response.status(), 200, "GET /_control/received");
        response.json().await.expect("the records are JSON")
    }

    /// Waits until at least `n` requests under `prefix` were accepted, and
    /// returns the accepted ones. Fails the test with what was recorded if
    /// that takes longer than `timeout`.
    pub async fn wait_received(&self, prefix: &str, n: usize, timeout: Duration) -> Vec<Value> {
        eventually(
            timeout,
            &format!("{n} accepted at the {prefix} stand-in"),
            async || {
                let records = self.received(prefix).await;
                let accepted: Vec<Value> = records
                    .iter()
                    .filter(|r| r["accepted"] == true)
                    .cloned()
                    .collect();
                if accepted.len() >= n {
                    Ok(accepted)
                } else {
                    Err(format!(
                        "{} accepted of {} recorded:\n{}",
                        accepted.len(),
                        records.len(),
                        summary(&records)
                    ))
                }
            },
        )
        .await
    }

    /// The records under `prefix` a check of the stand-in found fault with
    /// (a bad signature, a broken limit, a mail that is not
    /// multipart/alternative...).
    pub async fn problems(&self, prefix: &str) -> Vec<Value> {
        self.received(prefix)
            .await
            .into_iter()
            .filter(|r| !r["problem"].is_null())
            .collect()
    }

    /// Fails the test if any record under `prefix` has a problem.
    pub async fn assert_no_problems(&self, prefix: &str) {
        let problems = self.problems(prefix).await;
        assert!(
            problems.is_empty(),
            "the {prefix} stand-in found fault:\n{}",
            summary(&problems)
        );
    }

    async fn control(&self, call: &str, body: Value) {
        let response = self
            .client
            .post(self.url(&format!("/_control/{call}")))
            .json(&body)
            .send()
            .await
            .expect("the stand-ins answer");
        let status = response.status();
        let text = response.text().await.unwrap_or_default();
        assert!(
            status.is_success(),
            "control call {call} {body}: {status} {text}"
        );
    }
}

impl Drop for Standins {
    fn drop(&mut self) {
        // kill_on_drop would too; this says so where it happens.
        let _ = self.child.start_kill();
    }
}

/// One line per record: what came, what was answered, and why.
pub fn summary(records: &[Value]) -> String {
    records
        .iter()
        .map(|r| {
            format!(
                "  #{} {} {} -> {} accepted={} scripted={} problem={}",
                r["seq"],
                r["method"].as_str().unwrap_or("?"),
                r["path"].as_str().unwrap_or("?"),
                r["status"],
                r["accepted"],
                r["scripted"],
                r["problem"]
            )
        })
        .collect::<Vec<_>>()
        .join("\n")
}
