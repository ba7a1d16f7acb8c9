//! The tier that needs outside tools, installed by
//! `scripts/install-test-tools`: headless Chromium, Docker Compose v2, the
//! Python OpenAPI 3.1 validator and schemathesis, nginx, wrk (the benchmark's
//! smoke run); and cargo itself, for the services' dependency tree.
//! `cargo test -p tocsin-tests --test tools`.

mod balancer;
mod bench;
mod browser;
mod dashboard;
mod dependencies;
mod deploy;
mod docs;
mod feed;
mod feed_alerts;
mod feed_content;
mod feed_insights;
mod feed_rules;
mod feed_users;
mod fuzz;
mod openapi;
mod standins;
