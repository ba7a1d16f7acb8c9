//! Which URLs Tocsin may contact: the one policy against server-side
//! request forgery. A Web Push endpoint is a URL chosen by whoever holds a
//! key that may register devices, and a destination's URL (a webhook,
//! Slack, Discord, ntfy) one chosen by an admin; either must be `https`,
//! carry no user name or password, and name a host that is, and resolves
//! only to, public addresses — unless the operator allowed it: Web Push
//! endpoints by origin (`NOTIFIER_WEBPUSH_ALLOWED_ENDPOINTS`), destinations
//! by host name or CIDR (`NOTIFIER_DESTINATIONS_ALLOW`, [`AllowedHosts`]),
//! for tests and intranet services. An allowed target may use plain http.
//!
//! Ingest checks at registration (or creation); the notifier checks again
//! at every send, resolving the name and connecting only to the addresses
//! it checked (see `notifier::http`), since a name may re-resolve.

use std::{
    net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr},
    time::Duration,
};

use url::{Host, Url};

/// Why an endpoint may not be contacted; the text is for the caller.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    #[error("must be an absolute URL")]
    NotAUrl,
    #[error("must be an https URL")]
    NotHttps,
    #[error("must not contain a user name or password")]
    Userinfo,
    #[error(
        "must be on a public address: the host is, or resolves to, a loopback, private or \
         otherwise non-public address"
    )]
    NonPublic,
}

/// An origin as the allow-list compares it: scheme, host, port (the
/// scheme's default port when the URL leaves it out).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Origin {
    scheme: String,
    host: String,
    port: u16,
}

impl Origin {
    fn of(url: &Url) -> Option<Self> {
        Some(Self {
            scheme: url.scheme().to_owned(),
            host: url.host_str()?.to_owned(),
            port: url.port_or_known_default()?,
        })
    }
}

/// The origins the operator allowed whatever their addresses.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AllowedOrigins(Vec<Origin>);

impl AllowedOrigins {
    /// Parses a comma-separated list of `scheme://host:port` (empty: none).
    /// The error says which entry is wrong.
    pub fn parse(list: &str) -> Result<Self, String> {
        let mut origins = Vec::new();
        for entry in list.split(',').map(str::trim).filter(|e| !e.is_empty()) {
            let bad = || format!("{entry:?} is not an origin (scheme://host:port)");
            let url = Url::parse(entry).map_err(|_| bad())?;
            let bare = url.path() == "/" && !entry.ends_with('/');
            if !matches!(url.scheme(), "http" | "https")
                || !url.username().is_empty()
                || url.password().is_some()
                || !bare
                || url.query().is_some()
                || url.fragment().is_some()
            {
                return Err(bad());
            }
            origins.push(Origin::of(&url).ok_or_else(bad)?);
        }
        Ok(Self(origins))
    }

    pub fn contains(&self, url: &Url) -> bool {
        Origin::of(url).is_some_and(|o| self.0.contains(&o))
    }
}

/// Hosts the operator allowed whatever their addresses, by name
/// (`ntfy.internal`) or by address block (`127.0.0.1`, `10.0.0.0/8`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AllowedHosts {
    names: Vec<String>,
    nets: Vec<ipnet::IpNet>,
}

impl AllowedHosts {
    /// Parses a comma-separated list of host names, addresses and CIDR
    /// blocks (empty: none). The error says which entry is wrong.
    pub fn parse(list: &str) -> Result<Self, String> {
        let mut hosts = Self::default();
        for entry in list.split(',').map(str::trim).filter(|e| !e.is_empty()) {
            if let Ok(net) = entry.parse::<ipnet::IpNet>() {
                hosts.nets.push(net.trunc());
            } else if let Ok(ip) = entry.trim_matches(['[', ']']).parse::<IpAddr>() {
                hosts.nets.push(ipnet::IpNet::from(ip));
            } else if let Ok(Host::Domain(name)) = Host::parse(entry) {
                hosts.names.push(name.to_ascii_lowercase());
            } else {
                return Err(format!(
                    "{entry:?} is not a host name, an IP address or a CIDR block"
                ));
            }
        }
        Ok(hosts)
    }

    /// Whether connecting to `ip` is allowed whatever kind of address it is.
    pub fn contains_ip(&self, ip: IpAddr) -> bool {
        self.nets.iter().any(|net| net.contains(&ip))
    }

