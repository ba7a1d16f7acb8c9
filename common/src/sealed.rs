//! Secrets at rest: a destination's settings (bot tokens, webhook URLs
//! that are credentials, signing secrets) are sealed with
//! XChaCha20-Poly1305 under the operator's key before they are stored, so
//! a copy of the database (a backup, a dump, a replica) holds none of
//! them in the clear. The key is `TOCSIN_SECRETS_KEY` (32 bytes,
//! base64), given to ingest and every notifier; with the embedded SQLite
//! store and no key set, one is generated into `secrets.key` beside the
//! database (mode 0600), which protects a copy of the database file but
//! not of the whole data directory.
//!
//! A sealed text is `v1.` and the base64 of the 24-byte random nonce and
//! the ciphertext. The destination's id is the associated data: a sealed
//! text moved onto another destination does not open.

use std::path::Path;

use base64::{Engine as _, engine::general_purpose::STANDARD};
use chacha20poly1305::{
    KeyInit as _, XChaCha20Poly1305, XNonce,
    aead::{Aead as _, Payload},
};
use rand::RngCore as _;

/// The key file's name in the data directory.
pub const KEY_FILE: &str = "secrets.key";

/// Why a secret could not be sealed or opened; never carries the secret.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SealError {
    #[error("the secrets key must be 32 bytes in base64 (for example `openssl rand -base64 32`)")]
    BadKey,
    #[error("the sealed settings are not in a known form")]
    Malformed,
    #[error(
        "the sealed settings do not open with this secrets key (was TOCSIN_SECRETS_KEY changed?)"
    )]
    WrongKey,
}

/// The key secrets are sealed with.
#[derive(Clone)]
pub struct SecretsKey(XChaCha20Poly1305);

impl std::fmt::Debug for SecretsKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SecretsKey(***)")
    }
}

impl SecretsKey {
    /// A key from its base64 text.
    pub fn from_base64(text: &str) -> Result<Self, SealError> {
        let bytes = STANDARD
            .decode(text.trim())
            .map_err(|_| SealError::BadKey)?;
        let key: [u8; 32] = bytes.try_into().map_err(|_| SealError::BadKey)?;
        Ok(Self(XChaCha20Poly1305::new(&key.into())))
    }

    /// The key in `dir/secrets.key`, generated there first when there is
    /// none (readable by its owner only).
    pub fn load_or_create(dir: &Path) -> anyhow::Result<Self> {
        use anyhow::Context as _;
        let path = dir.join(KEY_FILE);
        if !path.exists() {
            std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
            let mut key = [0u8; 32];
            rand::rng().fill_bytes(&mut key);
            write_private(&path, STANDARD.encode(key).as_bytes())
                .with_context(|| format!("writing {}", path.display()))?;
        }
        let text = std::fs::read_to_string(&path)
            .with_context(|| format!("reading {}", path.display()))?;
        Self::from_base64(&text).with_context(|| format!("the key in {}", path.display()))
    }

    /// Seals `plain`, bound to `id`.
    pub fn seal(&self, plain: &[u8], id: &[u8]) -> String {
        let mut nonce = [0u8; 24];
        rand::rng().fill_bytes(&mut nonce);
        let sealed = self
            .0
            .encrypt(
                XNonce::from_slice(&nonce),
                Payload {
                    msg: plain,
                    aad: id,
                },
            )
            .expect("XChaCha20-Poly1305 seals any message that fits in memory");
        let mut bytes = nonce.to_vec();
        bytes.extend_from_slice(&sealed);
        format!("v1.{}", STANDARD.encode(bytes))
    }

    /// Opens what [`seal`](Self::seal) sealed under the same `id`.
    pub fn open(&self, sealed: &str, id: &[u8]) -> Result<Vec<u8>, SealError> {
        let bytes = sealed
            .strip_prefix("v1.")
            .and_then(|b| STANDARD.decode(b).ok())
            .filter(|b| b.len() > 24)
            .ok_or(SealError::Malformed)?;
        let (nonce, sealed) = bytes.split_at(24);
        self.0
            .decrypt(
                XNonce::from_slice(nonce),
                Payload {
                    msg: sealed,
                    aad: id,
                },
            )
            .map_err(|_| SealError::WrongKey)
    }
}

/// Writes a new file only its owner may read.
fn write_private(path: &Path, contents: &[u8]) -> std::io::Result<()> {
    use std::io::Write as _;
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    match options.open(path) {
        Ok(mut file) => file.write_all(contents),
        // Another process of this data directory made it first: use theirs.
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key() -> SecretsKey {
        SecretsKey::from_base64(&STANDARD.encode([7u8; 32])).expect("key")
    }

    #[test]
    fn sealed_text_opens_only_with_its_key_and_id() {
        let sealed = key().seal(b"xoxb-secret-token", b"dest-1");
        assert!(sealed.starts_with("v1."));
        assert!(!sealed.contains("xoxb"));
        assert_eq!(
            key().open(&sealed, b"dest-1").expect("opens"),
            b"xoxb-secret-token"
        );
        assert_eq!(key().open(&sealed, b"dest-2"), Err(SealError::WrongKey));
        let other = SecretsKey::from_base64(&STANDARD.encode([8u8; 32])).expect("key");
        assert_eq!(other.open(&sealed, b"dest-1"), Err(SealError::WrongKey));
        assert_eq!(key().open("v2.abc", b"dest-1"), Err(SealError::Malformed));
        // A fresh nonce each time: the same secret never seals the same.
        assert_ne!(sealed, key().seal(b"xoxb-secret-token", b"dest-1"));
    }

    #[test]
    fn keys_must_be_32_bytes_of_base64() {
        assert!(SecretsKey::from_base64("short").is_err());
        assert!(SecretsKey::from_base64(&STANDARD.encode([1u8; 16])).is_err());
    }

    #[test]
    fn a_key_file_is_made_once_and_private() {
        let dir = tempfile::tempdir().expect("dir");
        let first = SecretsKey::load_or_create(dir.path()).expect("made");
        let sealed = first.seal(b"s", b"id");
        let again = SecretsKey::load_or_create(dir.path()).expect("read");
        assert_eq!(again.open(&sealed, b"id").expect("same key"), b"s");
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt as _;
            let mode = std::fs::metadata(dir.path().join(KEY_FILE))
                .expect("file")
                .permissions()
                .mode();
            assert_eq!(mode & 0o777, 0o600);
        }
    }
}
