//! Which policy of the set a request is judged by, and who is calling: the verified token's
//! payload read (`gateway.identity`), its grant claim made the grant, and the set's rules tried
//! ([`PolicySet::choose`]). A plain `policy.json` without `gateway.identity` reads nothing here.

use super::credential::{grant_of, no_grant};
use super::{HeaderValue, Outcome, RequestHead};
use crate::config::{PolicySet, Shared, Why};
use crate::identity::grant::Grant;
use crate::identity::payload::{self, Claims, Provenance};
use crate::outcome::decision::Decision;
use crate::policy::Policy;
use crate::wire::mcp::Id;

const NOT_REGISTERED: &str = "the verified token's grant claim is not a registered grant";

/// The policy a request is judged by, why, and who is calling.
#[derive(Debug, Clone)]
pub struct Attached {
    pub policy: Shared<Policy>,
    pub why: Why,
    /// From the verified payload; `None` without `gateway.identity`.
    pub provenance: Option<Box<Provenance>>,
}

impl Attached {
    /// Record the policy and the caller in `d` (every decision of the request carries them).
    pub fn stamp(&self, d: &mut Decision) {
        if d.provenance.is_none() {
            d.provenance = self.caller().map(Box::new);
        }
    }

    /// The policy's name and who calls: `None` under a plain policy without `gateway.identity`.
    pub fn caller(&self) -> Option<Provenance> {
        if self.provenance.is_none() && self.policy.name.is_none() {
            return None;
        }
        let mut p = self.provenance.as_deref().cloned().unwrap_or_default();
        p.policy.clone_from(&self.policy.name);
        Some(p)
    }

    /// This attachment, its caller recorded in `head` (an approval's key binds it).
    fn on(self, head: &RequestHead) -> Attached {
        if let Some(c) = self.caller() {
            let _ = head.caller.set(c);
        }
        self
    }
}

/// The claims of the payload header, or why there are none.
fn claims(head: &RequestHead) -> Result<Claims, &'static str> {
    match &head.payload {
        HeaderValue::One(v) => Claims::read(v),
        HeaderValue::Many => Err(payload::PAYLOAD_REPEATED),
        HeaderValue::Absent => Err(payload::PAYLOAD_MISSING),
    }
}

/// The policy of the request of `head` (from `RequestHead::from_headers` with a policy of `set`).
///
/// Errors: with `gateway.identity`, a payload header missing, repeated or unreadable, or without
/// the grant claim: 401 `no_grant` (always enforced: no policy can be chosen without an identity).
pub fn attach(set: &PolicySet, head: &RequestHead) -> Result<Attached, Box<Outcome>> {
    let base = set.base();
    let Some(identity) = &base.gateway.identity else {
        if let Some(p) = set.plain() {
            return Ok(Attached { policy: Shared::clone(p), why: Why::Plain, provenance: None });
        }
        let grant = grant_of(base, head).ok();
        let (policy, why) = set.choose(None, grant.as_ref().map(|g| &g.id));
        return Ok(Attached { policy: Shared::clone(policy), why, provenance: None }.on(head));
    };
    let refuse = |why: &'static str| Box::new(no_grant(base, &Id::null(), why));
    let claims = claims(head).map_err(refuse)?;
    let subject = claims.text(&identity.grant_claim).ok_or_else(|| refuse(payload::GRANT_CLAIM_MISSING))?;
    let mut grant = Grant::from_credential(subject.as_bytes());
    if !base.gateway.grants.is_empty() {
        grant.registered = Some(base.gateway.grants.get(&grant.id).ok_or_else(|| refuse(NOT_REGISTERED))?.clone());
    }
    let (policy, why) = set.choose(Some(&claims), Some(&grant.id));
    // Every step after this one reads the grant from the claim, never from a header.
    let _ = head.grant.set(Ok(grant));
    Ok(Attached { policy: Shared::clone(policy), why, provenance: Some(Box::new(claims.provenance())) }.on(head))
}
