//! Group commit for MongoDB. The event inserts of concurrent requests
//! (`insert_event`, `insert_event_with_outcome`) are queued to one writer
//! per store, which sends every insert queued meanwhile as one unordered
//! `insert_many` and answers each caller only once that bulk write
//! returned: one round trip for a batch instead of one (or three) per
//! request.
//!
//! What each caller gets is its own document's fate (`bulk_insert`): a
//! duplicate `_id` (an earlier try of the same request stored it) is the
//! stored event, read back in one `find` for the whole batch; another
//! failure of its document is its own error while its batch-mates are
//! stored; a bulk write that fails as a whole is `Unavailable` (a 503) for
//! every caller, none of whom is told its event is stored. A caller that
//! stopped waiting (its deadline fired) before its batch was sent is
//! skipped, so the 503 it got is the truth.
//!
//! A channel is created by its first event. The writer remembers which
//! channels it saw exist (channels are never deleted, so that stays true)
//! and upserts only the others, once per batch each, before the events.
//!
//! After the bulk write, the users the new events name get their counts
//! (`user_counts`: one `update` command for the batch), before any caller
//! is answered; events under an alias are counted on the alias and their
//! users settled in the finishing below. A failure to write the counts is
//! logged, and the batch's callers still get their events: those are
//! stored, and a retry would find them stored and count nothing.
//!
//! After the bulk write, each new event's idempotency outcome (already in
//! the event's document) is copied to its key's record, all concurrently,
//! and only then is its caller answered: the answer the request settles
//! afterwards is never overwritten by a late copy. That finishing runs
//! beside the next batch's bulk write.

use std::{
    collections::{HashMap, HashSet},
    sync::{
        Arc,
        atomic::{AtomicU64, Ordering},
    },
};

use chrono::{DateTime, Utc};
use futures::future::join_all;
use mongodb::{
    Collection,
    bson::{Document, doc},
};
use tokio::sync::{mpsc, oneshot};
use uuid::Uuid;

use super::{
    bulk_insert::{self, Written},
    classify,
    codec::{date, event_from_doc},
    idempotency,
    identities::{self, Users},
    is_duplicate_key, user_counts,
};
use crate::store::{Event, IdempotentOutcome, Inserted, Scope, StoreError, StoreResult};

/// The most inserts one bulk write takes; the rest wait for the next one.
const MAX_BATCH: usize = 512;
/// Inserts that may wait in the queue before callers wait to queue theirs.
const QUEUE: usize = 4096;
/// Channels remembered as existing. Past this the set starts over (a
/// channel not remembered costs one upsert), so clients inventing channel
/// names cannot make it grow without bound.
const KNOWN_CHANNELS: usize = 65_536;

/// The collections the writer writes to.
#[derive(Clone)]
pub(super) struct Collections {
    pub(super) events: Collection<Document>,
    pub(super) channels: Collection<Document>,
    pub(super) idempotency: Collection<Document>,
    pub(super) users: Users,
}

/// A queued insert.
struct Pending {
    id: Uuid,
    scope: Scope,
    channel: ChannelKey,
    created_at: DateTime<Utc>,
    /// The user the event names, counted once it is stored.
    user_id: Option<String>,
    document: Document,
    outcome: Option<IdempotentOutcome>,
    reply: oneshot::Sender<StoreResult<Inserted>>,
}

impl Pending {
    /// Whether its caller still waits for the answer.
    fn wanted(&self) -> bool {
        !self.reply.is_closed()
    }
}

/// A channel: organization, project, name.
type ChannelKey = (String, String, String);

/// The handle callers queue their inserts with.
pub(super) struct Writer {
    queue: mpsc::Sender<Pending>,
    counts: Arc<Counts>,
}

#[derive(Default)]
struct Counts {
    bulk_writes: AtomicU64,
    events: AtomicU64,
    channel_upserts: AtomicU64,
}

/// What a store's group-commit writer has done since the store was
/// opened: for tests, which see batching through it, and logs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GroupCommitCounts {
    /// Bulk writes (`insert_many`) sent.
    pub bulk_writes: u64,
    /// Events they stored (new, not found already stored).
    pub events: u64,
    /// Channel upserts sent, for channels not yet known to exist.
    pub channel_upserts: u64,
    /// Inserts waiting in the queue for a batch.
    pub queued: usize,
}

