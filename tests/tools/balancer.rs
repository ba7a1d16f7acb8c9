//! Scale-out that keeps every limit: two ingest processes on one MongoDB
//! and RabbitMQ (the production layout), behind Debian's nginx running the
//! shipped `deploy/nginx/tocsin.conf` unchanged but for its listen address,
//! with the replicas' loopback ports in place of `deploy/nginx/replicas.conf`.
//! Rate limits live in each process; the balancer's routing by API key is
//! what keeps a key's quota exact across replicas.

use std::{
    path::PathBuf,
    process::{Child, Command, Stdio},
    time::Duration,
};

use futures::StreamExt as _;
use serde_json::json;
use tocsin_tests::{
    amqp_url, eventually, free_port, mongo_uri,
    process::{self, Service},
    scrape, unique_db_name, workspace_root,
};
use uuid::Uuid;

/// The per-key quota under test, in requests per minute.
const QUOTA: usize = 100;
/// Requests sent with each key: two and a half times its quota, so that
/// routing that ignored the key (each replica granting the quota) would
/// show as about twice the quota created.
const SENT: usize = 250;

/// Debian's nginx (installed by `scripts/install-test-tools`), or `NGINX`.
fn nginx_binary() -> PathBuf {
    if let Some(path) = std::env::var_os("NGINX") {
        return path.into();
    }
    let debian = PathBuf::from("/usr/sbin/nginx");
    assert!(
        debian.is_file(),
        "nginx not found: run scripts/install-test-tools (or set NGINX)"
    );
    debian
}

/// nginx in the foreground on a loopback port, balancing over `replicas`
/// with the shipped configuration; stopped when dropped.
struct Nginx {
    /// Where it answers: `http://127.0.0.1:<port>`.
    front: String,
    child: Child,
    _dir: tempfile::TempDir,
}

