//! `mcp-policy check`: a policy loaded with the filter's own loader (also for `explain` and `apply`),
//! its one-line summary, the warnings a valid policy still deserves (`config::warnings`, also logged
//! by the filter at load), and the keys a policy names by environment variable.

use mcp_policy_core::config::{self, PolicySet};
use mcp_policy_core::identity::session::MIN_KEY_BYTES;
use mcp_policy_core::limits::Limit;
use mcp_policy_core::policy::{Policy, ToolRule};
use mcp_policy_core::terms::AuditMode;
use mcp_policy_core::terms::{Action, ApprovalMode, Mode};
use mcp_policy_core::wire::{fold, json, textpos};

use super::{read_input, Failure, Report, INVALID_POLICY, OK};

/// The value of a key the policy names by variable (`gateway.session_key.current_env`,
/// `previous_env`): this process's own variable when it is set; otherwise a stand-in of the least
/// length, one per name, so that the rest of the policy is still checked. The filter reads Envoy's
/// environment (native build) or the wasm VM's, not this one (`make reload` runs apart from Envoy),
/// and refuses the policy there when the variable is missing: [`unset_key_notes`] says so.
pub fn key_from_env(name: &str) -> Option<String> {
    std::env::var(name).ok().or_else(|| Some(format!("{name}={}", "-".repeat(MIN_KEY_BYTES))))
}

/// The environment variables the policy names for its session key: (`current_env` or
/// `previous_env`, the variable).
pub fn key_vars(bytes: &[u8]) -> Vec<(&'static str, String)> {
    let Ok(doc) = json::parse(bytes) else { return Vec::new() };
    let key = doc.get("gateway").and_then(|g| g.get("session_key"));
    ["current_env", "previous_env"]
        .into_iter()
        .filter_map(|member| {
            key.and_then(|k| k.get(member)).and_then(json::Json::as_str).map(|v| (member, v.to_owned()))
        })
        .collect()
}

/// One `FILE: note: …` line (for stderr) per key variable the policy names that is not set here,
/// so checked with a stand-in ([`key_from_env`]): a policy that checks fine here would stop Envoy
/// at startup were the variable missing there too.
pub fn unset_key_notes(path: &str, bytes: &[u8]) -> String {
    key_vars(bytes).into_iter().map(|(member, name)| unset_key_note(path, member, &name)).collect()
}

/// [`unset_key_notes`]' line for one variable, or nothing when it is set here.
pub fn unset_key_note(path: &str, member: &str, name: &str) -> String {
    if std::env::var_os(name).is_some() {
        return String::new();
    }
    format!(
        "{path}: note: gateway.session_key.{member}: {name} is not set here, so the key was checked as if \
         set; Envoy refuses the policy unless {name} is set where the filter reads it (the native build: \
         Envoy's own environment; the wasm build: its VM's, listed in \
         vm_config.environment_variables.host_env_keys)\n"
    )
}

/// The warnings of a valid policy or set, one `FILE: warning: …` line each (for stderr): the
/// filter's own (`config::warnings`, which it logs too), and entries of a policy's `tools` whose names
/// fold together.
pub fn warning_lines(path: &str, set: &PolicySet) -> String {
    let p = set.plain().unwrap_or_else(|| set.base());
    let mut out: String = config::warnings(p).map(|w| format!("{path}: warning: {w}\n")).collect();
    for member in set.members() {
        let at = member.name.as_ref().map_or_else(String::new, |n| format!("policies.{n}: "));
        for w in dead_rules(member) {
            out.push_str(&format!("{path}: warning: {at}{w}\n"));
        }
        for group in folded_siblings(member) {
            let mut names = String::new();
            for (i, n) in group.iter().enumerate() {
                if i > 0 {
                    names.push_str(", ");
                }
                json::write_str(&mut names, n);
            }
            out.push_str(&format!(
                "{path}: warning: {at}tools {names} fold to one name ('-' read as '_', surrounding spaces, case and \
                 Unicode forms): a server that folds names runs one tool, which each of these entries then lets \
                 through on its own terms; give the tool one entry\n"
            ));
        }
    }
    out
}

/// Is `bytes` a tests file (YAML or JSON: [`is_tests_file`])?
fn looks_like_tests(bytes: &[u8]) -> bool {
    serde_norway::from_slice::<serde_norway::Value>(bytes).is_ok_and(|doc| doc.as_mapping().is_some_and(is_tests_file))
}

