//! Test harness shared by the end-to-end tests: real stores, the real
//! service on a random port, and a cuttable TCP proxy to take a dependency
//! away mid-test.
//!
//! MongoDB: `MONGODB_URI` when set (a real MongoDB, for example the
//! docker-compose stack); otherwise one MongoDB-compatible `jongodb` server
//! per test binary, installed by `scripts/install-test-tools`. Every test
//! gets its own database name, so nothing is ever dropped or shared.

pub mod contract;
mod counting;
pub mod drill;
mod eventually;
pub mod fcm_service;
mod loopback;
pub mod openmetrics;
pub mod pipeline;
pub mod process;
pub mod proxy;
pub mod push_service;
pub mod recording;
pub mod revocation;
pub mod standins;
pub mod stored;
pub mod windows;

use std::{
    io::{BufRead as _, BufReader},
    path::PathBuf,
    process::{Child, Command, Stdio},
    sync::{Arc, Mutex, OnceLock},
    time::Duration,
};

pub use counting::CountCalls;

use common::store::{Scope, Store, StoreConfig};
pub use eventually::{Observation, eventually};
use ingest::{Config, compose::Service};
use notifier::push::PushProvider;
use serde_json::Value;

/// Which store a test runs against.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StoreKind {
    Sqlite,
    Mongo,
}

/// Generates one test per store from an `async fn(StoreKind)`.
#[macro_export]
macro_rules! for_each_store {
    ($($name:ident),* $(,)?) => {
        mod sqlite {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    super::$name($crate::StoreKind::Sqlite).await
                }
            )*
        }
        mod mongo {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    super::$name($crate::StoreKind::Mongo).await
                }
            )*
        }
    };
}

/// The workspace root (this crate lives in `tests/`).
pub fn workspace_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("tests/ has a parent")
        .to_path_buf()
}

/// A program installed by `scripts/install-test-tools`, or named by `env_var`.
pub fn test_tool(env_var: &str, default_under_root: &str) -> PathBuf {
    let path = std::env::var_os(env_var)
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace_root().join(default_under_root));
    assert!(
        path.exists(),
        "{} not found: run scripts/install-test-tools (or set {env_var})",
        path.display()
    );
    path
}

struct Jongodb {
    uri: String,
    // Holding the child's stdin open keeps it alive; when this process
    // exits the pipe closes and the wrapper shell stops the server.
    _child: Mutex<Child>,
}

static JONGODB: OnceLock<Jongodb> = OnceLock::new();

/// A MongoDB URI for tests: `MONGODB_URI`, or a jongodb server started once.
pub fn mongo_uri() -> String {
    if let Ok(uri) = std::env::var("MONGODB_URI")
        && !uri.is_empty()
    {
        return uri;
    }
    JONGODB.get_or_init(start_jongodb).uri.clone()
}

fn start_jongodb() -> Jongodb {
    let bin = test_tool(
        "JONGODB_BIN",
        ".tools/jongodb/node_modules/@jongodb/memory-server-bin-linux-x64-gnu/bin/jongodb",
    );
    let port = free_port();
    let script = format!(
        "\"$0\" --host=127.0.0.1 --port={port} & pid=$!; read -r _; kill $pid 2>/dev/null; wait $pid"
    );
    let mut child = Command::new("sh")
        .arg("-c")
        .arg(script)
        .arg(&bin)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("jongodb starts");
    let stdout = child.stdout.take().expect("piped stdout");
    let mut lines = BufReader::new(stdout).lines();
    let uri = loop {
        match lines.next() {
            Some(Ok(line)) => {
                if let Some(uri) = line.strip_prefix("JONGODB_URI=") {
                    break uri.trim().to_owned();
                }
            }
            _ => panic!("jongodb exited before printing its URI"),
        }
    };
    // Keep draining its output so it never blocks on a full pipe.
    std::thread::spawn(move || for _ in lines {});
    Jongodb {
        uri,
        _child: Mutex::new(child),
    }
}

/// A port nobody listens on right now.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

/// A `pending` event of `scope`, due now, as a request stores it.
pub fn pending_event(scope: &Scope) -> common::store::Event {
    common::store::Event {
        id: uuid::Uuid::now_v7(),
        scope: scope.clone(),
        channel_name: "c".into(),
        title: "t".into(),
        description: None,
        icon: None,
        tags: vec![],
        metadata: serde_json::Map::new(),
        user_id: None,
        notify: true,
        source: None,
        priority: common::store::Priority::Normal,
        alert_key: None,
        parser: common::store::Parser::Text,
        url: None,
        created_at: common::time::now(),
        notification: common::store::NotificationState::Pending,
        request_id: None,
        notification_due_at: Some(common::time::now()),
    }
}

