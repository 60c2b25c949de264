//! API.md `/v1/check` steps 1-4 in one transaction, serialized per key across instances.

use postgres::Transaction;

use super::rows::{approval, expire_in, find};
use super::{LOCK_KEY, LOCK_OPEN};
use crate::store::columns::COLUMNS;
use crate::store::{Changes, CheckInput, CheckOutcome, NewPending, Result, StoreError};

pub(super) fn check_in(
    tx: &mut Transaction<'_>,
    input: &CheckInput,
    now: i64,
    open: &NewPending<'_>,
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
    if pending >= i64::from(open.max_per_grant) {
        return Ok((CheckOutcome::TooManyPending { pending }, changes));
    }
    let pending: i64 = tx
        .query_one("SELECT COUNT(*) FROM approvals WHERE state = 'pending' AND expires_at > $1", &[&now])?
        .try_get(0)?;
    if pending >= i64::from(open.max_in_all) {
        return Ok((CheckOutcome::TooManyPendingInAll { pending }, changes));
    }
    let expires_at = now.saturating_add(input.expires_in);
    let caller = input.caller.as_ref();
    let inserted = tx.query_opt(
        &format!(
            "INSERT INTO approvals (id, key, state, grant_label, tool, arguments, request_id, reason, created_at, \
             expires_in, expires_at, note, grant_id, input_responses, request_state, upstream_cluster, \
             upstream_authority, upstream_path, policy, subject, client_id, act) \
             VALUES ($1, $2, 'pending', $3, $4, $5, $6, $7, $8, $9, $10, '', $11, $12, $13, $14, $15, $16, $17, $18, \
             $19, $20)
             ON CONFLICT (key) WHERE state = 'pending' DO NOTHING
             RETURNING {COLUMNS}"
        ),
        &[
            &open.id,
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
            &input.upstream.cluster,
            &input.upstream.authority,
            &input.upstream.path,
            &caller.and_then(|c| c.policy.as_deref()),
            &caller.and_then(|c| c.subject.as_deref()),
            &caller.and_then(|c| c.client_id.as_deref()),
            &crate::store::act_column(caller),
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
