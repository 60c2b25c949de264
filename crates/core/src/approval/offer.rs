//! Offering `require_approval` through the protocol's own means, so that the client can show the
//! approval link natively instead of surfacing the −31007 `approval_required` error:
//!
//! - MCP 2026-07-28, a `tools/call` whose `params._meta["io.modelcontextprotocol/clientCapabilities"]`
//!   has `elicitation.url` (what the Python SDK 2.x sends when it has an elicitation callback): a
//!   successful result `{"resultType":"input_required","inputRequests":{"mcp-policy-filter/approval":
//!   {"method":"elicitation/create","params":{"mode":"url","url":…,"elicitationId":…,"message":…}}},
//!   "requestState":…}` ([`input_required`]); the `requestState` is sealed ([`state`]). The client
//!   opens the URL, then retries the call with `inputResponses` and the `requestState`; the gateway
//!   checks them ([`check_retry`]) before judging, looks the approval up by the call's key as usual,
//!   and forwards the call without its own members ([`crate::pipeline::rewrite`]).
//! - MCP 2025-11-25, a session whose client declared `capabilities.elicitation.url` at `initialize`
//!   (an `m2.` session id, [`crate::identity::session`]): JSON-RPC error −32042 URLElicitationRequiredError
//!   with `data.elicitations` ([`crate::outcome::refusal::Refusal::UrlElicitationRequired`]); the retry is the identical call.
//!
//! Both need `gateway.session_key`. Everyone else (no key, no URL elicitation declared, a batch, a
//! continuation leg of the server's own `input_required`, a declined elicitation) gets −31007.
//! Sources: MCP 2026-07-28 "multi round-trip requests" and client/elicitation (URL mode); MCP
//! 2025-11-25 client/elicitation "URL Elicitation Required Error"; Python SDK 2.3
//! `mcp_types.InputRequiredResult`, `ElicitRequestURLParams`, `ElicitationRequiredErrorData`.

pub mod state;

use crate::identity::grant::GrantId;
use crate::identity::session::SessionKeys;
use crate::wire::json::{write_str, Json};
use crate::wire::leg::Leg;
use crate::wire::mcp::Id;

/// The gateway's key in `inputRequests` / `inputResponses`.
pub const INPUT_KEY: &str = "mcp-policy-filter/approval";

/// Where a person approves a held call (`approval_required` from the approval service).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApprovalLink {
    pub approval_id: String,
    pub approval_url: String,
    /// Seconds the approval request stays open.
    pub expires_in_seconds: u64,
}

/// How a call waiting for approval is answered while the approval is pending.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Offer {
    /// −31007 `approval_required` (every client).
    #[default]
    Fallback,
    /// MCP 2026-07-28 `input_required` with a URL elicitation and a sealed `requestState`.
    InputRequired,
    /// MCP 2025-11-25 −32042 with a URL elicitation.
    UrlElicitation,
}

/// The `elicitation/create` params of an offer, as JSON text:
/// `{"mode":"url","url":…,"elicitationId":…,"message":…}` (MCP 2025-11-25 `ElicitRequestURLParams`).
pub fn elicitation(link: &ApprovalLink, message: &str) -> String {
    let mut out = String::with_capacity(64 + link.approval_url.len() + link.approval_id.len() + message.len());
    out.push_str("{\"mode\":\"url\",\"url\":");
    write_str(&mut out, &link.approval_url);
    out.push_str(",\"elicitationId\":");
    write_str(&mut out, &link.approval_id);
    out.push_str(",\"message\":");
    write_str(&mut out, message);
    out.push('}');
    out
}

/// The 2026-07-28 offer for `id`: the successful JSON-RPC response
/// `{"jsonrpc":"2.0","id":ID,"result":{"resultType":"input_required","inputRequests":{INPUT_KEY:
/// {"method":"elicitation/create","params":{…}}},"requestState":STATE}}` (HTTP 200).
pub fn input_required(id: &Id, link: &ApprovalLink, message: &str, state: &str) -> String {
    let mut out = String::with_capacity(256 + link.approval_url.len() + message.len() + state.len());
    out.push_str("{\"jsonrpc\":\"2.0\",\"id\":");
    out.push_str(id.raw());
    out.push_str(",\"result\":{\"resultType\":\"input_required\",\"inputRequests\":{");
    write_str(&mut out, INPUT_KEY);
    out.push_str(":{\"method\":\"elicitation/create\",\"params\":");
    out.push_str(&elicitation(link, message));
    out.push_str("}},\"requestState\":");
    write_str(&mut out, state);
    out.push_str("}}");
    out
}

