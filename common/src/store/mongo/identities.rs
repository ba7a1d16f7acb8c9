//! Identities: properties merged and aliases unioned into what is stored,
//! with a version check instead of a transaction.

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use mongodb::bson::Document;
use serde_json::{Map, Value};

use super::{
    MAX_ATTEMPTS, MongoStore, classify,
    codec::{date, identity_from_doc, scope_filter, to_document},
    is_duplicate_key,
};
use crate::store::{
    Identity, IdentityStore, Scope, StoreError, StoreResult, model::merge_identity_fields,
};

#[async_trait]
impl IdentityStore for MongoStore {
    async fn merge_identity(
        &self,
        scope: &Scope,
        user_id: &str,
        properties: Map<String, Value>,
        aliases: Vec<String>,
        now: DateTime<Utc>,
    ) -> StoreResult<Identity> {
        self.guard
            .call("merge_identity", async {
                let mut filter = scope_filter(scope);
                filter.insert("userId", user_id);
                // Read, merge in Rust, write back only if nobody wrote in between
                // (a version check). Merging here rather than with update operators
                // keeps property names containing '.' or '$' literal.
                for _ in 0..MAX_ATTEMPTS {
                    let existing = self
                        .identities()
                        .find_one(filter.clone())
                        .await
                        .map_err(classify)?;
                    let (mut identity, version) = match &existing {
                        Some(d) => identity_from_doc(d)?,
                        None => (
                            Identity {
                                user_id: user_id.to_owned(),
                                properties: Map::new(),
                                aliases: Vec::new(),
                                created_at: now,
                                updated_at: now,
                            },
                            0,
                        ),
                    };
                    merge_identity_fields(
                        &mut identity.properties,
                        &mut identity.aliases,
                        properties.clone(),
                        aliases.clone(),
                    );
                    identity.updated_at = now;
                    let replacement = replacement(&filter, &identity, version + 1);
                    let written = if existing.is_some() {
                        let mut guard = filter.clone();
                        guard.insert("version", version);
                        self.identities()
                            .replace_one(guard, replacement)
                            .await
                            .map(|r| r.matched_count == 1)
                    } else {
                        self.identities()
                            .insert_one(replacement)
                            .await
                            .map(|_| true)
                    };
                    match written {
                        Ok(true) => return Ok(identity),
                        Ok(false) => continue,
                        Err(e) if is_duplicate_key(&e) => continue,
                        Err(e) => return Err(classify(e)),
                    }
                }
                Err(StoreError::unavailable(format!(
                    "identity {user_id} is being updated too often; try again"
                )))
            })
            .await
    }

    async fn get_identity(&self, scope: &Scope, user_id: &str) -> StoreResult<Option<Identity>> {
        self.guard
            .call("get_identity", async {
                let mut filter = scope_filter(scope);
                filter.insert("userId", user_id);
                let found = self.identities().find_one(filter).await.map_err(classify)?;
                Ok(found
                    .as_ref()
                    .map(identity_from_doc)
                    .transpose()?
                    .map(|(identity, _version)| identity))
            })
            .await
    }
}

/// The whole document of `identity` at `version`, under its `key` fields.
fn replacement(key: &Document, identity: &Identity, version: i64) -> Document {
    let mut document = key.clone();
    document.insert("properties", to_document(&identity.properties));
    document.insert("aliases", identity.aliases.clone());
    document.insert("createdAt", date(&identity.created_at));
    document.insert("updatedAt", date(&identity.updated_at));
    document.insert("version", version);
    document
}
