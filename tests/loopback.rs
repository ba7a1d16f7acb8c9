//! A plain HTTP/1 server on 127.0.0.1 for the push-service stand-ins
//! (push_service.rs, fcm_service.rs): each request goes to their handler
//! with their shared state, each new connection to `on_connect`.

use std::{future::Future, net::SocketAddr, sync::Arc};

use http_body_util::Full;
use hyper::{Request, Response, body::Bytes, service::service_fn};

/// Binds a free loopback port and serves `handle` on it until the test ends.
pub async fn serve<S, H, F>(state: Arc<S>, on_connect: fn(&S), handle: H) -> SocketAddr
where
    S: Send + Sync + 'static,
    H: Fn(Arc<S>, SocketAddr, Request<hyper::body::Incoming>) -> F + Clone + Send + Sync + 'static,
    F: Future<Output = Response<Full<Bytes>>> + Send + 'static,
{
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("binds");
    let addr = listener.local_addr().expect("addr");
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            on_connect(&state);
            let (state, handle) = (Arc::clone(&state), handle.clone());
            tokio::spawn(async move {
                let service = service_fn(move |req| {
                    let answer = handle(Arc::clone(&state), addr, req);
                    async move { Ok::<_, std::convert::Infallible>(answer.await) }
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(hyper_util::rt::TokioIo::new(stream), service)
                    .await;
            });
        }
    });
    addr
}
