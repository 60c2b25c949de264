//! The `mcp-policy` operator commands: `grant-id` and `apply` (its file handling and its reading of
//! Envoy's verdict, against a stand-in admin endpoint; the real Envoy is in
//! tests/envoy/test_run.py). Run with `cargo test -p mcp-policy-cli --test cli_ops`.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, clippy::indexing_slicing)]

use std::io::{Read, Write};
use std::net::TcpListener;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

mod common;

use common::{output, scratch_in, ROOT};

fn run_with(args: &[&str], stdin: &[u8]) -> (i32, String, String) {
    output(args, stdin, |c| c)
}

fn scratch(name: &str, text: &str) -> PathBuf {
    scratch_in("cli_ops", name, text)
}

fn s(p: &std::path::Path) -> &str {
    p.to_str().unwrap()
}

/// The ECDS file's policy text.
fn served(ecds: &std::path::Path) -> String {
    let doc: serde_json::Value = serde_json::from_slice(&std::fs::read(ecds).unwrap()).unwrap();
    doc.pointer("/resources/0/typed_config/config/configuration/value").unwrap().as_str().unwrap().to_owned()
}

#[test]
fn grant_id_is_the_sha256_the_filter_uses() {
    // sha256("demo-token") = `printf %s demo-token | sha256sum`
    let id = "7c43ef5ae21d43ce2743f770c68e24def1a43ee2f416d2438410c8af7af2ff2c";
    assert_eq!(run_with(&["grant-id"], b"demo-token"), (0, format!("{id}\n"), String::new()));
    // echo's newline and base64 padding do not count, as in the filter.
    assert_eq!(run_with(&["grant-id"], b"demo-token==\n").1, format!("{id}\n"));
    assert_eq!(
        run_with(&["grant-id", "--label", "ci-agent"], b"demo-token").1,
        format!("{{\"sha256\": \"{id}\", \"label\": \"ci-agent\"}}\n")
    );
    assert_eq!(run_with(&["grant-id", "--header"], b"  demo-token \n").1, format!("{id}\n"));
    let (status, out, err) = run_with(&["grant-id", "demo-token"], b"");
    assert_eq!((status, out.as_str()), (2, ""));
    assert!(err.starts_with("mcp-policy: grant-id reads the token from standard input"), "{err}");
    let (status, _, err) = run_with(&["grant-id"], b"two words");
    assert_eq!(status, 2);
    assert!(err.starts_with("mcp-policy: not a bearer token"), "{err}");
}

/// A stand-in for Envoy's admin `/stats`: answers every request (chunked, as Envoy does) with the
/// counters `answers(n)` gives for the n-th request; counts the requests.
fn fake_admin(answers: impl Fn(usize) -> (u64, u64) + Send + 'static) -> (String, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let seen = Arc::new(AtomicUsize::new(0));
    let count = seen.clone();
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let mut conn = conn.unwrap();
            let mut req = Vec::new();
            let mut buf = [0u8; 4096];
            while !req.ends_with(b"\r\n\r\n") {
                let n = conn.read(&mut buf).unwrap();
                assert!(n > 0, "the request ended early");
                req.extend_from_slice(&buf[..n]);
            }
            let req = String::from_utf8_lossy(&req).into_owned();
            assert!(req.starts_with("GET /stats?filter=%5Eextension_config_discovery"), "{req:?}");
            let (success, rejected) = answers(count.fetch_add(1, Ordering::SeqCst));
            let body = format!(
                "extension_config_discovery.http_filter.mcp_policy.update_rejected: {rejected}\n\
                 extension_config_discovery.http_filter.mcp_policy.update_success: {success}\n"
            );
            let _ = write!(
                conn,
                "HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ntransfer-encoding: chunked\r\n\r\n{:x}\r\n{body}\r\n0\r\n\r\n",
                body.len()
            );
        }
    });
    (addr, seen)
}

#[test]
fn apply_reports_applied_only_after_update_success() {
    let ecds = scratch("applied.yaml", &std::fs::read_to_string(format!("{ROOT}/envoy/ecds/mcp_policy.yaml")).unwrap());
    let (admin, seen) = fake_admin(|n| if n < 3 { (1, 0) } else { (2, 0) });
    let (status, out, err) =
        run_with(&["apply", "envoy/policy-conditions.json", "--ecds", s(&ecds), "--admin", &admin], b"");
    assert_eq!((status, err.as_str()), (0, ""), "{out}");
    assert!(
        out.starts_with("envoy/policy-conditions.json: applied: Envoy loaded the new policy for mcp_policy in "),
        "{out}"
    );
    assert!(out.ends_with(" ms (update_success 1 -> 2)\n"), "{out}");
    assert!(seen.load(Ordering::SeqCst) >= 4);
    assert_eq!(served(&ecds), std::fs::read_to_string(format!("{ROOT}/envoy/policy-conditions.json")).unwrap());
}

#[test]
fn apply_reports_rejection_with_the_filters_reason() {
    let ecds =
        scratch("rejected.yaml", &std::fs::read_to_string(format!("{ROOT}/envoy/ecds/mcp_policy.yaml")).unwrap());
    let bad = scratch("rejected-policy.json", "{\"version\":\"1\",\"tools\":{\"x\":{\"acton\":\"deny\"}}}\n");
    let (admin, _) = fake_admin(|n| if n < 2 { (4, 1) } else { (4, 2) });
    let (status, out, err) = run_with(&["apply", s(&bad), "--ecds", s(&ecds), "--admin", &admin, "--no-check"], b"");
    assert_eq!((status, out.as_str()), (5, ""));
    assert_eq!(
        err,
        format!(
            "{}: rejected: Envoy refused the new configuration of mcp_policy (update_rejected 1 -> 2); the previous \
             policy keeps serving\nthe filter's check of this policy:\n  invalid policy at tools.x.acton: unknown \
             field `acton`, expected one of `action`, `reason`, `approval_timeout`, `limits`, `require`, `deny_if`, \
             `result`, `marks`, `pin`\n",
            s(&bad)
        )
    );
}

