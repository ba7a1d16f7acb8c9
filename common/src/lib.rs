//! What Tocsin's ingest and notifier share: configuration loading (with the
//! store and broker settings both read), ids and clocks, API key secrets,
//! telemetry, the shutdown signal, the job queue pair, the storage
//! interface with its MongoDB and SQLite implementations, what a Web Push
//! subscription's keys must be, and the seam
//! through which ingest runs a notifier in its own process ([`embedded`]).

pub mod config;
pub mod destination;
pub mod embedded;
pub mod endpoint;
pub mod jobs;
pub mod keys;
pub mod markdown;
pub mod metrics;
pub mod probe;
pub mod queue;
pub mod rules;
pub mod sealed;
pub mod shutdown;
pub mod store;
pub mod telemetry;
pub mod time;
pub mod webpush_keys;
