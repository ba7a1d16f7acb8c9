//! The `ingest` binary as an operator uses it: key administration in both
//! storage modes, configuration errors, serving, and the health check.
//! Every run gets exactly the settings given (tests/process.rs).

use std::{path::Path, process::Output, time::Instant};

use serde_json::json;
use tocsin_tests::{
    mongo_uri,
    process::{self, Service},
    revocation::refused_within_bound,
    unique_db_name,
};

fn run(env: &[(&str, String)], args: &[&str]) -> Output {
    process::output("ingest", args, env)
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn embedded(dir: &Path) -> Vec<(&'static str, String)> {
    vec![("INGEST_DATA_DIR", dir.display().to_string())]
}

fn mongo() -> Vec<(&'static str, String)> {
    vec![
        ("MONGODB_URI", mongo_uri()),
        ("MONGODB_DATABASE", unique_db_name()),
    ]
}

fn key_admin_works(env: &[(&str, String)]) {
    let created = run(
        env,
        &[
            "keys",
            "create",
            "--org",
            "acme",
            "--project",
            "web",
            "--name",
            "ci",
            "--rate-limit",
            "7",
        ],
    );
    assert!(created.status.success(), "{}", stderr(&created));
    let secret = stdout(&created);
    let secret = secret.trim_end_matches('\n');
    assert!(
        common::keys::looks_like_secret(secret),
        "stdout is the key alone: {secret:?}"
    );
    assert_eq!(stdout(&created).lines().count(), 1);

    let listed = run(env, &["keys", "list"]);
    assert!(listed.status.success(), "{}", stderr(&listed));
    let table = stdout(&listed);
    assert!(!table.contains(secret), "list never shows secrets");
    assert!(
        table.contains("acme") && table.contains("web") && table.contains("active"),
        "{table}"
    );

    let json_lines = run(env, &["keys", "list", "--json"]);
    let keys: Vec<serde_json::Value> = stdout(&json_lines)
        .lines()
        .map(|l| serde_json::from_str(l).expect("JSON line"))
        .collect();
    assert_eq!(keys.len(), 1);
    assert_eq!(keys[0]["rateLimit"], json!(7));
    assert_eq!(keys[0]["name"], json!("ci"));
    let id = keys[0]["id"].as_str().expect("id").to_owned();

    let revoked = run(env, &["keys", "revoke", &id]);
    assert!(revoked.status.success(), "{}", stderr(&revoked));
    assert!(stdout(&run(env, &["keys", "list"])).contains("revoked"));
    let again = run(env, &["keys", "revoke", &id]);
    assert!(!again.status.success(), "revoking a revoked key fails");
    assert!(stderr(&again).contains(&id));
}

#[test]
fn keys_can_be_created_listed_and_revoked_in_embedded_mode() {
    let dir = tempfile::tempdir().expect("temp dir");
    key_admin_works(&embedded(dir.path()));
}

#[test]
fn keys_can_be_created_listed_and_revoked_on_mongodb() {
    key_admin_works(&mongo());
}

/// The JSON lines of `keys list --json`.
fn listed_json(env: &[(&str, String)]) -> Vec<serde_json::Value> {
    let listed = run(env, &["keys", "list", "--json"]);
    assert!(listed.status.success(), "{}", stderr(&listed));
    stdout(&listed)
        .lines()
        .map(|l| serde_json::from_str(l).expect("JSON line"))
        .collect()
}

/// `--scopes` limits a key to what it names (all four without it), and
/// `keys list` shows each key's scopes by name, in the table and in JSON.
fn key_scopes_are_chosen_and_listed(env: &[(&str, String)]) {
    for (project, scopes) in [
        ("phone", Some("events:read")),
        ("web", None),
        ("browser", Some("devices:write,events:read,devices:write")),
    ] {
        let mut args = vec!["keys", "create", "--org", "acme", "--project", project];
        args.extend(scopes.iter().flat_map(|s| ["--scopes", *s]));
        let created = run(env, &args);
        assert!(created.status.success(), "{args:?}: {}", stderr(&created));
    }
    let expected = [
        ("phone", json!(["events:read"])),
        (
            "web",
            json!([
                "events:write",
                "events:read",
                "devices:write",
                "devices:read"
            ]),
        ),
        ("browser", json!(["events:read", "devices:write"])),
    ];

    let keys = listed_json(env);
    assert_eq!(keys.len(), expected.len());
    for (project, scopes) in &expected {
        let key = keys
            .iter()
            .find(|k| k["project"] == *project)
            .unwrap_or_else(|| panic!("{project} listed: {keys:?}"));
        assert_eq!(key["scopes"], *scopes, "{project}");
    }

    let listed = run(env, &["keys", "list"]);
    assert!(listed.status.success(), "{}", stderr(&listed));
    let table = stdout(&listed);
    let mut lines = table.lines();
    let header = lines.next().expect("a header");
    assert_eq!(header.split_whitespace().last(), Some("SCOPES"), "{table}");
    for (project, scopes) in &expected {
        let row = table
            .lines()
            .find(|l| l.split_whitespace().any(|cell| cell == *project))
            .unwrap_or_else(|| panic!("{project} in {table}"));
        let names: Vec<&str> = scopes
            .as_array()
            .expect("names")
            .iter()
            .filter_map(serde_json::Value::as_str)
            .collect();
        assert_eq!(
            row.split_whitespace().last(),
            Some(names.join(",").as_str()),
            "{table}"
        );
    }
}

#[test]
fn key_scopes_are_chosen_and_listed_in_embedded_mode() {
    let dir = tempfile::tempdir().expect("temp dir");
    key_scopes_are_chosen_and_listed(&embedded(dir.path()));
}

#[test]
fn key_scopes_are_chosen_and_listed_on_mongodb() {
    key_scopes_are_chosen_and_listed(&mongo());
}

#[test]
fn an_unknown_scope_is_refused_naming_the_valid_ones() {
    let dir = tempfile::tempdir().expect("temp dir");
    let env = embedded(dir.path());
    for scopes in ["events:read,billing:admin", "events", ""] {
        let out = run(
            &env,
            &[
                "keys",
                "create",
                "--org",
                "acme",
                "--project",
                "web",
                "--scopes",
                scopes,
            ],
        );
        assert_eq!(out.status.code(), Some(2), "{scopes:?}: {}", stderr(&out));
        assert!(stdout(&out).is_empty(), "no key printed for {scopes:?}");
        let said = stderr(&out);
        for valid in [
            "events:write",
            "events:read",
            "devices:write",
            "devices:read",
        ] {
            assert!(said.contains(valid), "{scopes:?}: {said}");
        }
    }
    assert!(listed_json(&env).is_empty(), "no key was created");
}

/// `keys list` run in `dir` with the shipped `data_dir` (`./data`), as an
/// operator in another directory would.
fn list_keys_in(dir: &Path) -> Output {
    process::command("ingest", &["keys", "list"], &[])
        .current_dir(dir)
        .output()
        .expect("ingest runs")
}

#[test]
fn key_commands_name_the_sqlite_file_they_use_and_say_when_they_created_it() {
    let dir = tempfile::tempdir().expect("temp dir");
    let file = std::fs::canonicalize(dir.path())
        .expect("canonical")
        .join("data")
        .join("tocsin.sqlite3");

    let first = list_keys_in(dir.path());
    assert!(first.status.success(), "{}", stderr(&first));
    assert_eq!(
        stderr(&first).trim_end(),
        format!("ingest: created a new SQLite store at {}", file.display())
    );
    assert!(file.exists(), "the store was created where stderr says");

    let second = list_keys_in(dir.path());
    assert!(second.status.success(), "{}", stderr(&second));
    assert_eq!(
        stderr(&second).trim_end(),
        format!("ingest: using the SQLite store at {}", file.display())
    );
}

#[test]
fn key_commands_name_the_mongodb_hosts_and_database_never_the_credentials() {
    let uri = mongo_uri();
    let (scheme, rest) = uri.split_once("://").expect("a URI");
    // Whatever credentials the test URI has are replaced by our own.
    let rest = rest.rsplit_once('@').map_or(rest, |(_, hosts)| hosts);
    let host = rest.split(['/', '?']).next().expect("hosts");
    let database = unique_db_name();
    let plain = [
        ("MONGODB_URI", format!("{scheme}://{rest}")),
        ("MONGODB_DATABASE", database.clone()),
    ];
    let created = run(
        &plain,
        &["keys", "create", "--org", "acme", "--project", "web"],
    );
    assert!(created.status.success(), "{}", stderr(&created));
    assert_eq!(
        stderr(&created).trim_end(),
        format!("ingest: using the MongoDB store at {host}, database {database}")
    );
    assert_eq!(
        stdout(&created).lines().count(),
        1,
        "stdout is the key alone"
    );

    // jongodb has no authentication, so this one fails at the handshake (a
    // real MongoDB, at a user it does not have): the message still says
    // which store, and still without the user or password.
    let credentialed = [
        (
            "MONGODB_URI",
            format!("{scheme}://tocsin-user:hunter2@{rest}"),
        ),
        ("MONGODB_DATABASE", database.clone()),
    ];
    let listed = run(&credentialed, &["keys", "list"]);
    let said = stderr(&listed);
    assert!(
        said.contains(&format!("MongoDB store at {host}, database {database}")),
        "{said}"
    );
    assert!(
        !said.contains("hunter2") && !said.contains("tocsin-user"),
        "{said}"
    );
}

#[test]
fn bad_input_to_keys_create_is_refused_with_a_message() {
    let dir = tempfile::tempdir().expect("temp dir");
    let env = embedded(dir.path());
    for args in [
        vec!["keys", "create", "--project", "web"],
        vec!["keys", "create", "--org", "", "--project", "web"],
        vec!["keys", "create", "--org", "a b", "--project", "web"],
        vec![
            "keys",
            "create",
            "--org",
            "a",
            "--project",
            "web",
            "--rate-limit",
            "0",
        ],
        vec!["keys", "revoke", "not-a-uuid"],
    ] {
        let out = run(&env, &args);
        assert!(!out.status.success(), "{args:?} must fail");
        assert!(!stderr(&out).is_empty());
        assert!(stdout(&out).is_empty(), "nothing on stdout for {args:?}");
    }
}

#[test]
fn bad_configuration_fails_at_start_naming_the_setting() {
    let dir = tempfile::tempdir().expect("temp dir");
    let cases = [
        ("INGEST_LISTEN", "not-an-address"),
        ("INGEST_RATE_LIMIT_PER_MINUTE", "lots"),
        ("INGEST_RATE_LIMIT_PER_MINUTE", "0"),
        ("INGEST_STORE_TIMEOUT_MS", "-5"),
        ("MONGODB_URI", "http://example"),
        ("INGEST_LOG_FORMAT", "xml"),
        ("INGEST_CORS_ORIGINS", "https://app.example/path"),
    ];
    for (var, value) in cases {
        let mut env = embedded(dir.path());
        env.push((var, value.to_owned()));
        let out = run(&env, &["keys", "list"]);
        assert_eq!(
            out.status.code(),
            Some(2),
            "{var}={value} must fail: {}",
            stderr(&out)
        );
        assert!(
            stderr(&out).contains(var),
            "the message names {var}: {}",
            stderr(&out)
        );
    }
    let out = run(
        &embedded(dir.path()),
        &["--config", "/no/such/file.toml", "keys", "list"],
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("/no/such/file.toml"));
}

#[test]
fn a_config_file_overrides_defaults_and_the_environment_overrides_it() {
    let dir = tempfile::tempdir().expect("temp dir");
    let file = dir.path().join("ingest.toml");
    std::fs::write(
        &file,
        format!(
            "data_dir = {:?}\nlisten = \"bad\"\n",
            dir.path().join("from-file")
        ),
    )
    .expect("written");
    let config = file.to_str().expect("utf-8");
    let out = run(&[], &["--config", config, "keys", "list"]);
    assert_eq!(out.status.code(), Some(2), "the file's bad listen is read");
    let out = run(
        &[("INGEST_LISTEN", "127.0.0.1:0".into())],
        &[
            "--config",
            config,
            "keys",
            "create",
            "--org",
            "o",
            "--project",
            "p",
        ],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        dir.path().join("from-file").join("tocsin.sqlite3").exists(),
        "data_dir came from the file"
    );
}

/// `ingest` serving with `env` on a port of its own choosing.
struct Server {
    _service: Service,
    base: String,
}

impl Server {
    async fn start(env: &[(&str, String)]) -> Self {
        let mut env = env.to_vec();
        env.push(("INGEST_LISTEN", "127.0.0.1:0".into()));
        env.push(("INGEST_LOG_FORMAT", "json".into()));
        let (service, base) = process::start_ingest(&env).await;
        Self {
            _service: service,
            base,
        }
    }

    async fn post_event(&self, key: &str) -> u16 {
        let body = json!({ "channelName": "cli", "title": "from the binary" });
        process::post(&self.base, "/v1/events", key, &body).await.0
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keys_made_while_the_server_runs_work_at_once_and_revocation_holds_within_a_second() {
    let dir = tempfile::tempdir().expect("temp dir");
    let env = embedded(dir.path());
    let server = Server::start(&env).await;
    let created = run(
        &env,
        &["keys", "create", "--org", "acme", "--project", "web"],
    );
    let key = stdout(&created).trim().to_owned();
    assert_eq!(server.post_event(&key).await, 201);
    let listed = run(&env, &["keys", "list", "--json"]);
    let id =
        serde_json::from_str::<serde_json::Value>(stdout(&listed).lines().next().expect("a key"))
            .expect("JSON")["id"]
            .as_str()
            .expect("id")
            .to_owned();
    assert!(run(&env, &["keys", "revoke", &id]).status.success());
    // Another process's revocation holds within the key cache's bound.
    refused_within_bound(Instant::now(), async || server.post_event(&key).await).await;
}

// SIGTERM on the binary: shutdown.rs.

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn healthcheck_exits_zero_only_while_the_server_is_ready() {
    let dir = tempfile::tempdir().expect("temp dir");
    let server = Server::start(&embedded(dir.path())).await;
    let mut env = embedded(dir.path());
    env.push((
        "INGEST_LISTEN",
        server.base.trim_start_matches("http://").to_owned(),
    ));
    let ready = run(&env, &["healthcheck"]);
    assert!(ready.status.success(), "{}", stderr(&ready));
    drop(server);
    let gone = run(&env, &["healthcheck"]);
    assert!(!gone.status.success(), "healthy with no server");
    assert!(stderr(&gone).contains("connecting"), "{}", stderr(&gone));
}
