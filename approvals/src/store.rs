//! The SQLite store: one table of approvals, every state change in one transaction.
//!
//! All functions take `now` (Unix seconds) from the caller's [`crate::Clock`], so tests control
//! time. Expiry is applied lazily at the start of every transaction ([`Store::expire`]), so
//! correctness never depends on the background task that also calls it.

use std::path::Path;

use rusqlite::{params, Connection, OptionalExtension, Row, TransactionBehavior};

/// The schema version this build writes (`PRAGMA user_version`).
pub const SCHEMA_VERSION: i64 = 2;

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

const COLUMNS: &str = "id, key, state, grant_label, tool, arguments, request_id, reason, created_at, expires_in, \
                       expires_at, decided_at, approver, note, consumed_at, consumed_request_id, grant_id";

/// [`COLUMNS`] without the arguments (`''` in their place): for rows only logged or counted, so a
/// batch of big arguments is never read under the store lock.
const COLUMNS_NO_ARGUMENTS: &str = "id, key, state, grant_label, tool, '', request_id, reason, created_at, \
                                    expires_in, expires_at, decided_at, approver, note, consumed_at, \
                                    consumed_request_id, grant_id";

/// [`COLUMNS`] for a list page: the first `{prefix}` bytes of the arguments (as a blob, cut to a
/// character boundary when read) and, last, their size in bytes (`octet_length` reads it from the
/// record header, not the text).
fn listed_columns(prefix: usize) -> String {
    format!(
        "id, key, state, grant_label, tool, substr(CAST(arguments AS BLOB), 1, {prefix}), request_id, reason, \
         created_at, expires_in, expires_at, decided_at, approver, note, consumed_at, consumed_request_id, grant_id, \
         octet_length(arguments)"
    )
}

/// The longest prefix of `bytes` that is UTF-8 (a prefix cut may end inside a character).
fn utf8_prefix(bytes: Vec<u8>) -> String {
    match String::from_utf8(bytes) {
        Ok(s) => s,
        Err(e) => {
            let valid = e.utf8_error().valid_up_to();
            let mut bytes = e.into_bytes();
            bytes.truncate(valid);
            String::from_utf8(bytes).unwrap_or_default()
        }
    }
}

/// The lifecycle of an approval (API.md, "States").
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum State {
    Pending,
    Approved,
    Denied,
    Consumed,
    Expired,
}

impl State {
    pub const ALL: [State; 5] = [State::Pending, State::Approved, State::Denied, State::Consumed, State::Expired];

    pub fn as_str(self) -> &'static str {
        match self {
            State::Pending => "pending",
            State::Approved => "approved",
            State::Denied => "denied",
            State::Consumed => "consumed",
            State::Expired => "expired",
        }
    }

    pub fn parse(s: &str) -> Option<State> {
        State::ALL.into_iter().find(|st| st.as_str() == s)
    }
}

/// One row of the approvals table.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Approval {
    pub id: String,
    pub key: String,
    pub state: State,
    pub grant: String,
    pub tool: String,
    /// The call's arguments as JSON text.
    pub arguments: String,
    /// The request id of the check that opened it.
    pub request_id: String,
    pub reason: String,
    pub created_at: i64,
    pub expires_in: i64,
    pub expires_at: i64,
    pub decided_at: Option<i64>,
    pub approver: Option<String>,
    pub note: String,
    pub consumed_at: Option<i64>,
    pub consumed_request_id: Option<String>,
    /// Hex SHA-256 of the agent's credential ("" for rows written before schema 2).
    pub grant_id: String,
}

impl Approval {
    fn from_row(row: &Row<'_>) -> rusqlite::Result<Approval> {
        Approval::from_row_with(row, row.get(5)?)
    }

    fn from_row_with(row: &Row<'_>, arguments: String) -> rusqlite::Result<Approval> {
        let state: String = row.get(2)?;
        let state = State::parse(&state).ok_or_else(|| {
            rusqlite::Error::FromSqlConversionFailure(2, rusqlite::types::Type::Text, format!("state {state}").into())
        })?;
        Ok(Approval {
            id: row.get(0)?,
            key: row.get(1)?,
            state,
            grant: row.get(3)?,
            tool: row.get(4)?,
            arguments,
            request_id: row.get(6)?,
            reason: row.get(7)?,
            created_at: row.get(8)?,
            expires_in: row.get(9)?,
            expires_at: row.get(10)?,
            decided_at: row.get(11)?,
            approver: row.get(12)?,
            note: row.get(13)?,
            consumed_at: row.get(14)?,
            consumed_request_id: row.get(15)?,
            grant_id: row.get(16)?,
        })
    }
}

