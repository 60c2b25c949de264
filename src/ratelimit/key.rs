//! The shared-data keys: counter keys, grant markers, the creation lock and the grant count.

use sha2::{Digest, Sha256};

use crate::grant::hex;
use crate::policy::{Limit, Scope};

/// SHA-256 of the grant's credential; the raw token is never stored or logged.
pub type GrantId = [u8; 32];

/// Key prefix of everything this filter stores; bump on any layout change.
pub const PREFIX: &str = "mcpf1:";
/// The creation lock: value is the lease expiry in ms since the epoch (0: free).
pub const LOCK_KEY: &str = "mcpf1:lock";
/// The number of distinct grants tracked so far (u64 LE).
pub const GRANTS_KEY: &str = "mcpf1:grants";

fn push_field(h: &mut Sha256, bytes: &[u8]) {
    // Length-prefixed, so ("a_b","c") and ("a","b_c") can never hash the same input.
    h.update((bytes.len() as u64).to_be_bytes());
    h.update(bytes);
}

/// The shared-data key of one counter: a hash of the canonical tuple (counter name, scope,
/// scope value, window length in seconds, algorithm). 128 bits of it are kept: 32 hex characters.
pub fn counter_key(limit: &Limit, grant: &GrantId) -> String {
    let mut h = Sha256::new();
    push_field(&mut h, b"counter");
    push_field(&mut h, limit.counter.as_bytes());
    match limit.scope {
        Scope::Grant => {
            push_field(&mut h, b"grant");
            push_field(&mut h, grant);
        }
        Scope::Global => {
            push_field(&mut h, b"global");
            push_field(&mut h, b"");
        }
    }
    push_field(&mut h, &limit.window.seconds().to_be_bytes());
    push_field(&mut h, limit.algorithm.name().as_bytes());
    let digest = h.finalize();
    format!("{PREFIX}c:{}", hex(digest.get(..16).unwrap_or(&[])))
}

/// The marker key that records a grant as tracked.
pub fn grant_key(grant: &GrantId) -> String {
    format!("{PREFIX}g:{}", hex(grant.get(..16).unwrap_or(&[])))
}
