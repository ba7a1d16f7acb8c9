//! Admin tokens (stored by hash, found by it, listed, revoked) and the
//! audit log (appended to, listed newest first).

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use rusqlite::{OptionalExtension, Row, params};
use uuid::Uuid;

use super::{
    SqliteStore,
    codec::{opt_ts, parse_json, parse_ts, parse_uuid, to_json, ts},
};
use crate::store::{Actor, Admin, AdminStore, AuditEntry, AuditTarget, StoreResult};

const ADMIN_COLUMNS: &str = "id, name, hash, prefix, created_at, revoked_at";

fn admin_from_row(r: &Row<'_>) -> rusqlite::Result<Admin> {
    Ok(Admin {
        id: parse_uuid(&r.get::<_, String>(0)?)?,
        name: r.get(1)?,
        hash: r.get(2)?,
        prefix: r.get(3)?,
        created_at: parse_ts(&r.get::<_, String>(4)?)?,
        revoked_at: opt_ts(r, 5)?,
    })
}

const AUDIT_COLUMNS: &str = "id, at, actor_kind, actor_id, actor_name, action, target_type, \
     target_id, target_name, details, address";

fn audit_from_row(r: &Row<'_>) -> rusqlite::Result<AuditEntry> {
    Ok(AuditEntry {
        id: parse_uuid(&r.get::<_, String>(0)?)?,
        at: parse_ts(&r.get::<_, String>(1)?)?,
        actor: Actor {
            kind: r.get(2)?,
            id: r
                .get::<_, Option<String>>(3)?
                .map(|s| parse_uuid(&s))
                .transpose()?,
            name: r.get(4)?,
        },
        action: r.get(5)?,
        target: AuditTarget {
            kind: r.get(6)?,
            id: parse_uuid(&r.get::<_, String>(7)?)?,
            name: r.get(8)?,
        },
        details: parse_json(&r.get::<_, String>(9)?)?,
        address: r.get(10)?,
    })
}

#[async_trait]
impl AdminStore for SqliteStore {
    async fn insert_admin(&self, admin: &Admin) -> StoreResult<()> {
        let a = admin.clone();
        self.run("insert_admin", move |c| {
            c.execute(
                &format!("INSERT INTO admins ({ADMIN_COLUMNS}) VALUES (?1, ?2, ?3, ?4, ?5, ?6)"),
                params![
                    a.id.to_string(),
                    a.name,
                    a.hash,
                    a.prefix,
                    ts(&a.created_at),
                    a.revoked_at.as_ref().map(ts),
                ],
            )?;
            Ok(())
        })
        .await
    }

    async fn find_admin_by_hash(&self, hash: &str) -> StoreResult<Option<Admin>> {
        let hash = hash.to_owned();
        self.run("find_admin_by_hash", move |c| {
            c.prepare_cached(&format!(
                "SELECT {ADMIN_COLUMNS} FROM admins WHERE hash = ?1"
            ))?
            .query_row([hash], admin_from_row)
            .optional()
        })
        .await
    }

    async fn list_admins(&self) -> StoreResult<Vec<Admin>> {
        self.run("list_admins", |c| {
            c.prepare(&format!(
                "SELECT {ADMIN_COLUMNS} FROM admins ORDER BY created_at, id"
            ))?
            .query_map([], admin_from_row)?
            .collect()
        })
        .await
    }

    async fn revoke_admin(&self, id: Uuid, at: DateTime<Utc>) -> StoreResult<bool> {
        self.run("revoke_admin", move |c| {
            let n = c.execute(
                "UPDATE admins SET revoked_at = ?2 WHERE id = ?1 AND revoked_at IS NULL",
                params![id.to_string(), ts(&at)],
            )?;
            Ok(n == 1)
        })
        .await
    }

    async fn insert_audit(&self, entry: &AuditEntry) -> StoreResult<()> {
        let e = entry.clone();
        self.run("insert_audit", move |c| {
            c.execute(
                &format!(
                    "INSERT INTO audit ({AUDIT_COLUMNS}) \
                         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)"
                ),
                params![
                    e.id.to_string(),
                    ts(&e.at),
                    e.actor.kind,
                    e.actor.id.map(|id| id.to_string()),
                    e.actor.name,
                    e.action,
                    e.target.kind,
                    e.target.id.to_string(),
                    e.target.name,
                    to_json(&e.details)?,
                    e.address,
                ],
            )?;
            Ok(())
        })
        .await
    }

    async fn list_audit(&self, before: Option<Uuid>, limit: u32) -> StoreResult<Vec<AuditEntry>> {
        self.run("list_audit", move |c| {
            c.prepare_cached(&format!(
                "SELECT {AUDIT_COLUMNS} FROM audit WHERE ?1 IS NULL OR id < ?1 \
                     ORDER BY id DESC LIMIT ?2"
            ))?
            .query_map(
                params![before.map(|id| id.to_string()), limit],
                audit_from_row,
            )?
            .collect()
        })
        .await
    }
}
