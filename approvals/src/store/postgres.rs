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

use std::time::Duration;

use postgres::error::SqlState;
use postgres::fallible_iterator::FallibleIterator;
use postgres::{Client, IsolationLevel, NoTls, Row, Transaction};
use r2d2_postgres::PostgresConnectionManager;

use super::{
    utf8_prefix, Approval, Changes, CheckInput, CheckOutcome, Decided, GrantCount, Listed, PendingPage, Result, State,
    Storage, StoreError, StoredSession, SCHEMA_VERSION,
};

type R2d2Pool = r2d2::Pool<PostgresConnectionManager<NoTls>>;
type Conn = r2d2::PooledConnection<PostgresConnectionManager<NoTls>>;

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

/// The channel of `NOTIFY` (any change to an approval).
pub const CHANNEL: &str = "mcp_approvals";

/// Advisory lock keys (first argument of the two-key form; the second is 0 or a hash).
const LOCK_MIGRATIONS: i32 = 0x6d63_7001;
const LOCK_KEY: i32 = 0x6d63_7002;
const LOCK_OPEN: i32 = 0x6d63_7003;

/// The versioned migrations: version, SQL. Version 2 is the approvals table as SQLite has it at
/// schema 2 (PostgreSQL support starts there), 3 the approver sessions.
const MIGRATIONS: [(i64, &str); 3] = [
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
];

const COLUMNS: &str = "id, key, state, grant_label, tool, arguments, request_id, reason, created_at, expires_in, \
                       expires_at, decided_at, approver, note, consumed_at, consumed_request_id, grant_id, \
                       input_responses, request_state";

const COLUMNS_NO_ARGUMENTS: &str = "id, key, state, grant_label, tool, '', request_id, reason, created_at, \
                                    expires_in, expires_at, decided_at, approver, note, consumed_at, \
                                    consumed_request_id, grant_id, '', NULL";

