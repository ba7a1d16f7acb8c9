//! Organizations and projects: listed, created unless a sibling holds the
//! name (as its name, or as the slug it was created with), renamed. Unique
//! indexes on name and slug (within the parent) settle races; the look
//! before writing only chooses the message.

use async_trait::async_trait;
use mongodb::bson::{Document, doc};
use uuid::Uuid;

use super::{
    MongoStore, classify,
    codec::{corrupt, date},
    find_all, is_duplicate_key,
};
use crate::store::{NameTaken, Organization, Project, StoreResult, TenancyStore};

fn organization_from_doc(d: &Document) -> StoreResult<Organization> {
    let parse = || -> anyhow::Result<Organization> {
        Ok(Organization {
            id: Uuid::parse_str(d.get_str("_id")?)?,
            name: d.get_str("name")?.to_owned(),
            slug: d.get_str("slug")?.to_owned(),
            created_at: d.get_datetime("createdAt")?.to_chrono(),
        })
    };
    parse().map_err(|e| corrupt("organization", e))
}

fn project_from_doc(d: &Document) -> StoreResult<Project> {
    let parse = || -> anyhow::Result<Project> {
        Ok(Project {
            id: Uuid::parse_str(d.get_str("_id")?)?,
            organization_id: Uuid::parse_str(d.get_str("organizationId")?)?,
            name: d.get_str("name")?.to_owned(),
            slug: d.get_str("slug")?.to_owned(),
            created_at: d.get_datetime("createdAt")?.to_chrono(),
        })
    };
    parse().map_err(|e| corrupt("project", e))
}

/// Who among the siblings matching `siblings` holds `name`.
async fn holder(
    collection: &mongodb::Collection<Document>,
    siblings: Document,
    name: &str,
    slugs_too: bool,
) -> StoreResult<Option<NameTaken>> {
    let mut by = vec![doc! { "name": name }];
    if slugs_too {
        by.push(doc! { "slug": name });
    }
    let mut filter = siblings;
    filter.insert("$or", by);
    let found = find_all(collection, filter, doc! { "name": 1 }, None).await?;
    Ok(if found.iter().any(|d| d.get_str("name") == Ok(name)) {
        Some(NameTaken::Name)
    } else {
        found.first().map(|d| NameTaken::Slug {
            holder: d.get_str("name").unwrap_or_default().to_owned(),
        })
    })
}

/// A write that failed on a unique index lost a race for the name.
fn taken_on_duplicate<T>(
    result: Result<T, mongodb::error::Error>,
) -> StoreResult<Result<T, NameTaken>> {
    match result {
        Ok(value) => Ok(Ok(value)),
        Err(e) if is_duplicate_key(&e) => Ok(Err(NameTaken::Name)),
        Err(e) => Err(classify(e)),
    }
}

#[async_trait]
impl TenancyStore for MongoStore {
    async fn list_organizations(&self) -> StoreResult<Vec<Organization>> {
        self.guard
            .call("list_organizations", async {
                let docs =
                    find_all(&self.organizations(), doc! {}, doc! { "name": 1 }, None).await?;
                docs.iter().map(organization_from_doc).collect()
            })
            .await
    }

    async fn insert_organization(&self, o: &Organization) -> StoreResult<Result<(), NameTaken>> {
        self.guard
            .call("insert_organization", async {
                let collection = self.organizations();
                if let Some(taken) = holder(&collection, doc! {}, &o.name, true).await? {
                    return Ok(Err(taken));
                }
                let inserted = collection
                    .insert_one(doc! {
                        "_id": o.id.to_string(),
                        "name": &o.name,
                        "slug": &o.slug,
                        "createdAt": date(&o.created_at),
                    })
                    .await;
                Ok(taken_on_duplicate(inserted)?.map(|_| ()))
            })
            .await
    }

    async fn rename_organization(
        &self,
        id: Uuid,
        name: &str,
    ) -> StoreResult<Result<bool, NameTaken>> {
        self.guard
            .call("rename_organization", async {
                let collection = self.organizations();
                let others = doc! { "_id": { "$ne": id.to_string() } };
                if let Some(taken) = holder(&collection, others, name, false).await? {
                    return Ok(Err(taken));
                }
                let updated = collection
                    .update_one(
                        doc! { "_id": id.to_string() },
                        doc! { "$set": { "name": name } },
                    )
                    .await;
                Ok(taken_on_duplicate(updated)?.map(|r| r.matched_count == 1))
            })
            .await
    }

    async fn list_projects(&self) -> StoreResult<Vec<Project>> {
        self.guard
            .call("list_projects", async {
                let docs = find_all(&self.projects(), doc! {}, doc! { "name": 1 }, None).await?;
                docs.iter().map(project_from_doc).collect()
            })
            .await
    }

    async fn insert_project(&self, p: &Project) -> StoreResult<Result<(), NameTaken>> {
        self.guard
            .call("insert_project", async {
                let collection = self.projects();
                let parent = p.organization_id.to_string();
                let siblings = doc! { "organizationId": &parent };
                if let Some(taken) = holder(&collection, siblings, &p.name, true).await? {
                    return Ok(Err(taken));
                }
                let inserted = collection
                    .insert_one(doc! {
                        "_id": p.id.to_string(),
                        "organizationId": parent,
                        "name": &p.name,
                        "slug": &p.slug,
                        "createdAt": date(&p.created_at),
                    })
                    .await;
                Ok(taken_on_duplicate(inserted)?.map(|_| ()))
            })
            .await
    }

    async fn rename_project(&self, id: Uuid, name: &str) -> StoreResult<Result<bool, NameTaken>> {
        self.guard
            .call("rename_project", async {
                let collection = self.projects();
                let Some(project) = collection
                    .find_one(doc! { "_id": id.to_string() })
                    .await
                    .map_err(classify)?
                else {
                    return Ok(Ok(false));
                };
                let project = project_from_doc(&project)?;
                let siblings = doc! {
                    "_id": { "$ne": id.to_string() },
                    "organizationId": project.organization_id.to_string(),
                };
                if let Some(taken) = holder(&collection, siblings, name, false).await? {
                    return Ok(Err(taken));
                }
                let updated = collection
                    .update_one(
                        doc! { "_id": id.to_string() },
                        doc! { "$set": { "name": name } },
                    )
                    .await;
                Ok(taken_on_duplicate(updated)?.map(|r| r.matched_count == 1))
            })
            .await
    }
}
