//! The approvals columns, in the order both stores read a row into an [`Approval`](super::Approval)
//! (by index: `sqlite::rows` and `postgres::rows`).

/// Every column of an approval.
pub(crate) const COLUMNS: &str =
    "id, key, state, grant_label, tool, arguments, request_id, reason, created_at, expires_in, \
     expires_at, decided_at, approver, note, consumed_at, consumed_request_id, grant_id, \
     input_responses, request_state, upstream_cluster, upstream_authority, upstream_path";

/// [`COLUMNS`] without the arguments (`''` in their place): for rows only logged or counted, so a
/// batch of big arguments is never read under the store lock.
pub(crate) const COLUMNS_NO_ARGUMENTS: &str = "id, key, state, grant_label, tool, '', request_id, reason, created_at, \
                                               expires_in, expires_at, decided_at, approver, note, consumed_at, \
                                               consumed_request_id, grant_id, '', NULL, upstream_cluster, \
                                               upstream_authority, upstream_path";
