//! The browser pages' files as served, the feed at `/` and the dashboard at
//! `/dashboard` (the pages themselves run in a browser in tests/tools/feed.rs
//! and tests/tools/dashboard.rs): no key needed, every file a page links
//! served here and nothing from elsewhere, headers fit for a page that holds
//! a key or an admin token (a strict Content-Security-Policy, nosniff, no
//! referrer), caching that lets a browser keep the files whose names carry
//! their hash, a small total, and the look shared (both link one
//! stylesheet). The feed is also a web app: its manifest and service
//! worker at fixed URLs, and the PNG icons they and the page name (Chromium
//! installs it and runs the worker in tests/tools/feed_alerts.rs).

use reqwest::{Method, Response};
use scraper::{Html, Selector};
use serde_json::Value;
use tocsin_tests::{Reply, StoreKind, TestApp};

/// "A few tens of KiB" for the page and everything it loads, uncompressed
/// (the feed with its alert settings form, insights, markdown and the
/// user view is about 69 KiB).
const MOST_BYTES: usize = 72 * 1024;

/// The feed's web app manifest, at a fixed URL the page links.
const MANIFEST: &str = "/manifest.webmanifest";

fn header<'a>(response: &'a Response, name: &str) -> &'a str {
    response
        .headers()
        .get(name)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_else(|| panic!("no {name} on {}", response.url()))
}

/// What every file of the page is sent with.
fn assert_page_headers(response: &Response) {
    let policy = header(response, "content-security-policy");
    for directive in [
        "default-src 'none'",
        "script-src 'self'",
        "style-src 'self'",
        "connect-src 'self'",
        "frame-ancestors 'none'",
    ] {
        assert!(policy.contains(directive), "no {directive:?} in {policy:?}");
    }
    for loose in ["unsafe-inline", "unsafe-eval", "*", "http:", "data:"] {
        assert!(!policy.contains(loose), "{loose:?} in {policy:?}");
    }
    assert_eq!(header(response, "x-content-type-options"), "nosniff");
    assert_eq!(header(response, "referrer-policy"), "no-referrer");
}

#[tokio::test]
async fn the_feed_page_and_its_files_are_served_small_strict_and_cacheable() {
    let app = TestApp::spawn(StoreKind::Sqlite).await;
    assert_served(&app, "/", "/feed/").await;
}

#[tokio::test]
async fn the_dashboard_and_its_files_are_served_small_strict_and_cacheable() {
    let app = TestApp::spawn(StoreKind::Sqlite).await;
    let files = assert_served(&app, "/dashboard", "/dashboard/").await;
    // Its own script, not the feed's.
    assert!(
        files.iter().any(|f| f.starts_with("/dashboard/dashboard.")),
        "{files:?}"
    );
}

/// One look: both pages link the same stylesheet (by its content hash).
#[tokio::test]
async fn the_feed_and_the_dashboard_share_one_stylesheet() {
    let app = TestApp::spawn(StoreKind::Sqlite).await;
    let shared = |files: Vec<String>| -> Vec<String> {
        files
            .iter()
            .filter_map(|f| f.rsplit('/').next())
            .filter(|name| name.starts_with("tocsin.") && name.ends_with(".css"))
            .map(String::from)
            .collect()
    };
    let feed = shared(linked(&app.get("/").await.text().await.expect("the page")).0);
    let dashboard = shared(linked(&app.get("/dashboard").await.text().await.expect("the page")).0);
    assert_eq!(feed.len(), 1, "{feed:?}");
    assert_eq!(feed, dashboard);
}

/// The files `html` links, sorted, and how many inline scripts or styles
/// it has.
fn linked(html: &str) -> (Vec<String>, usize) {
    let dom = Html::parse_document(html);
    let select = |css| Selector::parse(css).expect("a selector");
    let mut linked: Vec<String> = dom
        .select(&select("script[src], img[src]"))
        .filter_map(|e| e.value().attr("src"))
        .chain(
            dom.select(&select("link[href]"))
                .filter_map(|e| e.value().attr("href")),
        )
        .map(String::from)
        .collect();
    linked.sort();
    linked.dedup();
    let inline = dom
        .select(&select("script:not([src]), style, [style]"))
        .count();
    (linked, inline)
}

