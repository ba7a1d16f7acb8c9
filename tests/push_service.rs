//! A Web Push service on loopback for the tests: the push service side of
//! RFC 8030 over plain HTTP (its origin is allow-listed in the test's
//! settings). It hands out subscriptions as a browser would make them (a
//! P-256 key pair and an auth secret of its own), and checks every message
//! it receives with the real cryptography, written here from the RFCs and
//! independently of the sender's library so a bug cannot cancel itself out:
//! the VAPID header (RFC 8292: ES256 signature by the key ingest serves,
//! `aud` the endpoint's origin, `exp` within 24 hours, a `sub` contact), and
//! the aes128gcm body (RFC 8291 §3.4, RFC 8188), decrypted with the
//! subscription's private key and auth secret. It answers each message with
//! the status a test scripted (201 by default).

use std::{
    collections::{HashMap, VecDeque},
    net::SocketAddr,
    sync::{Arc, Mutex},
    time::Instant,
};

use aes_gcm::{Aes128Gcm, KeyInit as _, aead::Aead as _};
use base64::{Engine as _, engine::general_purpose::URL_SAFE_NO_PAD};
use hkdf::Hkdf;
use http_body_util::{BodyExt as _, Full};
use hyper::{Request, Response, body::Bytes};
use p256::{
    PublicKey, SecretKey,
    ecdsa::{Signature, VerifyingKey, signature::Verifier as _},
    elliptic_curve::{
        rand_core::{OsRng, RngCore as _},
        sec1::ToEncodedPoint as _,
    },
};
use serde_json::{Value, json};
use sha2::Sha256;

use crate::loopback::{b64, split_jwt};

/// A browser's side of one subscription.
struct Browser {
    secret: SecretKey,
    auth: [u8; 16],
}

/// A message the service accepted and decrypted.
#[derive(Debug, Clone)]
pub struct Received {
    pub path: String,
    pub payload: Value,
    pub ttl: Option<String>,
    pub urgency: Option<String>,
    pub topic: Option<String>,
    pub at: Instant,
}

#[derive(Default)]
struct State {
    browsers: HashMap<String, Browser>,
    vapid_key: Option<String>,
    scripts: HashMap<String, VecDeque<(u16, Option<u64>)>>,
    received: Vec<Received>,
    /// Every message, verified or not, by path, with when it came.
    requests: Vec<(String, Instant)>,
    faults: Vec<String>,
    connections: usize,
}

/// The running service.
pub struct PushService {
    pub addr: SocketAddr,
    state: Arc<Mutex<State>>,
}

impl PushService {
    pub async fn start() -> Self {
        let state = Arc::new(Mutex::new(State::default()));
        let addr = crate::loopback::serve(
            Arc::clone(&state),
            |state| state.lock().expect("lock").connections += 1,
            |state, addr, req| async move { handle(&state, addr, req).await },
        )
        .await;
        Self { addr, state }
    }

