//! The destination stand-ins (tests/standins) check what they claim and
//! answer as the real services do: a signed webhook verified by the
//! Standard Webhooks reference library, Slack's Block Kit limits, Telegram's
//! HTML and length rules, Discord's rate-limit answer and embed limits,
//! ntfy's publishing, and mail parsed into its text and HTML parts.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use base64::{Engine as _, engine::general_purpose::STANDARD};
use serde_json::{Value, json};
use sha2::{Digest as _, Sha256};
use tocsin_tests::standins::Standins;
use tokio::{
    io::{AsyncBufReadExt as _, AsyncWriteExt as _, BufReader},
    net::TcpStream,
};

const WAIT: Duration = Duration::from_secs(10);

/// HMAC-SHA256 (RFC 2104), written out so the signature under test comes
/// from neither the notifier's code nor the stand-ins' library.
fn hmac_sha256(key: &[u8], message: &[u8]) -> [u8; 32] {
    let mut block = [0u8; 64];
    if key.len() > 64 {
        block[..32].copy_from_slice(&Sha256::digest(key));
    } else {
        block[..key.len()].copy_from_slice(key);
    }
    let pad = |byte: u8| block.map(|b| b ^ byte);
    let inner = Sha256::new()
        .chain_update(pad(0x36))
        .chain_update(message)
        .finalize();
    Sha256::new()
        .chain_update(pad(0x5c))
        .chain_update(inner)
        .finalize()
        .into()
}

fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("after 1970")
        .as_secs()
}

/// The Standard Webhooks headers for `body` signed with `key` at `timestamp`.
fn signed(id: &str, timestamp: u64, body: &str, key: &[u8]) -> [(&'static str, String); 3] {
    let signature = hmac_sha256(key, format!("{id}.{timestamp}.{body}").as_bytes());
    [
        ("webhook-id", id.to_owned()),
        ("webhook-timestamp", timestamp.to_string()),
        (
            "webhook-signature",
            format!("v1,{}", STANDARD.encode(signature)),
        ),
    ]
}

async fn post(
    client: &reqwest::Client,
    url: String,
    body: String,
    headers: &[(&str, String)],
) -> reqwest::Response {
    let mut request = client
        .post(url)
        .header("content-type", "application/json")
        .body(body);
    for (name, value) in headers {
        request = request.header(*name, value);
    }
    request.send().await.expect("request sent")
}

fn header<'a>(response: &'a reqwest::Response, name: &str) -> Option<&'a str> {
    response.headers().get(name).and_then(|v| v.to_str().ok())
}

#[tokio::test]
async fn the_webhook_receiver_verifies_standard_webhooks_signatures() {
    let standins = Standins::start().await;
    let key = b"a key of thirty-two bytes, ok!!!";
    standins
        .set_webhook_secret("a", &format!("whsec_{}", STANDARD.encode(key)))
        .await;
    let client = reqwest::Client::new();
    let url = standins.url("/webhook/a");
    let body = json!({
        "type": "event.created",
        "timestamp": "2024-05-01T12:00:00Z",
        "data": {"title": "Disk full"},
    })
    .to_string();

    let good = post(
        &client,
        url.clone(),
        body.clone(),
        &signed("msg_1", now(), &body, key),
    )
    .await;
    assert_eq!(good.status(), 204);

    let forged = signed("msg_2", now(), &body, b"another key, also 32 bytes long!");
    let bad = post(&client, url.clone(), body.clone(), &forged).await;
    assert_eq!(bad.status(), 401);

    let stale = signed("msg_3", now() - 600, &body, key);
    let old = post(&client, url.clone(), body.clone(), &stale).await;
    assert_eq!(old.status(), 401);

    let unsigned = post(&client, url.clone(), body.clone(), &[]).await;
    assert_eq!(unsigned.status(), 401);

    let not_the_shape = r#"{"type":"x","data":{}}"#.to_owned();
    let shapeless = signed("msg_4", now(), &not_the_shape, key);
    let shape = post(&client, url, not_the_shape, &shapeless).await;
    assert_eq!(shape.status(), 400);

    let records = standins.received("/webhook/").await;
    assert_eq!(records.len(), 5, "{records:#?}");
    assert_eq!(records[0]["accepted"], true);
    assert_eq!(records[0]["webhook_id"], "msg_1");
    assert_eq!(records[0]["payload"]["data"]["title"], "Disk full");
    for (record, why) in records[1..4].iter().zip([
        "No matching signature",
        "too old",
        "Missing required headers",
    ]) {
        assert_eq!(record["accepted"], false);
        let problem = record["problem"].as_str().expect("a problem");
        assert!(problem.contains(why), "{problem}");
    }
    assert!(
        records[4]["problem"]
            .as_str()
            .is_some_and(|p| p.contains("timestamp")),
        "{}",
        records[4]
    );
    let delivered = standins.wait_received("/webhook/a", 1, WAIT).await;
    assert_eq!(delivered.len(), 1);
}

