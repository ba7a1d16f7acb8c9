//! Insights: one row each under (scope, title), the value as JSON. Every
//! write goes through the group-commit writer, whose batch is one
//! `BEGIN IMMEDIATE` transaction: the read of the row, the rule applied to
//! it (`insight`) and the write back cannot interleave with another writer,
//! in this process or another on the same file, so no increment is lost. A
//! refusal is an answer, not an error, so it never makes the batch run
//! again.
//!
//! A deletion empties the row's value (NULL) rather than removing the row,
//! so streams following changes by `updated_at` see it; such rows are
//! removed once older than `insight::DELETION_KEPT`, by the next deletion
//! in the project.

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use rusqlite::{Connection, OptionalExtension, Row, params};
use serde_json::Value;

use super::{
    SqliteStore,
    codec::{parse_ts, ts},
};
use crate::store::{
    Insight, InsightChange, InsightNumber, InsightRefusal, InsightStore, InsightValue, Scope,
    StoreResult,
    insight::{DELETION_KEPT, MAX_INSIGHTS},
};

const COLUMNS: &str = "org, project, title, value, icon, version, created_at, updated_at";

/// A value as its JSON text: `2000` for an integer, `2000.0` for a float, so
/// each reads back as what it was.
fn value_to_json(value: &InsightValue) -> String {
    let json = match value {
        InsightValue::Text(text) => Value::from(text.as_str()),
        InsightValue::Number(InsightNumber::Integer(i)) => Value::from(*i),
        InsightValue::Number(InsightNumber::Float(f)) => Value::from(*f),
        InsightValue::Flag(flag) => Value::from(*flag),
    };
    json.to_string()
}

fn value_from_json(text: &str) -> rusqlite::Result<InsightValue> {
    let unreadable = |why: String| rusqlite::Error::ToSqlConversionFailure(why.into());
    let json: Value =
        serde_json::from_str(text).map_err(|e| unreadable(format!("insight value: {e}")))?;
    Ok(match json {
        Value::String(text) => InsightValue::Text(text),
        Value::Bool(flag) => InsightValue::Flag(flag),
        Value::Number(n) => InsightValue::Number(match (n.as_i64(), n.as_f64()) {
            (Some(i), _) => InsightNumber::Integer(i),
            (None, Some(f)) => InsightNumber::Float(f),
            (None, None) => return Err(unreadable(format!("insight value {n}"))),
        }),
        other => return Err(unreadable(format!("insight value of type {other}"))),
    })
}

/// A row as a change: the insight, or `None` if it is a deletion.
fn change_from_row(r: &Row<'_>) -> rusqlite::Result<InsightChange> {
    let title: String = r.get(2)?;
    let updated_at = parse_ts(&r.get::<_, String>(7)?)?;
    let insight = match r.get::<_, Option<String>>(3)? {
        Some(value) => Some(Insight {
            title: title.clone(),
            value: value_from_json(&value)?,
            icon: r.get(4)?,
            created_at: parse_ts(&r.get::<_, String>(6)?)?,
            updated_at,
        }),
        None => None,
    };
    Ok(InsightChange {
        scope: Scope::new(r.get::<_, String>(0)?, r.get::<_, String>(1)?),
        title,
        version: r.get(5)?,
        changed_at: updated_at,
        insight,
    })
}

/// The scope's row by that title, if there is one (deleted or not).
fn read(c: &Connection, scope: &Scope, title: &str) -> rusqlite::Result<Option<InsightChange>> {
    c.prepare_cached(&format!(
        "SELECT {COLUMNS} FROM insights WHERE org = ?1 AND project = ?2 AND title = ?3"
    ))?
    .query_row(params![scope.org, scope.project, title], change_from_row)
    .optional()
}

/// Writes `insight` whole at `version`, over the row by its title if any.
fn write(c: &Connection, scope: &Scope, insight: &Insight, version: i64) -> rusqlite::Result<()> {
    c.prepare_cached(&format!(
        "INSERT INTO insights ({COLUMNS}) VALUES (?1,?2,?3,?4,?5,?6,?7,?8) \
         ON CONFLICT (org, project, title) DO UPDATE SET value = excluded.value, \
         icon = excluded.icon, version = excluded.version, \
         created_at = excluded.created_at, updated_at = excluded.updated_at"
    ))?
    .execute(params![
        scope.org,
        scope.project,
        insight.title,
        value_to_json(&insight.value),
        insight.icon,
        version,
        ts(&insight.created_at),
        ts(&insight.updated_at),
    ])?;
    Ok(())
}

