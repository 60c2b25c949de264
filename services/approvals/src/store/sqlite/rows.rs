//! The approvals rows: the list page's columns, a row read into an [`Approval`] (columns in the
//! order of `store::columns`) or a [`Listed`] page entry, the lookup by a condition, and the
//! expiry every transaction applies first.

use rusqlite::{Connection, OptionalExtension, Row};

use super::SqliteStore;
use crate::store::columns::{approval_from_row, COLUMNS, COLUMNS_NO_ARGUMENTS};
use crate::store::{utf8_prefix, Approval, Listed};

/// [`COLUMNS`] for a list page: the first `{prefix}` bytes of the arguments (as a blob, cut to a
/// character boundary when read) and, last, their size in bytes (`octet_length` reads it from the
/// record header, not the text).
pub(super) fn listed_columns(prefix: usize) -> String {
    format!(
        "id, key, state, grant_label, tool, substr(CAST(arguments AS BLOB), 1, {prefix}), request_id, reason, \
         created_at, expires_in, expires_at, decided_at, approver, note, consumed_at, consumed_request_id, grant_id, \
         input_responses, request_state, upstream_cluster, upstream_authority, upstream_path, policy, subject, \
         client_id, act, octet_length(arguments)"
    )
}

pub(super) fn approval_row(row: &Row<'_>) -> rusqlite::Result<Approval> {
    approval_row_with(row, row.get(5)?)
}

fn approval_row_with(row: &Row<'_>, arguments: String) -> rusqlite::Result<Approval> {
    Ok(approval_from_row!(row, get, arguments, |state: String| {
        rusqlite::Error::FromSqlConversionFailure(2, rusqlite::types::Type::Text, format!("state {state}").into())
    }))
}

pub(super) fn listed_row(row: &Row<'_>) -> rusqlite::Result<Listed> {
    let prefix: Vec<u8> = row.get(5)?;
    let bytes: i64 = row.get(26)?;
    Ok(Listed {
        approval: approval_row_with(row, utf8_prefix(prefix))?,
        arguments_bytes: usize::try_from(bytes).unwrap_or(0),
    })
}

impl SqliteStore {
    /// Marks pending and approved approvals past their expiry as `expired`.
    pub(super) fn expire_in(tx: &Connection, now: i64) -> rusqlite::Result<Vec<Approval>> {
        let mut stmt = tx.prepare_cached(&format!(
            "UPDATE approvals SET state = 'expired' WHERE state IN ('pending', 'approved') AND expires_at <= ?1 \
             RETURNING {COLUMNS_NO_ARGUMENTS}"
        ))?;
        let rows = stmt.query_map([now], approval_row)?;
        let mut expired = rows.collect::<rusqlite::Result<Vec<_>>>()?;
        // RETURNING gives the new state already; keep the order stable for logs.
        expired.sort_by(|a, b| a.id.cmp(&b.id));
        Ok(expired)
    }

    pub(super) fn find(
        tx: &Connection,
        sql_where: &str,
        params: impl rusqlite::Params,
    ) -> rusqlite::Result<Option<Approval>> {
        let mut stmt = tx.prepare_cached(&format!("SELECT {COLUMNS} FROM approvals WHERE {sql_where}"))?;
        stmt.query_row(params, approval_row).optional()
    }
}