/// A database name of its own for one test.
pub fn unique_db_name() -> String {
    format!("test_{}", uuid::Uuid::new_v4().simple())
}

/// A secrets key (`TOCSIN_SECRETS_KEY`) of its own.
pub fn test_secrets_key() -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.encode(uuid::Uuid::new_v4().as_bytes().repeat(2))
}

/// Settings for a test instance of ingest on `kind`'s store, on a random port.
pub struct TestConfig {
    pub config: Config,
    /// Keeps the SQLite directory alive as long as the config is.
    pub dir: tempfile::TempDir,
}

impl TestConfig {
    pub fn new(kind: StoreKind) -> Self {
        let dir = tempfile::tempdir().expect("temp dir");
        let mut config = Config::defaults();
        config.listen = "127.0.0.1:0".into();
        config.backend.data_dir = dir.path().join("data");
        config.shutdown_grace_seconds = 1;
        if kind == StoreKind::Mongo {
            config.backend.mongodb_uri = Some(common::config::Secret::new(mongo_uri()));
            config.backend.mongodb_database = unique_db_name();
            // MongoDB keeps no key file: destinations' secrets are sealed
            // with the operator's key (SQLite makes its own in data_dir).
            config.backend.secrets_key = Some(common::config::Secret::new(test_secrets_key()));
        }
        Self { config, dir }
    }

    pub fn store_config(&self) -> StoreConfig {
        self.config.backend.store()
    }
}

/// A store of `kind` of its own (a fresh SQLite file, or a fresh MongoDB
/// database), opened as the services open theirs; the config keeps the
/// SQLite directory alive.
pub async fn open_store(kind: StoreKind) -> (Arc<dyn Store>, TestConfig) {
    let test = TestConfig::new(kind);
    let store = common::store::open(&test.store_config(), Duration::from_secs(10))
        .await
        .expect("store opens");
    (store, test)
}

/// What runs in-process beside the API when the test's settings have no
/// broker (embedded mode): the notifier worker ingest's binary runs
/// (`notifier::Embedded`), with the test's push provider and notifier
/// settings.
pub struct Embedded {
    /// By default the provider the settings select (logging, without APNs
    /// credentials).
    pub provider: Option<Arc<dyn PushProvider>>,
    pub notifier: notifier::Config,
}

impl Default for Embedded {
    fn default() -> Self {
        Self {
            provider: None,
            notifier: test_notifier_config(),
        }
    }
}

/// A running ingest and what a test needs to talk to it.
pub struct TestApp {
    pub base: String,
    pub client: reqwest::Client,
    pub store: Arc<dyn Store>,
    pub config: Config,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    server: Option<tokio::task::JoinHandle<anyhow::Result<()>>>,
    _dir: tempfile::TempDir,
}

impl TestApp {
    /// Starts ingest with the default settings on `kind`'s store.
    pub async fn spawn(kind: StoreKind) -> Self {
        Self::spawn_with(TestConfig::new(kind)).await
    }

    /// Starts ingest with settings the test adjusted.
    pub async fn spawn_with(test: TestConfig) -> Self {
        Self::spawn_with_options(test, Embedded::default()).await
    }

    /// Starts ingest with settings and an embedded notifier of the test's.
    pub async fn spawn_with_options(test: TestConfig, embedded: Embedded) -> Self {
        Self::spawn_wrapped(test, embedded, |store| store).await
    }

