//! The `healthcheck` subcommand of both binaries: asks the service's own
//! readiness endpoint and exits 0 only on 200. Container images carry no
//! curl or shell, so the binary checks itself.

use std::{
    io::{Read as _, Write as _},
    net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, TcpStream},
    time::Duration,
};

use anyhow::{Context as _, bail};

/// How long the health check waits for each step before calling the
/// service not ready (below the images' 6 s HEALTHCHECK timeout).
const TIMEOUT: Duration = Duration::from_secs(5);

/// The `healthcheck` subcommand: is the service on `listen` ready?
pub fn ready(listen: SocketAddr) -> anyhow::Result<()> {
    check(listen, "/readyz", TIMEOUT)
}

/// GETs `path` from the service listening on `listen` and returns Ok when it
/// answers 200. A wildcard address (`0.0.0.0`, `::`) is asked on loopback.
pub fn check(listen: SocketAddr, path: &str, timeout: Duration) -> anyhow::Result<()> {
    let addr = reachable(listen);
    let mut stream = TcpStream::connect_timeout(&addr, timeout)
        .with_context(|| format!("connecting to {addr}"))?;
    stream.set_read_timeout(Some(timeout))?;
    stream.set_write_timeout(Some(timeout))?;
    // HTTP/1.0 without keep-alive: the server closes after one response.
    write!(
        stream,
        "GET {path} HTTP/1.0\r\nHost: {addr}\r\nUser-Agent: tocsin-healthcheck\r\n\r\n"
    )?;
    let mut head = [0u8; 64];
    let n = stream.read(&mut head).context("reading the response")?;
    let status_line = String::from_utf8_lossy(&head[..n]);
    let status = status_line.split_whitespace().nth(1).unwrap_or("");
    if status != "200" {
        bail!(
            "{path} answered {:?}",
            status_line.lines().next().unwrap_or("")
        );
    }
    Ok(())
}

fn reachable(listen: SocketAddr) -> SocketAddr {
    let ip = match listen.ip() {
        IpAddr::V4(ip) if ip.is_unspecified() => IpAddr::V4(Ipv4Addr::LOCALHOST),
        IpAddr::V6(ip) if ip.is_unspecified() => IpAddr::V6(Ipv6Addr::LOCALHOST),
        ip => ip,
    };
    SocketAddr::new(ip, listen.port())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wildcard_addresses_are_asked_on_loopback() {
        let any: SocketAddr = "0.0.0.0:8080".parse().expect("addr");
        assert_eq!(reachable(any), "127.0.0.1:8080".parse().expect("addr"));
        let any6: SocketAddr = "[::]:9090".parse().expect("addr");
        assert_eq!(reachable(any6), "[::1]:9090".parse().expect("addr"));
        let host: SocketAddr = "10.0.0.5:80".parse().expect("addr");
        assert_eq!(reachable(host), host);
    }

    #[test]
    fn a_closed_port_fails() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let addr = listener.local_addr().expect("addr");
        drop(listener);
        assert!(check(addr, "/readyz", Duration::from_secs(1)).is_err());
    }
}
