//! FCM on loopback for the tests: Google's OAuth 2.0 token endpoint (the
//! JWT bearer grant, RFC 7523) and FCM's HTTP v1 `messages:send`, over
//! plain HTTP. It makes the service account — an RSA key generated at test
//! time with the `rsa` crate, written out as Google's JSON key file — and
//! checks every request with the real cryptography, apart from the
//! notifier's library so a bug cannot cancel itself out: the assertion's
//! RS256 signature against the account's public key and its claims (`iss`,
//! `scope`, `aud`, `exp`), then each send's bearer token against the tokens
//! it granted and has not revoked, and the message's shape (a web link
//! must be https, as FCM requires). Sends are
//! answered as the test scripted (200 by default); a scripted 401 revokes
//! every token granted so far, as a revoked token would be.

use std::{
    collections::{HashMap, HashSet, VecDeque},
    net::SocketAddr,
    path::PathBuf,
    sync::{Arc, Mutex, OnceLock},
    time::Instant,
};

use http_body_util::{BodyExt as _, Full};
use hyper::{Request, Response, body::Bytes};
use rsa::{
    RsaPrivateKey,
    pkcs1v15::{Signature, VerifyingKey},
    pkcs8::{EncodePrivateKey as _, LineEnding},
    signature::Verifier as _,
};
use serde_json::{Value, json};
use sha2::Sha256;

use crate::loopback::split_jwt;

/// The Firebase project the account belongs to.
pub const PROJECT: &str = "tocsin-test";
const CLIENT_EMAIL: &str = "tocsin-notifier@tocsin-test.iam.gserviceaccount.com";
const SCOPE: &str = "https://www.googleapis.com/auth/firebase.messaging";

/// One key per test process: a 2048-bit RSA key takes a while to generate
/// in a debug build.
fn account_key() -> &'static RsaPrivateKey {
    static KEY: OnceLock<RsaPrivateKey> = OnceLock::new();
    KEY.get_or_init(|| {
        RsaPrivateKey::new(&mut p256::elliptic_curve::rand_core::OsRng, 2048).expect("an RSA key")
    })
}

