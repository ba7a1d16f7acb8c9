//! Destinations: one document each, listed per scope in id order (ids are
//! time-ordered, so oldest first). A change replaces only the version it
//! read (its `updatedAt`); a health record is one atomic update.

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use mongodb::bson::{self, Bson, Document, doc};
use uuid::Uuid;

use super::{
    MAX_ATTEMPTS, MongoStore, classify,
    codec::{corrupt, date, opt_date, opt_str, scope_filter},
    find_all,
};
use crate::{
    destination::DestinationKind,
    rules::AlertRules,
    store::{
        Attempt, Destination, DestinationPatch, DestinationStore, Health, Scope, StoreError,
        StoreResult,
    },
};

fn to_doc(d: &Destination) -> Document {
    doc! {
        "_id": d.id.to_string(),
        "org": &d.scope.org,
        "project": &d.scope.project,
        "kind": d.kind.as_str(),
        "name": &d.name,
        "enabled": d.enabled,
        "disabledReason": d.disabled_reason.clone(),
        "channels": d.rules.channels.clone(),
        "rules": bson::to_document(&d.rules).expect("rules always serialise"),
        "masked": bson::to_bson(&d.masked).expect("JSON always converts"),
        "sealed": &d.sealed,
        "failures": i64::from(d.health.failures),
        "lastError": d.health.last_error.clone(),
        "lastErrorAt": d.health.last_error_at.as_ref().map(date),
        "lastDeliveredAt": d.health.last_delivered_at.as_ref().map(date),
        "createdAt": date(&d.created_at),
        "updatedAt": date(&d.updated_at),
    }
}

fn from_doc(d: &Document) -> StoreResult<Destination> {
    let parse = || -> anyhow::Result<Destination> {
        let channels = match d.get("channels") {
            Some(list @ Bson::Array(_)) => Some(bson::from_bson(list.clone())?),
            _ => None,
        };
        Ok(Destination {
            id: Uuid::parse_str(d.get_str("_id")?)?,
            scope: Scope::new(d.get_str("org")?, d.get_str("project")?),
            kind: DestinationKind::parse(d.get_str("kind")?)
                .ok_or_else(|| anyhow::anyhow!("unknown kind"))?,
            name: d.get_str("name")?.to_owned(),
            enabled: d.get_bool("enabled")?,
            disabled_reason: opt_str(d, "disabledReason"),
            rules: AlertRules {
                channels,
                ..bson::from_document(d.get_document("rules")?.clone())?
            },
            masked: bson::from_bson(d.get("masked").cloned().unwrap_or_default())?,
            sealed: d.get_str("sealed")?.to_owned(),
            health: Health {
                failures: u32::try_from(d.get_i64("failures")?)?,
                last_error: opt_str(d, "lastError"),
                last_error_at: opt_date(d, "lastErrorAt"),
                last_delivered_at: opt_date(d, "lastDeliveredAt"),
            },
            created_at: d.get_datetime("createdAt")?.to_chrono(),
            updated_at: d.get_datetime("updatedAt")?.to_chrono(),
        })
    };
    parse().map_err(|e| corrupt("destination", e))
}

impl MongoStore {
    fn destination_filter(scope: &Scope, id: Uuid) -> Document {
        let mut filter = scope_filter(scope);
        filter.insert("_id", id.to_string());
        filter
    }
}

#[async_trait]
impl DestinationStore for MongoStore {
    async fn create_destination(&self, destination: &Destination) -> StoreResult<()> {
        self.guard
            .call("create_destination", async {
                let _changing = self.changing();
                self.destinations()
                    .insert_one(to_doc(destination))
                    .await
                    .map_err(classify)?;
                Ok(())
            })
            .await
    }

    async fn list_destinations(&self, scope: &Scope) -> StoreResult<Vec<Destination>> {
        self.guard
            .call("list_destinations", async {
                let docs = find_all(
                    &self.destinations(),
                    scope_filter(scope),
                    doc! { "_id": 1 },
                    None,
                )
                .await?;
                docs.iter().map(from_doc).collect()
            })
            .await
    }

    async fn get_destination(&self, scope: &Scope, id: Uuid) -> StoreResult<Option<Destination>> {
        self.guard
            .call("get_destination", async {
                self.destinations()
                    .find_one(Self::destination_filter(scope, id))
                    .await
                    .map_err(classify)?
                    .as_ref()
                    .map(from_doc)
                    .transpose()
            })
            .await
    }

    async fn update_destination(
        &self,
        scope: &Scope,
        id: Uuid,
        patch: &DestinationPatch,
        now: DateTime<Utc>,
    ) -> StoreResult<Option<Destination>> {
        self.guard
            .call("update_destination", async {
                let _changing = self.changing();
                let filter = Self::destination_filter(scope, id);
                // Read, change, and replace only the version read: a lost
                // race reads again, so two changes to different fields stay.
                for _ in 0..MAX_ATTEMPTS {
                    let Some(read) = self
                        .destinations()
                        .find_one(filter.clone())
                        .await
                        .map_err(classify)?
                    else {
                        return Ok(None);
                    };
                    let mut destination = from_doc(&read)?;
                    if !patch.apply(&mut destination) {
                        return Ok(Some(destination));
                    }
                    let mut unchanged = filter.clone();
                    unchanged.insert("updatedAt", date(&destination.updated_at));
                    destination.updated_at =
                        now.max(destination.updated_at + chrono::Duration::milliseconds(1));
                    let replaced = self
                        .destinations()
                        .replace_one(unchanged, to_doc(&destination))
                        .await
                        .map_err(classify)?;
                    if replaced.matched_count == 1 {
                        return Ok(Some(destination));
                    }
                }
                Err(StoreError::unavailable(
                    "the destination is being changed; try again",
                ))
            })
            .await
    }

    async fn delete_destination(&self, scope: &Scope, id: Uuid) -> StoreResult<bool> {
        self.guard
            .call("delete_destination", async {
                let _changing = self.changing();
                let result = self
                    .destinations()
                    .delete_one(Self::destination_filter(scope, id))
                    .await
                    .map_err(classify)?;
                Ok(result.deleted_count == 1)
            })
            .await
    }

    async fn record_attempt(
        &self,
        scope: &Scope,
        id: Uuid,
        attempt: &Attempt,
        at: DateTime<Utc>,
    ) -> StoreResult<bool> {
        self.guard
            .call("record_attempt", async {
                // Only a disabling changes who gets alerts.
                let _changing = matches!(attempt, Attempt::Gone { .. }).then(|| self.changing());
                let update = match attempt {
                    Attempt::Delivered => doc! {
                        "$set": { "failures": 0_i64, "lastDeliveredAt": date(&at) },
                    },
                    Attempt::Failed { error } => doc! {
                        "$inc": { "failures": 1_i64 },
                        "$set": { "lastError": error, "lastErrorAt": date(&at) },
                    },
                    Attempt::Gone { error } => doc! {
                        "$inc": { "failures": 1_i64 },
                        "$set": {
                            "lastError": error,
                            "lastErrorAt": date(&at),
                            "enabled": false,
                            "disabledReason": error,
                        },
                    },
                };
                let result = self
                    .destinations()
                    .update_one(Self::destination_filter(scope, id), update)
                    .await
                    .map_err(classify)?;
                Ok(result.matched_count == 1)
            })
            .await
    }
}
