//! A JSON-RPC batch (MCP 2025-03-26), judged element by element and forwarded only whole.

use super::credential::{grant_of, no_grant};
use super::judge::{judge_message, Judged};
use super::{refuse, refused, version, HeaderValue, Outcome, RequestHead};
use crate::limits::Limiter;
use crate::outcome::decision::Decision;
use crate::outcome::kind::DecisionKind;
use crate::outcome::refusal::Refusal;
use crate::policy::Policy;
use crate::wire::mcp::{Id, Message, ProtocolError};
use crate::wire::reply::Reply;

/// A batch (MCP 2025-03-26): forwarded only if every element is allowed; otherwise one error per
/// element that has an id (invalid elements answer with id null, as JSON-RPC 2.0 §6 shows), and the
/// quota of admitted elements is given back.
pub(super) fn on_batch(
    policy: &Policy,
    head: &RequestHead,
    items: Vec<Result<Message, ProtocolError>>,
    limiter: &Limiter<'_>,
) -> Outcome {
    if let Err(out) = version::of_batch(policy, head) {
        return *out;
    }
    if head.mcp_method != HeaderValue::Absent || head.mcp_name != HeaderValue::Absent {
        let why = "Mcp-Method/Mcp-Name headers cannot describe a batch";
        return refuse(Refusal::HeaderMismatch { why }, &Id::null());
    }
    if let Some(out) = mixed_batch(&items) {
        return out;
    }
    let grant = match grant_of(policy, head) {
        Ok(g) => g,
        Err(why) => return no_grant(policy, &Id::null(), why),
    };
    let mut slots = Vec::with_capacity(items.len());
    let mut list_ids = Vec::new();
    let mut admissions = Vec::new();
    let mut first: Option<Refusal> = None;
    let mut invalid = false;
    let mut first_allowed: Option<Decision> = None;
    // With the rate limit service: what the whole batch counts, asked once it is allowed.
    let mut service = crate::pipeline::rls::Pending::new(grant.id, true);
    for item in items {
        match item {
            Err(e) => {
                invalid = true;
                let refusal = Refusal::protocol(&e);
                Slot::refused(&mut slots, &mut first, e.id, refusal);
            }
            Ok(msg) => {
                let id = match &msg {
                    Message::Notification { .. } => None,
                    m => Some(m.id()),
                };
                // Each element is held to its version as a single message is (a method the
                // version does not have, a `_meta` version that disagrees).
                let judged = match version::of_message(policy, head, &msg) {
                    Ok(_) => {
                        list_ids.extend(msg.tools_list_id());
                        judge_message(policy, head, &msg, &grant, limiter)
                    }
                    Err(refusal) => Judged::Refused(*refusal),
                };
                match judged {
                    Judged::Forward(d, adm, counted) => {
                        admissions.extend(adm);
                        if let Some(refusal) = d.tool.as_deref().and_then(|t| alone(policy, t)) {
                            Slot::refused(&mut slots, &mut first, id.unwrap_or_else(Id::null), refusal);
                        } else {
                            service.add(policy, id.clone(), d.tool.clone(), &counted);
                            first_allowed.get_or_insert(d);
                            slots.push(Slot::Ok(id));
                        }
                    }
                    Judged::Refused(refusal) => {
                        Slot::refused(&mut slots, &mut first, id.unwrap_or_else(Id::null), refusal);
                    }
                    Judged::Ask(pending) => {
                        // One callout per request: a call that needs approval must come alone.
                        admissions.extend(pending.admission);
                        let reason = "a call that needs approval cannot be part of a batch; send it on its own";
                        let refusal =
                            Refusal::ApprovalRequired { tool: pending.tool.clone(), reason: reason.into(), link: None };
                        Slot::refused(&mut slots, &mut first, id.unwrap_or_else(Id::null), refusal);
                    }
                }
            }
        }
    }
    let Some(first) = first else {
        let mut d = first_allowed.unwrap_or_else(|| Decision::new(DecisionKind::Passed));
        d.grant = Some(grant.label());
        let mut out = Outcome::new(d, None);
        out.tools_list_ids = list_ids;
        out.grant_id = Some(grant.id);
        if !service.is_empty() {
            service.decision = out.decision.clone();
            service.tools_list_ids = out.tools_list_ids.clone();
            out.rls = Some(Box::new(service));
        }
        return out;
    };
    for adm in &admissions {
        limiter.give_back(adm);
    }
    let mut body = String::from("[");
    for slot in &slots {
        let piece = match slot {
            Slot::Ok(None) => continue,
            Slot::Ok(Some(id)) => Refusal::BatchRefused.to_json(id),
            Slot::Err(id, refusal) => refusal.to_json(id),
            Slot::First(id) => first.to_json(id),
        };
        if body.len() > 1 {
            body.push(',');
        }
        body.push_str(&piece);
    }
    body.push(']');
    let mut decision = refused(first);
    decision.grant = Some(grant.label());
    decision.method = Some("batch".into());
    Outcome::new(decision, Some(Reply { status: if invalid { 400 } else { 200 }, headers: vec![], body }))
}

