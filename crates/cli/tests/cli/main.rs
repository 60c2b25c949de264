//! The `mcp-policy` binary: exit statuses and exact output of `check`, `explain`, the help and usage
//! errors. Run with `cargo test -p mcp-policy-cli --test cli`.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, clippy::indexing_slicing)]

use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Stdio};

mod check;
mod explain;
mod usage;

const BIN: &str = env!("CARGO_BIN_EXE_mcp-policy");
/// The repository root: the example policies and the ECDS file live there, and paths in the output
/// are relative to it.
const ROOT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../..");

/// Exit status, stdout, stderr of `mcp-policy ARGS` run from the repository root, with `stdin` as
/// input and `env` added to an environment without `MCPF_SESSION_KEY`.
pub fn run_env(args: &[&str], stdin: &str, env: &[(&str, &str)]) -> (i32, String, String) {
    let mut child = Command::new(BIN)
        .args(args)
        .env_remove("MCPF_SESSION_KEY")
        .envs(env.iter().copied())
        .current_dir(ROOT)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(stdin.as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    (
        out.status.code().expect("exited, not killed"),
        String::from_utf8(out.stdout).unwrap(),
        String::from_utf8(out.stderr).unwrap(),
    )
}

pub fn run_with(args: &[&str], stdin: &str) -> (i32, String, String) {
    run_env(args, stdin, &[])
}

pub fn run(args: &[&str]) -> (i32, String, String) {
    run_with(args, "")
}

/// A file under the test's scratch directory (unique per test name).
pub fn scratch(name: &str, text: &str) -> String {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("cli");
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path.to_str().unwrap().to_owned()
}

pub fn call(tool: &str) -> String {
    format!(
        r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{{"name":"{tool}","arguments":{{"node":"pve","vmid":100}}}}}}"#
    )
}
