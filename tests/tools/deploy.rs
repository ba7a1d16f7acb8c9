//! The docker-compose stack and its images (`deploy/`). No container engine
//! runs where the tests run, so nothing is built or started: docker-compose
//! validates and resolves the compose file, and the resolved configuration is
//! checked against what the services actually read and what the stack
//! relies on. Docker Compose v2 is installed by `scripts/install-test-tools`
//! (or named by `DOCKER_COMPOSE`).

use std::{
    collections::BTreeMap,
    io::Write as _,
    net::SocketAddr,
    path::{Path, PathBuf},
    process::Command,
};

use serde_norway::Value;
use tocsin_tests::{test_tool, workspace_root};

const APNS_VARIABLES: [&str; 4] = ["APNS_KEY_PATH", "APNS_KEY_ID", "APNS_TEAM_ID", "APNS_TOPIC"];

fn deploy_file(name: &str) -> PathBuf {
    workspace_root().join("deploy").join(name)
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()))
}

/// The two passwords the stack refuses to start without, as deploy/README.md
/// has the operator append them to `.env`.
const PASSWORDS: &str = "MONGODB_PASSWORD=mongo-secret\nRABBITMQ_PASSWORD=rabbit-secret\n";

/// The example an operator copies, with the passwords appended.
fn example_env() -> String {
    format!("{}\n{PASSWORDS}", read(&deploy_file(".env.example")))
}

