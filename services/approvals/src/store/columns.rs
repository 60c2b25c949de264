//! The approvals columns, in the order both stores read a row into an [`Approval`](super::Approval)
//! (by index, with [`approval_from_row`]).

/// Every column of an approval.
pub(crate) const COLUMNS: &str =
    "id, key, state, grant_label, tool, arguments, request_id, reason, created_at, expires_in, \
     expires_at, decided_at, approver, note, consumed_at, consumed_request_id, grant_id, \
     input_responses, request_state, upstream_cluster, upstream_authority, upstream_path, policy, subject, \
     client_id, act";

/// [`COLUMNS`] without the arguments (`''` in their place): for rows only logged or counted, so a
/// batch of big arguments is never read under the store lock.
pub(crate) const COLUMNS_NO_ARGUMENTS: &str = "id, key, state, grant_label, tool, '', request_id, reason, created_at, \
                                               expires_in, expires_at, decided_at, approver, note, consumed_at, \
                                               consumed_request_id, grant_id, '', NULL, upstream_cluster, \
                                               upstream_authority, upstream_path, policy, subject, client_id, \
                                               act";

/// An [`Approval`](super::Approval) from a row of [`COLUMNS`], `arguments` in place of column 5:
/// `$row.$get(index)?` reads a column as the driver does (`postgres::Row::try_get`,
/// `rusqlite::Row::get`: two traits of their own, hence a macro), and `$unknown_state` makes the
/// driver's error for a state column that names no state.
macro_rules! approval_from_row {
    ($row:expr, $get:ident, $arguments:expr, $unknown_state:expr) => {{
        let state: String = $row.$get(2)?;
        let state = $crate::store::State::parse(&state).ok_or_else(|| ($unknown_state)(state))?;
        $crate::store::Approval {
            id: $row.$get(0)?,
            key: $row.$get(1)?,
            state,
            grant: $row.$get(3)?,
            tool: $row.$get(4)?,
            arguments: $arguments,
            request_id: $row.$get(6)?,
            reason: $row.$get(7)?,
            created_at: $row.$get(8)?,
            expires_in: $row.$get(9)?,
            expires_at: $row.$get(10)?,
            decided_at: $row.$get(11)?,
            approver: $row.$get(12)?,
            note: $row.$get(13)?,
            consumed_at: $row.$get(14)?,
            consumed_request_id: $row.$get(15)?,
            grant_id: $row.$get(16)?,
            input_responses: $row.$get(17)?,
            request_state: $row.$get(18)?,
            upstream: $crate::store::Upstream {
                cluster: $row.$get(19)?,
                authority: $row.$get(20)?,
                path: $row.$get(21)?,
            },
            caller: $crate::store::caller_of($row.$get(22)?, $row.$get(23)?, $row.$get(24)?, $row.$get(25)?),
        }
    }};
}
pub(crate) use approval_from_row;
