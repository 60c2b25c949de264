//! Policy sets: several named PolicyLayer policies in one plugin configuration, attached to
//! callers by rules over the verified identity (claims of the token `jwt_authn` verified) or the
//! grant. PolicyLayer's own model is one policy per grant ("a grant with no policy denies every
//! call"); a set says which policy each caller gets.
//!
//! A plain `policy.json` is a set of one policy that every caller gets ([`PolicySet::plain`]): the
//! host asks [`PolicySet::plain`] first and reads nothing more for it.
//!
//! Compiled once ([`compile`]): every member with the set's one `gateway` (one gateway per Envoy:
//! a member's own `gateway` is an error), its limits counted apart from every other member's
//! ([`crate::limits::Limit::within`]), the rules' policy names resolved to members, matchers that
//! can never hold refused with their JSON path.
//!
//! The members are behind [`Shared`]: an `Arc` where one compiled set serves Envoy's worker threads
//! (the native build), an `Rc` in the wasm VM, which is single-threaded.

use crate::identity::grant::GrantId;
use crate::identity::payload::Claims;
use crate::policy::Policy;
use crate::wire::json::Json;

/// How the compiled policies are shared: `Arc` where Envoy's worker threads share one compiled set
/// (the native build, `Send + Sync`); `Rc` in the wasm VM, one thread, where atomic counts would
/// only add code.
#[cfg(not(target_arch = "wasm32"))]
pub type Shared<T> = std::sync::Arc<T>;
/// See the native definition.
#[cfg(target_arch = "wasm32")]
pub type Shared<T> = std::rc::Rc<T>;

mod compile;
mod read;
pub(super) mod spec;

pub use compile::compile;

/// One matcher of a rule, compiled.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Matcher {
    /// The claim is exactly this string.
    ClaimEquals { claim: String, value: String },
    /// The claim is an array holding this string, or a space-separated string with this entry.
    ClaimIncludes { claim: String, value: String },
    /// The grant's id (SHA-256 of its credential).
    Grant(GrantId),
}

impl Matcher {
    /// Does it hold for a caller with `claims` (none without `gateway.identity`) and `grant`?
    pub fn holds(&self, claims: Option<&Claims>, grant: Option<&GrantId>) -> bool {
        match self {
            Matcher::ClaimEquals { claim, value } => claims.is_some_and(|c| c.equals(claim, value)),
            Matcher::ClaimIncludes { claim, value } => claims.is_some_and(|c| c.includes(claim, value)),
            Matcher::Grant(id) => grant == Some(id),
        }
    }

    /// [`Matcher::holds`], its claim looked up through `seen`.
    fn holds_seen<'s>(&'s self, seen: &mut Seen<'s, '_>, grant: Option<&GrantId>) -> bool {
        match self {
            Matcher::ClaimEquals { claim, value } => {
                seen.claims.is_some() && Claims::value_equals(seen.claim(claim), value)
            }
            Matcher::ClaimIncludes { claim, value } => {
                seen.claims.is_some() && Claims::value_includes(seen.claim(claim), value)
            }
            Matcher::Grant(id) => grant == Some(id),
        }
    }
}

/// The claims one choice has looked up, by name. Rules test a few claims many times (`groups` in
/// every team's rule), and a claims set is searched member by member: fifty rules over one claim
/// then search the claims once.
struct Seen<'s, 'c> {
    claims: Option<&'c Claims>,
    names: Vec<(&'s str, Option<&'c Json>)>,
}

impl<'s, 'c> Seen<'s, 'c> {
    fn claim(&mut self, name: &'s str) -> Option<&'c Json> {
        if let Some((_, v)) = self.names.iter().find(|(n, _)| *n == name) {
            return *v;
        }
        let v = self.claims.and_then(|c| c.get(name));
        self.names.push((name, v));
        v
    }
}

/// `attach[i]`, compiled.
#[derive(Debug, Clone)]
pub struct AttachRule {
    /// Index into the set's members.
    pub policy: usize,
    pub when: Vec<Matcher>,
}

/// `contain[i]`, compiled: its matchers, and the policy that refuses every tool call with its reason.
#[derive(Debug, Clone)]
pub struct ContainRule {
    pub when: Vec<Matcher>,
    pub policy: Shared<Policy>,
}

/// The compiled plugin configuration: one policy for every caller, or a set.
#[derive(Debug, Clone)]
pub struct PolicySet {
    members: Vec<Shared<Policy>>,
    rules: Vec<AttachRule>,
    contain: Vec<ContainRule>,
    /// Stands for a caller no rule matches (`no_policy`).
    unattached: Shared<Policy>,
    plain: bool,
}

/// Which policy a caller gets, and why.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Why {
    /// A plain `policy.json`: every caller.
    Plain,
    /// `contain[i]` matched.
    Contained(usize),
    /// `attach[i]` matched first.
    Attached(usize),
    /// No rule matched.
    NoRule,
}

impl PolicySet {
    /// A plain `policy.json`: one policy for every caller.
    pub fn single(policy: Policy) -> Self {
        let p = Shared::new(policy);
        PolicySet {
            members: vec![Shared::clone(&p)],
            rules: Vec::new(),
            contain: Vec::new(),
            unattached: p,
            plain: true,
        }
    }

    /// The one policy of a plain `policy.json`; `None` for a set.
    pub fn plain(&self) -> Option<&Shared<Policy>> {
        if self.plain {
            self.members.first()
        } else {
            None
        }
    }

    /// A policy with the set's gateway settings (every member has the same).
    pub fn base(&self) -> &Shared<Policy> {
        &self.unattached
    }

    /// The members, in name order.
    pub fn members(&self) -> &[Shared<Policy>] {
        &self.members
    }

    pub fn rules(&self) -> &[AttachRule] {
        &self.rules
    }

    pub fn contained(&self) -> &[ContainRule] {
        &self.contain
    }

    /// The policy of a caller with `claims` and `grant`: a containment entry first, then the first
    /// attach rule whose every matcher holds, else the policy that refuses every tool call.
    pub fn choose<'s>(&'s self, claims: Option<&Claims>, grant: Option<&GrantId>) -> (&'s Shared<Policy>, Why) {
        if self.plain {
            return (&self.unattached, Why::Plain);
        }
        let mut seen = Seen { claims, names: Vec::new() };
        let mut all = |when: &'s [Matcher]| when.iter().all(|m| m.holds_seen(&mut seen, grant));
        for (i, c) in self.contain.iter().enumerate() {
            if all(&c.when) {
                return (&c.policy, Why::Contained(i));
            }
        }
        for (i, r) in self.rules.iter().enumerate() {
            if all(&r.when) {
                if let Some(p) = self.members.get(r.policy) {
                    return (p, Why::Attached(i));
                }
            }
        }
        (&self.unattached, Why::NoRule)
    }
}
