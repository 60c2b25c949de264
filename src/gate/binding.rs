//! The request and response steps of sessions bound to their grant (`crate::session`).

use super::credential::grant_of;
use super::{refuse, HeaderValue, Outcome, RequestHead};
use crate::mcp::Id;
use crate::policy::Policy;
use crate::ratelimit::GrantId;
use crate::refusal::Refusal;
use crate::session;

/// What to do with a request's `Mcp-Session-Id` (checked on POST, GET and DELETE alike, from the
/// headers, before anything goes upstream).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SessionCheck {
    /// `gateway.session_key` is not set: session ids pass unchanged.
    Unbound,
    /// No session id; `grant` (if any) is remembered to wrap the id the server may hand out.
    NoSession { grant: Option<GrantId> },
    /// A valid id of this grant: forward the server's own id instead. `url_elicitation`: an `m2.`
    /// id (its client declared URL elicitation; the id handed back stays `m2.`).
    Rewrite { grant: GrantId, upstream: Vec<u8>, url_elicitation: bool },
    /// Refused (HTTP 404, −31010 `session_invalid`); nothing goes upstream.
    Refuse(Box<Outcome>),
}

/// Check the request's `Mcp-Session-Id` against its grant.
pub fn check_session(policy: &Policy, head: &RequestHead) -> SessionCheck {
    let Some(keys) = &policy.gateway.session_keys else { return SessionCheck::Unbound };
    let grant = grant_of(policy, head).ok().map(|g| g.id);
    let presented = match &head.session_id {
        HeaderValue::Absent => return SessionCheck::NoSession { grant },
        HeaderValue::One(v) => Some(v),
        HeaderValue::Many => None,
    };
    if let (Some(grant), Some(v)) = (grant, presented) {
        if let Some(upstream) = session::unwrap(keys, &grant, v) {
            let url_elicitation = session::declares_url_elicitation(keys, &grant, v);
            return SessionCheck::Rewrite { grant, upstream, url_elicitation };
        }
    }
    SessionCheck::Refuse(Box::new(refuse(Refusal::SessionInvalid, &Id::null())))
}

/// The `Mcp-Session-Id` to send the client for the server's `upstream` id: wrapped for the
/// request's grant (`m2.` when `url_elicitation`: the client declared URL elicitation at
/// `initialize`, or presented an `m2.` id); `None` (remove the header) when there is no grant to
/// bind it to. Only called when `gateway.session_key` is set.
pub fn session_id_out(
    policy: &Policy,
    grant: Option<&GrantId>,
    upstream: &[u8],
    url_elicitation: bool,
) -> Option<String> {
    let keys = policy.gateway.session_keys.as_ref()?;
    grant.map(|g| session::wrap_with(keys, g, upstream, url_elicitation))
}
