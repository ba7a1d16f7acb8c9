//! Organizations and projects as records. Data is tagged with a [`Scope`]
//! of two strings; those strings are the records' immutable `slug`s (each
//! the name it was created with), so renaming changes the `name` only and
//! no data moves.

use chrono::{DateTime, Utc};
use uuid::Uuid;

use super::{Scope, Store, StoreError, StoreResult};

/// An organization: the parent of projects.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Organization {
    pub id: Uuid,
    /// What operators see and rename; unique among organizations.
    pub name: String,
    /// The `org` string its data is tagged with; never changes.
    pub slug: String,
    pub created_at: DateTime<Utc>,
}

/// A project of one organization; what API keys, events and devices belong to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Project {
    pub id: Uuid,
    pub organization_id: Uuid,
    /// Unique within its organization.
    pub name: String,
    /// The `project` string its data is tagged with; never changes.
    pub slug: String,
    pub created_at: DateTime<Utc>,
}

impl Project {
    /// The scope its data is tagged with.
    pub fn scope(&self, organization: &Organization) -> Scope {
        Scope::new(organization.slug.clone(), self.slug.clone())
    }
}

/// Why a name cannot be given to an organization or a project.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NameTaken {
    /// A sibling has this name.
    Name,
    /// A sibling was created with this name and renamed since (now `holder`):
    /// its data is still tagged with it, so a new one cannot take it.
    Slug { holder: String },
}

/// The record among `records` whose name is `name`, else whose slug is: how
/// the CLI's `--org` and `--project` resolve (by the name shown today, else
/// by the one a record was created with).
pub fn by_name_or_slug<'a, T>(
    records: impl IntoIterator<Item = &'a T> + Clone,
    name: &str,
    fields: impl Fn(&T) -> (&str, &str),
) -> Option<&'a T> {
    records
        .clone()
        .into_iter()
        .find(|r| fields(r).0 == name)
        .or_else(|| records.into_iter().find(|r| fields(r).1 == name))
}

/// What [`resolve_or_create`] found or made.
#[derive(Debug, Clone)]
pub struct Resolved {
    pub organization: Organization,
    pub project: Project,
    pub created_organization: bool,
    pub created_project: bool,
}

/// The organization named `org` and its project named `project` (each by
/// name, else by slug), created (slug = name) where missing. A concurrent
/// creation of the same name is found on the next look.
pub async fn resolve_or_create(
    store: &dyn Store,
    org: &str,
    project: &str,
    now: DateTime<Utc>,
) -> StoreResult<Resolved> {
    for _ in 0..3 {
        let organizations = store.list_organizations().await?;
        let (organization, created_organization) =
            match by_name_or_slug(&organizations, org, |o| (&o.name, &o.slug)) {
                Some(found) => (found.clone(), false),
                None => {
                    let fresh = Organization {
                        id: Uuid::now_v7(),
                        name: org.to_owned(),
                        slug: org.to_owned(),
                        created_at: now,
                    };
                    if store.insert_organization(&fresh).await?.is_err() {
                        continue;
                    }
                    (fresh, true)
                }
            };
        let projects: Vec<Project> = store
            .list_projects()
            .await?
            .into_iter()
            .filter(|p| p.organization_id == organization.id)
            .collect();
        let (found, created_project) =
            match by_name_or_slug(&projects, project, |p| (&p.name, &p.slug)) {
                Some(found) => (found.clone(), false),
                None => {
                    let fresh = Project {
                        id: Uuid::now_v7(),
                        organization_id: organization.id,
                        name: project.to_owned(),
                        slug: project.to_owned(),
                        created_at: now,
                    };
                    if store.insert_project(&fresh).await?.is_err() {
                        continue;
                    }
                    (fresh, true)
                }
            };
        return Ok(Resolved {
            organization,
            project: found,
            created_organization,
            created_project,
        });
    }
    Err(StoreError::unavailable(format!(
        "organization {org:?} or project {project:?} keeps changing; retry"
    )))
}

/// Makes records for scopes that exist only as strings on data (written by a
/// version before organizations and projects were records), each with its
/// slug as name. Idempotent: a slug that has a record is left alone.
pub async fn adopt(store: &dyn Store, scopes: &[Scope], now: DateTime<Utc>) -> StoreResult<()> {
    let (organizations, projects) = (
        store.list_organizations().await?,
        store.list_projects().await?,
    );
    let known = |scope: &Scope| {
        organizations
            .iter()
            .find(|o| o.slug == scope.org)
            .is_some_and(|o| {
                projects
                    .iter()
                    .any(|p| p.organization_id == o.id && p.slug == scope.project)
            })
    };
    let mut missing: Vec<&Scope> = scopes.iter().filter(|s| !known(s)).collect();
    missing.sort_by(|a, b| (&a.org, &a.project).cmp(&(&b.org, &b.project)));
    missing.dedup();
    for scope in missing {
        let organizations = store.list_organizations().await?;
        let organization = match organizations.iter().find(|o| o.slug == scope.org) {
            Some(o) => o.clone(),
            None => {
                let fresh = Organization {
                    id: Uuid::now_v7(),
                    name: scope.org.clone(),
                    slug: scope.org.clone(),
                    created_at: now,
                };
                if let Err(taken) = store.insert_organization(&fresh).await? {
                    tracing::warn!(org = %scope.org, ?taken, "cannot adopt an organization");
                    continue;
                }
                fresh
            }
        };
        let projects = store.list_projects().await?;
        let known = projects
            .iter()
            .any(|p| p.organization_id == organization.id && p.slug == scope.project);
        if !known {
            let fresh = Project {
                id: Uuid::now_v7(),
                organization_id: organization.id,
                name: scope.project.clone(),
                slug: scope.project.clone(),
                created_at: now,
            };
            if let Err(taken) = store.insert_project(&fresh).await? {
                tracing::warn!(project = %scope.project, ?taken, "cannot adopt a project");
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn org(name: &str, slug: &str) -> Organization {
        Organization {
            id: Uuid::now_v7(),
            name: name.into(),
            slug: slug.into(),
            created_at: Utc::now(),
        }
    }

    #[test]
    fn a_name_wins_over_a_slug() {
        // "web" was renamed "website"; another was then named "web".
        let renamed = org("website", "web");
        let current = org("web", "web2");
        let all = [renamed.clone(), current.clone()];
        fn fields(o: &Organization) -> (&str, &str) {
            (&o.name, &o.slug)
        }
        assert_eq!(by_name_or_slug(&all, "web", fields), Some(&current));
        assert_eq!(by_name_or_slug(&all, "website", fields), Some(&renamed));
        assert_eq!(by_name_or_slug(&all, "web2", fields), Some(&current));
        assert_eq!(by_name_or_slug(&all, "other", fields), None);
    }
}
