//! The notifier benchmark (tests/bench/run.sh): ingest and its embedded
//! notifier in this process, wired as the `ingest` binary wires them
//! (through the test harness, `TestApp`), on a fresh SQLite directory, with
//! N devices and a push provider that answers "delivered" after a fixed
//! latency (5 ms stands for APNs over an open HTTP/2 connection). M events
//! with `notify: true` are recorded through the HTTP API, 32 at a time;
//! it prints how fast the pushes went out and how long the backlog took to
//! drain after the last event was accepted.
//!
//!   bench-notifier [--devices N=4] [--events M=2000] [--latency-ms 5]
//!                  [--timeout-s 300]
//!
//! The notifier's settings come from the environment as in embedded mode
//! (`NOTIFIER_CONCURRENCY`, …). Exits 1 when the pushes do not all go out
//! before the timeout.

use std::{
    sync::{
        Arc,
        atomic::{AtomicU64, Ordering},
    },
    time::{Duration, Instant},
};

use async_trait::async_trait;
use futures::StreamExt as _;
use notifier::push::{Push, PushOutcome, PushProvider};
use serde_json::json;
use tocsin_tests::{Embedded, StoreKind, TestApp, TestConfig};

/// Events in flight at once while recording them.
const CLIENTS: usize = 32;

/// Answers every push "delivered" after `latency`, and counts them.
struct Delayed {
    latency: Duration,
    sent: AtomicU64,
}

#[async_trait]
impl PushProvider for Delayed {
    fn name(&self) -> &'static str {
        "bench"
    }

    async fn send(&self, _push: &Push) -> PushOutcome {
        tokio::time::sleep(self.latency).await;
        self.sent.fetch_add(1, Ordering::Relaxed);
        PushOutcome::Delivered { apns_id: None }
    }
}

struct Args {
    devices: usize,
    events: usize,
    latency: Duration,
    timeout: Duration,
}

fn args() -> anyhow::Result<Args> {
    let mut parsed = Args {
        devices: 4,
        events: 2000,
        latency: Duration::from_millis(5),
        timeout: Duration::from_secs(300),
    };
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        let value: u64 = args
            .next()
            .ok_or_else(|| anyhow::anyhow!("{flag} needs a value"))?
            .parse()?;
        match flag.as_str() {
            "--devices" => parsed.devices = usize::try_from(value)?,
            "--events" => parsed.events = usize::try_from(value)?,
            "--latency-ms" => parsed.latency = Duration::from_millis(value),
            "--timeout-s" => parsed.timeout = Duration::from_secs(value),
            _ => anyhow::bail!(
                "usage: bench-notifier [--devices N] [--events M] [--latency-ms MS] [--timeout-s S]"
            ),
        }
    }
    Ok(parsed)
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = args()?;
    let provider = Arc::new(Delayed {
        latency: args.latency,
        sent: AtomicU64::new(0),
    });
    let mut settings = notifier::Config::load(None)?;
    settings.listen = "127.0.0.1:0".into();
    let embedded = Embedded {
        provider: Some(provider.clone()),
        notifier: settings,
    };
    let app = TestApp::spawn_with_options(TestConfig::new(StoreKind::Sqlite), embedded).await;
    let key = app.create_key("bench", "notifier", Some(u32::MAX)).await;
    for device in 0..args.devices {
        let body = json!({ "token": format!("{device:064x}"), "environment": "sandbox" });
        let status = app.post("/v1/devices", &key, &body).await.status();
        anyhow::ensure!(status.is_success(), "registering a device: {status}");
    }

    let started = Instant::now();
    let body = json!({ "channelName": "bench", "title": "Benchmark event", "notify": true });
    let refused = futures::stream::iter(0..args.events)
        .map(|_| app.post_event(&key, &body))
        .buffer_unordered(CLIENTS)
        .filter(|r| std::future::ready(r.status().as_u16() != 201))
        .count()
        .await;
    anyhow::ensure!(refused == 0, "{refused} events were not recorded");
    let posted = started.elapsed();

    let expected = (args.devices * args.events) as u64;
    let deadline = started + args.timeout;
    while provider.sent.load(Ordering::Relaxed) < expected && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    let done = started.elapsed();
    let sent = provider.sent.load(Ordering::Relaxed);
    let secs = |d: Duration| d.as_secs_f64();
    println!(
        "notifier: {} devices, {} events, provider latency {} ms",
        args.devices,
        args.events,
        args.latency.as_millis()
    );
    println!(
        "events recorded in {:.2} s ({:.0}/s)",
        secs(posted),
        args.events as f64 / secs(posted)
    );
    println!(
        "pushes: {sent} of {expected} in {:.2} s from the first event: {:.0} pushes/s",
        secs(done),
        sent as f64 / secs(done)
    );
    app.stop().await;
    if sent < expected {
        println!(
            "backlog NOT drained: {} pushes left {:.2} s after the last event",
            expected - sent,
            secs(done - posted)
        );
        std::process::exit(1);
    }
    println!(
        "backlog drained {:.2} s after the last event was accepted",
        secs(done - posted)
    );
    Ok(())
}
