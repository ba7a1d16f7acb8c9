//! Tocsin ingest: the HTTP API that records events and identities.
//!
//! [`server`] accepts connections and hands requests to the middleware. A
//! request passes, outermost first: [`request_id`] (id, logging, error
//! envelope) → [`cors`] (browsers' preflights, answered before any key is
//! asked for) → [`auth`] (who is calling) → [`rate_limit`] (the caller's
//! quota) → [`scope`] (what the key may do) → [`header_limit`]
//! → [`body_limit`] → [`allow`] (`Allow` on a 405) → [`idempotency`] →
//! [`query`] (unknown and unparsable query parameters) → the
//! handlers in [`api`], whose bodies are checked by [`validation`] against
//! the schemas [`openapi`] publishes. [`routes`] is the one rule for which
//! routes need a key (or, under `/admin/v1`, an admin token: [`admin`] is
//! the admin API) and take an `Idempotency-Key`. [`pages`] serves the
//! browser pages: the feed at `/` (a client of the read API) and the
//! dashboard at `/dashboard` (a client of the admin API).
//!
//! Beside the requests, background tasks: the [`outbox`] relay, the [`tail`]
//! that live streams follow (what every replica records), and
//! [`retention`].
//!
//! [`compose`] puts a process together (store, queue pair, the API and, in
//! embedded mode, a worker on the other end of an in-process queue); the
//! binary and the tests both build the service through it. The library
//! knows nothing of the notifier: the embedded worker is an argument
//! ([`common::embedded::EmbeddedWorker`]). [`Application::build`] takes a
//! store, a queue producer (the [`outbox`] publishes each event's job to it)
//! and a metrics registry.

mod admin;
mod allow;
mod api;
mod audit;
mod auth;
mod body_limit;
pub mod cli;
pub mod compose;
pub mod config;
mod cors;
mod error;
#[doc(hidden)]
pub mod fuzzing;
mod header_limit;
mod idempotency;
mod key_cache;
mod last_used;
mod metrics;
mod openapi;
mod outbox;
mod pages;
mod query;
mod rate_limit;
mod record;
mod request_id;
mod retention;
mod routes;
mod scope;
mod server;
pub mod startup;
mod state;
mod tail;
mod types;
mod validation;

pub use config::Config;
pub use startup::Application;