/// The env files the stack must work with: the example with the passwords,
/// and the passwords alone (a file of the test's own, so a developer's
/// deploy/.env is never what gets tested).
fn shipped_env_files() -> [(&'static str, String); 2] {
    [
        ("deploy/.env.example and the passwords", example_env()),
        ("the passwords alone", PASSWORDS.to_owned()),
    ]
}

/// `docker-compose config` on the stack with `env_file`'s contents: the
/// resolved configuration, or what docker-compose said on refusing it.
fn compose_config(env_file: &str) -> Result<Vec<u8>, String> {
    let mut file = tempfile::NamedTempFile::new().expect("temp file");
    file.write_all(env_file.as_bytes())
        .expect("env file written");
    // A clean environment: the shell's variables would take part in the
    // interpolation (MONGODB_URI is often set where these tests run).
    let output = Command::new(test_tool("DOCKER_COMPOSE", ".tools/compose/docker-compose"))
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .arg("--env-file")
        .arg(file.path())
        .arg("-f")
        .arg(deploy_file("docker-compose.yml"))
        .arg("config")
        .output()
        .unwrap_or_else(|e| {
            panic!("cannot run docker-compose ({e}): run scripts/install-test-tools")
        });
    if output.status.success() {
        Ok(output.stdout)
    } else {
        Err(String::from_utf8_lossy(&output.stderr).into_owned())
    }
}

/// The compose configuration as resolved with `env_file`'s contents.
struct Stack {
    config: Value,
    described: String,
}

impl Stack {
    fn resolve(described: &str, env_file: &str) -> Self {
        let resolved = compose_config(env_file).unwrap_or_else(|stderr| {
            panic!("docker-compose config rejects deploy/docker-compose.yml with {described}:\n{stderr}")
        });
        let config = serde_norway::from_slice(&resolved)
            .unwrap_or_else(|e| panic!("docker-compose config printed unreadable YAML ({e})"));
        Self {
            config,
            described: described.to_owned(),
        }
    }

    fn services(&self) -> impl Iterator<Item = (&str, &Value)> {
        self.config["services"]
            .as_mapping()
            .expect("a services mapping")
            .iter()
            .map(|(name, service)| (name.as_str().expect("service names are strings"), service))
    }

    fn service(&self, name: &str) -> &Value {
        let service = &self.config["services"][name];
        assert!(
            !service.is_null(),
            "no `{name}` service ({})",
            self.described
        );
        service
    }

    /// The service's environment; `None` for a variable listed without a
    /// value that nothing set, which the container does not get at all.
    fn environment(&self, name: &str) -> BTreeMap<String, Option<String>> {
        let Some(env) = self.service(name)["environment"].as_mapping() else {
            return BTreeMap::new();
        };
        env.iter()
            .map(|(key, value)| {
                let key = key.as_str().expect("variable names are strings").to_owned();
                let value = match value {
                    Value::Null => None,
                    Value::String(s) => Some(s.clone()),
                    other => Some(
                        serde_norway::to_string(other)
                            .expect("scalar")
                            .trim()
                            .to_owned(),
                    ),
                };
                (key, value)
            })
            .collect()
    }

    /// A service's volumes as (source, target), from the long form
    /// docker-compose prints: a named volume's source is its name.
    fn volumes(&self, name: &str) -> Vec<(String, String)> {
        let field = |volume: &Value, key: &str| volume[key].as_str().unwrap_or_default().to_owned();
        self.service(name)["volumes"]
            .as_sequence()
            .into_iter()
            .flatten()
            .map(|volume| (field(volume, "source"), field(volume, "target")))
            .collect()
    }

    /// The address a service is told to listen on, from its environment.
    fn listen(&self, service: &str, variable: &str) -> SocketAddr {
        let env = self.environment(service);
        let value = env
            .get(variable)
            .cloned()
            .flatten()
            .unwrap_or_else(|| panic!("{service} has no {variable} ({})", self.described));
        value
            .parse()
            .unwrap_or_else(|e| panic!("{service}'s {variable}={value:?} is not an address: {e}"))
    }
}

#[test]
fn services_get_only_variables_they_read_and_none_empty() {
    let readers = [
        ("ingest", ingest::Config::environment_variables()),
        ("notifier", notifier::Config::environment_variables()),
    ];
    for (described, env_file) in shipped_env_files() {
        let stack = Stack::resolve(described, &env_file);
        for (service, known) in &readers {
            for (variable, value) in stack.environment(service) {
                assert!(
                    known.contains(&variable),
                    "{service} is given {variable}, which it does not read ({described}); \
                     it reads: {}",
                    known.join(", ")
                );
                // Most settings take an empty value as a value (an empty
                // INGEST_LISTEN is refused); only the connection strings and
                // the APNs settings read blank as unset. Pass nothing instead.
                assert_ne!(
                    value.as_deref(),
                    Some(""),
                    "{service} is given an empty {variable} ({described}): list it without \
                     a value instead, so it is passed only when set"
                );
            }
        }
    }
}

#[test]
fn apns_settings_reach_the_notifiers_only_when_the_env_file_sets_them() {
    for (described, env_file) in shipped_env_files() {
        let stack = Stack::resolve(described, &env_file);
        let env = stack.environment("notifier");
        for variable in APNS_VARIABLES {
            assert_eq!(
                env.get(variable).cloned().flatten(),
                None,
                "with {described}, the notifier must not be given {variable} (logged pushes, \
                 not a half-configured APNs)"
            );
        }
    }

    let configured = format!(
        "{}\nAPNS_KEY_PATH=/run/secrets/tocsin/AuthKey_K.p8\nAPNS_KEY_ID=K\nAPNS_TEAM_ID=T\nAPNS_TOPIC=com.example.app\n",
        example_env()
    );
    let stack = Stack::resolve("the APNs settings filled in", &configured);
    let env = stack.environment("notifier");
    for (variable, expected) in APNS_VARIABLES.into_iter().zip([
        "/run/secrets/tocsin/AuthKey_K.p8",
        "K",
        "T",
        "com.example.app",
    ]) {
        assert_eq!(
            env.get(variable),
            Some(&Some(expected.to_owned())),
            "{variable} from the env file must reach the notifier"
        );
    }
    let key_dir = stack
        .volumes("notifier")
        .into_iter()
        .map(|(_, target)| target)
        .find(|target| target.starts_with("/run/secrets/"));
    assert_eq!(
        key_dir.as_deref(),
        Some("/run/secrets/tocsin"),
        "the notifier mounts the APNs key directory where .env.example's APNS_KEY_PATH points"
    );
}

/// Web Push and FCM are optional, as APNs is: passed only when the env
/// file sets them, and then to the service that reads each.
#[test]
fn web_push_and_fcm_settings_reach_their_services_only_when_set() {
    let notifier_vars = [
        "NOTIFIER_VAPID_PRIVATE_KEY",
        "NOTIFIER_VAPID_SUBJECT",
        "NOTIFIER_FCM_SERVICE_ACCOUNT",
    ];
    for (described, env_file) in shipped_env_files() {
        let stack = Stack::resolve(described, &env_file);
        let (notifier, ingest) = (stack.environment("notifier"), stack.environment("ingest"));
        for variable in notifier_vars {
            assert_eq!(
                notifier.get(variable).cloned().flatten(),
                None,
                "{variable} ({described})"
            );
        }
        assert_eq!(
            ingest.get("INGEST_VAPID_PUBLIC_KEY").cloned().flatten(),
            None,
            "{described}"
        );
    }
    let configured = format!(
        "{}\nNOTIFIER_VAPID_PRIVATE_KEY=priv\nNOTIFIER_VAPID_SUBJECT=mailto:ops@example.com\n\
         INGEST_VAPID_PUBLIC_KEY=pub\n\
         NOTIFIER_FCM_SERVICE_ACCOUNT=/run/secrets/tocsin/firebase.json\n",
        example_env()
    );
    let stack = Stack::resolve("the Web Push and FCM settings filled in", &configured);
    let notifier = stack.environment("notifier");
    for (variable, expected) in notifier_vars.into_iter().zip([
        "priv",
        "mailto:ops@example.com",
        "/run/secrets/tocsin/firebase.json",
    ]) {
        assert_eq!(
            notifier.get(variable),
            Some(&Some(expected.to_owned())),
            "{variable} from the env file must reach the notifier"
        );
    }
    assert_eq!(
        stack.environment("ingest").get("INGEST_VAPID_PUBLIC_KEY"),
        Some(&Some("pub".to_owned())),
        "ingest serves the public key"
    );
    let example = example_env();
    for variable in notifier_vars.into_iter().chain(["INGEST_VAPID_PUBLIC_KEY"]) {
        assert!(
            example.contains(&format!("# {variable}=")),
            ".env.example documents {variable}"
        );
    }
}

#[test]
fn the_stack_has_the_shape_it_relies_on() {
    let stack = Stack::resolve("deploy/.env.example", &example_env());

    for (name, service) in stack.services() {
        let test = service["healthcheck"]["test"].as_sequence();
        assert!(
            test.is_some_and(|t| !t.is_empty() && t[0] != "NONE")
                && service["healthcheck"]["disable"] != true,
            "{name} has no healthcheck: depends_on waits on health, and a stuck service \
             should show as unhealthy"
        );
        assert_eq!(
            service["restart"], "unless-stopped",
            "{name} restart policy"
        );
    }

    for service in ["ingest", "notifier"] {
        for dependency in ["mongodb", "rabbitmq"] {
            assert_eq!(
                stack.service(service)["depends_on"][dependency]["condition"],
                "service_healthy",
                "{service} must wait until {dependency} is healthy, not merely started"
            );
        }
    }

    let notifier = stack.service("notifier");
    assert!(
        notifier["ports"].as_sequence().is_none_or(Vec::is_empty),
        "notifier publishes ports, so `--scale notifier=N` would conflict: {:?}",
        notifier["ports"]
    );
    let replicas = notifier["deploy"]["replicas"].as_u64().unwrap_or(1);
    assert!(
        replicas >= 2,
        "the stack runs {replicas} notifier(s), want at least 2"
    );

    let named_volumes = stack.config["volumes"].as_mapping().expect("named volumes");
    let data = stack
        .volumes("mongodb")
        .into_iter()
        .find(|(_, target)| target == "/data/db");
    assert!(
        data.as_ref()
            .is_some_and(|(source, _)| named_volumes.contains_key(source.as_str())),
        "MongoDB's /data/db must be a named volume, or the events go with the container: {data:?}"
    );
}

/// The container ports a service publishes to the host.
fn published_ports(stack: &Stack, service: &str) -> Vec<u64> {
    stack.service(service)["ports"]
        .as_sequence()
        .into_iter()
        .flatten()
        .filter_map(|port| port["target"].as_u64())
        .collect()
}

/// What follows `directive` on each line of an nginx file that starts with it,
/// e.g. `listen 8080;` or `server ingest:8080 resolve;`.
fn nginx_directives(file: &str, directive: &str) -> Vec<String> {
    read(&deploy_file(file))
        .lines()
        .map(str::trim)
        .filter_map(|line| line.strip_prefix(directive)?.strip_prefix(' '))
        .map(|rest| rest.trim_end_matches(';').to_owned())
        .collect()
}

#[test]
fn ports_agree_between_services_healthchecks_and_prometheus() {
    let stack = Stack::resolve("deploy/.env.example", &example_env());
    let ingest = stack.listen("ingest", "INGEST_LISTEN");
    let notifier = stack.listen("notifier", "NOTIFIER_LISTEN");
    for (service, addr) in [("ingest", ingest), ("notifier", notifier)] {
        // Loopback inside a container is unreachable from the other
        // containers; the healthcheck subcommand asks a wildcard on loopback.
        assert!(
            addr.ip().is_unspecified(),
            "{service} listens on {addr}: inside a container it must listen on 0.0.0.0"
        );
    }

    // The replicas are reached through the balancer only: a published
    // ingest port would bypass the routing that keeps each key's quota.
    assert_eq!(
        published_ports(&stack, "ingest"),
        Vec::<u64>::new(),
        "ingest replicas publish no port"
    );
    assert_eq!(
        stack.environment("ingest")["INGEST_TRUST_FORWARDED_FOR"].as_deref(),
        Some("true"),
        "behind the balancer, the client's address is the X-Forwarded-For it sets"
    );
    assert_eq!(
        nginx_directives("nginx/replicas.conf", "server"),
        [format!("ingest:{} resolve", ingest.port())],
        "the balancer sends to every ingest replica, where it listens"
    );
    let balancer_listens = nginx_directives("nginx/tocsin.conf", "listen");
    assert_eq!(balancer_listens.len(), 1, "{balancer_listens:?}");
    assert_eq!(
        published_ports(&stack, "balancer"),
        [balancer_listens[0].parse::<u64>().expect("a port")],
        "the balancer publishes the port nginx listens on"
    );
    // nginx reads conf.d/*.conf, and tocsin.conf includes the replicas
    // relative to /etc/nginx.
    let mounts = stack.volumes("balancer");
    for (file, target) in [
        ("/nginx/tocsin.conf", "/etc/nginx/conf.d/default.conf"),
        ("/nginx/replicas.conf", "/etc/nginx/tocsin/replicas.conf"),
    ] {
        assert!(
            mounts
                .iter()
                .any(|(source, to)| source.ends_with(file) && to == target),
            "the balancer mounts deploy{file} as {target}: {mounts:?}"
        );
    }
    assert_eq!(
        nginx_directives("nginx/tocsin.conf", "include"),
        ["tocsin/replicas.conf"]
    );

    let prometheus: Value = serde_norway::from_str(&read(&deploy_file("prometheus.yml")))
        .expect("deploy/prometheus.yml is YAML");
    let job = |name: &str| {
        prometheus["scrape_configs"]
            .as_sequence()
            .into_iter()
            .flatten()
            .find(|job| job["job_name"] == name)
            .unwrap_or_else(|| panic!("prometheus.yml has no `{name}` job"))
            .clone()
    };
    for (service, addr) in [("ingest", ingest), ("notifier", notifier)] {
        let discovery = &job(service)["dns_sd_configs"][0];
        assert_eq!(
            discovery["names"][0], service,
            "every {service} replica, by DNS"
        );
        assert_eq!(discovery["type"], "A");
        assert_eq!(
            discovery["port"].as_u64(),
            Some(u64::from(addr.port())),
            "Prometheus scrapes each {service} where it listens"
        );
    }
}

#[test]
fn the_project_is_named_tocsin_with_or_without_the_example_settings() {
    // Named after the directory, the project would change name the day an
    // env file sets one, and come up as a new stack with empty volumes.
    for (described, env_file) in shipped_env_files() {
        let stack = Stack::resolve(described, &env_file);
        assert_eq!(stack.config["name"], "tocsin", "{described}");
    }
}

#[test]
fn the_stack_refuses_to_start_without_the_passwords() {
    let example = read(&deploy_file(".env.example"));
    let mongo = "MONGODB_PASSWORD=mongo-secret\n";
    let rabbit = "RABBITMQ_PASSWORD=rabbit-secret\n";
    // Compose stops at the first variable it cannot interpolate, and which
    // one it meets first is not fixed when both are missing.
    const BOTH: &[&str] = &["MONGODB_PASSWORD", "RABBITMQ_PASSWORD"];
    let refused: [(&str, String, &[&str]); 6] = [
        ("no env file", String::new(), BOTH),
        ("the example as shipped", example.clone(), BOTH),
        (
            "no RabbitMQ password",
            format!("{example}\n{mongo}"),
            &["RABBITMQ_PASSWORD"],
        ),
        (
            "no MongoDB password",
            format!("{example}\n{rabbit}"),
            &["MONGODB_PASSWORD"],
        ),
        (
            "an empty MongoDB password",
            format!("MONGODB_PASSWORD=\n{rabbit}"),
            &["MONGODB_PASSWORD"],
        ),
        (
            "an empty RabbitMQ password",
            format!("{mongo}RABBITMQ_PASSWORD=\n"),
            &["RABBITMQ_PASSWORD"],
        ),
    ];
    for (described, env_file, missing) in refused {
        let stderr = compose_config(&env_file)
            .err()
            .unwrap_or_else(|| panic!("the stack resolves with {described}"));
        assert!(
            missing.iter().any(|name| stderr.contains(name)) && stderr.contains("deploy/.env"),
            "with {described}, the refusal names one of {missing:?} and where to set it: {stderr}"
        );
    }

    let stack = Stack::resolve("deploy/.env.example and the passwords", &example_env());
    let (mongodb, rabbitmq) = (stack.environment("mongodb"), stack.environment("rabbitmq"));
    assert_eq!(
        mongodb["MONGO_INITDB_ROOT_PASSWORD"].as_deref(),
        Some("mongo-secret")
    );
    assert_eq!(
        rabbitmq["RABBITMQ_DEFAULT_PASS"].as_deref(),
        Some("rabbit-secret")
    );
    for service in ["ingest", "notifier"] {
        let env = stack.environment(service);
        let url = |name: &str| env[name].clone().unwrap_or_default();
        assert!(
            url("MONGODB_URI").contains(":mongo-secret@mongodb:"),
            "{service}"
        );
        assert!(
            url("AMQP_URL").contains(":rabbit-secret@rabbitmq:"),
            "{service}"
        );
    }
}

/// A Dockerfile stage: its base, its name, and its instructions.
struct Stage {
    base: String,
    name: Option<String>,
    instructions: Vec<(String, String)>,
}

fn stages(dockerfile: &str) -> Vec<Stage> {
    let mut stages: Vec<Stage> = Vec::new();
    for line in dockerfile.lines().map(str::trim) {
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let (instruction, rest) = line.split_once(' ').unwrap_or((line, ""));
        let instruction = instruction.to_uppercase();
        if instruction == "FROM" {
            let words: Vec<&str> = rest.split_whitespace().collect();
            stages.push(Stage {
                base: words.first().copied().unwrap_or_default().to_owned(),
                name: words
                    .iter()
                    .position(|w| w.eq_ignore_ascii_case("AS"))
                    .and_then(|i| words.get(i + 1))
                    .map(|name| (*name).to_owned()),
                instructions: Vec::new(),
            });
        } else if let Some(stage) = stages.last_mut() {
            stage
                .instructions
                .push((instruction, rest.trim().to_owned()));
        }
    }
    stages
}

#[test]
fn images_run_their_binary_as_nonroot_on_a_runtime_base() {
    let dockerfile = read(&deploy_file("Dockerfile"));
    let stages = stages(&dockerfile);
    let stack = Stack::resolve("deploy/.env.example", &example_env());
    for service in ["ingest", "notifier"] {
        let build = &stack.service(service)["build"];
        assert_eq!(
            build["dockerfile"], "deploy/Dockerfile",
            "{service}'s image"
        );
        assert_eq!(build["target"], service, "{service}'s build target");

        let stage = stages
            .iter()
            .find(|s| s.name.as_deref() == Some(service))
            .unwrap_or_else(|| panic!("deploy/Dockerfile has no `{service}` stage"));
        // Neither the toolchain image nor a stage built on it: the runtime
        // image carries no compiler, sources or cargo caches.
        assert!(
            !stage.base.contains("rust")
                && !stages
                    .iter()
                    .any(|s| s.name.as_deref() == Some(stage.base.as_str())),
            "the {service} image is based on {}, a build image",
            stage.base
        );
        let last = |instruction: &str| {
            stage
                .instructions
                .iter()
                .rev()
                .find(|(i, _)| i == instruction)
                .map(|(_, args)| args.as_str())
        };
        // Explicit, so the image does not depend on its base's default user.
        let user = last("USER").unwrap_or_else(|| panic!("the {service} stage sets no USER"));
        let user_name = user.split(':').next().unwrap_or(user);
        assert!(
            !matches!(user_name, "root" | "0"),
            "the {service} image runs as {user}"
        );
        let entrypoint: Vec<String> = serde_json::from_str(last("ENTRYPOINT").unwrap_or("[]"))
            .unwrap_or_else(|e| panic!("{service}'s ENTRYPOINT is not exec form: {e}"));
        let binary = format!("/usr/local/bin/{service}");
        assert_eq!(
            entrypoint,
            std::slice::from_ref(&binary),
            "{service}'s ENTRYPOINT"
        );
        assert_eq!(
            stack.service(service)["healthcheck"]["test"],
            serde_norway::to_value(["CMD", binary.as_str(), "healthcheck"]).expect("value"),
            "{service}'s healthcheck runs the image's own binary"
        );
    }
}
