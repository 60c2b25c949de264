//! A compiled rate limit: what the policy's `limits` entries become, counted in shared data.

use crate::terms::{Algorithm, Scope, Window};

/// A compiled rate limit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Limit {
    pub counter: String,
    pub window: Window,
    pub max: u64,
    pub scope: Scope,
    pub algorithm: Algorithm,
    /// JSON path of the limit in the policy, e.g. `tools.vm_agent_exec.limits[0]`.
    pub path: String,
    /// The hashed part of its shared-data counter key ([`super::counter_base`]); private,
    /// so [`Limit::new`] is the only way to make a limit and the base always matches its fields.
    key_base: [u8; 16],
}

impl Limit {
    /// A limit with its counter key's base computed (once, when the policy is compiled).
    pub fn new(counter: String, window: Window, max: u64, scope: Scope, algorithm: Algorithm, path: String) -> Self {
        let key_base = super::counter_base(&counter, scope, window, algorithm);
        Limit { counter, window, max, scope, algorithm, path, key_base }
    }

    /// The limit as a member of the set's policy `policy`: its counter is counted apart from every
    /// other policy's counter of the same name (key base rehashed with the policy name), and its
    /// path is prefixed with `policies.NAME.`.
    pub fn within(mut self, policy: &str) -> Self {
        let digest = super::within_policy(policy, &[0u8; 32]);
        for (b, d) in self.key_base.iter_mut().zip(digest) {
            *b ^= d;
        }
        self.path = format!("policies.{policy}.{}", self.path);
        self
    }

    /// The hashed part of this limit's counter key, computed by [`Limit::new`].
    pub fn key_base(&self) -> &[u8; 16] {
        &self.key_base
    }
}
