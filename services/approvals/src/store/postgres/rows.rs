//! The approvals rows: a row read into an [`Approval`] (columns in the order of
//! `store::columns`), the lookup by a condition, and the expiry every transaction applies first.

use postgres::{Row, Transaction};

use crate::store::columns::{COLUMNS, COLUMNS_NO_ARGUMENTS};
use crate::store::{Approval, Result, State, StoreError};

pub(super) fn approval_with(row: &Row, arguments: String) -> Result<Approval> {
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
        upstream: crate::store::Upstream {
            cluster: row.try_get(19)?,
            authority: row.try_get(20)?,
            path: row.try_get(21)?,
        },
    })
}

pub(super) fn approval(row: &Row) -> Result<Approval> {
    approval_with(row, row.try_get(5)?)
}

pub(super) fn rows(list: Vec<Row>) -> Result<Vec<Approval>> {
    list.iter().map(approval).collect()
}

/// Marks pending and approved approvals past their expiry as `expired`, skipping rows another
/// transaction holds (it marks them, or a later one does; every query compares `expires_at`).
pub(super) fn expire_in(tx: &mut Transaction<'_>, now: i64) -> Result<Vec<Approval>> {
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

pub(super) fn find(
    tx: &mut Transaction<'_>,
    sql_where: &str,
    params: &[&(dyn postgres::types::ToSql + Sync)],
) -> Result<Option<Approval>> {
    match tx.query_opt(&format!("SELECT {COLUMNS} FROM approvals WHERE {sql_where}"), params)? {
        Some(row) => Ok(Some(approval(&row)?)),
        None => Ok(None),
    }
}
