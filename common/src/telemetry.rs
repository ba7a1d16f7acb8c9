//! Logging set-up shared by both services: JSON lines in production,
//! readable lines in a terminal.
//!
//! In JSON, every field of every enclosing span is lifted to the top level
//! of the line (json-subscriber), so a request's `requestId`, set once on
//! the request's span in ingest and on the job's span in the notifier, is a
//! plain top-level field of every line the request causes: filter by it to
//! follow one event from the API call through its job to each push.
//!
//! An error is logged with its causes ([`chain`]): `error = %chain(&e)`.

use std::io::IsTerminal as _;

use serde::Deserialize;
use tracing::Subscriber;
use tracing_subscriber::{EnvFilter, Layer, fmt, prelude::*, registry::LookupSpan};

/// How log lines are written.
#[derive(Debug, Clone, Copy, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum LogFormat {
    /// JSON when stderr is not a terminal, readable text when it is.
    #[default]
    Auto,
    Json,
    Pretty,
}

/// Installs the global subscriber. The filter comes from `RUST_LOG`
/// (default `info`). Safe to call more than once: later calls do nothing.
pub fn init(format: LogFormat) {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    let json = match format {
        LogFormat::Json => true,
        LogFormat::Pretty => false,
        LogFormat::Auto => !std::io::stderr().is_terminal(),
    };
    let registry = tracing_subscriber::registry().with(filter);
    let result = if json {
        registry.with(json_layer(std::io::stderr)).try_init()
    } else {
        registry
            .with(fmt::layer().with_writer(std::io::stderr))
            .try_init()
    };
    drop(result);
}

/// The JSON lines layer, writing to `writer` (tests capture it).
pub fn json_layer<S, W>(writer: W) -> impl Layer<S>
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    W: for<'w> fmt::MakeWriter<'w> + Send + Sync + 'static,
{
    json_subscriber::layer()
        .with_writer(writer)
        .flatten_event(true)
        .with_current_span(false)
        .with_span_list(false)
        .flatten_span_list_on_top_level(true)
}

/// Shows `error` with each of its causes, outermost first, separated by
/// `: ` (as anyhow's `{:#}` does): for a log field, `error = %chain(&e)`,
/// so the cause an error keeps as its source reaches the log line.
pub fn chain<'a>(error: &'a (dyn std::error::Error + 'static)) -> impl std::fmt::Display + 'a {
    Chain(error)
}

struct Chain<'a>(&'a (dyn std::error::Error + 'static));

impl std::fmt::Display for Chain<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for (i, cause) in anyhow::Chain::new(self.0).enumerate() {
            if i > 0 {
                f.write_str(": ")?;
            }
            write!(f, "{cause}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod chain_tests {
    #[derive(Debug, thiserror::Error)]
    #[error("publishing failed")]
    struct Outer(#[source] std::io::Error);

    #[test]
    fn an_error_is_shown_with_its_causes() {
        let err = Outer(std::io::Error::other("connection reset"));
        assert_eq!(
            super::chain(&err).to_string(),
            "publishing failed: connection reset"
        );
    }
}
