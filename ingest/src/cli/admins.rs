//! `ingest admin create|list|revoke`: admin tokens, the credential of the
//! admin API and the dashboard. The first one can only come from here (the
//! server's shell); every command is audited with the CLI as the actor.

use clap::Subcommand;
use common::{
    keys::{display_prefix, generate_admin_token, hash_secret},
    store::{Admin, Store},
};
use serde_json::json;
use uuid::Uuid;

use crate::audit::{self, cli_actor, details, target};

#[derive(Debug, Subcommand)]
pub(super) enum AdminCommand {
    /// Create an admin token and print it, alone, on stdout. It is shown
    /// only once.
    Create {
        /// Who the token is for, as the audit log will name them.
        #[arg(long, value_parser = parse_admin_name)]
        name: String,
    },
    /// List every admin token (never the tokens).
    List {
        /// Print JSON lines instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Revoke an admin token by id; the admin API refuses it from then on.
    Revoke {
        /// The admin's id, as shown by `admin list`.
        id: Uuid,
    },
}

/// 1 to 100 printable characters.
fn parse_admin_name(s: &str) -> Result<String, String> {
    let ok = !s.trim().is_empty() && s.chars().count() <= 100 && !s.chars().any(char::is_control);
    if ok {
        Ok(s.to_owned())
    } else {
        Err("use 1 to 100 printable characters".into())
    }
}

pub(super) async fn run(store: &dyn Store, command: AdminCommand) -> anyhow::Result<()> {
    match command {
        AdminCommand::Create { name } => {
            let token = generate_admin_token();
            let admin = Admin {
                id: Uuid::now_v7(),
                name,
                hash: hash_secret(&token),
                prefix: display_prefix(&token),
                created_at: common::time::now(),
                revoked_at: None,
            };
            store.insert_admin(&admin).await?;
            let target = target("admin", admin.id, Some(&admin.name));
            audit::record(
                store,
                cli_actor(),
                None,
                "admin.create",
                target,
                details(json!({})),
            )
            .await?;
            println!("{token}");
            eprintln!("created admin {} ({})", admin.id, admin.name);
        }
        AdminCommand::List { json } => {
            let admins = store.list_admins().await?;
            if json {
                for a in &admins {
                    println!("{}", admin_json(a));
                }
            } else {
                print_table(&admins);
            }
        }
        AdminCommand::Revoke { id } => {
            let name = store
                .list_admins()
                .await?
                .into_iter()
                .find(|a| a.id == id)
                .map(|a| a.name);
            if !store.revoke_admin(id, common::time::now()).await? {
                anyhow::bail!("no active admin with id {id}");
            }
            let target = target("admin", id, name.as_deref());
            audit::record(
                store,
                cli_actor(),
                None,
                "admin.revoke",
                target,
                details(json!({})),
            )
            .await?;
            eprintln!("revoked {id}");
        }
    }
    Ok(())
}

fn admin_json(a: &Admin) -> serde_json::Value {
    json!({
        "id": a.id,
        "name": a.name,
        "prefix": a.prefix,
        "createdAt": a.created_at,
        "revokedAt": a.revoked_at,
    })
}

fn print_table(admins: &[Admin]) {
    println!(
        "{:<36}  {:<24}  {:<16}  {:<20}  STATUS",
        "ID", "NAME", "PREFIX", "CREATED"
    );
    for a in admins {
        println!(
            "{:<36}  {:<24}  {:<16}  {:<20}  {}",
            a.id,
            a.name,
            a.prefix,
            a.created_at.format("%Y-%m-%d %H:%M:%S"),
            if a.is_active() { "active" } else { "revoked" },
        );
    }
}
