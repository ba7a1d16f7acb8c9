//! `/openapi.json` passes a real OpenAPI 3.1 validator
//! (`openapi-spec-validator`, from PyPI, installed by
//! `scripts/install-test-tools`).

use std::process::Command;

use tocsin_tests::{StoreKind, TestApp, contract::document, test_tool};

#[tokio::test]
async fn the_document_is_openapi_3_1_and_passes_the_validator() {
    let doc = document(&TestApp::spawn(StoreKind::Sqlite).await).await;
    assert_eq!(doc["openapi"], "3.1.0");
    let file = tempfile::NamedTempFile::new().expect("temp file");
    std::fs::write(
        file.path(),
        serde_json::to_vec_pretty(&doc).expect("serialises"),
    )
    .expect("written");
    let validator = test_tool(
        "OPENAPI_SPEC_VALIDATOR",
        ".tools/venv/bin/openapi-spec-validator",
    );
    let output = Command::new(validator)
        .arg(file.path())
        .output()
        .expect("validator runs");
    assert!(
        output.status.success(),
        "openapi-spec-validator rejected the document:\n{}\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
}
