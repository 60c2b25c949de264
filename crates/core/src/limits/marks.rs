//! Marks on grants in shared data (`crate::policy::flows`): when each mark was last set on a grant.
//!
//! One key per (mark, grant) ([`mark_key`]), holding the time of the latest marking in ms (u64
//! LE). A key is created as counters are, under the creation lock, and a grant's first key counts
//! it against `gateway.max_tracked_grants` (the grant marker is shared with the counters); after
//! that every write is a compare-and-swap that only moves the time forward, so two workers marking
//! at once both leave a mark no older than their own.

use super::key::{grant_key, mark_base, mark_key};
use super::limiter::{Limiter, MAX_CAS_RETRIES};
use super::store::{SharedStore, StoreError};
use super::value::decode_u64;
use super::Unavailable;
use crate::identity::grant::GrantId;

/// `scope` of the keys: marks are per grant (a per-policy name goes here once policies attach).
pub const SCOPE: &str = "";

/// Set `mark` on `grant` at `limiter.now_ms`. Errors: [`Unavailable`] (shared data failed, the
/// lock stayed busy, the grant cap, or a value not in this format).
pub fn set(limiter: &Limiter<'_>, grant: &GrantId, mark: &str) -> Result<(), Unavailable> {
    let key = mark_key(&mark_base(SCOPE, mark), grant);
    let now = limiter.now_ms;
    for _ in 0..MAX_CAS_RETRIES {
        let (value, cas) = match limiter.store.get(&key)? {
            Some(found) => found,
            None => {
                let marker = grant_key(grant);
                limiter.create(&key, &0u64.to_le_bytes(), Some(&marker))?;
                continue;
            }
        };
        let at = decode_u64(&value).ok_or(Unavailable::CorruptValue)?;
        if at >= now {
            return Ok(());
        }
        match limiter.store.set(&key, &now.to_le_bytes(), cas) {
            Ok(()) => return Ok(()),
            Err(StoreError::CasMismatch) => continue,
            Err(e) => return Err(e.into()),
        }
    }
    Err(Unavailable::CasRetriesExhausted)
}

/// When the mark whose [`mark_base`] is `base` was last set on `grant` (ms since the epoch), or
/// `None` if never.
pub fn set_at(store: &dyn SharedStore, grant: &GrantId, base: &[u8; 16]) -> Result<Option<u64>, Unavailable> {
    match store.get(&mark_key(base, grant))? {
        None => Ok(None),
        Some((v, _)) => match decode_u64(&v).ok_or(Unavailable::CorruptValue)? {
            0 => Ok(None), // created, not yet written
            at => Ok(Some(at)),
        },
    }
}
