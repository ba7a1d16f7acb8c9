//! End-to-end tests: the real ingest on a random port, against a real
//! SQLite file and a real MongoDB-compatible server.

mod auth;
mod devices;
mod errors;
mod events;
mod idempotency;
mod identify;
mod metrics;
mod notify;
mod openapi;
mod rate_limit;
mod store_contract;
mod validation;
