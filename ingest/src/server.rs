//! The HTTP server under the poem endpoint: owns the listening socket, the
//! cap on open connections, each connection's header-read and idle
//! timeouts, and graceful shutdown.
//!
//! poem's own `Server` gives hyper no timer, so a client that trickles its
//! header or never sends one holds a connection (and a task) forever. This
//! loop serves the same endpoint with hyper-util's `auto::Builder` (HTTP/1.1
//! and h2c, as poem does) and watches every connection:
//!
//! - from accept until the first request, and from a request's first byte
//!   until its header is complete, the client has `header_read_timeout`;
//! - between requests on a kept-alive connection it has `idle_timeout`,
//!   which is longer than a fronting proxy's keep-alive so that the proxy,
//!   not us, closes an idle upstream connection (closing it from both ends
//!   at once races with a request the proxy is sending on it);
//! - while a request is being handled or answered, no timeout applies.
//!
//! hyper's own `header_read_timeout` is not used: it starts as soon as a
//! connection goes idle, so it would also cut kept-alive connections at the
//! header timeout. An HTTP/2 connection's control frames between requests
//! count as the start of a request, so an idle h2c connection that pings is
//! closed after the header timeout rather than the idle one.
//!
//! At `max_connections` the loop stops accepting: new connections wait in
//! the kernel's listen backlog until one closes (as nginx does at
//! `worker_connections`), instead of being accepted only to be refused.

mod activity;
mod unparsed;

use std::{convert::Infallible, future::Future, io, net::SocketAddr, sync::Arc, time::Duration};

use bytes::Bytes;
use http_body_util::combinators::BoxBody;
use hyper::body::Incoming;
use hyper_util::{
    rt::{TokioExecutor, TokioIo},
    server::conn::auto,
};
use poem::{
    Addr, Endpoint, Request, Response,
    endpoint::BoxEndpoint,
    http::uri::Scheme,
    web::{LocalAddr, RemoteAddr},
};
use prometheus_client::metrics::gauge::Gauge;
use tokio::{
    net::{TcpListener, TcpStream},
    sync::{OwnedSemaphorePermit, Semaphore},
    time::Instant,
};
use tokio_util::{sync::CancellationToken, task::TaskTracker};

use activity::{Activity, InFlight, Tracked, Watched};

use crate::header_limit::HeaderLimits;

/// How the server treats connections; see `config.default.toml`.
#[derive(Debug, Clone, Copy)]
pub struct Settings {
    pub header_read_timeout: Duration,
    pub idle_timeout: Duration,
    pub max_connections: usize,
    /// hyper's own ceilings on a request head, set above the limits the
    /// `header_limit` middleware enforces so that it, not hyper, answers
    /// (with the error envelope) in between.
    pub hyper_max_headers: usize,
    pub hyper_max_header_bytes: usize,
    /// The middleware's limits, which a 431 of hyper's also names once it
    /// is rewritten into the envelope ([`unparsed`]).
    pub header_limits: HeaderLimits,
    /// Time in-flight requests get after shutdown begins.
    pub grace: Duration,
}

type App = Arc<BoxEndpoint<'static, Response>>;

/// Serves `app` on `listener` until `shutdown` resolves; then stops
/// accepting, lets open connections finish their requests for up to
/// `settings.grace`, and closes what is left.
pub async fn serve(
    listener: TcpListener,
    app: App,
    settings: Settings,
    open_connections: Gauge,
    shutdown: impl Future<Output = ()>,
) {
    let local = match listener.local_addr() {
        Ok(addr) => LocalAddr(Addr::from(addr)),
        Err(_) => LocalAddr(Addr::Custom("tcp", "unknown".into())),
    };
    let slots = Arc::new(Semaphore::new(settings.max_connections));
    let connections = TaskTracker::new();
    let draining = CancellationToken::new();
    let closing = CancellationToken::new();
    tokio::pin!(shutdown);
    loop {
        // A free slot first: at the cap nothing is accepted, and the kernel
        // keeps newcomers in the backlog.
        let slot = tokio::select! {
            () = &mut shutdown => break,
            slot = Arc::clone(&slots).acquire_owned() => match slot {
                Ok(slot) => slot,
                Err(_) => break,
            },
        };
        let (stream, remote) = tokio::select! {
            () = &mut shutdown => break,
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(e) => {
                    accept_failed(&e).await;
                    continue;
                }
            },
        };
        let _ = stream.set_nodelay(true);
        let connection = Connection {
            app: Arc::clone(&app),
            settings,
            local: local.clone(),
            remote,
            draining: draining.clone(),
            closing: closing.clone(),
            _open: Open::new(open_connections.clone(), slot),
        };
        connections.spawn(connection.serve(stream));
    }
    // Dropping the listener refuses new connections from here on.
    drop(listener);
    draining.cancel();
    connections.close();
    if tokio::time::timeout(settings.grace, connections.wait())
        .await
        .is_err()
    {
        tracing::warn!("grace period over: closing the connections still open");
        closing.cancel();
        connections.wait().await;
    }
}

