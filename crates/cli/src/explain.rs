//! `mcp-policy explain`: the filter's decision on one POST, as the filter makes it in Envoy
//! (`pipeline::on_headers` / `pipeline::on_body`, a fresh in-memory rate-limit store, the current time),
//! sent to the MCP server named by `--cluster`, `--authority` and `--path`.

mod batch;

use std::time::{SystemTime, UNIX_EPOCH};

use mcp_policy_core::config::{PolicySet, Why};
use mcp_policy_core::limits::{self, Limiter, MemoryStore, SharedStore};
use mcp_policy_core::outcome::kind::DecisionKind;
use mcp_policy_core::pipeline::{self, Attached, HeadOutcome, Outcome, RequestHead};
use mcp_policy_core::policy::conditions::{self, Condition};
use mcp_policy_core::policy::{GrantSource, Policy};
use mcp_policy_core::wire::json::Json;
use mcp_policy_core::wire::mcp::{read_body, Body, Call, Message};

use super::args::ExplainArgs;
use super::check::load_policy;
use super::{read_input, usage_error, Failure, Report, NEEDS_APPROVAL, OK, REFUSED};

pub(super) fn now_ms() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX)).unwrap_or(0)
}

/// Where `explain` sends the request: `--cluster`, `--authority`, `--path` (defaults: the shipped
/// envoy/envoy.yaml's cluster and listener, the MCP endpoint `/mcp`).
pub(super) struct Target {
    pub cluster: String,
    pub authority: String,
    pub path: String,
    /// The request's `MCP-Protocol-Version` header (`--protocol-version`); none when `None`.
    pub protocol_version: Option<String>,
}

impl Default for Target {
    /// `explain`'s defaults: the shipped envoy/envoy.yaml's cluster and listener, `/mcp`.
    fn default() -> Self {
        Target {
            cluster: "mcp_upstream".into(),
            authority: "127.0.0.1:10000".into(),
            path: "/mcp".into(),
            protocol_version: None,
        }
    }
}

/// Who sends the request `decide` judges: the credential, the verified claims (the base64url
/// payload `jwt_authn` forwards) and the marks the grant already carries.
#[derive(Clone, Copy)]
pub(super) struct Caller<'a> {
    pub grant: &'a str,
    pub payload: Option<&'a str>,
    pub marks: &'a [String],
    /// Pinned tools a `tools/list` through this Envoy showed: matching their pin (`true`) or not.
    pub pins: &'a [(String, bool)],
}

