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
     apply: Envoy loaded the policy; test: every case got the decision expected
  1  a policy is invalid; test: a case got another decision than expected
  2  usage error, or a file cannot be read; test: also an invalid policy or tests file
  3  explain: the filter would refuse the request (it answers the agent itself)
  4  explain: the request would be held until a person approves it (require_approval)
  5  apply: Envoy refused the policy, or did not confirm it in time (the previous one serves)";

/// Check, explain and test mcp-policy-filter policies (PolicyLayer policy.json)
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
    /// here, else checked as if set, with a note on stderr: the filter reads Envoy's environment
    /// (native build) or its wasm VM's, where the variable must be set.
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
    /// Test a policy against a tests file of calls and the decisions expected
    ///
    /// TESTS is YAML or JSON (`mcp-policy schema --tests` prints its JSON Schema): cases, each a
    /// name, a grant, a call (a tool and its arguments, or a method and its params), the calls its
    /// limits already counted (`state.counters`), and the decision expected (`expect.kind`, and
    /// optionally `expect.rule` and text `expect.reason` contains). Each case is decided by the
    /// filter's own code, as `explain` decides a request. Prints one line per case, `ok` or
    /// `FAILED`, then expected versus actual for each failed case, then the counts.
    #[command(verbatim_doc_comment)]
    #[command(after_help = "\
Exit status:
  0  every case got the decision expected
  1  a case got another decision
  2  bad input: usage error, the policy or the tests file is invalid or cannot be read, or a
     case cannot be run (e.g. a counter the policy has no limit for)")]
    Test(TestArgs),
    /// Cut off one identity of a policy set at once: add a `contain` entry
    ///
    /// Adds `{"when": [{"claim": NAME, "equals": VALUE}, ...], "reason": TEXT}` to the set's
    /// `contain` list, checks the edited set as `check` does (an invalid one is never written),
    /// rewrites the file, and with --ecds puts it live as `apply` does. Every tools/call of the
    /// identity is then refused with `contained`; every other caller keeps its policy.
    ///   mcp-policy contain --claim sub=alice --reason "incident 42" --ecds .run/mcp_policy.yaml .run/policy.json
    #[command(verbatim_doc_comment)]
    #[command(after_help = "\
Exit status:
  0  the set is edited (and with --ecds, Envoy loaded it)
  1  the edited set would be invalid: nothing is written
  2  usage error, or the file cannot be read or written
  5  with --ecds: Envoy refused the set, or did not confirm it in time")]
    Contain(ContainArgs),
    /// Restore an identity cut off by `contain`: remove its `contain` entry
    ///
    /// Removes every `contain` entry whose matchers are exactly the --claim list given, then
    /// checks, writes and (with --ecds) applies the set as `contain` does.
    #[command(verbatim_doc_comment)]
    #[command(after_help = "\
Exit status:
  0  the entry is removed (and with --ecds, Envoy loaded the set)
  1  the edited set would be invalid: nothing is written
  2  usage error, no such entry, or the file cannot be read or written
  5  with --ecds: Envoy refused the set, or did not confirm it in time")]
    Release(ContainArgs),
    /// Pin an MCP server's tool definitions: print each tool's `pin`
    ///
    /// Connects to URL as an MCP client (2026-07-28 `server/discover`, else the `initialize`
    /// handshake), lists every tool (every page of `tools/list`) and prints a policy fragment
    /// `{"tools": {"NAME": {"pin": "sha256:..."}}}`: the SHA-256 of each definition's canonical
    /// form, the form the filter checks (see the book, "Result rules and pins"). With --write,
    /// the pins go into the policy file instead: a tool it lists under `tools` gets its `pin`
    /// there, every other tool is recorded under `pins` with its annotations (that allows
    /// nothing; the policy's `default_for` may then decide it by those annotations).
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
    Schema(SchemaArgs),
}

#[derive(Args, Debug)]
pub struct TestArgs {
    /// The policy
    #[arg(value_name = "POLICY.json")]
    pub policy: String,
    /// The tests file, YAML or JSON (`-` reads standard input)
    #[arg(value_name = "TESTS")]
    pub tests: String,
    /// Also write the results as JUnit XML to FILE
    #[arg(long, value_name = "FILE")]
    pub junit: Option<String>,
}

#[derive(Args, Debug)]
pub struct SchemaArgs {
    /// The schema of a policy tests file (`mcp-policy test`) instead
    #[arg(long)]
    pub tests: bool,
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
    /// The request's MCP-Protocol-Version header, e.g. `2025-11-25` (default: none,
    /// which the filter reads as 2025-03-26, as the MCP specification says)
    #[arg(long, value_name = "VERSION", verbatim_doc_comment)]
    pub protocol_version: Option<String>,
    /// A JSON tools/call response the server would send: shows what the
    /// tool's result rules make of it (refused, redactions, or unchanged)
    #[arg(long, value_name = "RESULT.json", verbatim_doc_comment)]
    pub result: Option<String>,
    /// The caller's verified token claims, a JSON object, e.g.
    /// '{"sub":"alice","groups":["ops"]}': sent as the payload header of
    /// `gateway.identity`, as jwt_authn would; shows which policy of a
    /// set applies and why
    #[arg(long, value_name = "JSON", verbatim_doc_comment)]
    pub claims: Option<String>,
    /// Marks the grant carries, set just now (comma-separated, e.g. `secret,pii`): the policy's
    /// `flows` judge the call as they would right after a marking result
    #[arg(long, value_name = "MARK[,MARK]", value_delimiter = ',', verbatim_doc_comment)]
    pub marks: Vec<String>,
    /// Tools of the policy's `pins` that a tools/list through this Envoy
    /// showed matching their pin (comma-separated): `default_for` allows
    /// such a tool only then
    #[arg(long, value_name = "TOOL[,TOOL]", value_delimiter = ',', verbatim_doc_comment)]
    pub pins_listed: Vec<String>,
}

#[derive(Args, Debug)]
pub struct ContainArgs {
    /// The policy set to edit (a file with `policies`)
    #[arg(value_name = "POLICY.json")]
    pub policy: String,
    /// A claim of the identity, NAME=VALUE (repeat: every one must hold)
    #[arg(long = "claim", value_name = "NAME=VALUE", required = true)]
    pub claims: Vec<String>,
    /// Why, shown to the agent in each refusal (contain only)
    #[arg(long, value_name = "TEXT")]
    pub reason: Option<String>,
    /// Also put the edited set live, as `apply --ecds FILE` does (`make
    /// reload` uses .run/mcp_policy.yaml)
    #[arg(long, value_name = "FILE", verbatim_doc_comment)]
    pub ecds: Option<String>,
    /// With --ecds: Envoy's admin endpoint (default `http://127.0.0.1:9901`)
    #[arg(long, value_name = "URL", default_value = "http://127.0.0.1:9901", hide_default_value = true)]
    pub admin: String,
    /// With --ecds: seconds to wait for Envoy's verdict (default `10`)
    #[arg(long, value_name = "SECONDS", default_value = "10", hide_default_value = true, value_parser = seconds)]
    pub timeout: Duration,
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
