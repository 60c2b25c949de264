//! The command line: commands, options, defaults and their help. What each command does is in its
//! own module; this one only reads the arguments.
//!
//! The help texts are wrapped by hand (`verbatim_doc_comment`): clap wraps only with its
//! `wrap_help` feature, which would change the services' help too (one clap build serves all).
//! Option help lines stay within 72 columns, command help within 96, so `--help` fits 100. An
//! option's default is written in its help, where `-h` keeps it within those columns (a test checks
//! that each one is there).

use std::time::Duration;

use clap::{Args, Parser, Subcommand};

/// Every exit status, for `mcp-policy --help`; each command's help lists its own.
const EXIT_STATUSES: &str = "\
Exit status:
  0  check: every policy is valid; explain: the request would be forwarded to the MCP server;
     apply: Envoy loaded the policy
  1  a policy is invalid
  2  usage error, or a file cannot be read
  3  explain: the filter would refuse the request (it answers the agent itself)
  4  explain: the request would be held until a person approves it (require_approval)
  5  apply: Envoy refused the policy, or did not confirm it in time (the previous one serves)";

/// Check and explain mcp-policy-filter policies (PolicyLayer policy.json)
///
/// Runs the filter's own code: a policy is read exactly as the filter reads it in Envoy, and a
/// request is decided exactly as the filter decides it.
#[derive(Parser, Debug)]
#[command(name = "mcp-policy", bin_name = "mcp-policy", version = mcp_policy_core::VERSION)]
#[command(verbatim_doc_comment, arg_required_else_help = true, after_help = EXIT_STATUSES)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Check policies: load each one exactly as the Envoy filter does
    ///
    /// Prints a one-line summary per valid file, and on stderr what a valid one should still
    /// change, as `FILE: warning: ...` (the filter logs the same at load: sessions left unbound
    /// without gateway.session_key). For an invalid one prints every error, one per line, as
    /// `FILE: invalid policy at JSON.PATH: MESSAGE` (on stderr). A JSON syntax error gives its
    /// line and column and shows the line with a caret under the column.
    ///
    /// A key named by variable (session_key.current_env) is read from this environment when set
    /// here, else checked as if set: the filter reads the wasm VM's environment.
    #[command(verbatim_doc_comment)]
    #[command(after_help = "\
Exit status:
  0  every policy is valid
  1  a policy is invalid
  2  usage error, or a file cannot be read")]
    Check {
        /// The policy files (`-` reads standard input)
        #[arg(value_name = "POLICY.json", required = true)]
        files: Vec<String>,
    },
    /// Decide a request with the filter's own code, and say why
    ///
    /// Decides REQUEST.json, a JSON-RPC body as an agent would POST it, under POLICY.json. The
    /// request is a POST with `content-type: application/json` and the grant of --grant, to the
    /// MCP server of --cluster, --authority and --path. Prints the decision, the rule that decided
    /// it, the reason, the HTTP status the agent would get and the reply body.
    ///
    /// Rate limits start from empty counters, as in a freshly started Envoy. A tool with
    /// `require_approval` shows the approval key the filter would send to the approval service
    /// (the call waits for a person's decision; explain does not contact the service).
    #[command(verbatim_doc_comment)]
    #[command(after_help = "\
Exit status:
  0  the request would be forwarded to the MCP server (also in dry run)
  1  the policy is invalid
  2  usage error, or a file cannot be read
  3  the filter would refuse the request (it answers the agent itself)
  4  the request would be held until a person approves it (require_approval)")]
    Explain(ExplainArgs),
    /// Put a policy live in a running Envoy, through the ECDS file it reads
    ///
    /// For an Envoy that reads the filter's configuration through ECDS from a file
    /// (envoy/envoy-ecds.yaml; `make reload` runs this for `make run`). Checks the policy as
    /// `check` does (an invalid one is never written), writes it into the ECDS file by an atomic
    /// rename, then reads Envoy's stats update_success / update_rejected from the admin endpoint
    /// and prints `applied` only once Envoy loaded it. If Envoy refused it, prints `rejected` with
    /// what the filter's own check says of the policy, and the lines Envoy logged about it when
    /// --envoy-log names its log.
    #[command(verbatim_doc_comment)]
    #[command(after_help = "\
