//! The notifier's own small HTTP port: `/metrics` for Prometheus, `/healthz`
//! (the process is up) and `/readyz` (consuming from the broker and the
//! store answers), for orchestrators and the image's health check.

use std::{net::SocketAddr, sync::Arc};

use anyhow::Context as _;
use common::{metrics::Registry, queue::Readiness, store::Store};
use poem::{
    EndpointExt as _, IntoResponse, Response, Route, Server, get, handler,
    http::{StatusCode, header},
    listener::{Acceptor as _, Listener as _, TcpAcceptor, TcpListener},
    web::Data,
};

/// What the endpoints report on.
#[derive(Clone)]
pub struct Probe {
    pub registry: Arc<Registry>,
    pub store: Arc<dyn Store>,
    /// True while a consumer is attached to the notify queue.
    pub consuming: Readiness,
}

/// A bound listener: the port is known before serving starts (tests ask
/// for port 0).
pub struct Bound {
    acceptor: TcpAcceptor,
    pub addr: SocketAddr,
}

pub async fn bind(addr: SocketAddr) -> anyhow::Result<Bound> {
    let acceptor = TcpListener::bind(addr)
        .into_acceptor()
        .await
        .with_context(|| format!("binding the metrics port {addr}"))?;
    let addr = acceptor
        .local_addr()
        .first()
        .and_then(|a| a.as_socket_addr().copied())
        .context("the metrics listener has no address")?;
    Ok(Bound { acceptor, addr })
}

/// Serves until `stop` resolves.
pub async fn serve(
    bound: Bound,
    probe: Probe,
    stop: impl std::future::Future<Output = ()> + Send + 'static,
) {
    let app = Route::new()
        .at("/metrics", get(metrics))
        .at("/healthz", get(healthz))
        .at("/readyz", get(readyz))
        .data(probe);
    if let Err(e) = Server::new_with_acceptor(bound.acceptor)
        .run_with_graceful_shutdown(app, stop, None)
        .await
    {
        tracing::error!(error = %e, "the metrics port stopped");
    }
}

#[handler]
fn metrics(probe: Data<&Probe>) -> Response {
    common::metrics::render(&probe.registry)
        .with_content_type(common::metrics::CONTENT_TYPE)
        .with_header(header::CACHE_CONTROL, "no-store")
        .into_response()
}

#[handler]
fn healthz() -> &'static str {
    "ok"
}

#[handler]
async fn readyz(probe: Data<&Probe>) -> Response {
    if !probe.consuming.is_ready() {
        return "not consuming: the broker is not reachable"
            .with_status(StatusCode::SERVICE_UNAVAILABLE)
            .into_response();
    }
    match probe.store.ping().await {
        Ok(()) => "ok".into_response(),
        Err(e) => format!("the store does not answer: {e}")
            .with_status(StatusCode::SERVICE_UNAVAILABLE)
            .into_response(),
    }
}
