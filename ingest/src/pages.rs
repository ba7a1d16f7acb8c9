//! The browser pages ingest serves, each a small hand-written page (HTML,
//! CSS and vanilla JavaScript under `pages/`, embedded in the binary) that
//! is a client of the HTTP API with a credential the person pastes: the
//! server side only serves files and never sees the credential.
//!
//! - the feed at `GET /` reads the public read API with an API key;
//! - the dashboard at `GET /dashboard` administers organizations,
//!   projects, API keys and devices through `/admin/v1` with an admin token.
//!
//! Both share one stylesheet (`shared/tocsin.css`: the design tokens and
//! the header, form and message styles) and the icon. A page's files are
//! served under its own folder with names that carry a hash of their
//! content (`/feed/feed.3f2a….js`), which the page is rewritten to link, so
//! browsers may keep them for good; the page itself is revalidated on every
//! load (its `ETag` makes that a 304).

mod asset;

use std::{collections::HashMap, sync::Arc};

use bytes::Bytes;
use poem::{
    Endpoint, IntoResponse, Request, Response,
    error::{MethodNotAllowedError, NotFoundError},
    http::Method,
};

use asset::{Asset, hashed_name};

/// The routes this module serves, in the OpenAPI document's template syntax
/// (for the `Allow` table and the metrics' route label).
pub const ROUTES: [&str; 4] = ["/", "/feed/{asset}", "/dashboard", "/dashboard/{asset}"];

/// The page revalidates each time, so a new release shows at once.
const PAGE_CACHE: &str = "no-cache";
/// A hashed asset name never changes content.
const ASSET_CACHE: &str = "public, max-age=31536000, immutable";

const CSS: &str = "text/css; charset=utf-8";
const JS: &str = "text/javascript; charset=utf-8";
const SVG: &str = "image/svg+xml";

/// What both pages load.
const SHARED_CSS: File = ("tocsin.css", CSS, include_bytes!("pages/shared/tocsin.css"));
const ICON: File = ("icon.svg", SVG, include_bytes!("pages/shared/icon.svg"));

/// A file a page links: the name it links it by, its type and its body.
type File = (&'static str, &'static str, &'static [u8]);

/// A page as written: where it is served, the folder its files are served
/// under, its HTML (which links each file as `<folder><name>`) and files.
struct Source {
    path: &'static str,
    folder: &'static str,
    html: &'static str,
    files: &'static [File],
}

const FEED: Source = Source {
    path: "/",
    folder: "/feed/",
    html: include_str!("pages/feed/index.html"),
    files: &[
        SHARED_CSS,
        ("feed.css", CSS, include_bytes!("pages/feed/feed.css")),
        ("feed.js", JS, include_bytes!("pages/feed/feed.js")),
        ICON,
    ],
};

const DASHBOARD: Source = Source {
    path: "/dashboard",
    folder: "/dashboard/",
    html: include_str!("pages/dashboard/index.html"),
    files: &[
        SHARED_CSS,
        (
            "dashboard.css",
            CSS,
            include_bytes!("pages/dashboard/dashboard.css"),
        ),
        (
            "dashboard.js",
            JS,
            include_bytes!("pages/dashboard/dashboard.js"),
        ),
        ICON,
    ],
};

/// One page and its files, hashed and linked.
struct Page {
    path: &'static str,
    folder: &'static str,
    html: Asset,
    /// By hashed name (`feed.<hash>.js`).
    files: HashMap<String, Asset>,
}

impl Page {
    fn new(source: &Source) -> Self {
        let mut html = source.html.to_owned();
        let mut files = HashMap::new();
        for &(name, content_type, body) in source.files {
            let hashed = hashed_name(name, body);
            let linked = format!("{}{name}\"", source.folder);
            assert!(
                html.contains(&linked),
                "{} does not link {}{name}",
                source.path,
                source.folder
            );
            html = html.replace(&linked, &format!("{}{hashed}\"", source.folder));
            files.insert(hashed, Asset::new(Bytes::from_static(body), content_type));
        }
        Self {
            path: source.path,
            folder: source.folder,
            html: Asset::new(Bytes::from(html), "text/html; charset=utf-8"),
            files,
        }
    }

    /// The file `path` names, if it is this page's, with how long it may be
    /// kept: `Some(None)` is this page's folder but no file of it.
    fn find(&self, path: &str) -> Option<Option<(&Asset, &'static str)>> {
        if path == self.path {
            return Some(Some((&self.html, PAGE_CACHE)));
        }
        let name = path.strip_prefix(self.folder)?;
        Some(self.files.get(name).map(|asset| (asset, ASSET_CACHE)))
    }
}

/// Every page, built once at start-up.
pub struct Pages {
    pages: [Page; 2],
}

impl Pages {
    pub fn new() -> Self {
        Self {
            pages: [Page::new(&FEED), Page::new(&DASHBOARD)],
        }
    }
}

impl Default for Pages {
    fn default() -> Self {
        Self::new()
    }
}

/// The middleware (`EndpointExt::around` with the pages) that answers the
/// pages and their files in front of the router: the API is nested at `/`,
/// and a nest's catch-all wins over a route at the bare `/` in poem's
/// router.
pub async fn serve<E: Endpoint>(
    ep: Arc<E>,
    req: Request,
    pages: Arc<Pages>,
) -> poem::Result<Response> {
    let path = req.uri().path();
    let Some(found) = pages.pages.iter().find_map(|page| page.find(path)) else {
        return ep.call(req).await.map(IntoResponse::into_response);
    };
    if req.method() != Method::GET && req.method() != Method::HEAD {
        return Err(MethodNotAllowedError.into());
    }
    let (asset, cache_control) = found.ok_or(NotFoundError)?;
    Ok(asset.respond(&req, cache_control))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::routes::matches;

    #[test]
    fn each_page_links_each_file_by_its_hashed_name() {
        for source in [FEED, DASHBOARD] {
            let page = Page::new(&source);
            let html = std::str::from_utf8(&page.html.body).expect("UTF-8");
            for &(name, _, body) in source.files {
                let hashed = hashed_name(name, body);
                let folder = source.folder;
                assert!(
                    html.contains(&format!("\"{folder}{hashed}\"")),
                    "{} does not link {hashed}",
                    source.path
                );
                assert!(
                    !html.contains(&format!("\"{folder}{name}\"")),
                    "{} still links the unhashed {name}",
                    source.path
                );
                assert!(page.files.contains_key(&hashed));
            }
        }
    }

    /// `ROUTES` names what `serve` answers, so 405s and metrics know them.
    #[test]
    fn the_routes_cover_every_page_and_file() {
        for source in [FEED, DASHBOARD] {
            let file = format!("{}x.css", source.folder);
            for path in [source.path, &file] {
                assert!(
                    ROUTES.iter().any(|route| matches(route, path)),
                    "{path} is not in ROUTES"
                );
            }
        }
    }
}
