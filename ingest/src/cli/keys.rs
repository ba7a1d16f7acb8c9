//! `ingest keys create|list|revoke`: API keys from the server's shell. Keys
//! are the same records the admin API manages; `--org` and `--project` name
//! the organizations and projects it lists (by name, else by the name they
//! were created with), created on first use. Every write is audited with
//! the CLI as the actor.

use anyhow::Context as _;
use common::{
    keys::{display_prefix, generate_secret, hash_secret},
    store::{ApiKey, KeyScope, Scope, Store, tenancy::resolve_or_create},
};
use serde_json::json;
use uuid::Uuid;

use super::KeysCommand;
use crate::audit::{self, cli_actor, details, target};

pub(super) async fn run(store: &dyn Store, command: KeysCommand) -> anyhow::Result<()> {
    match command {
        KeysCommand::Create {
            org,
            project,
            name,
            rate_limit,
            scopes,
        } => {
            let secret =
                create_key_with_scopes(store, Scope::new(org, project), name, rate_limit, &scopes)
                    .await?;
            println!("{secret}");
        }
        KeysCommand::List { json } => {
            let mut keys = store.list_api_keys().await?;
            // Shown by their organization's and project's names today.
            let organizations = store.list_organizations().await?;
            let projects = store.list_projects().await?;
            for key in &mut keys {
                let organization = organizations.iter().find(|o| o.slug == key.scope.org);
                let project = organization.and_then(|o| {
                    projects
                        .iter()
                        .find(|p| p.organization_id == o.id && p.slug == key.scope.project)
                });
                if let (Some(o), Some(p)) = (organization, project) {
                    key.scope = Scope::new(o.name.clone(), p.name.clone());
                }
            }
            if json {
                for k in &keys {
                    println!("{}", key_json(k));
                }
            } else {
                print_table(&keys);
            }
        }
        KeysCommand::Revoke { id } => {
            let key = store.get_api_key(id).await?;
            if store.revoke_api_key(id, common::time::now()).await? {
                let name = key.and_then(|k| k.name);
                let target = target("key", id, name.as_deref());
                audit::record(
                    store,
                    cli_actor(),
                    None,
                    "key.revoke",
                    target,
                    details(json!({})),
                )
                .await?;
                eprintln!("revoked {id}");
            } else {
                anyhow::bail!("no active key with id {id}");
            }
        }
    }
    Ok(())
}

/// A new key record and its secret, which is not kept anywhere.
pub fn new_key(
    scope: Scope,
    name: Option<String>,
    rate_limit: Option<u32>,
    scopes: &[KeyScope],
) -> (ApiKey, String) {
    let secret = generate_secret();
    let key = ApiKey {
        id: Uuid::now_v7(),
        name,
        scope,
        hash: hash_secret(&secret),
        prefix: display_prefix(&secret),
        rate_limit,
        scopes: KeyScope::canonical(scopes.iter().copied()),
        created_at: common::time::now(),
        revoked_at: None,
        previous_hash: None,
        previous_expires_at: None,
        last_used_at: None,
    };
    (key, secret)
}

/// Creates and stores a key with every scope; returns the secret.
pub async fn create_key(
    store: &dyn Store,
    scope: Scope,
    name: Option<String>,
    rate_limit: Option<u32>,
) -> anyhow::Result<String> {
    create_key_with_scopes(store, scope, name, rate_limit, &KeyScope::ALL).await
}

/// Creates and stores a key that may do only what `scopes` name, in the
/// project `names` names (organization, project), created if missing, as
/// `ingest keys create` does; returns the secret.
pub async fn create_key_with_scopes(
    store: &dyn Store,
    names: Scope,
    name: Option<String>,
    rate_limit: Option<u32>,
    scopes: &[KeyScope],
) -> anyhow::Result<String> {
    let now = common::time::now();
    let resolved = resolve_or_create(store, &names.org, &names.project, now)
        .await
        .context("finding the organization and project")?;
    let (organization, project) = (&resolved.organization, &resolved.project);
    if resolved.created_organization {
        let target = target("organization", organization.id, Some(&organization.name));
        audit::record(
            store,
            cli_actor(),
            None,
            "organization.create",
            target,
            details(json!({})),
        )
        .await?;
    }
    if resolved.created_project {
        let target = target("project", project.id, Some(&project.name));
        let about = details(json!({ "organization": organization.name }));
        audit::record(store, cli_actor(), None, "project.create", target, about).await?;
    }
    let (key, secret) = new_key(project.scope(organization), name, rate_limit, scopes);
    store.insert_api_key(&key).await?;
    let about = details(json!({
        "project": project.name,
        "scopes": KeyScope::names(&key.scopes),
        "rateLimit": key.rate_limit,
    }));
    let target = target("key", key.id, key.name.as_deref());
    audit::record(store, cli_actor(), None, "key.create", target, about).await?;
    Ok(secret)
}

fn key_json(k: &ApiKey) -> serde_json::Value {
    json!({
        "id": k.id,
        "name": k.name,
        "org": k.scope.org,
        "project": k.scope.project,
        "prefix": k.prefix,
        "rateLimit": k.rate_limit,
        "scopes": KeyScope::names(&k.scopes),
        "createdAt": k.created_at,
        "revokedAt": k.revoked_at,
        "lastUsedAt": k.last_used_at,
    })
}

/// The table `keys list` prints; SCOPES comes last, as its width varies.
fn print_table(keys: &[ApiKey]) {
    println!(
        "{:<36}  {:<16}  {:<16}  {:<16}  {:<13}  {:>10}  {:<7}  SCOPES",
        "ID", "NAME", "ORG", "PROJECT", "PREFIX", "RATE/MIN", "STATUS"
    );
    for k in keys {
        println!(
            "{:<36}  {:<16}  {:<16}  {:<16}  {:<13}  {:>10}  {:<7}  {}",
            k.id,
            k.name.as_deref().unwrap_or("-"),
            k.scope.org,
            k.scope.project,
            k.prefix,
            k.rate_limit
                .map_or_else(|| "default".to_owned(), |n| n.to_string()),
            if k.is_active() { "active" } else { "revoked" },
            KeyScope::names(&k.scopes).join(","),
        );
    }
}