/// An answer to a send: status, `Retry-After` seconds, FCM error code.
pub type Answer = (u16, Option<u64>, Option<&'static str>);

/// A message FCM accepted.
#[derive(Debug, Clone)]
pub struct Received {
    /// The device's registration token.
    pub token: String,
    /// The request body's `message`.
    pub message: Value,
}

#[derive(Default)]
struct State {
    /// Access tokens granted, and whether each is still good.
    tokens: HashMap<String, bool>,
    grants: usize,
    scripts: HashMap<String, VecDeque<Answer>>,
    received: Vec<Received>,
    /// Every send that passed the checks, by device token, with when.
    requests: Vec<(String, Instant)>,
    faults: Vec<String>,
}

/// The running stand-in, and the account file the notifier reads.
pub struct FcmService {
    pub addr: SocketAddr,
    state: Arc<Mutex<State>>,
    dir: tempfile::TempDir,
}

impl FcmService {
    pub async fn start() -> Self {
        let state = Arc::new(Mutex::new(State::default()));
        let addr = crate::loopback::serve(
            Arc::clone(&state),
            |_| {},
            |state, addr, req| async move { handle(&state, addr, req).await },
        )
        .await;
        let dir = tempfile::tempdir().expect("a temporary directory");
        let key_file = json!({
            "type": "service_account",
            "project_id": PROJECT,
            "private_key_id": "0123456789abcdef",
            "private_key": account_key().to_pkcs8_pem(LineEnding::LF).expect("PEM").as_str(),
            "client_email": CLIENT_EMAIL,
            "client_id": "100000000000000000000",
            "auth_uri": "https://accounts.google.com/o/oauth2/auth",
            "token_uri": token_uri(addr),
        });
        std::fs::write(
            dir.path().join("service-account.json"),
            key_file.to_string(),
        )
        .expect("key file written");
        Self { addr, state, dir }
    }

    /// `http://127.0.0.1:<port>`: the base URL the notifier sends to.
    pub fn origin(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The service account's JSON key file.
    pub fn account_file(&self) -> PathBuf {
        self.dir.path().join("service-account.json")
    }

    /// The answers to the next sends to the device `token`; 200 after them.
    pub fn script(&self, token: &str, answers: Vec<Answer>) {
        self.state
            .lock()
            .expect("lock")
            .scripts
            .insert(token.to_owned(), answers.into());
    }

    /// Messages accepted for the device `token`.
    pub fn received(&self, token: &str) -> Vec<Received> {
        let state = self.state.lock().expect("lock");
        state
            .received
            .iter()
            .filter(|r| r.token == token)
            .cloned()
            .collect()
    }

    /// When each send to the device `token` came, whatever it was answered.
    pub fn requests(&self, token: &str) -> Vec<Instant> {
        let state = self.state.lock().expect("lock");
        state
            .requests
            .iter()
            .filter(|(t, _)| t == token)
            .map(|(_, at)| *at)
            .collect()
    }

    /// Access tokens granted so far.
    pub fn grants(&self) -> usize {
        self.state.lock().expect("lock").grants
    }

    /// Requests that failed a check, with why.
    pub fn faults(&self) -> Vec<String> {
        self.state.lock().expect("lock").faults.clone()
    }
}

fn token_uri(addr: SocketAddr) -> String {
    format!("http://{addr}/token")
}

async fn handle(
    state: &Mutex<State>,
    addr: SocketAddr,
    req: Request<hyper::body::Incoming>,
) -> Response<Full<Bytes>> {
    let path = req.uri().path().to_owned();
    let bearer = req
        .headers()
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .map(str::to_owned);
    let body = match req.into_body().collect().await {
        Ok(body) => body.to_bytes(),
        Err(_) => return respond(400, None, json!({})),
    };
    let mut state = state.lock().expect("lock");
    if path == "/token" {
        return match verify_grant(&body, &token_uri(addr)) {
            Ok(()) => {
                state.grants += 1;
                let token = format!("ya29.test-{}", state.grants);
                state.tokens.insert(token.clone(), true);
                respond(
                    200,
                    None,
                    json!({ "access_token": token, "expires_in": 3599, "token_type": "Bearer" }),
                )
            }
            Err(fault) => {
                state.faults.push(format!("token request: {fault}"));
                respond(
                    400,
                    None,
                    json!({ "error": "invalid_grant", "error_description": fault }),
                )
            }
        };
    }
    if path != format!("/v1/projects/{PROJECT}/messages:send") {
        state.faults.push(format!("a request to {path}"));
        return respond(404, None, json!({}));
    }
    let good = bearer
        .as_deref()
        .is_some_and(|t| state.tokens.get(t) == Some(&true));
    if !good {
        state
            .faults
            .push(format!("a send with a bad or revoked token: {bearer:?}"));
        return respond(401, None, fcm_error(401, "UNAUTHENTICATED", None));
    }
    let message = match check_message(&body) {
        Ok(message) => message,
        Err(fault) => {
            state.faults.push(format!("message: {fault}"));
            return respond(400, None, fcm_error(400, "INVALID_ARGUMENT", None));
        }
    };
    let token = message["token"].as_str().unwrap_or_default().to_owned();
    state.requests.push((token.clone(), Instant::now()));
    let (status, retry_after, code) = state
        .scripts
        .get_mut(&token)
        .and_then(VecDeque::pop_front)
        .unwrap_or((200, None, None));
    match status {
        200 => {
            state.received.push(Received {
                token,
                message: message.clone(),
            });
            let name = format!("projects/{PROJECT}/messages/{}", state.received.len());
            respond(200, None, json!({ "name": name }))
        }
        401 => {
            for good in state.tokens.values_mut() {
                *good = false;
            }
            respond(401, None, fcm_error(401, "UNAUTHENTICATED", None))
        }
        _ => respond(status, retry_after, fcm_error(status, "FAILED", code)),
    }
}

/// google.rpc.Status with an FcmError detail, as FCM answers errors.
fn fcm_error(status: u16, rpc: &str, code: Option<&str>) -> Value {
    let details: Vec<Value> = code
        .into_iter()
        .map(|code| {
            json!({
                "@type": "type.googleapis.com/google.firebase.fcm.v1.FcmError",
                "errorCode": code,
            })
        })
        .collect();
    json!({ "error": { "code": status, "message": "scripted", "status": rpc, "details": details } })
}

fn respond(status: u16, retry_after: Option<u64>, body: Value) -> Response<Full<Bytes>> {
    let mut response = Response::builder()
        .status(status)
        .header("content-type", "application/json");
    if let Some(seconds) = retry_after {
        response = response.header("retry-after", seconds.to_string());
    }
    response
        .body(Full::new(Bytes::from(body.to_string())))
        .expect("a response")
}

/// RFC 7523 §2.1 and Google's rules: a form with the JWT bearer grant type
/// and an assertion signed RS256 by the account's key, issued by the
/// account, for the messaging scope, addressed to this endpoint, expiring
/// within the hour.
fn verify_grant(body: &[u8], audience: &str) -> Result<(), String> {
    let form: HashMap<String, String> = url::form_urlencoded::parse(body).into_owned().collect();
    if form.get("grant_type").map(String::as_str)
        != Some("urn:ietf:params:oauth:grant-type:jwt-bearer")
    {
        return Err(format!("grant_type {:?}", form.get("grant_type")));
    }
    let assertion = form.get("assertion").ok_or("no assertion")?;
    let jwt = split_jwt(assertion, "RS256")?;
    let verifying = VerifyingKey::<Sha256>::new(account_key().to_public_key());
    let signature = Signature::try_from(jwt.signature.as_slice()).map_err(|e| e.to_string())?;
    verifying
        .verify(jwt.signed.as_bytes(), &signature)
        .map_err(|_| "the assertion's signature does not verify".to_owned())?;
    let claims = jwt.claims;
    if claims["iss"] != CLIENT_EMAIL {
        return Err(format!("iss {}", claims["iss"]));
    }
    if claims["scope"] != SCOPE {
        return Err(format!("scope {}", claims["scope"]));
    }
    if claims["aud"] != audience {
        return Err(format!("aud {} is not {audience}", claims["aud"]));
    }
    let now = chrono::Utc::now().timestamp();
    let exp = claims["exp"].as_i64().ok_or("no exp")?;
    let iat = claims["iat"].as_i64().ok_or("no iat")?;
    if exp <= now || exp > now + 3600 + 60 || exp - iat > 3600 || iat > now + 60 {
        return Err(format!(
            "iat {iat} / exp {exp} are not within the hour of {now}"
        ));
    }
    Ok(())
}

/// The body FCM's v1 API accepts: a `message` for one device token with a
/// titled notification, string-valued data and an Android priority.
fn check_message(body: &[u8]) -> Result<Value, String> {
    let body: Value = serde_json::from_slice(body).map_err(|e| format!("not JSON: {e}"))?;
    let message = body.get("message").ok_or("no message")?;
    let known: HashSet<&str> = [
        "token",
        "notification",
        "data",
        "android",
        "apns",
        "webpush",
    ]
    .into_iter()
    .collect();
    let fields = message.as_object().ok_or("message is not an object")?;
    if let Some(unknown) = fields.keys().find(|k| !known.contains(k.as_str())) {
        return Err(format!("unknown field {unknown}"));
    }
    if message["token"].as_str().is_none_or(str::is_empty) {
        return Err("no token".into());
    }
    if message["notification"]["title"].as_str().is_none() {
        return Err("no notification title".into());
    }
    let data = message["data"].as_object().ok_or("no data")?;
    if let Some((key, _)) = data.iter().find(|(_, v)| !v.is_string()) {
        return Err(format!("data.{key} is not a string"));
    }
    if let Some(webpush) = message.get("webpush") {
        check_webpush(webpush)?;
    }
    if !matches!(
        message["android"]["priority"].as_str(),
        Some("normal" | "high")
    ) {
        return Err(format!(
            "android.priority {}",
            message["android"]["priority"]
        ));
    }
    if body.to_string().len() > 4096 {
        return Err("larger than 4096 bytes".into());
    }
    Ok(message.clone())
}

/// FCM v1's `WebpushConfig`: `headers`, `data`, `notification` and
/// `fcm_options`, whose `link` (the page a click opens) FCM takes only as
/// https ("For all URL values, HTTPS is required"), and `analytics_label`.
fn check_webpush(webpush: &Value) -> Result<(), String> {
    let only = |value: &Value, at: &str, known: &[&str]| -> Result<(), String> {
        let fields = value.as_object().ok_or(format!("{at} is not an object"))?;
        match fields.keys().find(|k| !known.contains(&k.as_str())) {
            Some(unknown) => Err(format!("unknown field {at}.{unknown}")),
            None => Ok(()),
        }
    };
    only(
        webpush,
        "webpush",
        &["headers", "data", "notification", "fcm_options"],
    )?;
    let Some(options) = webpush.get("fcm_options") else {
        return Ok(());
    };
    only(options, "webpush.fcm_options", &["link", "analytics_label"])?;
    if let Some(link) = options.get("link") {
        let link = link
            .as_str()
            .ok_or("webpush.fcm_options.link is not a string")?;
        let https = url::Url::parse(link).is_ok_and(|u| u.scheme() == "https");
        if !https {
            return Err(format!(
                "webpush.fcm_options.link {link:?} is not an https URL"
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn send(webpush: Value) -> Result<Value, String> {
        let body = json!({ "message": {
            "token": "t",
            "notification": { "title": "x" },
            "data": {},
            "android": { "priority": "normal" },
            "webpush": webpush,
        }});
        check_message(body.to_string().as_bytes())
    }

    #[test]
    fn a_web_link_is_taken_only_as_https() {
        assert!(send(json!({ "fcm_options": { "link": "https://shop.example/o/1" } })).is_ok());
        for refused in [
            json!({ "fcm_options": { "link": "http://shop.example/o/1" } }),
            json!({ "fcm_options": { "link": "/o/1" } }),
            json!({ "fcm_options": { "link": 5 } }),
            json!({ "fcm_options": { "url": "https://shop.example/o/1" } }),
            json!({ "link": "https://shop.example/o/1" }),
        ] {
            assert!(send(refused.clone()).is_err(), "{refused}");
        }
    }
}
