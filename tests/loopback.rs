//! What the push-service stand-ins (push_service.rs, fcm_service.rs) share:
//! a plain HTTP/1 server on 127.0.0.1, each request going to their handler
//! with their shared state and each new connection to `on_connect`; and a
//! JWT taken apart for them to check its signature and claims.

use std::{future::Future, net::SocketAddr, sync::Arc};

use base64::{Engine as _, engine::general_purpose::URL_SAFE_NO_PAD};
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

/// base64url without padding, as JWTs and Web Push keys are written.
pub fn b64(s: &str) -> Result<Vec<u8>, String> {
    URL_SAFE_NO_PAD
        .decode(s)
        .map_err(|_| format!("bad base64url {s:?}"))
}

/// A compact JWT whose header names `alg`, taken apart: what is signed,
/// the signature, and the claims (to be trusted once the signature is).
pub struct Jwt<'a> {
    pub signed: &'a str,
    pub signature: Vec<u8>,
    pub claims: serde_json::Value,
}

pub fn split_jwt<'a>(token: &'a str, alg: &str) -> Result<Jwt<'a>, String> {
    let (signed, signature) = token.rsplit_once('.').ok_or("not a JWT")?;
    let (header, claims) = signed.split_once('.').ok_or("not a JWT")?;
    let json = |part: &str| -> Result<serde_json::Value, String> {
        serde_json::from_slice(&b64(part)?).map_err(|e| e.to_string())
    };
    let header = json(header)?;
    if header["alg"] != alg {
        return Err(format!("alg {} is not {alg}", header["alg"]));
    }
    Ok(Jwt {
        signed,
        signature: b64(signature)?,
        claims: json(claims)?,
    })
}
