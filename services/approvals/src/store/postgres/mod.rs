//! The PostgreSQL store (`--db postgres://...`): any number of instances on one database.
//!
//! - Checks of one key are serialized across instances by `pg_advisory_xact_lock` on the key's
//!   hash, so API.md steps 1-4 run as if alone, as in SQLite. Single use also holds without it:
//!   the consume is `UPDATE ... WHERE state = 'approved'`, which a concurrent consume makes match
//!   nothing (READ COMMITTED re-checks the row after the other commits).
//! - One pending per key: the partial unique index `approvals_one_pending_per_key`, with
//!   `INSERT ... ON CONFLICT DO NOTHING` then a re-read.
//! - The pending caps: opening takes one more advisory lock, so the counts are exact.
//! - Every transaction that changes an approval sends `NOTIFY mcp_approvals` (delivered at
//!   commit); [`listen`] wakes this instance's hold-mode waiters and pages.
//! - Expiry marks rows with `FOR UPDATE SKIP LOCKED` (never waits on another instance), and every
//!   query also compares `expires_at` with now, so a row not yet marked is never used.
//! - Migrations are versioned in `mcp_approvals_migrations` and run at start under an advisory
//!   lock (instances starting together run them once).
//! - A serialization failure or deadlock (SQLSTATE 40001, 40P01) retries the transaction.

mod check;
mod listen;
mod migrations;
mod pool;
mod rows;
mod store;

pub use listen::listen;
pub use pool::{open, redact, Pool};
pub use store::PgStore;

/// The payload of a `NOTIFY` for a transaction that only opened approvals (any other: empty).
pub const OPENED: &str = "opened";

/// The channel of `NOTIFY` (any change to an approval).
pub const CHANNEL: &str = "mcp_approvals";

/// Advisory lock keys (first argument of the two-key form; the second is 0 or a hash).
const LOCK_MIGRATIONS: i32 = 0x6d63_7001;
const LOCK_KEY: i32 = 0x6d63_7002;
const LOCK_OPEN: i32 = 0x6d63_7003;