/// The refusal of a call of `tool` inside a batch, if it must come alone: its response is read only
/// then, and a mark must not be missed, nor a result rule.
fn alone(policy: &Policy, tool: &str) -> Option<Refusal> {
    let (part, what) = if !policy.marks_of(tool).is_empty() {
        ("marks", "that marks its grant")
    } else if policy.result_rules(tool).is_some() {
        ("result", "whose result the policy checks")
    } else {
        return None;
    };
    Some(Refusal::Denied {
        subject: crate::outcome::refusal::Subject::Tool(tool.to_owned()),
        rule: format!("tools.{tool}.{part}"),
        reason: format!("a call {what} cannot be part of a batch; send it on its own"),
    })
}

/// What one element of a batch answers.
enum Slot {
    /// Allowed: −31005 (with its id) when another element is refused.
    Ok(Option<Id>),
    Err(Id, Refusal),
    /// Refused with the batch's first refusal, which the batch's decision records: kept there, not
    /// copied.
    First(Id),
}

impl Slot {
    fn refused(slots: &mut Vec<Slot>, first: &mut Option<Refusal>, id: Id, refusal: Refusal) {
        if first.is_none() {
            *first = Some(refusal);
            slots.push(Slot::First(id));
        } else {
            slots.push(Slot::Err(id, refusal));
        }
    }
}

/// MCP 2025-03-26 (Base Protocol, batching): a batch holds requests and notifications, or responses,
/// never both; responses are data the policy does not judge. A mixed batch is refused whole: 400,
/// one −32600 per request (id echoed), or one with id null when it holds no request.
fn mixed_batch(items: &[Result<Message, ProtocolError>]) -> Option<Outcome> {
    let responses = items.iter().any(|m| matches!(m, Ok(Message::Response { .. })));
    let others = items.iter().any(|m| matches!(m, Ok(Message::Request { .. } | Message::Notification { .. })));
    if !(responses && others) {
        return None;
    }
    let detail = "a batch must not mix requests or notifications with responses".to_owned();
    let err = Refusal::InvalidRequest { detail };
    let ids: Vec<&Id> = items
        .iter()
        .filter_map(|m| match m {
            Ok(Message::Request { id, .. }) => Some(id),
            _ => None,
        })
        .collect();
    let body = if ids.is_empty() {
        err.to_json(&Id::null())
    } else {
        let parts: Vec<String> = ids.iter().map(|id| err.to_json(id)).collect();
        format!("[{}]", parts.join(","))
    };
    let mut decision = refused(err);
    decision.method = Some("batch".into());
    Some(Outcome::new(decision, Some(Reply { status: 400, headers: vec![], body })))
}