#[tokio::test]
async fn slack_enforces_block_kit_limits_and_answers_in_words() {
    let standins = Standins::start().await;
    let client = reqwest::Client::new();
    let url = standins.url("/slack/services/T000/B000/XXXX");

    let good = json!({
        "text": "Disk full on db-1",
        "blocks": [
            {"type": "header", "text": {"type": "plain_text", "text": "Disk full"}},
            {"type": "section", "text": {"type": "mrkdwn", "text": "*db-1* &lt;95%&gt;"}},
            {"type": "context", "elements": [{"type": "mrkdwn", "text": "ops"}]},
        ],
    });
    let response = post(&client, url.clone(), good.to_string(), &[]).await;
    assert_eq!(response.status(), 200);
    assert_eq!(response.text().await.expect("body"), "ok");

    let long_header = json!({
        "text": "fallback",
        "blocks": [{"type": "header", "text": {"type": "plain_text", "text": "x".repeat(151)}}],
    });
    let response = post(&client, url.clone(), long_header.to_string(), &[]).await;
    assert_eq!(response.status(), 400);
    assert_eq!(response.text().await.expect("body"), "invalid_blocks");

    let no_text = json!({"blocks": [{"type": "divider"}]});
    let response = post(&client, url.clone(), no_text.to_string(), &[]).await;
    assert_eq!(response.status(), 400);
    assert_eq!(response.text().await.expect("body"), "no_text");

    standins
        .script(
            "/slack/",
            json!([{"status": 429, "retry_after": 7}, {"status": 410}]),
        )
        .await;
    let response = post(&client, url.clone(), good.to_string(), &[]).await;
    assert_eq!(response.status(), 429);
    assert_eq!(header(&response, "retry-after"), Some("7"));
    let response = post(&client, url, good.to_string(), &[]).await;
    assert_eq!(response.status(), 410);
    assert_eq!(response.text().await.expect("body"), "channel_is_archived");

    let records = standins.received("/slack/").await;
    let flags: Vec<(bool, bool)> = records
        .iter()
        .map(|r| (r["accepted"] == true, r["scripted"] == true))
        .collect();
    assert_eq!(
        flags,
        [
            (true, false),
            (false, false),
            (false, false),
            (false, true),
            (false, true)
        ]
    );
    assert!(
        records[1]["problem"]
            .as_str()
            .is_some_and(|p| p.contains("more than 150")),
        "{}",
        records[1]
    );
}