/// Run the filter's decision path on one POST: the caller's policy chosen from the set (with
/// `payload`, the claims as `jwt_authn` forwards them), then decided by it, with `store` as the rate
/// limits' shared data and `now_ms` as the time (`mcp-policy test` passes counters it filled before
/// the call); `marks` are set for the grant first, as a marking result would (`--marks`).
pub(super) fn decide(
    set: &PolicySet,
    body: &[u8],
    caller: &Caller<'_>,
    to: &Target,
    store: &dyn SharedStore,
    now_ms: u64,
) -> (Option<Attached>, Outcome) {
    let Caller { grant, payload, marks, pins } = *caller;
    let policy: &Policy = set.plain().unwrap_or_else(|| set.base());
    let credential = match &policy.gateway.grant {
        GrantSource::Bearer => ("authorization", format!("Bearer {grant}")),
        GrantSource::Header(h) => (h.as_str(), grant.to_owned()),
    };
    let mut headers: Vec<(&str, &[u8])> = vec![
        (":method", b"POST"),
        (":authority", to.authority.as_bytes()),
        (":path", to.path.as_bytes()),
        ("content-type", b"application/json"),
        (credential.0, credential.1.as_bytes()),
    ];
    if let Some(v) = &to.protocol_version {
        headers.push(("mcp-protocol-version", v.as_bytes()));
    }
    // From 2026-07-28 a request's Mcp-Method and Mcp-Name headers mirror its body, as clients send them.
    let mirrored = to.protocol_version.as_deref().filter(|v| *v >= MIRRORING_VERSION).and_then(|_| mirror(body));
    if let Some((method, name)) = &mirrored {
        headers.push(("mcp-method", method.as_bytes()));
        if let Some(name) = name {
            headers.push(("mcp-name", name.as_bytes()));
        }
    }
    if let (Some(p), Some(id)) = (payload, &policy.gateway.identity) {
        headers.push((id.payload_header.as_str(), p.as_bytes()));
    }
    let mut head = RequestHead::from_headers(policy, headers);
    head.cluster = Some(to.cluster.clone());
    let attached = match pipeline::attach(set, &head) {
        Ok(a) => a,
        Err(outcome) => return (None, *outcome),
    };
    let policy = &attached.policy;
    for (tool, matched) in pins {
        // As the host records what a tools/list showed (`ResultEvent::pin_marker`).
        if let Some(pin) = policy.pin(tool) {
            let key = if *matched { limits::pin_verified_key(tool, pin) } else { limits::pin_mismatch_key(tool, pin) };
            let _ = store.set(&key, b"1", 0);
        }
    }
    let mut outcome = match pipeline::on_headers(policy, &head) {
        HeadOutcome::Done(outcome) => *outcome,
        HeadOutcome::NeedBody if marks.is_empty() => pipeline::on_body(policy, &head, body, store, now_ms),
        HeadOutcome::NeedBody => {
            // The grant's id, from a first decision on a store of its own; its marks set in `store`.
            let first = pipeline::on_body(policy, &head, body, &MemoryStore::new(), now_ms);
            match first.grant_id {
                None => first,
                Some(grant_id) => {
                    let limiter = Limiter { store, now_ms, max_tracked_grants: u64::MAX };
                    if marks.iter().any(|m| mcp_policy_core::limits::marks::set(&limiter, &grant_id, m).is_err()) {
                        first
                    } else {
                        pipeline::on_body(policy, &head, body, store, now_ms)
                    }
                }
            }
        }
    };
    attached.stamp(&mut outcome.decision);
    outcome.shape(policy.gateway.refusal_shape);
    (Some(attached), outcome)
}

/// The first protocol version whose requests carry Mcp-Method and Mcp-Name.
const MIRRORING_VERSION: &str = "2026-07-28";

/// The Mcp-Method and Mcp-Name headers of a single request `body`: its method, and the member
/// `Mcp-Name` mirrors (`params.name` of `tools/call` and `prompts/get`, `params.uri` of
/// `resources/read`), as `=?base64?…?=` when it is not printable ASCII (SEP-2243).
fn mirror(body: &[u8]) -> Option<(String, Option<String>)> {
    use base64::Engine;
    let message: serde_json::Value = serde_json::from_slice(body).ok()?;
    let method = message.get("method")?.as_str()?;
    let member = match method {
        "tools/call" | "prompts/get" => "name",
        "resources/read" => "uri",
        _ => return Some((method.to_owned(), None)),
    };
    let name = message.get("params").and_then(|p| p.get(member)).and_then(serde_json::Value::as_str).map(|n| {
        if n.bytes().all(|b| (0x20..0x7f).contains(&b)) {
            n.to_owned()
        } else {
            format!("=?base64?{}?=", base64::engine::general_purpose::STANDARD.encode(n))
        }
    });
    Some((method.to_owned(), name))
}

/// `--claims`: a JSON object, as the base64url payload header `jwt_authn` forwards.
pub(super) fn payload_of(claims: &str, set: &PolicySet) -> Result<String, Failure> {
    if set.base().gateway.identity.is_none() {
        return Err(usage_error("explain", "--claims needs a policy with gateway.identity (it reads no claims)"));
    }
    let parsed = mcp_policy_core::wire::json::parse(claims.as_bytes()).ok();
    if !matches!(parsed, Some(mcp_policy_core::wire::json::Json::Object(_))) {
        return Err(usage_error("explain", "--claims must be a JSON object, e.g. '{\"sub\":\"alice\"}'"));
    }
    let mut out = String::new();
    mcp_policy_core::wire::b64::encode_into(
        &mut out,
        claims.as_bytes(),
        mcp_policy_core::wire::b64::Alphabet::UrlNoPad,
    );
    Ok(out)
}