Exit status:
  0  Envoy loaded the policy (with --no-wait: the ECDS file is written)
  1  the policy is invalid: nothing is written
  2  usage error, a file cannot be read or written, or Envoy's admin endpoint does not answer
     (nothing is written)
  5  Envoy refused the policy, or did not confirm it in time (the previous one serves)")]
    Apply(ApplyArgs),
    /// Print the grant id of a token read from standard input
    ///
    /// The grant id is the SHA-256 in hex that `gateway.grants[].sha256` lists. One trailing
    /// newline is dropped, and a bearer token's trailing `=` padding is ignored, as the filter
    /// does. The token stays out of the shell history and the process list:
    ///   printf %s "$TOKEN" | mcp-policy grant-id --label ci-agent
    #[command(verbatim_doc_comment)]
    #[command(after_help = "\
Exit status:
  0  the grant id is printed
  2  not a bearer token (with --header: an empty value), or the token was given as an argument")]
    GrantId(GrantIdArgs),
    /// Pin an MCP server's tool definitions: print each tool's `pin`
    ///
    /// Connects to URL as an MCP client (2026-07-28 `server/discover`, else the `initialize`
    /// handshake), lists every tool (every page of `tools/list`) and prints a policy fragment
    /// `{"tools": {"NAME": {"pin": "sha256:..."}}}`: the SHA-256 of each definition's canonical
    /// form, the form the filter checks (see the book, "Result rules and pins"). With --write,
    /// the pins go into the policy file instead (under default "deny", only into tools it lists).
    #[command(verbatim_doc_comment)]
    #[command(after_help = "\
Exit status:
  0  the pins are printed (or written)
  1  the policy file is invalid, or would be with the pins
  2  usage error, a file cannot be read, or the server cannot be listed")]
    Pin(PinArgs),
    /// Print the JSON Schema of the policy file (generated from the filter's config types)
    #[command(after_help = "\
Exit status:
  0  the schema is printed")]
    Schema,
}

#[derive(Args, Debug)]
pub struct ExplainArgs {
    /// The policy
    #[arg(value_name = "POLICY.json")]
    pub policy: String,
    /// The JSON-RPC body (`-` reads standard input)
    #[arg(value_name = "REQUEST.json")]
    pub request: String,
    /// The agent's credential (default `cli`): sent as `Authorization:
    /// Bearer LABEL`, or as `gateway.grant_header` when the policy sets one
    ///
    /// It only changes the decision when the policy lists `gateway.grants`:
    /// then LABEL must be a token whose SHA-256 is listed, else the agent
    /// gets 401. The grant is shown as `sha256:` plus 12 hex digits, or as
    /// its registered label.
    // Checked in `explain`, not by clap, whose errors repeat the value: it may be a real token.
    #[arg(long, value_name = "LABEL", default_value = "cli", hide_default_value = true, allow_hyphen_values = true)]
    #[arg(verbatim_doc_comment)]
    pub grant: String,
    /// The Envoy cluster of the MCP server, which an approval is bound to
    /// (default `mcp_upstream`, the route's choice in envoy/envoy.yaml)
    #[arg(long, value_name = "NAME", default_value = "mcp_upstream", hide_default_value = true, verbatim_doc_comment)]
    pub cluster: String,
    /// The MCP server's `:authority` (default `127.0.0.1:10000`)
    #[arg(long, value_name = "HOST", default_value = "127.0.0.1:10000", hide_default_value = true)]
    pub authority: String,
    /// The MCP server's `:path` (default `/mcp`)
    #[arg(long, value_name = "PATH", default_value = "/mcp", hide_default_value = true)]
    pub path: String,
    /// Marks the grant carries, set just now (comma-separated, e.g. `secret,pii`): the policy's
    /// `flows` judge the call as they would right after a marking result
    #[arg(long, value_name = "MARK[,MARK]", value_delimiter = ',', verbatim_doc_comment)]
    pub marks: Vec<String>,
}