/// What the gateway did with an offer, counted in Envoy's stats as
/// `mcp_policy_approval_offers_<event>_total` (`host/metrics.rs`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Event {
    /// A pending approval answered with `input_required` (MCP 2026-07-28).
    InputRequired,
    /// A pending approval answered with −32042 (MCP 2025-11-25 `m2.` session).
    UrlElicitation,
    /// A retry forwarded with the gateway's members blanked (the host counts it when it rewrites).
    Forwarded,
    /// A retry refused with −31011 `approval_state_invalid`.
    StateInvalid,
    /// A retry whose answer is `decline` or `cancel`, ended with −31007 without asking.
    Declined,
}

impl Event {
    /// Every event, in the order of the README's table.
    pub const ALL: [Event; 5] =
        [Event::InputRequired, Event::UrlElicitation, Event::Forwarded, Event::StateInvalid, Event::Declined];

    /// The `<event>` part of the stat name.
    pub fn as_str(self) -> &'static str {
        match self {
            Event::InputRequired => "input_required",
            Event::UrlElicitation => "url_elicitation",
            Event::Forwarded => "forwarded",
            Event::StateInvalid => "state_invalid",
            Event::Declined => "declined",
        }
    }
}

/// What the members of a `tools/call`'s continuation leg say about an offer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Retry {
    /// Neither the gateway's `requestState` nor its `inputResponses` entry: an ordinary call.
    NotOurs,
    /// The gateway's own state, sealed for this grant and call, unexpired. `accepted`: the client's
    /// answer (if any) is `accept`, not `decline`/`cancel`.
    Valid { approval_id: String, accepted: bool },
    /// HTTP 400, −31011 `approval_state_invalid`, with this reason.
    Invalid(&'static str),
}

/// `data.reason` for a gateway answer that is not an MCP `ElicitResult` (an object whose `action`
/// is `"accept"`, `"decline"` or `"cancel"`; MCP 2025-11-25 / 2026-07-28 schema `ElicitResult`).
pub const NOT_AN_ELICIT_RESULT: &str = r#"params.inputResponses["mcp-policy-filter/approval"] must be an elicitation result: {"action":"accept"|"decline"|"cancel"}"#;

/// Check a call's leg against the offer the gateway may have made for it. `approval_key` is the
/// call's [`crate::approval::key`] (upstream, tool and arguments, without the leg); `now` Unix seconds.
/// The gateway's `requestState` may come only with its own `inputResponses` entry (or none).
pub fn check_retry(keys: Option<&SessionKeys>, grant: &GrantId, approval_key: &str, leg: &Leg, now: u64) -> Retry {
    let ours_state = leg.request_state.as_deref().is_some_and(|s| s.starts_with(state::PREFIX));
    let answers = leg.input_responses_value();
    let answer = answers.as_ref().and_then(|a| a.get(INPUT_KEY));
    if !ours_state && answer.is_none() {
        return Retry::NotOurs;
    }
    if !ours_state {
        return Retry::Invalid("params.inputResponses answers the gateway's approval request without its requestState");
    }
    if let Some(Json::Object(members)) = &answers {
        if members.iter().any(|(k, _)| k != INPUT_KEY) {
            return Retry::Invalid(
                "params.inputResponses may hold only the gateway's approval answer with its requestState",
            );
        }
    }
    let (Some(keys), Some(presented)) = (keys, leg.request_state.as_deref()) else {
        return Retry::Invalid(state::StateError::Seal.why());
    };
    // Read as consent only what says so: a missing or unknown action is refused, not accepted.
    let accepted = match answer.map(|a| a.get("action").and_then(Json::as_str)) {
        None | Some(Some("accept")) => true,
        Some(Some("decline" | "cancel")) => false,
        Some(_) => return Retry::Invalid(NOT_AN_ELICIT_RESULT),
    };
    match state::open(keys, grant, approval_key, presented, now) {
        Ok(approval_id) => Retry::Valid { approval_id, accepted },
        Err(e) => Retry::Invalid(e.why()),
    }
}
