//! For the fuzz targets in `fuzz/` only: not an API, hidden from the docs,
//! and free to change with the targets. The code that reads untrusted bytes
//! is private to its modules; these thin wrappers let the targets reach it
//! without making each piece public on its own.
//!
//! [`Api`] is the whole service in-process, for the targets that send
//! requests the way a client does; the functions below it are the parsers
//! of single values (a cursor, a header).

use std::{num::NonZeroU32, path::Path, sync::Arc};

use common::{
    keys::SecretKind,
    queue::{self, JobConsumer},
    store::{EventPosition, Scope, SqliteSync},
};
use poem::{
    Endpoint as _, Request,
    http::{HeaderMap, HeaderValue, Method, Uri, header},
};

use crate::{Application, Config, api::cursor, auth, compose, idempotency};

/// The deepest nesting a body may have (a limit the schema cannot state).
pub use crate::validation::MAX_DEPTH;

/// What the service answered.
#[derive(Debug)]
pub struct Answer {
    pub status: u16,
    pub body: Vec<u8>,
}

/// The API as the `ingest` binary builds it in embedded mode
/// ([`Application::build`]), on a SQLite store in the caller's directory,
/// with one API key whose secret every request carries. Requests go to
/// its endpoint directly, without a socket: the listener is bound to a
/// loopback port and never served. Its runtime has one thread, so a
/// request and the background tasks it wakes run inside each call.
pub struct Api {
    app: Application,
    bearer: HeaderValue,
    // Dropped last: the application's tasks and listener belong to it.
    runtime: tokio::runtime::Runtime,
}

impl Api {
    /// Opens the store in `data_dir` and starts the API on it. No limit a
    /// fuzzer's request rate would reach: every quota is the largest.
    pub fn start(data_dir: &Path) -> anyhow::Result<Self> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        let mut config = Config::defaults();
        config.listen = "127.0.0.1:0".into();
        config.backend.data_dir = data_dir.to_path_buf();
        // What is fuzzed is what a request is made of, not its durability:
        // no fsync on every accepted event.
        config.backend.sqlite_synchronous = SqliteSync::Normal;
        config.rate_limit_per_minute = NonZeroU32::MAX;
        config.auth_failures_per_minute = NonZeroU32::MAX;
        config.admin_auth_failures_per_minute = NonZeroU32::MAX;
        config.anonymous_rate_limit_per_minute = NonZeroU32::MAX;
        let (app, secret) = runtime.block_on(async {
            let store = compose::open_store(&config).await?;
            let secret =
                crate::cli::create_key(store.as_ref(), Scope::new("fuzz", "fuzz"), None, None)
                    .await?;
            // The embedded mode's queue; its jobs are taken and dropped, as
            // a worker with no devices to notify would.
            let (producer, consumer) = queue::open(&config.backend.queue());
            tokio::spawn(drain(consumer));
            let app = Application::build(
                config,
                store,
                producer,
                common::metrics::registry(),
                // The fuzzer's server never sends anywhere.
                Arc::new(common::embedded::NoTester),
            )
            .await?;
            anyhow::Ok((app, secret))
        })?;
        Ok(Self {
            app,
            bearer: HeaderValue::try_from(format!("Bearer {secret}"))?,
            runtime,
        })
    }

    /// `POST path` with `body` as `application/json`.
    pub fn post_json(&self, path: &str, body: &[u8]) -> Answer {
        let request = Request::builder()
            .method(Method::POST)
            .uri_str(path)
            .content_type("application/json")
            .body(body.to_vec());
        self.call(request)
    }

    /// `GET uri` (a path and a query); `None` for a string that is no
    /// request target, which the HTTP server would refuse before the API.
    pub fn get(&self, uri: &str) -> Option<Answer> {
        let uri: Uri = uri.parse().ok()?;
        Some(self.call(Request::builder().method(Method::GET).uri(uri).finish()))
    }

    fn call(&self, mut request: Request) -> Answer {
        request
            .headers_mut()
            .insert(header::AUTHORIZATION, self.bearer.clone());
        self.runtime.block_on(async {
            let response = self.app.endpoint().get_response(request).await;
            let status = response.status().as_u16();
            // A live stream never ends: its body is left unread.
            if response
                .content_type()
                .is_some_and(|t| t.starts_with("text/event-stream"))
            {
                return Answer {
                    status,
                    body: Vec::new(),
                };
            }
            // A body that fails to read is no answer a client could use.
            let body = response.into_body().into_vec().await.unwrap_or_default();
            Answer { status, body }
        })
    }
}

async fn drain(mut consumer: Box<dyn JobConsumer>) {
    while let Some(received) = consumer.next().await {
        let _ = received.acker.ack().await;
    }
}

/// The position a listing's `cursor` names ([`cursor::decode`]).
pub fn decode_cursor(text: &str) -> Option<EventPosition> {
    cursor::decode(text)
}

/// The cursor naming `position` ([`cursor::encode`]).
pub fn encode_cursor(position: EventPosition) -> String {
    cursor::encode(position)
}

/// What [`idempotency::key_of`] makes of a request with this
/// `Idempotency-Key` value: the key it claims (`None` would mean the header
/// went unseen), or the refusal's message.
pub fn idempotency_key(value: HeaderValue) -> Result<Option<String>, String> {
    let request = Request::builder()
        .header(idempotency::HEADER, value)
        .finish();
    idempotency::key_of(&request).map_err(|e| e.to_string())
}

/// The bearer secret `headers` present to a route taking `kind`, or the
/// refusal's message.
pub fn presented_secret(headers: &HeaderMap, kind: SecretKind) -> Result<&str, &'static str> {
    auth::presented(headers, kind).map_err(|e| e.message())
}

/// The check of the `emoji` format in the published schemas: one emoji,
/// or a shortcode of one.
pub fn is_icon(text: &str) -> bool {
    crate::types::is_icon(text)
}

/// An icon as the service stores it: a shortcode becomes its emoji.
pub fn icon_as_stored(icon: &str) -> String {
    crate::types::emoji_of_shortcode(icon).map_or_else(|| icon.to_owned(), str::to_owned)
}

/// Whether an event body that the schema accepts is still refused by a
/// rule no schema states: a `url` that is no URL a browser can open, or a
/// `timestamp` after now (the fuzz service keeps every event: no
/// retention). Asked before the request is sent, a time in the future
/// then is in the future when the service looks.
pub fn event_refused_beyond_schema(body: &serde_json::Value) -> bool {
    use poem_openapi::types::ParseFromJSON as _;
    let bad_url = body
        .get("url")
        .and_then(serde_json::Value::as_str)
        .is_some_and(|url| crate::api::events::check_url(url).is_err());
    let future = body.get("timestamp").is_some_and(|t| {
        crate::types::EventTime::parse_from_json(Some(t.clone()))
            .is_ok_and(|t| t.0 > common::time::now())
    });
    bad_url || future
}
