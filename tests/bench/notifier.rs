//! The notifier benchmark (tests/bench/run.sh): ingest and its embedded
//! notifier in this process, wired as the `ingest` binary wires them
//! (through the test harness, `TestApp`), on a fresh SQLite directory, with
//! N devices and a push provider that answers "delivered" after a fixed
//! latency (5 ms stands for APNs over an open HTTP/2 connection). Two
//! phases, each recording M events with `notify: true` through the HTTP
//! API, 32 at a time:
//!
//! - live: the pushes go out while the events are recorded; it prints how
//!   fast, and how long the backlog took to drain after the last event was
//!   accepted. Pushes can go no faster than events are recorded here, so
//!   this phase says whether the notifier keeps up, not how fast it is;
//! - backlog: the provider holds every push until all M events are
//!   recorded, then answers; the time from then until the N × M pushes are
//!   all sent is the notifier's own rate, the figure the target (20,000
//!   pushes/s with a 5 ms provider) is about.
//!
//! ```text
//! bench-notifier [--devices N=4] [--events M=2000] [--latency-ms 5]
//!                [--timeout-s 300]
//! ```
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
use tokio::sync::watch;

/// Events in flight at once while recording them.
const CLIENTS: usize = 32;

/// Answers every push "delivered" after `latency`, and counts them; while
/// `open` is false, pushes wait for it before their latency starts.
struct Delayed {
    latency: Duration,
    sent: AtomicU64,
    open: watch::Receiver<bool>,
}

#[async_trait]
impl PushProvider for Delayed {
    fn name(&self) -> &'static str {
        "bench"
    }

    async fn send(&self, _push: &Push) -> PushOutcome {
        // Never closed while pushes are sent: the sender lives in main.
        let _ = self.open.clone().wait_for(|open| *open).await;
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

/// Records `events` events asking for a push, `CLIENTS` at a time, and
/// returns how long that took.
async fn record(app: &TestApp, key: &str, events: usize) -> anyhow::Result<Duration> {
    let started = Instant::now();
    let body = json!({ "channelName": "bench", "title": "Benchmark event", "notify": true });
    let refused = futures::stream::iter(0..events)
        .map(|_| app.post_event(key, &body))
        .buffer_unordered(CLIENTS)
        .filter(|r| std::future::ready(r.status().as_u16() != 201))
        .count()
        .await;
    anyhow::ensure!(refused == 0, "{refused} events were not recorded");
    Ok(started.elapsed())
}

/// Waits until the provider has sent `expected` pushes in all or `deadline`
/// passes; returns how many it has sent.
async fn sent_by(provider: &Delayed, expected: u64, deadline: Instant) -> u64 {
    while provider.sent.load(Ordering::Relaxed) < expected && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    provider.sent.load(Ordering::Relaxed)
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = args()?;
    let (open, opened) = watch::channel(true);
    let provider = Arc::new(Delayed {
        latency: args.latency,
        sent: AtomicU64::new(0),
        open: opened,
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
    let secs = |d: Duration| d.as_secs_f64();
    let per_phase = (args.devices * args.events) as u64;
    println!(
        "notifier: {} devices, {} events per phase, provider latency {} ms",
        args.devices,
        args.events,
        args.latency.as_millis()
    );

    // Live: pushes go out as the events come in.
    let started = Instant::now();
    let posted = record(&app, &key, args.events).await?;
    let sent = sent_by(&provider, per_phase, started + args.timeout).await;
    let done = started.elapsed();
    println!(
        "live: events recorded in {:.2} s ({:.0}/s); pushes: {sent} of {per_phase} in {:.2} s from the first event ({:.0} pushes/s)",
        secs(posted),
        args.events as f64 / secs(posted),
        secs(done),
        sent as f64 / secs(done)
    );
    if sent < per_phase {
        println!(
            "live: backlog NOT drained: {} pushes left {:.2} s after the last event",
            per_phase - sent,
            secs(done - posted)
        );
        app.stop().await;
        std::process::exit(1);
    }
    println!(
        "live: backlog drained {:.2} s after the last event was accepted",
        secs(done - posted)
    );

    // Backlog: every push of the phase waits, then all are let go at once.
    open.send_replace(false);
    let posted = record(&app, &key, args.events).await?;
    let released = Instant::now();
    open.send_replace(true);
    let sent = sent_by(&provider, 2 * per_phase, released + args.timeout).await - per_phase;
    let drained = released.elapsed();
    app.stop().await;
    println!(
        "backlog: {per_phase} pushes held while {} events were recorded ({:.2} s); {sent} sent {:.2} s after release: {:.0} pushes/s",
        args.events,
        secs(posted),
        secs(drained),
        sent as f64 / secs(drained)
    );
    if sent < per_phase {
        println!("backlog: NOT drained: {} pushes left", per_phase - sent);
        std::process::exit(1);
    }
    Ok(())
}