#[tokio::test]
async fn telegram_counts_parsed_text_and_rejects_bad_html() {
    let standins = Standins::start().await;
    let client = reqwest::Client::new();
    let url = standins.url("/telegram/bot123456:ABC-def_1/sendMessage");
    let send = |text: String| {
        post(
            &client,
            url.clone(),
            json!({"chat_id": 42, "text": text, "parse_mode": "HTML"}).to_string(),
            &[],
        )
    };

    let too_long = send("x".repeat(4097)).await;
    assert_eq!(too_long.status(), 400);
    let body: Value = too_long.json().await.expect("JSON");
    assert_eq!(
        body,
        json!({"ok": false, "error_code": 400, "description": "Bad Request: message is too long"})
    );

    for bad in [
        "<b>bold</i>",
        "1 < 2",
        "Tom & Jerry",
        "<div>x</div>",
        "<b>open",
    ] {
        let response = send(bad.to_owned()).await;
        assert_eq!(response.status(), 400, "{bad}");
        let body: Value = response.json().await.expect("JSON");
        assert_eq!(body["ok"], false);
        assert_eq!(body["error_code"], 400);
        assert!(
            body["description"]
                .as_str()
                .is_some_and(|d| d.starts_with("Bad Request: can't parse entities: ")),
            "{bad}: {body}"
        );
    }

    // 4096 characters once parsed, though far more as sent.
    let escaped = format!("<b>{}</b>", "&lt;".repeat(4096));
    let response = send(escaped).await;
    assert_eq!(response.status(), 200);
    let body: Value = response.json().await.expect("JSON");
    assert_eq!(body["ok"], true);
    assert_eq!(body["result"]["chat"]["id"], 42);
    assert_eq!(body["result"]["text"], "<".repeat(4096));

    standins
        .expect_token("/telegram/", "123456:ABC-def_1")
        .await;
    let wrong = post(
        &client,
        standins.url("/telegram/bot123456:wrong/sendMessage"),
        json!({"chat_id": 42, "text": "hi"}).to_string(),
        &[],
    )
    .await;
    assert_eq!(wrong.status(), 401);
    assert_eq!(
        wrong.json::<Value>().await.expect("JSON"),
        json!({"ok": false, "error_code": 401, "description": "Unauthorized"})
    );

    let delivered = standins.wait_received("/telegram/", 1, WAIT).await;
    assert_eq!(delivered[0]["token"], "123456:ABC-def_1");
    assert_eq!(delivered[0]["chat_id"], 42);
}

#[tokio::test]
async fn discord_answers_a_rate_limit_and_checks_embeds() {
    let standins = Standins::start().await;
    let client = reqwest::Client::new();
    let url = standins.url("/discord/api/webhooks/123/token");
    let message = json!({"embeds": [{"title": "Disk full", "color": 0xE01E5A,
        "fields": [{"name": "host", "value": "db-1", "inline": true}]}]});

    standins
        .script("/discord/", json!([{"status": 429, "retry_after": 2.5}]))
        .await;
    let limited = post(&client, url.clone(), message.to_string(), &[]).await;
    assert_eq!(limited.status(), 429);
    assert_eq!(header(&limited, "retry-after"), Some("3"));
    assert_eq!(
        limited.json::<Value>().await.expect("JSON"),
        json!({"message": "You are being rate limited.", "retry_after": 2.5, "global": false})
    );

    let sent = post(&client, url.clone(), message.to_string(), &[]).await;
    assert_eq!(sent.status(), 204);

    let too_big = json!({"embeds": [{"title": "t".repeat(257), "color": 0x0100_0000}]});
    let invalid = post(&client, url, too_big.to_string(), &[]).await;
    assert_eq!(invalid.status(), 400);
    let body: Value = invalid.json().await.expect("JSON");
    assert_eq!(body["code"], 50035);
    assert_eq!(body["message"], "Invalid Form Body");
    assert_eq!(
        body["errors"]["embeds"]["0"]["title"]["_errors"][0]["code"],
        "BASE_TYPE_MAX_LENGTH"
    );
    assert_eq!(
        body["errors"]["embeds"]["0"]["color"]["_errors"][0]["code"],
        "NUMBER_TYPE_MAX"
    );

    let records = standins.received("/discord/").await;
    assert_eq!(records.len(), 3);
    assert_eq!(records[0]["scripted"], true);
    assert_eq!(records[1]["accepted"], true);
    assert_eq!(records[1]["message"], message);
}

