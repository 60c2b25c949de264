//! `mcp-policy`: check a policy file, explain what the filter would do with a request, and print the
//! policy's JSON Schema. It runs the filter's own code: `config::load` reads the policy exactly as
//! `on_configure` does, and `gate::on_headers` / `gate::on_body` decide the request exactly as the
//! filter does in Envoy (with a fresh in-memory rate-limit store and the current time).

use std::io::{Read, Write};
use std::path::Path;
use std::process::ExitCode;
use std::time::Duration;

mod apply;
mod check;
mod explain;
mod grant_id;

use check::{check, key_from_env, warning_lines};
use mcp_policy_filter::audit::AuditMode;
use mcp_policy_filter::config::{self, PolicySpec};
use mcp_policy_filter::policy::{Action, ApprovalMode, Mode, Policy};
use mcp_policy_filter::{json, textpos};

const USAGE: &str = "\
mcp-policy: check and explain mcp-policy-filter policies (PolicyLayer policy.json)

Usage:
  mcp-policy check POLICY.json...
  mcp-policy explain POLICY.json REQUEST.json [--grant LABEL]
                     [--cluster NAME] [--authority HOST] [--path PATH]
  mcp-policy apply POLICY.json [--ecds FILE] [--admin URL] [--envoy-log FILE] [--timeout SECONDS]
                   [--no-check] [--no-wait]
  mcp-policy grant-id [--header] [--label LABEL]   (reads the token from standard input)
  mcp-policy schema
  mcp-policy --help | --version