#[test]
fn apply_never_writes_an_invalid_policy() {
    let shipped = std::fs::read_to_string(format!("{ROOT}/envoy/ecds/mcp_policy.yaml")).unwrap();
    let ecds = scratch("invalid.yaml", &shipped);
    let bad = scratch("invalid-policy.json", "{\"version\":\"1\",\n \"tools\":{,}}\n");
    let (status, out, err) = run_with(&["apply", s(&bad), "--ecds", s(&ecds), "--admin", "127.0.0.1:1"], b"");
    assert_eq!((status, out.as_str()), (1, ""));
    assert_eq!(
        err,
        format!(
            "{0}: invalid policy at . (the whole document): not a strict JSON document: unexpected character at line 2, column 11 of the policy text\n   2 |  \
             \"tools\":{{,}}}}\n     |           ^\nnot applied: the ECDS file is unchanged and Envoy keeps its policy\n",
            s(&bad)
        )
    );
    assert_eq!(std::fs::read_to_string(&ecds).unwrap(), shipped);
}

#[test]
fn apply_without_envoy() {
    let shipped = std::fs::read_to_string(format!("{ROOT}/envoy/ecds/mcp_policy.yaml")).unwrap();
    let ecds = scratch("no-envoy.yaml", &shipped);
    // No admin endpoint: nothing is written.
    let (status, _, err) =
        run_with(&["apply", "envoy/policy-conditions.json", "--ecds", s(&ecds), "--admin", "127.0.0.1:1"], b"");
    assert_eq!(status, 2);
    assert!(err.starts_with("mcp-policy: cannot read Envoy's stats at 127.0.0.1:1: "), "{err}");
    assert!(err.ends_with("; nothing written (is Envoy running, with its admin listener there? --admin)\n"), "{err}");
    assert_eq!(std::fs::read_to_string(&ecds).unwrap(), shipped);
    // --no-wait writes the file only (before Envoy starts); everything but the policy is kept.
    let (status, out, _) = run_with(&["apply", "envoy/policy-conditions.json", "--ecds", s(&ecds), "--no-wait"], b"");
    assert_eq!((status, out), (0, format!("envoy/policy-conditions.json: written: {} (Envoy not asked)\n", s(&ecds))));
    let conditions = std::fs::read_to_string(format!("{ROOT}/envoy/policy-conditions.json")).unwrap();
    assert_eq!(served(&ecds), conditions);
    let mut got: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&ecds).unwrap()).unwrap();
    let want: serde_json::Value = serde_json::from_str(&shipped).unwrap();
    *got.pointer_mut("/resources/0/typed_config/config/configuration/value").unwrap() =
        want.pointer("/resources/0/typed_config/config/configuration/value").unwrap().clone();
    assert_eq!(got, want);
    // The same policy again: different bytes (trailing newline toggled), so Envoy really reloads.
    run_with(&["apply", "envoy/policy-conditions.json", "--ecds", s(&ecds), "--no-wait"], b"");
    assert_eq!(served(&ecds), conditions.trim_end_matches('\n'));
    run_with(&["apply", "envoy/policy-conditions.json", "--ecds", s(&ecds), "--no-wait"], b"");
    assert_eq!(served(&ecds), conditions);
    // No temp files left behind.
    let dir = ecds.parent().unwrap();
    assert!(std::fs::read_dir(dir).unwrap().all(|e| !e.unwrap().file_name().to_string_lossy().ends_with(".tmp")));
}

#[test]
fn apply_usage_errors() {
    let more = "For more information, try '--help'.\n";
    let usage = "Usage: mcp-policy apply [OPTIONS] <POLICY.json>\n\n";
    for (args, message) in [
        (
            &["apply"][..],
            format!(
                "error: the following required arguments were not provided:\n  <POLICY.json>\n\n\
                 Usage: mcp-policy apply <POLICY.json>\n\n{more}"
            ),
        ),
        (&["apply", "a.json", "b.json"], format!("error: unexpected argument 'b.json' found\n\n{usage}{more}")),
        (&["apply", "a.json", "--ecds"], format!("error: a value is required for '--ecds <FILE>' but none was supplied\n\n{more}")),
        (
            &["apply", "a.json", "--timeout", "0"],
            format!("error: invalid value '0' for '--timeout <SECONDS>': expected seconds, above 0, at most 3600\n\n{more}"),
        ),
        (
            &["apply", "a.json", "--admin=x", "--admin=y"],
            format!("error: the argument '--admin <URL>' cannot be used multiple times\n\n{usage}{more}"),
        ),
        (
            &["apply", "a.json", "--force"],
            format!(
                "error: unexpected argument '--force' found\n\n  tip: to pass '--force' as a value, use '-- --force'\n\n\
                 Usage: mcp-policy apply <POLICY.json>\n\n{more}"
            ),
        ),
    ] {
        let (status, out, err) = run_with(args, b"");
        assert_eq!((status, out.as_str()), (2, ""), "{args:?}");
        assert_eq!(err, message, "{args:?}");
    }
}
