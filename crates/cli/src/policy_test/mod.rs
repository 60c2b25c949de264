//! `mcp-policy test POLICY TESTS`: decide each case of a tests file with the filter's own code (what
//! `explain` runs: `pipeline::on_headers` / `pipeline::on_body`) and compare the decision with the
//! one expected. The rate limits' prior calls are counted by the filter's own limiter
//! (`limits::Limiter`) into the store the call is then decided with.

mod prior;
mod report;
pub mod spec;

use mcp_policy_core::config::PolicySet;
use mcp_policy_core::identity::grant::{self, Grant, GrantId};
use mcp_policy_core::limits::MemoryStore;
use mcp_policy_core::policy::{GrantSource, Policy};
use mcp_policy_core::wire::{json, textpos};

use super::args::TestArgs;
use super::check::load_policy;
use super::explain::{decide, now_ms, payload_of, shown, Caller, Target};
use super::{read_input, Failure, Report, INVALID_POLICY, USAGE_OR_IO};
use report::{Actual, Verdict};
use spec::Case;

/// The credential of a case without `grant` (as `explain --grant`'s default).
const DEFAULT_GRANT: &str = "cli";
/// Exit status when a case got another decision than expected.
const CASE_FAILED: u8 = 1;

fn bad_input(message: String) -> Failure {
    Failure { status: USAGE_OR_IO, message }
}

pub(super) fn command(args: &TestArgs) -> Result<Report, Failure> {
    // An invalid policy is bad input here (status 2): status 1 says a case failed.
    let set = load_policy(&args.policy).map_err(|f| match f.status {
        INVALID_POLICY => bad_input(f.message),
        _ => f,
    })?;
    let text = read_input(&args.tests)?;
    if args.tests.ends_with(".json") {
        strict_json(&text).map_err(|e| bad_input(prefixed(&args.tests, &e)))?;
    }
    let file = spec::parse(&text).map_err(|e| bad_input(prefixed(&args.tests, &e)))?;
    let now = now_ms();
    let mut verdicts = Vec::with_capacity(file.cases.len());
    let mut notes = String::new();
    for (i, case) in file.cases.iter().enumerate() {
        let actual =
            run_case(&set, case, now).map_err(|e| bad_input(prefixed(&args.tests, &format!("cases[{i}].{e}"))))?;
        if let Some(note) = case.call.tool.as_deref().and_then(|t| near_miss(&set, t, actual.rule.as_deref())) {
            notes.push_str(&format!("{}: note: cases[{i}].call.tool: {note}\n", args.tests));
        }
        verdicts.push(Verdict::new(case, actual));
    }
    let source = report::Source { tests: &args.tests, policy: &args.policy };
    if let Some(path) = &args.junit {
        let xml = report::junit(&source, &verdicts).map_err(|e| bad_input(format!("mcp-policy: {e}")))?;
        std::fs::write(path, xml).map_err(|e| bad_input(format!("mcp-policy: cannot write {path}: {e}")))?;
    }
    let failed = verdicts.iter().filter(|v| !v.passed()).count();
    let mut out = Report::out(report::text(&source, &verdicts), if failed == 0 { 0 } else { CASE_FAILED });
    out.stderr = notes;
    Ok(out)
}

/// For a tool name no policy of `set` names, one or two edits from a name one does, that the
/// policy's `default` (or a `default_for`) decided (`rule`): a likely typo, to say. A name further
/// from every named one is a case of its own (an unlisted tool is denied, say), and one the filter
/// judged as a named tool (a name folding onto a hidden or denied one) was decided by that tool's
/// rule.
fn near_miss(set: &PolicySet, tool: &str, rule: Option<&str>) -> Option<String> {
    if !rule.is_some_and(|r| r == "default" || r.starts_with("default_for[")) {
        return None;
    }
    let named: Vec<&str> = set.members().iter().chain([set.base()]).flat_map(|p| p.named_tools()).collect();
    if named.contains(&tool) {
        return None;
    }
    let (near, edits) = named.iter().map(|n| (*n, strsim::levenshtein(n, tool))).min_by_key(|(_, d)| *d)?;
    (edits <= 2 && edits < tool.chars().count())
        .then(|| format!("the policy names no tool \"{tool}\" (did you mean \"{near}\"?)"))
}

/// A `.json` tests file is held to JSON as strictly as a policy is (no trailing comma, comment or
/// repeated name), where the YAML reader would take those; names that only fold together are left
/// to the cases (arguments may hold them on purpose, to test the filter's refusal), and so is a
/// nesting deeper than the filter reads.
fn strict_json(text: &[u8]) -> Result<(), String> {
    use json::ParseErrorKind::{FoldedDuplicateKey, TooDeep};
    match json::parse(text) {
        Err(e) if !matches!(e.kind, FoldedDuplicateKey | TooDeep) => {
            Err(format!("not strict JSON: {}\n{}", textpos::describe(&e, text, ""), textpos::excerpt(text, e.offset)))
        }
        _ => Ok(()),
    }
}

