//! The `mcp-policy` binary: exit statuses and exact output of `check`, `explain`, the help and usage
//! errors. Run with `cargo test -p mcp-policy-cli --test cli`.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, clippy::indexing_slicing)]

mod check;
#[path = "../common/mod.rs"]
mod common;
mod envoy_config;
mod explain;
mod policy_test;
mod sets;
mod usage;

use common::{output, scratch_in};

/// Exit status, stdout, stderr of `mcp-policy ARGS` run from the repository root, with `stdin` as
/// input and `env` added to an environment without `MCPF_SESSION_KEY`.
pub fn run_env(args: &[&str], stdin: &str, env: &[(&str, &str)]) -> (i32, String, String) {
    output(args, stdin.as_bytes(), |c| c.env_remove("MCPF_SESSION_KEY").envs(env.iter().copied()))
}

pub fn run_with(args: &[&str], stdin: &str) -> (i32, String, String) {
    run_env(args, stdin, &[])
}

pub fn run(args: &[&str]) -> (i32, String, String) {
    run_with(args, "")
}

/// A file under the test's scratch directory (unique per test name).
pub fn scratch(name: &str, text: &str) -> String {
    scratch_in("cli", name, text).to_str().unwrap().to_owned()
}

pub fn call(tool: &str) -> String {
    format!(
        r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{{"name":"{tool}","arguments":{{"node":"pve","vmid":100}}}}}}"#
    )
}
