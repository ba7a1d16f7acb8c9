//! The application server's VAPID key (RFC 8292): a raw P-256 private key in
//! base64url, the public key browsers subscribe with, and the signed
//! `Authorization: vapid t=<JWT>, k=<public key>` header of each push.

use base64::{Engine as _, engine::general_purpose::URL_SAFE_NO_PAD};
use web_push_native::jwt_simple::prelude::{
    Claims, Duration as JwtDuration, ECDSAP256KeyPairLike as _, ECDSAP256PublicKeyLike as _,
    ES256KeyPair,
};

/// How long a VAPID token is valid: RFC 8292 allows at most 24 hours.
const TOKEN_HOURS: u64 = 12;

/// A VAPID signing key with the contact (`sub`) it signs with.
pub struct VapidKey {
    key: ES256KeyPair,
    subject: String,
}

impl std::fmt::Debug for VapidKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("VapidKey")
            .field("public_key", &self.public_key())
            .field("subject", &self.subject)
            .finish_non_exhaustive()
    }
}

impl VapidKey {
    /// Reads a base64url raw private key; the error says what is wrong
    /// without echoing the key.
    pub fn parse(private_key: &str, subject: &str) -> Result<Self, String> {
        let raw = URL_SAFE_NO_PAD
            .decode(private_key.trim().trim_end_matches('='))
            .map_err(|_| "is not base64url".to_owned())?;
        if raw.len() != 32 {
            return Err(format!(
                "must be a raw 32-byte P-256 private key, got {} bytes",
                raw.len()
            ));
        }
        let key = ES256KeyPair::from_bytes(&raw)
            .map_err(|_| "is not a valid P-256 private key".to_owned())?;
        Ok(Self {
            key,
            subject: subject.to_owned(),
        })
    }

    /// A new random key pair: `(private, public)`, both base64url.
    pub fn generate() -> (String, String) {
        let key = ES256KeyPair::generate();
        let public = key.public_key().public_key().to_bytes_uncompressed();
        (
            URL_SAFE_NO_PAD.encode(key.to_bytes()),
            URL_SAFE_NO_PAD.encode(public),
        )
    }

    /// The uncompressed public key, base64url: what browsers subscribe with
    /// (`applicationServerKey`) and ingest serves at `GET /v1/webpush/key`.
    pub fn public_key(&self) -> String {
        URL_SAFE_NO_PAD.encode(self.key.public_key().public_key().to_bytes_uncompressed())
    }

    /// The `Authorization` header for a push to an endpoint of `origin`
    /// (`scheme://host[:port]`, the JWT's audience).
    pub fn authorization(&self, origin: &str) -> Result<String, String> {
        let claims = Claims::create(JwtDuration::from_hours(TOKEN_HOURS))
            .with_audience(origin)
            .with_subject(&self.subject);
        let token = self.key.sign(claims).map_err(|e| e.to_string())?;
        Ok(format!("vapid t={token}, k={}", self.public_key()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_generated_key_reads_back_with_its_public_key() {
        let (private, public) = VapidKey::generate();
        let key = VapidKey::parse(&private, "mailto:ops@example.com").expect("reads");
        assert_eq!(key.public_key(), public);
        assert_eq!(URL_SAFE_NO_PAD.decode(&public).expect("b64").len(), 65);
    }

    #[test]
    fn a_bad_key_is_refused_without_echoing_it() {
        let err = VapidKey::parse("c2hvcnQ", "mailto:a@b").expect_err("too short");
        assert!(!err.contains("c2hvcnQ"), "{err}");
        assert!(VapidKey::parse("!!", "mailto:a@b").is_err());
    }
}
