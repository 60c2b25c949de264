//! The request and response steps of sessions bound to their grant (`crate::identity::session`): the
//! `Mcp-Session-Id`, the `Last-Event-ID` and the HTTP+SSE session in the query, each checked
//! against the request's grant before anything goes upstream.

use super::credential::grant_of;
use super::{refuse, HeaderValue, Outcome, RequestHead};
use sha2::{Digest, Sha256};

use crate::identity::grant::GrantId;
use crate::identity::session::{self, event, legacy, StreamIds};
use crate::outcome::refusal::{Refusal, EVENT_ID_INVALID, LEGACY_SESSION_INVALID, SESSION_INVALID};
use crate::policy::Policy;
use crate::wire::mcp::Id;

/// What to do with a request's bound ids (checked on POST, GET and DELETE alike, from the headers).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SessionCheck {
    /// `gateway.session_key` is not set: ids pass unchanged.
    Unbound,
    /// Every id presented is this grant's: forward the server's own ids instead.
    Bound(Binding),
    /// Refused (HTTP 404, −31010 `session_invalid`); nothing goes upstream.
    Refuse(Box<Outcome>),
}

/// The server's own ids to forward in place of the bound ones a request presented.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Binding {
    /// The request's grant, remembered to bind the ids its response hands out; `None` only when
    /// the request presented no bound id.
    pub grant: Option<GrantId>,
    /// The server's `Mcp-Session-Id`, when the request presented one.
    pub session: Option<Vec<u8>>,
    /// The presented `Mcp-Session-Id` is an `m2.` id (its client declared URL elicitation; the id
    /// handed back stays `m2.`).
    pub url_elicitation: bool,
    /// The server's event id, when the request presented a non-empty `Last-Event-ID`.
    pub last_event_id: Option<Vec<u8>>,
    /// The request target (`:path`) with the server's HTTP+SSE session id in its query, when it
    /// named one.
    pub path: Option<Vec<u8>>,
}

/// Whom the ids a request presents or is handed belong to: its grant, and under a policy set or
/// `gateway.identity` its caller too (the attached policy, subject, client and actors, as an
/// approval's key binds them), so that a session handed out to one caller is refused from another
/// caller of the same grant (the same `sub` through another client or actor chain, or under
/// another policy).
pub(super) fn owner(grant: GrantId, head: &RequestHead) -> GrantId {
    let Some(caller) = head.caller.get() else { return grant };
    let mut text = String::from("{");
    crate::approval::write_caller(&mut text, caller);
    text.push('}');
    let mut h = Sha256::new();
    h.update(b"mcp-policy-filter session owner\0");
    h.update(grant);
    h.update(text.as_bytes());
    h.finalize().into()
}

/// Check the request's bound ids against its grant: its `Mcp-Session-Id`, then its `Last-Event-ID`
/// (bound to the grant and to that session), then the session in its query (`session_id`,
/// `sessionId`, `sessionid`). An empty `Last-Event-ID` names no event and passes as it is.
pub fn check_session(policy: &Policy, head: &RequestHead) -> SessionCheck {
    let Some(keys) = &policy.gateway.session_keys else { return SessionCheck::Unbound };
    let grant = grant_of(policy, head).ok().map(|g| owner(g.id, head));
    let refused = |why| SessionCheck::Refuse(Box::new(refuse(Refusal::SessionInvalid { why }, &Id::null())));
    let mut bound = Binding { grant, ..Binding::default() };
    match (&head.session_id, &grant) {
        (HeaderValue::Absent, _) => {}
        (HeaderValue::One(v), Some(g)) => {
            let Some(upstream) = session::unwrap(keys, g, v) else { return refused(SESSION_INVALID) };
            bound.url_elicitation = session::declares_url_elicitation(keys, g, v);
            bound.session = Some(upstream);
        }
        _ => return refused(SESSION_INVALID),
    }
    match (&head.last_event_id, &grant) {
        (HeaderValue::Absent, _) => {}
        (HeaderValue::One(v), _) if v.is_empty() => {}
        (HeaderValue::One(v), Some(g)) => {
            let in_session = bound.session.as_deref().unwrap_or_default();
            let Some(upstream) = event::open_id(keys, g, in_session, v) else { return refused(EVENT_ID_INVALID) };
            bound.last_event_id = Some(upstream);
        }
        _ => return refused(EVENT_ID_INVALID),
    }
    if let Some(target) = &head.target {
        match (legacy::session_param(target), &grant) {
            (legacy::SessionParam::Absent, _) => {}
            (legacy::SessionParam::One { value_at, value }, Some(g)) => {
                let Some(upstream) = legacy::open_id(keys, g, &value) else { return refused(LEGACY_SESSION_INVALID) };
                bound.path = Some(legacy::replace_value(target, value_at, &upstream));
            }
            _ => return refused(LEGACY_SESSION_INVALID),
        }
    }
    SessionCheck::Bound(bound)
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

/// What seals the ids a forwarded request's SSE response hands out (event ids, the HTTP+SSE
/// `endpoint` session): for `grant`, in the server's session `session`. `None` without
/// `gateway.session_key`, or without a grant to bind them to (then they pass as the server sent
/// them, and a client presenting one back is refused).
pub fn stream_ids(policy: &Policy, grant: Option<&GrantId>, session: Option<&[u8]>) -> Option<StreamIds> {
    let keys = policy.gateway.session_keys.as_ref()?;
    Some(StreamIds::new(keys.clone(), *grant?, session.unwrap_or_default().to_vec()))
}