#[tokio::test]
async fn ntfy_publishes_from_headers_or_json_and_guards_topics() {
    let standins = Standins::start().await;
    let client = reqwest::Client::new();

    let response = client
        .post(standins.url("/ntfy/ops-alerts"))
        .header("Title", "Disk full")
        .header("Priority", "high")
        .header("Tags", "warning,db")
        .header("Click", "https://tocsin.example/e/1")
        .header("Markdown", "yes")
        .body("db-1 is at **95%**")
        .send()
        .await
        .expect("sent");
    assert_eq!(response.status(), 200);
    assert_eq!(header(&response, "content-type"), Some("application/json"));
    let body: Value = response.json().await.expect("JSON");
    assert_eq!(body["event"], "message");
    assert_eq!(body["topic"], "ops-alerts");
    assert_eq!(body["message"], "db-1 is at **95%**");
    assert_eq!(body["title"], "Disk full");
    assert_eq!(body["priority"], 4);
    assert_eq!(body["tags"], json!(["warning", "db"]));
    assert_eq!(body["content_type"], "text/markdown");
    assert!(body["id"].as_str().is_some_and(|id| !id.is_empty()));
    assert!(body["time"].as_u64().is_some());

    let as_json = json!({"topic": "ops-alerts", "message": "m", "priority": 5, "tags": ["x"]});
    let response = post(&client, standins.url("/ntfy/"), as_json.to_string(), &[]).await;
    assert_eq!(response.status(), 200);

    let too_big = client
        .post(standins.url("/ntfy/ops-alerts"))
        .body("x".repeat(4097))
        .send()
        .await
        .expect("sent");
    assert_eq!(too_big.status(), 413);
    assert_eq!(too_big.json::<Value>().await.expect("JSON")["code"], 41301);

    standins.expect_token("/ntfy/private", "tk_secret").await;
    let anonymous = client
        .post(standins.url("/ntfy/private"))
        .body("m")
        .send()
        .await
        .expect("sent");
    assert_eq!(anonymous.status(), 403);
    assert_eq!(
        anonymous.json::<Value>().await.expect("JSON"),
        json!({"code": 40301, "http": 403, "error": "forbidden"})
    );
    let allowed = client
        .post(standins.url("/ntfy/private"))
        .bearer_auth("tk_secret")
        .body("m")
        .send()
        .await
        .expect("sent");
    assert_eq!(allowed.status(), 200);

    let delivered = standins.wait_received("/ntfy", 3, WAIT).await;
    let forms: Vec<&str> = delivered
        .iter()
        .map(|r| r["form"].as_str().expect("form"))
        .collect();
    assert_eq!(forms, ["headers", "json", "headers"]);
    assert_eq!(delivered[0]["priority"], 4);
    assert_eq!(delivered[0]["markdown"], true);
    assert_eq!(delivered[2]["token"], "tk_secret");
}

/// Reads one SMTP reply (every line of a multi-line one) and checks its code.
async fn reply(reader: &mut (impl tokio::io::AsyncBufRead + Unpin), code: &str) -> String {
    let mut all = String::new();
    loop {
        let mut line = String::new();
        reader.read_line(&mut line).await.expect("SMTP reply");
        assert!(line.starts_with(code), "expected {code}, got {line:?}");
        all.push_str(&line);
        // `250-...` continues, `250 ...` ends.
        if line.as_bytes().get(3) != Some(&b'-') {
            return all;
        }
    }
}

/// Sends `message` to the stand-in over a hand-written SMTP dialogue.
async fn send_mail(standins: &Standins, message: &str) {
    let stream = TcpStream::connect(standins.smtp)
        .await
        .expect("SMTP connect");
    let (read, mut write) = stream.into_split();
    let mut read = BufReader::new(read);
    reply(&mut read, "220").await;
    for (command, code) in [
        ("EHLO tests.localhost", "250"),
        ("MAIL FROM:<tocsin@example.com>", "250"),
        ("RCPT TO:<ops@example.com>", "250"),
        ("DATA", "354"),
    ] {
        write
            .write_all(format!("{command}\r\n").as_bytes())
            .await
            .expect("SMTP write");
        reply(&mut read, code).await;
    }
    write
        .write_all(format!("{message}\r\n.\r\n").as_bytes())
        .await
        .expect("SMTP write");
    reply(&mut read, "250").await;
    write.write_all(b"QUIT\r\n").await.expect("SMTP write");
    reply(&mut read, "221").await;
}

