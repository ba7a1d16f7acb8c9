//! Tocsin ingest: the HTTP API that records events and identities.
//!
//! [`server`] accepts connections and hands requests to the middleware. A
//! request passes, outermost first: [`request_id`] (id, logging, error
//! envelope) → [`gate`] (authentication and rate limits) → [`header_limit`]
//! → [`body_limit`] → [`allow`] (`Allow` on a 405) → [`idempotency`] → the
//! handlers in [`api`], whose bodies are checked by [`validation`] against
//! the schemas [`openapi`] publishes.

pub mod allow;
pub mod api;
pub mod auth;
pub mod body_limit;
pub mod cli;
pub mod config;
pub mod error;
pub mod gate;
pub mod header_limit;
pub mod idempotency;
pub mod metrics;
pub mod openapi;
pub mod outbox;
pub mod rate_limit;
pub mod request_id;
pub mod routes;
pub mod server;
pub mod startup;
pub mod state;
pub mod types;
pub mod validation;

pub use config::Config;
pub use startup::Application;
