//! The feed page at `GET /`: a small hand-written page (HTML, CSS and
//! vanilla JavaScript under `feed/`, embedded in the binary) that reads the
//! public read API with a key the reader pastes. The server side only serves
//! files: it never sees the key, which the page keeps in local storage and
//! sends as a bearer token to `/v1`.
//!
//! The stylesheet, script and icon are served under names that carry a hash
//! of their content (`/feed/feed.3f2a….js`), which the page is rewritten to
//! link, so browsers may keep them for good; the page itself is revalidated
//! on every load (its `ETag` makes that a 304).

use std::{collections::HashMap, sync::Arc};

use bytes::Bytes;
use poem::{
    Endpoint, IntoResponse, Request, Response,
    error::{MethodNotAllowedError, NotFoundError},
    http::{HeaderValue, Method, StatusCode, header},
};
use sha2::{Digest, Sha256};

/// The routes this module serves, in the OpenAPI document's template syntax
/// (for the `Allow` table and the metrics' route label).
pub const ROUTES: [&str; 2] = ["/", "/feed/{asset}"];

/// No inline script or style, nothing from another origin, and API calls
/// only to this server.
const CONTENT_SECURITY_POLICY: &str = "default-src 'none'; script-src 'self'; \
     style-src 'self'; img-src 'self'; connect-src 'self'; base-uri 'none'; \
     form-action 'none'; frame-ancestors 'none'";

/// The page revalidates each time, so a new release shows at once.
const PAGE_CACHE: &str = "no-cache";
/// A hashed asset name never changes content.
const ASSET_CACHE: &str = "public, max-age=31536000, immutable";

const PAGE: &str = include_str!("feed/index.html");

/// The files the page links, by the name it links them with.
const ASSETS: [(&str, &str, &[u8]); 3] = [
    (
        "feed.css",
        "text/css; charset=utf-8",
        include_bytes!("feed/feed.css"),
    ),
    (
        "feed.js",
        "text/javascript; charset=utf-8",
        include_bytes!("feed/feed.js"),
    ),
    ("icon.svg", "image/svg+xml", include_bytes!("feed/icon.svg")),
];

/// One file as served: its body, type and validator.
struct Asset {
    body: Bytes,
    content_type: &'static str,
    etag: HeaderValue,
}

impl Asset {
    fn new(body: Bytes, content_type: &'static str) -> Self {
        let etag = HeaderValue::from_str(&format!("\"{}\"", content_hash(&body)))
            .expect("a hex hash is a valid header value");
        Self {
            body,
            content_type,
            etag,
        }
    }

    /// The file, or a 304 when the browser's copy is current.
    fn respond(&self, req: &Request, cache_control: &'static str) -> Response {
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

/// The page and its files, hashed and linked once at start-up.
pub struct Feed {
    page: Asset,
    /// By hashed name (`feed.<hash>.js`).
    assets: HashMap<String, Asset>,
}

impl Feed {
    pub fn new() -> Self {
        let mut page = PAGE.to_owned();
        let mut assets = HashMap::new();
        for (name, content_type, body) in ASSETS {
            let hashed = hashed_name(name, body);
            let linked = format!("/feed/{name}\"");
            assert!(
                page.contains(&linked),
                "index.html does not link /feed/{name}"
            );
            page = page.replace(&linked, &format!("/feed/{hashed}\""));
            assets.insert(hashed, Asset::new(Bytes::from_static(body), content_type));
        }
        Self {
            page: Asset::new(Bytes::from(page), "text/html; charset=utf-8"),
            assets,
        }
    }
}

impl Default for Feed {
    fn default() -> Self {
        Self::new()
    }
}

/// The middleware (`EndpointExt::around` with the feed) that answers `/`
/// and `/feed/…` in front of the router: the API is nested at `/`, and a
/// nest's catch-all wins over a route at the bare `/` in poem's router.
pub async fn serve<E: Endpoint>(
    ep: Arc<E>,
    req: Request,
    feed: Arc<Feed>,
) -> poem::Result<Response> {
    let path = req.uri().path();
    let (asset, cache_control) = if path == "/" {
        (Some(&feed.page), PAGE_CACHE)
    } else if let Some(name) = path.strip_prefix("/feed/") {
        (feed.assets.get(name), ASSET_CACHE)
    } else {
        return ep.call(req).await.map(IntoResponse::into_response);
    };
    if req.method() != Method::GET && req.method() != Method::HEAD {
        return Err(MethodNotAllowedError.into());
    }
    let asset = asset.ok_or(NotFoundError)?;
    Ok(asset.respond(&req, cache_control))
}

/// The first 16 hex digits of the SHA-256 of `body`: enough to tell
/// releases apart.
fn content_hash(body: &[u8]) -> String {
    hex::encode(&Sha256::digest(body)[..8])
}

/// `feed.js` → `feed.<hash>.js`.
fn hashed_name(name: &str, body: &[u8]) -> String {
    let (stem, extension) = name
        .rsplit_once('.')
        .expect("asset names have an extension");
    format!("{stem}.{}.{extension}", content_hash(body))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_page_links_each_asset_by_its_hashed_name() {
        let feed = Feed::new();
        let page = std::str::from_utf8(&feed.page.body).expect("UTF-8");
        for (name, _, body) in ASSETS {
            let hashed = hashed_name(name, body);
            assert!(
                page.contains(&format!("\"/feed/{hashed}\"")),
                "the page does not link {hashed}"
            );
            assert!(
                !page.contains(&format!("\"/feed/{name}\"")),
                "the page still links the unhashed {name}"
            );
            assert!(feed.assets.contains_key(&hashed));
        }
    }
}
