//! `mcp-policy contain` and `release`: cut one identity of a policy set off, or restore it, by
//! editing the set's `contain` list; the edited set is checked with the filter's own loader before
//! it is written, and with `--ecds` put live as `apply` does (`make reload`'s way).
//!
//! The file is read with the filter's strict parser, which keeps members in their order, and
//! written back pretty-printed: numbers keep their exact text.

use std::path::Path;

use mcp_policy_core::wire::json::{self, Json};

use super::apply::{self, Target};
use super::args::ContainArgs;
use super::check::load_bytes;
use super::{read_input, usage_error, Failure, Report, OK, USAGE_OR_IO};

/// Write `v` with two-space indents; an array or object that fits in the line stays on one line.
fn pretty(out: &mut String, v: &Json, indent: usize) {
    let mut flat = String::new();
    json::write(&mut flat, v);
    let nested = matches!(v, Json::Array(items) if !items.is_empty()) || matches!(v, Json::Object(m) if !m.is_empty());
    if !nested || indent + flat.len() <= 96 {
        out.push_str(&flat);
        return;
    }
    let pad = " ".repeat(indent + 2);
    match v {
        Json::Object(members) => {
            out.push_str("{\n");
            for (i, (k, x)) in members.iter().enumerate() {
                out.push_str(&pad);
                json::write_str(out, k);
                out.push_str(": ");
                pretty(out, x, indent + 2);
                out.push_str(if i + 1 < members.len() { ",\n" } else { "\n" });
            }
            out.push_str(&" ".repeat(indent));
            out.push('}');
        }
        Json::Array(items) => {
            out.push_str("[\n");
            for (i, x) in items.iter().enumerate() {
                out.push_str(&pad);
                pretty(out, x, indent + 2);
                out.push_str(if i + 1 < items.len() { ",\n" } else { "\n" });
            }
            out.push_str(&" ".repeat(indent));
            out.push(']');
        }
        _ => out.push_str(&flat),
    }
}

/// `--claim NAME=VALUE ...` as the matchers of a `contain` entry.
fn matchers(claims: &[String], command: &str) -> Result<Json, Failure> {
    let mut out = Vec::new();
    for c in claims {
        match c.split_once('=') {
            Some((name, value)) if !name.is_empty() => out.push(Json::Object(vec![
                ("claim".to_owned(), Json::String(name.to_owned())),
                ("equals".to_owned(), Json::String(value.to_owned())),
            ])),
            _ => return Err(usage_error(command, "--claim must be NAME=VALUE, e.g. --claim sub=alice")),
        }
    }
    Ok(Json::Array(out))
}

/// The edited document: `contain` with the entry for `when` added (or its reason replaced), or
/// without it (`reason` None: release). `Err` when a release finds no such entry.
fn edit(members: &mut Vec<(String, Json)>, when: Json, reason: Option<&str>) -> Result<(), String> {
    let at = match members.iter().position(|(k, _)| k == "contain") {
        Some(i) => i,
        None => {
            let before_gateway = members.iter().position(|(k, _)| k == "gateway").unwrap_or(members.len());
            members.insert(before_gateway, ("contain".to_owned(), Json::Array(Vec::new())));
            before_gateway
        }
    };
    let Some((_, Json::Array(entries))) = members.get_mut(at) else {
        return Err("`contain` is not a list".to_owned());
    };
    let same = |e: &Json| e.get("when") == Some(&when);
    match reason {
        Some(reason) => {
            let entry = Json::Object(vec![
                ("when".to_owned(), when.clone()),
                ("reason".to_owned(), Json::String(reason.to_owned())),
            ]);
            match entries.iter_mut().find(|e| same(e)) {
                Some(e) => *e = entry,
                None => entries.push(entry),
            }
        }
        None => {
            let before = entries.len();
            entries.retain(|e| !same(e));
            if entries.len() == before {
                return Err("no contain entry has exactly these matchers; nothing to release".to_owned());
            }
            if entries.is_empty() {
                members.remove(at);
            }
        }
    }
    Ok(())
}

/// `contain` (`containing`) or `release` one identity.
pub fn command(args: &ContainArgs, containing: bool) -> Result<Report, Failure> {
    let name = if containing { "contain" } else { "release" };
    let reason = match (&args.reason, containing) {
        (Some(r), true) if !r.trim().is_empty() => Some(r.as_str()),
        (_, true) => return Err(usage_error(name, "--reason is required: the agent is shown it")),
        (Some(_), false) => return Err(usage_error(name, "--reason is for contain only")),
        (None, false) => None,
    };
    let when = matchers(&args.claims, name)?;
    let file = &args.policy;
    let bytes = read_input(file)?;
    // The set must be valid before the edit too: an edit never hides an earlier mistake.
    load_bytes(file, &bytes)?;
    let Ok(Json::Object(mut members)) = json::parse(&bytes) else {
        return Err(Failure { status: USAGE_OR_IO, message: format!("{file}: not a JSON object") });
    };
    if !members.iter().any(|(k, _)| k == "policies") {
        return Err(Failure {
            status: USAGE_OR_IO,
            message: format!("{file}: {name} edits a policy set (a file with `policies`, see the Many agents chapter)"),
        });
    }
    edit(&mut members, when, reason).map_err(|m| Failure { status: USAGE_OR_IO, message: format!("{file}: {m}") })?;
    let mut text = String::new();
    pretty(&mut text, &Json::Object(members), 0);
    text.push('\n');
    load_bytes(file, text.as_bytes()).map_err(|f| Failure {
        status: f.status,
        message: format!("{}\n{file}: not written: the edited set would be invalid", f.message),
    })?;
    let target = Path::new(file);
    let tmp = target.with_extension("json.tmp");
    std::fs::write(&tmp, &text)
        .and_then(|()| std::fs::rename(&tmp, target))
        .map_err(|e| Failure { status: USAGE_OR_IO, message: format!("mcp-policy: cannot write {file}: {e}") })?;
    let done = if containing { "contained" } else { "released" };
    let mut out = format!("{file}: {done}: {}\n", args.claims.join(" "));
    let mut warnings = String::new();
    if let Some(ecds) = &args.ecds {
        let t = Target { ecds: Path::new(ecds), admin: Some(&args.admin), envoy_log: None, timeout: args.timeout };
        match apply::apply(&text, &t) {
            Ok(done) => {
                out.push_str(&format!("{file}: {}\n", done.line));
                warnings = done.warning_lines(file);
            }
            Err(e) => return Err(Failure { status: e.status, message: format!("{out}{file}: {}", e.message) }),
        }
    }
    Ok(Report { stdout: out, stderr: warnings, status: OK })
}