/// Accept errors are mostly about one connection (reset before accept);
/// running out of file descriptors is not, and retrying at once would spin.
async fn accept_failed(e: &io::Error) {
    use io::ErrorKind::{ConnectionAborted, ConnectionRefused, ConnectionReset};
    if !matches!(
        e.kind(),
        ConnectionAborted | ConnectionRefused | ConnectionReset
    ) {
        tracing::warn!(error = %e, "accepting a connection failed");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// One open connection: counted in the gauge and holding a slot until
/// dropped.
struct Open {
    gauge: Gauge,
    _slot: OwnedSemaphorePermit,
}

impl Open {
    fn new(gauge: Gauge, slot: OwnedSemaphorePermit) -> Self {
        gauge.inc();
        Self { gauge, _slot: slot }
    }
}

impl Drop for Open {
    fn drop(&mut self) {
        self.gauge.dec();
    }
}

struct Connection {
    app: App,
    settings: Settings,
    local: LocalAddr,
    remote: SocketAddr,
    draining: CancellationToken,
    closing: CancellationToken,
    _open: Open,
}

impl Connection {
    async fn serve(self, stream: TcpStream) {
        let activity = Arc::new(Activity::new());
        let io = TokioIo::new(Watched::new(
            stream,
            Arc::clone(&activity),
            self.settings.header_limits,
        ));
        let local = self.local.clone();
        let remote = RemoteAddr(Addr::from(self.remote));
        let (app, served) = (Arc::clone(&self.app), Arc::clone(&activity));
        let service = hyper::service::service_fn(move |req: hyper::Request<Incoming>| {
            let (app, local, remote) = (Arc::clone(&app), local.clone(), remote.clone());
            let in_flight = InFlight::start(Arc::clone(&served));
            async move {
                let req = Request::from((req, local, remote, Scheme::HTTP));
                let response: hyper::Response<BoxBody<Bytes, io::Error>> =
                    app.get_response(req).await.into();
                Ok::<_, Infallible>(response.map(|body| Tracked {
                    body,
                    _in_flight: in_flight,
                }))
            }
        });
        let mut builder = auto::Builder::new(TokioExecutor::new());
        builder
            .http1()
            .header_read_timeout(None)
            .max_headers(self.settings.hyper_max_headers)
            .max_buf_size(self.settings.hyper_max_header_bytes.max(8192));
        // poem's defaults for h2c.
        builder
            .http2()
            .max_pending_accept_reset_streams(20)
            .max_header_list_size(
                u32::try_from(self.settings.hyper_max_header_bytes).unwrap_or(u32::MAX),
            );
        let connection = builder.serve_connection_with_upgrades(io, service);
        tokio::pin!(connection);
        let mut draining = false;
        loop {
            let deadline = activity.deadline(&self.settings);
            tokio::select! {
                _ = connection.as_mut() => return,
                () = activity.changed.notified() => {}
                () = tokio::time::sleep_until(deadline.unwrap_or_else(Instant::now)),
                    if deadline.is_some() =>
                {
                    if activity.deadline(&self.settings).is_some_and(|d| d <= Instant::now()) {
                        tracing::debug!(remote = %self.remote, "closing a connection: header or idle timeout");
                        return;
                    }
                }
                () = self.draining.cancelled(), if !draining => {
                    draining = true;
                    connection.as_mut().graceful_shutdown();
                }
                () = self.closing.cancelled() => return,
            }
        }
    }
}