/// The page at `path` and every file it links (all under `folder`): the
/// headers, caching and size each page promises. Returns the files.
async fn assert_served(app: &TestApp, path: &str, folder: &str) -> Vec<String> {
    let page = app.get(path).await;
    assert_eq!(page.status(), 200);
    assert_eq!(header(&page, "content-type"), "text/html; charset=utf-8");
    assert_page_headers(&page);
    // Revalidated on each load, so a new release shows at once.
    assert_eq!(header(&page, "cache-control"), "no-cache");
    let etag = header(&page, "etag").to_owned();
    let html = page.text().await.expect("the page");
    let mut total = html.len();

    let again = app
        .client
        .get(app.url(path))
        .header("if-none-match", &etag)
        .send()
        .await
        .expect("sent");
    assert_eq!(again.status(), 304, "the page is sent again unchanged");

    // Everything the page loads, and that none of it is inline (the policy
    // would block it).
    let (linked, inline) = linked(&html);
    assert_eq!(inline, 0, "inline script or style in the page");
    let kinds = ["css", "js", "svg"];
    for kind in kinds {
        assert!(
            linked.iter().any(|l| l.ends_with(&format!(".{kind}"))),
            "the page links no .{kind}: {linked:?}"
        );
    }
    for link in linked.iter().filter(|l| *l != MANIFEST) {
        assert!(link.starts_with(folder), "{link} is not served by ingest");
        let response = app.get(link).await;
        assert_eq!(response.status(), 200, "{link}");
        assert_page_headers(&response);
        // The name carries the content's hash: a browser may keep it.
        assert_eq!(
            header(&response, "cache-control"),
            "public, max-age=31536000, immutable",
            "{link}"
        );
        let expected_type = match link.rsplit('.').next() {
            Some("css") => "text/css; charset=utf-8",
            Some("js") => "text/javascript; charset=utf-8",
            Some("svg") => "image/svg+xml",
            Some("png") => "image/png",
            other => panic!("unexpected kind of file {other:?}"),
        };
        assert_eq!(header(&response, "content-type"), expected_type, "{link}");
        let etag = header(&response, "etag").to_owned();
        let size = response.bytes().await.expect("the file").len();
        // The apple-touch-icon is fetched only when the page is added to a
        // Home Screen, not on each visit.
        if !link.ends_with(".png") {
            total += size;
        }
        let again = app
            .client
            .get(app.url(link))
            .header("if-none-match", &etag)
            .send()
            .await
            .expect("sent");
        assert_eq!(again.status(), 304, "{link} is sent again unchanged");
    }
    eprintln!("{path} and its files: {total} bytes");
    assert!(
        total <= MOST_BYTES,
        "{path} and its files weigh {total} bytes, over {MOST_BYTES}"
    );

    // A name that is not one of the page's files (an old release's hash).
    Reply::of(app.get(&format!("{folder}feed.0123456789abcdef.js")).await)
        .await
        .assert_error_envelope(404);
    // The page is read-only.
    let post = app
        .client
        .request(Method::POST, app.url(path))
        .send()
        .await
        .expect("sent");
    assert_eq!(header(&post, "allow"), "GET, HEAD");
    Reply::of(post).await.assert_error_envelope(405);
    linked
}

