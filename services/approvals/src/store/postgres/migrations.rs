//! The versioned schema migrations (`mcp_approvals_migrations`), run at start under an advisory
//! lock.

use postgres::Client;

use super::LOCK_MIGRATIONS;
use crate::store::{Result, StoreError, SCHEMA_VERSION};

/// The versioned migrations: version, SQL. Version 2 is the approvals table as SQLite has it at
/// schema 2 (PostgreSQL support starts there), 3 the approver sessions.
const MIGRATIONS: [(i64, &str); 5] = [
    (
        2,
        "CREATE TABLE approvals (
            seq                 BIGINT GENERATED ALWAYS AS IDENTITY,
            id                  TEXT PRIMARY KEY,
            key                 TEXT NOT NULL,
            state               TEXT NOT NULL
                                CHECK (state IN ('pending', 'approved', 'denied', 'consumed', 'expired')),
            grant_label         TEXT NOT NULL,
            tool                TEXT NOT NULL,
            arguments           TEXT NOT NULL,
            request_id          TEXT NOT NULL,
            reason              TEXT NOT NULL DEFAULT '',
            created_at          BIGINT NOT NULL,
            expires_in          BIGINT NOT NULL,
            expires_at          BIGINT NOT NULL,
            decided_at          BIGINT,
            approver            TEXT,
            note                TEXT NOT NULL DEFAULT '',
            consumed_at         BIGINT,
            consumed_request_id TEXT,
            grant_id            TEXT NOT NULL DEFAULT ''
        );
        CREATE UNIQUE INDEX approvals_one_pending_per_key ON approvals (key) WHERE state = 'pending';
        CREATE INDEX approvals_by_key ON approvals (key, state);
        CREATE INDEX approvals_by_state ON approvals (state, expires_at);
        CREATE INDEX approvals_by_created ON approvals (created_at, seq);
        CREATE INDEX approvals_by_decided ON approvals (decided_at);
        CREATE INDEX approvals_pending_by_grant ON approvals (grant_id) WHERE state = 'pending';",
    ),
    (
        3,
        "CREATE TABLE sessions (
            id_hash    TEXT PRIMARY KEY,
            approver   TEXT NOT NULL,
            csrf       TEXT NOT NULL,
            created_at BIGINT NOT NULL,
            expires_at BIGINT NOT NULL,
            flash      TEXT
        );
        CREATE INDEX sessions_by_expiry ON sessions (expires_at);",
    ),
    // 4: a continuation leg's `inputResponses` and `requestState` (bound by the key, shown).
    (
        4,
        "ALTER TABLE approvals ADD COLUMN input_responses TEXT NOT NULL DEFAULT '';
        ALTER TABLE approvals ADD COLUMN request_state TEXT;",
    ),
    // 5: the MCP server a call goes to (bound by the key, shown); '' in rows of before, whose keys
    // match no check of a current filter.
    (
        5,
        "ALTER TABLE approvals ADD COLUMN upstream_cluster TEXT NOT NULL DEFAULT '';
        ALTER TABLE approvals ADD COLUMN upstream_authority TEXT NOT NULL DEFAULT '';
        ALTER TABLE approvals ADD COLUMN upstream_path TEXT NOT NULL DEFAULT '';",
    ),
    // 6: who called and under which policy, from the verified token (bound by the key, shown);
    // `act` (the actor chain as JSON text) NULL for an approval without a caller, as in rows of before.
    (
        6,
        "ALTER TABLE approvals ADD COLUMN policy TEXT;
        ALTER TABLE approvals ADD COLUMN subject TEXT;
        ALTER TABLE approvals ADD COLUMN client_id TEXT;
        ALTER TABLE approvals ADD COLUMN act TEXT;",
    ),
];

pub(super) fn migrate(client: &mut Client) -> Result<()> {
    let mut tx = client.transaction()?;
    tx.execute("SELECT pg_advisory_xact_lock($1, 0)", &[&LOCK_MIGRATIONS])?;
    tx.batch_execute(
        "CREATE TABLE IF NOT EXISTS mcp_approvals_migrations (
            version    BIGINT PRIMARY KEY,
            applied_at TIMESTAMPTZ NOT NULL DEFAULT now()
        )",
    )?;
    let current: i64 =
        tx.query_one("SELECT COALESCE(MAX(version), 0) FROM mcp_approvals_migrations", &[])?.try_get(0)?;
    if current > SCHEMA_VERSION {
        return Err(StoreError::NewerSchema(current));
    }
    for (version, sql) in MIGRATIONS {
        if version > current {
            tx.batch_execute(sql)?;
            tx.execute("INSERT INTO mcp_approvals_migrations (version) VALUES ($1)", &[&version])?;
            tracing::info!(version, "database migrated");
        }
    }
    tx.commit()?;
    Ok(())
}
