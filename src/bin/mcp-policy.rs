//! `mcp-policy`: check a policy file, explain what the filter would do with a request, and print the
//! policy's JSON Schema. It runs the filter's own code: `config::load` reads the policy exactly as
//! `on_configure` does, and `gate::on_headers` / `gate::on_body` decide the request exactly as the
//! filter does in Envoy (with a fresh in-memory rate-limit store and the current time).

use std::io::{Read, Write};
use std::process::ExitCode;
use std::time::{SystemTime, UNIX_EPOCH};

use mcp_policy_filter::config::{self, PolicySpec};
use mcp_policy_filter::gate::{self, HeadOutcome, Outcome, RequestHead};
use mcp_policy_filter::policy::{Action, ApprovalMode, GrantSource, Mode, Policy};
use mcp_policy_filter::ratelimit::MemoryStore;

const USAGE: &str = "\
mcp-policy: check and explain mcp-policy-filter policies (PolicyLayer policy.json)

Usage:
  mcp-policy check POLICY.json...
  mcp-policy explain POLICY.json REQUEST.json [--grant LABEL]
  mcp-policy schema
  mcp-policy --help | --version

Commands:
  check    Load each policy exactly as the Envoy filter does. Prints a one-line summary per valid
           file; for an invalid one prints every error, one per line, as
           `FILE: invalid policy at JSON.PATH: MESSAGE` (on stderr).
  explain  Decide REQUEST.json, a JSON-RPC body as an agent would POST it (`-` reads standard
           input), under POLICY.json, with the filter's own decision code. The request is a POST
           with `content-type: application/json` and the grant below. Prints the decision, the rule
           that decided it, the reason, the HTTP status the agent would get and the reply body.
           Rate limits start from empty counters, as in a freshly started Envoy. A tool with
           `require_approval` shows the approval key the filter would send to the approval service
           (the call waits for a person's decision; explain does not contact the service).
  schema   Print the JSON Schema of the policy file (generated from the filter's config types).

Options:
  --grant LABEL  The agent's credential (default `cli`): sent as `Authorization: Bearer LABEL`, or
                 as the value of `gateway.grant_header` when the policy sets one. It only changes
                 the decision when the policy lists `gateway.grants`: then LABEL must be a token
                 whose SHA-256 is listed, else the agent gets 401. The grant is shown as
                 `sha256:` plus 12 hex digits, or as its registered label.

Exit status:
  0  check: every policy is valid; explain: the request would be forwarded to the MCP server
  1  a policy is invalid
  2  usage error, or a file cannot be read
  3  explain: the filter would refuse the request (it answers the agent itself)
  4  explain: the request would be held until a person approves it (require_approval)
";

/// Exit statuses (see `USAGE`).
const OK: u8 = 0;
const INVALID_POLICY: u8 = 1;
const USAGE_OR_IO: u8 = 2;
const REFUSED: u8 = 3;
const NEEDS_APPROVAL: u8 = 4;

/// A failure that ends the command: the message for stderr and the exit status.
struct Failure {
    status: u8,
    message: String,
}

/// What a command prints, and its exit status.
struct Report {
    stdout: String,
    stderr: String,
    status: u8,
}

impl Report {
    fn out(stdout: String, status: u8) -> Self {
        Report { stdout, stderr: String::new(), status }
    }
}

fn usage_error(message: impl Into<String>) -> Failure {
    Failure { status: USAGE_OR_IO, message: format!("mcp-policy: {}\nusage: see `mcp-policy --help`", message.into()) }
}

fn read_input(path: &str) -> Result<Vec<u8>, Failure> {
    let read = if path == "-" {
        let mut buf = Vec::new();
        std::io::stdin().read_to_end(&mut buf).map(|_| buf)
    } else {
        std::fs::read(path)
    };
    read.map_err(|e| Failure { status: USAGE_OR_IO, message: format!("mcp-policy: cannot read {path}: {e}") })
}

/// Load a policy with the filter's own loader; every error becomes one line naming its JSON path.
fn load_policy(path: &str) -> Result<Policy, Failure> {
    let bytes = read_input(path)?;
    config::load(&bytes).map_err(|errors| {
        let lines: Vec<String> = errors.0.iter().map(|e| format!("{path}: {e}")).collect();
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
    s
}

fn check(files: &[String]) -> Result<Report, Failure> {
    if files.is_empty() {
        return Err(usage_error("check needs at least one POLICY.json"));
    }
    if let Some(opt) = files.iter().find(|f| f.starts_with("--")) {
        return Err(usage_error(format!("unknown option {opt}")));
    }
    let mut report = Report { stdout: String::new(), stderr: String::new(), status: OK };
    for file in files {
        match load_policy(file) {
            Ok(p) => report.stdout.push_str(&format!("{file}: {}\n", summary(&p))),
            Err(f) => {
                report.stderr.push_str(&f.message);
                report.stderr.push('\n');
                report.status = report.status.max(f.status);
            }
        }
    }
    Ok(report)
}

fn now_ms() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX)).unwrap_or(0)
}

/// Run the filter's decision path on one POST.
fn decide(policy: &Policy, body: &[u8], grant: &str) -> Outcome {
    let credential = match &policy.gateway.grant {
        GrantSource::Bearer => ("authorization", format!("Bearer {grant}")),
        GrantSource::Header(h) => (h.as_str(), grant.to_owned()),
    };
    let headers: [(&str, &[u8]); 3] =
        [(":method", b"POST"), ("content-type", b"application/json"), (credential.0, credential.1.as_bytes())];
    let head = RequestHead::from_headers(policy, headers);
    match gate::on_headers(policy, &head) {
        HeadOutcome::Done(outcome) => *outcome,
        HeadOutcome::NeedBody => gate::on_body(policy, &head, body, &MemoryStore::new(), now_ms()),
    }
}

fn explain(args: &[String]) -> Result<Report, Failure> {
    let mut files = Vec::new();
    let mut grant: Option<String> = None;
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--grant" => match it.next() {
                Some(g) if grant.is_none() => grant = Some(g.clone()),
                Some(_) => return Err(usage_error("--grant given twice")),
                None => return Err(usage_error("--grant needs a value")),
            },
            s if s.starts_with("--grant=") => {
                if grant.replace(s.trim_start_matches("--grant=").to_owned()).is_some() {
                    return Err(usage_error("--grant given twice"));
                }
            }
            s if s.starts_with("--") => return Err(usage_error(format!("unknown option {s}"))),
            _ => files.push(a.clone()),
        }
    }
    let [policy_file, request_file] = files.as_slice() else {
        return Err(usage_error("explain needs POLICY.json and REQUEST.json"));
    };
    let grant = grant.unwrap_or_else(|| "cli".to_owned());
    if grant.is_empty() || grant.bytes().any(|b| b.is_ascii_control()) {
        return Err(usage_error("--grant must be non-empty, without control characters"));
    }
    let policy = load_policy(policy_file)?;
    let body = read_input(request_file)?;
    let outcome = decide(&policy, &body, &grant);
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
    if let Some(kind) = d.error_kind {
        lines.push(("error", kind.to_owned()));
    }
    match &o.reply {
        None if o.approval.is_some() => {
            let cluster = policy.gateway.approval.as_ref().map_or("-", |a| a.cluster.as_str());
            if let Some(p) = &o.approval {
                lines.push(("approval", format!("required, key {}", p.key)));
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

fn schema() -> Result<String, Failure> {
    let mut schema = schemars::schema_for!(PolicySpec);
    schema.insert("title".into(), "mcp-policy-filter policy.json".into());
    serde_json::to_string_pretty(&schema)
        .map(|s| s + "\n")
        .map_err(|e| Failure { status: USAGE_OR_IO, message: format!("mcp-policy: cannot render the schema: {e}") })
}

fn run(args: &[String]) -> Result<Report, Failure> {
    let Some((command, rest)) = args.split_first() else {
        return Err(Failure { status: USAGE_OR_IO, message: USAGE.trim_end().to_owned() });
    };
    let help = rest.iter().any(|a| a == "-h" || a == "--help");
    match command.as_str() {
        "-h" | "--help" | "help" => Ok(Report::out(USAGE.to_owned(), OK)),
        "-V" | "--version" => Ok(Report::out(format!("mcp-policy {}\n", mcp_policy_filter::VERSION), OK)),
        "check" | "explain" | "schema" if help => Ok(Report::out(USAGE.to_owned(), OK)),
        "check" => check(rest),
        "explain" => explain(rest),
        "schema" if rest.is_empty() => schema().map(|out| Report::out(out, OK)),
        "schema" => Err(usage_error("schema takes no arguments")),
        other => Err(usage_error(format!("unknown command {other:?}"))),
    }
}

/// Arguments as UTF-8 strings: a path that is not UTF-8 is a usage error, not a panic.
fn args() -> Result<Vec<String>, Failure> {
    std::env::args_os()
        .skip(1)
        .map(|a| a.into_string().map_err(|a| usage_error(format!("argument {a:?} is not valid UTF-8"))))
        .collect()
}

fn main() -> ExitCode {
    let report = args().and_then(|a| run(&a)).unwrap_or_else(|f| Report {
        stdout: String::new(),
        stderr: f.message + "\n",
        status: f.status,
    });
    // Write errors (e.g. a closed pipe) must not panic; they end the command with status 2.
    let out = std::io::stdout().lock().write_all(report.stdout.as_bytes());
    let err = std::io::stderr().lock().write_all(report.stderr.as_bytes());
    if out.is_err() || err.is_err() {
        return ExitCode::from(USAGE_OR_IO);
    }
    ExitCode::from(report.status)
}
