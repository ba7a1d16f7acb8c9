//! Secrets this service issues, API keys and admin tokens: how they are
//! made and how they are recognised.
//!
//! A secret is 256 random bits, so a fast cryptographic hash (SHA-256) is the
//! right way to store it: unlike a password there is nothing to brute-force,
//! and lookups stay a single indexed read. Each kind has its own prefix, so
//! a secret of one kind is told from the other without a lookup.

use base64::Engine as _;
use rand::RngCore as _;
use sha2::{Digest, Sha256};

/// Every API key starts with this, so a leaked one is easy to recognise
/// (secret scanners, logs) and malformed ones are rejected without a lookup.
pub const SECRET_PREFIX: &str = "tocsin_";

/// Every admin token starts with this.
pub const ADMIN_TOKEN_PREFIX: &str = "tocsinadm_";

/// How many random characters follow a prefix (32 bytes, base64url).
const RANDOM_LEN: usize = 43;

/// How many random characters are kept in the clear to tell secrets apart.
const DISPLAY_RANDOM_LEN: usize = 6;

/// The two kinds of secret: an API key (for `/v1`) and an admin token (for
/// `/admin/v1`). Neither is accepted where the other is expected.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SecretKind {
    ApiKey,
    AdminToken,
}

impl SecretKind {
    pub fn prefix(self) -> &'static str {
        match self {
            Self::ApiKey => SECRET_PREFIX,
            Self::AdminToken => ADMIN_TOKEN_PREFIX,
        }
    }

    /// A new random secret of this kind: the prefix and 43 URL-safe
    /// characters.
    pub fn generate(self) -> String {
        let mut bytes = [0u8; 32];
        rand::rng().fill_bytes(&mut bytes);
        format!(
            "{}{}",
            self.prefix(),
            base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
        )
    }

    /// The kind whose shape `s` has, if any.
    pub fn of(s: &str) -> Option<Self> {
        [Self::ApiKey, Self::AdminToken].into_iter().find(|kind| {
            s.strip_prefix(kind.prefix()).is_some_and(|rest| {
                rest.len() == RANDOM_LEN
                    && rest
                        .bytes()
                        .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
            })
        })
    }
}

/// Creates a new random API key secret.
pub fn generate_secret() -> String {
    SecretKind::ApiKey.generate()
}

/// Creates a new random admin token.
pub fn generate_admin_token() -> String {
    SecretKind::AdminToken.generate()
}

/// Whether a string has the shape of an API key this service issues.
pub fn looks_like_secret(s: &str) -> bool {
    SecretKind::of(s) == Some(SecretKind::ApiKey)
}

/// The stored form of a secret: lowercase hex SHA-256.
pub fn hash_secret(secret: &str) -> String {
    hex::encode(Sha256::digest(secret.as_bytes()))
}

/// The part of a secret (of either kind) that may be shown in listings: its
/// prefix and the first few random characters.
pub fn display_prefix(secret: &str) -> String {
    let prefix_len = match SecretKind::of(secret) {
        Some(kind) => kind.prefix().len(),
        None => SECRET_PREFIX.len(),
    };
    secret
        .chars()
        .take(prefix_len + DISPLAY_RANDOM_LEN)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generated_secrets_are_well_formed_and_distinct() {
        let a = generate_secret();
        let b = generate_secret();
        assert!(looks_like_secret(&a), "{a}");
        assert_ne!(a, b);
        assert_eq!(hash_secret(&a).len(), 64);
        assert_ne!(hash_secret(&a), hash_secret(&b));
    }

    #[test]
    fn strings_of_the_wrong_shape_are_not_secrets() {
        assert!(!looks_like_secret("tocsin_short"));
        assert!(!looks_like_secret(&format!("other_{}", "a".repeat(43))));
        assert!(!looks_like_secret(&format!("tocsin_{}", "!".repeat(43))));
    }

    #[test]
    fn each_kind_is_recognised_and_never_taken_for_the_other() {
        let key = generate_secret();
        let token = generate_admin_token();
        assert_eq!(SecretKind::of(&key), Some(SecretKind::ApiKey));
        assert_eq!(SecretKind::of(&token), Some(SecretKind::AdminToken));
        assert!(!looks_like_secret(&token));
        assert_eq!(SecretKind::of("tocsinadm_short"), None);
        assert_eq!(display_prefix(&key).len(), "tocsin_".len() + 6);
        assert!(display_prefix(&token).starts_with("tocsinadm_"));
        assert_eq!(display_prefix(&token).len(), "tocsinadm_".len() + 6);
    }
}
