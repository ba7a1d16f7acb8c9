//! The `/docs` page: the Scalar API reference that poem-openapi bundles
//! (its JavaScript is inlined in the page, no CDN), in our own page with our
//! title, showing the published 3.1 document, configured so that "Test
//! Request" is ready for an API key.

use poem_openapi::OpenApiService;
use serde_json::{Value, json};

use super::Apis;

/// The page's title, in the browser tab and bookmarks.
pub const TITLE: &str = "Tocsin API";

/// What Scalar is told besides the document.
fn configuration() -> Value {
    json!({
        // The API's only scheme, selected with an empty token: the reader
        // pastes a key and "Test Request" sends it.
        "authentication": {
            "preferredSecurityScheme": "bearerAuth",
            "securitySchemes": { "bearerAuth": { "token": "" } },
        },
        // Scalar would load its fonts from fonts.scalar.com; the page uses
        // the reader's own and needs nothing from outside.
        "withDefaultFonts": false,
    })
}

/// The page for `document`, reusing the Scalar script of poem-openapi's own
/// page (`service.scalar_html()`).
pub fn docs_page(service: &OpenApiService<Apis, ()>, document: &Value) -> String {
    let bundled = service.scalar_html();
    let script = bundled
        .split_once(SCRIPT_START)
        .and_then(|(_, rest)| rest.rsplit_once("</script>"))
        .map(|(script, _)| script)
        .expect("poem-openapi's Scalar page ends with its inlined script");
    // `</` inside JSON strings is written `<\/` (the same string), so no
    // text of the document can close the <script> it sits in.
    let spec = document.to_string().replace("</", "<\\/");
    let configuration = configuration()
        .to_string()
        .replace('&', "&amp;")
        .replace('"', "&quot;")
        .replace('<', "&lt;");
    format!(
        r#"<!doctype html>
<html lang="en">
  <head>
    <title>{TITLE}</title>
    <meta charset="utf-8" />
    <meta name="viewport" content="width=device-width, initial-scale=1" />
    <style>body {{ margin: 0; }}</style>
  </head>
  <body>
    <script id="api-reference" type="application/json" data-configuration="{configuration}">{spec}</script>
    {SCRIPT_START}{script}</script>
  </body>
</html>
"#
    )
}

/// How poem-openapi's page opens the Scalar script.
const SCRIPT_START: &str = r#"<script charset="UTF-8">"#;