impl Nginx {
    /// Starts nginx and waits until it answers `/healthz` through a replica.
    async fn start(replicas: &[String]) -> Self {
        let port = free_port();
        let dir = tempfile::tempdir().expect("temp dir");
        let shipped = std::fs::read_to_string(workspace_root().join("deploy/nginx/tocsin.conf"))
            .expect("deploy/nginx/tocsin.conf");
        let listen = "    listen 8080;\n";
        assert_eq!(
            shipped.matches(listen).count(),
            1,
            "tocsin.conf has one `listen 8080;` line for the test to move to loopback"
        );
        let conf = shipped.replace(listen, &format!("    listen 127.0.0.1:{port};\n"));
        std::fs::write(dir.path().join("tocsin.conf"), conf).expect("tocsin.conf written");
        std::fs::create_dir(dir.path().join("tocsin")).expect("tocsin/ made");
        let servers: String = replicas
            .iter()
            .map(|addr| format!("server {addr};\n"))
            .collect();
        std::fs::write(dir.path().join("tocsin/replicas.conf"), servers)
            .expect("replicas.conf written");
        // Everything nginx writes stays in the temporary directory.
        let prefix = dir.path().display();
        let main = format!(
            "daemon off;\nmaster_process off;\npid {prefix}/nginx.pid;\nerror_log stderr warn;\n\
             events {{ worker_connections 1024; }}\n\
             http {{\n  access_log off;\n  client_body_temp_path {prefix}/body;\n  \
             proxy_temp_path {prefix}/proxy;\n  fastcgi_temp_path {prefix}/fastcgi;\n  \
             uwsgi_temp_path {prefix}/uwsgi;\n  scgi_temp_path {prefix}/scgi;\n  \
             include tocsin.conf;\n}}\n"
        );
        let main_path = dir.path().join("nginx.conf");
        std::fs::write(&main_path, main).expect("nginx.conf written");
        let child = Command::new(nginx_binary())
            .arg("-p")
            .arg(dir.path())
            .arg("-c")
            .arg(&main_path)
            .args(["-e", "stderr"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .spawn()
            .expect("nginx starts");
        let nginx = Self {
            front: format!("http://127.0.0.1:{port}"),
            child,
            _dir: dir,
        };
        let client = reqwest::Client::new();
        let health = format!("{}/healthz", nginx.front);
        eventually(
            Duration::from_secs(20),
            "nginx to answer",
            async || match client.get(&health).send().await {
                Ok(r) if r.status() == 200 => Ok(()),
                other => Err(format!("{other:?}")),
            },
        )
        .await;
        nginx
    }
}

impl Drop for Nginx {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One ingest replica and where to reach it directly.
struct Replica {
    _service: Service,
    base: String,
}

impl Replica {
    /// How many events it answered 201.
    async fn recorded(&self, client: &reqwest::Client) -> f64 {
        scrape(client, &format!("{}/metrics", self.base))
            .await
            .value(
                "tocsin_http_requests_total",
                &[
                    ("method", "POST"),
                    ("route", "/v1/events"),
                    ("status", "201"),
                ],
            )
    }
}

/// How many events each of two replicas answered 201.
async fn recorded(replicas: &[Replica], client: &reqwest::Client) -> [f64; 2] {
    [
        replicas[0].recorded(client).await,
        replicas[1].recorded(client).await,
    ]
}

fn replica_env(database: &str, prefix: &str) -> Vec<(&'static str, String)> {
    vec![
        ("MONGODB_URI", mongo_uri()),
        ("MONGODB_DATABASE", database.to_owned()),
        ("AMQP_URL", amqp_url()),
        ("INGEST_QUEUE_PREFIX", prefix.to_owned()),
        ("INGEST_LISTEN", "127.0.0.1:0".to_owned()),
        ("INGEST_LOG_FORMAT", "json".to_owned()),
        ("INGEST_TRUST_FORWARDED_FOR", "true".to_owned()),
        // Small, so the spoofing check below needs few requests.
        ("INGEST_AUTH_FAILURES_PER_MINUTE", "3".to_owned()),
    ]
}

fn create_key(env: &[(&'static str, String)]) -> String {
    let quota = QUOTA.to_string();
    let args = ["keys", "create", "--org", "acme", "--project", "scale"];
    process::run(
        "ingest",
        &[&args[..], &["--rate-limit", &quota]].concat(),
        env,
    )
    .trim()
    .to_owned()
}

async fn post_event(client: &reqwest::Client, base: &str, key: &str, n: usize) -> u16 {
    client
        .post(format!("{base}/v1/events"))
        .bearer_auth(key)
        .json(&json!({ "channelName": "scale", "title": format!("Request {n}"), "notify": false }))
        .send()
        .await
        .expect("sent through nginx")
        .status()
        .as_u16()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_replicas_behind_the_shipped_nginx_keep_each_keys_quota_exact() {
    let (database, prefix) = (unique_db_name(), format!("t{}", Uuid::new_v4().simple()));
    let env = replica_env(&database, &prefix);
    let mut replicas = Vec::new();
    for _ in 0..2 {
        let (service, base) = process::start_ingest(&env).await;
        replicas.push(Replica {
            _service: service,
            base,
        });
    }
    let addrs: Vec<String> = replicas
        .iter()
        .map(|r| r.base.trim_start_matches("http://").to_owned())
        .collect();
    let nginx = Nginx::start(&addrs).await;
    let front = nginx.front.clone();
    let client = reqwest::Client::new();

    // The quota refills as time passes (one request every 60/QUOTA s): a
    // slow machine earns each key a few more than QUOTA, counted from here.
    let started = std::time::Instant::now();
    // Keys until each replica has two: the first event of each key shows
    // which replica the hash sends it to.
    let mut keys_of: [Vec<String>; 2] = [Vec::new(), Vec::new()];
    for _ in 0..40 {
        if keys_of.iter().all(|keys| keys.len() >= 2) {
            break;
        }
        let key = create_key(&env);
        let before = recorded(&replicas, &client).await;
        assert_eq!(post_event(&client, &front, &key, 0).await, 201);
        let after = recorded(&replicas, &client).await;
        let served: Vec<usize> = (0..2).filter(|&i| after[i] > before[i]).collect();
        assert_eq!(served.len(), 1, "one replica answers each request");
        keys_of[served[0]].push(key);
    }
    assert!(
        keys_of.iter().all(|keys| keys.len() >= 2),
        "40 keys never reached both replicas: the balancer does not spread keys"
    );

    // Every request of the chosen keys at once: each key gets its quota
    // (the first request above included) and no more, whichever replica it
    // is on. Round robin would let each key through on both replicas.
    let recorded_before = recorded(&replicas, &client).await;
    let keys: Vec<String> = keys_of
        .iter()
        .flat_map(|k| k.iter().take(2).cloned())
        .collect();
    let sends = keys
        .iter()
        .enumerate()
        .flat_map(|(k, key)| (1..SENT).map(move |n| (k, key, n)))
        .map(|(k, key, n)| {
            let (client, front) = (&client, &front);
            async move { (k, post_event(client, front, key, n).await) }
        });
    // 32 at a time, as a busy client pool would send them.
    let answers: Vec<(usize, u16)> = futures::stream::iter(sends)
        .buffer_unordered(32)
        .collect()
        .await;
    let mut statuses = vec![Vec::new(); keys.len()];
    for (k, status) in answers {
        statuses[k].push(status);
    }
    let refilled = (started.elapsed().as_secs_f64() * QUOTA as f64 / 60.0).ceil() as usize;
    assert!(
        refilled < QUOTA / 2,
        "the run took {:?}: too long for the quota to tell one replica from two",
        started.elapsed()
    );
    let mut created_on = [0usize; 2];
    for (k, got) in statuses.iter().enumerate() {
        let created = got.iter().filter(|s| **s == 201).count() + 1;
        let limited = got.iter().filter(|s| **s == 429).count();
        assert_eq!(created + limited, SENT, "key {k}: only 201 or 429: {got:?}");
        assert!(
            (QUOTA..=QUOTA + refilled).contains(&created),
            "key {k}: {created} created, expected {QUOTA} (+{refilled} refilled): the quota \
             must hold across both replicas"
        );
        created_on[k / 2] += created - 1;
    }
    for (i, replica) in replicas.iter().enumerate() {
        let recorded = replica.recorded(&client).await - recorded_before[i];
        assert_eq!(
            recorded, created_on[i] as f64,
            "replica {i} recorded the events of its two keys, and only those"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_balancer_streams_live_and_overwrites_a_forwarded_address() {
    let (database, prefix) = (unique_db_name(), format!("t{}", Uuid::new_v4().simple()));
    let env = replica_env(&database, &prefix);
    let (service, base) = process::start_ingest(&env).await;
    let _replica = Replica {
        _service: service,
        base: base.clone(),
    };
    let nginx = Nginx::start(&[base.trim_start_matches("http://").to_owned()]).await;
    let front = nginx.front.clone();
    let client = reqwest::Client::new();

    // A live stream through nginx gets an event while it stays open.
    let key = create_key(&env);
    let mut stream = client
        .get(format!("{front}/v1/stream"))
        .bearer_auth(&key)
        .send()
        .await
        .expect("stream opened");
    assert_eq!(stream.status(), 200);
    assert_eq!(post_event(&client, &front, &key, 1).await, 201);
    let mut seen = String::new();
    let delivered = tokio::time::timeout(Duration::from_secs(10), async {
        while let Some(chunk) = stream.chunk().await.expect("stream chunk") {
            seen.push_str(&String::from_utf8_lossy(&chunk));
            if seen.contains("Request 1") {
                return;
            }
        }
    })
    .await;
    assert!(
        delivered.is_ok(),
        "the event did not come through nginx within 10 s; got {seen:?}"
    );

    // A client that sends its own X-Forwarded-For, a new one each time, to
    // dodge the failed-authentication limit (3 a minute here): the replica
    // sees the address nginx saw, so the fourth wrong key is refused.
    let wrong = format!("tocsin_{}", "x".repeat(43));
    let mut statuses = Vec::new();
    for n in 0..4 {
        let status = client
            .get(format!("{front}/v1/events"))
            .bearer_auth(&wrong)
            .header("X-Forwarded-For", format!("198.51.100.{n}"))
            .send()
            .await
            .expect("sent")
            .status()
            .as_u16();
        statuses.push(status);
    }
    assert_eq!(
        statuses,
        [401, 401, 401, 429],
        "spoofed addresses are ignored"
    );
}
