//! The `mcp-policy` binary: exit statuses and exact output of `check`, `explain` and usage errors.
//! Run with `cargo test -p mcp-policy-cli --test cli`.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, clippy::indexing_slicing)]

use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Stdio};

use mcp_policy_filter::config::UNBOUND_SESSIONS_WARNING;

const BIN: &str = env!("CARGO_BIN_EXE_mcp-policy");
/// The repository root: the example policies and the ECDS file live there, and paths in the output
/// are relative to it.
const ROOT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../..");

/// Exit status, stdout, stderr of `mcp-policy ARGS` run from the repository root, with `stdin` as input
/// and `env` added to an environment without `MCPF_SESSION_KEY`.
fn run_env(args: &[&str], stdin: &str, env: &[(&str, &str)]) -> (i32, String, String) {
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

fn run_with(args: &[&str], stdin: &str) -> (i32, String, String) {
    run_env(args, stdin, &[])
}

fn run(args: &[&str]) -> (i32, String, String) {
    run_with(args, "")
}

/// A file under the test's scratch directory (unique per test name).
fn scratch(name: &str, text: &str) -> String {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("cli");
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path.to_str().unwrap().to_owned()
}

fn call(tool: &str) -> String {
    format!(
        r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{{"name":"{tool}","arguments":{{"node":"pve","vmid":100}}}}}}"#
    )
}

