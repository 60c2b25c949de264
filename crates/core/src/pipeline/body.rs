//! A POST decided on its whole body: one message (here) or a batch (`batch`).

use super::batch::on_batch;
use super::credential::{grant_of, no_grant};
use super::judge::{judge_message, Judged};
use super::offer;
use super::{body_too_large, refuse, version, HeaderValue, Outcome, RequestHead};
use crate::limits::{Limiter, SharedStore};
use crate::outcome::decision::Decision;
use crate::outcome::kind::DecisionKind;
use crate::outcome::refusal::Refusal;
use crate::policy::Policy;
use crate::terms::Mode;
use crate::wire::mcp::{self, Body, Call, Message};

/// Decide a POST on its whole body.
///
/// `now_ms` is milliseconds since the Unix epoch (UTC); `store` is the proxy-wasm shared data.
pub fn on_body(policy: &Policy, head: &RequestHead, body: &[u8], store: &dyn SharedStore, now_ms: u64) -> Outcome {
    if body.len() > policy.gateway.max_body_bytes {
        return body_too_large(policy);
    }
    let limiter = Limiter { store, now_ms, max_tracked_grants: policy.gateway.max_tracked_grants };
    let parsed = match mcp::read_body(body) {
        Ok(b) => b,
        Err(e) => return refuse(Refusal::protocol(&e), &e.id),
    };
    match parsed {
        Body::Single(mut msg) => {
            let mut out = on_message(policy, head, &msg, body, &limiter);
            out.url_elicitation = out.reply.is_none()
                && policy.gateway.session_keys.is_some()
                && offer::initialize_declares_url_elicitation(&msg, body);
            describe(&mut out.decision, &mut msg);
            if let Some(p) = out.approval.as_mut() {
                p.decision = out.decision.clone();
            }
            let tool = match &msg {
                Message::Request { call: Call::Tool(t), .. } => Some(t.name.as_str()),
                _ => None,
            };
            if out.reply.is_some() && out.decision.kind.is_policy() && policy.mode_for(tool) == Mode::DryRun {
                // Shadow mode: the full decision is logged and counted as "would deny", and the
                // request goes on. Nothing was consumed: refused calls never take quota.
                out.reply = None;
                out.decision.dry_run = true;
            }
            if out.approval.is_some() && policy.mode_for(tool) == Mode::DryRun {
                // Shadow mode asks nobody: the call goes on, logged as one that would wait for approval.
                if let Some(p) = out.approval.take() {
                    // As with local limits, the call still counts: the service is asked.
                    out.rls =
                        crate::pipeline::rls::Pending::single(policy, p.grant_id, p.id, Some(p.tool), &p.rls_limits)
                            .map(Box::new);
                }
                out.decision.kind = DecisionKind::ApprovalRequired;
                out.decision.dry_run = true;
            }
            if out.reply.is_none() {
                out.tools_list_ids.extend(msg.tools_list_id());
            }
            if let Some(r) = out.rls.as_mut() {
                r.decision = out.decision.clone();
                r.tools_list_ids = out.tools_list_ids.clone();
                r.dry_run = policy.mode_for(tool) == Mode::DryRun;
            }
            out
        }
        Body::Batch(items) => on_batch(policy, head, items, &limiter),
    }
}

