//! The shared-data keys: counter keys, grant markers, the creation lock and the grant count.

use sha2::{Digest, Sha256};

use super::Limit;
use crate::identity::grant::GrantId;
use crate::terms::{Algorithm, Scope, Window};

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

/// Bytes of a counter key or grant marker: `mcpf1:` (6), a tag and `:` (2), 32 hex digits.
const KEY_LEN: usize = 40;

/// A counter key (`mcpf1:c:` + 32 lower-case hex digits) or grant marker (`mcpf1:g:` + 32), built
/// on the stack: no allocation per call. Dereferences to the key text, the exact bytes stored in
/// shared data (`tests/core/shared_data_keys.rs` pins the layout).
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct Key([u8; KEY_LEN]);

impl Key {
    /// `PREFIX`, `tag`, `:` and the lower-case hex of the first 16 bytes of `digest`.
    fn new(tag: u8, digest: &[u8]) -> Self {
        const HEX: &[u8; 16] = b"0123456789abcdef";
        let mut k = *b"mcpf1:?:00000000000000000000000000000000";
        if let Some(t) = k.get_mut(PREFIX.len()) {
            *t = tag;
        }
        for (i, b) in digest.iter().take(16).enumerate() {
            if let (Some(hi), Some(lo)) = (HEX.get(usize::from(b >> 4)), HEX.get(usize::from(b & 0xf))) {
                if let Some(pair) = k.get_mut(8 + 2 * i..10 + 2 * i) {
                    pair.copy_from_slice(&[*hi, *lo]);
                }
            }
        }
        Key(k)
    }

    /// The key text.
    pub fn as_str(&self) -> &str {
        // Only ASCII is ever written into the buffer.
        std::str::from_utf8(&self.0).unwrap_or("")
    }
}

impl std::ops::Deref for Key {
    type Target = str;
    fn deref(&self) -> &str {
        self.as_str()
    }
}

impl std::fmt::Debug for Key {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The marker of a pinned tool whose listed definition did not match its pin (`mcpf1:p:` + 32 hex
/// digits of SHA-256 over the tool name and the pin): while it exists, calls of the tool are refused
/// (`pin_mismatch`). The pin is in the key, so a policy with another pin for the tool starts clean.
pub fn pin_mismatch_key(tool: &str, pin: &[u8; 32]) -> Key {
    let mut h = Sha256::new();
    push_field(&mut h, b"pin_mismatch");
    push_field(&mut h, tool.as_bytes());
    push_field(&mut h, pin);
    Key::new(b'p', &h.finalize())
}

/// The marker of a tool in `pins` whose listed definition this Envoy has seen match its pin and
/// its recorded annotations (`mcpf1:p:` + 32 hex digits of SHA-256 over the tool name and the pin):
/// an allow by `default_for` holds only while it exists. Another pin is another key.
pub fn pin_verified_key(tool: &str, pin: &[u8; 32]) -> Key {
    let mut h = Sha256::new();
    push_field(&mut h, b"pin_verified");
    push_field(&mut h, tool.as_bytes());
    push_field(&mut h, pin);
    Key::new(b'p', &h.finalize())
}

/// The hashed part of a mark's key, computed once per mark when the policy is compiled: the first
/// 16 bytes of SHA-256 over the length-prefixed ("mark", `scope`, `mark`); `scope` is empty until
/// marks are kept per attached policy, when it names it.
pub fn mark_base(scope: &str, mark: &str) -> [u8; 16] {
    let mut h = Sha256::new();
    push_field(&mut h, b"mark");
    push_field(&mut h, scope.as_bytes());
    push_field(&mut h, mark.as_bytes());
    let mut base = [0u8; 16];
    base.copy_from_slice(h.finalize().get(..16).unwrap_or(&[0u8; 16]));
    base
}

/// The key of one mark on one grant (`mcpf1:m:` + 32 hex digits): the mark's [`mark_base`] XOR the
/// first 16 bytes of the grant id, as [`counter_key`] makes a per-grant counter's key (no hash per call).
pub fn mark_key(base: &[u8; 16], grant: &GrantId) -> Key {
    let mut bytes = *base;
    for (b, g) in bytes.iter_mut().zip(grant) {
        *b ^= g;
    }
    Key::new(b'm', &bytes)
}

/// The hashed part of a counter key, computed once per limit when the policy is compiled
/// ([`Limit::new`]): the first 16 bytes of SHA-256 over the length-prefixed tuple (counter name,
/// scope, window length in seconds, algorithm). The grant is not hashed in here, so the decision
/// path hashes nothing per counter ([`counter_key`]).
pub fn counter_base(counter: &str, scope: Scope, window: Window, algorithm: Algorithm) -> [u8; 16] {
    let mut h = Sha256::new();
    push_field(&mut h, b"counter");
    push_field(&mut h, counter.as_bytes());
    push_field(
        &mut h,
        match scope {
            Scope::Grant => b"grant",
            Scope::Global => b"global",
        },
    );
    push_field(&mut h, &window.seconds().to_be_bytes());
    push_field(&mut h, algorithm.name().as_bytes());
    let mut base = [0u8; 16];
    base.copy_from_slice(h.finalize().get(..16).unwrap_or(&[0u8; 16]));
    base
}

/// The shared-data key of one counter: the limit's [`counter_base`], XOR the first 16 bytes of the
/// grant id for a per-grant limit (a global limit's key is its base alone), as 32 hex digits.
///
/// No hash per call: the grant id is already SHA-256 of the credential, so for one limit grants
/// whose ids differ in their first 16 bytes (the bytes grant markers keep too) give distinct keys
/// (XOR with a constant is a bijection), and two limits' keys meet only
/// where two grant ids differ by exactly the XOR of their bases: as hard to reach on purpose as a
/// collision of a hash truncated to 128 bits, which would cost two of the decision's three SHA-256
/// compressions.
pub fn counter_key(limit: &Limit, grant: &GrantId) -> Key {
    let mut bytes = *limit.key_base();
    match limit.scope {
        Scope::Grant => {
            for (b, g) in bytes.iter_mut().zip(grant) {
                *b ^= g;
            }
        }
        Scope::Global => {}
    }
    Key::new(b'c', &bytes)
}

/// The marker key that records a grant as tracked.
pub fn grant_key(grant: &GrantId) -> Key {
    Key::new(b'g', grant.get(..16).unwrap_or(&[]))
}

/// SHA-256 over the length-prefixed (`policy`, `name`, `id`): an id (a grant's, or zeros for a
/// counter's key base) within the set's policy `name`.
pub fn within_policy(name: &str, id: &GrantId) -> GrantId {
    let mut h = Sha256::new();
    push_field(&mut h, b"policy");
    push_field(&mut h, name.as_bytes());
    push_field(&mut h, id);
    let mut out = [0u8; 32];
    out.copy_from_slice(&h.finalize());
    out
}
