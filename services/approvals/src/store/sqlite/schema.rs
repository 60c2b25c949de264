//! The schema and its migrations: `PRAGMA user_version` is the schema version, every step the
//! file lacks runs at open in one transaction.

use std::path::Path;

use rusqlite::Connection;

use super::SqliteStore;
use crate::store::{Result, StoreError, SCHEMA_VERSION};

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS approvals (
    id                  TEXT PRIMARY KEY,
    key                 TEXT NOT NULL,
    state               TEXT NOT NULL
                        CHECK (state IN ('pending', 'approved', 'denied', 'consumed', 'expired')),
    grant_label         TEXT NOT NULL,
    tool                TEXT NOT NULL,
    arguments           TEXT NOT NULL,
    request_id          TEXT NOT NULL,
    reason              TEXT NOT NULL DEFAULT '',
    created_at          INTEGER NOT NULL,
    expires_in          INTEGER NOT NULL,
    expires_at          INTEGER NOT NULL,
    decided_at          INTEGER,
    approver            TEXT,
    note                TEXT NOT NULL DEFAULT '',
    consumed_at         INTEGER,
    consumed_request_id TEXT,
    -- Hex SHA-256 of the agent's credential (schema 2; '' in rows of schema 1).
    grant_id            TEXT NOT NULL DEFAULT ''
) STRICT;
-- At most one pending approval per key.
CREATE UNIQUE INDEX IF NOT EXISTS approvals_one_pending_per_key ON approvals (key) WHERE state = 'pending';
CREATE INDEX IF NOT EXISTS approvals_by_key ON approvals (key, state);
CREATE INDEX IF NOT EXISTS approvals_by_state ON approvals (state, expires_at);
CREATE INDEX IF NOT EXISTS approvals_by_created ON approvals (created_at);
CREATE INDEX IF NOT EXISTS approvals_by_decided ON approvals (decided_at);
CREATE INDEX IF NOT EXISTS approvals_pending_by_grant ON approvals (grant_id) WHERE state = 'pending';
";

/// Schema 3: approver sessions, stored under the SHA-256 of their id.
const SESSIONS: &str = "
CREATE TABLE IF NOT EXISTS sessions (
    id_hash    TEXT PRIMARY KEY,
    approver   TEXT NOT NULL,
    csrf       TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    expires_at INTEGER NOT NULL,
    flash      TEXT
) STRICT;
CREATE INDEX IF NOT EXISTS sessions_by_expiry ON sessions (expires_at);
";

/// Schema 5: the MCP server a call goes to (bound by the key, shown). Rows of before have empty
/// strings: their keys, made without an upstream, match no check of a current filter.
const UPSTREAM: &str = "
ALTER TABLE approvals ADD COLUMN upstream_cluster TEXT NOT NULL DEFAULT '';
ALTER TABLE approvals ADD COLUMN upstream_authority TEXT NOT NULL DEFAULT '';
ALTER TABLE approvals ADD COLUMN upstream_path TEXT NOT NULL DEFAULT '';
";

/// Schema 6: who called and under which policy, from the verified token (bound by the key,
/// shown); `act` (the actor chain as JSON text) is `NULL` for an approval without a caller, as in
/// every row of before.
const CALLER: &str = "
ALTER TABLE approvals ADD COLUMN policy TEXT;
ALTER TABLE approvals ADD COLUMN subject TEXT;
ALTER TABLE approvals ADD COLUMN client_id TEXT;
ALTER TABLE approvals ADD COLUMN act TEXT;
";

/// Schema 4: a continuation leg's `inputResponses` and `requestState` (bound by the key, shown).
const LEGS: &str = "
ALTER TABLE approvals ADD COLUMN input_responses TEXT NOT NULL DEFAULT '';
ALTER TABLE approvals ADD COLUMN request_state TEXT;
";

impl SqliteStore {
    /// Opens (creating if needed) the database file: WAL mode, then the migrations it lacks,
    /// in one transaction (`PRAGMA user_version` is the schema version).
    pub fn open(path: &Path) -> Result<SqliteStore> {
        let conn = Connection::open(path)?;
        conn.busy_timeout(std::time::Duration::from_secs(5))?;
        // The journal mode pragma answers with the mode in force.
        let _mode: String = conn.query_row("PRAGMA journal_mode = WAL", [], |r| r.get(0))?;
        conn.execute_batch("PRAGMA synchronous = FULL;")?;
        let version: i64 = conn.query_row("PRAGMA user_version", [], |r| r.get(0))?;
        if version > SCHEMA_VERSION {
            return Err(StoreError::NewerSchema(version));
        }
        let mut steps = String::new();
        // 0 -> 2: the approvals table as of schema 2 (a new file). 1 -> 2: the grant id column
        // (the new index needs it before SCHEMA runs).
        if version == 1 {
            steps.push_str("ALTER TABLE approvals ADD COLUMN grant_id TEXT NOT NULL DEFAULT '';");
        }
        if version < 2 {
            steps.push_str(SCHEMA);
        }
        // 2 -> 3: approver sessions.
        if version < 3 {
            steps.push_str(SESSIONS);
        }
        // 3 -> 4: the answers of MCP 2026-07-28 continuation legs.
        if version < 4 {
            steps.push_str(LEGS);
        }
        // 4 -> 5: the upstream an approval is bound to.
        if version < 5 {
            steps.push_str(UPSTREAM);
        }
        // 5 -> 6: the caller.
        if version < 6 {
            steps.push_str(CALLER);
        }
        conn.execute_batch(&format!("BEGIN; {steps} PRAGMA user_version = {SCHEMA_VERSION}; COMMIT;"))?;
        Ok(SqliteStore { conn })
    }
}