fn on_message(policy: &Policy, head: &RequestHead, msg: &Message, body: &[u8], limiter: &Limiter<'_>) -> Outcome {
    // The id is copied only where a reply or a callout needs it, not for an allowed call.
    let id = || msg.id();
    let version = match version::of_message(policy, head, msg) {
        Ok(v) => v,
        Err(refusal) => return refuse(*refusal, &id()),
    };
    if let Some(why) = header_mismatch(head, msg, version.rules().method_headers) {
        return refuse(Refusal::HeaderMismatch { why }, &id());
    }
    let grant = match grant_of(policy, head) {
        Ok(g) => g,
        Err(why) => return no_grant(policy, &id(), why),
    };
    // The retry of an approval offered through input_required is checked before it is judged.
    let (retried, rewrite, accepted) = match offer::check_retry(policy, head, msg, &grant, body, limiter.now_ms) {
        offer::Checked::Plain => (None, None, true),
        offer::Checked::Retry { msg, rewrite, accepted } => (Some(msg), Some(rewrite), accepted),
        offer::Checked::Refused(refusal) => {
            let invalid = matches!(refusal, Refusal::ApprovalStateInvalid { .. });
            let mut out = refuse(refusal, &id());
            out.decision.grant = Some(grant.label());
            out.offer = invalid.then_some(crate::approval::offer::Event::StateInvalid);
            return out;
        }
    };
    let msg = retried.as_deref().unwrap_or(msg);
    let mut out = match judge_message(policy, head, msg, &grant, limiter) {
        Judged::Forward(d, _, counted) if counted.is_empty() && !policy.checks_flows_remotely(d.tool.as_deref()) => {
            Outcome::new(d, None)
        }
        Judged::Forward(d, _, counted) => {
            let rls = crate::pipeline::rls::Pending::single(policy, grant.id, id(), d.tool.clone(), &counted);
            Outcome { rls: rls.map(Box::new), ..Outcome::new(d, None) }
        }
        Judged::Ask(pending) if !accepted => offer::declined(*pending, limiter),
        Judged::Ask(mut pending) => {
            pending.offer = offer::offer_for(policy, head, version, &pending.leg, &grant.id);
            let mut out = Outcome::new(pending.decision.clone(), None);
            out.approval = Some(pending);
            out
        }
        Judged::Refused(refusal) => {
            let mut out = refuse(refusal, &id());
            out.decision.grant = Some(grant.label());
            out
        }
    };
    let tagged = version == crate::wire::protocol::Version::V2026_07_28;
    out.decision.tagged_results = tagged;
    if let Some(p) = out.approval.as_mut() {
        p.decision.tagged_results = tagged;
    }
    // A valid retry goes upstream (now, or once approved) without the gateway's members, whichever
    // way it was judged; the host applies the rewrite only to a call it forwards.
    out.rewrite = rewrite;
    out.grant_id = Some(grant.id);
    out
}

/// Fill in what the audit log says about the message: method, tool, id and argument keys. The
/// method and tool are kept when the judge already recorded them; the argument names are moved out
/// of `msg` (nothing reads them after this).
fn describe(d: &mut Decision, msg: &mut Message) {
    if d.method.is_none() {
        d.method = judged_method(msg);
    }
    if let Message::Request { id, call, .. } = msg {
        d.id = Some(id.raw().to_owned());
        if let Call::Tool(t) = call {
            if d.tool.is_none() {
                d.tool = Some(t.name.clone());
            }
            if let Some(args) = &mut t.arguments {
                d.arg_keys = args.take_keys();
            }
        }
    }
}

fn judged_method(msg: &Message) -> Option<String> {
    match msg {
        Message::Request { call: Call::Tool(_), .. } => Some("tools/call".into()),
        Message::Request { call: Call::Method { method, .. }, .. } => Some(method.name().into()),
        Message::Notification { method } => Some(method.name().into()),
        Message::Response { .. } => None,
    }
}

/// MCP 2026-07-28 Streamable HTTP: `Mcp-Method` and `Mcp-Name` mirror the body; any difference is
/// −32020. `Mcp-Name` is decoded first (SEP-2243 `=?base64?…?=`), then both are compared as exact
/// bytes against the unescaped body values. When `required` (2026-07-28), `Mcp-Method` must be
/// present, and `Mcp-Name` too for the methods whose table row names a mirrored parameter.
fn header_mismatch(head: &RequestHead, msg: &Message, required: bool) -> Option<&'static str> {
    let (method, name): (Option<&str>, Option<&str>) = match msg {
        Message::Request { call: Call::Tool(t), .. } => (Some("tools/call"), Some(&t.name)),
        Message::Request { call: Call::Method { method, target, .. }, .. } => (Some(method.name()), target.as_deref()),
        Message::Notification { method } => (Some(method.name()), None),
        Message::Response { .. } => (None, None),
    };
    if required && head.mcp_method == HeaderValue::Absent && method.is_some() {
        return Some("Mcp-Method header is required in MCP 2026-07-28");
    }
    let named = method.and_then(crate::wire::protocol::row_of).is_some_and(|r| r.name_param.is_some());
    if required && named && head.mcp_name == HeaderValue::Absent {
        return Some("Mcp-Name header is required in MCP 2026-07-28 for tools/call, prompts/get and resources/read");
    }
    let differs = |h: &HeaderValue, body: Option<&str>, decode: bool| match h {
        HeaderValue::Absent => false,
        HeaderValue::Many => true,
        HeaderValue::One(v) if decode => crate::wire::protocol::decode_header_value(v).as_deref() != body,
        HeaderValue::One(v) => body.map(str::as_bytes) != Some(v.as_slice()),
    };
    if differs(&head.mcp_method, method, false) {
        return Some("Mcp-Method header does not match the body's method");
    }
    if differs(&head.mcp_name, name, true) {
        return Some("Mcp-Name header does not match the body's name or uri");
    }
    None
}
