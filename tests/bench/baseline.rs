//! The benchmark's baseline (tests/bench/run.sh): a bare poem server that
//! does what `POST /v1/events` cannot do without — parse the same JSON body
//! into a typed struct, make a v7 UUID, answer a 201 envelope — and
//! nothing else: no authentication, validation, rate limit or store. It is
//! the framework's ceiling that the benchmark measures ingest against.
//!
//! `POST /v1/events` is that; `POST /v1/events/sqlite` also inserts the
//! event into a SQLite file, one insert per request on one connection in WAL
//! mode (tokio-rusqlite, as ingest's embedded store), which is what one
//! commit per request costs on this disk. `POST /v1/events/store` records
//! the event with Tocsin's own embedded store instead (`common::store`, as
//! ingest opens it: group commit, `synchronous=full`, every index the read
//! side needs) and answers once the write is durable: the framework and the
//! store together, without anything of ingest's request pipeline, so the
//! benchmark can tell the store's share of ingest's cost from the rest.
//!
//!   bench-baseline LISTEN_ADDR DATA_DIR [SYNCHRONOUS=normal] [STORE_SYNCHRONOUS=full]
//!
//! SYNCHRONOUS is the SQLite route's setting, STORE_SYNCHRONOUS the
//! store's (`full`, ingest's default, or `normal`).
//!
//! Prints `listening <addr>` on stdout once it accepts connections.

use std::{collections::BTreeMap, sync::Arc, time::Duration};

use common::store::{Event, NotificationState, Scope, SqliteSync, Store, StoreConfig};

use poem::{
    Body, EndpointExt, Response, Route, Server, handler,
    http::StatusCode,
    listener::{Acceptor, Listener, TcpListener},
    post,
    web::Data,
};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use uuid::Uuid;