/// The URL without its password, for logs.
pub fn redact(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_string();
    };
    match rest.split_once('@') {
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
pub fn open(url: &str, size: u32) -> Result<Pool> {
    std::thread::scope(|s| match s.spawn(|| open_blocking(url, size)).join() {
        Ok(r) => r,
        Err(_) => Err(StoreError::Internal("postgres open thread panicked".into())),
    })
}

fn open_blocking(url: &str, size: u32) -> Result<Pool> {
    let mut config: postgres::Config = url.parse()?;
    if config.get_connect_timeout().is_none() {
        config.connect_timeout(Duration::from_secs(5));
    }
    config.application_name("mcp-approvals");
    // One direct connection first: a wrong password, host or TLS setting fails here at once with
    // PostgreSQL's own reason (the pool would wait its 5 s and report only a timeout).
    config.connect(NoTls)?.close()?;
    let manager = PostgresConnectionManager::new(config, NoTls);
    let pool = r2d2::Pool::builder()
        .max_size(size.max(1))
        .min_idle(Some(1))
        .connection_timeout(Duration::from_secs(5))
        .build(manager)?;
    let mut conn = pool.get()?;
    migrate(&mut conn)?;
    drop(conn);
    Ok(Pool(Some(pool)))
}

fn migrate(client: &mut Client) -> Result<()> {
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

fn approval_with(row: &Row, arguments: String) -> Result<Approval> {
    let state: String = row.try_get(2)?;
    let state = State::parse(&state).ok_or_else(|| StoreError::Internal(format!("unknown state {state:?}")))?;
    Ok(Approval {
        id: row.try_get(0)?,
        key: row.try_get(1)?,
        state,
        grant: row.try_get(3)?,
        tool: row.try_get(4)?,
        arguments,
        request_id: row.try_get(6)?,
        reason: row.try_get(7)?,
        created_at: row.try_get(8)?,
        expires_in: row.try_get(9)?,
        expires_at: row.try_get(10)?,
        decided_at: row.try_get(11)?,
        approver: row.try_get(12)?,
        note: row.try_get(13)?,
        consumed_at: row.try_get(14)?,
        consumed_request_id: row.try_get(15)?,
        grant_id: row.try_get(16)?,
        input_responses: row.try_get(17)?,
        request_state: row.try_get(18)?,
    })
}

fn approval(row: &Row) -> Result<Approval> {
    approval_with(row, row.try_get(5)?)
}

fn rows(list: Vec<Row>) -> Result<Vec<Approval>> {
    list.iter().map(approval).collect()
}

fn is_retryable(e: &StoreError) -> bool {
    match e {
        StoreError::Postgres(e) => {
            matches!(e.code(), Some(c) if *c == SqlState::T_R_SERIALIZATION_FAILURE || *c == SqlState::T_R_DEADLOCK_DETECTED)
        }
        StoreError::Conflict => true,
        _ => false,
    }
}

/// A store on one pooled connection (taken for one [`crate::App::db`] call).
pub struct PgStore {
    conn: Conn,
}

impl PgStore {
    pub fn new(conn: Conn) -> PgStore {
        PgStore { conn }
    }

    /// Runs `f` in a READ COMMITTED transaction, committing when it returns Ok, and notifying
    /// [`CHANNEL`] when it changed an approval; retried (3 tries) on serialization failures and
    /// deadlocks.
    fn tx<T>(&mut self, mut f: impl FnMut(&mut Transaction<'_>) -> Result<(T, Changes)>) -> Result<(T, Changes)> {
        let mut tries = 0;
        loop {
            tries += 1;
            let result = (|| {
                let mut tx = self.conn.build_transaction().isolation_level(IsolationLevel::ReadCommitted).start()?;
                let (value, changes) = f(&mut tx)?;
                if changes.any() {
                    tx.execute("SELECT pg_notify($1, '')", &[&CHANNEL])?;
                }
                tx.commit()?;
                Ok((value, changes))
            })();
            match result {
                Err(e) if tries < 3 && is_retryable(&e) => {
                    tracing::debug!(error = %e, "postgres: retrying a transaction");
                    std::thread::sleep(Duration::from_millis(5 * tries));
                }
                other => return other,
            }
        }
    }
}

/// Marks pending and approved approvals past their expiry as `expired`, skipping rows another
/// transaction holds (it marks them, or a later one does; every query compares `expires_at`).
fn expire_in(tx: &mut Transaction<'_>, now: i64) -> Result<Vec<Approval>> {
    let list = tx.query(
        &format!(
            "UPDATE approvals SET state = 'expired' WHERE id IN (
                SELECT id FROM approvals WHERE state IN ('pending', 'approved') AND expires_at <= $1
                FOR UPDATE SKIP LOCKED)
             RETURNING {COLUMNS_NO_ARGUMENTS}"
        ),
        &[&now],
    )?;
    let mut expired = rows(list)?;
    expired.sort_by(|a, b| a.id.cmp(&b.id));
    Ok(expired)
}

fn find(
    tx: &mut Transaction<'_>,
    sql_where: &str,
    params: &[&(dyn postgres::types::ToSql + Sync)],
) -> Result<Option<Approval>> {
    match tx.query_opt(&format!("SELECT {COLUMNS} FROM approvals WHERE {sql_where}"), params)? {
        Some(row) => Ok(Some(approval(&row)?)),
        None => Ok(None),
    }
}

fn check_in(
    tx: &mut Transaction<'_>,
    input: &CheckInput,
    now: i64,
    new_id: &str,
    max_pending_per_grant: u32,
    max_pending: u32,
) -> Result<(CheckOutcome, Changes)> {
    // Checks of one key run one at a time, on every instance.
    tx.execute("SELECT pg_advisory_xact_lock($1, hashtext($2))", &[&LOCK_KEY, &input.key])?;
    let mut changes = Changes { expired: expire_in(tx, now)?, ..Changes::default() };

    // 1. approved and unexpired: consume it (single use).
    let consumed = tx.query_opt(
        &format!(
            "UPDATE approvals SET state = 'consumed', consumed_at = $2, consumed_request_id = $3
             WHERE id = (SELECT id FROM approvals WHERE key = $1 AND state = 'approved' AND expires_at > $2
                         ORDER BY decided_at DESC LIMIT 1)
               AND state = 'approved' AND expires_at > $2
             RETURNING {COLUMNS}"
        ),
        &[&input.key, &now, &input.request_id],
    )?;
    if let Some(row) = consumed {
        changes.consumed = 1;
        return Ok((CheckOutcome::Approved { approval: approval(&row)? }, changes));
    }

    // 2. a current denial.
    let denied = find(
        tx,
        "key = $1 AND state = 'denied' AND expires_at > $2 ORDER BY decided_at DESC LIMIT 1",
        &[&input.key, &now],
    )?;
    if let Some(approval) = denied {
        return Ok((CheckOutcome::Denied { approval }, changes));
    }

    // 3. the pending one.
    if let Some(approval) = find(tx, "key = $1 AND state = 'pending' AND expires_at > $2", &[&input.key, &now])? {
        return Ok((CheckOutcome::Pending { approval, opened: false }, changes));
    }

    // 4. open a new pending approval, unless the grant has too many already. Openings run one at
    // a time so the caps are exact across instances.
    tx.execute("SELECT pg_advisory_xact_lock($1, 0)", &[&LOCK_OPEN])?;
    let pending: i64 = tx
        .query_one(
            "SELECT COUNT(*) FROM approvals WHERE grant_id = $1 AND state = 'pending' AND expires_at > $2",
            &[&input.grant_id, &now],
        )?
        .try_get(0)?;
    if pending >= i64::from(max_pending_per_grant) {
        return Ok((CheckOutcome::TooManyPending { pending }, changes));
    }
    let pending: i64 = tx
        .query_one("SELECT COUNT(*) FROM approvals WHERE state = 'pending' AND expires_at > $1", &[&now])?
        .try_get(0)?;
    if pending >= i64::from(max_pending) {
        return Ok((CheckOutcome::TooManyPendingInAll { pending }, changes));
    }
    let expires_at = now.saturating_add(input.expires_in);
    let inserted = tx.query_opt(
        &format!(
            "INSERT INTO approvals (id, key, state, grant_label, tool, arguments, request_id, reason, created_at, \
             expires_in, expires_at, note, grant_id, input_responses, request_state) \
             VALUES ($1, $2, 'pending', $3, $4, $5, $6, $7, $8, $9, $10, '', $11, $12, $13)
             ON CONFLICT (key) WHERE state = 'pending' DO NOTHING
             RETURNING {COLUMNS}"
        ),
        &[
            &new_id,
            &input.key,
            &input.grant,
            &input.tool,
            &input.arguments,
            &input.request_id,
            &input.reason,
            &now,
            &input.expires_in,
            &expires_at,
            &input.grant_id,
            &input.input_responses,
            &input.request_state,
        ],
    )?;
    match inserted {
        Some(row) => {
            let approval = approval(&row)?;
            changes.opened = 1;
            changes.events.push(approval.clone());
            Ok((CheckOutcome::Pending { approval, opened: true }, changes))
        }
        // A pending row of this key exists that step 3 did not see (an expired one not yet
        // marked, held by another transaction): mark it and open again on the next check.
        None => match find(tx, "key = $1 AND state = 'pending'", &[&input.key])? {
            Some(approval) => Ok((CheckOutcome::Pending { approval, opened: false }, changes)),
            None => Err(StoreError::Conflict),
        },
    }
}

impl Storage for PgStore {
    fn schema_version(&mut self) -> Result<i64> {
        Ok(self.conn.query_one("SELECT COALESCE(MAX(version), 0) FROM mcp_approvals_migrations", &[])?.try_get(0)?)
    }

    fn expire(&mut self, now: i64) -> Result<Changes> {
        let ((), changes) = self.tx(|tx| Ok(((), Changes { expired: expire_in(tx, now)?, ..Changes::default() })))?;
        Ok(changes)
    }

    fn check(
        &mut self,
        input: &CheckInput,
        now: i64,
        new_id: &str,
        max_pending_per_grant: u32,
        max_pending: u32,
    ) -> Result<(CheckOutcome, Changes)> {
        self.tx(|tx| check_in(tx, input, now, new_id, max_pending_per_grant, max_pending))
    }

    fn decide(&mut self, id: &str, approve: bool, approver: &str, note: &str, now: i64) -> Result<(Decided, Changes)> {
        self.tx(|tx| {
            let mut changes = Changes { expired: expire_in(tx, now)?, ..Changes::default() };
            let state = if approve { State::Approved } else { State::Denied };
            let updated = tx.query_opt(
                &format!(
                    "UPDATE approvals SET state = $2, decided_at = $3, approver = $4, note = $5, \
                     expires_at = $3 + expires_in WHERE id = $1 AND state = 'pending' AND expires_at > $3 \
                     RETURNING {COLUMNS}"
                ),
                &[&id, &state.as_str(), &now, &approver, &note],
            )?;
            if let Some(row) = updated {
                let a = approval(&row)?;
                if approve {
                    changes.approved = 1;
                } else {
                    changes.denied = 1;
                }
                changes.events.push(a.clone());
                return Ok((Decided::Ok(a), changes));
            }
            match find(tx, "id = $1", &[&id])? {
                None => Ok((Decided::NotFound, changes)),
                Some(mut a) => {
                    // Pending past its expiry but held by another transaction's expiry: expired.
                    if a.state == State::Pending {
                        a.state = State::Expired;
                    }
                    Ok((Decided::NotPending(a), changes))
                }
            }
        })
    }

    fn get(&mut self, id: &str, now: i64) -> Result<(Option<Approval>, Changes)> {
        self.tx(|tx| {
            let expired = expire_in(tx, now)?;
            let a = find(tx, "id = $1", &[&id])?;
            Ok((a, Changes { expired, ..Changes::default() }))
        })
    }

    fn list(&mut self, state: Option<State>, limit: u32, now: i64) -> Result<(Vec<Approval>, Changes)> {
        let state = state.map(State::as_str);
        let limit = i64::from(limit);
        self.tx(|tx| {
            let expired = expire_in(tx, now)?;
            let list = tx.query(
                &format!(
                    "SELECT {COLUMNS} FROM approvals WHERE ($1::text IS NULL OR state = $1) \
                     ORDER BY created_at DESC, seq DESC LIMIT $2"
                ),
                &[&state, &limit],
            )?;
            Ok((rows(list)?, Changes { expired, ..Changes::default() }))
        })
    }

    fn pending(&mut self, now: i64, limit: u32, prefix: usize, top_grants: u32) -> Result<(PendingPage, Changes)> {
        let (limit, top_grants) = (i64::from(limit), i64::from(top_grants));
        let prefix = i32::try_from(prefix).unwrap_or(i32::MAX);
        self.tx(|tx| {
            let expired = expire_in(tx, now)?;
            let list = tx.query(
                "SELECT id, key, state, grant_label, tool, substring(convert_to(arguments, 'UTF8') FROM 1 FOR $3), \
                 request_id, reason, created_at, expires_in, expires_at, decided_at, approver, note, consumed_at, \
                 consumed_request_id, grant_id, input_responses, request_state, octet_length(arguments)::BIGINT \
                 FROM approvals WHERE state = 'pending' AND expires_at > $1 ORDER BY created_at ASC, seq ASC LIMIT $2",
                &[&now, &limit, &prefix],
            )?;
            let list = list
                .iter()
                .map(|row| {
                    let prefix: Vec<u8> = row.try_get(5)?;
                    let bytes: i64 = row.try_get(19)?;
                    Ok(Listed {
                        approval: approval_with(row, utf8_prefix(prefix))?,
                        arguments_bytes: usize::try_from(bytes).unwrap_or(0),
                    })
                })
                .collect::<Result<Vec<_>>>()?;
            let counts = tx.query_one(
                "SELECT COUNT(*), COUNT(DISTINCT grant_id) FROM approvals WHERE state = 'pending' AND expires_at > $1",
                &[&now],
            )?;
            let grants = tx
                .query(
                    "SELECT grant_id, MAX(grant_label), COUNT(*) AS n FROM approvals \
                     WHERE state = 'pending' AND expires_at > $1 GROUP BY grant_id ORDER BY n DESC, grant_id ASC LIMIT $2",
                    &[&now, &top_grants],
                )?
                .iter()
                .map(|r| Ok(GrantCount { grant_id: r.try_get(0)?, grant: r.try_get(1)?, pending: r.try_get(2)? }))
                .collect::<Result<Vec<_>>>()?;
            let page = PendingPage { list, total: counts.try_get(0)?, grants, grants_total: counts.try_get(1)? };
            Ok((page, Changes { expired, ..Changes::default() }))
        })
    }

    fn recent(&mut self, limit: u32) -> Result<Vec<Approval>> {
        let list = self.conn.query(
            &format!(
                "SELECT {COLUMNS_NO_ARGUMENTS} FROM approvals WHERE decided_at IS NOT NULL \
                 ORDER BY COALESCE(consumed_at, decided_at) DESC, seq DESC LIMIT $1"
            ),
            &[&i64::from(limit)],
        )?;
        rows(list)
    }

    fn purge(&mut self, now: i64, retain_days: u32) -> Result<usize> {
        self.conn.execute("DELETE FROM sessions WHERE expires_at <= $1", &[&now])?;
        if retain_days == 0 {
            return Ok(0);
        }
        let cutoff = now.saturating_sub(i64::from(retain_days).saturating_mul(86_400));
        let n = self.conn.execute(
            "DELETE FROM approvals WHERE state IN ('consumed', 'denied', 'expired') \
             AND GREATEST(created_at, expires_at, COALESCE(decided_at, 0), COALESCE(consumed_at, 0)) < $1",
            &[&cutoff],
        )?;
        Ok(usize::try_from(n).unwrap_or(usize::MAX))
    }

    fn pending_count(&mut self, now: i64) -> Result<i64> {
        Ok(self
            .conn
            .query_one("SELECT COUNT(*) FROM approvals WHERE state = 'pending' AND expires_at > $1", &[&now])?
            .try_get(0)?)
    }

    fn ping(&mut self) -> Result<()> {
        self.conn.simple_query("SELECT 1")?;
        Ok(())
    }

    fn session_create(&mut self, id_hash: &str, session: &StoredSession, now: i64) -> Result<()> {
        self.conn.execute(
            "INSERT INTO sessions (id_hash, approver, csrf, created_at, expires_at, flash) VALUES ($1, $2, $3, $4, $5, $6)",
            &[&id_hash, &session.approver, &session.csrf, &now, &session.expires_at, &session.flash],
        )?;
        Ok(())
    }

    fn session_get(&mut self, id_hash: &str, now: i64, take_flash: bool) -> Result<Option<StoredSession>> {
        if !take_flash {
            // Page polls (`/ui/version`) and form posts: a read, no row write.
            let row = self.conn.query_opt(
                "SELECT approver, csrf, expires_at, flash FROM sessions WHERE id_hash = $1 AND expires_at > $2",
                &[&id_hash, &now],
            )?;
            return match row {
                Some(r) => Ok(Some(StoredSession {
                    approver: r.try_get(0)?,
                    csrf: r.try_get(1)?,
                    expires_at: r.try_get(2)?,
                    flash: r.try_get(3)?,
                })),
                None => Ok(None),
            };
        }
        // The old flash is read in the same statement that clears it: shown once, on one instance.
        let row = self.conn.query_opt(
            "WITH old AS (SELECT id_hash, flash FROM sessions WHERE id_hash = $1 AND expires_at > $2 FOR UPDATE)
             UPDATE sessions s SET flash = NULL FROM old
             WHERE s.id_hash = old.id_hash
             RETURNING s.approver, s.csrf, s.expires_at, old.flash",
            &[&id_hash, &now],
        )?;
        match row {
            Some(r) => Ok(Some(StoredSession {
                approver: r.try_get(0)?,
                csrf: r.try_get(1)?,
                expires_at: r.try_get(2)?,
                flash: r.try_get(3)?,
            })),
            None => Ok(None),
        }
    }

    fn session_set_flash(&mut self, id_hash: &str, flash: &str) -> Result<()> {
        self.conn.execute("UPDATE sessions SET flash = $2 WHERE id_hash = $1", &[&id_hash, &flash])?;
        Ok(())
    }

    fn session_remove(&mut self, id_hash: &str) -> Result<()> {
        self.conn.execute("DELETE FROM sessions WHERE id_hash = $1", &[&id_hash])?;
        Ok(())
    }
}

/// Listens for [`CHANNEL`] on a connection of its own and calls `changed` for each notification,
/// and once after every (re)connection (changes may have been missed meanwhile). Reconnects with
/// backoff (0.1 s doubling to 5 s) until `stop` returns true. Blocking: run on a thread.
pub fn listen(url: &str, changed: impl Fn(), stop: impl Fn() -> bool) {
    let mut backoff = Duration::from_millis(100);
    while !stop() {
        match listen_once(url, &changed, &stop) {
            Ok(()) => return,
            Err(e) => {
                tracing::warn!(error = %e, retry_in = ?backoff, "postgres LISTEN connection lost");
                std::thread::sleep(backoff);
                backoff = (backoff * 2).min(Duration::from_secs(5));
            }
        }
    }
}

fn listen_once(url: &str, changed: &impl Fn(), stop: &impl Fn() -> bool) -> Result<()> {
    let mut config: postgres::Config = url.parse()?;
    config.connect_timeout(Duration::from_secs(5));
    config.application_name("mcp-approvals listen");
    let mut client = config.connect(NoTls)?;
    client.batch_execute(&format!("LISTEN {CHANNEL}"))?;
    changed();
    loop {
        if stop() {
            return Ok(());
        }
        // Each notification is handled at once; the timeout only bounds how late `stop` is seen.
        {
            let mut notifications = client.notifications();
            let mut it = notifications.timeout_iter(Duration::from_millis(250));
            while it.next()?.is_some() {
                changed();
                if stop() {
                    return Ok(());
                }
            }
        }
        if client.is_closed() {
            return Err(StoreError::Internal("LISTEN connection closed".into()));
        }
    }
}