    /// Starts ingest on the store `wrap` makes of the real one (a layer that
    /// counts calls, say).
    pub async fn spawn_wrapped(
        test: TestConfig,
        embedded: Embedded,
        wrap: impl FnOnce(Arc<dyn Store>) -> Arc<dyn Store>,
    ) -> Self {
        let TestConfig { config, dir } = test;
        // Built as ingest's binary builds it (`ingest::compose`), with the
        // test's worker and, if it wraps one, the test's store.
        let store = ingest::compose::open_store(&config)
            .await
            .expect("the store opens");
        let store = wrap(store);
        let Embedded { provider, notifier } = embedded;
        let tester = notifier::destination_tester(&config.backend).expect("the senders");
        let app = Service::build(
            config,
            Arc::clone(&store),
            || Ok(notifier::Embedded::new(notifier, provider)),
            tester,
        )
        .await
        .expect("ingest starts");
        let config = app.config().clone();
        let base = format!("http://{}", app.addr());
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let server = tokio::spawn(app.run_until(async {
            let _ = stopped.await;
        }));
        Self {
            base,
            client: reqwest::Client::builder()
                .timeout(Duration::from_secs(30))
                .build()
                .expect("http client"),
            store,
            config,
            stop: Some(stop),
            server: Some(server),
            _dir: dir,
        }
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    /// Creates an API key for `org`/`project` the way `ingest keys create` does.
    pub async fn create_key(&self, org: &str, project: &str, rate_limit: Option<u32>) -> String {
        ingest::cli::create_key(
            self.store.as_ref(),
            Scope::new(org, project),
            None,
            rate_limit,
        )
        .await
        .expect("key created")
    }

    /// Creates an API key that may do only what `scopes` name.
    pub async fn create_key_with_scopes(
        &self,
        org: &str,
        project: &str,
        scopes: &[common::store::KeyScope],
    ) -> String {
        ingest::cli::create_key_with_scopes(
            self.store.as_ref(),
            Scope::new(org, project),
            None,
            None,
            scopes,
        )
        .await
        .expect("key created")
    }

    /// An admin token, made as `ingest admin create` makes one.
    pub async fn create_admin(&self, name: &str) -> String {
        let token = common::keys::generate_admin_token();
        let admin = common::store::Admin {
            id: uuid::Uuid::now_v7(),
            name: name.into(),
            hash: common::keys::hash_secret(&token),
            prefix: common::keys::display_prefix(&token),
            created_at: common::time::now(),
            revoked_at: None,
        };
        self.store.insert_admin(&admin).await.expect("admin stored");
        token
    }

    /// Sends `method` `path` with a bearer `token` and an optional JSON body.
    pub async fn call(
        &self,
        method: reqwest::Method,
        path: &str,
        token: &str,
        body: Option<&Value>,
    ) -> Reply {
        let mut request = self
            .client
            .request(method, self.url(path))
            .bearer_auth(token);
        if let Some(body) = body {
            request = request.json(body);
        }
        Reply::of(request.send().await.expect("request sent")).await
    }

    /// A key of a fresh project of its own.
    pub async fn new_key(&self) -> (String, Scope) {
        let project = format!("p{}", uuid::Uuid::new_v4().simple());
        let key = self.create_key("acme", &project, None).await;
        (key, Scope::new("acme", project))
    }

    /// POSTs a JSON body with a key.
    pub async fn post(&self, path: &str, key: &str, body: &Value) -> reqwest::Response {
        self.client
            .post(self.url(path))
            .bearer_auth(key)
            .json(body)
            .send()
            .await
            .expect("request sent")
    }

    /// POSTs a JSON body with a key and an idempotency key.
    pub async fn post_idempotent(
        &self,
        path: &str,
        key: &str,
        idempotency_key: &str,
        body: &Value,
    ) -> reqwest::Response {
        self.client
            .post(self.url(path))
            .bearer_auth(key)
            .header("Idempotency-Key", idempotency_key)
            .json(body)
            .send()
            .await
            .expect("request sent")
    }

    pub async fn post_event(&self, key: &str, body: &Value) -> reqwest::Response {
        self.post("/v1/events", key, body).await
    }

    /// Records an event (asserting the 201) and returns its id.
    pub async fn record_event(&self, key: &str, body: &Value) -> String {
        let reply = Reply::of(self.post_event(key, body).await).await;
        assert_eq!(reply.status, 201, "{}", reply.body);
        reply.body["data"]["id"].as_str().expect("id").to_owned()
    }

    /// Waits (up to [`pipeline::WAIT`]) for event `id`'s notification to
    /// reach `state`, and returns the event as `GET /v1/events/{id}` shows it.
    pub async fn settled(&self, key: &str, id: &str, state: &str) -> Value {
        eventually(
            pipeline::WAIT,
            &format!("event {id} to become {state}"),
            async || {
                let reply = Reply::of(self.get_as(&format!("/v1/events/{id}"), key).await).await;
                let event = &reply.body["data"];
                (event["notification"]["state"] == state)
                    .then(|| event.clone())
                    .ok_or(reply.body)
            },
        )
        .await
    }

    /// GETs `path` without a key.
    pub async fn get(&self, path: &str) -> reqwest::Response {
        self.client
            .get(self.url(path))
            .send()
            .await
            .expect("request sent")
    }

    /// GETs `path` with a key.
    pub async fn get_as(&self, path: &str, key: &str) -> reqwest::Response {
        self.client
            .get(self.url(path))
            .bearer_auth(key)
            .send()
            .await
            .expect("request sent")
    }

    /// DELETEs `path` with a key.
    pub async fn delete_as(&self, path: &str, key: &str) -> reqwest::Response {
        self.client
            .delete(self.url(path))
            .bearer_auth(key)
            .send()
            .await
            .expect("request sent")
    }

    /// This ingest's `/metrics`.
    pub async fn scrape(&self) -> openmetrics::Scrape {
        scrape(&self.client, &self.url("/metrics")).await
    }

    /// Stops the server and waits for it to finish.
    pub async fn stop(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(server) = self.server.take() {
            server
                .await
                .expect("server task")
                .expect("server stops cleanly");
        }
    }
}

impl Drop for TestApp {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }
}

