//! `check`: summaries, warnings, every error with its path, syntax errors shown in place, and
//! unreadable files.

use mcp_policy_core::config::UNBOUND_SESSIONS_WARNING;

use super::{run, run_env, scratch};

/// A session key of the least length, for MCPF_SESSION_KEY.
const KEY: &str = "0123456789abcdef0123456789abcdef";

#[test]
fn check_valid_policies() {
    // The shipped policies name their key by variable: set here, so there is no note.
    assert_eq!(
        run_env(&["check", "envoy/policy.json"], "", &[("MCPF_SESSION_KEY", KEY)]),
        (0, "envoy/policy.json: ok: version 1, default deny, 3 tool rules, 1 limit, 1 tool requires approval (cluster mcp_approvals, mode retry)\n".into(), String::new())
    );
    assert_eq!(
        run_env(&["check", "envoy/policy-conditions.json"], "", &[("MCPF_SESSION_KEY", KEY)]),
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
            unbound(&p) + &allows_nothing(&p)
        )
    );
    let p = scratch("valid-audit-off.json", r#"{"version":"1","gateway":{"audit":"off","filter_state":true}}"#);
    assert_eq!(
        run(&["check", &p]),
        (
            0,
            format!("{p}: ok: version 1, default deny, 0 tool rules, 0 limits, audit off\n"),
            unbound(&p) + &allows_nothing(&p)
        )
    );
}

/// The warning of a policy under `default: "deny"` that allows no tool.
fn allows_nothing(p: &str) -> String {
    format!(
        "{p}: warning: no tool is allowed: `default` is deny and no entry of `tools` allows one, so every \
         tools/call is refused (add an entry such as \"tools\": {{\"list_vms\": {{}}}})\n"
    )
}

/// Entries that can never take effect: an allowed tool `hide` hides, a denied tool's other rules.
#[test]
fn check_warns_about_rules_that_never_apply() {
    let p = scratch(
        "dead.json",
        r#"{"version":"1","default":"deny","hide":["secret"],"tools":{"secret":{},"rm":{"action":"deny",
            "limits":[{"counter":"rm","window":"minute","max":1}]},"ls":{"action":"deny","reason":"no"},"cat":{"action":"allow","reason":"never shown"},
            "rm2":{"action":"require_approval","reason":"shown to the approver"}},
            "gateway":{"protocol_versions":["2026-07-28"],"approval":{"cluster":"mcp_approvals"}}}"#,
    );
    let (status, _, err) = run(&["check", &p]);
    assert_eq!(
        (status, err),
        (
            0,
            format!(
                "{p}: warning: tools.\"cat\".reason: the tool is allowed, so no agent is shown it (a tool's reason \
                 is shown when it is denied or needs an approval; argument conditions take their own)\n\
                 {p}: warning: tools.\"rm\": its action is deny, so its limits, conditions, approval, result rules \
                 and marks never apply (every call is refused first)\n\
                 {p}: warning: tools.\"secret\" allows a tool that `hide` hides: hiding refuses every call of it \
                 (take it out of one of the two)\n\
"
            )
        )
    );
}