/// The feed as a web app: its manifest and service worker at fixed URLs,
/// revalidated on each load like the page; a policy that lets the page use
/// both; the icons the manifest, the worker and the page name, served as
/// PNGs of the sizes they are declared at; what iOS reads from the page.
#[tokio::test]
async fn the_feeds_manifest_worker_and_icons_are_served() {
    let app = TestApp::spawn(StoreKind::Sqlite).await;
    let page = app.get("/").await;
    let policy = header(&page, "content-security-policy").to_owned();
    for directive in ["worker-src 'self'", "manifest-src 'self'"] {
        assert!(policy.contains(directive), "no {directive:?} in {policy:?}");
    }
    let dom = Html::parse_document(&page.text().await.expect("the page"));
    let attribute = |css: &str, name: &str| {
        dom.select(&Selector::parse(css).expect("a selector"))
            .next()
            .and_then(|e| e.value().attr(name))
            .map(str::to_owned)
            .unwrap_or_else(|| panic!("no {css} with {name}"))
    };
    assert_eq!(attribute("link[rel=manifest]", "href"), MANIFEST);
    assert_eq!(
        attribute("meta[name=apple-mobile-web-app-capable]", "content"),
        "yes"
    );
    assert_eq!(
        attribute("meta[name=apple-mobile-web-app-title]", "content"),
        "Tocsin"
    );
    assert!(attribute("meta[name=theme-color]", "content").starts_with('#'));
    assert_png(&app, &attribute("link[rel=apple-touch-icon]", "href"), 180).await;

    let response = app.get(MANIFEST).await;
    assert_eq!(response.status(), 200);
    assert_eq!(
        header(&response, "content-type"),
        "application/manifest+json"
    );
    assert_eq!(header(&response, "cache-control"), "no-cache");
    assert_page_headers(&response);
    let manifest: Value = response.json().await.expect("the manifest is JSON");
    for member in ["name", "short_name", "theme_color", "background_color"] {
        assert!(
            manifest[member].as_str().is_some_and(|v| !v.is_empty()),
            "no {member} in {manifest}"
        );
    }
    assert_eq!(manifest["start_url"], "/");
    assert_eq!(manifest["scope"], "/");
    assert_eq!(manifest["display"], "standalone");
    let icons = manifest["icons"].as_array().expect("icons");
    for (size, purpose) in [(192, "any"), (512, "any"), (512, "maskable")] {
        let icon = icons
            .iter()
            .find(|i| {
                i["sizes"] == format!("{size}x{size}")
                    && i["purpose"]
                        .as_str()
                        .unwrap_or("any")
                        .split(' ')
                        .any(|p| p == purpose)
            })
            .unwrap_or_else(|| panic!("no {purpose} icon of {size} px in {manifest}"));
        assert_eq!(icon["type"], "image/png");
        assert_png(&app, icon["src"].as_str().expect("a src"), size).await;
    }

    let worker = app.get("/sw.js").await;
    assert_eq!(worker.status(), 200);
    assert_eq!(
        header(&worker, "content-type"),
        "text/javascript; charset=utf-8"
    );
    assert_eq!(header(&worker, "cache-control"), "no-cache");
    assert_page_headers(&worker);
    // At the root, its default scope (`/`) covers the feed; the icons of
    // its notifications are served.
    let script = worker.text().await.expect("the worker");
    let named: Vec<&str> = script
        .split('"')
        .filter(|s| s.starts_with("/feed/") && s.ends_with(".png"))
        .collect();
    assert_eq!(named.len(), 2, "{named:?}");
    for path in named {
        assert_eq!(app.get(path).await.status(), 200, "{path}");
    }

    for path in [MANIFEST, "/sw.js"] {
        let post = app
            .client
            .request(Method::POST, app.url(path))
            .send()
            .await
            .expect("sent");
        assert_eq!(header(&post, "allow"), "GET, HEAD", "{path}");
        Reply::of(post).await.assert_error_envelope(405);
    }
}

/// `path` is a PNG of `size` × `size` pixels (its header says so; Chromium
/// decodes each in tests/tools/feed_alerts.rs), cacheable for good.
async fn assert_png(app: &TestApp, path: &str, size: u32) {
    let response = app.get(path).await;
    assert_eq!(response.status(), 200, "{path}");
    assert_eq!(header(&response, "content-type"), "image/png", "{path}");
    assert_eq!(
        header(&response, "cache-control"),
        "public, max-age=31536000, immutable",
        "{path}"
    );
    let png = response.bytes().await.expect("the icon");
    // The signature, then the IHDR chunk: length, type, width, height.
    assert!(png.starts_with(b"\x89PNG\r\n\x1a\n"), "{path} is not a PNG");
    assert_eq!(&png[12..16], b"IHDR", "{path}");
    let dimension = |at: usize| u32::from_be_bytes(png[at..at + 4].try_into().expect("4 bytes"));
    assert_eq!((dimension(16), dimension(20)), (size, size), "{path}");
}
