//! A TCP proxy a test can cut and restore, to take a store or a broker away
//! from a running service and give it back. Cutting can refuse (connections
//! close at once) or black-hole (connections stay open and nothing answers,
//! the failure that makes clients hang without deadlines). Pausing holds
//! the bytes in flight until the proxy forwards again, so a test can keep a
//! request on the wire while others queue behind it.

use std::{
    net::SocketAddr,
    sync::{
        Arc,
        atomic::{AtomicU8, Ordering},
    },
};

use tokio::{
    io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt},
    net::{TcpListener, TcpStream},
    sync::watch,
};

const FORWARD: u8 = 0;
const REFUSE: u8 = 1;
const BLACKHOLE: u8 = 2;
const PAUSE: u8 = 3;

/// Forwards connections from a local port to `upstream` while open.
pub struct Proxy {
    addr: SocketAddr,
    mode: Arc<AtomicU8>,
    changed: watch::Sender<u64>,
    task: tokio::task::JoinHandle<()>,
}

impl Proxy {
    /// A proxy in front of the tests' RabbitMQ, and the AMQP URL that
    /// reaches the broker through it.
    pub async fn to_broker() -> (Self, String) {
        let url = crate::amqp_url();
        let upstream = tokio::net::lookup_host("127.0.0.1:5672")
            .await
            .expect("resolves")
            .next()
            .expect("address");
        let proxy = Self::start(upstream).await;
        let through = url.replace("127.0.0.1:5672", &proxy.addr().to_string());
        (proxy, through)
    }

    /// A proxy in front of the tests' MongoDB-compatible server, and the
    /// URI that reaches it through the proxy (a direct connection, so the
    /// driver does not go around it to the addresses the server reports).
    pub async fn to_mongo() -> (Self, String) {
        let uri = crate::mongo_uri();
        let host = uri
            .trim_start_matches("mongodb://")
            .split(['/', '?'])
            .next()
            .expect("host in URI")
            .to_owned();
        let upstream = tokio::net::lookup_host(&host)
            .await
            .expect("resolves")
            .next()
            .expect("an address");
        let proxy = Self::start(upstream).await;
        let through = format!("mongodb://{}/?directConnection=true", proxy.addr());
        (proxy, through)
    }

    pub async fn start(upstream: SocketAddr) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("proxy binds");
        let addr = listener.local_addr().expect("proxy address");
        let mode = Arc::new(AtomicU8::new(FORWARD));
        let (changed, _) = watch::channel(0u64);
        let task = {
            let mode = Arc::clone(&mode);
            let changed = changed.clone();
            tokio::spawn(async move {
                loop {
                    let Ok((client, _)) = listener.accept().await else {
                        return;
                    };
                    let mode = Arc::clone(&mode);
                    let mut changed = changed.subscribe();
                    tokio::spawn(async move {
                        match mode.load(Ordering::SeqCst) {
                            REFUSE => return,
                            BLACKHOLE => return hold(client, None, &mut changed).await,
                            _ => {}
                        }
                        let Ok(server) = TcpStream::connect(upstream).await else {
                            return;
                        };
                        let (mut client, mut server) = (client, server);
                        let cut = {
                            let (from_client, to_client) = client.split();
                            let (from_server, to_server) = server.split();
                            let flowing = futures::future::join(
                                pipe(from_client, to_server, &mode, changed.clone()),
                                pipe(from_server, to_client, &mode, changed.clone()),
                            );
                            tokio::select! {
                                _ = flowing => return,
                                cut = until_cut(&mode, &mut changed) => cut,
                            }
                        };
                        if cut == BLACKHOLE {
                            hold(client, Some(server), &mut changed).await;
                        }
                    });
                }
            })
        };
        Self {
            addr,
            mode,
            changed,
            task,
        }
    }

    /// The address clients should connect to.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Closes every live connection and refuses new ones.
    pub fn cut(&self) {
        self.set(REFUSE);
    }

    /// Keeps connections open but lets nothing through, in either direction.
    pub fn blackhole(&self) {
        self.set(BLACKHOLE);
    }

    /// Keeps connections open and holds what they carry, in either
    /// direction, until [`Proxy::restore`] forwards it.
    pub fn pause(&self) {
        self.set(PAUSE);
    }

    /// Forwards again: new connections, and what a pause held.
    pub fn restore(&self) {
        self.set(FORWARD);
    }

    fn set(&self, mode: u8) {
        self.mode.store(mode, Ordering::SeqCst);
        self.changed.send_modify(|n| *n += 1);
    }
}

/// Copies `from` to `to` until `from` ends, holding what it read while
/// the proxy is paused.
async fn pipe(
    mut from: impl AsyncRead + Unpin,
    mut to: impl AsyncWrite + Unpin,
    mode: &AtomicU8,
    mut changed: watch::Receiver<u64>,
) {
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = match from.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        let mut now = mode.load(Ordering::SeqCst);
        while now == PAUSE {
            if changed.changed().await.is_err() {
                return;
            }
            now = mode.load(Ordering::SeqCst);
        }
        // A cut loses what a pause held, as a broken link would.
        if now == REFUSE || now == BLACKHOLE {
            return;
        }
        if to.write_all(&buf[..n]).await.is_err() {
            return;
        }
    }
    let _ = to.shutdown().await;
}

/// Waits until the proxy cuts live connections (refuses or black-holes)
/// and says which; a pause or a restore leaves them be.
async fn until_cut(mode: &AtomicU8, changed: &mut watch::Receiver<u64>) -> u8 {
    loop {
        if changed.changed().await.is_err() {
            return REFUSE;
        }
        let now = mode.load(Ordering::SeqCst);
        if now == REFUSE || now == BLACKHOLE {
            return now;
        }
    }
}

/// Holds sockets open and silent until the proxy's mode changes again.
async fn hold(client: TcpStream, server: Option<TcpStream>, changed: &mut watch::Receiver<u64>) {
    let _ = changed.changed().await;
    drop((client, server));
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}
