//! Where the data lives (`--db`): a SQLite file or a PostgreSQL URL, and the form of it that logs
//! may show.

use std::path::{Path, PathBuf};

use super::postgres;

/// Where the data lives (`--db`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Location {
    /// A SQLite file.
    Sqlite(PathBuf),
    /// A PostgreSQL connection string (`postgres://` or `postgresql://` URL).
    Postgres(String),
}

impl Location {
    /// `postgres://...` and `postgresql://...` are PostgreSQL; anything else is a SQLite path.
    pub fn parse(s: &str) -> Location {
        if s.starts_with("postgres://") || s.starts_with("postgresql://") {
            Location::Postgres(s.to_string())
        } else {
            Location::Sqlite(PathBuf::from(s))
        }
    }

    /// Is `s` a libpq connection string of `KEY=VALUE` words (`host=db user=app password=…`)?
    /// Read as a path, it would create a SQLite file of that name and put it, password and all, in
    /// the log: `--db` takes a `postgres://` URL instead.
    pub fn is_keyword_string(s: &str) -> bool {
        // libpq's keywords that carry the connection (a string names at least one), spaces
        // allowed around `=`.
        const KEYWORDS: [&str; 8] = ["host", "hostaddr", "port", "dbname", "user", "password", "passfile", "service"];
        let s = s.trim_start();
        KEYWORDS.iter().any(|k| s.strip_prefix(k).is_some_and(|rest| rest.trim_start().starts_with('=')))
    }

    /// For logs: the path, or the URL without its password.
    pub fn redacted(&self) -> String {
        match self {
            Location::Sqlite(p) => p.display().to_string(),
            Location::Postgres(url) => postgres::redact(url),
        }
    }
}

impl From<&Location> for Location {
    fn from(l: &Location) -> Self {
        l.clone()
    }
}

impl From<&Path> for Location {
    fn from(p: &Path) -> Self {
        Location::Sqlite(p.to_path_buf())
    }
}

impl From<&PathBuf> for Location {
    fn from(p: &PathBuf) -> Self {
        Location::Sqlite(p.clone())
    }
}

impl From<&str> for Location {
    fn from(s: &str) -> Self {
        Location::parse(s)
    }
}

impl From<&String> for Location {
    fn from(s: &String) -> Self {
        Location::parse(s)
    }
}

#[cfg(test)]
mod tests {
    use super::Location;

    #[test]
    fn a_libpq_keyword_string_is_told_from_a_path() {
        for s in ["host=db user=app password=S3CRET", "dbname=approvals", "  password=x host=y", "host = db password=x"]
        {
            assert!(Location::is_keyword_string(s), "{s}");
        }
        for s in [
            "approvals.sqlite",
            "approvals=prod.sqlite",
            "hosts.sqlite",
            "/var/lib/a=b/approvals.sqlite",
            "./x=1.sqlite",
            "postgres://u:p@h/db",
            "",
        ] {
            assert!(!Location::is_keyword_string(s), "{s}");
        }
    }
}
