//! The tier that runs the built `ingest` and `notifier` binaries as
//! processes (tests/process.rs): the command line, what reaches the logs,
//! SIGTERM, and kill -9 mid-burst. Build them first:
//! `cargo build --workspace && cargo test -p tocsin-tests --test binaries`.

mod admin;
mod cli;
mod destinations;
mod faults;
mod held;
mod insights;
mod logs;
mod shutdown;
