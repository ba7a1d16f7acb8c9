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
    let result = events.insert_many(docs).ordered(false).await;
    match fates(result.map(drop), docs.len()) {
        Some(written) => written,
        // A server may refuse the whole command for a duplicate key
        // without saying which document had it (the test server does, and
        // then stores none of them): each document is inserted alone.
        None => one_by_one(events, docs).await,
    }
}

/// What became of each of the `n` documents of an unordered bulk insert
/// that ended with `result`; `None` when the server did not say.
fn fates(result: mongodb::error::Result<()>, n: usize) -> Option<Vec<Written>> {
    let e = match result {
        Ok(()) => return Some((0..n).map(|_| Written::New).collect()),
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
            let mut written: Vec<Written> = (0..n).map(|_| Written::New).collect();
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
            Some(written)
        }
        _ if is_duplicate_key(&e) => None,
        // The batch failed as a whole (unreachable, no server, a write
        // concern not met): none of it is reported stored. Whatever did
        // reach the disk is found by the retry, under the same event id.
        _ => Some(
            (0..n)
                .map(|_| {
                    Written::Failed(StoreError::Unavailable(
                        anyhow::Error::new(e.clone()).context("the batch's bulk write failed"),
                    ))
                })
                .collect(),
        ),
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

#[cfg(test)]
mod tests {
    //! How each kind of answer of a bulk insert is read, MongoDB's own
    //! (which the test server does not give) included.

    use std::sync::Arc;

    use mongodb::{
        bson::{self, doc},
        error::{CommandError, Error},
    };

    use super::*;

    fn insert_many_error(reply: Document) -> mongodb::error::Result<()> {
        let e: InsertManyError = bson::from_document(reply).expect("an insert_many error");
        Err(Error::from(ErrorKind::InsertMany(e)))
    }

    fn kinds(written: &[Written]) -> Vec<&'static str> {
        written
            .iter()
            .map(|w| match w {
                Written::New => "new",
                Written::Duplicate => "duplicate",
                Written::Failed(StoreError::Unavailable(_)) => "unavailable",
                Written::Failed(StoreError::Backend(_)) => "failed",
            })
            .collect()
    }

    #[test]
    fn each_document_named_by_the_server_gets_its_own_fate_and_the_others_are_stored() {
        let result = insert_many_error(doc! { "writeErrors": [
            { "index": 1, "code": 11000, "errmsg": "E11000 duplicate key" },
            { "index": 2, "code": 121, "errmsg": "Document failed validation" },
        ]});
        let written = fates(result, 4).expect("the server said which");
        assert_eq!(kinds(&written), ["new", "duplicate", "failed", "new"]);
        let Written::Failed(e) = &written[2] else {
            unreachable!()
        };
        assert!(e.to_string().contains("Document failed validation"), "{e}");
    }

    #[test]
    fn a_batch_that_failed_as_a_whole_is_unavailable_for_every_document() {
        let unreachable = Err(Error::from(ErrorKind::Io(Arc::new(
            std::io::ErrorKind::ConnectionReset.into(),
        ))));
        let not_durable = insert_many_error(doc! {
            "writeErrors": [{ "index": 0, "code": 11000, "errmsg": "E11000 duplicate key" }],
            "writeConcernError": { "code": 64, "codeName": "WriteConcernFailed", "errmsg": "timed out" },
        });
        for result in [unreachable, not_durable] {
            let written = fates(result, 3).expect("known");
            assert_eq!(kinds(&written), ["unavailable"; 3]);
        }
    }

    #[test]
    fn a_duplicate_key_for_the_whole_command_leaves_each_document_to_be_inserted_alone() {
        let e: CommandError = bson::from_document(doc! {
            "code": 11000, "codeName": "DuplicateKey", "errmsg": "E11000 duplicate key",
        })
        .expect("a command error");
        assert!(fates(Err(Error::from(ErrorKind::Command(e))), 3).is_none());
    }

    #[test]
    fn a_batch_stored_whole_is_new_for_every_document() {
        assert_eq!(kinds(&fates(Ok(()), 2).expect("known")), ["new", "new"]);
    }
}
