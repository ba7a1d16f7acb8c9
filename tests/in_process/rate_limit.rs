//! Rate limits: every response reports them; a key's quota is enforced with
//! 429, Retry-After and the envelope; a key may have its own quota; a fresh
//! key's concurrent first requests share one quota.

use serde_json::json;
use tocsin_tests::{Reply, StoreKind, TestApp, for_each_store};

async fn every_response_reports_the_rate_limit(kind: StoreKind) {
    let app = TestApp::spawn(kind).await;
    let (key, _) = app.new_key().await;
    let created = Reply::of(
        app.post_event(&key, &json!({ "channelName": "c", "title": "t" }))
            .await,
    )
    .await;
    assert_eq!(created.status, 201);
    created.assert_rate_limit_headers();
    assert_eq!(
        created.header("x-ratelimit-limit"),
        Some("100"),
        "the default is 100 per minute"
    );
    assert_eq!(created.header("x-ratelimit-remaining"), Some("99"));
    let reset: u64 = created
        .header("x-ratelimit-reset")
        .expect("reset")
        .parse()
        .expect("number");
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock")
        .as_secs();
    assert!(
        reset >= now && reset <= now + 61,
        "reset {reset} should be within a minute of {now}"
    );

    let invalid = Reply::of(app.post_event(&key, &json!({})).await).await;
    assert_eq!(invalid.status, 400);
    invalid.assert_rate_limit_headers();
    assert_eq!(
        invalid.header("x-ratelimit-remaining"),
        Some("98"),
        "rejected requests count too"
    );

    let not_found = app.get_as("/v1/nothing-here", &key).await;
    let not_found = Reply::of(not_found).await;
    not_found.assert_error_envelope(404);
    not_found.assert_rate_limit_headers();
    assert_eq!(not_found.header("x-ratelimit-remaining"), Some("97"));

    let unauthenticated = Reply::of(app.post_event("wrong", &json!({})).await).await;
    unauthenticated.assert_error_envelope(401);
    unauthenticated.assert_rate_limit_headers();
}

async fn a_key_over_its_own_limit_gets_429(kind: StoreKind) {
    let app = TestApp::spawn(kind).await;
    let limited_key = app
        .create_key(
            "acme",
            &format!("p{}", uuid::Uuid::new_v4().simple()),
            Some(3),
        )
        .await;
    for remaining in ["2", "1", "0"] {
        let r = Reply::of(
            app.post_event(&limited_key, &json!({ "channelName": "c", "title": "t" }))
                .await,
        )
        .await;
        assert_eq!(r.status, 201);
        assert_eq!(r.header("x-ratelimit-limit"), Some("3"));
        assert_eq!(r.header("x-ratelimit-remaining"), Some(remaining));
    }
    let over = Reply::of(
        app.post_event(&limited_key, &json!({ "channelName": "c", "title": "t" }))
            .await,
    )
    .await;
    over.assert_error_envelope(429);
    over.assert_rate_limit_headers();
    assert_eq!(over.header("x-ratelimit-remaining"), Some("0"));
    let retry_after: u64 = over
        .header("retry-after")
        .expect("Retry-After")
        .parse()
        .expect("seconds");
    assert!(
        (1..=20).contains(&retry_after),
        "one request comes back every 20 s: {retry_after}"
    );

    // Another key is not affected.
    let (other, _) = app.new_key().await;
    let r = app
        .post_event(&other, &json!({ "channelName": "c", "title": "t" }))
        .await;
    assert_eq!(r.status(), 201);
}

/// 150 requests at once on a key never used before: exactly its 100 pass.
/// The race this guards against needs two first requests to reach the
/// limiter within microseconds, so it is tried on many fresh keys.
async fn concurrent_first_requests_of_a_fresh_key_get_exactly_its_quota(kind: StoreKind) {
    let app = TestApp::spawn(kind).await;
    let mut passed = Vec::new();
    for _ in 0..ROUNDS {
        let (key, _) = app.new_key().await;
        let answers = futures::future::join_all(
            (0..150).map(|_| async { app.get_as("/v1/devices", &key).await.status().as_u16() }),
        )
        .await;
        assert!(
            answers.iter().all(|s| *s == 200 || *s == 429),
            "{answers:?}"
        );
        passed.push(answers.iter().filter(|s| **s == 200).count());
    }
    assert_eq!(passed, vec![100; ROUNDS], "requests passed, per fresh key");
}

const ROUNDS: usize = 100;

for_each_store!(
    every_response_reports_the_rate_limit,
    a_key_over_its_own_limit_gets_429,
    concurrent_first_requests_of_a_fresh_key_get_exactly_its_quota
);
