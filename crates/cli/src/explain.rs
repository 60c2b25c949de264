//! `mcp-policy explain`: the filter's decision on one POST, as the filter makes it in Envoy
//! (`pipeline::on_headers` / `pipeline::on_body`, a fresh in-memory rate-limit store, the current time),
//! sent to the MCP server named by `--cluster`, `--authority` and `--path`.

use std::time::{SystemTime, UNIX_EPOCH};

use mcp_policy_core::limits::{Limiter, MemoryStore};
use mcp_policy_core::pipeline::{self, HeadOutcome, Outcome, RequestHead};
use mcp_policy_core::policy::{GrantSource, Policy};

use super::args::ExplainArgs;
use super::check::load_policy;
use super::{read_input, usage_error, Failure, Report, NEEDS_APPROVAL, OK, REFUSED};

fn now_ms() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX)).unwrap_or(0)
}

/// Where `explain` sends the request: `--cluster`, `--authority`, `--path` (defaults: the shipped
/// envoy/envoy.yaml's cluster and listener, the MCP endpoint `/mcp`).
struct Target {
    cluster: String,
    authority: String,
    path: String,
}

/// Run the filter's decision path on one POST.
fn decide(policy: &Policy, body: &[u8], grant: &str, to: &Target, marks: &[String]) -> Outcome {
    let credential = match &policy.gateway.grant {
        GrantSource::Bearer => ("authorization", format!("Bearer {grant}")),
        GrantSource::Header(h) => (h.as_str(), grant.to_owned()),
    };
    let headers: [(&str, &[u8]); 5] = [
        (":method", b"POST"),
        (":authority", to.authority.as_bytes()),
        (":path", to.path.as_bytes()),
        ("content-type", b"application/json"),
        (credential.0, credential.1.as_bytes()),
    ];
    let mut head = RequestHead::from_headers(policy, headers);
    head.cluster = Some(to.cluster.clone());
    match pipeline::on_headers(policy, &head) {
        HeadOutcome::Done(outcome) => *outcome,
        HeadOutcome::NeedBody if marks.is_empty() => {
            pipeline::on_body(policy, &head, body, &MemoryStore::new(), now_ms())
        }
        HeadOutcome::NeedBody => {
            // The grant's id, from a first decision on a store of its own; its marks set on a fresh one.
            let now = now_ms();
            let first = pipeline::on_body(policy, &head, body, &MemoryStore::new(), now);
            let Some(grant_id) = first.grant_id else { return first };
            let store = MemoryStore::new();
            let limiter = Limiter { store: &store, now_ms: now, max_tracked_grants: u64::MAX };
            for m in marks {
                if mcp_policy_core::limits::marks::set(&limiter, &grant_id, m).is_err() {
                    return first;
                }
            }
            pipeline::on_body(policy, &head, body, &store, now)
        }
    }
}

/// A value sent in a request header: non-empty, without control characters.
fn header_safe(v: &str) -> bool {
    !v.is_empty() && !v.bytes().any(|b| b.is_ascii_control())
}

pub(super) fn explain(args: &ExplainArgs) -> Result<Report, Failure> {
    let ExplainArgs { policy: policy_file, request: request_file, grant, cluster, authority, path, marks } = args;
    if !header_safe(grant) {
        return Err(usage_error("explain", "--grant must be non-empty, without control characters"));
    }
    if ![cluster, authority, path].into_iter().all(|v| header_safe(v)) {
        return Err(usage_error(
            "explain",
            "--cluster, --authority and --path must be non-empty, without control characters",
        ));
    }
    let to = Target { cluster: cluster.clone(), authority: authority.clone(), path: path.clone() };
    let policy = load_policy(policy_file)?;
    let body = read_input(request_file)?;
    if let Some(m) = marks.iter().find(|m| !policy.flows.iter().any(|f| f.marks.contains(m))) {
        return Err(usage_error("explain", format!("--marks: no flow of the policy uses the mark \"{m}\"")));
    }
    let outcome = decide(&policy, &body, grant, &to, marks);
    let status = match (&outcome.reply, &outcome.approval) {
        (Some(_), _) => REFUSED,
        (None, Some(_)) => NEEDS_APPROVAL,
        (None, None) => OK,
    };
    Ok(Report::out(render(&policy, &outcome), status))
}

/// The explanation: one `key: value` line per known fact, then the reply body as sent.
fn render(policy: &Policy, o: &Outcome) -> String {
    let d = &o.decision;
    let mut lines: Vec<(&str, String)> = vec![("decision", d.label().to_owned())];
    lines.push(("rule", d.rule.clone().unwrap_or_else(|| "-".into())));
    lines.push(("reason", d.reason.clone().unwrap_or_else(|| "-".into())));
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