/// Which policy of the set applies, and why.
fn why_line(set: &PolicySet, a: &Attached) -> Option<String> {
    Some(match a.why {
        Why::Plain => return None,
        Why::Attached(i) => format!(
            "{} (attach[{i}]: the first rule whose every matcher holds)",
            a.policy.name.as_deref().unwrap_or("-")
        ),
        Why::NoRule => format!(
            "none (no attach rule of {} matches: every tools/call is refused with no_policy, tools/list is empty)",
            set.rules().len()
        ),
        Why::Contained(i) => format!("contained (contain[{i}] matches: every tools/call is refused with contained)"),
    })
}

/// A value sent in a request header: non-empty, without control characters.
fn header_safe(v: &str) -> bool {
    !v.is_empty() && !v.bytes().any(|b| b.is_ascii_control())
}

pub(super) fn explain(args: &ExplainArgs) -> Result<Report, Failure> {
    let ExplainArgs {
        policy: policy_file,
        request: request_file,
        grant,
        cluster,
        authority,
        path,
        protocol_version,
        claims,
        result,
        marks,
        pins_listed,
    } = args;
    if !header_safe(grant) {
        return Err(usage_error("explain", "--grant must be non-empty, without control characters"));
    }
    if ![cluster, authority, path].into_iter().chain(protocol_version).all(|v| header_safe(v)) {
        return Err(usage_error(
            "explain",
            "--cluster, --authority, --path and --protocol-version must be non-empty, without control characters",
        ));
    }
    let to = Target {
        cluster: cluster.clone(),
        authority: authority.clone(),
        path: path.clone(),
        protocol_version: protocol_version.clone(),
    };
    let set = load_policy(policy_file)?;
    let payload = claims.as_deref().map(|c| payload_of(c, &set)).transpose()?;
    let body = read_input(request_file)?;
    let pins: Vec<(String, bool)> = pins_listed.iter().map(|t| (t.clone(), true)).collect();
    let caller = Caller { grant, payload: payload.as_deref(), marks, pins: &pins };
    let (attached, outcome) = decide(&set, &body, &caller, &to, &MemoryStore::new(), now_ms());
    let policy = attached.as_ref().map_or_else(|| set.plain().unwrap_or_else(|| set.base()), |a| &a.policy);
    if let Some(t) = pins_listed.iter().find(|t| policy.pinned(t).is_none()) {
        return Err(usage_error("explain", format!("--pins-listed: the policy's pins record no tool \"{t}\"")));
    }
    if let Some(m) = marks.iter().find(|m| !policy.flows.iter().any(|f| f.marks.contains(m))) {
        return Err(usage_error("explain", format!("--marks: no flow of the policy uses the mark \"{m}\"")));
    }
    let mut text = String::new();
    if let Some(line) = attached.as_ref().and_then(|a| why_line(&set, a)) {
        text.push_str(&format!("{:<10}{line}\n", "policy:"));
    }
    if let Some(p) = &outcome.decision.provenance {
        if let Some(s) = &p.subject {
            text.push_str(&format!("{:<10}{s}\n", "subject:"));
        }
        if !p.act.is_empty() {
            text.push_str(&format!("{:<10}{}\n", "act:", p.act.join(" <- ")));
        }
    }
    let status = match (&outcome.reply, &outcome.approval) {
        (Some(_), _) => REFUSED,
        (None, Some(_)) => NEEDS_APPROVAL,
        (None, None) => OK,
    };
    text.push_str(&render(policy, &outcome, condition_found(policy, &outcome, &body).as_deref()));
    if let Some(file) = result {
        text.push_str(&result_lines(policy, &outcome, &read_input(file)?));
    }
    text.push_str(&batch::lines(&set, &body, &caller, &to, now_ms()));
    Ok(Report::out(text, status))
}

