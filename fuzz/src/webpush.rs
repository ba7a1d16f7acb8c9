//! `webpush`: the checks a Web Push subscription meets at registration,
//! without the network. The input is an endpoint URL for
//! `EndpointPolicy::check_url` (`common/src/endpoint.rs`; its DNS-resolving
//! sibling `check` is never called), under no allow-list and under one; an
//! allow-list for `AllowedOrigins::parse`; and, split at its first line
//! break, a subscription's `p256dh` and `auth` for
//! `SubscriptionKeys::decode` (`common/src/webpush_keys.rs`).
//!
//! An endpoint let through is the URL as given, carries no user name or
//! password, and is either of an allowed origin or an `https` URL whose
//! host, when an IP literal, is public by the standard library's own
//! tests as well (an independent view of the same rule). Keys taken are
//! the bytes the text encodes: a 65-byte uncompressed point and a 16-byte
//! secret.

use std::{
    net::{Ipv4Addr, Ipv6Addr},
    sync::LazyLock,
};

use base64::{Engine as _, engine::general_purpose::URL_SAFE_NO_PAD};
use common::{
    endpoint::{AllowedOrigins, Checked, EndpointPolicy},
    webpush_keys::SubscriptionKeys,
};
use url::{Host, Url};

/// No allow-list (production), and one with the kinds of origin operators
/// allow (a test push service on loopback, an intranet one).
static POLICIES: LazyLock<[EndpointPolicy; 2]> = LazyLock::new(|| {
    let allowed = AllowedOrigins::parse("http://127.0.0.1:8089, https://push.intranet.test:8443")
        .expect("an allow-list");
    [EndpointPolicy::default(), EndpointPolicy::new(allowed)]
});

pub fn check(input: &[u8]) {
    let text = String::from_utf8_lossy(input);
    for policy in POLICIES.iter() {
        match policy.check_url(&text) {
            Ok(Checked::Allowed(url)) => {
                assert!(policy.allowed.contains(&url), "{url} is not allowed");
                is_the_url_given(&url, &text);
            }
            Ok(Checked::Public(url)) => {
                is_the_url_given(&url, &text);
                assert_eq!(url.scheme(), "https", "{url}");
                match url.host() {
                    Some(Host::Ipv4(ip)) => assert!(!non_public_v4(ip), "{url}"),
                    Some(Host::Ipv6(ip)) => assert!(!non_public_v6(ip), "{url}"),
                    Some(Host::Domain(_)) => {}
                    None => panic!("{url} has no host"),
                }
            }
            Err(refusal) => assert!(!refusal.to_string().is_empty()),
        }
    }
    keys_are_sound(&text);
    if let Ok(allowed) = AllowedOrigins::parse(&text) {
        // An origin the list parsed from allows itself.
        for entry in text.split(',').map(str::trim).filter(|e| !e.is_empty()) {
            let url = Url::parse(entry).expect("an allowed entry is a URL");
            assert!(allowed.contains(&url), "{entry:?} not in its own list");
        }
    }
}

fn keys_are_sound(text: &str) {
    let (p256dh, auth) = text.split_once('\n').unwrap_or((text, ""));
    let Ok(keys) = SubscriptionKeys::decode(p256dh, auth) else {
        return;
    };
    let bytes = |text: &str| URL_SAFE_NO_PAD.decode(text.trim_end_matches('='));
    let point = bytes(p256dh).expect("a p256dh taken is base64url");
    assert!(point.len() == 65 && point[0] == 0x04, "{p256dh:?}");
    assert_eq!(bytes(auth).as_deref(), Ok(&keys.auth[..]), "{auth:?}");
}

/// Let through as parsed from the text, without a user name or password.
fn is_the_url_given(url: &Url, text: &str) {
    assert_eq!(Url::parse(text).as_ref(), Ok(url));
    assert!(
        url.username().is_empty() && url.password().is_none(),
        "{url}"
    );
}

/// What the standard library itself says is not to be reached.
fn non_public_v4(ip: Ipv4Addr) -> bool {
    ip.is_loopback()
        || ip.is_private()
        || ip.is_link_local()
        || ip.is_unspecified()
        || ip.is_broadcast()
        || ip.is_multicast()
        || ip.is_documentation()
}

fn non_public_v6(ip: Ipv6Addr) -> bool {
    if let Some(v4) = ip.to_ipv4_mapped() {
        return non_public_v4(v4);
    }
    ip.is_loopback()
        || ip.is_unspecified()
        || ip.is_multicast()
        || ip.is_unique_local()
        || ip.is_unicast_link_local()
}
