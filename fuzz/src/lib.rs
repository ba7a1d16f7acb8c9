//! The checks of Tocsin's fuzz targets, one module a target: each takes the
//! fuzzer's bytes, feeds them to the code that reads untrusted input, and
//! panics when an invariant breaks (libFuzzer reports a panic as a crash).
//! The targets in `fuzz_targets/` only call them; `cargo test` runs the
//! committed seeds through them as well ([`seeds`]). How to run a target,
//! longer or on a crash's input: `fuzz/README.md`.

pub mod cursor;
pub mod envelope;
pub mod headers;
pub mod query;
pub mod request_body;
pub mod service;
pub mod webpush;

#[cfg(test)]
mod seeds;