    /// Whether the URL's host is allowed: its name, or its address.
    pub fn contains(&self, url: &Url) -> bool {
        match url.host() {
            Some(Host::Domain(name)) => self.names.iter().any(|n| n.eq_ignore_ascii_case(name)),
            Some(Host::Ipv4(ip)) => self.contains_ip(IpAddr::V4(ip)),
            Some(Host::Ipv6(ip)) => self.contains_ip(IpAddr::V6(ip)),
            None => false,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.names.is_empty() && self.nets.is_empty()
    }
}

/// What the policy found for an endpoint that may be contacted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Checked {
    /// Its origin is allow-listed: connect as to any trusted host.
    Allowed(Url),
    /// An https URL whose host is a public IP literal, or a name that must
    /// be resolved (and every address checked) before connecting.
    Public(Url),
}

/// How long a registration waits for the endpoint's name to resolve.
const RESOLVE_TIMEOUT: Duration = Duration::from_secs(3);

/// The endpoint policy with the operator's allow-lists.
#[derive(Debug, Clone, Default)]
pub struct EndpointPolicy {
    pub allowed: AllowedOrigins,
    pub allowed_hosts: AllowedHosts,
}

impl EndpointPolicy {
    /// Web Push's policy: origins allowed.
    pub fn new(allowed: AllowedOrigins) -> Self {
        Self {
            allowed,
            allowed_hosts: AllowedHosts::default(),
        }
    }

    /// Destinations' policy: hosts and address blocks allowed.
    pub fn hosts(allowed_hosts: AllowedHosts) -> Self {
        Self {
            allowed: AllowedOrigins::default(),
            allowed_hosts,
        }
    }

    /// Whether the resolved address `ip` may be connected to.
    pub fn reachable(&self, ip: IpAddr) -> bool {
        is_public(ip) || self.allowed_hosts.contains_ip(ip)
    }

    /// Refuses a resolution with any address that may not be connected to
    /// (one is enough for a connection to land there).
    pub fn only_reachable(&self, addrs: &[SocketAddr]) -> Result<(), Refusal> {
        if addrs.iter().all(|a| self.reachable(a.ip())) {
            Ok(())
        } else {
            Err(Refusal::NonPublic)
        }
    }

    /// Everything that can be told without DNS: the URL's form, and its
    /// host when that is an IP literal.
    pub fn check_url(&self, endpoint: &str) -> Result<Checked, Refusal> {
        let url = Url::parse(endpoint).map_err(|_| Refusal::NotAUrl)?;
        if !url.username().is_empty() || url.password().is_some() {
            return Err(Refusal::Userinfo);
        }
        if self.allowed.contains(&url) || self.allowed_hosts.contains(&url) {
            if !matches!(url.scheme(), "http" | "https") {
                return Err(Refusal::NotHttps);
            }
            return Ok(Checked::Allowed(url));
        }
        if url.scheme() != "https" {
            return Err(Refusal::NotHttps);
        }
        match url.host() {
            None => Err(Refusal::NotAUrl),
            Some(Host::Ipv4(ip)) if !is_public(IpAddr::V4(ip)) => Err(Refusal::NonPublic),
            Some(Host::Ipv6(ip)) if !is_public(IpAddr::V6(ip)) => Err(Refusal::NonPublic),
            Some(_) => Ok(Checked::Public(url)),
        }
    }

    /// [`check_url`](Self::check_url), then the addresses the name
    /// resolves to now. A name that does not resolve is let through: the
    /// notifier resolves and checks again before every send.
    pub async fn check(&self, endpoint: &str) -> Result<Checked, Refusal> {
        let checked = self.check_url(endpoint)?;
        if let Checked::Public(url) = &checked
            && let Some(Host::Domain(name)) = url.host()
        {
            let port = url.port_or_known_default().unwrap_or(443);
            let lookup = tokio::net::lookup_host((name, port));
            if let Ok(Ok(addrs)) = tokio::time::timeout(RESOLVE_TIMEOUT, lookup).await {
                let addrs: Vec<SocketAddr> = addrs.collect();
                self.only_reachable(&addrs)?;
            }
        }
        Ok(checked)
    }
}

/// Whether `ip` is a public unicast address: not loopback, private,
/// link-local, unique-local, multicast, unspecified, documentation, CGNAT,
/// benchmarking, reserved, or an IPv6 form of such an IPv4 address.
pub fn is_public(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => is_public_v4(v4),
        IpAddr::V6(v6) => is_public_v6(v6),
    }
}

fn in_v4(ip: Ipv4Addr, net: [u8; 4], len: u32) -> bool {
    let mask = u32::MAX.checked_shl(32 - len).unwrap_or(0);
    u32::from(ip) & mask == u32::from(Ipv4Addr::from(net)) & mask
}

