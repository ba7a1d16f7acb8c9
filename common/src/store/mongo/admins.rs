//! Admin tokens (stored by hash, found by it, listed, revoked) and the
//! audit log (appended to, listed newest first).

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use mongodb::bson::{Bson, Document, doc};
use uuid::Uuid;

use super::{
    MongoStore, classify,
    codec::{corrupt, date, from_document, opt_date, opt_str, to_document},
    find_all,
};
use crate::store::{Actor, Admin, AdminStore, AuditEntry, AuditTarget, StoreResult};

fn admin_from_doc(d: &Document) -> StoreResult<Admin> {
    let parse = || -> anyhow::Result<Admin> {
        Ok(Admin {
            id: Uuid::parse_str(d.get_str("_id")?)?,
            name: d.get_str("name")?.to_owned(),
            hash: d.get_str("hash")?.to_owned(),
            prefix: d.get_str("prefix")?.to_owned(),
            created_at: d.get_datetime("createdAt")?.to_chrono(),
            revoked_at: opt_date(d, "revokedAt"),
        })
    };
    parse().map_err(|e| corrupt("admin", e))
}

fn audit_from_doc(d: &Document) -> StoreResult<AuditEntry> {
    let parse = || -> anyhow::Result<AuditEntry> {
        let actor = d.get_document("actor")?;
        let target = d.get_document("target")?;
        Ok(AuditEntry {
            id: Uuid::parse_str(d.get_str("_id")?)?,
            at: d.get_datetime("at")?.to_chrono(),
            actor: Actor {
                kind: actor.get_str("kind")?.to_owned(),
                id: opt_str(actor, "id")
                    .map(|s| Uuid::parse_str(&s))
                    .transpose()?,
                name: actor.get_str("name")?.to_owned(),
            },
            action: d.get_str("action")?.to_owned(),
            target: AuditTarget {
                kind: target.get_str("type")?.to_owned(),
                id: Uuid::parse_str(target.get_str("id")?)?,
                name: opt_str(target, "name"),
            },
            details: from_document(d.get_document("details")?),
            address: opt_str(d, "address"),
        })
    };
    parse().map_err(|e| corrupt("audit", e))
}

#[async_trait]
impl AdminStore for MongoStore {
    async fn insert_admin(&self, a: &Admin) -> StoreResult<()> {
        self.guard
            .call("insert_admin", async {
                self.admins()
                    .insert_one(doc! {
                        "_id": a.id.to_string(),
                        "name": &a.name,
                        "hash": &a.hash,
                        "prefix": &a.prefix,
                        "createdAt": date(&a.created_at),
                        "revokedAt": a.revoked_at.as_ref().map(date),
                    })
                    .await
                    .map_err(classify)?;
                Ok(())
            })
            .await
    }

    async fn find_admin_by_hash(&self, hash: &str) -> StoreResult<Option<Admin>> {
        self.guard
            .call("find_admin_by_hash", async {
                self.admins()
                    .find_one(doc! { "hash": hash })
                    .await
                    .map_err(classify)?
                    .as_ref()
                    .map(admin_from_doc)
                    .transpose()
            })
            .await
    }

    async fn list_admins(&self) -> StoreResult<Vec<Admin>> {
        self.guard
            .call("list_admins", async {
                let docs = find_all(
                    &self.admins(),
                    doc! {},
                    doc! { "createdAt": 1, "_id": 1 },
                    None,
                )
                .await?;
                docs.iter().map(admin_from_doc).collect()
            })
            .await
    }

    async fn revoke_admin(&self, id: Uuid, at: DateTime<Utc>) -> StoreResult<bool> {
        self.guard
            .call("revoke_admin", async {
                let result = self
                    .admins()
                    .update_one(
                        doc! { "_id": id.to_string(), "revokedAt": Bson::Null },
                        doc! { "$set": { "revokedAt": date(&at) } },
                    )
                    .await
                    .map_err(classify)?;
                Ok(result.modified_count == 1)
            })
            .await
    }

    async fn insert_audit(&self, e: &AuditEntry) -> StoreResult<()> {
        self.guard
            .call("insert_audit", async {
                self.audit()
                    .insert_one(doc! {
                        "_id": e.id.to_string(),
                        "at": date(&e.at),
                        "actor": {
                            "kind": &e.actor.kind,
                            "id": e.actor.id.map(|id| id.to_string()),
                            "name": &e.actor.name,
                        },
                        "action": &e.action,
                        "target": {
                            "type": &e.target.kind,
                            "id": e.target.id.to_string(),
                            "name": e.target.name.clone(),
                        },
                        "details": to_document(&e.details),
                        "address": e.address.clone(),
                    })
                    .await
                    .map_err(classify)?;
                Ok(())
            })
            .await
    }

    async fn list_audit(&self, before: Option<Uuid>, limit: u32) -> StoreResult<Vec<AuditEntry>> {
        self.guard
            .call("list_audit", async {
                let filter = match before {
                    Some(id) => doc! { "_id": { "$lt": id.to_string() } },
                    None => doc! {},
                };
                let docs = find_all(
                    &self.audit(),
                    filter,
                    doc! { "_id": -1 },
                    Some(i64::from(limit)),
                )
                .await?;
                docs.iter().map(audit_from_doc).collect()
            })
            .await
    }
}