/// Is the mapping `m` a tests file: `cases`, and no member of a policy's?
pub(crate) fn is_tests_file(m: &serde_norway::Mapping) -> bool {
    const POLICY_KEYS: [&str; 9] =
        ["version", "default", "hide", "all_tools", "tools", "pins", "default_for", "flows", "gateway"];
    m.contains_key("cases") && !POLICY_KEYS.iter().any(|k| m.contains_key(*k)) && !m.contains_key("policies")
}

/// Entries a valid policy holds that can never take effect, each as a warning: an allowed tool
/// that `hide` hides (hiding refuses every call) or whose name folds onto a denied tool's (the
/// filter refuses every such name), the `reason` of an allowed tool without an approval (no
/// refusal shows it), a denied tool's limits, conditions, approval, result rules and marks (its
/// calls are refused before any of them), and under `default: "deny"` a policy that allows no tool.
/// In dry run the filter forwards what it would refuse: no refusal makes a rule dead there.
fn dead_rules(policy: &Policy) -> Vec<String> {
    let mut out = Vec::new();
    // Pinned tools that a `default_for` rule may allow.
    let mut allows_one = policy.default_for_rules().iter().any(|d| d.action == Action::Allow);
    let mut names: Vec<&str> = policy.listed_tools().collect();
    names.sort_unstable();
    let denied: Vec<(&str, String)> = names
        .iter()
        .filter(|n| policy.tool_rule(n).is_some_and(|r| r.action == Action::Deny))
        .map(|n| (*n, fold::tool_key(n).into_owned()))
        .collect();
    for name in names {
        let Some(rule) = policy.tool_rule(name) else { continue };
        let enforced = policy.mode_for(Some(name)) == Mode::Enforce;
        let shown = quoted(name);
        match rule.action {
            Action::Allow if enforced && policy.is_hidden(name) => out.push(format!(
                "tools.{shown} allows a tool that `hide` hides: hiding refuses every call of it (take it out of \
                 one of the two)"
            )),
            Action::Allow => {
                let key = fold::tool_key(name);
                match denied.iter().find(|(d, k)| *d != name && *k == key) {
                    Some((d, _)) if enforced => out.push(format!(
                        "tools.{shown} folds onto tools.{}, which is denied: the filter refuses every name that \
                         folds onto a denied tool's, this one too",
                        quoted(d)
                    )),
                    _ => allows_one = true,
                }
                if rule.reason.is_some() && rule.approval.is_none() {
                    out.push(format!(
                        "tools.{shown}.reason: the tool is allowed, so no agent is shown it (a tool's reason is \
                         shown when it is denied or needs an approval; argument conditions take their own)"
                    ));
                }
                out.extend(unbinding_limits(policy, rule));
            }
            Action::Deny if enforced && rule.restricts_calls() => out.push(format!(
                "tools.{shown}: its action is deny, so its limits, conditions, approval, result rules and marks \
                 never apply (every call is refused first)"
            )),
            _ => {}
        }
    }
    if policy.default == Action::Deny && !allows_one && policy.gateway.mode == Mode::Enforce {
        out.push(
            "no tool is allowed: `default` is deny and no entry of `tools` allows one, so every tools/call is \
             refused (add an entry such as \"tools\": {\"list_vms\": {}})"
                .to_owned(),
        );
    }
    out
}

/// Of two limits a tool counts in one counter (its window, scope and algorithm), its own or
/// `all_tools`', the filter applies the smaller max: the larger of its own never binds.
fn unbinding_limits(policy: &Policy, rule: &ToolRule) -> Vec<String> {
    let own: Vec<&Limit> = rule.limits.iter().filter_map(|&i| policy.limits.get(i)).collect();
    let counted: Vec<&Limit> = own.iter().copied().chain(policy.all_tools_limits()).collect();
    own.iter()
        .filter_map(|l| {
            let smaller = counted.iter().find(|o| o.key_base() == l.key_base() && o.max < l.max)?;
            Some(format!(
                "{}: never binds: {} counts the same counter ({}, {}) with a smaller max",
                within_policy(policy, &l.path),
                within_policy(policy, &smaller.path),
                smaller.counter,
                smaller.window.name()
            ))
        })
        .collect()
}