/// An approval as a list page shows it: at most a prefix of its arguments, and their size.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Listed {
    /// The row; `arguments` holds only the first bytes asked for (cut at a character boundary).
    pub approval: Approval,
    /// Size of the arguments in all, in bytes.
    pub arguments_bytes: usize,
}

impl Listed {
    fn from_row(row: &Row<'_>) -> rusqlite::Result<Listed> {
        let prefix: Vec<u8> = row.get(5)?;
        let bytes: i64 = row.get(17)?;
        Ok(Listed {
            approval: Approval::from_row_with(row, utf8_prefix(prefix))?,
            arguments_bytes: usize::try_from(bytes).unwrap_or(0),
        })
    }

    /// Whether `approval.arguments` holds all of them.
    pub fn complete(&self) -> bool {
        self.approval.arguments.len() == self.arguments_bytes
    }
}

/// How many pending approvals one grant has open.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GrantCount {
    pub grant_id: String,
    /// A grant label of its pending approvals (the greatest, should the filter have sent several).
    pub grant: String,
    pub pending: i64,
}

/// The approvers' queue (`GET /`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PendingPage {
    /// The oldest pending approvals, oldest first, arguments cut to a prefix.
    pub list: Vec<Listed>,
    /// Pending approvals in all.
    pub total: i64,
    /// The grants with the most pending approvals, most first (at most the number asked for).
    pub grants: Vec<GrantCount>,
    /// Grants with pending approvals in all.
    pub grants_total: i64,
}

/// A validated `/v1/check` request.
#[derive(Clone, Debug)]
pub struct CheckInput {
    /// Recomputed from `grant_id`, `tool` and `arguments` by the service (never trusted as sent).
    pub key: String,
    /// Hex SHA-256 of the agent's credential.
    pub grant_id: String,
    pub grant: String,
    pub tool: String,
    /// JSON text of the arguments.
    pub arguments: String,
    pub request_id: String,
    pub expires_in: i64,
    pub reason: String,
}

/// The answer to a check (API.md steps 1-4).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CheckOutcome {
    /// Step 1: an approved approval was consumed by this check.
    Approved { approval: Approval },
    /// Step 2: a current denial.
    Denied { approval: Approval },
    /// Steps 3-4: pending (`opened` when this check opened it).
    Pending { approval: Approval, opened: bool },
    /// Step 4 refused: the grant already has `pending` open approvals (the per-grant cap).
    TooManyPending { pending: i64 },
    /// Step 4 refused: `pending` approvals are open in all (the global cap).
    TooManyPendingInAll { pending: i64 },
}

/// What changed in one transaction, for metrics, logs and the UI version.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Changes {
    pub expired: Vec<Approval>,
    pub opened: u64,
    pub consumed: u64,
    pub approved: u64,
    pub denied: u64,
}

impl Changes {
    pub fn any(&self) -> bool {
        !self.expired.is_empty() || self.opened + self.consumed + self.approved + self.denied > 0
    }
}

/// The result of an approver's decision.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Decided {
    Ok(Approval),
    NotFound,
    /// Not pending (already decided, consumed or expired): the row as it is.
    NotPending(Approval),
}

pub struct Store {
    conn: Connection,
}

#[derive(Debug)]
pub enum StoreError {
    Sqlite(rusqlite::Error),
    /// The file was written by a newer mcp-approvals.
    NewerSchema(i64),
}

impl std::fmt::Display for StoreError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StoreError::Sqlite(e) => write!(f, "sqlite: {e}"),
            StoreError::NewerSchema(v) => write!(
                f,
                "database schema version {v} is newer than this mcp-approvals supports ({SCHEMA_VERSION}); upgrade mcp-approvals"
            ),
        }
    }
}

impl std::error::Error for StoreError {}

impl From<rusqlite::Error> for StoreError {
    fn from(e: rusqlite::Error) -> Self {
        StoreError::Sqlite(e)
    }
}

pub type Result<T> = std::result::Result<T, StoreError>;

