//! Writing the audit log: who (an admin by token, or the CLI at the
//! server's shell), what, to which object, when, from where. Shared by the
//! admin API and the CLI. An entry never holds a secret: callers pass names,
//! ids and settings only.

use std::net::IpAddr;

use common::store::{Actor, Admin, AuditEntry, AuditTarget, Store, StoreResult};
use serde_json::{Map, Value};
use uuid::Uuid;

/// The admin whose token made the request.
pub fn admin_actor(admin: &Admin) -> Actor {
    Actor {
        kind: "admin".into(),
        id: Some(admin.id),
        name: admin.name.clone(),
    }
}

/// Whoever runs the CLI: `$USER`, else "cli".
pub fn cli_actor() -> Actor {
    Actor {
        kind: "cli".into(),
        id: None,
        name: std::env::var("USER")
            .ok()
            .filter(|u| !u.is_empty())
            .unwrap_or_else(|| "cli".into()),
    }
}

/// An object an action was done to.
pub fn target(kind: &str, id: Uuid, name: Option<&str>) -> AuditTarget {
    AuditTarget {
        kind: kind.into(),
        id,
        name: name.map(str::to_owned),
    }
}

/// `details` from a JSON object literal (anything else records none).
pub fn details(value: Value) -> Map<String, Value> {
    match value {
        Value::Object(map) => map,
        _ => Map::new(),
    }
}

/// Appends one entry.
pub async fn record(
    store: &dyn Store,
    actor: Actor,
    address: Option<IpAddr>,
    action: &str,
    target: AuditTarget,
    details: Map<String, Value>,
) -> StoreResult<()> {
    let entry = AuditEntry {
        id: Uuid::now_v7(),
        at: common::time::now(),
        actor,
        action: action.into(),
        target,
        details,
        address: address.map(|a| a.to_string()),
    };
    tracing::info!(
        action = %entry.action,
        actor = %entry.actor.name,
        target = %entry.target.id,
        "audit"
    );
    store.insert_audit(&entry).await
}