#[derive(Args, Debug)]
pub struct ApplyArgs {
    /// The policy to put live
    #[arg(value_name = "POLICY.json")]
    pub policy: String,
    /// The ECDS file Envoy watches (default `.run/mcp_policy.yaml`)
    #[arg(long, value_name = "FILE", default_value = ".run/mcp_policy.yaml", hide_default_value = true)]
    pub ecds: String,
    /// Envoy's admin endpoint, whose stats say whether Envoy loaded the
    /// policy (default `http://127.0.0.1:9901`)
    #[arg(long, value_name = "URL", default_value = "http://127.0.0.1:9901", hide_default_value = true)]
    #[arg(verbatim_doc_comment)]
    pub admin: String,
    /// Envoy's log, to quote the lines about a refused policy
    #[arg(long, value_name = "FILE")]
    pub envoy_log: Option<String>,
    /// Seconds to wait for Envoy's verdict (default `10`, at most 3600)
    #[arg(long, value_name = "SECONDS", default_value = "10", hide_default_value = true, value_parser = seconds)]
    pub timeout: Duration,
    /// Send the policy to Envoy even if the local check fails (Envoy's
    /// filter decides)
    #[arg(long, verbatim_doc_comment)]
    pub no_check: bool,
    /// Only write the file, without asking Envoy (before Envoy starts)
    #[arg(long)]
    pub no_wait: bool,
}

#[derive(Args, Debug)]
pub struct PinArgs {
    /// The MCP endpoint, e.g. http://127.0.0.1:8000/mcp
    #[arg(value_name = "URL")]
    pub url: String,
    /// Add the pins to this policy file instead of printing them
    #[arg(long, value_name = "POLICY.json")]
    pub write: Option<String>,
    /// Send `Authorization: Bearer TOKEN`
    #[arg(long, value_name = "TOKEN", allow_hyphen_values = true)]
    pub bearer: Option<String>,
    /// Send this header with every request, as `-H 'Name: value'`
    #[arg(short = 'H', long = "header", value_name = "HEADER")]
    pub header: Vec<String>,
}

#[derive(Args, Debug)]
pub struct GrantIdArgs {
    /// Hash the value of `gateway.grant_header` instead of a bearer token
    /// (surrounding whitespace trimmed)
    #[arg(long, verbatim_doc_comment)]
    pub header: bool,
    /// Print the `gateway.grants` entry, with this label
    #[arg(long, value_name = "LABEL")]
    pub label: Option<String>,
    /// A token given as an argument: refused, with the way to pass it (it
    /// would stay in the shell history)
    #[arg(hide = true)]
    pub token: Vec<String>,
}

/// `--timeout`: seconds, above 0, at most an hour.
fn seconds(s: &str) -> Result<Duration, String> {
    match s.parse::<f64>() {
        Ok(n) if n.is_finite() && n > 0.0 && n <= 3600.0 => Ok(Duration::from_secs_f64(n)),
        _ => Err("expected seconds, above 0, at most 3600".to_owned()),
    }
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    use super::Cli;

    #[test]
    fn the_command_line_is_consistent() {
        Cli::command().debug_assert();
    }

    /// Defaults are hidden from clap's `[default: …]` and written in the help text instead.
    #[test]
    fn every_default_is_in_its_help() {
        let cli = Cli::command();
        for command in cli.get_subcommands() {
            for arg in command.get_arguments() {
                let [default] = arg.get_default_values() else { continue };
                let help = arg.get_help().map(ToString::to_string).unwrap_or_default();
                let written = format!("(default `{}`", default.to_string_lossy());
                assert!(help.contains(&written), "{} --{}: {help:?}", command.get_name(), arg.get_id());
                assert!(arg.is_hide_default_value_set(), "{} --{}", command.get_name(), arg.get_id());
            }
        }
    }
}
