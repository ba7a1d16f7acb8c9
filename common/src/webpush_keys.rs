//! The keys of a Web Push subscription (RFC 8291 §3): the browser's P-256
//! public key (`p256dh`, an uncompressed SEC1 point) and its 16-byte
//! authentication secret (`auth`), both base64url. Decoded in one place so
//! that registration refuses exactly the subscriptions the notifier could
//! never encrypt to: a key of the right length that is not a point on the
//! curve would otherwise be stored and fail every push.

use base64::{Engine as _, engine::general_purpose::URL_SAFE_NO_PAD};
use p256::PublicKey;

/// A subscription's keys, decoded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SubscriptionKeys {
    pub p256dh: PublicKey,
    pub auth: [u8; 16],
}

/// Which key is unusable, and why (the message a client is shown).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum KeyFault {
    #[error("{0}")]
    P256dh(&'static str),
    #[error("{0}")]
    Auth(&'static str),
}

impl SubscriptionKeys {
    /// Decodes `p256dh` and `auth` as a browser's `PushSubscription.toJSON()`
    /// gives them (base64url; padding, which some browsers add, is allowed).
    pub fn decode(p256dh: &str, auth: &str) -> Result<Self, KeyFault> {
        let point = base64url(p256dh).ok_or(KeyFault::P256dh("is not base64url"))?;
        // RFC 8291 §3.1: the uncompressed form, 0x04 and two coordinates.
        if point.len() != 65 || point[0] != 0x04 {
            return Err(KeyFault::P256dh(
                "is not an uncompressed P-256 public key (65 bytes starting with 0x04)",
            ));
        }
        let p256dh = PublicKey::from_sec1_bytes(&point)
            .map_err(|_| KeyFault::P256dh("is not a point on the P-256 curve"))?;
        let auth = base64url(auth)
            .ok_or(KeyFault::Auth("is not base64url"))?
            .try_into()
            .map_err(|_| KeyFault::Auth("is not a 16-byte secret"))?;
        Ok(Self { p256dh, auth })
    }
}

fn base64url(text: &str) -> Option<Vec<u8>> {
    URL_SAFE_NO_PAD.decode(text.trim_end_matches('=')).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A real browser subscription's keys (RFC 8291 Appendix A's user agent).
    const P256DH: &str =
        "BCVxsr7N_eNgVRqvHtD0zTZsEc6-VV-JvLexhqUzORcxaOzi6-AYWXvTBHm4bjyPjs7Vd8pZGH6SRpkNtoIAiw4";
    const AUTH: &str = "BTBZMqHH6r4Tts7J_aSIgg";

    #[test]
    fn a_browsers_keys_decode() {
        let keys = SubscriptionKeys::decode(P256DH, AUTH).expect("valid keys");
        assert_eq!(keys.auth.len(), 16);
        // Padding, as some browsers send it, changes nothing.
        assert_eq!(
            SubscriptionKeys::decode(&format!("{P256DH}="), &format!("{AUTH}==")),
            Ok(keys)
        );
    }

    #[test]
    fn a_point_off_the_curve_is_refused() {
        // 65 bytes, the uncompressed tag, coordinates (1, 1): y² ≠ x³ - 3x + b.
        let mut raw = [0u8; 65];
        raw[0] = 0x04;
        raw[32] = 1;
        raw[64] = 1;
        let off_curve = URL_SAFE_NO_PAD.encode(raw);
        assert_eq!(
            SubscriptionKeys::decode(&off_curve, AUTH),
            Err(KeyFault::P256dh("is not a point on the P-256 curve"))
        );
    }

    #[test]
    fn other_shapes_are_refused_by_the_key_at_fault() {
        let compressed = URL_SAFE_NO_PAD.encode([2u8; 33]);
        assert!(matches!(
            SubscriptionKeys::decode(&compressed, AUTH),
            Err(KeyFault::P256dh(_))
        ));
        assert!(matches!(
            SubscriptionKeys::decode("not base64!", AUTH),
            Err(KeyFault::P256dh(_))
        ));
        assert_eq!(
            SubscriptionKeys::decode(P256DH, "c2hvcnQ"),
            Err(KeyFault::Auth("is not a 16-byte secret"))
        );
    }
}
