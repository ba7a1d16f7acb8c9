//! The browser pages' files as served, the feed at `/` and the dashboard at
//! `/dashboard` (the pages themselves run in a browser in tests/tools/feed.rs
//! and tests/tools/dashboard.rs): no key needed, every file a page links
//! served here and nothing from elsewhere, headers fit for a page that holds
//! a key or an admin token (a strict Content-Security-Policy, nosniff, no
//! referrer), caching that lets a browser keep the files whose names carry
//! their hash, a small total, and the look shared (both link one
//! stylesheet).

use reqwest::{Method, Response};
use scraper::{Html, Selector};
use tocsin_tests::{Reply, StoreKind, TestApp};

/// "A few tens of KiB" for the page and everything it loads, uncompressed.
const MOST_BYTES: usize = 40 * 1024;

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
    for link in &linked {
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
            other => panic!("unexpected kind of file {other:?}"),
        };
        assert_eq!(header(&response, "content-type"), expected_type, "{link}");
        let etag = header(&response, "etag").to_owned();
        total += response.bytes().await.expect("the file").len();
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
