//! The APNs push provider: builds the request for an alert so that it fits
//! Apple's payload limit (`message`), sends it through a2 with token (.p8)
//! authentication ([`ApnsProvider`], in `provider`), and maps Apple's answer
//! to a [`PushOutcome`](super::PushOutcome) (`outcome`).
//!
//! Secrets stay inside: the .p8 key, the provider token (JWT) a2 signs with
//! it and device tokens never reach `Debug` output or a log line.

#[cfg(test)]
mod fixtures;
mod message;
mod outcome;
mod provider;

pub use provider::{ApnsConfig, ApnsProvider};