Commands:
  check    Load each policy exactly as the Envoy filter does. Prints a one-line summary per valid
           file, and on stderr what a valid one should still change, as `FILE: warning: ...` (the
           filter logs the same at load: sessions left unbound without gateway.session_key); for an
           invalid one prints every error, one per line, as
           `FILE: invalid policy at JSON.PATH: MESSAGE` (on stderr). A JSON syntax error gives its
           line and column and shows the line with a caret under the column. A key named by variable
           (session_key.current_env) is read from this environment when set here, else checked as
           if set: the filter reads the wasm VM's environment.
  explain  Decide REQUEST.json, a JSON-RPC body as an agent would POST it (`-` reads standard
           input), under POLICY.json, with the filter's own decision code. The request is a POST
           with `content-type: application/json` and the grant below. Prints the decision, the rule
           that decided it, the reason, the HTTP status the agent would get and the reply body.
           Rate limits start from empty counters, as in a freshly started Envoy. A tool with
           `require_approval` shows the approval key the filter would send to the approval service
           (the call waits for a person's decision; explain does not contact the service).
  schema   Print the JSON Schema of the policy file (generated from the filter's config types).
  apply    Put POLICY.json live in a running Envoy that reads the filter's configuration through
           ECDS from a file (envoy/envoy-ecds.yaml; `make reload` runs this for `make run`).
           Checks the policy as `check` does (an invalid one is never written), writes it into the
           ECDS file (--ecds, default .run/mcp_policy.yaml) by an atomic rename, then reads Envoy's
           stats update_success / update_rejected from the admin endpoint (--admin, default
           http://127.0.0.1:9901) and prints `applied` only once Envoy loaded it; if Envoy refused
           it, prints `rejected`, and the lines Envoy logged about it when --envoy-log names its log.
           --timeout (default 10) bounds the wait in seconds; --no-check sends the policy to Envoy
           even if the local check fails (Envoy's filter decides); --no-wait only writes the file
           (before Envoy starts).
  grant-id Print the grant id of a token read from standard input (one trailing newline is
           dropped): the SHA-256 in hex that `gateway.grants[].sha256` lists. The token stays out of
           the shell history and the process list. A bearer token's trailing `=` padding is ignored,
           as the filter does; with --header the value of `gateway.grant_header` is hashed instead
           (surrounding whitespace trimmed). --label LABEL prints the `gateway.grants` entry.

Options:
  --grant LABEL  The agent's credential (default `cli`): sent as `Authorization: Bearer LABEL`, or
                 as the value of `gateway.grant_header` when the policy sets one. It only changes
                 the decision when the policy lists `gateway.grants`: then LABEL must be a token
                 whose SHA-256 is listed, else the agent gets 401. The grant is shown as
                 `sha256:` plus 12 hex digits, or as its registered label.
  --cluster NAME, --authority HOST, --path PATH
                 The MCP server the request goes to, which an approval is bound to: the Envoy
                 cluster its route chooses (default `mcp_upstream`), its `:authority` (default
                 `127.0.0.1:10000`) and `:path` (default `/mcp`), as in envoy/envoy.yaml.

Exit status:
  0  check: every policy is valid; explain: the request would be forwarded to the MCP server
  1  a policy is invalid
  2  usage error, or a file cannot be read
  3  explain: the filter would refuse the request (it answers the agent itself)
  4  explain: the request would be held until a person approves it (require_approval)
  5  apply: Envoy refused the policy, or did not confirm it in time (the previous one serves)
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
    config::load_with_env(&bytes, &key_from_env).map_err(|errors| {
        let mut lines: Vec<String> = errors.0.iter().map(|e| format!("{path}: {e}")).collect();
        // A syntax error: show the line and a caret under the column.
        // Data after the value: first where the document closed (usually the mistake), then what follows.
        if let Err(e) = json::parse(&bytes) {
            if let (json::ParseErrorKind::TrailingData, Some(close)) = (e.kind, textpos::value_end(&bytes, e.offset)) {
                lines.push(textpos::excerpt(&bytes, close));
            }
            lines.push(textpos::excerpt(&bytes, e.offset));
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

fn apply(args: &[String]) -> Result<Report, Failure> {
    let mut policy_file = None;
    let (mut ecds, mut admin, mut log, mut timeout) = (None, None, None, None);
    let (mut check, mut wait) = (true, true);
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let (flag, inline) = match a.split_once('=') {
            Some((f, v)) if f.starts_with("--") => (f, Some(v.to_owned())),
            _ => (a.as_str(), None),
        };
        let slot = match flag {
            "--no-check" => {
                check = false;
                continue;
            }
            "--no-wait" => {
                wait = false;
                continue;
            }
            "--ecds" => &mut ecds,
            "--admin" => &mut admin,
            "--envoy-log" => &mut log,
            "--timeout" => &mut timeout,
            s if s.starts_with("--") => return Err(usage_error(format!("unknown option {s}"))),
            _ if policy_file.is_none() => {
                policy_file = Some(a.clone());
                continue;
            }
            _ => return Err(usage_error("apply takes one POLICY.json")),
        };
        let value =
            inline.or_else(|| it.next().cloned()).ok_or_else(|| usage_error(format!("{flag} needs a value")))?;
        if slot.replace(value).is_some() {
            return Err(usage_error(format!("{flag} given twice")));
        }
    }
    let policy_file = policy_file.ok_or_else(|| usage_error("apply needs POLICY.json"))?;
    let timeout = match timeout {
        None => Duration::from_secs(10),
        Some(t) => match t.parse::<f64>() {
            Ok(s) if s.is_finite() && s > 0.0 && s <= 3600.0 => Duration::from_secs_f64(s),
            _ => return Err(usage_error(format!("--timeout {t:?}: expected seconds, above 0, at most 3600"))),
        },
    };
    let bytes = read_input(&policy_file)?;
    let mut warnings = String::new();
    if check {
        let policy = load_policy(&policy_file).map_err(|f| Failure {
            status: f.status,
            message: format!("{}\nnot applied: the ECDS file is unchanged and Envoy keeps its policy", f.message),
        })?;
        warnings = warning_lines(&policy_file, &policy);
    }
    let text = String::from_utf8(bytes)
        .map_err(|_| Failure { status: INVALID_POLICY, message: format!("{policy_file}: not UTF-8; not applied") })?;
    let ecds = ecds.unwrap_or_else(|| ".run/mcp_policy.yaml".to_owned());
    let admin = admin.unwrap_or_else(|| "http://127.0.0.1:9901".to_owned());
    let target = apply::Target {
        ecds: Path::new(&ecds),
        admin: wait.then_some(admin.as_str()),
        envoy_log: log.as_deref().map(Path::new),
        timeout,
    };
    match apply::apply(&text, &target) {
        Ok(line) => Ok(Report { stdout: format!("{policy_file}: {line}\n"), stderr: warnings, status: OK }),
        Err(e) if e.message.starts_with("mcp-policy:") => Err(Failure { status: e.status, message: e.message }),
        Err(e) => Err(Failure { status: e.status, message: format!("{policy_file}: {}", e.message) }),
    }
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
        "check" | "explain" | "schema" | "apply" | "grant-id" if help => Ok(Report::out(USAGE.to_owned(), OK)),
        "check" => check(rest),
        "explain" => explain::explain(rest),
        "apply" => apply(rest),
        "grant-id" => {
            let mut stdin = Vec::new();
            std::io::stdin().read_to_end(&mut stdin).map_err(|e| Failure {
                status: USAGE_OR_IO,
                message: format!("mcp-policy: cannot read the token: {e}"),
            })?;
            grant_id::run(rest, &stdin)
                .map(|out| Report::out(out, OK))
                .map_err(|m| Failure { status: USAGE_OR_IO, message: format!("mcp-policy: {m}") })
        }
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
