//! [`SqliteStore`]: the [`Storage`] trait, every change in one `BEGIN IMMEDIATE` transaction.

use rusqlite::{params, OptionalExtension, TransactionBehavior};

use super::rows::{approval_row, listed_columns, listed_row};
use super::SqliteStore;
use crate::store::columns::{COLUMNS, COLUMNS_NO_ARGUMENTS};
use crate::store::{
    Approval, Changes, CheckInput, CheckOutcome, Decided, GrantCount, NewPending, PendingPage, Result, State, Storage,
    StoredSession,
};

impl Storage for SqliteStore {
    fn schema_version(&mut self) -> Result<i64> {
        Ok(self.conn.query_row("PRAGMA user_version", [], |r| r.get(0))?)
    }

    /// The background expiry and the lazy one before reads.
    fn expire(&mut self, now: i64) -> Result<Changes> {
        let tx = self.conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        let expired = Self::expire_in(&tx, now)?;
        tx.commit()?;
        Ok(Changes { expired, ..Changes::default() })
    }

    fn check(&mut self, input: &CheckInput, now: i64, open: &NewPending<'_>) -> Result<(CheckOutcome, Changes)> {
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
        if pending >= i64::from(open.max_per_grant) {
            tx.commit()?;
            return Ok((CheckOutcome::TooManyPending { pending }, changes));
        }
        let pending: i64 = tx.query_row(
            "SELECT COUNT(*) FROM approvals WHERE state = 'pending' AND expires_at > ?1",
            params![now],
            |r| r.get(0),
        )?;
        if pending >= i64::from(open.max_in_all) {
            tx.commit()?;
            return Ok((CheckOutcome::TooManyPendingInAll { pending }, changes));
        }
        let approval = Approval {
            id: open.id.to_string(),
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
            input_responses: input.input_responses.clone(),
            request_state: input.request_state.clone(),
            upstream: input.upstream.clone(),
            caller: input.caller.clone(),
        };
        tx.execute(
            "INSERT INTO approvals (id, key, state, grant_label, tool, arguments, request_id, reason, created_at, \
             expires_in, expires_at, note, grant_id, input_responses, request_state, upstream_cluster, \
             upstream_authority, upstream_path, policy, subject, client_id, act) \
             VALUES (?1, ?2, 'pending', ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, '', ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, \
             ?19, ?20)",
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
                approval.grant_id,
                approval.input_responses,
                approval.request_state,
                approval.upstream.cluster,
                approval.upstream.authority,
                approval.upstream.path,
                approval.caller.as_ref().and_then(|c| c.policy.as_deref()),
                approval.caller.as_ref().and_then(|c| c.subject.as_deref()),
                approval.caller.as_ref().and_then(|c| c.client_id.as_deref()),
                crate::store::act_column(approval.caller.as_ref())
            ],
        )?;
        tx.commit()?;
        changes.opened = 1;
        changes.events.push(approval.clone());
        Ok((CheckOutcome::Pending { approval, opened: true }, changes))
    }

    /// An approver approves (`approve`) or denies a pending approval. The decision stays current
    /// for `expires_in` seconds from now.
    fn decide(&mut self, id: &str, approve: bool, approver: &str, note: &str, now: i64) -> Result<(Decided, Changes)> {
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
                changes.events.push(a.clone());
                Ok((Decided::Ok(a), changes))
            }
            Some(a) => Ok((Decided::NotPending(a), changes)),
            None => Ok((Decided::NotFound, changes)),
        }
    }

    /// One approval (expiry applied first).
    fn get(&mut self, id: &str, now: i64) -> Result<(Option<Approval>, Changes)> {
        let tx = self.conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        let expired = Self::expire_in(&tx, now)?;
        let a = Self::find(&tx, "id = ?1", [id])?;
        tx.commit()?;
        Ok((a, Changes { expired, ..Changes::default() }))
    }

    /// Approvals in `state` (all when `None`), newest first, at most `limit`.
    fn list(&mut self, state: Option<State>, limit: u32, now: i64) -> Result<(Vec<Approval>, Changes)> {
        let tx = self.conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        let expired = Self::expire_in(&tx, now)?;
        let list = {
            let mut stmt = tx.prepare_cached(&format!(
                "SELECT {COLUMNS} FROM approvals WHERE (?1 IS NULL OR state = ?1) \
                 ORDER BY created_at DESC, rowid DESC LIMIT ?2"
            ))?;
            let rows = stmt.query_map(params![state.map(State::as_str), limit], approval_row)?;
            rows.collect::<rusqlite::Result<Vec<_>>>()?
        };
        tx.commit()?;
        Ok((list, Changes { expired, ..Changes::default() }))
    }

    /// The approvers' queue: the oldest `limit` pending approvals, oldest first (new ones join at
    /// the bottom), each with at most the first `prefix` bytes of its arguments; how many are
    /// pending in all; and the `top_grants` grants with the most pending approvals. Never reads
    /// more than `prefix` bytes of arguments per row.
    fn pending(&mut self, now: i64, limit: u32, prefix: usize, top_grants: u32) -> Result<(PendingPage, Changes)> {
        let tx = self.conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        let expired = Self::expire_in(&tx, now)?;
        let list = {
            let mut stmt = tx.prepare_cached(&format!(
                "SELECT {} FROM approvals WHERE state = 'pending' AND expires_at > ?1 \
                 ORDER BY created_at ASC, rowid ASC LIMIT ?2",
                listed_columns(prefix)
            ))?;
            let rows = stmt.query_map(params![now, limit], listed_row)?;
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
    fn recent(&mut self, limit: u32) -> Result<Vec<Approval>> {
        let mut stmt = self.conn.prepare_cached(&format!(
            "SELECT {COLUMNS_NO_ARGUMENTS} FROM approvals WHERE decided_at IS NOT NULL \
             ORDER BY COALESCE(consumed_at, decided_at) DESC, rowid DESC LIMIT ?1"
        ))?;
        let rows = stmt.query_map([limit], approval_row)?;
        Ok(rows.collect::<rusqlite::Result<Vec<_>>>()?)
    }

    /// Retention: deletes consumed, denied and expired approvals whose last timestamp (the latest
    /// of opened, decided, used and expiry) is more than `retain_days` days before `now`.
    /// `retain_days` 0 keeps everything. Returns the number of rows deleted.
    fn purge(&mut self, now: i64, retain_days: u32) -> Result<usize> {
        self.conn.execute("DELETE FROM sessions WHERE expires_at <= ?1", [now])?;
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
    fn pending_count(&mut self, now: i64) -> Result<(i64, Option<i64>)> {
        Ok(self.conn.query_row(
            "SELECT COUNT(*), MIN(created_at) FROM approvals WHERE state = 'pending' AND expires_at > ?1",
            [now],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )?)
    }

    /// A cheap liveness probe of the database.
    fn ping(&mut self) -> Result<()> {
        let _: i64 = self.conn.query_row("SELECT 1", [], |r| r.get(0))?;
        Ok(())
    }

    fn session_create(&mut self, id_hash: &str, session: &StoredSession, now: i64) -> Result<()> {
        self.conn.execute(
            "INSERT INTO sessions (id_hash, approver, csrf, created_at, expires_at, flash) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
            params![id_hash, session.approver, session.csrf, now, session.expires_at, session.flash],
        )?;
        Ok(())
    }

    fn session_get(&mut self, id_hash: &str, now: i64, take_flash: bool) -> Result<Option<StoredSession>> {
        let tx = self.conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        let found = tx
            .query_row(
                "SELECT approver, csrf, expires_at, flash FROM sessions WHERE id_hash = ?1 AND expires_at > ?2",
                params![id_hash, now],
                |r| Ok(StoredSession { approver: r.get(0)?, csrf: r.get(1)?, expires_at: r.get(2)?, flash: r.get(3)? }),
            )
            .optional()?;
        if take_flash && found.as_ref().is_some_and(|s| s.flash.is_some()) {
            tx.execute("UPDATE sessions SET flash = NULL WHERE id_hash = ?1", [id_hash])?;
        }
        tx.commit()?;
        Ok(found)
    }

    fn session_set_flash(&mut self, id_hash: &str, flash: &str) -> Result<()> {
        self.conn.execute("UPDATE sessions SET flash = ?2 WHERE id_hash = ?1", params![id_hash, flash])?;
        Ok(())
    }

    fn session_remove(&mut self, id_hash: &str) -> Result<()> {
        self.conn.execute("DELETE FROM sessions WHERE id_hash = ?1", [id_hash])?;
        Ok(())
    }
}
