//! A headless Chromium driven over W3C WebDriver, for the tests of the
//! browser pages (feed.rs, dashboard.rs).
//!
//! The browser is driven by Debian's `chromedriver` (package
//! chromium-driver, built from the same source as its chromium) and the
//! `fantoccini` client. Interaction while the page stays open needs a
//! driver protocol (`--dump-dom` only reads a page once); WebDriver is the
//! standard one, and fantoccini is a small, well-kept async client, where
//! the DevTools-protocol crates compile a generated binding of the whole
//! protocol.

use std::{
    fmt::Debug, os::unix::process::CommandExt as _, path::PathBuf, process::Stdio, time::Duration,
};

use fantoccini::{Client, ClientBuilder, Locator, wd::WebDriverCompatibleCommand};
use hyper::Method;
use hyper_util::client::legacy::connect::HttpConnector;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};
use tocsin_tests::{eventually, free_port, test_tool};
use url::Url;

/// Enough for Chromium to start, load a page and make its first calls.
pub const LOAD_TIMEOUT: Duration = Duration::from_secs(20);

/// A chromedriver of this test's own, and a headless Chromium session on it.
pub struct Browser {
    pub client: Client,
    driver: Driver,
}

/// The chromedriver process group: killed with the browser it started when
/// the test ends, however it ends.
struct Driver {
    child: std::process::Child,
}

impl Drop for Driver {
    fn drop(&mut self) {
        if let Ok(group) = i32::try_from(self.child.id()) {
            let _ = nix::sys::signal::killpg(
                nix::unistd::Pid::from_raw(group),
                nix::sys::signal::Signal::SIGKILL,
            );
        }
        let _ = self.child.wait();
    }
}

impl Browser {
    /// A browser showing the page at `url`.
    pub async fn opened_at(url: &str) -> Self {
        let browser = Self::start().await;
        browser.client.goto(url).await.expect("the page opens");
        browser
    }

    pub async fn start() -> Self {
        let chromedriver = test_tool("CHROMEDRIVER", "/usr/bin/chromedriver");
        let chromium = test_tool("CHROMIUM", "/usr/bin/chromium");
        let port = free_port();
        let child = std::process::Command::new(&chromedriver)
            .arg(format!("--port={port}"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .process_group(0)
            .spawn()
            .unwrap_or_else(|e| {
                panic!(
                    "{} does not start ({e}): run scripts/install-test-tools (or set CHROMEDRIVER)",
                    chromedriver.display()
                )
            });
        let driver = Driver { child };
        let url = format!("http://127.0.0.1:{port}");
        let capabilities = json!({
            "goog:chromeOptions": {
                "binary": chromium,
                "args": [
                    "--headless",
                    "--no-sandbox",
                    "--disable-gpu",
                    "--disable-dev-shm-usage",
                    "--disable-extensions",
                    "--disable-background-networking",
                    "--no-first-run",
                    "--window-size=1100,900",
                    // Nothing leaves the machine.
                    "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1, EXCLUDE localhost",
                ],
            },
        });
        let Value::Object(capabilities) = capabilities else {
            unreachable!("an object literal");
        };
        let mut builder = ClientBuilder::new(HttpConnector::new());
        builder.capabilities(capabilities);
        // The driver listens a moment after it starts.
        let client = eventually(LOAD_TIMEOUT, "chromedriver to take a session", async || {
            builder.connect(&url).await
        })
        .await;
        Self { client, driver }
    }

    /// Sends a Chrome DevTools Protocol command to the page's target through
    /// chromedriver (`goog/cdp/execute`) and returns its result.
    pub async fn cdp(&self, command: &str, params: Value) -> Value {
        let body = json!({ "cmd": command, "params": params });
        self.client
            .issue_cmd(SessionCommand {
                path: "goog/cdp/execute",
                body,
            })
            .await
            .unwrap_or_else(|e| panic!("{command} failed ({e})"))
    }

    /// Grants `permission` (`notifications`, say) to the page's origin, as
    /// a person answering the browser's prompt would (WebDriver's "Set
    /// Permission").
    pub async fn grant(&self, permission: &str) {
        let body = json!({ "descriptor": { "name": permission }, "state": "granted" });
        self.client
            .issue_cmd(SessionCommand {
                path: "permissions",
                body,
            })
            .await
            .unwrap_or_else(|e| panic!("{permission} cannot be granted ({e})"));
    }

    /// Runs `script` in the page and returns what it returns.
    pub async fn script(&self, script: &str) -> Value {
        self.client
            .execute(script, vec![])
            .await
            .unwrap_or_else(|e| panic!("the script failed ({e}): {script}"))
    }

    async fn snapshot<T: DeserializeOwned>(&self, snapshot: &str) -> Result<T, String> {
        let value = self
            .client
            .execute(snapshot, vec![])
            .await
            .map_err(|e| e.to_string())?;
        serde_json::from_value(value).map_err(|e| e.to_string())
    }

    /// Waits until what the script `snapshot` returns (the page as a test
    /// reads it) is what `ready` looks for, and returns it.
    pub async fn wait_for<T: DeserializeOwned + Debug>(
        &self,
        snapshot: &str,
        timeout: Duration,
        what: &str,
        ready: impl Fn(&T) -> bool,
    ) -> T {
        eventually(timeout, what, async || {
            let page: T = self.snapshot(snapshot).await?;
            if ready(&page) {
                Ok(page)
            } else {
                Err(format!("{page:?}"))
            }
        })
        .await
    }

    /// Clicks the element `css` names, as a person would.
    pub async fn click(&self, css: &str) {
        self.client
            .find(Locator::Css(css))
            .await
            .unwrap_or_else(|e| panic!("nothing matches {css} ({e})"))
            .click()
            .await
            .unwrap_or_else(|e| panic!("{css} cannot be clicked ({e})"));
    }

    /// Saves a PNG of the window under the target directory and prints where.
    pub async fn screenshot(&self, name: &str) -> PathBuf {
        let png = self.client.screenshot().await.expect("a screenshot");
        let path = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(name);
        std::fs::write(&path, png).expect("the screenshot is saved");
        eprintln!("screenshot: {}", path.display());
        path
    }

    /// At a phone's width (390 px) the page is no wider than the window;
    /// a screenshot of it is saved as `name`, and the window set back.
    pub async fn assert_fits_a_phone(&self, name: &str) {
        self.client
            .set_window_size(390, 844)
            .await
            .expect("a phone-sized window");
        let overflow = self
            .script(
                "return document.documentElement.scrollWidth - document.documentElement.clientWidth",
            )
            .await;
        assert_eq!(
            overflow,
            json!(0),
            "the page is wider than a phone's screen"
        );
        self.screenshot(name).await;
        self.client
            .set_window_size(1100, 900)
            .await
            .expect("the window back to its size");
    }

    pub async fn close(self) {
        let Self { client, driver } = self;
        let _ = client.close().await;
        drop(driver);
    }
}

/// A POST to one of the session's endpoints that fantoccini has no method
/// for.
#[derive(Debug)]
struct SessionCommand {
    path: &'static str,
    body: Value,
}

impl WebDriverCompatibleCommand for SessionCommand {
    fn endpoint(&self, base_url: &Url, session_id: Option<&str>) -> Result<Url, url::ParseError> {
        base_url
            .join(&format!("session/{}/", session_id.unwrap_or_default()))?
            .join(self.path)
    }

    fn method_and_body(&self, _: &Url) -> (Method, Option<String>) {
        (Method::POST, Some(self.body.to_string()))
    }
}
