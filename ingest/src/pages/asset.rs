//! One file as a page serves it: its body, type and content-hash `ETag`,
//! answered with the headers every file of a page carries and a 304 when
//! the browser's copy is current.

use bytes::Bytes;
use poem::{
    Request, Response,
    http::{HeaderValue, StatusCode, header},
};
use sha2::{Digest, Sha256};

/// No inline script or style, nothing from another origin, and API calls
/// only to this server; the feed's service worker and web app manifest are
/// this server's too (without `manifest-src` the manifest would fall under
/// `default-src 'none'`).
const CONTENT_SECURITY_POLICY: &str = "default-src 'none'; script-src 'self'; \
     style-src 'self'; img-src 'self'; connect-src 'self'; worker-src 'self'; \
     manifest-src 'self'; base-uri 'none'; form-action 'none'; \
     frame-ancestors 'none'";

/// A file as served.
pub(super) struct Asset {
    pub(super) body: Bytes,
    content_type: &'static str,
    etag: HeaderValue,
}

impl Asset {
    pub(super) fn new(body: Bytes, content_type: &'static str) -> Self {
        let etag = HeaderValue::from_str(&format!("\"{}\"", content_hash(&body)))
            .expect("a hex hash is a valid header value");
        Self {
            body,
            content_type,
            etag,
        }
    }

    /// The file, or a 304 when the browser's copy is current.
    pub(super) fn respond(&self, req: &Request, cache_control: &'static str) -> Response {
        let current = req
            .headers()
            .get_all(header::IF_NONE_MATCH)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .flat_map(|v| v.split(','))
            .map(|tag| tag.trim().trim_start_matches("W/"))
            .any(|tag| tag == "*" || self.etag.to_str().is_ok_and(|etag| etag == tag));
        let builder = Response::builder()
            .header(header::ETAG, self.etag.clone())
            .header(header::CACHE_CONTROL, cache_control)
            .header(header::X_CONTENT_TYPE_OPTIONS, "nosniff")
            .header(header::REFERRER_POLICY, "no-referrer")
            .header(header::CONTENT_SECURITY_POLICY, CONTENT_SECURITY_POLICY);
        if current {
            return builder.status(StatusCode::NOT_MODIFIED).finish();
        }
        builder
            .content_type(self.content_type)
            .body(self.body.clone())
    }
}

/// The first 16 hex digits of the SHA-256 of `body`: enough to tell
/// releases apart.
fn content_hash(body: &[u8]) -> String {
    hex::encode(&Sha256::digest(body)[..8])
}

/// `feed.js` → `feed.<hash>.js`.
pub(super) fn hashed_name(name: &str, body: &[u8]) -> String {
    let (stem, extension) = name
        .rsplit_once('.')
        .expect("asset names have an extension");
    format!("{stem}.{}.{extension}", content_hash(body))
}