/// What the result rules of the forwarded call make of `body` (a JSON response), as the filter
/// judges it in Envoy (`ResponseFilter::judging`): never the matched text.
fn result_lines(policy: &Policy, o: &Outcome, body: &[u8]) -> String {
    use mcp_policy_core::response::{Plan, ResponseFilter, Step};
    let mut f = ResponseFilter::forwarded(policy, &o.tools_list_ids).judging(policy, &o.decision);
    let line = match f.on_headers(false, |n| (n == "content-type").then(|| b"application/json".to_vec())) {
        Plan::PassThrough => "passed unread (no result rule applies)".to_owned(),
        Plan::Unanswered => "passed unread, and the call's marks set: the reply does not answer it".to_owned(),
        Plan::Refuse(bad) => format!("refused: {}", bad.why),
        Plan::FilterJson | Plan::FilterSse => {
            let step = match f.on_body(body.len(), true) {
                Step::Read => f.on_chunk_judged(body, true, &|n| policy.is_unlisted(n), policy),
                step => step,
            };
            let events = f.take_events();
            let what: Vec<String> = events
                .iter()
                .map(|e| match e.reason.as_deref() {
                    Some(r) => format!("{} by {} ({r})", e.label(), e.rule),
                    None => format!("{} by {} ({} redactions)", e.label(), e.rule, e.redactions),
                })
                .collect();
            match (step, what.is_empty()) {
                (Step::Pass, true) => "passes unchanged".to_owned(),
                (_, false) => what.join("; "),
                (_, true) => "changed (tools removed from a list)".to_owned(),
            }
        }
    };
    format!("{:<10}{line}\n", "result:")
}

/// What the filter found of the argument condition that refused the call, when the agent is shown
/// the condition's own `reason` instead: e.g. `deny_if condition cannot be evaluated: args.command
/// regex` (the argument is absent) where the author wrote "no rm -rf".
fn condition_found(policy: &Policy, o: &Outcome, body: &[u8]) -> Option<String> {
    let d = &o.decision;
    let rule = d.rule.as_deref()?;
    let Ok(Body::Single(Message::Request { call: Call::Tool(call), .. })) = read_body(body) else { return None };
    let r = policy.tool_rule(&call.name)?;
    r.require.iter().chain(&r.deny_if).find(|c| c.rule == rule)?.reason.as_ref()?;
    let unreasoned =
        |cs: &[Condition]| -> Vec<Condition> { cs.iter().cloned().map(|c| Condition { reason: None, ..c }).collect() };
    // The arguments as `Policy::judge` reads them: the value, and a budget of twice their text.
    let args = call.arguments.as_ref();
    let value = args.map(|a| a.value().unwrap_or(Json::Null));
    let budget = args.map_or(0, |a| a.raw().len()).saturating_mul(2).saturating_add(64);
    let (require, deny_if) = (unreasoned(&r.require), unreasoned(&r.deny_if));
    let (c, why) = conditions::check(&require, &deny_if, value.as_ref(), budget)?;
    (c.rule == rule).then_some(why)
}

/// The decision's label and reason as shown: a call held for approval (no reply yet) is named as
/// policy tests, the access log and the metrics name it, with the reason the agent is shown (the
/// tool's `reason`).
pub(super) fn shown(o: &Outcome) -> (&'static str, Option<&String>) {
    let d = &o.decision;
    match (&o.reply, &o.approval) {
        (None, Some(held)) => (DecisionKind::ApprovalRequired.as_str(), d.reason.as_ref().or(held.reason.as_ref())),
        _ => (d.label(), d.reason.as_ref()),
    }
}