    /// `http://127.0.0.1:<port>`: the origin the settings allow.
    pub fn origin(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The VAPID public key every message must be signed with.
    pub fn expect_key(&self, key: &str) {
        self.state.lock().expect("lock").vapid_key = Some(key.to_owned());
    }

    /// A new subscription, as `PushSubscription.toJSON()` gives it.
    pub fn subscribe(&self) -> Value {
        let secret = SecretKey::random(&mut OsRng);
        let mut auth = [0u8; 16];
        OsRng.fill_bytes(&mut auth);
        let path = format!("/push/{}", uuid::Uuid::new_v4());
        let p256dh = secret.public_key().to_encoded_point(false);
        let subscription = json!({
            "endpoint": format!("{}{path}", self.origin()),
            "expirationTime": null,
            "keys": {
                "p256dh": URL_SAFE_NO_PAD.encode(p256dh.as_bytes()),
                "auth": URL_SAFE_NO_PAD.encode(auth),
            },
        });
        self.state
            .lock()
            .expect("lock")
            .browsers
            .insert(path, Browser { secret, auth });
        subscription
    }

    /// The answers to the next messages to `endpoint`: (status, Retry-After
    /// seconds); 201 once they run out.
    pub fn script(&self, endpoint: &str, answers: Vec<(u16, Option<u64>)>) {
        let path = endpoint.trim_start_matches(&self.origin()).to_owned();
        self.state
            .lock()
            .expect("lock")
            .scripts
            .insert(path, answers.into());
    }

    /// Messages accepted (verified and decrypted) for `endpoint`.
    pub fn received(&self, endpoint: &str) -> Vec<Received> {
        let path = endpoint.trim_start_matches(&self.origin());
        let state = self.state.lock().expect("lock");
        state
            .received
            .iter()
            .filter(|r| r.path == path)
            .cloned()
            .collect()
    }

    /// When each message to `endpoint` came, whatever it was answered.
    pub fn requests(&self, endpoint: &str) -> Vec<Instant> {
        let path = endpoint.trim_start_matches(&self.origin());
        let state = self.state.lock().expect("lock");
        state
            .requests
            .iter()
            .filter(|(p, _)| p == path)
            .map(|(_, at)| *at)
            .collect()
    }

    /// Messages that failed a check, with why.
    pub fn faults(&self) -> Vec<String> {
        self.state.lock().expect("lock").faults.clone()
    }

    /// TCP connections accepted so far.
    pub fn connections(&self) -> usize {
        self.state.lock().expect("lock").connections
    }
}

async fn handle(
    state: &Mutex<State>,
    addr: SocketAddr,
    req: Request<hyper::body::Incoming>,
) -> Response<Full<Bytes>> {
    let path = req.uri().path().to_owned();
    let header = |name: &str| {
        req.headers()
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned)
    };
    let (authorization, encoding) = (header("authorization"), header("content-encoding"));
    let (ttl, urgency, topic) = (header("ttl"), header("urgency"), header("topic"));
    let body = match req.into_body().collect().await {
        Ok(body) => body.to_bytes(),
        Err(_) => return respond(400, None),
    };
    let now = Instant::now();
    let mut state = state.lock().expect("lock");
    state.requests.push((path.clone(), now));
    let checked = (|| -> Result<Value, String> {
        let key = state
            .vapid_key
            .as_deref()
            .ok_or("no VAPID key expected yet")?;
        verify_vapid(authorization.as_deref(), key, &format!("http://{addr}"))?;
        if encoding.as_deref() != Some("aes128gcm") {
            return Err(format!("Content-Encoding {encoding:?}"));
        }
        if ttl.as_deref().and_then(|t| t.parse::<u64>().ok()).is_none() {
            return Err("no TTL".into());
        }
        let browser = state.browsers.get(&path).ok_or("no such subscription")?;
        let plaintext = decrypt(&body, &browser.secret, &browser.auth)?;
        serde_json::from_slice(&plaintext).map_err(|e| format!("payload is not JSON: {e}"))
    })();
    let payload = match checked {
        Ok(payload) => payload,
        Err(fault) => {
            state.faults.push(fault);
            return respond(400, None);
        }
    };
    let (status, retry_after) = state
        .scripts
        .get_mut(&path)
        .and_then(VecDeque::pop_front)
        .unwrap_or((201, None));
    if status == 201 {
        state.received.push(Received {
            path,
            payload,
            ttl,
            urgency,
            topic,
            at: now,
        });
    }
    respond(status, retry_after)
}

fn respond(status: u16, retry_after: Option<u64>) -> Response<Full<Bytes>> {
    let mut response = Response::builder().status(status);
    if let Some(seconds) = retry_after {
        response = response.header("retry-after", seconds.to_string());
    }
    response.body(Full::new(Bytes::new())).expect("a response")
}

