//! The fast tier of the end-to-end tests: ingest and the notifier built
//! in-process by the test library, on a random port, against a real SQLite
//! file, a real MongoDB-compatible server and the real RabbitMQ. Nothing
//! beyond those servers is needed: `cargo test -p tocsin-tests --test
//! in_process`.

mod admin;
mod admin_auth;
mod auth;
mod batched_notifier;
mod connections;
mod cors;
mod delivery_batches;
mod destinations;
mod devices;
mod errors;
mod events;
mod fcm;
mod group_commit;
mod held;
mod history;
mod idempotency;
mod identify;
mod insights;
mod key_cache;
mod layout;
mod messages;
mod metrics;
mod mongo_group_commit;
mod notify;
mod openapi;
mod pages;
mod protocol;
mod queue_contract;
mod rate_limit;
mod reading;
mod recovery;
mod rules;
mod rules_contract;
mod scopes;
mod store_contract;
mod stream;
mod users;
mod validation;
mod webpush;
