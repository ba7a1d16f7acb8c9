//! One unordered bulk insert of a batch's events, and what became of each
//! document, however the server reports it.

use mongodb::{
    Collection,
    bson::Document,
    error::{ErrorKind, InsertManyError},
};

use super::{DUPLICATE_KEY, classify, is_duplicate_key};
use crate::store::StoreError;

/// What became of one document of a bulk insert.
#[derive(Debug)]
pub(super) enum Written {
    /// Stored.
    New,
    /// Not stored: a document with its `_id` is stored already.
    Duplicate,
    /// Not stored, or not known to be.
    Failed(StoreError),
}

/// Inserts `docs` in one unordered `insert_many`: for each document, in
/// order, what became of it.
pub(super) async fn insert(events: &Collection<Document>, docs: &[Document]) -> Vec<Written> {
    let e = match events.insert_many(docs).ordered(false).await {
        Ok(_) => return docs.iter().map(|_| Written::New).collect(),
        Err(e) => e,
    };
    match e.kind.as_ref() {
        // MongoDB stores the other documents of an unordered insert and
        // names the failed ones by their index.
        ErrorKind::InsertMany(InsertManyError {
            write_errors: Some(errors),
            write_concern_error: None,
            ..
        }) => {
            let mut written: Vec<Written> = docs.iter().map(|_| Written::New).collect();
            for error in errors {
                if let Some(slot) = written.get_mut(error.index) {
                    *slot = if error.code == DUPLICATE_KEY {
                        Written::Duplicate
                    } else {
                        Written::Failed(StoreError::Backend(anyhow::anyhow!(
                            "the event was not stored: {} (code {})",
                            error.message,
                            error.code
                        )))
                    };
                }
            }
            written
        }
        // A server may refuse the whole command for a duplicate key
        // without saying which document had it (the test server does, and
        // then stores none of them): each document is inserted alone.
        _ if is_duplicate_key(&e) => one_by_one(events, docs).await,
        // The batch failed as a whole (unreachable, no server, a write
        // concern not met): none of it is reported stored. Whatever did
        // reach the disk is found by the retry, under the same event id.
        _ => docs
            .iter()
            .map(|_| {
                Written::Failed(StoreError::Unavailable(
                    anyhow::Error::new(e.clone()).context("the batch's bulk write failed"),
                ))
            })
            .collect(),
    }
}

/// Inserts each of `docs` on its own, concurrently.
async fn one_by_one(events: &Collection<Document>, docs: &[Document]) -> Vec<Written> {
    let inserts = docs.iter().map(|doc| async move {
        match events.insert_one(doc).await {
            Ok(_) => Written::New,
            Err(e) if is_duplicate_key(&e) => Written::Duplicate,
            Err(e) => Written::Failed(classify(e)),
        }
    });
    futures::future::join_all(inserts).await
}