/// RFC 8292: `vapid t=<JWT>, k=<key>`; the JWT signed (ES256) by `key`,
/// for `audience`, expiring within 24 hours, with a contact.
fn verify_vapid(header: Option<&str>, key: &str, audience: &str) -> Result<(), String> {
    let params = header
        .and_then(|h| h.strip_prefix("vapid "))
        .ok_or("no `vapid` Authorization")?;
    let mut token = None;
    let mut k = None;
    for part in params.split(',').map(str::trim) {
        match part.split_once('=') {
            Some(("t", v)) => token = Some(v),
            Some(("k", v)) => k = Some(v),
            _ => {}
        }
    }
    let (token, k) = (token.ok_or("no t=")?, k.ok_or("no k=")?);
    if k != key {
        return Err("k= is not the key ingest serves".into());
    }
    let jwt = split_jwt(token, "ES256")?;
    let verifying = VerifyingKey::from_sec1_bytes(&b64(k)?).map_err(|e| e.to_string())?;
    let signature = Signature::from_slice(&jwt.signature).map_err(|e| e.to_string())?;
    verifying
        .verify(jwt.signed.as_bytes(), &signature)
        .map_err(|_| "the JWT's signature does not verify".to_owned())?;
    let claims = jwt.claims;
    if claims["aud"] != audience {
        return Err(format!("aud {} is not {audience}", claims["aud"]));
    }
    let exp = claims["exp"].as_i64().ok_or("no exp")?;
    let now = chrono::Utc::now().timestamp();
    if exp <= now || exp > now + 24 * 3600 {
        return Err(format!("exp {exp} is not within 24 h of {now}"));
    }
    let sub = claims["sub"].as_str().ok_or("no sub")?;
    if !(sub.starts_with("mailto:") || sub.starts_with("https:")) {
        return Err(format!("sub {sub}"));
    }
    Ok(())
}

/// RFC 8291 §3.4 and RFC 8188, one record, step by step.
fn decrypt(body: &[u8], ua_secret: &SecretKey, auth: &[u8; 16]) -> Result<Vec<u8>, String> {
    // RFC 8188 §2.1: salt (16) | rs (4) | idlen (1) | keyid (idlen) | records.
    if body.len() < 21 {
        return Err("body shorter than the aes128gcm header".into());
    }
    let (salt, rest) = body.split_at(16);
    let rs = u32::from_be_bytes([rest[0], rest[1], rest[2], rest[3]]) as usize;
    let idlen = rest[4] as usize;
    let rest = &rest[5..];
    if rest.len() < idlen || idlen != 65 {
        return Err(format!("keyid of {idlen} bytes, not a P-256 public key"));
    }
    let (keyid, record) = rest.split_at(idlen);
    if record.len() > rs {
        return Err("more than one record".into());
    }
    // §3.4: the application server's public key is the keyid.
    let as_public = PublicKey::from_sec1_bytes(keyid).map_err(|_| "keyid is not a P-256 key")?;
    let ua_public = ua_secret.public_key();
    let ecdh = p256::ecdh::diffie_hellman(ua_secret.to_nonzero_scalar(), as_public.as_affine());
    // key_info = "WebPush: info" || 0x00 || ua_public || as_public
    let mut key_info = b"WebPush: info\0".to_vec();
    key_info.extend_from_slice(ua_public.to_encoded_point(false).as_bytes());
    key_info.extend_from_slice(keyid);
    // IKM = HKDF(salt = auth_secret, IKM = ecdh_secret, info = key_info, 32)
    let mut ikm = [0u8; 32];
    Hkdf::<Sha256>::new(Some(auth), ecdh.raw_secret_bytes())
        .expand(&key_info, &mut ikm)
        .map_err(|e| e.to_string())?;
    // RFC 8188 §2.2/2.3: PRK = HKDF-Extract(salt, IKM); CEK and NONCE.
    let prk = Hkdf::<Sha256>::new(Some(salt), &ikm);
    let (mut cek, mut nonce) = ([0u8; 16], [0u8; 12]);
    prk.expand(b"Content-Encoding: aes128gcm\0", &mut cek)
        .map_err(|e| e.to_string())?;
    prk.expand(b"Content-Encoding: nonce\0", &mut nonce)
        .map_err(|e| e.to_string())?;
    // The first record's sequence number is 0: the nonce as derived.
    let cipher = Aes128Gcm::new_from_slice(&cek).map_err(|e| e.to_string())?;
    let mut padded = cipher
        .decrypt(&nonce.into(), record)
        .map_err(|_| "the record does not decrypt".to_owned())?;
    // Padding: the plaintext, a 0x02 delimiter (last record), then zeros.
    while padded.last() == Some(&0) {
        padded.pop();
    }
    if padded.pop() != Some(2) {
        return Err("no last-record delimiter".into());
    }
    Ok(padded)
}
