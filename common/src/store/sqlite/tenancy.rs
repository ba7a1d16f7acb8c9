//! Organizations and projects: listed, created unless a sibling holds the
//! name (as its name, or as the slug it was created with), renamed.

use async_trait::async_trait;
use rusqlite::{OptionalExtension, Row, params};
use uuid::Uuid;

use super::{
    SqliteStore,
    codec::{parse_ts, parse_uuid, ts},
};
use crate::store::{NameTaken, Organization, Project, StoreResult, TenancyStore};

fn organization_from_row(r: &Row<'_>) -> rusqlite::Result<Organization> {
    Ok(Organization {
        id: parse_uuid(&r.get::<_, String>(0)?)?,
        name: r.get(1)?,
        slug: r.get(2)?,
        created_at: parse_ts(&r.get::<_, String>(3)?)?,
    })
}

fn project_from_row(r: &Row<'_>) -> rusqlite::Result<Project> {
    Ok(Project {
        id: parse_uuid(&r.get::<_, String>(0)?)?,
        organization_id: parse_uuid(&r.get::<_, String>(1)?)?,
        name: r.get(2)?,
        slug: r.get(3)?,
        created_at: parse_ts(&r.get::<_, String>(4)?)?,
    })
}

/// Who among the siblings selected by `siblings` (a `WHERE` on the table,
/// `?1` the parent) holds `name`, as a name or a slug.
fn holder(
    c: &rusqlite::Connection,
    table: &str,
    siblings: &str,
    parent: &str,
    name: &str,
    slugs_too: bool,
) -> rusqlite::Result<Option<NameTaken>> {
    let found: Option<(String, String)> = c
        .query_row(
            &format!(
                "SELECT name, slug FROM {table} WHERE {siblings} \
                 AND (name = ?2 OR (?3 AND slug = ?2)) ORDER BY name = ?2 DESC LIMIT 1"
            ),
            params![parent, name, slugs_too],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .optional()?;
    Ok(found.map(|(holder, _)| {
        if holder == name {
            NameTaken::Name
        } else {
            NameTaken::Slug { holder }
        }
    }))
}

#[async_trait]
impl TenancyStore for SqliteStore {
    async fn list_organizations(&self) -> StoreResult<Vec<Organization>> {
        self.run("list_organizations", |c| {
            c.prepare_cached("SELECT id, name, slug, created_at FROM organizations ORDER BY name")?
                .query_map([], organization_from_row)?
                .collect()
        })
        .await
    }

    async fn insert_organization(
        &self,
        organization: &Organization,
    ) -> StoreResult<Result<(), NameTaken>> {
        let o = organization.clone();
        self.run("insert_organization", move |c| {
            let tx = c.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
            if let Some(taken) = holder(&tx, "organizations", "?1 = ?1", "", &o.name, true)? {
                return Ok(Err(taken));
            }
            tx.execute(
                "INSERT INTO organizations (id, name, slug, created_at) VALUES (?1, ?2, ?3, ?4)",
                params![o.id.to_string(), o.name, o.slug, ts(&o.created_at)],
            )?;
            tx.commit()?;
            Ok(Ok(()))
        })
        .await
    }

    async fn rename_organization(
        &self,
        id: Uuid,
        name: &str,
    ) -> StoreResult<Result<bool, NameTaken>> {
        rename(
            self,
            "rename_organization",
            "organizations",
            "id <> ?1",
            id,
            name,
        )
        .await
    }

    async fn list_projects(&self) -> StoreResult<Vec<Project>> {
        self.run("list_projects", |c| {
            c.prepare_cached(
                "SELECT id, organization_id, name, slug, created_at FROM projects ORDER BY name",
            )?
            .query_map([], project_from_row)?
            .collect()
        })
        .await
    }

    async fn insert_project(&self, project: &Project) -> StoreResult<Result<(), NameTaken>> {
        let p = project.clone();
        self.run("insert_project", move |c| {
            let tx = c.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
            let parent = p.organization_id.to_string();
            let siblings = "organization_id = ?1";
            if let Some(taken) = holder(&tx, "projects", siblings, &parent, &p.name, true)? {
                return Ok(Err(taken));
            }
            tx.execute(
                "INSERT INTO projects (id, organization_id, name, slug, created_at) \
                     VALUES (?1, ?2, ?3, ?4, ?5)",
                params![p.id.to_string(), parent, p.name, p.slug, ts(&p.created_at)],
            )?;
            tx.commit()?;
            Ok(Ok(()))
        })
        .await
    }

    async fn rename_project(&self, id: Uuid, name: &str) -> StoreResult<Result<bool, NameTaken>> {
        let siblings = "id <> ?1 AND organization_id = \
                        (SELECT organization_id FROM projects WHERE id = ?1)";
        rename(self, "rename_project", "projects", siblings, id, name).await
    }
}

/// Renames the record `id` of `table` unless one of its siblings (a `WHERE`
/// with `?1` the record's id) has the name, for the store method `method`.
async fn rename(
    store: &SqliteStore,
    method: &'static str,
    table: &'static str,
    siblings: &'static str,
    id: Uuid,
    name: &str,
) -> StoreResult<Result<bool, NameTaken>> {
    let name = name.to_owned();
    store
        .run(method, move |c| {
            let tx = c.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
            if let Some(taken) = holder(&tx, table, siblings, &id.to_string(), &name, false)? {
                return Ok(Err(taken));
            }
            let n = tx.execute(
                &format!("UPDATE {table} SET name = ?2 WHERE id = ?1"),
                params![id.to_string(), name],
            )?;
            tx.commit()?;
            Ok(Ok(n == 1))
        })
        .await
}