impl Writer {
    /// Starts the writer on the current runtime. It stops once the handle
    /// is dropped and every queued insert is written and answered.
    pub(super) fn start(collections: Collections) -> Self {
        let (queue, rx) = mpsc::channel(QUEUE);
        let counts = Arc::new(Counts::default());
        tokio::spawn(run(rx, collections, Arc::clone(&counts)));
        Self { queue, counts }
    }

    /// Inserts `document`, the document of `event`, in the next batch, and
    /// copies `outcome` to its idempotency record if the event is new.
    pub(super) async fn insert(
        &self,
        event: &Event,
        document: Document,
        outcome: Option<IdempotentOutcome>,
    ) -> StoreResult<Inserted> {
        let (reply, answer) = oneshot::channel();
        let pending = Pending {
            id: event.id,
            scope: event.scope.clone(),
            channel: (
                event.scope.org.clone(),
                event.scope.project.clone(),
                event.channel_name.clone(),
            ),
            created_at: event.created_at,
            user_id: event.user_id.clone(),
            document,
            outcome,
            reply,
        };
        let stopped = || StoreError::unavailable("the store's writer has stopped");
        self.queue.send(pending).await.map_err(|_| stopped())?;
        answer.await.map_err(|_| stopped())?
    }

    pub(super) fn counts(&self) -> GroupCommitCounts {
        GroupCommitCounts {
            bulk_writes: self.counts.bulk_writes.load(Ordering::Relaxed),
            events: self.counts.events.load(Ordering::Relaxed),
            channel_upserts: self.counts.channel_upserts.load(Ordering::Relaxed),
            queued: self.queue.max_capacity() - self.queue.capacity(),
        }
    }
}

async fn run(mut rx: mpsc::Receiver<Pending>, to: Collections, counts: Arc<Counts>) {
    let mut known = HashSet::new();
    while let Some(first) = rx.recv().await {
        let mut batch = vec![first];
        while batch.len() < MAX_BATCH {
            match rx.try_recv() {
                Ok(pending) => batch.push(pending),
                Err(_) => break,
            }
        }
        let written = write(&to, &mut known, batch, &counts).await;
        if !written.is_empty() {
            let to_settle = count_users(&to.users, &written).await;
            tokio::spawn(finish(to.clone(), written, to_settle));
        }
    }
}

/// Creates the batch's channels not known to exist, then sends the events
/// of the callers still waiting in one bulk write: each caller with what
/// became of its event.
async fn write(
    to: &Collections,
    known: &mut HashSet<ChannelKey>,
    batch: Vec<Pending>,
    counts: &Counts,
) -> Vec<(Pending, Written)> {
    let batch: Vec<Pending> = batch.into_iter().filter(Pending::wanted).collect();
    if batch.is_empty() {
        return Vec::new();
    }
    let failed = create_channels(to, known, &batch, counts).await;
    let mut done = Vec::new();
    let mut sending = Vec::new();
    for pending in batch {
        if let Some(e) = failed.get(&pending.channel) {
            done.push((pending, Written::Failed(classify(e.clone()))));
        } else if pending.wanted() {
            sending.push(pending);
        }
        // Otherwise its caller gave up while the channels were created.
    }
    if sending.is_empty() {
        return done;
    }
    let docs: Vec<Document> = sending
        .iter_mut()
        .map(|p| std::mem::take(&mut p.document))
        .collect();
    counts.bulk_writes.fetch_add(1, Ordering::Relaxed);
    let written = bulk_insert::insert(&to.events, &docs).await;
    let new = written.iter().filter(|w| matches!(w, Written::New)).count();
    counts.events.fetch_add(new as u64, Ordering::Relaxed);
    done.extend(sending.into_iter().zip(written));
    done
}