impl Store {
    /// Opens (creating if needed) the database file: WAL mode, schema created or checked.
    pub fn open(path: &Path) -> Result<Store> {
        let conn = Connection::open(path)?;
        conn.busy_timeout(std::time::Duration::from_secs(5))?;
        // The journal mode pragma answers with the mode in force.
        let _mode: String = conn.query_row("PRAGMA journal_mode = WAL", [], |r| r.get(0))?;
        conn.execute_batch("PRAGMA synchronous = FULL;")?;
        let version: i64 = conn.query_row("PRAGMA user_version", [], |r| r.get(0))?;
        if version > SCHEMA_VERSION {
            return Err(StoreError::NewerSchema(version));
        }
        // Schema 1 -> 2: the grant id column (the new index needs it before SCHEMA runs).
        let migrate =
            if version == 1 { "ALTER TABLE approvals ADD COLUMN grant_id TEXT NOT NULL DEFAULT '';" } else { "" };
        conn.execute_batch(&format!("BEGIN; {migrate} {SCHEMA} PRAGMA user_version = {SCHEMA_VERSION}; COMMIT;"))?;
        Ok(Store { conn })
    }

    pub fn schema_version(&self) -> Result<i64> {
        Ok(self.conn.query_row("PRAGMA user_version", [], |r| r.get(0))?)
    }

    /// Marks pending and approved approvals past their expiry as `expired`.
    fn expire_in(tx: &Connection, now: i64) -> rusqlite::Result<Vec<Approval>> {
        let mut stmt = tx.prepare_cached(&format!(
            "UPDATE approvals SET state = 'expired' WHERE state IN ('pending', 'approved') AND expires_at <= ?1 \
             RETURNING {COLUMNS_NO_ARGUMENTS}"
        ))?;
        let rows = stmt.query_map([now], Approval::from_row)?;
        let mut expired = rows.collect::<rusqlite::Result<Vec<_>>>()?;
        // RETURNING gives the new state already; keep the order stable for logs.
        expired.sort_by(|a, b| a.id.cmp(&b.id));
        Ok(expired)
    }

    /// The background expiry and the lazy one before reads.
    pub fn expire(&mut self, now: i64) -> Result<Changes> {
        let tx = self.conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        let expired = Self::expire_in(&tx, now)?;
        tx.commit()?;
        Ok(Changes { expired, ..Changes::default() })
    }

    fn find(tx: &Connection, sql_where: &str, params: impl rusqlite::Params) -> rusqlite::Result<Option<Approval>> {
        let mut stmt = tx.prepare_cached(&format!("SELECT {COLUMNS} FROM approvals WHERE {sql_where}"))?;
        stmt.query_row(params, Approval::from_row).optional()
    }

