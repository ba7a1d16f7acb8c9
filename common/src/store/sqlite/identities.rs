//! Identities: properties merged and aliases unioned into what is stored,
//! read and written in one write-locked transaction.

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use rusqlite::{OptionalExtension, TransactionBehavior, params};
use serde_json::{Map, Value};

use super::{
    SqliteStore,
    codec::{parse_json, parse_ts, to_json, ts},
};
use crate::store::{Identity, IdentityStore, Scope, StoreResult, model::merge_identity_fields};

#[async_trait]
impl IdentityStore for SqliteStore {
    async fn merge_identity(
        &self,
        scope: &Scope,
        user_id: &str,
        properties: Map<String, Value>,
        aliases: Vec<String>,
        now: DateTime<Utc>,
    ) -> StoreResult<Identity> {
        let scope = scope.clone();
        let user_id = user_id.to_owned();
        self.run("merge_identity", move |c| {
                // IMMEDIATE takes the write lock up front, so the read-merge-write
                // below cannot interleave with another writer.
                let tx = c.transaction_with_behavior(TransactionBehavior::Immediate)?;
                let existing = tx
                    .query_row(
                        "SELECT properties, aliases, created_at FROM identities \
                         WHERE org = ?1 AND project = ?2 AND user_id = ?3",
                        params![scope.org, scope.project, user_id],
                        |r| {
                            Ok((
                                r.get::<_, String>(0)?,
                                r.get::<_, String>(1)?,
                                r.get::<_, String>(2)?,
                            ))
                        },
                    )
                    .optional()?;
                let (mut props, mut all_aliases, created_at) = match existing {
                    Some((p, a, created)) => (parse_json(&p)?, parse_json(&a)?, parse_ts(&created)?),
                    None => (Map::new(), Vec::new(), now),
                };
                merge_identity_fields(&mut props, &mut all_aliases, properties, aliases);
                tx.execute(
                    "INSERT INTO identities (org, project, user_id, properties, aliases, created_at, updated_at) \
                     VALUES (?1,?2,?3,?4,?5,?6,?7) \
                     ON CONFLICT (org, project, user_id) DO UPDATE SET \
                     properties = excluded.properties, aliases = excluded.aliases, updated_at = excluded.updated_at",
                    params![
                        scope.org,
                        scope.project,
                        user_id,
                        to_json(&props)?,
                        to_json(&all_aliases)?,
                        ts(&created_at),
                        ts(&now),
                    ],
                )?;
                tx.commit()?;
                Ok(Identity {
                    user_id,
                    properties: props,
                    aliases: all_aliases,
                    created_at,
                    updated_at: now,
                })
            })
            .await
    }

    async fn get_identity(&self, scope: &Scope, user_id: &str) -> StoreResult<Option<Identity>> {
        let scope = scope.clone();
        let user_id = user_id.to_owned();
        self.run("get_identity", move |c| {
            c.prepare_cached(
                "SELECT user_id, properties, aliases, created_at, updated_at FROM identities \
                     WHERE org = ?1 AND project = ?2 AND user_id = ?3",
            )?
            .query_row(params![scope.org, scope.project, user_id], |r| {
                Ok(Identity {
                    user_id: r.get(0)?,
                    properties: parse_json(&r.get::<_, String>(1)?)?,
                    aliases: parse_json(&r.get::<_, String>(2)?)?,
                    created_at: parse_ts(&r.get::<_, String>(3)?)?,
                    updated_at: parse_ts(&r.get::<_, String>(4)?)?,
                })
            })
            .optional()
        })
        .await
    }
}
