//! What Tocsin's ingest and notifier share: configuration loading (with the
//! store and broker settings both read), ids and clocks, API key secrets,
//! telemetry, the shutdown signal, the job queue pair and the storage
//! interface with its MongoDB and SQLite implementations.

pub mod config;
pub mod endpoint;
pub mod jobs;
pub mod keys;
pub mod metrics;
pub mod probe;
pub mod queue;
pub mod shutdown;
pub mod store;
pub mod telemetry;
pub mod time;