    /// API.md `/v1/check` steps 1-4 in one transaction. `new_id` is used only when a new pending
    /// approval is opened, and only while the grant has fewer than `max_pending_per_grant` pending
    /// and fewer than `max_pending` are pending in all.
    pub fn check(
        &mut self,
        input: &CheckInput,
        now: i64,
        new_id: &str,
        max_pending_per_grant: u32,
        max_pending: u32,
    ) -> Result<(CheckOutcome, Changes)> {
        let tx = self.conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        let mut changes = Changes { expired: Self::expire_in(&tx, now)?, ..Changes::default() };

        // 1. approved and unexpired: consume it (single use).
        let approved = Self::find(
            &tx,
            "key = ?1 AND state = 'approved' AND expires_at > ?2 ORDER BY decided_at DESC LIMIT 1",
            params![input.key, now],
        )?;
        if let Some(mut approval) = approved {
            let n = tx.execute(
                "UPDATE approvals SET state = 'consumed', consumed_at = ?2, consumed_request_id = ?3 \
                 WHERE id = ?1 AND state = 'approved' AND expires_at > ?2",
                params![approval.id, now, input.request_id],
            )?;
            if n == 1 {
                tx.commit()?;
                approval.state = State::Consumed;
                approval.consumed_at = Some(now);
                approval.consumed_request_id = Some(input.request_id.clone());
                changes.consumed = 1;
                return Ok((CheckOutcome::Approved { approval }, changes));
            }
        }

        // 2. a current denial.
        let denied = Self::find(
            &tx,
            "key = ?1 AND state = 'denied' AND expires_at > ?2 ORDER BY decided_at DESC LIMIT 1",
            params![input.key, now],
        )?;
        if let Some(approval) = denied {
            tx.commit()?;
            return Ok((CheckOutcome::Denied { approval }, changes));
        }

        // 3. the pending one.
        let pending = Self::find(&tx, "key = ?1 AND state = 'pending' AND expires_at > ?2", params![input.key, now])?;
        if let Some(approval) = pending {
            tx.commit()?;
            return Ok((CheckOutcome::Pending { approval, opened: false }, changes));
        }

        // 4. open a new pending approval, unless the grant has too many already.
        let pending: i64 = tx.query_row(
            "SELECT COUNT(*) FROM approvals WHERE grant_id = ?1 AND state = 'pending' AND expires_at > ?2",
            params![input.grant_id, now],
            |r| r.get(0),
        )?;
        if pending >= i64::from(max_pending_per_grant) {
            tx.commit()?;
            return Ok((CheckOutcome::TooManyPending { pending }, changes));
        }
        let pending: i64 = tx.query_row(
            "SELECT COUNT(*) FROM approvals WHERE state = 'pending' AND expires_at > ?1",
            params![now],
            |r| r.get(0),
        )?;
        if pending >= i64::from(max_pending) {
            tx.commit()?;
            return Ok((CheckOutcome::TooManyPendingInAll { pending }, changes));
        }
        let approval = Approval {
            id: new_id.to_string(),
            key: input.key.clone(),
            state: State::Pending,
            grant: input.grant.clone(),
            tool: input.tool.clone(),
            arguments: input.arguments.clone(),
            request_id: input.request_id.clone(),
            reason: input.reason.clone(),
            created_at: now,
            expires_in: input.expires_in,
            expires_at: now.saturating_add(input.expires_in),
            decided_at: None,
            approver: None,
            note: String::new(),
            consumed_at: None,
            consumed_request_id: None,
            grant_id: input.grant_id.clone(),
        };
        tx.execute(
            "INSERT INTO approvals (id, key, state, grant_label, tool, arguments, request_id, reason, created_at, \
             expires_in, expires_at, note, grant_id) VALUES (?1, ?2, 'pending', ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, '', ?11)",
            params![
                approval.id,
                approval.key,
                approval.grant,
                approval.tool,
                approval.arguments,
                approval.request_id,
                approval.reason,
                approval.created_at,
                approval.expires_in,
                approval.expires_at,
                approval.grant_id
            ],
        )?;
        tx.commit()?;
        changes.opened = 1;
        Ok((CheckOutcome::Pending { approval, opened: true }, changes))
    }

    /// An approver approves (`approve`) or denies a pending approval. The decision stays current
    /// for `expires_in` seconds from now.
    pub fn decide(
        &mut self,
        id: &str,
        approve: bool,
        approver: &str,
        note: &str,
        now: i64,
    ) -> Result<(Decided, Changes)> {
        let tx = self.conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        let mut changes = Changes { expired: Self::expire_in(&tx, now)?, ..Changes::default() };
        let Some(approval) = Self::find(&tx, "id = ?1", [id])? else {
            tx.commit()?;
            return Ok((Decided::NotFound, changes));
        };
        if approval.state != State::Pending {
            tx.commit()?;
            return Ok((Decided::NotPending(approval), changes));
        }
        let state = if approve { State::Approved } else { State::Denied };
        let n = tx.execute(
            "UPDATE approvals SET state = ?2, decided_at = ?3, approver = ?4, note = ?5, expires_at = ?3 + expires_in \
             WHERE id = ?1 AND state = 'pending'",
            params![id, state.as_str(), now, approver, note],
        )?;
        let updated = Self::find(&tx, "id = ?1", [id])?;
        tx.commit()?;
        match updated {
            Some(a) if n == 1 => {
                if approve {
                    changes.approved = 1;
                } else {
                    changes.denied = 1;
                }
                Ok((Decided::Ok(a), changes))
            }
            Some(a) => Ok((Decided::NotPending(a), changes)),
            None => Ok((Decided::NotFound, changes)),
        }
    }

    /// One approval (expiry applied first).
    pub fn get(&mut self, id: &str, now: i64) -> Result<(Option<Approval>, Changes)> {
        let tx = self.conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        let expired = Self::expire_in(&tx, now)?;
        let a = Self::find(&tx, "id = ?1", [id])?;
        tx.commit()?;
        Ok((a, Changes { expired, ..Changes::default() }))
    }

    /// Approvals in `state` (all when `None`), newest first, at most `limit`.
    pub fn list(&mut self, state: Option<State>, limit: u32, now: i64) -> Result<(Vec<Approval>, Changes)> {
        let tx = self.conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        let expired = Self::expire_in(&tx, now)?;
        let list = {
            let mut stmt = tx.prepare_cached(&format!(
                "SELECT {COLUMNS} FROM approvals WHERE (?1 IS NULL OR state = ?1) \
                 ORDER BY created_at DESC, rowid DESC LIMIT ?2"
            ))?;
            let rows = stmt.query_map(params![state.map(State::as_str), limit], Approval::from_row)?;
            rows.collect::<rusqlite::Result<Vec<_>>>()?
        };
        tx.commit()?;
        Ok((list, Changes { expired, ..Changes::default() }))
    }

