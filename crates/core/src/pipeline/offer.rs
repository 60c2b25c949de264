//! The gate's side of offering `require_approval` through the protocol ([`crate::approval::offer`]): the
//! retry of an offer, checked before the call is judged ([`check_retry`]); which offer a call waiting
//! for approval gets ([`offer_for`]); and the reply of a pending approval ([`pending_reply`]).

use super::{HeaderValue, Outcome, PendingApproval, RequestHead};
use crate::approval;
use crate::approval::offer::ApprovalLink;
use crate::approval::offer::{self, Offer, Retry};
use crate::identity::grant::Grant;
use crate::identity::grant::GrantId;
use crate::limits::Limiter;
use crate::outcome::refusal::Refusal;
use crate::pipeline::rewrite::{self, BodyRewrite};
use crate::policy::Policy;
use crate::wire::leg::Leg;
use crate::wire::mcp::{Call, Message};
use crate::wire::protocol::Version;
use crate::wire::reply::Reply;

/// A message checked for the gateway's own `requestState`.
pub(super) enum Checked {
    /// Not the retry of an offer: judge the message as it is.
    Plain,
    /// A valid retry: judge `msg` (the call without the gateway's members) and, if it goes
    /// upstream, forward the body `rewrite`. `accepted`: the client did not decline the elicitation.
    Retry { msg: Box<Message>, rewrite: BodyRewrite, accepted: bool },
    /// HTTP 400, −31011.
    Refused(Refusal),
}

/// Check a `tools/call` leg that carries the gateway's `requestState` or its `inputResponses` entry
/// (`crate::approval::offer::check_retry`), before it is judged. `body` is the request body as sent;
/// `now_ms` milliseconds since the Unix epoch.
pub(super) fn check_retry(
    policy: &Policy,
    head: &RequestHead,
    msg: &Message,
    grant: &Grant,
    body: &[u8],
    now_ms: u64,
) -> Checked {
    let Message::Request { id, call: Call::Tool(t), meta_version } = msg else { return Checked::Plain };
    if !t.leg.is_continuation() {
        return Checked::Plain;
    }
    // The state binds the call's key, which binds its upstream: without one, no state is ours to
    // open (the empty key matches no seal), and a state of the gateway's is refused below.
    let upstream = head.upstream();
    let args = t.arguments.as_ref().and_then(crate::wire::mcp::Arguments::value);
    let key = upstream
        .as_ref()
        .map(|u| approval::key_for(head.caller.get(), &grant.id, u, &t.name, args.as_ref(), None, None))
        .unwrap_or_default();
    let keys = policy.gateway.session_keys.as_ref();
    let refuse = |why| Checked::Refused(Refusal::ApprovalStateInvalid { tool: t.name.clone(), why });
    let retry = offer::check_retry(keys, &grant.id, &key, &t.leg, now_ms / 1000);
    if let (false, Err(why)) = (retry == Retry::NotOurs, &upstream) {
        return Checked::Refused(Refusal::ApprovalUnavailable { tool: t.name.clone(), why: (*why).to_owned() });
    }
    match retry {
        Retry::NotOurs => Checked::Plain,
        Retry::Invalid(why) => refuse(why),
        Retry::Valid { accepted, .. } => {
            let Some(rewrite) = rewrite::without_params_members(body, &rewrite::LEG_MEMBERS) else {
                return refuse("the request body could not be rewritten without params.requestState");
            };
            let mut call = t.clone();
            call.leg = Leg { url_elicitation: t.leg.url_elicitation, ..Leg::default() };
            let msg = Message::Request { id: id.clone(), call: Call::Tool(call), meta_version: meta_version.clone() };
            Checked::Retry { msg: Box::new(msg), rewrite, accepted }
        }
    }
}

/// `data.reason` of the −31007 a declined offer ends in.
pub const DECLINED: &str =
    "the client declined the gateway's approval request (inputResponses action decline or cancel); nothing was asked or forwarded";