/// `FILE: ` before each line of `message`.
fn prefixed(file: &str, message: &str) -> String {
    message.lines().map(|l| format!("{file}: {l}")).collect::<Vec<_>>().join("\n")
}

/// The filter's decision on one case; an error names the case's key that cannot be honoured.
fn run_case(set: &PolicySet, case: &Case, now: u64) -> Result<Actual, String> {
    let payload = match &case.claims {
        Some(claims) => {
            let text = serde_json::Value::Object(claims.clone()).to_string();
            Some(
                payload_of(&text, set)
                    .map_err(|_| "claims: the policy reads no claims (it has no gateway.identity)")?,
            )
        }
        None => None,
    };
    let grant = case.grant.as_deref().unwrap_or(DEFAULT_GRANT);
    let body = request_body(&case.call);
    let to = Target::default();
    let pins: Vec<(String, bool)> = case
        .state
        .as_ref()
        .map(|s| s.pins.iter().map(|(t, seen)| (t.clone(), *seen == spec::PinSeen::Matched)).collect())
        .unwrap_or_default();
    let caller = Caller { grant, payload: payload.as_deref(), marks: &[], pins: &pins };
    let store = MemoryStore::new();
    if let Some(state) = &case.state {
        // The policy the caller is attached to counts the prior calls: a first decision, on a
        // throwaway store, says which one it is.
        let (attached, _) = decide(set, body.as_bytes(), &caller, &to, &MemoryStore::new(), now);
        let attached = attached.ok_or("state.counters: the caller has no identity the filter reads")?;
        let id = grant_id(set, &attached.policy, grant, case.claims.as_ref())
            .ok_or("state.counters: the grant is not a credential the filter reads")?;
        let counted = prior::counted(&attached.policy, body.as_bytes());
        for (counter, calls) in &state.counters {
            prior::fill(&attached.policy, &counted, &store, &id, counter, calls, now)
                .map_err(|e| format!("state.counters.{counter}: {e}"))?;
        }
    }
    let (attached, outcome) = decide(set, body.as_bytes(), &caller, &to, &store, now);
    if let Some((t, _)) = pins.iter().find(|(t, _)| attached.as_ref().is_some_and(|a| a.policy.pin(t).is_none())) {
        return Err(format!("state.pins.{t}: the policy pins no tool of this name"));
    }
    // A call held until a person approves (the approval service is not asked) is what the filter
    // records while the service answers "pending".
    let (kind, reason) = shown(&outcome);
    Ok(Actual { kind, rule: outcome.decision.rule.clone(), reason: reason.cloned() })
}

/// The grant id the filter derives for the case: from the verified claim named by
/// `gateway.identity.grant_claim` when the policy reads identities, else from `grant` sent as the
/// policy's credential.
fn grant_id(
    set: &PolicySet,
    policy: &Policy,
    grant: &str,
    claims: Option<&serde_json::Map<String, serde_json::Value>>,
) -> Option<GrantId> {
    if let Some(identity) = &set.base().gateway.identity {
        let subject = claims?.get(&identity.grant_claim)?.as_str()?;
        return Some(Grant::from_credential(subject.as_bytes()).id);
    }
    let g = match &policy.gateway.grant {
        GrantSource::Bearer => grant::from_authorization(format!("Bearer {grant}").as_bytes()),
        GrantSource::Header(_) => grant::from_trusted_header(grant.as_bytes()),
    };
    g.map(|g| g.id)
}

pub(super) fn list(items: &[&str]) -> String {
    if items.is_empty() {
        "none".into()
    } else {
        items.join(", ")
    }
}

/// The JSON-RPC message of a call: a request with id 1, or a notification (`notifications/…`,
/// which carries no id).
fn request_body(call: &spec::Call) -> String {
    let mut msg = serde_json::Map::new();
    msg.insert("jsonrpc".into(), "2.0".into());
    if !call.method.as_deref().is_some_and(|m| m.starts_with("notifications/")) {
        msg.insert("id".into(), 1.into());
    }
    match (&call.tool, &call.method) {
        (Some(tool), _) => {
            msg.insert("method".into(), "tools/call".into());
            let mut params = serde_json::Map::new();
            params.insert("name".into(), tool.as_str().into());
            params.insert("arguments".into(), call.arguments.clone().unwrap_or_default().into());
            msg.insert("params".into(), params.into());
        }
        (None, method) => {
            msg.insert("method".into(), method.as_deref().unwrap_or_default().into());
            if let Some(p) = &call.params {
                msg.insert("params".into(), p.clone());
            }
        }
    }
    serde_json::Value::Object(msg).to_string()
}
