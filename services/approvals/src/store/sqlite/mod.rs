//! The SQLite store (`--db PATH`): one file, every state change in one `BEGIN IMMEDIATE`
//! transaction, so checks and decisions are serialized by SQLite itself.

use rusqlite::Connection;

mod rows;
mod schema;
mod store;

/// A store on one SQLite connection (behind the [`crate::store::Backend`] mutex).
pub struct SqliteStore {
    conn: Connection,
}