/// A valid retry whose answer to the gateway's request is `decline` or `cancel`, for a call that
/// needs approval: the person at the client said no, so the approval service is not asked (an
/// approved approval is neither used nor consumed) and the quota reserved for the call goes back.
/// −31007 `approval_required` without a link (HTTP 200), so the client's loop stops.
pub(super) fn declined(held: PendingApproval, limiter: &Limiter<'_>) -> Outcome {
    if let Some(adm) = &held.admission {
        limiter.give_back(adm);
    }
    let PendingApproval { tool, id, mut decision, .. } = held;
    let refusal = Refusal::ApprovalRequired { tool, reason: DECLINED.to_owned(), link: None };
    let reply = refusal.reply(&id);
    decision.refused(refusal);
    Outcome { offer: Some(offer::Event::Declined), ..Outcome::new(decision, Some(reply)) }
}

/// Whether `msg` is an `initialize` whose `params.capabilities` declare URL-mode elicitation
/// (MCP 2025-11-25 `ClientCapabilities.elicitation.url`). `body` is the message's whole text (an
/// `initialize` is read again here, once per session; the message layer keeps no capabilities).
pub(super) fn initialize_declares_url_elicitation(msg: &Message, body: &[u8]) -> bool {
    let Message::Request { call: Call::Method { method: crate::wire::mcp::McpMethod::Initialize, .. }, .. } = msg
    else {
        return false;
    };
    let Ok(v) = crate::wire::json::parse_folded_keys_allowed(body) else { return false };
    v.get("params").and_then(|p| p.get("capabilities")).is_some_and(crate::wire::mcp::declares_url_elicitation)
}

/// The offer a call waiting for approval gets while the approval is pending: never without
/// `gateway.session_key`; `input_required` for a 2026-07-28 first
/// leg whose client declares URL elicitation; −32042 on a 2025-11-25 `m2.` session; else −31007.
pub(super) fn offer_for(policy: &Policy, head: &RequestHead, version: Version, leg: &Leg, grant: &GrantId) -> Offer {
    let Some(keys) = policy.gateway.session_keys.as_ref() else { return Offer::Fallback };
    match version {
        Version::V2026_07_28 if leg.url_elicitation && !leg.is_continuation() => Offer::InputRequired,
        Version::V2025_11_25 => match &head.session_id {
            // The id is sealed for the session's owner: the grant, and the caller under a set.
            HeaderValue::One(id)
                if crate::identity::session::declares_url_elicitation(
                    keys,
                    &super::binding::owner(*grant, head),
                    id,
                ) =>
            {
                Offer::UrlElicitation
            }
            _ => Offer::Fallback,
        },
        _ => Offer::Fallback,
    }
}

/// The reply to a held call whose approval is pending at `link`, offered as `held.offer`; `None`
/// for the fallback (the refusal's own −31007 reply). The sealed state binds the call's approval
/// key and expires with the approval request; `now_ms` is milliseconds since the Unix epoch.
pub(super) fn pending_reply(
    policy: &Policy,
    held: &PendingApproval,
    link: &ApprovalLink,
    now_ms: u64,
) -> Option<Reply> {
    let reason = held.reason.as_deref().unwrap_or(approval::DEFAULT_REASON);
    let body = match held.offer {
        Offer::Fallback => return None,
        Offer::InputRequired => {
            let keys = policy.gateway.session_keys.as_ref()?;
            let expires_at = (now_ms / 1000).saturating_add(link.expires_in_seconds);
            let state = offer::state::seal(keys, &held.grant_id, &held.key, &link.approval_id, expires_at);
            offer::input_required(&held.id, link, reason, &state)
        }
        Offer::UrlElicitation => {
            let (tool, reason) = (held.tool.clone(), reason.to_owned());
            return Some(Refusal::UrlElicitationRequired { tool, reason, link: link.clone() }.reply(&held.id));
        }
    };
    Some(Reply { status: 200, headers: Vec::new(), body })
}
