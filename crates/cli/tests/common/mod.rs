//! What the CLI's test binaries share: running `mcp-policy` from the repository root, and files in
//! a scratch directory.

use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Stdio};

const BIN: &str = env!("CARGO_BIN_EXE_mcp-policy");
/// The repository root: the example policies and the ECDS file live there, and paths in the output
/// are relative to it.
pub const ROOT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../..");

/// Exit status, stdout, stderr of `mcp-policy ARGS` run from the repository root with `stdin` as
/// input, its command first changed by `env` (its environment).
pub fn output(args: &[&str], stdin: &[u8], env: impl FnOnce(&mut Command) -> &mut Command) -> (i32, String, String) {
    let mut child = env(Command::new(BIN).args(args))
        .current_dir(ROOT)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(stdin).unwrap();
    let out = child.wait_with_output().unwrap();
    (
        out.status.code().expect("exited, not killed"),
        String::from_utf8(out.stdout).unwrap(),
        String::from_utf8(out.stderr).unwrap(),
    )
}

/// A file `name` holding `text` in the scratch directory `dir` (one per test binary).
pub fn scratch_in(dir: &str, name: &str, text: &str) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(dir);
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path
}
