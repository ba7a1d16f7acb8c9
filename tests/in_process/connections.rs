//! Connections, on raw sockets against the real server: a client that
//! trickles its header or sends nothing is disconnected after the header
//! timeout, a kept-alive connection after the (longer) idle timeout, and at
//! the connection cap a newcomer waits until a connection closes.

use std::time::Duration;

use tocsin_tests::{StoreKind, TestApp, TestConfig};
use tokio::{
    io::{AsyncReadExt as _, AsyncWriteExt as _},
    net::TcpStream,
    time::timeout,
};

/// Far longer than any timeout configured here: only a server that never
/// closes runs into it.
const DEADLINE: Duration = Duration::from_secs(30);

async fn spawn(
    header_read_timeout_ms: u64,
    idle_timeout_ms: u64,
    max_connections: usize,
) -> TestApp {
    let mut test = TestConfig::new(StoreKind::Sqlite);
    test.config.header_read_timeout_ms = header_read_timeout_ms.try_into().expect("non-zero");
    test.config.idle_timeout_ms = idle_timeout_ms.try_into().expect("non-zero");
    test.config.max_connections = max_connections;
    TestApp::spawn_with(test).await
}

async fn connect(app: &TestApp) -> TcpStream {
    let addr = app.base.trim_start_matches("http://");
    TcpStream::connect(addr).await.expect("connects")
}

/// Reads until the server closes the connection (end of stream or reset);
/// returns what it sent, or `None` if it kept the connection open.
async fn until_closed(stream: &mut TcpStream) -> Option<Vec<u8>> {
    let mut received = Vec::new();
    let read = timeout(DEADLINE, async {
        let mut buf = [0u8; 1024];
        loop {
            match stream.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(n) => received.extend_from_slice(&buf[..n]),
            }
        }
    })
    .await;
    read.ok().map(|()| received)
}

/// Sends `GET /healthz` on a kept-alive connection and reads the whole
/// response; returns its status line.
async fn get_healthz(stream: &mut TcpStream) -> String {
    stream
        .write_all(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        .await
        .expect("request sent");
    read_response(stream).await
}

/// Reads one response with a `Content-Length` body; returns its status line.
async fn read_response(stream: &mut TcpStream) -> String {
    let mut received = Vec::new();
    let mut buf = [0u8; 1024];
    loop {
        if let Some(end) = received.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&received[..end]).to_string();
            let length: usize = head
                .lines()
                .find_map(|l| {
                    l.to_ascii_lowercase()
                        .strip_prefix("content-length:")
                        .map(|v| v.trim().parse().expect("a length"))
                })
                .expect("Content-Length");
            if received.len() >= end + 4 + length {
                return head.lines().next().unwrap_or_default().to_owned();
            }
        }
        let n = stream.read(&mut buf).await.expect("response read");
        assert!(n > 0, "closed mid-response: {received:?}");
        received.extend_from_slice(&buf[..n]);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_trickling_its_header_is_disconnected() {
    let app = spawn(1000, 60_000, 100).await;
    let stream = connect(&app).await;
    let (mut reader, mut writer) = stream.into_split();
    // One byte every 100 ms: each arrives long before the timeout, the
    // header never does.
    let trickle = tokio::spawn(async move {
        let head = b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ";
        for byte in head.iter().chain(std::iter::repeat(&b'a')) {
            if writer.write_all(&[*byte]).await.is_err() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    });
    let mut received = Vec::new();
    let closed = timeout(DEADLINE, reader.read_to_end(&mut received)).await;
    trickle.abort();
    assert!(closed.is_ok(), "the trickling connection is still open");
    assert!(
        !String::from_utf8_lossy(&received).contains(" 200 "),
        "{received:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_sends_nothing_is_disconnected() {
    let app = spawn(1000, 60_000, 100).await;
    let mut stream = connect(&app).await;
    let received = until_closed(&mut stream).await;
    assert_eq!(received, Some(Vec::new()), "closed without a response");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_kept_alive_connection_is_closed_after_the_idle_timeout() {
    let app = spawn(500, 10_000, 100).await;
    let mut stream = connect(&app).await;
    assert_eq!(get_healthz(&mut stream).await, "HTTP/1.1 200 OK");
    // Idle for four header timeouts: between requests the idle timeout
    // applies, not the header one.
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(get_healthz(&mut stream).await, "HTTP/1.1 200 OK");
    let received = until_closed(&mut stream).await;
    assert_eq!(received, Some(Vec::new()), "closed once idle, nothing sent");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn at_the_connection_cap_a_newcomer_waits_for_a_free_slot() {
    let app = spawn(60_000, 60_000, 3).await;
    let mut first = connect(&app).await;
    let mut second = connect(&app).await;
    assert_eq!(get_healthz(&mut first).await, "HTTP/1.1 200 OK");
    assert_eq!(get_healthz(&mut second).await, "HTTP/1.1 200 OK");
    // The scrape's own connection is the third, kept in the client's pool.
    let open = app
        .scrape()
        .await
        .value("tocsin_http_open_connections", &[]);
    assert_eq!(open, 3.0);

    let mut newcomer = connect(&app).await;
    newcomer
        .write_all(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        .await
        .expect("request sent");
    let mut byte = [0u8; 1];
    let early = timeout(Duration::from_secs(1), newcomer.read(&mut byte)).await;
    assert!(
        early.is_err(),
        "served while 3 connections are open: {early:?}"
    );

    drop(first);
    let status = timeout(DEADLINE, read_response(&mut newcomer))
        .await
        .expect("served once a connection closed");
    assert_eq!(status, "HTTP/1.1 200 OK");
    drop(second);
}