/// The explanation: one `key: value` line per known fact, then the reply body as sent.
fn render(policy: &Policy, o: &Outcome, found: Option<&str>) -> String {
    let d = &o.decision;
    let (label, reason) = shown(o);
    let mut lines: Vec<(&str, String)> = vec![("decision", label.to_owned())];
    lines.push(("rule", d.rule.clone().unwrap_or_else(|| "-".into())));
    let reason = match (reason, d.label()) {
        (Some(r), _) => r.clone(),
        (None, "passed") => {
            "- (not subject to policy: lifecycle methods, notifications and client responses pass, and \
             tools/list, which hide and pins filter: the manual's MCP methods)"
                .into()
        }
        (None, _) => "-".into(),
    };
    lines.push(("reason", reason));
    if let Some(found) = found {
        lines.push(("found", found.to_owned()));
    }
    if let Some(m) = &d.method {
        lines.push(("method", m.clone()));
    }
    if let Some(t) = &d.tool {
        lines.push(("tool", t.clone()));
    }
    if let Some(g) = &d.grant {
        lines.push(("grant", g.clone()));
    }
    if let Some(kind) = d.error_kind() {
        lines.push(("error", kind.to_owned()));
    }
    match &o.reply {
        None if o.approval.is_some() => {
            let cluster = policy.gateway.approval.as_ref().map_or("-", |a| a.cluster.as_str());
            if let Some(p) = &o.approval {
                lines.push(("approval", format!("required, key {}", p.key)));
                let u = &p.upstream;
                lines.push(("upstream", format!("cluster {}, authority {}, path {}", u.cluster, u.authority, u.path)));
            }
            lines.push((
                "status",
                format!(
                    "held: the approval service (cluster {cluster}) is asked; forwarded only once a person approved \
                     this exact call, else answered by the filter (JSON-RPC error -31007, -31008 or -31009)"
                ),
            ));
        }
        None if d.dry_run => lines.push((
            "status",
            "forwarded to the MCP server (dry run: the policy would refuse it; the agent gets the server's response)"
                .into(),
        )),
        None => lines.push(("status", "forwarded to the MCP server (the agent gets the server's response)".into())),
        Some(r) => {
            let code = serde_json::from_str::<serde_json::Value>(&r.body)
                .ok()
                .and_then(|v| {
                    let v = if let serde_json::Value::Array(items) = v { items.into_iter().next()? } else { v };
                    v.get("error")?.get("code")?.as_i64()
                })
                .map(|c| format!(", JSON-RPC error {c}"))
                .unwrap_or_default();
            lines.push(("status", format!("{} (answered by the filter{code}; nothing reaches the server)", r.status)));
            for (name, value) in &r.headers {
                lines.push(("header", format!("{name}: {value}")));
            }
        }
    }
    if let Some(tool) = d.tool.as_deref().filter(|_| o.reply.is_none()) {
        if policy.result_rules(tool).is_some() {
            lines.push(("note", format!("the result is judged by tools.{tool}.result (see --result)")));
        }
        if policy.pin(tool).is_some() {
            let rule = policy.pin_rule(tool);
            lines.push(("note", format!("{rule}: refused once a tools/list showed another definition")));
        }
    }
    if let Some(tool) = d.tool.as_deref() {
        match policy.default_for(tool) {
            // Not (yet) allowed by it: this Envoy has not listed the tool matching its pin.
            Some(rule)
                if policy.allow_needs_verified_pin(tool).is_some()
                    && !(d.label() == "allowed" && d.rule.as_deref() == Some(&rule.path)) =>
            {
                lines.push((
                    "note",
                    format!(
                        "{} allows it once a tools/list through this Envoy showed it matching pins.{tool} \
                         (--pins-listed {tool})",
                        rule.path
                    ),
                ));
            }
            _ => {}
        }
    }
    if o.reply.is_none() && !o.tools_list_ids.is_empty() && policy.filters_tools_list() {
        lines.push(("note", "the tools/list response is filtered: hidden tools are removed".into()));
    }
    let mut out = String::new();
    for (k, v) in lines {
        out.push_str(&format!("{:<10}{v}\n", format!("{k}:")));
    }
    if let Some(r) = &o.reply {
        out.push_str("reply:\n");
        out.push_str(&r.body);
        out.push('\n');
    }
    out
}
