//! The request-headers callback as one step: which policy of the set judges the request
//! ([`attach`]), its bound ids checked ([`check_session`]), then what the headers alone decide
//! ([`on_headers`]). Each host reads the headers into a [`RequestHead`], calls [`request_headers`]
//! and acts on the [`HeadersPlan`] in its order: keep the attachment, rewrite the bound ids (a
//! header that cannot be rewritten refuses the request), then finish, wait for the body, or judge
//! the empty body of a request that ended with its headers.

use super::{
    attach, check_session, on_headers, unexpected_body, Attached, Binding, HeadOutcome, RequestHead, SessionCheck,
};
use crate::config::{PolicySet, Shared};
use crate::outcome::refusal::{LAST_EVENT_ID_NOT_REWRITTEN, PATH_NOT_REWRITTEN, SESSION_ID_NOT_REWRITTEN};
use crate::policy::Policy;

/// What the host does after the request headers.
#[derive(Debug)]
pub struct HeadersPlan {
    /// The policy the request is judged by: the set's choice, or the host's own policy.
    pub policy: Shared<Policy>,
    /// With a policy set: the choice, kept for the rest of the request (its decisions carry the
    /// policy's name and the caller).
    pub attached: Option<Attached>,
    /// With `gateway.session_key`: the server's own ids, to forward in place of the bound ones
    /// ([`Binding::rewrites`]) before anything else.
    pub binding: Option<Binding>,
    /// A decision already (a refusal, or a request without body, forwarded), or the body is needed.
    pub next: HeadOutcome,
}

/// The request-headers step for a request of `head` (read with `policy`, the host's policy or the
/// set's base); `set` is the host's policy set, if it has one. `end_of_stream`: the request ended
/// with its headers.
pub fn request_headers(
    set: Option<&PolicySet>,
    policy: Shared<Policy>,
    head: &RequestHead,
    end_of_stream: bool,
) -> HeadersPlan {
    let mut plan = HeadersPlan { policy, attached: None, binding: None, next: HeadOutcome::NeedBody };
    if let Some(set) = set {
        match attach(set, head) {
            Ok(attached) => {
                plan.policy = Shared::clone(&attached.policy);
                plan.attached = Some(attached);
            }
            Err(outcome) => {
                plan.next = HeadOutcome::Done(outcome);
                return plan;
            }
        }
    }
    match check_session(&plan.policy, head) {
        SessionCheck::Unbound => {}
        SessionCheck::Bound(bound) => plan.binding = Some(bound),
        SessionCheck::Refuse(outcome) => {
            plan.next = HeadOutcome::Done(outcome);
            return plan;
        }
    }
    plan.next = match on_headers(&plan.policy, head) {
        // GET and DELETE carry no body in Streamable HTTP; one that does is not judged: refused.
        HeadOutcome::Done(outcome) if outcome.reply.is_none() && !end_of_stream => {
            HeadOutcome::Done(Box::new(unexpected_body()))
        }
        next => next,
    };
    plan
}

impl Binding {
    /// The request headers to set to the server's own ids, each with the reason of the refusal
    /// when the host cannot set it (`data.reason` of 503 `unavailable`).
    pub fn rewrites(&self) -> impl Iterator<Item = (&'static str, &[u8], &'static str)> {
        [
            ("mcp-session-id", &self.session, SESSION_ID_NOT_REWRITTEN),
            ("last-event-id", &self.last_event_id, LAST_EVENT_ID_NOT_REWRITTEN),
            (":path", &self.path, PATH_NOT_REWRITTEN),
        ]
        .into_iter()
        .filter_map(|(name, value, reason)| Some((name, value.as_deref()?, reason)))
    }
}