#[test]
fn check_warns_about_unbound_sessions_and_reads_keys_from_its_own_environment() {
    let keyless = scratch("keyless.json", r#"{"version":"1","default":"allow"}"#);
    let summary = |p: &str| format!("{p}: ok: version 1, default allow, 0 tool rules, 0 limits\n");
    assert_eq!(
        run(&["check", &keyless]),
        (0, summary(&keyless), format!("{keyless}: warning: {UNBOUND_SESSIONS_WARNING}\n"))
    );
    // No version with sessions accepted: nothing to bind, no warning.
    let modern = scratch(
        "modern-only.json",
        r#"{"version":"1","default":"allow","gateway":{"protocol_versions":["2026-07-28"]}}"#,
    );
    assert_eq!(run(&["check", &modern]), (0, summary(&modern), String::new()));
    // A key named by variable: checked as if set when this environment lacks it (the wasm build
    // reads the VM's, the native build Envoy's), read from here when set, so a short one is refused
    // as the filter would refuse it.
    let by_env = scratch(
        "key-by-env.json",
        r#"{"version":"1","default":"allow","gateway":{"session_key":{"current_env":"MCPF_SESSION_KEY"}}}"#,
    );
    assert_eq!(run(&["check", &by_env]), (0, summary(&by_env), unset_note(&by_env)));
    let key = KEY;
    assert_eq!(run_env(&["check", &by_env], "", &[("MCPF_SESSION_KEY", key)]), (0, summary(&by_env), String::new()));
    assert_eq!(
        run_env(&["check", &by_env], "", &[("MCPF_SESSION_KEY", "short")]),
        (
            1,
            String::new(),
            format!("{by_env}: invalid policy at gateway.session_key.current_env: the key must be at least 32 bytes\n")
        )
    );
    // The shipped policies bind sessions: no warning, and only the note while the key is unset.
    for shipped in ["envoy/policy.json", "envoy/policy-conditions.json"] {
        let (status, _, err) = run(&["check", shipped]);
        assert_eq!((status, err), (0, unset_note(shipped)), "{shipped}");
        let (status, _, err) = run_env(&["check", shipped], "", &[("MCPF_SESSION_KEY", key)]);
        assert_eq!((status, err.as_str()), (0, ""), "{shipped}");
    }
}

/// The note of a policy whose key variable MCPF_SESSION_KEY is not set where it is checked.
pub fn unset_note(place: &str) -> String {
    format!(
        "{place}: note: gateway.session_key.current_env: MCPF_SESSION_KEY is not set here, so the key was checked \
         as if set; Envoy refuses the policy unless MCPF_SESSION_KEY is set where the filter reads it (the native \
         build: Envoy's own environment; the wasm build: its VM's, listed in \
         vm_config.environment_variables.host_env_keys)\n"
    )
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
                 `limits`, `require`, `deny_if`, `result`, `marks`, `pin`\n"
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
    let (status, out, err) = run_env(&["check", "envoy/policy.json", &bad], "", &[("MCPF_SESSION_KEY", KEY)]);
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
                 closes at line 3, column 28 of the policy text; line 4, column 1 has more (data after the JSON value)\n\
                 \x20  3 |   \"tools\": {{\"list_vms\": {{}}}}}}\n     |                            ^\n\
                 \x20  4 | }}\n     | ^\n"
            )
        )
    );
}