/// `path` without the `policies.NAME.` of a member of a policy set (the warnings and errors that
/// name the member say it apart).
pub(crate) fn within_policy<'a>(policy: &Policy, path: &'a str) -> &'a str {
    policy
        .name
        .as_deref()
        .and_then(|n| path.strip_prefix("policies.")?.strip_prefix(n)?.strip_prefix('.'))
        .unwrap_or(path)
}

/// `name` as a JSON string, as the warnings show tool names.
fn quoted(name: &str) -> String {
    let mut shown = String::new();
    json::write_str(&mut shown, name);
    shown
}

/// The names of `tools` that fold together (`wire::fold::tool_key`), in groups of two or more, each
/// sorted. A group with an `action: "deny"` entry is left out: the filter refuses every name that
/// folds onto a denied tool's.
fn folded_siblings(policy: &Policy) -> Vec<Vec<&str>> {
    let mut by_key: std::collections::BTreeMap<String, Vec<&str>> = std::collections::BTreeMap::new();
    for name in policy.listed_tools() {
        by_key.entry(mcp_policy_core::wire::fold::tool_key(name).into_owned()).or_default().push(name);
    }
    let denied = |n: &&str| policy.tool_rule(n).is_some_and(|r| r.action == Action::Deny);
    by_key
        .into_values()
        .filter(|names| names.len() > 1 && !names.iter().any(denied))
        .map(|mut names| {
            names.sort_unstable();
            names
        })
        .collect()
}

/// Load a policy or a policy set with the filter's own loader; every error becomes one line naming
/// its JSON path.
pub fn load_policy(path: &str) -> Result<PolicySet, Failure> {
    let bytes = read_input(path)?;
    load_bytes(path, &bytes)
}

/// [`load_policy`] of text already read.
pub fn load_bytes(path: &str, bytes: &[u8]) -> Result<PolicySet, Failure> {
    load_bytes_with(path, bytes, &key_from_env)
}

/// [`load_bytes`] with the key variables read through `env` (a wasm VM's `key_values`, else
/// [`key_from_env`]).
pub fn load_bytes_with(path: &str, bytes: &[u8], env: &dyn Fn(&str) -> Option<String>) -> Result<PolicySet, Failure> {
    let bytes = bytes.to_vec();
    config::load_set_with_env(&bytes, env).map_err(|errors| {
        let mut lines: Vec<String> = errors.0.iter().map(|e| format!("{path}: {e}")).collect();
        // A syntax error: show the line and a caret under the column.
        // Data after the value: first where the document closed (usually the mistake), then what follows.
        // Two names that clash: the error names the object that holds them; show the two names instead.
        if let Err(e) = json::parse(&bytes) {
            if let (json::ParseErrorKind::TrailingData, Some(close)) = (e.kind, textpos::value_end(&bytes, e.offset)) {
                lines.push(textpos::excerpt(&bytes, close));
            }
            match json::repeated_name(&bytes, &e) {
                Some((repeat, earlier)) => {
                    let again = if e.kind == json::ParseErrorKind::DuplicateKey {
                        "again in the same object"
                    } else {
                        "the same name once folded (case; invisible, unassigned and private-use characters)"
                    };
                    lines.push(format!("{} this name", textpos::excerpt(&bytes, earlier)));
                    lines.push(format!("{} {again}", textpos::excerpt(&bytes, repeat)));
                }
                None => lines.push(textpos::excerpt(&bytes, e.offset)),
            }
        }
        let doc = json::parse(&bytes).ok();
        if doc.as_ref().is_some_and(|d| d.get("jsonrpc").is_some()) {
            lines.push(format!(
                "{path}: this is a JSON-RPC message, not a policy (explain and test take the policy \
                 first: mcp-policy explain POLICY.json REQUEST.json)"
            ));
        } else if looks_like_tests(&bytes) {
            lines.push(format!(
                "{path}: this is a tests file, not a policy (mcp-policy test POLICY.json TESTS takes the policy first)"
            ));
        }
        Failure { status: INVALID_POLICY, message: lines.join("\n") }
    })
}

fn plural(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

fn action_name(a: Action) -> &'static str {
    match a {
        Action::Allow => "allow",
        Action::Deny => "deny",
    }
}