    /// The approvers' queue: the oldest `limit` pending approvals, oldest first (new ones join at
    /// the bottom), each with at most the first `prefix` bytes of its arguments; how many are
    /// pending in all; and the `top_grants` grants with the most pending approvals. Never reads
    /// more than `prefix` bytes of arguments per row.
    pub fn pending(&mut self, now: i64, limit: u32, prefix: usize, top_grants: u32) -> Result<(PendingPage, Changes)> {
        let tx = self.conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        let expired = Self::expire_in(&tx, now)?;
        let list = {
            let mut stmt = tx.prepare_cached(&format!(
                "SELECT {} FROM approvals WHERE state = 'pending' AND expires_at > ?1 \
                 ORDER BY created_at ASC, rowid ASC LIMIT ?2",
                listed_columns(prefix)
            ))?;
            let rows = stmt.query_map(params![now, limit], Listed::from_row)?;
            rows.collect::<rusqlite::Result<Vec<_>>>()?
        };
        let (total, grants_total): (i64, i64) = tx.query_row(
            "SELECT COUNT(*), COUNT(DISTINCT grant_id) FROM approvals WHERE state = 'pending' AND expires_at > ?1",
            [now],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )?;
        let grants = {
            let mut stmt = tx.prepare_cached(
                "SELECT grant_id, MAX(grant_label), COUNT(*) AS n FROM approvals \
                 WHERE state = 'pending' AND expires_at > ?1 GROUP BY grant_id ORDER BY n DESC, grant_id ASC LIMIT ?2",
            )?;
            let rows = stmt.query_map(params![now, top_grants], |r| {
                Ok(GrantCount { grant_id: r.get(0)?, grant: r.get(1)?, pending: r.get(2)? })
            })?;
            rows.collect::<rusqlite::Result<Vec<_>>>()?
        };
        tx.commit()?;
        Ok((PendingPage { list, total, grants, grants_total }, Changes { expired, ..Changes::default() }))
    }

    /// The most recent `limit` decided approvals (by an approver: `decided_at` set; approvals that
    /// expired undecided are not decisions), newest first. Their arguments are not read (`""`).
    pub fn recent(&mut self, limit: u32) -> Result<Vec<Approval>> {
        let mut stmt = self.conn.prepare_cached(&format!(
            "SELECT {COLUMNS_NO_ARGUMENTS} FROM approvals WHERE decided_at IS NOT NULL \
             ORDER BY COALESCE(consumed_at, decided_at) DESC, rowid DESC LIMIT ?1"
        ))?;
        let rows = stmt.query_map([limit], Approval::from_row)?;
        Ok(rows.collect::<rusqlite::Result<Vec<_>>>()?)
    }

    /// Retention: deletes consumed, denied and expired approvals whose last timestamp (the latest
    /// of opened, decided, used and expiry) is more than `retain_days` days before `now`.
    /// `retain_days` 0 keeps everything. Returns the number of rows deleted.
    pub fn purge(&mut self, now: i64, retain_days: u32) -> Result<usize> {
        if retain_days == 0 {
            return Ok(0);
        }
        let cutoff = now.saturating_sub(i64::from(retain_days).saturating_mul(86_400));
        let n = self.conn.execute(
            "DELETE FROM approvals WHERE state IN ('consumed', 'denied', 'expired') \
             AND max(created_at, expires_at, COALESCE(decided_at, 0), COALESCE(consumed_at, 0)) < ?1",
            [cutoff],
        )?;
        Ok(n)
    }

    /// Count of unexpired pending approvals (the metrics gauge).
    pub fn pending_count(&self, now: i64) -> Result<i64> {
        Ok(self.conn.query_row(
            "SELECT COUNT(*) FROM approvals WHERE state = 'pending' AND expires_at > ?1",
            [now],
            |r| r.get(0),
        )?)
    }

    /// A cheap liveness probe of the database.
    pub fn ping(&self) -> Result<()> {
        let _: i64 = self.conn.query_row("SELECT 1", [], |r| r.get(0))?;
        Ok(())
    }
}
