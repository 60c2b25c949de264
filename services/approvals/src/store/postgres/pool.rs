//! The connection pool of one instance: opening it (a first direct connection, then the
//! migrations), closing it off the async runtime, and the URL as logged.

use std::time::Duration;

use postgres::NoTls;
use r2d2_postgres::PostgresConnectionManager;

use super::migrations::migrate;
use crate::store::{Result, StoreError};

type R2d2Pool = r2d2::Pool<PostgresConnectionManager<NoTls>>;
pub(super) type Conn = r2d2::PooledConnection<PostgresConnectionManager<NoTls>>;

/// The pool of connections of one instance. The synchronous client runs a small runtime of its
/// own, which must not be entered from an async task: connections are used on the blocking pool,
/// and the pool is dropped (connections closed) on a thread of its own.
pub struct Pool(Option<R2d2Pool>);

impl Pool {
    /// A connection (waits at most 5 s for a free one).
    pub fn get(&self) -> Result<Conn> {
        match &self.0 {
            Some(p) => Ok(p.get()?),
            None => Err(StoreError::Internal("pool closed".into())),
        }
    }
}

impl Drop for Pool {
    fn drop(&mut self) {
        if let Some(pool) = self.0.take() {
            let _ = std::thread::Builder::new().name("pg-close".into()).spawn(move || drop(pool));
        }
    }
}

/// The URL without its password, for logs. The user information ends at the last `@`: a password
/// written with a raw `@` in it is cut whole, never shown in part.
pub fn redact(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_string();
    };
    match rest.rsplit_once('@') {
        Some((userinfo, host)) => {
            let user = userinfo.split(':').next().unwrap_or("");
            format!("{scheme}://{user}@{host}")
        }
        None => url.to_string(),
    }
    .split("password=")
    .next()
    .unwrap_or("")
    .to_string()
}

/// Connects (a pool of at most `size` connections; the first is opened now, so a wrong URL fails
/// at start) and runs the migrations the database lacks. Runs on a thread of its own (callable
/// from async code).
pub fn open(url: &str, size: u32, timeout: Duration) -> Result<Pool> {
    std::thread::scope(|s| match s.spawn(|| open_blocking(url, size, timeout)).join() {
        Ok(r) => r,
        Err(_) => Err(StoreError::Internal("postgres open thread panicked".into())),
    })
}

fn open_blocking(url: &str, size: u32, timeout: Duration) -> Result<Pool> {
    let mut config: postgres::Config = url.parse()?;
    if config.get_connect_timeout().is_none() {
        config.connect_timeout(Duration::from_secs(5));
    }
    config.application_name("mcp-approvals");
    // One direct connection first: a wrong password, host or TLS setting fails here at once with
    // PostgreSQL's own reason (the pool would wait its 5 s and report only a timeout). It runs the
    // migrations, which the request timeout below must not cut short.
    let mut first = config.connect(NoTls)?;
    migrate(&mut first)?;
    first.close()?;
    // The server cancels what would outlast the request (`App::db` gives up then): a statement
    // that runs or waits for a lock longer commits nothing afterwards. The URL's own options stay.
    let ms = timeout.as_millis();
    let options = format!("-c statement_timeout={ms} -c lock_timeout={ms}");
    let options = match config.get_options() {
        Some(own) if !own.trim().is_empty() => format!("{own} {options}"),
        _ => options,
    };
    config.options(&options);
    let manager = PostgresConnectionManager::new(config, NoTls);
    let pool = r2d2::Pool::builder()
        .max_size(size.max(1))
        .min_idle(Some(1))
        .connection_timeout(Duration::from_secs(5))
        .build(manager)?;
    Ok(Pool(Some(pool)))
}

#[cfg(test)]
mod tests {
    use super::redact;

    #[test]
    fn redacted_urls_hold_no_password() {
        for (url, shown) in [
            ("postgres://app:s3cr3t@db:5432/approvals", "postgres://app@db:5432/approvals"),
            ("postgresql://app:p@s3cr3t@db/approvals", "postgresql://app@db/approvals"),
            ("postgres://db/approvals?user=app&password=s3cr3t", "postgres://db/approvals?user=app&"),
            ("postgres://app@db/approvals", "postgres://app@db/approvals"),
        ] {
            assert_eq!(redact(url), shown, "{url}");
            assert!(!redact(url).contains("s3cr3t"));
        }
    }
}