/// IANA's IPv4 special-purpose blocks that are not globally reachable.
const NON_PUBLIC_V4: &[([u8; 4], u32)] = &[
    ([0, 0, 0, 0], 8),       // "this network", unspecified
    ([10, 0, 0, 0], 8),      // private
    ([100, 64, 0, 0], 10),   // CGNAT (shared address space)
    ([127, 0, 0, 0], 8),     // loopback
    ([169, 254, 0, 0], 16),  // link-local
    ([172, 16, 0, 0], 12),   // private
    ([192, 0, 0, 0], 24),    // IETF protocol assignments
    ([192, 0, 2, 0], 24),    // documentation (TEST-NET-1)
    ([192, 88, 99, 0], 24),  // 6to4 relay anycast (deprecated)
    ([192, 168, 0, 0], 16),  // private
    ([198, 18, 0, 0], 15),   // benchmarking
    ([198, 51, 100, 0], 24), // documentation (TEST-NET-2)
    ([203, 0, 113, 0], 24),  // documentation (TEST-NET-3)
    ([224, 0, 0, 0], 4),     // multicast
    ([240, 0, 0, 0], 4),     // reserved, and broadcast
];

fn is_public_v4(ip: Ipv4Addr) -> bool {
    !NON_PUBLIC_V4.iter().any(|(net, len)| in_v4(ip, *net, *len))
}

fn in_v6(ip: Ipv6Addr, net: [u16; 8], len: u32) -> bool {
    let mask = u128::MAX.checked_shl(128 - len).unwrap_or(0);
    u128::from(ip) & mask == u128::from(Ipv6Addr::from(net)) & mask
}

/// IPv6 blocks that are not globally reachable.
const NON_PUBLIC_V6: &[([u16; 8], u32)] = &[
    ([0, 0, 0, 0, 0, 0, 0, 0], 96), // unspecified, loopback, IPv4-compatible
    ([0x64, 0xff9b, 1, 0, 0, 0, 0, 0], 48), // local-use NAT64
    ([0x100, 0, 0, 0, 0, 0, 0, 0], 64), // discard-only
    ([0x2001, 0, 0, 0, 0, 0, 0, 0], 23), // IETF protocol assignments (Teredo…)
    ([0x2001, 0xdb8, 0, 0, 0, 0, 0, 0], 32), // documentation
    ([0x2002, 0, 0, 0, 0, 0, 0, 0], 16), // 6to4
    ([0x3fff, 0, 0, 0, 0, 0, 0, 0], 20), // documentation
    ([0xfc00, 0, 0, 0, 0, 0, 0, 0], 7), // unique local
    ([0xfe80, 0, 0, 0, 0, 0, 0, 0], 10), // link-local
    ([0xfec0, 0, 0, 0, 0, 0, 0, 0], 10), // site-local (deprecated)
    ([0xff00, 0, 0, 0, 0, 0, 0, 0], 8), // multicast
];

