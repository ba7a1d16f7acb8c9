//! End-to-end tests: the real ingest on a random port, against a real
//! SQLite file and a real MongoDB-compatible server.

mod auth;
mod connections;
mod deploy;
mod devices;
mod docs;
mod errors;
mod events;
mod faults;
mod fuzz;
mod idempotency;
mod identify;
mod logs;
mod metrics;
mod notify;
mod openapi;
mod protocol;
mod queue_contract;
mod rate_limit;
mod recovery;
mod shutdown;
mod store_contract;
mod validation;
