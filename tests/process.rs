//! The built binaries run as real processes: their stderr collected line by
//! line (JSON logs), signals sent, exit codes read. For what only a process
//! shows: SIGTERM handling and what reaches the log.

use std::{
    io::{BufRead as _, BufReader},
    path::PathBuf,
    process::{Child, Command, ExitStatus, Stdio},
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use nix::{sys::signal::Signal, unistd::Pid};
use serde_json::Value;

/// A binary of the workspace, built next to the test executable by
/// `cargo test --workspace` (scripts/test).
pub fn binary(name: &str) -> PathBuf {
    let exe = std::env::current_exe().expect("test executable path");
    // target/<profile>/deps/e2e-<hash> -> target/<profile>/<name>
    let path = exe
        .parent()
        .and_then(|deps| deps.parent())
        .expect("target directory")
        .join(name);
    assert!(
        path.is_file(),
        "{} is not built; run `cargo build --workspace` (scripts/test does)",
        path.display()
    );
    path
}

/// A running service whose stderr is being collected.
pub struct Service {
    child: Child,
    lines: Arc<Mutex<Vec<String>>>,
    reader: Option<std::thread::JoinHandle<()>>,
}

impl Service {
    /// Starts `binary` with exactly `env` (plus PATH), nothing inherited, so
    /// the developer's own settings cannot leak into the test.
    pub fn start(binary: &str, args: &[&str], env: &[(&str, String)]) -> Self {
        let mut child = Command::new(self::binary(binary))
            .args(args)
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .envs(env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("starting {binary}: {e}"));
        let stderr = child.stderr.take().expect("stderr piped");
        let lines = Arc::new(Mutex::new(Vec::new()));
        let sink = Arc::clone(&lines);
        let reader = std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                sink.lock().expect("lines").push(line);
            }
        });
        Self {
            child,
            lines,
            reader: Some(reader),
        }
    }

    /// Every stderr line so far.
    pub fn lines(&self) -> Vec<String> {
        self.lines.lock().expect("lines").clone()
    }

    /// Waits for a JSON log line whose `message` is `message`, and returns it.
    pub async fn wait_for_log(&mut self, message: &str, timeout: Duration) -> Value {
        let deadline = Instant::now() + timeout;
        loop {
            let found = self
                .lines()
                .iter()
                .filter_map(|l| serde_json::from_str::<Value>(l).ok())
                .find(|v| v["message"] == message);
            if let Some(line) = found {
                return line;
            }
            if let Ok(Some(status)) = self.child.try_wait() {
                panic!(
                    "exited ({status}) before logging {message:?}:\n{}",
                    self.lines().join("\n")
                );
            }
            assert!(
                Instant::now() < deadline,
                "no {message:?} log line within {timeout:?}:\n{}",
                self.lines().join("\n")
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Kills the process with SIGKILL, as a crash or the OOM killer would,
    /// and waits until it is gone.
    pub fn kill(&mut self) {
        self.child.kill().expect("SIGKILL sent");
        self.child.wait().expect("reaped");
        if let Some(reader) = self.reader.take() {
            let _ = reader.join();
        }
    }

    /// Sends SIGTERM.
    pub fn terminate(&self) {
        let pid = Pid::from_raw(i32::try_from(self.child.id()).expect("pid"));
        nix::sys::signal::kill(pid, Signal::SIGTERM).expect("SIGTERM sent");
    }

    /// Waits for the process to exit (killing it past `timeout`, which fails
    /// the test) and for its last log lines.
    pub async fn wait(&mut self, timeout: Duration) -> ExitStatus {
        let deadline = Instant::now() + timeout;
        let status = loop {
            if let Some(status) = self.child.try_wait().expect("process state") {
                break status;
            }
            if Instant::now() > deadline {
                let _ = self.child.kill();
                panic!(
                    "did not exit within {timeout:?}:\n{}",
                    self.lines().join("\n")
                );
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        };
        if let Some(reader) = self.reader.take() {
            let _ = reader.join();
        }
        status
    }
}

impl Drop for Service {
    fn drop(&mut self) {
        // A failed test must not leave the process behind.
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Runs a binary to completion and returns its stdout, failing the test on
/// a non-zero exit.
pub fn run(binary: &str, args: &[&str], env: &[(&str, String)]) -> String {
    let output = Command::new(self::binary(binary))
        .args(args)
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .envs(env.iter().map(|(k, v)| (k, v)))
        .output()
        .unwrap_or_else(|e| panic!("running {binary}: {e}"));
    assert!(
        output.status.success(),
        "{binary} {args:?} failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).expect("utf-8 output")
}

/// POSTs `body` with `key` to a service started here; returns the status and
/// the JSON answer.
pub async fn post(base: &str, path: &str, key: &str, body: &Value) -> (u16, Value) {
    let response = reqwest::Client::new()
        .post(format!("{base}{path}"))
        .bearer_auth(key)
        .json(body)
        .send()
        .await
        .expect("sent");
    let status = response.status().as_u16();
    (status, response.json().await.expect("a JSON answer"))
}
