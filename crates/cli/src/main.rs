//! `mcp-policy`: check a policy file, explain what the filter would do with a request, and print the
//! policy's JSON Schema. It runs the filter's own code: `config::load` reads the policy exactly as
//! `on_configure` does, and `gate::on_headers` / `gate::on_body` decide the request exactly as the
//! filter does in Envoy (with a fresh in-memory rate-limit store and the current time).

use std::io::{Read, Write};
use std::process::ExitCode;

use clap::{CommandFactory, Parser};

mod apply;
mod args;
mod bootstrap;
mod check;
mod contain;
mod envoy_yaml;
mod explain;
mod grant_id;
mod pin;
mod pin_write;
mod policy_test;

use args::{Cli, Command, SchemaArgs};
use mcp_policy_core::config::{PolicySetSpec, PolicySpec};
use mcp_policy_core::wire::textpos;

/// Exit statuses (listed in `mcp-policy --help`).
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

    /// One error line on stderr; the exit status becomes at least `status`.
    fn fail(&mut self, line: &str, status: u8) {
        self.stderr.push_str(line);
        self.stderr.push('\n');
        self.status = self.status.max(status);
    }
}

/// A usage error of `command` found after parsing, worded as the parser words its own (what is
/// wrong, the command's usage, where to read more), without repeating the value.
fn usage_error(command: &str, message: impl std::fmt::Display) -> Failure {
    let mut cli = Cli::command();
    cli.build();
    let error = match cli.find_subcommand_mut(command) {
        Some(sub) => sub.error(clap::error::ErrorKind::ValueValidation, message),
        None => cli.error(clap::error::ErrorKind::ValueValidation, message),
    };
    Failure { status: USAGE_OR_IO, message: error.render().to_string().trim_end().to_owned() }
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

/// The plugin configuration: one policy for every caller, or a policy set.
#[derive(schemars::JsonSchema)]
#[serde(untagged)]
#[allow(dead_code)]
enum PolicyFile {
    Policy(PolicySpec),
    Set(PolicySetSpec),
}

fn schema(args: &SchemaArgs) -> Result<Report, Failure> {
    let schema = if args.tests {
        let mut s = schemars::schema_for!(policy_test::spec::TestsFile);
        s.insert("title".into(), "mcp-policy test: policy tests file".into());
        s
    } else {
        let mut s = schemars::schema_for!(PolicyFile);
        s.insert("title".into(), "mcp-policy-filter policy.json".into());
        s
    };
    serde_json::to_string_pretty(&schema)
        .map(|s| Report::out(s + "\n", OK))
        .map_err(|e| Failure { status: USAGE_OR_IO, message: format!("mcp-policy: cannot render the schema: {e}") })
}

fn run(command: &Command) -> Result<Report, Failure> {
    match command {
        Command::Check { files } => check::check(files),
        Command::Explain(args) => explain::explain(args),
        Command::Apply(args) => apply::command(args),
        Command::GrantId(args) => grant_id::command(args),
        Command::Test(args) => policy_test::command(args),
        Command::Contain(args) => contain::command(args, true),
        Command::Release(args) => contain::command(args, false),
        Command::Pin(args) => pin::command(args),
        Command::Schema(args) => schema(args),
    }
}

fn main() -> ExitCode {
    // Usage errors, --help and --version end here (status 2 for an error, 0 otherwise).
    let cli = Cli::parse();
    let report = run(&cli.command).unwrap_or_else(|f| Report {
        stdout: String::new(),
        stderr: f.message + "\n",
        status: f.status,
    });
    // Write errors (e.g. a closed pipe) must not panic; they end the command with status 2.
    let out = std::io::stdout().lock().write_all(report.stdout.as_bytes());
    // A key or word quoted from a policy or tests file is shown as the policy excerpts show it.
    let shown: String = report.stderr.chars().map(textpos::visible).collect();
    let err = std::io::stderr().lock().write_all(shown.as_bytes());
    if out.is_err() || err.is_err() {
        return ExitCode::from(USAGE_OR_IO);
    }
    ExitCode::from(report.status)
}
