//! The approvals rows: a row read into an [`Approval`] (columns in the order of
//! `store::columns`), the lookup by a condition, and the expiry every transaction applies first.

use postgres::{Row, Transaction};

use crate::store::columns::{approval_from_row, COLUMNS, COLUMNS_NO_ARGUMENTS};
use crate::store::{Approval, Result, StoreError};

pub(super) fn approval_with(row: &Row, arguments: String) -> Result<Approval> {
    Ok(approval_from_row!(row, try_get, arguments, |state: String| {
        StoreError::Internal(format!("unknown state {state:?}"))
    }))
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