/// The body the benchmark sends, with ingest's field names.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[allow(dead_code)] // parsed for its cost; only some fields are answered
struct EventIn {
    channel_name: String,
    title: String,
    description: Option<String>,
    icon: Option<String>,
    tags: Option<Vec<String>>,
    metadata: Option<BTreeMap<String, Value>>,
    user_id: Option<String>,
    notify: Option<bool>,
    source: Option<String>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct EventOut {
    id: Uuid,
    channel_name: String,
    title: String,
    tags: Vec<String>,
    metadata: BTreeMap<String, Value>,
    created_at: String,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Envelope {
    success: bool,
    data: EventOut,
    request_id: Uuid,
}

/// The parse and the envelope, shared by both routes.
#[allow(clippy::result_large_err)] // the refusal is the response itself, made once
fn accept(body: &[u8]) -> Result<EventOut, Response> {
    let input = parse(body)?;
    Ok(EventOut {
        id: Uuid::now_v7(),
        channel_name: input.channel_name,
        title: input.title,
        tags: input.tags.unwrap_or_default(),
        metadata: input.metadata.unwrap_or_default(),
        created_at: chrono::Utc::now().to_rfc3339(),
    })
}

/// The body as the benchmark's typed struct, or the 400 that refuses it.
#[allow(clippy::result_large_err)] // the refusal is the response itself, made once
fn parse(body: &[u8]) -> Result<EventIn, Response> {
    serde_json::from_slice(body).map_err(|e| bad_request(&e))
}

fn bad_request(e: &serde_json::Error) -> Response {
    Response::builder()
        .status(StatusCode::BAD_REQUEST)
        .body(e.to_string())
}

fn created(event: EventOut) -> Response {
    let envelope = Envelope {
        success: true,
        data: event,
        request_id: Uuid::now_v7(),
    };
    Response::builder()
        .status(StatusCode::CREATED)
        .content_type("application/json")
        .body(serde_json::to_vec(&envelope).unwrap_or_default())
}

#[handler]
async fn bare(body: Body) -> Response {
    let Ok(bytes) = body.into_bytes().await else {
        return StatusCode::BAD_REQUEST.into();
    };
    match accept(&bytes) {
        Ok(event) => created(event),
        Err(refused) => refused,
    }
}

#[handler]
async fn with_sqlite(body: Body, db: Data<&Arc<tokio_rusqlite::Connection>>) -> Response {
    let Ok(bytes) = body.into_bytes().await else {
        return StatusCode::BAD_REQUEST.into();
    };
    let event = match accept(&bytes) {
        Ok(event) => event,
        Err(refused) => return refused,
    };
    let row = (
        event.id.to_string(),
        event.channel_name.clone(),
        event.title.clone(),
        String::from_utf8_lossy(&bytes).into_owned(),
        event.created_at.clone(),
    );
    let inserted = db
        .call(move |c| {
            c.execute(
                "INSERT INTO events (id, channel_name, title, body, created_at) VALUES (?1, ?2, ?3, ?4, ?5)",
                row,
            )
        })
        .await;
    match inserted {
        Ok(_) => created(event),
        Err(e) => Response::builder()
            .status(StatusCode::SERVICE_UNAVAILABLE)
            .body(e.to_string()),
    }
}

#[handler]
async fn with_store(body: Body, store: Data<&Arc<dyn Store>>) -> Response {
    let Ok(bytes) = body.into_bytes().await else {
        return StatusCode::BAD_REQUEST.into();
    };
    let input = match parse(&bytes) {
        Ok(input) => input,
        Err(refused) => return refused,
    };
    let event = Event {
        id: Uuid::now_v7(),
        scope: Scope::new("bench", "bench"),
        channel_name: input.channel_name,
        title: input.title,
        description: input.description,
        icon: input.icon,
        tags: input.tags.unwrap_or_default(),
        metadata: input.metadata.unwrap_or_default().into_iter().collect(),
        user_id: input.user_id,
        notify: false,
        source: input.source,
        priority: Default::default(),
        alert_key: None,
        parser: common::store::Parser::Text,
        url: None,
        created_at: chrono::Utc::now(),
        notification: NotificationState::Skipped,
        request_id: None,
        notification_due_at: None,
    };
    if let Err(e) = store.insert_event(&event).await {
        return Response::builder()
            .status(StatusCode::SERVICE_UNAVAILABLE)
            .body(e.to_string());
    }
    created(EventOut {
        id: event.id,
        channel_name: event.channel_name,
        title: event.title,
        tags: event.tags,
        metadata: event.metadata.into_iter().collect(),
        created_at: event.created_at.to_rfc3339(),
    })
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let mut args = std::env::args().skip(1);
    let usage =
        "usage: bench-baseline LISTEN_ADDR DATA_DIR [SYNCHRONOUS=normal] [STORE_SYNCHRONOUS=full]";
    let listen = args.next().ok_or_else(|| anyhow::anyhow!(usage))?;
    let dir = args.next().ok_or_else(|| anyhow::anyhow!(usage))?;
    let synchronous = args.next().unwrap_or_else(|| "normal".into());
    let store_synchronous: SqliteSync = match args.next().as_deref() {
        None | Some("full") => SqliteSync::Full,
        Some("normal") => SqliteSync::Normal,
        Some(other) => anyhow::bail!("STORE_SYNCHRONOUS is full or normal, not {other}; {usage}"),
    };

    std::fs::create_dir_all(&dir)?;
    let db = tokio_rusqlite::Connection::open(std::path::Path::new(&dir).join("baseline.sqlite3"))
        .await?;
    db.call(move |c| {
        c.pragma_update(None, "journal_mode", "WAL")?;
        c.pragma_update(None, "synchronous", &synchronous)?;
        c.execute_batch(
            "CREATE TABLE IF NOT EXISTS events (
                id TEXT PRIMARY KEY, channel_name TEXT NOT NULL, title TEXT NOT NULL,
                body TEXT NOT NULL, created_at TEXT NOT NULL)",
        )
    })
    .await?;

    let store = common::store::open(
        &StoreConfig::Sqlite {
            path: std::path::Path::new(&dir).join("tocsin.sqlite3"),
            synchronous: store_synchronous,
        },
        Duration::from_secs(5),
    )
    .await?;

    let app = Route::new()
        .at("/v1/events", post(bare))
        .at("/v1/events/sqlite", post(with_sqlite))
        .at("/v1/events/store", post(with_store).data(store))
        .data(Arc::new(db));
    let acceptor = TcpListener::bind(listen).into_acceptor().await?;
    for addr in acceptor.local_addr() {
        println!("listening {addr}");
    }
    Server::new_with_acceptor(acceptor).run(app).await?;
    Ok(())
}