#[tokio::test]
async fn smtp_parses_multipart_alternative_mail() {
    let standins = Standins::start().await;
    let mime = [
        "From: Tocsin <tocsin@example.com>",
        "To: ops@example.com",
        "Subject: =?utf-8?q?Disk_full_=E2=80=94_db-1?=",
        "Date: Wed, 01 May 2024 12:00:00 +0000",
        "Message-ID: <1@tocsin.example>",
        "MIME-Version: 1.0",
        "Content-Type: multipart/alternative; boundary=\"b1\"",
        "",
        "--b1",
        "Content-Type: text/plain; charset=utf-8",
        "Content-Transfer-Encoding: quoted-printable",
        "",
        "Disk full =E2=80=94 db-1",
        "--b1",
        "Content-Type: text/html; charset=utf-8",
        "Content-Transfer-Encoding: 7bit",
        "",
        "<p>Disk full &mdash; db-1</p>",
        "--b1--",
    ]
    .join("\r\n");
    send_mail(&standins, &mime).await;

    let mails = standins.wait_received("smtp", 1, WAIT).await;
    let mail = &mails[0];
    assert_eq!(mail["mail_from"], "tocsin@example.com");
    assert_eq!(mail["rcpt_tos"], json!(["ops@example.com"]));
    assert_eq!(mail["subject"], "Disk full \u{2014} db-1");
    assert_eq!(mail["is_multipart_alternative"], true);
    // The line break before a boundary belongs to the boundary (RFC 2046).
    assert_eq!(mail["text"], "Disk full \u{2014} db-1");
    assert_eq!(mail["html"], "<p>Disk full &mdash; db-1</p>");
    assert_eq!(mail["problems"], json!([]));
    standins.assert_no_problems("smtp").await;

    let plain_only = [
        "From: tocsin@example.com",
        "To: ops@example.com",
        "Subject: plain",
        "Date: Wed, 01 May 2024 12:00:00 +0000",
        "Message-ID: <2@tocsin.example>",
        "MIME-Version: 1.0",
        "Content-Type: text/plain; charset=utf-8",
        "",
        "only text",
    ]
    .join("\r\n");
    send_mail(&standins, &plain_only).await;
    let problems = standins.problems("smtp").await;
    assert_eq!(problems.len(), 1);
    assert_eq!(
        problems[0]["problems"],
        json!([
            "top-level Content-Type is text/plain, not multipart/alternative",
            "no text/html part"
        ])
    );
}

#[tokio::test]
async fn a_delayed_answer_sees_the_sender_hang_up() {
    let standins = Standins::start().await;
    standins
        .script("/discord/", json!([{"delay_ms": 5000}]))
        .await;
    let impatient = reqwest::Client::builder()
        .timeout(Duration::from_millis(300))
        .build()
        .expect("client");
    let message = json!({"content": "hi"}).to_string();
    let url = standins.url("/discord/api/webhooks/1/t");
    let gave_up = impatient
        .post(url.clone())
        .header("content-type", "application/json")
        .body(message.clone())
        .send()
        .await;
    assert!(
        gave_up
            .as_ref()
            .err()
            .is_some_and(reqwest::Error::is_timeout),
        "{gave_up:?}"
    );
    tocsin_tests::eventually(WAIT, "the stand-in to see the hang-up", async || {
        let records = standins.received("/discord/").await;
        (records.len() == 1 && records[0]["disconnected"] == true).then_some(())
    })
    .await;

    // Normal handling resumes after the script.
    let sent = post(&reqwest::Client::new(), url, message, &[]).await;
    assert_eq!(sent.status(), 204);
    let records = standins.received("/discord/").await;
    assert_eq!(records[0]["accepted"], false);
    assert!(records[0]["problem"].is_null());
    assert_eq!(records[1]["accepted"], true);
}
