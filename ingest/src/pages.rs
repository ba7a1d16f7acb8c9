//! The browser pages ingest serves, each a small hand-written page (HTML,
//! CSS and vanilla JavaScript under `pages/`, embedded in the binary) that
//! is a client of the HTTP API with a credential the person pastes: the
//! server side only serves files and never sees the credential.
//!
//! - the feed at `GET /` reads the public read API with an API key, and is
//!   an installable web app: its manifest at `/manifest.webmanifest` and its
//!   service worker at `/sw.js` (which shows Web Push alerts; served from
//!   the root so its scope covers the feed at `/`);
//! - the dashboard at `GET /dashboard` administers organizations,
//!   projects, API keys, devices and destinations through `/admin/v1`
//!   with an admin token.
//!
//! Both share one stylesheet (`shared/tocsin.css`: the design tokens and
//! the header, form and message styles) and the icon. A page's files are
//! served under its own folder with names that carry a hash of their
//! content (`/feed/feed.3f2a….js`), which the page (and its manifest and
//! worker) are rewritten to link, so browsers may keep them for good; what
//! is fetched by a fixed URL (the page, the manifest, the worker) is
//! revalidated on every load (its `ETag` makes that a 304).

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
pub const ROUTES: [&str; 6] = [
    "/",
    "/manifest.webmanifest",
    "/sw.js",
    "/feed/{asset}",
    "/dashboard",
    "/dashboard/{asset}",
];

/// What is fetched by a fixed URL revalidates each time, so a new release
/// shows at once.
const PAGE_CACHE: &str = "no-cache";
/// A hashed asset name never changes content.
const ASSET_CACHE: &str = "public, max-age=31536000, immutable";

const HTML: &str = "text/html; charset=utf-8";
const CSS: &str = "text/css; charset=utf-8";
const JS: &str = "text/javascript; charset=utf-8";
const SVG: &str = "image/svg+xml";
const PNG: &str = "image/png";
const MANIFEST: &str = "application/manifest+json";

/// What both pages load.
const SHARED_CSS: File = ("tocsin.css", CSS, include_bytes!("pages/shared/tocsin.css"));
const ICON: File = ("icon.svg", SVG, include_bytes!("pages/shared/icon.svg"));

/// A file a page links: the name it links it by, its type and its body.
type File = (&'static str, &'static str, &'static [u8]);

/// What a browser fetches by a fixed URL and which links files by name:
/// where it is served, its type and its text.
type Document = (&'static str, &'static str, &'static str);

/// A page as written: the folder its files are served under, its documents
/// (the page first; each links a file as `<folder><name>"`) and files.
struct Source {
    folder: &'static str,
    documents: &'static [Document],
    files: &'static [File],
}

const FEED: Source = Source {
    folder: "/feed/",
    documents: &[
        ("/", HTML, include_str!("pages/feed/index.html")),
        (
            "/manifest.webmanifest",
            MANIFEST,
            include_str!("pages/feed/manifest.webmanifest"),
        ),
        ("/sw.js", JS, include_str!("pages/feed/sw.js")),
    ],
    files: &[
        SHARED_CSS,
        ("feed.css", CSS, include_bytes!("pages/feed/feed.css")),
        ("feed.js", JS, include_bytes!("pages/feed/feed.js")),
        ("notify.js", JS, include_bytes!("pages/feed/notify.js")),
        ("users.js", JS, include_bytes!("pages/feed/users.js")),
        ICON,
        (
            "icon-192.png",
            PNG,
            include_bytes!("pages/feed/icon-192.png"),
        ),
        (
            "icon-512.png",
            PNG,
            include_bytes!("pages/feed/icon-512.png"),
        ),
        (
            "icon-maskable-512.png",
            PNG,
            include_bytes!("pages/feed/icon-maskable-512.png"),
        ),
        (
            "apple-touch-icon.png",
            PNG,
            include_bytes!("pages/feed/apple-touch-icon.png"),
        ),
        (
            "badge-96.png",
            PNG,
            include_bytes!("pages/feed/badge-96.png"),
        ),
    ],
};

const DASHBOARD: Source = Source {
    folder: "/dashboard/",
    documents: &[(
        "/dashboard",
        HTML,
        include_str!("pages/dashboard/index.html"),
    )],
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

/// One page, its documents and files, hashed and linked.
struct Page {
    folder: &'static str,
    /// By path, the page first.
    documents: Vec<(&'static str, Asset)>,
    /// By hashed name (`feed.<hash>.js`).
    files: HashMap<String, Asset>,
}

impl Page {
    fn new(source: &Source) -> Self {
        let mut texts: Vec<String> = source
            .documents
            .iter()
            .map(|&(_, _, text)| text.to_owned())
            .collect();
        let mut files = HashMap::new();
        for &(name, content_type, body) in source.files {
            let hashed = hashed_name(name, body);
            let linked = format!("{}{name}\"", source.folder);
            assert!(
                texts.iter().any(|text| text.contains(&linked)),
                "nothing of {} links {}{name}",
                source.documents[0].0,
                source.folder
            );
            for text in &mut texts {
                *text = text.replace(&linked, &format!("{}{hashed}\"", source.folder));
            }
            files.insert(hashed, Asset::new(Bytes::from_static(body), content_type));
        }
        let documents = source
            .documents
            .iter()
            .zip(texts)
            .map(|(&(path, content_type, _), text)| {
                (path, Asset::new(Bytes::from(text), content_type))
            })
            .collect();
        Self {
            folder: source.folder,
            documents,
            files,
        }
    }

    /// The file `path` names, if it is this page's, with how long it may be
    /// kept: `Some(None)` is this page's folder but no file of it.
    fn find(&self, path: &str) -> Option<Option<(&Asset, &'static str)>> {
        if let Some((_, asset)) = self.documents.iter().find(|(at, _)| *at == path) {
            return Some(Some((asset, PAGE_CACHE)));
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
            let texts: Vec<&str> = page
                .documents
                .iter()
                .map(|(_, asset)| std::str::from_utf8(&asset.body).expect("UTF-8"))
                .collect();
            let folder = source.folder;
            for &(name, _, body) in source.files {
                let hashed = hashed_name(name, body);
                assert!(
                    texts
                        .iter()
                        .any(|text| text.contains(&format!("\"{folder}{hashed}\""))),
                    "nothing links {hashed}"
                );
                assert!(
                    !texts
                        .iter()
                        .any(|text| text.contains(&format!("\"{folder}{name}\""))),
                    "the unhashed {name} is still linked"
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
            let documents = source.documents.iter().map(|&(path, _, _)| path);
            for path in documents.chain([file.as_str()]) {
                assert!(
                    ROUTES.iter().any(|route| matches(route, path)),
                    "{path} is not in ROUTES"
                );
            }
        }
    }
}
