//! Retention: with `INGEST_RETENTION_DAYS` set, events older than that are
//! deleted with their deliveries, and so are the summaries of held alerts
//! sent before then (with their pushes' deliveries), in the background, in
//! bounded batches (a short write transaction each, so requests keep
//! flowing). Every replica
//! may run it: deleting what another already deleted is a no-op.

use std::{num::NonZeroU32, sync::Arc, time::Duration};

use common::store::{Purged, Store, StoreResult};
use tokio::sync::watch;

use crate::metrics::{IngestMetrics, RetentionLabels};

/// What retention keeps and how it works through the rest.
#[derive(Debug, Clone, Copy)]
pub struct Retention {
    pub keep_days: NonZeroU32,
    pub interval: Duration,
    pub batch: NonZeroU32,
}

impl Retention {
    /// Every `interval`, until `stop` turns true.
    pub async fn run(
        self,
        store: Arc<dyn Store>,
        metrics: IngestMetrics,
        mut stop: watch::Receiver<bool>,
    ) {
        loop {
            match self.pass(store.as_ref(), &metrics).await {
                Ok(purged) if purged.events + purged.summaries > 0 => {
                    tracing::info!(
                        events = purged.events,
                        deliveries = purged.deliveries,
                        summaries = purged.summaries,
                        "retention removed old events"
                    );
                }
                Ok(_) => {}
                Err(e) => tracing::warn!(error = %e, "retention failed; retrying later"),
            }
            tokio::select! {
                _ = tokio::time::sleep(self.interval) => {}
                _ = stop.wait_for(|stop| *stop) => return,
            }
        }
    }

    /// Deletes batch after batch until nothing old is left.
    async fn pass(&self, store: &dyn Store, metrics: &IngestMetrics) -> StoreResult<Purged> {
        let cutoff = common::time::now() - chrono::Duration::days(i64::from(self.keep_days.get()));
        let mut total = Purged::default();
        let batch = self.batch.get();
        loop {
            let purged = store.purge_events(cutoff, batch).await?;
            Self::count(metrics, &purged, &mut total);
            if purged.events < u64::from(batch) {
                break;
            }
        }
        loop {
            let purged = store.purge_summaries(cutoff, batch).await?;
            Self::count(metrics, &purged, &mut total);
            if purged.summaries < u64::from(batch) {
                return Ok(total);
            }
        }
    }

    fn count(metrics: &IngestMetrics, purged: &Purged, total: &mut Purged) {
        for (record, n) in [
            ("events", purged.events),
            ("deliveries", purged.deliveries),
            ("summaries", purged.summaries),
        ] {
            metrics
                .retention_removed
                .get_or_create(&RetentionLabels { record })
                .inc_by(n);
        }
        total.events += purged.events;
        total.deliveries += purged.deliveries;
        total.summaries += purged.summaries;
    }
}