/// Applies `change` to the scope's insight by that title, or creates one
/// with `create` if it has none (unless the scope is full), and writes the
/// result; a refusal writes nothing. One step of the writer's transaction.
fn change_or_create(
    c: &Connection,
    scope: &Scope,
    title: &str,
    change: impl Fn(&mut Insight) -> Result<(), InsightRefusal>,
    create: impl Fn() -> Insight,
) -> rusqlite::Result<Result<(Insight, bool), InsightRefusal>> {
    let stored = read(c, scope, title)?;
    let version = stored.as_ref().map_or(0, |s| s.version) + 1;
    if let Some(mut insight) = stored.and_then(|s| s.insight) {
        if let Err(refused) = change(&mut insight) {
            return Ok(Err(refused));
        }
        write(c, scope, &insight, version)?;
        return Ok(Ok((insight, false)));
    }
    let live: i64 = c
        .prepare_cached(
            "SELECT COUNT(*) FROM insights \
             WHERE org = ?1 AND project = ?2 AND value IS NOT NULL",
        )?
        .query_row(params![scope.org, scope.project], |r| r.get(0))?;
    if usize::try_from(live).unwrap_or(usize::MAX) >= MAX_INSIGHTS {
        return Ok(Err(InsightRefusal::Full));
    }
    let insight = create();
    write(c, scope, &insight, version)?;
    Ok(Ok((insight, true)))
}

#[async_trait]
impl InsightStore for SqliteStore {
    async fn list_insights(&self, scope: &Scope) -> StoreResult<Vec<Insight>> {
        let scope = scope.clone();
        self.run("list_insights", move |c| {
            c.prepare_cached(&format!(
                "SELECT {COLUMNS} FROM insights \
                 WHERE org = ?1 AND project = ?2 AND value IS NOT NULL \
                 ORDER BY created_at, title"
            ))?
            .query_map(params![scope.org, scope.project], change_from_row)?
            .filter_map(|change| change.map(|c| c.insight).transpose())
            .collect()
        })
        .await
    }

    async fn set_insight(
        &self,
        scope: &Scope,
        title: &str,
        value: &InsightValue,
        icon: Option<&str>,
        now: DateTime<Utc>,
    ) -> StoreResult<Result<(Insight, bool), InsightRefusal>> {
        let (scope, title, value) = (scope.clone(), title.to_owned(), value.clone());
        let icon = icon.map(str::to_owned);
        self.write("set_insight", move |c| {
            change_or_create(
                c,
                &scope,
                &title,
                |insight| {
                    insight.set(value.clone(), icon.as_deref(), now);
                    Ok(())
                },
                || Insight::new(&title, value.clone(), icon.as_deref(), now),
            )
        })
        .await
    }

    async fn increment_insight(
        &self,
        scope: &Scope,
        title: &str,
        by: InsightNumber,
        icon: Option<&str>,
        now: DateTime<Utc>,
    ) -> StoreResult<Result<(Insight, bool), InsightRefusal>> {
        let (scope, title) = (scope.clone(), title.to_owned());
        let icon = icon.map(str::to_owned);
        self.write("increment_insight", move |c| {
            change_or_create(
                c,
                &scope,
                &title,
                |insight| insight.increment(by, icon.as_deref(), now),
                || Insight::new(&title, InsightValue::Number(by), icon.as_deref(), now),
            )
        })
        .await
    }

    async fn delete_insight(
        &self,
        scope: &Scope,
        title: &str,
        now: DateTime<Utc>,
    ) -> StoreResult<bool> {
        let (scope, title) = (scope.clone(), title.to_owned());
        let forgotten = now - chrono::Duration::from_std(DELETION_KEPT).unwrap_or_default();
        self.write("delete_insight", move |c| {
            c.prepare_cached(
                "DELETE FROM insights \
                 WHERE org = ?1 AND project = ?2 AND value IS NULL AND updated_at < ?3",
            )?
            .execute(params![scope.org, scope.project, ts(&forgotten)])?;
            let deleted = c
                .prepare_cached(
                    "UPDATE insights SET value = NULL, version = version + 1, updated_at = ?4 \
                     WHERE org = ?1 AND project = ?2 AND title = ?3 AND value IS NOT NULL",
                )?
                .execute(params![scope.org, scope.project, title, ts(&now)])?;
            Ok(deleted == 1)
        })
        .await
    }

    async fn insights_changed(
        &self,
        since: DateTime<Utc>,
        limit: u32,
    ) -> StoreResult<Vec<InsightChange>> {
        self.run("insights_changed", move |c| {
            c.prepare_cached(&format!(
                "SELECT {COLUMNS} FROM insights WHERE updated_at >= ?1 \
                 ORDER BY updated_at LIMIT ?2"
            ))?
            .query_map(params![ts(&since), limit], change_from_row)?
            .collect()
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_value_reads_back_as_the_kind_it_was_written() {
        for value in [
            InsightValue::Text("green".into()),
            InsightValue::Text("2000".into()),
            InsightValue::Number(InsightNumber::Integer(2000)),
            InsightValue::Number(InsightNumber::Float(2000.0)),
            InsightValue::Number(InsightNumber::Float(-0.25)),
            InsightValue::Flag(false),
        ] {
            let text = value_to_json(&value);
            assert_eq!(value_from_json(&text).expect("reads"), value, "{text}");
        }
        assert_eq!(
            value_to_json(&InsightValue::Number(InsightNumber::Integer(2000))),
            "2000"
        );
    }
}