#[test]
fn check_a_duplicate_key_shows_both_names() {
    // The parser reports the object that holds the repeat (`tools`, line 3); the author needs the
    // two names, lines 4 and 6.
    let p = scratch(
        "duplicate.json",
        "{\n  \"version\": \"1\",\n  \"tools\": {\n    \"list_vms\": {},\n    \"vm_start\": {},\n    \"list_vms\": {\"action\": \"deny\"}\n  }\n}\n",
    );
    assert_eq!(
        run(&["check", &p]),
        (
            1,
            String::new(),
            format!(
                "{p}: invalid policy at . (the whole document): not a strict JSON document: duplicate object key \
                 \"list_vms\" at line 6, column 5 of the policy text, first at line 4, column 5\n\
                 \x20  4 |     \"list_vms\": {{}},\n     |     ^ this name\n\
                 \x20  6 |     \"list_vms\": {{\"action\": \"deny\"}}\n     |     ^ again in the same object\n"
            )
        )
    );
    // Two names a server may read as one (Go's encoding/json folds case): refused the same way.
    let p = scratch(
        "folded.json",
        "{\n  \"version\": \"1\",\n  \"tools\": {\n    \"list_vms\": {},\n    \"List_VMs\": {\"action\": \"deny\"}\n  }\n}\n",
    );
    assert_eq!(
        run(&["check", &p]),
        (
            1,
            String::new(),
            format!(
                "{p}: invalid policy at . (the whole document): not a strict JSON document: object keys equal after \
                 case folding or removing invisible characters: \"List_VMs\" at line 5, column 5 of the policy text, \
                 and \"list_vms\" at line 4, column 5\n\
                 \x20  4 |     \"list_vms\": {{}},\n     |     ^ this name\n\
                 \x20  5 |     \"List_VMs\": {{\"action\": \"deny\"}}\n     |     ^ the same name once folded (case; \
                 invisible, unassigned and private-use characters)\n"
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
                "{p}: invalid policy at . (the whole document): not a strict JSON document: unexpected character at line 5, column 3 of the policy text\n   5 |   }}\n     |   ^\n"
            )
        )
    );
    // Columns count characters (the é is one), and a missing end names the line after the last.
    let p = scratch("syntax-utf8.json", "{\"version\":\"1\",\"tools\":{\"d\u{e9}l\":{\"action\":\"deny\",}}}");
    let (status, _, err) = run(&["check", &p]);
    assert_eq!(status, 1);
    assert!(err.contains("unexpected character at line 1, column 48 of the policy text\n"), "{err}");
    let p = scratch("syntax-end.json", "{\"version\":\"1\",\n");
    let (_, _, err) = run(&["check", &p]);
    assert!(
        err.ends_with("unexpected end of input at line 2, column 1 of the policy text\n   2 | \n     | ^\n"),
        "{err}"
    );
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
fn check_warns_about_tools_whose_names_fold_together() {
    // `vm-agent-exec` with its own empty rule beside a limited `vm_agent_exec`: a server that reads
    // `-` as `_` runs one tool, which the empty rule lets through without the limit.
    let p = scratch(
        "folded-siblings.json",
        r#"{"version":"1","gateway":{"protocol_versions":["2026-07-28"]},"tools":{
            "vm_agent_exec":{"limits":[{"counter":"c","window":"minute","max":1}]}," vm-agent-exec":{},"list_vms":{}}}"#,
    );
    assert_eq!(
        run(&["check", &p]),
        (
            0,
            format!("{p}: ok: version 1, default deny, 3 tool rules, 1 limit\n"),
            format!(
                "{p}: warning: tools \" vm-agent-exec\", \"vm_agent_exec\" fold to one name ('-' read as '_', \
                 surrounding spaces, case and Unicode forms): a server that folds names runs one tool, which each of \
                 these entries then lets through on its own terms; give the tool one entry\n"
            )
        )
    );
    // A denied entry among them: the filter refuses every name that folds onto it, so the allowed
    // entry never applies (not the warning of names that fold together).
    let denied = scratch(
        "folded-denied.json",
        r#"{"version":"1","gateway":{"protocol_versions":["2026-07-28"]},"tools":{"vm_agent_exec":{"action":"deny"},"vm-agent-exec":{},"list_vms":{}}}"#,
    );
    assert_eq!(
        run(&["check", &denied]).2,
        format!(
            "{denied}: warning: tools.\"vm-agent-exec\" folds onto tools.\"vm_agent_exec\", which is denied: the \
             filter refuses every name that folds onto a denied tool's, this one too\n"
        )
    );
    // Two limits of one entry on one counter: the larger max never binds.
    let twice = scratch(
        "two-limits.json",
        r#"{"version":"1","gateway":{"protocol_versions":["2026-07-28"]},"tools":{"x":{"limits":[
            {"counter":"c","window":"minute","max":100},{"counter":"c","window":"minute","max":10},
            {"counter":"c","window":"hour","max":50}]}}}"#,
    );
    assert_eq!(
        run(&["check", &twice]).2,
        format!(
            "{twice}: warning: tools.x.limits[0]: never binds: tools.x.limits[1] counts the same counter (c, minute) \
             with a smaller max\n"
        )
    );
    // A tool's own limit that `all_tools` outbinds on the same counter.
    let under_all = scratch(
        "all-tools-limits.json",
        r#"{"version":"1","gateway":{"protocol_versions":["2026-07-28"]},"all_tools":{"limits":[{"counter":"c","window":"minute","max":5}]},
            "tools":{"x":{"limits":[{"counter":"c","window":"minute","max":10}]}}}"#,
    );
    assert_eq!(
        run(&["check", &under_all]).2,
        format!(
            "{under_all}: warning: tools.x.limits[0]: never binds: all_tools.limits[0] counts the same counter (c, \
             minute) with a smaller max\n"
        )
    );
    // In dry run the filter forwards what it would refuse: no rule is dead.
    let dry = scratch(
        "folded-dry.json",
        r#"{"version":"1","gateway":{"protocol_versions":["2026-07-28"],"mode":"dry_run"},"hide":["x"],"tools":{"vm_agent_exec":{"action":"deny","limits":[{"counter":"c","window":"minute","max":1}]},"vm-agent-exec":{},"x":{}}}"#,
    );
    assert_eq!(run(&["check", &dry]).2, "");
    // In a set, each member's tools, named by the member.
    let set = scratch(
        "folded-set.json",
        r#"{"version":"1","policies":{"ops":{"version":"1","tools":{"a_b":{"limits":[{"counter":"c","window":"minute","max":1}]},"a-b":{}}},
            "ro":{"version":"1","tools":{"a_b":{}}}},"attach":[{"policy":"ro","when":[{"grant":"sha256:0000000000000000000000000000000000000000000000000000000000000000"}]}],
            "gateway":{"protocol_versions":["2026-07-28"]}}"#,
    );
    let (status, _, stderr) = run(&["check", &set]);
    assert_eq!(
        (status, stderr),
        (
            0,
            format!(
                "{set}: warning: policies.ops: tools \"a-b\", \"a_b\" fold to one name ('-' read as '_', surrounding \
                 spaces, case and Unicode forms): a server that folds names runs one tool, which each of these \
                 entries then lets through on its own terms; give the tool one entry\n"
            )
        )
    );
}
