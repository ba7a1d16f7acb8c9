//! API key secrets: how they are made and how they are recognised.
//!
//! A secret is 256 random bits, so a fast cryptographic hash (SHA-256) is the
//! right way to store it: unlike a password there is nothing to brute-force,
//! and lookups stay a single indexed read.

use base64::Engine as _;
use rand::RngCore as _;
use sha2::{Digest, Sha256};

/// Every secret starts with this, so a leaked one is easy to recognise
/// (secret scanners, logs) and malformed ones are rejected without a lookup.
pub const SECRET_PREFIX: &str = "tocsin_";

/// How many characters of a secret are kept in the clear to tell keys apart.
const DISPLAY_PREFIX_LEN: usize = SECRET_PREFIX.len() + 6;

/// Creates a new random secret: the prefix followed by 43 URL-safe characters.
pub fn generate_secret() -> String {
    let mut bytes = [0u8; 32];
    rand::rng().fill_bytes(&mut bytes);
    format!(
        "{SECRET_PREFIX}{}",
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
    )
}

/// Whether a string has the shape of a secret this service issues.
pub fn looks_like_secret(s: &str) -> bool {
    s.strip_prefix(SECRET_PREFIX).is_some_and(|rest| {
        rest.len() == 43
            && rest
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
    })
}

/// The stored form of a secret: lowercase hex SHA-256.
pub fn hash_secret(secret: &str) -> String {
    hex::encode(Sha256::digest(secret.as_bytes()))
}

/// The part of a secret that may be shown in listings.
pub fn display_prefix(secret: &str) -> String {
    secret.chars().take(DISPLAY_PREFIX_LEN).collect()
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
}