fn is_public_v6(ip: Ipv6Addr) -> bool {
    // IPv4-mapped and NAT64 (well-known prefix) addresses reach the IPv4
    // address they carry: judge that one.
    let embedded = Ipv4Addr::from((u128::from(ip) & 0xffff_ffff) as u32);
    if in_v6(ip, [0, 0, 0, 0, 0, 0xffff, 0, 0], 96)
        || in_v6(ip, [0x64, 0xff9b, 0, 0, 0, 0, 0, 0], 96)
    {
        return is_public_v4(embedded);
    }
    !NON_PUBLIC_V6.iter().any(|(net, len)| in_v6(ip, *net, *len))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().expect("an address")
    }

    #[test]
    fn non_public_addresses_are_refused() {
        for s in [
            "127.0.0.1",
            "127.255.0.9",
            "10.0.0.1",
            "172.16.5.4",
            "172.31.255.255",
            "192.168.1.1",
            "169.254.169.254",
            "100.64.0.1",
            "100.127.255.254",
            "0.0.0.0",
            "224.0.0.1",
            "255.255.255.255",
            "192.0.2.10",
            "198.51.100.7",
            "203.0.113.9",
            "198.18.0.1",
            "::",
            "::1",
            "fe80::1",
            "fc00::1",
            "fd12:3456::1",
            "ff02::1",
            "2001:db8::1",
            "::ffff:127.0.0.1",
            "::ffff:10.1.2.3",
            "::ffff:169.254.169.254",
            "64:ff9b::a00:1",
        ] {
            assert!(!is_public(ip(s)), "{s} must be refused");
        }
    }

    #[test]
    fn public_addresses_pass() {
        for s in [
            "8.8.8.8",
            "1.1.1.1",
            "172.32.0.1",
            "100.128.0.1",
            "142.250.74.78",
            "2606:4700:4700::1111",
            "2a00:1450:4001:82b::200a",
            "::ffff:8.8.8.8",
        ] {
            assert!(is_public(ip(s)), "{s} is public");
        }
    }

    #[test]
    fn urls_are_refused_for_their_form_before_any_lookup() {
        let policy = EndpointPolicy::default();
        assert_eq!(
            policy.check_url("http://push.example.com/x"),
            Err(Refusal::NotHttps)
        );
        assert_eq!(
            policy.check_url("https://user:pw@push.example.com/x"),
            Err(Refusal::Userinfo)
        );
        assert_eq!(
            policy.check_url("https://10.0.0.1/x"),
            Err(Refusal::NonPublic)
        );
        assert_eq!(
            policy.check_url("https://[::1]:8443/x"),
            Err(Refusal::NonPublic)
        );
        // WHATWG parsing turns numeric hosts into the address they mean.
        assert_eq!(
            policy.check_url("https://2130706433/x"),
            Err(Refusal::NonPublic)
        );
        assert_eq!(policy.check_url("not a url"), Err(Refusal::NotAUrl));
        assert!(matches!(
            policy.check_url("https://push.example.com/x"),
            Ok(Checked::Public(_))
        ));
    }

    #[test]
    fn only_an_exactly_allowed_origin_skips_the_address_checks() {
        let allowed = AllowedOrigins::parse("http://127.0.0.1:8088, https://push.intranet:9443")
            .expect("origins");
        let policy = EndpointPolicy::new(allowed);
        assert!(matches!(
            policy.check_url("http://127.0.0.1:8088/push/1"),
            Ok(Checked::Allowed(_))
        ));
        assert!(matches!(
            policy.check_url("https://push.intranet:9443/a"),
            Ok(Checked::Allowed(_))
        ));
        // Another port, another scheme: not the allowed origin.
        assert_eq!(
            policy.check_url("http://127.0.0.1:8089/push/1"),
            Err(Refusal::NotHttps)
        );
        assert_eq!(
            policy.check_url("https://127.0.0.1:8088/push/1"),
            Err(Refusal::NonPublic)
        );
        assert_eq!(
            policy.check_url("http://u@127.0.0.1:8088/push/1"),
            Err(Refusal::Userinfo)
        );
    }

    #[test]
    fn allowed_origins_must_be_bare_origins() {
        assert_eq!(
            AllowedOrigins::parse("").expect("empty"),
            AllowedOrigins::default()
        );
        for bad in [
            "127.0.0.1:80",
            "http://h:1/path",
            "ftp://h:1",
            "http://u@h:1",
        ] {
            assert!(AllowedOrigins::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn allowed_hosts_are_names_addresses_and_blocks() {
        let hosts =
            AllowedHosts::parse("127.0.0.1, 10.0.0.0/8, ntfy.Internal, ::1").expect("hosts");
        let policy = EndpointPolicy::hosts(hosts);
        for url in [
            "http://127.0.0.1:9000/hook",
            "https://10.20.30.40/x",
            "http://ntfy.internal/topic",
            "http://[::1]:80/x",
        ] {
            assert!(
                matches!(policy.check_url(url), Ok(Checked::Allowed(_))),
                "{url}"
            );
        }
        assert_eq!(
            policy.check_url("http://127.0.0.2/x"),
            Err(Refusal::NotHttps)
        );
        assert_eq!(
            policy.check_url("https://192.168.1.1/x"),
            Err(Refusal::NonPublic)
        );
        assert_eq!(
            policy.check_url("ftp://127.0.0.1/x"),
            Err(Refusal::NotHttps)
        );
        // A name resolving into an allowed block may be connected to.
        assert!(policy.reachable(ip("10.1.1.1")));
        assert!(!policy.reachable(ip("192.168.1.1")));
        assert!(AllowedHosts::parse("not a host!").is_err());
        assert!(AllowedHosts::parse("10.0.0.0/33").is_err());
        assert!(AllowedHosts::parse("").expect("empty").is_empty());
    }

    #[tokio::test]
    async fn a_name_that_resolves_to_loopback_is_refused() {
        let policy = EndpointPolicy::default();
        assert_eq!(
            policy.check("https://localhost/push").await,
            Err(Refusal::NonPublic)
        );
    }
}