#[test]
fn check_valid_policies() {
    assert_eq!(
        run(&["check", "envoy/policy.json"]),
        (0, "envoy/policy.json: ok: version 1, default deny, 3 tool rules, 1 limit, 1 tool requires approval (cluster mcp_approvals, mode retry)\n".into(), String::new())
    );
    assert_eq!(
        run(&["check", "envoy/policy-conditions.json"]),
        (0, "envoy/policy-conditions.json: ok: version 1, default deny, 4 tool rules, 1 limit\n".into(), String::new())
    );
    // Policies that admit sessions without a key get the filter's warning on stderr.
    let unbound = |p: &str| format!("{p}: warning: {UNBOUND_SESSIONS_WARNING}\n");
    let p = scratch(
        "valid-gateway.json",
        r#"{"version":"1","default":"allow","tools":{"x":{}},"gateway":{"mode":"dry_run","tool_modes":{"x":"enforce","y":"dry_run"},
            "grants":[{"sha256":"6ff3b3bd11c44cac620c43d5b65377bd2ba7e8951c1e835ae40c96733730982b","label":"agent-one"}]}}"#,
    );
    assert_eq!(
        run(&["check", &p]),
        (
            0,
            format!("{p}: ok: version 1, default allow, 1 tool rule, 0 limits, 1 registered grant, mode dry_run, 1 tool in dry_run\n"),
            unbound(&p)
        )
    );
    let p = scratch("valid-recording.json", r#"{"version":"1","gateway":{"audit":"access_log","filter_state":false}}"#);
    assert_eq!(
        run(&["check", &p]),
        (
            0,
            format!(
                "{p}: ok: version 1, default deny, 0 tool rules, 0 limits, audit access_log, no filter state (the access log's mcp_* fields print -)\n"
            ),
            unbound(&p)
        )
    );
    let p = scratch("valid-audit-off.json", r#"{"version":"1","gateway":{"audit":"off","filter_state":true}}"#);
    assert_eq!(
        run(&["check", &p]),
        (0, format!("{p}: ok: version 1, default deny, 0 tool rules, 0 limits, audit off\n"), unbound(&p))
    );
}

#[test]
fn check_warns_about_unbound_sessions_and_reads_keys_from_its_own_environment() {
    let keyless = scratch("keyless.json", r#"{"version":"1"}"#);
    let summary = |p: &str| format!("{p}: ok: version 1, default deny, 0 tool rules, 0 limits\n");
    assert_eq!(
        run(&["check", &keyless]),
        (0, summary(&keyless), format!("{keyless}: warning: {UNBOUND_SESSIONS_WARNING}\n"))
    );
    // No version with sessions accepted: nothing to bind, no warning.
    let modern = scratch("modern-only.json", r#"{"version":"1","gateway":{"protocol_versions":["2026-07-28"]}}"#);
    assert_eq!(run(&["check", &modern]), (0, summary(&modern), String::new()));
    // A key named by variable: checked as if set when this environment lacks it (the filter reads the
    // wasm VM's), read from here when set, so a short one is refused as the filter would refuse it.
    let by_env =
        scratch("key-by-env.json", r#"{"version":"1","gateway":{"session_key":{"current_env":"MCPF_SESSION_KEY"}}}"#);
    assert_eq!(run(&["check", &by_env]), (0, summary(&by_env), String::new()));
    let key = "0123456789abcdef0123456789abcdef";
    assert_eq!(run_env(&["check", &by_env], "", &[("MCPF_SESSION_KEY", key)]), (0, summary(&by_env), String::new()));
    assert_eq!(
        run_env(&["check", &by_env], "", &[("MCPF_SESSION_KEY", "short")]),
        (
            1,
            String::new(),
            format!("{by_env}: invalid policy at gateway.session_key.current: must be at least 32 bytes\n")
        )
    );
    // The shipped policies bind sessions: no warning.
    for shipped in ["envoy/policy.json", "envoy/policy-conditions.json"] {
        let (status, _, err) = run(&["check", shipped]);
        assert_eq!((status, err.as_str()), (0, ""), "{shipped}");
    }
}

#[test]
fn check_reports_every_error_with_its_path() {
    // Errors found after parsing are all reported, one per line: here two `max: 0` and the version.
    let p = scratch(
        "invalid-many.json",
        r#"{"version":"2","all_tools":{"limits":[{"counter":"all","window":"hour","max":0}]},
            "tools":{"x":{"limits":[{"counter":"c","window":"minute","max":0}]}}}"#,
    );
    let (status, out, err) = run(&["check", &p]);
    assert_eq!((status, out.as_str()), (1, ""));
    assert_eq!(
        err,
        format!(
            "{p}: invalid policy at version: must be \"1\"\n\
             {p}: invalid policy at all_tools.limits[0].max: must be at least 1\n\
             {p}: invalid policy at tools.x.limits[0].max: must be at least 1\n"
        )
    );
}

#[test]
fn check_unknown_field_stops_parsing() {
    // An unknown field (like any type error) stops serde at once, so the `max: 0` beside it is
    // not reported: `config::load` reports type errors one at a time, then all later checks together.
    let p = scratch(
        "invalid-unknown.json",
        r#"{"version":"1","tools":{"x":{"actoin":"deny","limits":[{"counter":"c","window":"minute","max":0}]}}}"#,
    );
    assert_eq!(
        run(&["check", &p]),
        (
            1,
            String::new(),
            format!(
                "{p}: invalid policy at tools.x.actoin: unknown field `actoin`, expected one of `action`, `reason`, `approval_timeout`, \
                 `limits`, `require`, `deny_if`\n"
            )
        )
    );
    let p = scratch(
        "invalid-window.json",
        r#"{"version":"1","tools":{"x":{"limits":[{"counter":"c","window":"fortnight","max":1}]}}}"#,
    );
    let (status, _, err) = run(&["check", &p]);
    assert_eq!(status, 1);
    assert!(
        err.starts_with(&format!("{p}: invalid policy at tools.x.limits[0].window: unknown variant `fortnight`")),
        "{err}"
    );
    assert_eq!(err.lines().count(), 1);
}

#[test]
fn check_several_files_valid_and_invalid() {
    let bad = scratch("invalid-dup.json", r#"{"version":"1","tools":{"x":{},"x":{"action":"deny"}}}"#);
    let (status, out, err) = run(&["check", "envoy/policy.json", &bad]);
    assert_eq!(status, 1);
    assert_eq!(out, "envoy/policy.json: ok: version 1, default deny, 3 tool rules, 1 limit, 1 tool requires approval (cluster mcp_approvals, mode retry)\n");
    assert!(
        err.starts_with(&format!("{bad}: invalid policy at . (the whole document): not a strict JSON document: ")),
        "{err}"
    );
    assert!(err.contains("duplicate"), "{err}");
    // An unreadable file wins over an invalid one: status 2.
    let (status, _, err) = run(&["check", &bad, "no/such/policy.json"]);
    assert_eq!(status, 2);
    assert!(
        err.ends_with("mcp-policy: cannot read no/such/policy.json: No such file or directory (os error 2)\n"),
        "{err}"
    );
}

#[test]
fn check_a_document_closed_early_names_where_it_closed_and_what_follows() {
    // A stray `}` on line 4 closes the document; the parser only stops at line 5's text.
    let p = scratch(
        "closed-early.json",
        "{\n  \"version\": \"1\",\n  \"tools\": {\"list_vms\": {}}}\n}\n  ,\"default\": \"deny\"\n}\n",
    );
    assert_eq!(
        run(&["check", &p]),
        (
            1,
            String::new(),
            format!(
                "{p}: invalid policy at . (the whole document): not a strict JSON document: the top-level object \
                 closes at line 3, column 28; line 4, column 1 has more (data after the JSON value)\n\
                 \x20  3 |   \"tools\": {{\"list_vms\": {{}}}}}}\n     |                            ^\n\
                 \x20  4 | }}\n     | ^\n"
            )
        )
    );
}

#[test]
fn check_syntax_errors_carry_line_and_column_and_show_the_line() {
    let p = scratch("syntax.json", "{\n  \"version\": \"1\",\n  \"tools\": {\n    \"list_vms\": {},\n  }\n}\n");
    assert_eq!(
        run(&["check", &p]),
        (
            1,
            String::new(),
            format!(
                "{p}: invalid policy at . (the whole document): not a strict JSON document: unexpected character at line 5, column 3\n   5 |   }}\n     |   ^\n"
            )
        )
    );
    // Columns count characters (the é is one), and a missing end names the line after the last.
    let p = scratch("syntax-utf8.json", "{\"version\":\"1\",\"tools\":{\"d\u{e9}l\":{\"action\":\"deny\",}}}");
    let (status, _, err) = run(&["check", &p]);
    assert_eq!(status, 1);
    assert!(err.contains("unexpected character at line 1, column 48\n"), "{err}");
    let p = scratch("syntax-end.json", "{\"version\":\"1\",\n");
    let (_, _, err) = run(&["check", &p]);
    assert!(err.ends_with("unexpected end of input at line 2, column 1\n   2 | \n     | ^\n"), "{err}");
}

#[test]
fn unreadable_files_exit_2() {
    assert_eq!(
        run(&["check", "no/such/policy.json"]),
        (
            2,
            String::new(),
            "mcp-policy: cannot read no/such/policy.json: No such file or directory (os error 2)\n".into()
        )
    );
    let (status, out, err) = run(&["explain", "envoy/policy.json", "no/such/request.json"]);
    assert_eq!((status, out.as_str()), (2, ""));
    assert_eq!(err, "mcp-policy: cannot read no/such/request.json: No such file or directory (os error 2)\n");
    // The policy is read (and judged) first.
    let (status, _, err) = run(&["explain", "no/such/policy.json", "no/such/request.json"]);
    assert_eq!(
        (status, err.as_str()),
        (2, "mcp-policy: cannot read no/such/policy.json: No such file or directory (os error 2)\n")
    );
}

#[test]
fn explain_allowed_call() {
    let req = scratch("list_vms.json", &call("list_vms"));
    assert_eq!(
        run(&["explain", "envoy/policy.json", &req]),
        (
            0,
            "decision: allowed\n\
             rule:     tools.list_vms\n\
             reason:   -\n\
             method:   tools/call\n\
             tool:     list_vms\n\
             grant:    sha256:99bb88401742\n\
             status:   forwarded to the MCP server (the agent gets the server's response)\n"
                .into(),
            String::new()
        )
    );
}

#[test]
fn explain_denied_call() {
    let req = scratch("delete_vm.json", &call("delete_vm"));
    let (status, out, err) = run(&["explain", "envoy/policy.json", &req]);
    assert_eq!((status, err.as_str()), (3, ""));
    let reply = r#"{"jsonrpc":"2.0","id":1,"error":{"code":-31001,"message":"tool 'delete_vm' denied: not allowed by policy (default: deny)","data":{"kind":"denied","tool":"delete_vm","reason":"not allowed by policy (default: deny)","rule":"default"}}}"#;
    assert_eq!(
        out,
        format!(
            "decision: denied\n\
             rule:     default\n\
             reason:   not allowed by policy (default: deny)\n\
             method:   tools/call\n\
             tool:     delete_vm\n\
             grant:    sha256:99bb88401742\n\
             error:    denied\n\
             status:   200 (answered by the filter, JSON-RPC error -31001; nothing reaches the server)\n\
             reply:\n\
             {reply}\n"
        )
    );
    let body: serde_json::Value = serde_json::from_str(out.lines().last().unwrap()).unwrap();
    assert_eq!(body["error"]["code"], -31001);
    assert_eq!(body["error"]["data"]["rule"], "default");
}

#[test]
fn explain_conditions_and_stdin() {
    let body = r#"{"jsonrpc":"2.0","id":"a","method":"tools/call","params":{"name":"vm_agent_exec","arguments":{"vmid":100,"command":"rm -rf /"}}}"#;
    let (status, out, _) = run_with(&["explain", "envoy/policy-conditions.json", "-"], body);
    assert_eq!(status, 3);
    assert!(out.starts_with("decision: denied\nrule:     tools.vm_agent_exec.deny_if[0]\nreason:   destructive commands are not allowed\n"), "{out}");
    let body = body.replace("rm -rf /", "uptime");
    let (status, out, _) = run_with(&["explain", "envoy/policy-conditions.json", "-"], &body);
    assert_eq!(status, 0);
    assert!(out.starts_with("decision: allowed\nrule:     tools.vm_agent_exec\n"), "{out}");
}

#[test]
fn explain_protocol_errors_and_passes() {
    // Not JSON at all: refused before any policy, 400, id null.
    let (status, out, _) = run_with(&["explain", "envoy/policy.json", "-"], "nope");
    assert_eq!(status, 3);
    assert!(out.starts_with("decision: invalid\n"), "{out}");
    assert!(
        out.contains("\nerror:    parse_error\nstatus:   400 (answered by the filter, JSON-RPC error -32700;"),
        "{out}"
    );
    // Lifecycle methods pass.
    let (status, out, _) =
        run_with(&["explain", "envoy/policy.json", "-"], r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#);
    assert_eq!(status, 0);
    assert!(out.starts_with("decision: passed\nrule:     -\nreason:   -\nmethod:   ping\n"), "{out}");
}

#[test]
fn explain_grant_option() {
    // sha256("agent-1") is registered: only that token gets through, and it shows by its label.
    let p = scratch(
        "grants.json",
        r#"{"version":"1","default":"allow","gateway":{"grants":[{"sha256":"6ff3b3bd11c44cac620c43d5b65377bd2ba7e8951c1e835ae40c96733730982b","label":"agent-one"}]}}"#,
    );
    let req = scratch("reboot_vm.json", &call("reboot_vm"));
    let (status, out, _) = run(&["explain", &p, &req, "--grant", "agent-1"]);
    assert_eq!(status, 0);
    assert!(out.contains("\ngrant:    agent-one\n"), "{out}");
    let (status, out, _) = run(&["explain", &p, &req, "--grant=agent-1"]);
    assert_eq!(status, 0, "{out}");
    // The default grant, `cli`, is not registered: 401.
    let (status, out, _) = run(&["explain", &p, &req]);
    assert_eq!(status, 3);
    assert!(
        out.starts_with("decision: no_grant\nrule:     -\nreason:   the credential is not a registered grant\n"),
        "{out}"
    );
    assert!(out.contains("\nstatus:   401 (answered by the filter, JSON-RPC error -31003; nothing reaches the server)\nheader:   www-authenticate: Bearer\n"), "{out}");
    // With gateway.grant_header the grant goes in that header instead of Authorization.
    let p = scratch("grant-header.json", r#"{"version":"1","default":"allow","gateway":{"grant_header":"X-Agent"}}"#);
    let (status, out, _) = run(&["explain", &p, &req, "--grant", "agent-1"]);
    assert_eq!(status, 0, "{out}");
    assert!(out.contains("\ngrant:    sha256:6ff3b3bd11c4\n"), "{out}");
}

#[test]
fn explain_dry_run_forwards() {
    let p = scratch("dry.json", r#"{"version":"1","default":"deny","gateway":{"mode":"dry_run"}}"#);
    let req = scratch("dry-delete.json", &call("delete_vm"));
    let (status, out, _) = run(&["explain", &p, &req]);
    assert_eq!(status, 0);
    assert!(out.starts_with("decision: would_deny\nrule:     default\n"), "{out}");
    assert!(out.contains("\nstatus:   forwarded to the MCP server (dry run: the policy would refuse it;"), "{out}");
}

#[test]
fn explain_invalid_policy_exits_1() {
    let p = scratch(
        "explain-invalid.json",
        r#"{"version":"1","tools":{"x":{"limits":[{"counter":"","window":"day","max":1},{"counter":"c","window":"day","max":0}]}}}"#,
    );
    let req = scratch("x.json", &call("x"));
    assert_eq!(
        run(&["explain", &p, &req]),
        (
            1,
            String::new(),
            format!(
                "{p}: invalid policy at tools.x.limits[0].counter: must not be empty\n\
                 {p}: invalid policy at tools.x.limits[1].max: must be at least 1\n"
            )
        )
    );
}

#[test]
fn usage() {
    // No command: the summary (what `-h` prints), on stderr, status 2.
    let (status, out, err) = run(&[]);
    let (_, summary, _) = run(&["-h"]);
    assert_eq!((status, out.as_str(), err.as_str()), (2, "", summary.as_str()));
    assert!(
        summary.starts_with(
            "Check and explain mcp-policy-filter policies (PolicyLayer policy.json)\n\n\
             Usage: mcp-policy <COMMAND>\n\n\
             Commands:\n\
             \x20 check     Check policies: load each one exactly as the Envoy filter does\n\
             \x20 explain   Decide a request with the filter's own code, and say why\n\
             \x20 apply     Put a policy live in a running Envoy, through the ECDS file it reads\n\
             \x20 grant-id  Print the grant id of a token read from standard input\n\
             \x20 schema    Print the JSON Schema of the policy file (generated from the filter's config types)\n"
        ),
        "{summary}"
    );
    // --help: what it runs, the commands, and every exit status.
    let (status, out, err) = run(&["--help"]);
    assert_eq!((status, err.as_str()), (0, ""));
    assert!(
        out.contains("\nRuns the filter's own code: a policy is read exactly as the filter reads it in Envoy"),
        "{out}"
    );
    assert!(
        out.ends_with(
            "Exit status:\n\
             \x20 0  check: every policy is valid; explain: the request would be forwarded to the MCP server;\n\
             \x20    apply: Envoy loaded the policy\n\
             \x20 1  a policy is invalid\n\
             \x20 2  usage error, or a file cannot be read\n\
             \x20 3  explain: the filter would refuse the request (it answers the agent itself)\n\
             \x20 4  explain: the request would be held until a person approves it (require_approval)\n\
             \x20 5  apply: Envoy refused the policy, or did not confirm it in time (the previous one serves)\n"
        ),
        "{out}"
    );
    // A command's help: its options with their defaults, and its own exit statuses.
    let (status, out, err) = run(&["explain", "--help"]);
    assert_eq!((status, err.as_str()), (0, ""));
    assert!(out.contains("\nUsage: mcp-policy explain [OPTIONS] <POLICY.json> <REQUEST.json>\n"), "{out}");
    assert!(
        out.contains(
            "      --grant <LABEL>\n\
             \x20         The agent's credential (default `cli`): sent as `Authorization:\n\
             \x20         Bearer LABEL`, or as `gateway.grant_header` when the policy sets one\n"
        ),
        "{out}"
    );
    assert!(
        out.ends_with(
            "Exit status:\n\
             \x20 0  the request would be forwarded to the MCP server (also in dry run)\n\
             \x20 1  the policy is invalid\n\
             \x20 2  usage error, or a file cannot be read\n\
             \x20 3  the filter would refuse the request (it answers the agent itself)\n\
             \x20 4  the request would be held until a person approves it (require_approval)\n"
        ),
        "{out}"
    );
    assert_eq!(run(&["help", "explain"]).1, out);
    // Usage errors: what is wrong, the usage, where to read more; status 2.
    let more = "For more information, try '--help'.\n";
    let explain_usage = "Usage: mcp-policy explain [OPTIONS] <POLICY.json> <REQUEST.json>\n\n";
    for (args, message) in [
        (&["frob"][..], format!("error: unrecognized subcommand 'frob'\n\nUsage: mcp-policy <COMMAND>\n\n{more}")),
        (
            &["check"],
            format!(
                "error: the following required arguments were not provided:\n  <POLICY.json>...\n\n\
                 Usage: mcp-policy check <POLICY.json>...\n\n{more}"
            ),
        ),
        (
            &["explain", "envoy/policy.json"],
            format!(
                "error: the following required arguments were not provided:\n  <REQUEST.json>\n\n\
                 Usage: mcp-policy explain <POLICY.json> <REQUEST.json>\n\n{more}"
            ),
        ),
        (
            &["explain", "a", "b", "--grant"],
            format!("error: a value is required for '--grant <LABEL>' but none was supplied\n\n{more}"),
        ),
        (
            &["explain", "a", "b", "--grant", "x", "--grant", "y"],
            format!("error: the argument '--grant <LABEL>' cannot be used multiple times\n\n{explain_usage}{more}"),
        ),
        (
            &["explain", "a", "b", "--grnat", "x"],
            format!(
                "error: unexpected argument '--grnat' found\n\n  tip: a similar argument exists: '--grant'\n\n\
                 Usage: mcp-policy explain --grant <LABEL> <POLICY.json> <REQUEST.json>\n\n{more}"
            ),
        ),
        (
            &["explain", "a", "b", "--grant="],
            format!("error: --grant must be non-empty, without control characters\n\n{explain_usage}{more}"),
        ),
        (
            &["explain", "a", "b", "--path", ""],
            format!(
                "error: --cluster, --authority and --path must be non-empty, without control characters\n\n\
                 {explain_usage}{more}"
            ),
        ),
        (
            &["check", "envoy/policy.json", "--strict"],
            format!(
                "error: unexpected argument '--strict' found\n\n  tip: to pass '--strict' as a value, use '-- --strict'\n\n\
                 Usage: mcp-policy check <POLICY.json>...\n\n{more}"
            ),
        ),
        (&["schema", "x"], format!("error: unexpected argument 'x' found\n\nUsage: mcp-policy schema\n\n{more}")),
    ] {
        let (status, out, err) = run(args);
        assert_eq!((status, out.as_str()), (2, ""), "{args:?}");
        assert_eq!(err, message, "{args:?}");
    }
    let (status, out, _) = run(&["--version"]);
    assert_eq!((status, out), (0, format!("mcp-policy {}\n", env!("CARGO_PKG_VERSION"))));
}

#[test]
fn explain_call_that_needs_approval_exits_4() {
    let req = scratch("start_vm.json", &call("start_vm"));
    let grant = mcp_policy_filter::grant::from_authorization(b"Bearer cli").unwrap();
    let upstream = mcp_policy_filter::approval::Upstream {
        cluster: "mcp_upstream".into(),
        authority: "127.0.0.1:10000".into(),
        path: "/mcp".into(),
    };
    let key = mcp_policy_filter::approval::key(
        &grant.id,
        &upstream,
        "start_vm",
        Some(&mcp_policy_filter::json::parse(br#"{"vmid":100,"node":"pve"}"#).unwrap()),
    );
    assert_eq!(
        run(&["explain", "envoy/policy.json", &req]),
        (
            4,
            format!(
                "decision: allowed\n\
                 rule:     tools.start_vm\n\
                 reason:   -\n\
                 method:   tools/call\n\
                 tool:     start_vm\n\
                 grant:    sha256:99bb88401742\n\
                 approval: required, key {key}\n\
                 upstream: cluster mcp_upstream, authority 127.0.0.1:10000, path /mcp\n\
                 status:   held: the approval service (cluster mcp_approvals) is asked; forwarded only once a person \
                 approved this exact call, else answered by the filter (JSON-RPC error -31007, -31008 or -31009)\n"
            ),
            String::new()
        )
    );
    // The same call to another MCP server has another key.
    let b = mcp_policy_filter::approval::Upstream {
        cluster: "mcp_b".into(),
        authority: "gw".into(),
        path: "/b/mcp".into(),
    };
    let key_b = mcp_policy_filter::approval::key(
        &grant.id,
        &b,
        "start_vm",
        Some(&mcp_policy_filter::json::parse(br#"{"vmid":100,"node":"pve"}"#).unwrap()),
    );
    let (status, out, _) =
        run(&["explain", "envoy/policy.json", &req, "--cluster", "mcp_b", "--authority=gw", "--path", "/b/mcp"]);
    assert_eq!(status, 4);
    assert!(
        out.contains(&format!("approval: required, key {key_b}\nupstream: cluster mcp_b, authority gw, path /b/mcp\n")),
        "{out}"
    );
    assert_ne!(key_b, key);
}
