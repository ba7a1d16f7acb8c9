//! Where a store is, in words an operator can check and a log can keep: the
//! SQLite file's absolute path, or MongoDB's hosts and database. Never the
//! connection string itself, which may carry a user and a password.

use std::path::{Path, PathBuf};

use mongodb::options::{ConnectionString, HostInfo};

use super::StoreConfig;

impl StoreConfig {
    /// `SQLite store at /abs/tocsin.sqlite3`, or `MongoDB store at
    /// db1:27017,db2:27017, database tocsin`: which store this is, without
    /// credentials.
    pub fn describe(&self) -> String {
        match self {
            Self::Sqlite { path, .. } => {
                format!("SQLite store at {}", absolute(path).display())
            }
            Self::Mongo { uri, database, .. } => {
                format!("MongoDB store at {}, database {database}", hosts(uri))
            }
        }
    }

    /// Whether opening this store creates it: a SQLite file that does not
    /// exist yet. Known only before opening. A MongoDB database comes into
    /// being on its first write, wherever the URI points, so it is never
    /// reported as new (finding out would take a round trip of its own).
    pub fn is_new(&self) -> bool {
        match self {
            Self::Sqlite { path, .. } => !path.exists(),
            Self::Mongo { .. } => false,
        }
    }
}

/// The path with symbolic links and `..` resolved when it exists, else made
/// absolute as it stands (a store not created yet).
fn absolute(path: &Path) -> PathBuf {
    std::fs::canonicalize(path)
        .or_else(|_| std::path::absolute(path))
        .unwrap_or_else(|_| path.to_path_buf())
}

/// The hosts of a MongoDB URI, read by the driver's own parser, so what is
/// shown is what it connects to; user, password and options are left out.
fn hosts(uri: &str) -> String {
    match ConnectionString::parse(uri).map(|c| c.host_info) {
        Ok(HostInfo::HostIdentifiers(hosts)) => hosts
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join(","),
        Ok(HostInfo::DnsRecord(name)) => format!("{name} (DNS SRV)"),
        // The URI is not echoed: a malformed one may still hold a password.
        _ => "an unreadable URI".to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::SqliteSync;

    fn mongo(uri: &str) -> StoreConfig {
        StoreConfig::Mongo {
            uri: uri.into(),
            database: "alerts".into(),
            write_concern: Default::default(),
        }
    }

    #[test]
    fn mongodb_is_described_by_hosts_and_database_without_credentials() {
        let described =
            mongo("mongodb://tocsin:hunter2@db1.internal,db2.internal:27018/admin?authSource=admin&replicaSet=rs0")
                .describe();
        assert_eq!(
            described,
            "MongoDB store at db1.internal:27017,db2.internal:27018, database alerts"
        );
        for secret in ["tocsin", "hunter2", "authSource", "admin"] {
            assert!(!described.contains(secret), "{secret} in {described}");
        }
        let srv = mongo("mongodb+srv://u:p4ss@cluster0.example.net/").describe();
        assert_eq!(
            srv,
            "MongoDB store at cluster0.example.net (DNS SRV), database alerts"
        );
        let unreadable = mongo("mongodb://u:s3cret@/").describe();
        assert!(!unreadable.contains("s3cret"), "{unreadable}");
    }

    #[test]
    fn sqlite_is_described_by_its_absolute_path_and_is_new_until_created() {
        let dir = tempfile::tempdir().expect("temp dir");
        let relative = Path::new(".").join("data").join("t.sqlite3");
        let config = StoreConfig::Sqlite {
            path: relative,
            synchronous: SqliteSync::Normal,
        };
        let described = config.describe();
        let cwd = std::env::current_dir().expect("cwd");
        assert!(
            described.starts_with(&format!("SQLite store at {}", cwd.display())),
            "{described}"
        );
        let file = dir.path().join("t.sqlite3");
        let config = StoreConfig::Sqlite {
            path: file.clone(),
            synchronous: SqliteSync::Normal,
        };
        assert!(config.is_new());
        std::fs::write(&file, "").expect("write");
        assert!(!config.is_new());
        let canonical = std::fs::canonicalize(&file).expect("canonical");
        assert_eq!(
            config.describe(),
            format!("SQLite store at {}", canonical.display())
        );
    }
}
