//! The built binaries run as real processes: their stderr collected line by
//! line (JSON logs), signals sent, exit codes read. For what only a process
//! shows: SIGTERM handling and what reaches the log.

use std::{
    io::{BufRead as _, BufReader},
    path::PathBuf,
    process::{Child, Command, ExitStatus, Output, Stdio},
    sync::{Arc, Mutex},
    time::Duration,
};

use nix::{sys::signal::Signal, unistd::Pid};
use serde_json::Value;

use crate::eventually;

/// How long a binary may take to start (and to log that it has).
pub const START: Duration = Duration::from_secs(60);

/// A binary of the workspace, built next to the test executable by
/// `cargo test --workspace` (scripts/test).
pub fn binary(name: &str) -> PathBuf {
    let exe = std::env::current_exe().expect("test executable path");
    // target/<profile>/deps/binaries-<hash> -> target/<profile>/<name>
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
    /// Starts `binary` with exactly `env` (see [`command`]).
    pub fn start(binary: &str, args: &[&str], env: &[(&str, String)]) -> Self {
        let mut child = command(binary, args, env)
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
        eventually(timeout, &format!("a {message:?} log line"), async || {
            let found = self
                .lines()
                .iter()
                .filter_map(|l| serde_json::from_str::<Value>(l).ok())
                .find(|v| v["message"] == message);
            if found.is_none()
                && let Ok(Some(status)) = self.child.try_wait()
            {
                panic!(
                    "exited ({status}) before logging {message:?}:\n{}",
                    self.lines().join("\n")
                );
            }
            found.ok_or_else(|| format!("the log so far:\n{}", self.lines().join("\n")))
        })
        .await
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

    /// Waits for the process to exit and for its last log lines. Past
    /// `timeout` the test fails (and the process is killed when the `Service`
    /// drops).
    pub async fn wait(&mut self, timeout: Duration) -> ExitStatus {
        let status = eventually(timeout, "the process to exit", async || {
            let status = self.child.try_wait().expect("process state");
            status.ok_or_else(|| format!("still running; its log:\n{}", self.lines().join("\n")))
        })
        .await;
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

/// Starts `ingest` with `env` and waits until it listens; returns it and its
/// base URL, read from its log. `env` must have it log JSON
/// (`INGEST_LOG_FORMAT=json`), and listen on `127.0.0.1:0` for a port of
/// its own.
pub async fn start_ingest(env: &[(&str, String)]) -> (Service, String) {
    let mut ingest = Service::start("ingest", &[], env);
    let addr = ingest.wait_for_log("ingest listening", START).await["addr"]
        .as_str()
        .expect("addr")
        .to_owned();
    (ingest, format!("http://{addr}"))
}

/// `binary` with `args` and exactly `env` (plus PATH), nothing inherited, so
/// the developer's own settings cannot leak into the test.
pub fn command(binary: &str, args: &[&str], env: &[(&str, String)]) -> Command {
    let mut command = Command::new(self::binary(binary));
    command
        .args(args)
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .envs(env.iter().map(|(k, v)| (k, v)));
    command
}

/// Runs a binary to completion and returns what it did, whatever its exit.
pub fn output(binary: &str, args: &[&str], env: &[(&str, String)]) -> Output {
    command(binary, args, env)
        .output()
        .unwrap_or_else(|e| panic!("running {binary}: {e}"))
}

/// Runs a binary to completion and returns its stdout, failing the test on
/// a non-zero exit.
pub fn run(binary: &str, args: &[&str], env: &[(&str, String)]) -> String {
    let output = output(binary, args, env);
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