/// Upserts each channel of `batch` not in `known`, once, concurrently, and
/// remembers the ones that exist now. Returns the channels that could not
/// be created, with why: their events are not sent.
async fn create_channels(
    to: &Collections,
    known: &mut HashSet<ChannelKey>,
    batch: &[Pending],
    counts: &Counts,
) -> HashMap<ChannelKey, mongodb::error::Error> {
    let mut unknown: HashMap<&ChannelKey, DateTime<Utc>> = HashMap::new();
    for p in batch {
        if !known.contains(&p.channel) {
            unknown.entry(&p.channel).or_insert(p.created_at);
        }
    }
    if unknown.is_empty() {
        return HashMap::new();
    }
    counts
        .channel_upserts
        .fetch_add(unknown.len() as u64, Ordering::Relaxed);
    let upserts = unknown.into_iter().map(|(key, created)| {
        let (org, project, name) = key;
        let channel = doc! { "org": org, "project": project, "name": name };
        let upsert = to
            .channels
            .update_one(
                channel,
                doc! { "$setOnInsert": { "createdAt": date(&created) } },
            )
            .upsert(true);
        async move { (key, upsert.await) }
    });
    let mut failed = HashMap::new();
    for (key, created) in join_all(upserts).await {
        match created {
            // Two first events racing to create one channel: the loser's
            // upsert hits the unique index, and the channel exists either way.
            Err(e) if !is_duplicate_key(&e) => {
                failed.insert(key.clone(), e);
            }
            _ => {
                if known.len() >= KNOWN_CHANNELS {
                    known.clear();
                }
                known.insert(key.clone());
            }
        }
    }
    failed
}

/// Counts the new events of a batch that name a user, in order with the
/// other batches (so two batches never race to make one user); returns
/// the users whose aliases they were recorded under, to settle.
async fn count_users(users: &Users, written: &[(Pending, Written)]) -> Vec<(Scope, String)> {
    let named = written.iter().filter_map(|(p, w)| match w {
        Written::New => Some((&p.scope, p.user_id.as_deref()?, p.created_at)),
        _ => None,
    });
    match user_counts::count(users, named).await {
        Ok(to_settle) => to_settle,
        Err(e) => {
            tracing::error!(error = %e, "the batch's user counters were not written");
            Vec::new()
        }
    }
}

/// Settles the users whose aliases the batch's events were recorded
/// under, reads back the events found already stored, copies the new
/// events' idempotency outcomes, then answers every caller of the batch.
async fn finish(
    to: Collections,
    written: Vec<(Pending, Written)>,
    to_settle: Vec<(Scope, String)>,
) {
    let now = crate::time::now();
    let settled = to_settle
        .iter()
        .map(|(scope, user_id)| identities::settle(&to.users, scope, user_id, now));
    for (result, (_, user_id)) in join_all(settled).await.into_iter().zip(&to_settle) {
        if let Err(e) = result {
            tracing::warn!(userId = %user_id, error = %e, "a user's aliases were not settled");
        }
    }
    let duplicates: Vec<String> = written
        .iter()
        .filter(|(_, w)| matches!(w, Written::Duplicate))
        .map(|(p, _)| p.id.to_string())
        .collect();
    let existing = stored_events(&to.events, duplicates).await;
    // The outcome is in the event already: a copy that fails is found
    // there by the key's next claim (`idempotency::begin`).
    let records = &to.idempotency;
    let copies = written.iter().filter_map(|(p, w)| match (w, &p.outcome) {
        (Written::New, Some(outcome)) => Some(async move {
            let copied =
                idempotency::complete_in(records, &p.scope, &outcome.key, &outcome.response).await;
            if let Err(e) = copied {
                tracing::warn!(eventId = %p.id, error = %e, "idempotency outcome kept in the event only");
            }
        }),
        _ => None,
    });
    join_all(copies).await;
    for (pending, written) in written {
        let answer = match written {
            Written::New => Ok(Inserted::New),
            Written::Failed(e) => Err(e),
            Written::Duplicate => match &existing {
                Ok(found) => match found.get(&pending.id.to_string()) {
                    Some(stored) => event_from_doc(stored).map(|e| Inserted::Existing(Box::new(e))),
                    None => Err(StoreError::Backend(anyhow::anyhow!(
                        "event {} vanished",
                        pending.id
                    ))),
                },
                Err(e) => Err(classify(e.clone())),
            },
        };
        // The caller may have stopped waiting since; nothing to do then.
        let _ = pending.reply.send(answer);
    }
}

/// The stored documents of the events `ids`, by id, in one query.
async fn stored_events(
    events: &Collection<Document>,
    ids: Vec<String>,
) -> Result<HashMap<String, Document>, mongodb::error::Error> {
    use futures::TryStreamExt as _;
    if ids.is_empty() {
        return Ok(HashMap::new());
    }
    let found: Vec<Document> = events
        .find(doc! { "_id": { "$in": ids } })
        .await?
        .try_collect()
        .await?;
    Ok(found
        .into_iter()
        .filter_map(|d| Some((d.get_str("_id").ok()?.to_owned(), d)))
        .collect())
}