/// One line describing a loaded policy.
fn summary(p: &Policy) -> String {
    let mut s = format!(
        "ok: version 1, default {}, {}, {}",
        action_name(p.default),
        plural(p.listed_tools().count(), "tool rule", "tool rules"),
        plural(p.limits.len(), "limit", "limits"),
    );
    let pinned = p.pinned_tools().count();
    if pinned > 0 {
        s.push_str(&format!(", {}", plural(pinned, "pinned unlisted tool", "pinned unlisted tools")));
    }
    if p.has_default_for() {
        s.push_str(&format!(", {}", plural(p.default_for_rules().len(), "default_for rule", "default_for rules")));
    }
    if !p.gateway.grants.is_empty() {
        s.push_str(&format!(", {}", plural(p.gateway.grants.len(), "registered grant", "registered grants")));
    }
    let approvals = p.approval_tools().count();
    if let (true, Some(svc)) = (approvals > 0, &p.gateway.approval) {
        let mode = match svc.mode {
            ApprovalMode::Retry => "retry",
            ApprovalMode::Hold => "hold",
        };
        s.push_str(&format!(
            ", {} approval (cluster {}, mode {mode})",
            plural(approvals, "tool requires", "tools require"),
            svc.cluster
        ));
    }
    if p.gateway.mode == Mode::DryRun {
        s.push_str(", mode dry_run");
    }
    let dry_tools = p.gateway.tool_modes.values().filter(|m| **m == Mode::DryRun).count();
    if dry_tools > 0 {
        s.push_str(&format!(", {} in dry_run", plural(dry_tools, "tool", "tools")));
    }
    // Where decisions are recorded, when it is not the default: an operator reading the access log
    // should learn here why its mcp_* fields print `-`.
    match p.gateway.audit {
        AuditMode::Log => {}
        AuditMode::AccessLog => s.push_str(", audit access_log"),
        AuditMode::Off => s.push_str(", audit off"),
    }
    if !p.gateway.filter_state {
        s.push_str(", no filter state (the access log's mcp_* fields print -)");
    }
    s
}

/// One line describing a loaded policy set, then one per member.
fn set_summary(set: &PolicySet) -> String {
    let mut s = format!(
        "ok: version 1, policy set of {}, {}",
        plural(set.members().len(), "policy", "policies"),
        plural(set.rules().len(), "attach rule", "attach rules"),
    );
    if !set.contained().is_empty() {
        s.push_str(&format!(", {} contained", plural(set.contained().len(), "identity", "identities")));
    }
    if let Some(i) = &set.base().gateway.identity {
        s.push_str(&format!(", identity from {} (grant claim {})", i.payload_header, i.grant_claim));
    }
    for m in set.members() {
        let body = summary(m);
        s.push_str(&format!(
            "\n  policies.{}: {}",
            m.name.as_deref().unwrap_or("-"),
            body.trim_start_matches("ok: version 1, ")
        ));
    }
    s
}

/// The summary of a loaded policy or policy set: one line, and one more per member of a set.
pub fn summary_of(set: &PolicySet) -> String {
    match set.plain() {
        Some(p) => summary(p),
        None => set_summary(set),
    }
}

/// `check FILE...`: a summary line per valid policy (stdout) and its warnings (stderr); every error
/// of an invalid one (stderr).
pub fn check(files: &[String]) -> Result<Report, Failure> {
    let mut report = Report { stdout: String::new(), stderr: String::new(), status: OK };
    for file in files {
        let bytes = match read_input(file) {
            Ok(bytes) => bytes,
            Err(f) => {
                report.fail(&f.message, f.status);
                continue;
            }
        };
        match super::bootstrap::envoy_config(file, &bytes) {
            Ok(Some(doc)) => {
                super::bootstrap::check(file, &doc, &mut report);
                continue;
            }
            Ok(None) => {}
            Err(why) => {
                report.fail(&why, INVALID_POLICY);
                continue;
            }
        }
        match load_bytes(file, &bytes) {
            Ok(set) => {
                report.stdout.push_str(&format!("{file}: {}\n", summary_of(&set)));
                report.stderr.push_str(&warning_lines(file, &set));
                report.stderr.push_str(&unset_key_notes(file, &bytes));
            }
            Err(f) => report.fail(&f.message, f.status),
        }
    }
    Ok(report)
}
