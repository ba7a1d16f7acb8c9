//! The Firebase service account: the JSON key file Google's console gives
//! (`project_id`, `client_email`, `private_key`, `token_uri`), read once at
//! start, and the signed assertion (RFC 7523) its RSA key makes for each
//! access-token request: RS256 by jwt-simple, on the pure-Rust `rsa` crate
//! (its "pure-rust" feature, already used for VAPID), so no C crypto.

use std::path::Path;

use serde::{Deserialize, Serialize};
use web_push_native::jwt_simple::prelude::{
    Claims, Duration as JwtDuration, RS256KeyPair, RSAKeyPairLike as _,
};

/// What an access token for sending FCM messages is asked for.
pub const MESSAGING_SCOPE: &str = "https://www.googleapis.com/auth/firebase.messaging";

/// Google accepts assertions valid for at most an hour.
const ASSERTION_SECONDS: u64 = 3600;

/// The fields of the key file the notifier uses; the others are ignored.
#[derive(Deserialize)]
struct KeyFile {
    project_id: String,
    client_email: String,
    private_key: String,
    private_key_id: Option<String>,
    token_uri: String,
}

/// A service account that may send messages for its Firebase project.
pub struct ServiceAccount {
    pub project_id: String,
    pub client_email: String,
    /// Where access tokens are granted. Chosen by the operator (it comes
    /// from their key file), never by an API caller, so it is not held to
    /// the endpoint policy Web Push subscriptions are.
    pub token_uri: String,
    key: RS256KeyPair,
}

impl std::fmt::Debug for ServiceAccount {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServiceAccount")
            .field("project_id", &self.project_id)
            .field("client_email", &self.client_email)
            .field("token_uri", &self.token_uri)
            .finish_non_exhaustive()
    }
}

/// The claim Google's token endpoint needs beside the registered ones.
#[derive(Serialize, Deserialize)]
struct ScopeClaim {
    scope: String,
}

impl ServiceAccount {
    /// Reads the key file at `path`; the error says what is wrong without
    /// quoting the key.
    pub fn load(path: &Path) -> Result<Self, String> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
        Self::parse(&text).map_err(|e| format!("{}: {e}", path.display()))
    }

    /// Reads a key file's JSON.
    pub fn parse(json: &str) -> Result<Self, String> {
        let file: KeyFile = serde_json::from_str(json)
            // serde's message names the field and the position, never a value.
            .map_err(|e| format!("is not a service-account key file: {e}"))?;
        let project_ok = !file.project_id.is_empty()
            && file
                .project_id
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"-.:".contains(&b));
        if !project_ok {
            return Err("project_id is not a Firebase project id".into());
        }
        if file.client_email.trim().is_empty() {
            return Err("client_email is empty".into());
        }
        let token_uri = url::Url::parse(&file.token_uri)
            .ok()
            .filter(|u| matches!(u.scheme(), "https" | "http"))
            .ok_or("token_uri is not an http(s) URL")?;
        let mut key = RS256KeyPair::from_pem(&file.private_key)
            .map_err(|_| "private_key is not an RSA private key in PEM")?;
        if let Some(id) = file.private_key_id.as_deref().filter(|id| !id.is_empty()) {
            key = key.with_key_id(id);
        }
        Ok(Self {
            project_id: file.project_id,
            client_email: file.client_email,
            token_uri: token_uri.into(),
            key,
        })
    }

    /// The signed JWT that asks `token_uri` for an FCM access token (the
    /// JWT bearer grant): issued by the account, for the messaging scope,
    /// addressed to the token endpoint, valid for an hour.
    pub fn assertion(&self) -> Result<String, String> {
        let mut claims = Claims::with_custom_claims(
            ScopeClaim {
                scope: MESSAGING_SCOPE.into(),
            },
            JwtDuration::from_secs(ASSERTION_SECONDS),
        )
        .with_issuer(&self.client_email)
        .with_audience(&self.token_uri);
        // Google documents iss, scope, aud, exp and iat: no `nbf`.
        claims.invalid_before = None;
        self.key
            .sign(claims)
            .map_err(|e| format!("signing the token request failed: {e}"))
    }
}

#[cfg(test)]
mod tests {
    use web_push_native::jwt_simple::prelude::{RSAPublicKeyLike as _, VerificationOptions};

    use super::*;

    fn key_file(key: &RS256KeyPair) -> String {
        serde_json::json!({
            "type": "service_account",
            "project_id": "tocsin-test",
            "private_key_id": "k1",
            "private_key": key.to_pem().expect("pem"),
            "client_email": "tocsin@tocsin-test.iam.gserviceaccount.com",
            "token_uri": "https://oauth2.googleapis.com/token",
        })
        .to_string()
    }

    #[test]
    fn the_assertion_carries_googles_claims_and_verifies_with_the_key() {
        let key = RS256KeyPair::generate(2048).expect("a key");
        let account = ServiceAccount::parse(&key_file(&key)).expect("parses");
        let jwt = account.assertion().expect("signs");
        let claims = key
            .public_key()
            .verify_token::<ScopeClaim>(&jwt, Some(VerificationOptions::default()))
            .expect("verifies");
        assert_eq!(claims.custom.scope, MESSAGING_SCOPE);
        assert_eq!(
            claims.issuer.as_deref(),
            Some("tocsin@tocsin-test.iam.gserviceaccount.com")
        );
        assert!(claims.invalid_before.is_none());
        let lifetime = claims.expires_at.expect("exp") - claims.issued_at.expect("iat");
        assert_eq!(lifetime.as_secs(), ASSERTION_SECONDS);
    }

    #[test]
    fn a_bad_file_is_refused_without_quoting_the_key() {
        let err = ServiceAccount::parse(r#"{"project_id":"p"}"#).expect_err("fields missing");
        assert!(err.contains("client_email"), "{err}");
        let bad_key = serde_json::json!({
            "project_id": "p", "client_email": "a@b", "token_uri": "https://t",
            "private_key": "-----BEGIN PRIVATE KEY-----\nc2VjcmV0\n-----END PRIVATE KEY-----\n",
        });
        let err = ServiceAccount::parse(&bad_key.to_string()).expect_err("bad key");
        assert!(err.contains("private_key"), "{err}");
        assert!(!err.contains("c2VjcmV0"), "{err}");
        let bad_project = bad_key.to_string().replace("\"p\"", "\"../x\"");
        assert!(ServiceAccount::parse(&bad_project).is_err());
    }
}