/// The broker the tests use: `AMQP_URL`, or the local RabbitMQ.
pub fn amqp_url() -> String {
    std::env::var("AMQP_URL")
        .ok()
        .filter(|u| !u.is_empty())
        .unwrap_or_else(|| "amqp://guest:guest@127.0.0.1:5672/%2f".into())
}

/// Fetches a `/metrics` page, checking it is served as OpenMetrics text.
pub async fn scrape(client: &reqwest::Client, url: &str) -> openmetrics::Scrape {
    let response = client.get(url).send().await.expect("scrape sent");
    assert_eq!(response.status(), 200, "GET {url}");
    let content_type = response
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    assert!(
        content_type.starts_with("application/openmetrics-text"),
        "{content_type}"
    );
    openmetrics::Scrape::parse(&response.text().await.expect("scrape body"))
}

/// Notifier settings for tests: short retry delays, no environment.
pub fn test_notifier_config() -> notifier::Config {
    let mut config = notifier::Config::defaults();
    config.listen = "127.0.0.1:0".into();
    // A key of its own: a standalone notifier on SQLite would otherwise
    // make one in `./data` (an embedded one takes ingest's).
    config.backend.secrets_key = Some(common::config::Secret::new(test_secrets_key()));
    config.retry_base_ms = std::num::NonZeroU64::new(200).expect("non-zero");
    config.retry_max_ms = 800;
    config.max_retries = 3;
    config.stale_claim_seconds = 2;
    config
}

/// A response read in full: status, headers and JSON body.
pub struct Reply {
    pub status: u16,
    pub headers: reqwest::header::HeaderMap,
    pub body: Value,
}

impl Reply {
    pub async fn of(response: reqwest::Response) -> Self {
        let status = response.status().as_u16();
        let headers = response.headers().clone();
        let bytes = response.bytes().await.expect("body read");
        let body = serde_json::from_slice(&bytes).unwrap_or_else(|e| {
            panic!(
                "body is not JSON ({e}): {}",
                String::from_utf8_lossy(&bytes)
            )
        });
        Self {
            status,
            headers,
            body,
        }
    }

    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }

    /// Asserts the spec's error envelope with a UUID request id matching the header.
    pub fn assert_error_envelope(&self, status: u16) {
        assert_eq!(
            self.status, status,
            "unexpected status; body: {}",
            self.body
        );
        assert_eq!(self.body["success"], Value::Bool(false), "{}", self.body);
        assert!(
            self.body["error"].as_str().is_some_and(|e| !e.is_empty()),
            "error message missing: {}",
            self.body
        );
        self.assert_request_id();
    }

    /// Asserts the body's `requestId` is a UUID equal to `X-Request-Id`.
    pub fn assert_request_id(&self) {
        let id = self.body["requestId"]
            .as_str()
            .unwrap_or_else(|| panic!("requestId missing: {}", self.body));
        uuid::Uuid::parse_str(id).expect("requestId is a UUID");
        assert_eq!(
            self.header("x-request-id"),
            Some(id),
            "X-Request-Id differs"
        );
    }

    /// Asserts the three rate-limit headers are present and numeric.
    pub fn assert_rate_limit_headers(&self) {
        for name in [
            "x-ratelimit-limit",
            "x-ratelimit-remaining",
            "x-ratelimit-reset",
        ] {
            let value = self
                .header(name)
                .unwrap_or_else(|| panic!("{name} missing on a {} response", self.status));
            value
                .parse::<u64>()
                .unwrap_or_else(|_| panic!("{name} is not a number: {value}"));
        }
    }

    /// The `details` of a validation error as (path, message) pairs.
    pub fn details(&self) -> Vec<(Vec<String>, String)> {
        self.body["details"]
            .as_array()
            .unwrap_or_else(|| panic!("details missing: {}", self.body))
            .iter()
            .map(|d| {
                let path = d["path"]
                    .as_array()
                    .expect("path is an array")
                    .iter()
                    .map(|s| s.as_str().expect("path segments are strings").to_owned())
                    .collect();
                (path, d["message"].as_str().expect("message").to_owned())
            })
            .collect()
    }

    /// The paths of every fault in `details`.
    pub fn fault_paths(&self) -> Vec<Vec<String>> {
        self.details().into_iter().map(|(p, _)| p).collect()
    }
}

/// `["a", "b"]` as owned strings, for comparing paths.
pub fn path(segments: &[&str]) -> Vec<String> {
    segments.iter().map(|s| (*s).to_owned()).collect()
}
