//! The `requestState` the gateway issues with an approval offered through `input_required`
//! (MCP 2026-07-28), sealed so that only this gateway's own, unexpired state for this grant and this
//! exact call is accepted back. Stateless: any Envoy sharing `gateway.session_key` opens it.
//!
//! ```text
//! mcpf-a1.<base64url(expiry ‖ approval id)>.<base64url(HMAC-SHA-256(key,
//!     "mcpf-approval-state-v1" ‖ grant hash ‖ approval key ‖ expiry ‖ approval id))>
//! ```
//!
//! expiry: Unix seconds, 8 bytes big-endian; approval id: the service's id, UTF-8; grant hash: the
//! 32-byte SHA-256 of the credential; approval key: the 64 lower-case hex characters of
//! [`crate::approval::key`] (the call's upstream, tool and arguments, without the leg). RFC 2104 HMAC under
//! `gateway.session_key`: new states with the current key, the previous key still accepted; base64url
//! without padding (RFC 4648 §5). The tag comparison is constant-time (`Mac::verify_slice`).

use hmac::{Mac, SimpleHmac};
use sha2::Sha256;

use crate::identity::grant::GrantId;
use crate::identity::session::SessionKeys;
use crate::wire::b64::{self, Alphabet};

/// What every state this gateway issues starts with.
pub const PREFIX: &str = "mcpf-a1.";
const DOMAIN: &[u8] = b"mcpf-approval-state-v1";
/// Longest approval id sealed, in bytes (`approval::MAX_ANSWER_FIELD`).
const MAX_ID: usize = crate::approval::MAX_ANSWER_FIELD;

/// Why a presented state is refused (HTTP 400, −31011 `approval_state_invalid`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StateError {
    /// Not of the gateway's form (prefix, two base64url parts, an expiry and an id).
    Malformed,
    /// The tag does not verify: forged, tampered, another grant's or another call's state, or made
    /// under a key that is neither the current nor the previous one.
    Seal,
    /// The approval request it points at has expired.
    Expired,
}

impl StateError {
    /// `data.reason` of the refusal.
    pub fn why(self) -> &'static str {
        match self {
            StateError::Malformed => "params.requestState is not an approval state issued by this gateway",
            StateError::Seal => "params.requestState was not issued by this gateway for this grant and this exact call",
            StateError::Expired => "params.requestState has expired; call the tool again without it",
        }
    }
}

fn mac(key: &[u8], grant: &GrantId, approval_key: &str, payload: &[u8]) -> Option<SimpleHmac<Sha256>> {
    let mut m = SimpleHmac::<Sha256>::new_from_slice(key).ok()?;
    m.update(DOMAIN);
    m.update(grant);
    m.update(approval_key.as_bytes());
    m.update(payload);
    Some(m)
}

/// A state for approval `approval_id` of the call whose approval key is `approval_key`, made by
/// `grant`, valid until `expires_at` (Unix seconds), sealed under the current key.
pub fn seal(keys: &SessionKeys, grant: &GrantId, approval_key: &str, approval_id: &str, expires_at: u64) -> String {
    let mut payload = Vec::with_capacity(8 + approval_id.len());
    payload.extend_from_slice(&expires_at.to_be_bytes());
    payload.extend_from_slice(approval_id.as_bytes());
    let mut out = String::with_capacity(PREFIX.len() + 2 + (payload.len() + 32) * 4 / 3 + 4);
    out.push_str(PREFIX);
    b64::encode_into(&mut out, &payload, Alphabet::UrlNoPad);
    out.push('.');
    if let Some(m) = mac(&keys.current, grant, approval_key, &payload) {
        b64::encode_into(&mut out, &m.finalize().into_bytes(), Alphabet::UrlNoPad);
    }
    out
}

/// The approval id inside `state`, if the gateway sealed it (under the current or the previous key)
/// for `grant` and the call with `approval_key`, and it has not expired at `now` (Unix seconds).
pub fn open(
    keys: &SessionKeys,
    grant: &GrantId,
    approval_key: &str,
    state: &str,
    now: u64,
) -> Result<String, StateError> {
    let rest = state.strip_prefix(PREFIX).ok_or(StateError::Malformed)?;
    let (payload, tag) = rest.split_once('.').ok_or(StateError::Malformed)?;
    let payload = b64::decode(payload.as_bytes(), Alphabet::UrlNoPad).ok_or(StateError::Malformed)?;
    let tag = b64::decode(tag.as_bytes(), Alphabet::UrlNoPad).ok_or(StateError::Malformed)?;
    if payload.len() <= 8 || payload.len() > 8 + MAX_ID || tag.len() != 32 {
        return Err(StateError::Malformed);
    }
    let verifies = |key: &[u8]| mac(key, grant, approval_key, &payload).is_some_and(|m| m.verify_slice(&tag).is_ok());
    if !(verifies(&keys.current) || keys.previous.as_deref().is_some_and(verifies)) {
        return Err(StateError::Seal);
    }
    let (expiry, id) = payload.split_at(8);
    let mut be = [0u8; 8];
    be.copy_from_slice(expiry);
    if now >= u64::from_be_bytes(be) {
        return Err(StateError::Expired);
    }
    String::from_utf8(id.to_vec()).map_err(|_| StateError::Malformed)
}
