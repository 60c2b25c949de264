//! [`PgStore`]: the [`Storage`] trait on one pooled connection, each change in a READ COMMITTED
//! transaction that notifies [`CHANNEL`] and is retried on serialization failures.

use std::time::Duration;

use postgres::error::SqlState;
use postgres::{IsolationLevel, Transaction};

use super::check::check_in;
use super::pool::Conn;
use super::rows::{approval, approval_with, expire_in, find, rows};
use super::CHANNEL;
use crate::store::columns::{COLUMNS, COLUMNS_NO_ARGUMENTS};
use crate::store::{
    utf8_prefix, Approval, Changes, CheckInput, CheckOutcome, Decided, GrantCount, Listed, NewPending, PendingPage,
    Result, State, Storage, StoreError, StoredSession,
};

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

/// Rows deleted by one statement of the retention purge (its `LIMIT`).
const PURGE_BATCH: i64 = 5000;

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
                    // `opened` when nothing but openings: the other instances' hold-mode checks
                    // then stay asleep (`listen`).
                    let payload = if changes.settles() { "" } else { super::OPENED };
                    tx.execute("SELECT pg_notify($1, $2)", &[&CHANNEL, &payload])?;
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

impl Storage for PgStore {
    fn schema_version(&mut self) -> Result<i64> {
        Ok(self.conn.query_one("SELECT COALESCE(MAX(version), 0) FROM mcp_approvals_migrations", &[])?.try_get(0)?)
    }

    fn expire(&mut self, now: i64) -> Result<Changes> {
        let ((), changes) = self.tx(|tx| Ok(((), Changes { expired: expire_in(tx, now)?, ..Changes::default() })))?;
        Ok(changes)
    }

    fn check(&mut self, input: &CheckInput, now: i64, open: &NewPending<'_>) -> Result<(CheckOutcome, Changes)> {
        self.tx(|tx| check_in(tx, input, now, open))
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
                 consumed_request_id, grant_id, input_responses, request_state, upstream_cluster, upstream_authority, \
                 upstream_path, policy, subject, client_id, act, octet_length(arguments)::BIGINT \
                 FROM approvals WHERE state = 'pending' AND expires_at > $1 ORDER BY created_at ASC, seq ASC LIMIT $2",
                &[&now, &limit, &prefix],
            )?;
            let list = list
                .iter()
                .map(|row| {
                    let prefix: Vec<u8> = row.try_get(5)?;
                    let bytes: i64 = row.try_get(26)?;
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
        // In batches of PURGE_BATCH: each statement stays well within
        // `--db-timeout` (the connections' statement_timeout), however many rows are due.
        let mut total = 0u64;
        loop {
            let n = self.conn.execute(
                "DELETE FROM approvals WHERE id IN (SELECT id FROM approvals \
                 WHERE state IN ('consumed', 'denied', 'expired') \
                 AND GREATEST(created_at, expires_at, COALESCE(decided_at, 0), COALESCE(consumed_at, 0)) < $1 \
                 LIMIT $2)",
                &[&cutoff, &PURGE_BATCH],
            )?;
            total += n;
            if n < PURGE_BATCH.unsigned_abs() {
                return Ok(usize::try_from(total).unwrap_or(usize::MAX));
            }
        }
    }

    fn pending_count(&mut self, now: i64) -> Result<(i64, Option<i64>)> {
        let row = self.conn.query_one(
            "SELECT COUNT(*), MIN(created_at) FROM approvals WHERE state = 'pending' AND expires_at > $1",
            &[&now],
        )?;
        Ok((row.try_get(0)?, row.try_get(1)?))
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
        let row = if take_flash {
            // The old flash is read in the same statement that clears it: shown once, on one instance.
            self.conn.query_opt(
                "WITH old AS (SELECT id_hash, flash FROM sessions WHERE id_hash = $1 AND expires_at > $2 FOR UPDATE)
                 UPDATE sessions s SET flash = NULL FROM old
                 WHERE s.id_hash = old.id_hash
                 RETURNING s.approver, s.csrf, s.expires_at, old.flash",
                &[&id_hash, &now],
            )?
        } else {
            // Page polls (`/ui/version`) and form posts: a read, no row write.
            self.conn.query_opt(
                "SELECT approver, csrf, expires_at, flash FROM sessions WHERE id_hash = $1 AND expires_at > $2",
                &[&id_hash, &now],
            )?
        };
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
