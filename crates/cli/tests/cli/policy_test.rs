//! `mcp-policy test`: exact reports, exit statuses, the JUnit XML, bad input, and the shipped tests
//! files (they pass).

use super::{call, run, scratch};

const POLICY: &str = "envoy/policy.json";

#[test]
fn the_shipped_tests_files_pass() {
    for (policy, tests, n) in [
        ("envoy/policy.json", "envoy/policy.tests.yaml", 7),
        ("envoy/policy-conditions.json", "envoy/policy-conditions.tests.yaml", 6),
        ("docs/examples/policy.json", "docs/examples/policy.tests.yaml", 8),
    ] {
        let (status, out, err) = run(&["test", policy, tests]);
        assert_eq!((status, err.as_str()), (0, ""), "{out}");
        assert!(out.starts_with(&format!("running {n} cases of {tests} on {policy}\n")), "{out}");
        assert!(out.ends_with(&format!("\ntest result: ok. {n} passed; 0 failed\n")), "{out}");
        assert_eq!(out.matches(" ... ok\n").count(), n, "{out}");
    }
}

const TWO_CASES: &str = "\
cases:
  - name: list_vms is allowed
    call: {tool: list_vms}
    expect: {kind: allowed, rule: tools.list_vms}
  - name: the 11th exec is refused
    grant: ci-agent
    state: {counters: {vm_agent_exec_rate: 10}}
    call: {tool: vm_agent_exec, arguments: {vmid: 1}}
    expect: {kind: denied, rule: default, reason: not allowed}
";

#[test]
fn a_failed_case_shows_expected_and_actual_and_exits_1() {
    let tests = scratch("two.tests.yaml", TWO_CASES);
    let junit = scratch("two.junit.xml", "");
    let (status, out, err) = run(&["test", POLICY, &tests, "--junit", &junit]);
    assert_eq!((status, err.as_str()), (1, ""));
    assert_eq!(
        out,
        format!(
            "running 2 cases of {tests} on envoy/policy.json\n\
             case list_vms is allowed ... ok\n\
             case the 11th exec is refused ... FAILED\n\
             \n\
             failures:\n\
             \n\
             ---- the 11th exec is refused ----\n\
             --- expected\n\
             +++ actual\n\
             -kind:   denied\n\
             +kind:   rate_limited\n\
             -rule:   default\n\
             +rule:   tools.vm_agent_exec.limits[0]\n\
             -reason: contains \"not allowed\"\n\
             +reason: limit vm_agent_exec_rate (10 per minute) reached\n\
             \n\
             test result: FAILED. 1 passed; 1 failed\n"
        )
    );
    assert_eq!(
        std::fs::read_to_string(&junit).unwrap(),
        format!(
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n\
             <testsuites name=\"mcp-policy test\" tests=\"2\" skipped=\"0\" failures=\"1\" errors=\"0\">\n\
             \x20   <testsuite name=\"{tests}\" tests=\"2\" skipped=\"0\" errors=\"0\" failures=\"1\">\n\
             \x20       <properties>\n\
             \x20           <property name=\"policy\" value=\"envoy/policy.json\"/>\n\
             \x20       </properties>\n\
             \x20       <testcase name=\"list_vms is allowed\" classname=\"{tests}\"/>\n\
             \x20       <testcase name=\"the 11th exec is refused\" classname=\"{tests}\">\n\
             \x20           <failure message=\"the decision differs from the expected one\" type=\"decision\">--- expected\n\
             +++ actual\n\
             -kind:   denied\n\
             +kind:   rate_limited\n\
             -rule:   default\n\
             +rule:   tools.vm_agent_exec.limits[0]\n\
             -reason: contains &quot;not allowed&quot;\n\
             +reason: limit vm_agent_exec_rate (10 per minute) reached\n\
             </failure>\n\
             \x20       </testcase>\n\
             \x20   </testsuite>\n\
             </testsuites>\n"
        )
    );
}

#[test]
fn json_tests_and_one_prior_call_less() {
    let tests = scratch(
        "one.tests.json",
        r#"{"cases": [{"name": "9 prior calls: the 10th passes", "grant": "ci-agent",
            "state": {"counters": {"vm_agent_exec_rate": 9}},
            "call": {"tool": "vm_agent_exec", "arguments": {"vmid": 1}},
            "expect": {"kind": "allowed", "rule": "tools.vm_agent_exec"}}]}"#,
    );
    let (status, out, err) = run(&["test", POLICY, &tests]);
    assert_eq!((status, err.as_str()), (0, ""));
    assert_eq!(
        out,
        format!(
            "running 1 case of {tests} on envoy/policy.json\ncase 9 prior calls: the 10th passes ... ok\n\n\
             test result: ok. 1 passed; 0 failed\n"
        )
    );
}

/// One counter name in two windows is two counters: prior calls fill those the call counts, a
/// count by window fills one of them, and a counter two tools share holds up to the larger max.
#[test]
fn prior_calls_fill_the_counters_the_call_counts() {
    let policy = scratch(
        "windows.json",
        r#"{"version": "1", "default": "deny", "tools": {
            "x": {"limits": [{"counter": "c", "window": "minute", "max": 10},
                             {"counter": "c", "window": "hour", "max": 50}]},
            "y": {"limits": [{"counter": "c", "window": "hour", "max": 5}]},
            "z": {"limits": [{"counter": "c", "window": "minute", "max": 20}]},
            "h": {"limits": [{"counter": "c", "window": "minute", "max": 100}]}}, "hide": ["h"]}"#,
    );
    let tests = scratch(
        "windows.tests.yaml",
        "cases:
           - {name: x at 7 of 10, state: {counters: {c: 7}}, call: {tool: x}, expect: {kind: allowed}}
           - {name: x at 10 of 10, state: {counters: {c: 10}}, call: {tool: x}, expect: {kind: rate_limited, rule: 'tools.x.limits[0]'}}
           - {name: x at 50 an hour, state: {counters: {c: {minute: 3, hour: 50}}}, call: {tool: x}, expect: {kind: rate_limited, rule: 'tools.x.limits[1]'}}
           - {name: x at 15 a minute by z, state: {counters: {c: {minute: 15}}}, call: {tool: x}, expect: {kind: rate_limited, rule: 'tools.x.limits[0]'}}
           - {name: y at 4 of 5, state: {counters: {c: 4}}, call: {tool: y}, expect: {kind: allowed}}
           - {name: a notification passes, call: {method: notifications/initialized}, expect: {kind: passed}}
           - {name: y as a method, state: {counters: {c: 5}}, call: {method: tools/call, params: {name: y, arguments: {}}}, expect: {kind: rate_limited}}
",
    );
    let (status, out, err) = run(&["test", &policy, &tests]);
    assert_eq!((status, err.as_str()), (0, ""), "{out}");
    assert!(out.ends_with("\ntest result: ok. 7 passed; 0 failed\n"), "{out}");
    // x and z share the minute counter: it holds up to z's 20 (h's 100 never counts: h is hidden).
    let over = scratch(
        "over.tests.yaml",
        "cases:\n  - {name: a, state: {counters: {c: 21}}, call: {tool: z}, expect: {kind: allowed}}\n",
    );
    let (status, _, err) = run(&["test", &policy, &over]);
    assert_eq!(
        (status, err.as_str()),
        (2, format!("{over}: cases[0].state.counters.c: 21 calls in the minute window, above the max of 20 (tools.z.limits[0]), the most any limit counting in it admits (by window: {{\"minute\": N}})\n").as_str())
    );
}

#[test]
fn bad_input_exits_2_with_where_and_why() {
    let case = |extra: &str, call: &str| {
        format!("cases:\n  - name: a\n    call: {call}\n    expect: {{kind: allowed}}\n{extra}")
    };
    for (name, text, message) in [
        ("unknown.yaml", case("    state: {marks: {x: 1}}\n", "{tool: t}"), "cases[0].state: unknown field `marks`, expected `counters` or `pins` at line 5 column 13"),
        ("claims.yaml", case("    claims: {sub: alice}\n", "{tool: t}"), "cases[0].claims: the policy reads no claims (it has no gateway.identity)"),
        ("counter.yaml", case("    state: {counters: {nope: 1}}\n", "{tool: t}"), "cases[0].state.counters.nope: the policy has no limit with this counter (its counters: vm_agent_exec_rate)"),
        ("max.yaml", case("    state: {counters: {vm_agent_exec_rate: 11}}\n", "{tool: vm_agent_exec}"), "cases[0].state.counters.vm_agent_exec_rate: 11 calls in the minute window, above the max of 10 (tools.vm_agent_exec.limits[0]), the most any limit counting in it admits (by window: {\"minute\": N})"),
        ("other-tool.yaml", case("    state: {counters: {vm_agent_exec_rate: 1}}\n", "{tool: list_vms}"), "cases[0].state.counters.vm_agent_exec_rate: the call counts no limit with this counter (it is counted by tools.vm_agent_exec.limits[0])"),
        ("method.yaml", case("    state: {counters: {vm_agent_exec_rate: 1}}\n", "{method: tools/list}"), "cases[0].state.counters.vm_agent_exec_rate: the call counts no limit: it is not subject to policy"),
        ("window.yaml", case("    state: {counters: {vm_agent_exec_rate: {hour: 1}}}\n", "{tool: vm_agent_exec}"), "cases[0].state.counters.vm_agent_exec_rate: hour: the call counts this counter in no such window (its windows: minute)"),
        ("no-window.yaml", case("    state: {counters: {vm_agent_exec_rate: {hours: 1}}}\n", "{tool: vm_agent_exec}"), "cases[0].state.counters.vm_agent_exec_rate: hours: not a window (second, minute, hour or day)"),
        ("denied.yaml", case("    state: {counters: {vm_agent_exec_rate: 1}}\n", "{tool: delete_vm}"), "cases[0].state.counters.vm_agent_exec_rate: the call counts no limit: default refuses it first"),
        ("no-windows.yaml", case("    state: {counters: {vm_agent_exec_rate: {}}}\n", "{tool: vm_agent_exec}"), "cases[0].state.counters.vm_agent_exec_rate: no window given (second, minute, hour or day)"),
        ("prior.yaml", case("    state: {counters: {vm_agent_exec_rate: ten}}\n", "{tool: vm_agent_exec}"), "cases[0].state.counters: each counter takes a number of calls (a whole number, 0 or more), or calls by window, such as {\"minute\": 3, \"hour\": 95} at line 5 column 23"),
        ("both.yaml", case("", "{tool: t, method: m}"), "cases[0].call: give `tool` or `method`, not both"),
        ("empty.yaml", "cases: []\n".to_owned(), "cases: no cases"),
        ("list.yaml", "- name: a\n".to_owned(), "invalid type: sequence, expected a mapping with a list of cases: `cases: [{name, call, expect}, ...]`"),
        ("word.yaml", "cases:\n  - x\n".to_owned(), "cases[0]: invalid type: string \"x\", expected a case, a mapping: `{name, call, expect}` (and `grant`, `claims`, `state`) at line 2 column 5"),
        // A word of the file with a bidi override and a NUL: shown as `?`, never raw.
        ("bidi.yaml", "cases:\n  - name: a\n    call: {tool: t}\n    expect: {kind: \"allo\\u202ew\\0ed\"}\n".to_owned(), "cases[0].expect.kind: unknown variant `allo?w?ed`, expected one of `allowed`, `passed`, `denied`, `rate_limited`, `no_grant`, `invalid`, `limiter_unavailable`, `approved`, `approval_required`, `approval_denied`, `approval_unavailable`, `would_deny` at line 4 column 20"),
    ] {
        let tests = scratch(name, &text);
        let (status, out, err) = run(&["test", POLICY, &tests]);
        assert_eq!((status, out.as_str(), err.as_str()), (2, "", format!("{tests}: {message}\n").as_str()), "{name}");
    }
    // An invalid policy is bad input too (1 means a case failed).
    let policy = scratch("bad-policy.json", r#"{"version": "1", "tools": 3}"#);
    let (status, out, _) = run(&["test", &policy, "envoy/policy.tests.yaml"]);
    assert_eq!((status, out.as_str()), (2, ""));
    let (status, _, err) = run(&["test", POLICY, "no-such.tests.yaml"]);
    assert_eq!(status, 2);
    assert!(err.starts_with("mcp-policy: cannot read no-such.tests.yaml: "), "{err}");
}

#[test]
fn the_help_gives_the_exit_statuses() {
    let (status, out, _) = run(&["test", "--help"]);
    assert_eq!(status, 0);
    assert!(
        out.ends_with(
            "Exit status:\n\
             \x20 0  every case got the decision expected\n\
             \x20 1  a case got another decision\n\
             \x20 2  bad input: usage error, the policy or the tests file is invalid or cannot be read, or a\n\
             \x20    case cannot be run (e.g. a counter the policy has no limit for)\n"
        ),
        "{out}"
    );
}

/// `schema/policy-tests.schema.json` is `mcp-policy schema --tests`, and every shipped tests file is
/// valid under it.
#[test]
fn the_committed_tests_schema_is_generated_output() {
    let (status, generated, _) = run(&["schema", "--tests"]);
    assert_eq!(status, 0);
    let root = std::path::Path::new(super::common::ROOT);
    let committed = std::fs::read_to_string(root.join("schema/policy-tests.schema.json")).unwrap();
    assert!(generated == committed, "schema/policy-tests.schema.json is stale: regenerate it with `make schema`");
    let schema: serde_json::Value = serde_json::from_str(&committed).unwrap();
    assert!(jsonschema::meta::is_valid(&schema));
    let validator = jsonschema::validator_for(&schema).unwrap();
    for file in ["envoy/policy.tests.yaml", "envoy/policy-conditions.tests.yaml", "docs/examples/policy.tests.yaml"] {
        let doc: serde_json::Value =
            serde_norway::from_str(&std::fs::read_to_string(root.join(file)).unwrap()).unwrap();
        let errors: Vec<String> = validator.iter_errors(&doc).map(|e| e.to_string()).collect();
        assert!(errors.is_empty(), "{file}: {errors:?}");
    }
    assert!(!validator.is_valid(&serde_json::json!({"cases": [], "extra": 1})));
    let case = |call: serde_json::Value| serde_json::json!({"cases": [{"name": "a", "call": call, "expect": {"kind": "allowed"}}]});
    assert!(validator.is_valid(&case(serde_json::json!({"tool": "t", "arguments": {}}))));
    assert!(validator.is_valid(&case(serde_json::json!({"method": "tools/list", "params": {}}))));
    for call in [
        serde_json::json!({"tool": "t", "method": "m"}),
        serde_json::json!({"tool": "t", "params": {}}),
        serde_json::json!({"method": "m", "arguments": {}}),
        serde_json::json!({}),
    ] {
        assert!(!validator.is_valid(&case(call.clone())), "{call}");
    }
}

/// With `gateway.grants` and `gateway.grant_header`, a case's grant is the header's value, counted
/// under its own grant id; a grant not listed is refused `no_grant`.
#[test]
fn registered_grants_in_a_header_are_counted_under_their_id() {
    let (status, entry, _) = super::run_with(&["grant-id", "--header", "--label", "ci"], "team-ci-token");
    assert_eq!(status, 0);
    let policy = scratch(
        "grants.json",
        &format!(
            r#"{{"version": "1", "tools": {{"exec": {{"limits": [{{"counter": "c", "window": "hour", "max": 3}}]}}}},
              "gateway": {{"grant_header": "x-grant", "grants": [{}]}}}}"#,
            entry.trim()
        ),
    );
    let tests = scratch(
        "grants.tests.yaml",
        "cases:\n\
         \x20 - {name: listed, grant: team-ci-token, call: {tool: exec}, expect: {kind: allowed, rule: tools.exec}}\n\
         \x20 - {name: full, grant: team-ci-token, state: {counters: {c: 3}}, call: {tool: exec}, expect: {kind: rate_limited}}\n\
         \x20 - {name: not listed, grant: other, call: {tool: exec}, expect: {kind: no_grant, reason: not a registered grant}}\n",
    );
    let (status, out, err) = run(&["test", &policy, &tests]);
    assert_eq!((status, err.as_str()), (0, ""), "{out}");
    assert!(out.ends_with("\ntest result: ok. 3 passed; 0 failed\n"), "{out}");
}

/// A pinned read-only tool under default deny: `default_for` allows it once a listing verified it.
const PINNED: &str = r#"{"version": "1", "default": "deny",
  "pins": {"read_vm": {"pin": "sha256:abababababababababababababababababababababababababababababababab",
                       "annotations": {"readOnlyHint": true}}},
  "default_for": [{"when": {"readOnlyHint": true}, "action": "allow"}]}"#;

#[test]
fn pinned_tools_by_annotations_in_tests_and_explain() {
    let policy = scratch("pinned.json", PINNED);
    let tests = scratch(
        "pinned.tests.yaml",
        "cases:\n\
         - {name: before a listing, call: {tool: read_vm}, expect: {kind: denied, rule: 'default_for[0]', reason: only once this Envoy has listed it}}\n\
         - {name: listed matching, state: {pins: {read_vm: matched}}, call: {tool: read_vm}, expect: {kind: allowed, rule: 'default_for[0]'}}\n\
         - {name: listed changed, state: {pins: {read_vm: changed}}, call: {tool: read_vm}, expect: {kind: denied, reason: changed since it was pinned}}\n",
    );
    let (status, out, err) = run(&["test", &policy, &tests]);
    assert_eq!((status, err.as_str()), (0, ""), "{out}");
    assert!(out.ends_with("test result: ok. 3 passed; 0 failed\n"), "{out}");
    let bad = scratch(
        "pinned-bad.tests.yaml",
        "cases:\n- {name: a, state: {pins: {nope: matched}}, call: {tool: t}, expect: {kind: denied}}\n",
    );
    let (status, _, err) = run(&["test", &policy, &bad]);
    assert_eq!((status, err), (2, format!("{bad}: cases[0].state.pins.nope: the policy pins no tool of this name\n")));

    let req = scratch("read_vm.json", &call("read_vm"));
    let (status, out, _) = run(&["explain", &policy, &req]);
    assert_eq!(status, 3);
    assert!(out.starts_with("decision: denied\nrule:     default_for[0]\n"), "{out}");
    assert!(out.contains("note:     default_for[0] allows it once a tools/list through this Envoy showed it matching pins.read_vm (--pins-listed read_vm)\n"), "{out}");
    let (status, out, _) = run(&["explain", &policy, &req, "--pins-listed", "read_vm"]);
    assert_eq!(status, 0);
    assert!(out.starts_with("decision: allowed\nrule:     default_for[0]\n"), "{out}");
    assert!(out.contains("note:     pins.read_vm.pin: refused once a tools/list showed another definition\n"), "{out}");
    let (status, _, err) = run(&["explain", &policy, &req, "--pins-listed", "nope"]);
    assert_eq!(status, 2);
    assert!(err.contains("--pins-listed: the policy's pins record no tool \"nope\""), "{err}");
    let (status, out, _) = run(&["check", &policy]);
    let summary = "ok: version 1, default deny, 0 tool rules, 0 limits, 1 pinned unlisted tool, 1 default_for rule";
    assert_eq!((status, out), (0, format!("{policy}: {summary}\n")));
}

/// A `.json` tests file is strict JSON, as a policy is: a trailing comma is an error with its place.
#[test]
fn a_json_tests_file_is_strict_json() {
    let tests = scratch(
        "comma.tests.json",
        r#"{"cases": [{"name": "a", "call": {"tool": "list_vms"}, "expect": {"kind": "allowed"}},]}"#,
    );
    let (status, out, err) = run(&["test", POLICY, &tests]);
    assert_eq!((status, out.as_str()), (2, ""));
    assert_eq!(
        err,
        format!(
            "{tests}: not strict JSON: unexpected character at line 1, column 87\n\
             {tests}:    1 | {{\"cases\": [{{\"name\": \"a\", \"call\": {{\"tool\": \"list_vms\"}}, \"expect\": {{\"kind\": \"allowed\"}}}},]}}\n\
             {tests}:      | {}^\n",
            " ".repeat(86)
        )
    );
    // The same as YAML, which allows it, runs.
    let yaml = scratch("comma.tests.yaml", &std::fs::read_to_string(&tests).unwrap());
    assert_eq!(run(&["test", POLICY, &yaml]).0, 0);
}

/// A case's tool one or two edits from a tool the policy names is likely a typo: the run says so on
/// stderr (the case still runs; the default decides it). A name further off is no typo.
#[test]
fn a_tool_name_near_a_named_one_gets_a_note() {
    let tests = scratch(
        "typo.tests.yaml",
        "cases:\n  - {name: typo, call: {tool: vm_agent_exe}, expect: {kind: denied}}\n  - {name: other, call: {tool: delete_vm}, expect: {kind: denied}}\n  - {name: folded, call: {tool: vm-agent-exec}, expect: {kind: denied}}\n",
    );
    let (status, out, err) = run(&["test", POLICY, &tests]);
    assert_eq!(status, 0, "{out}");
    assert_eq!(
        err,
        format!(
            "{tests}: note: cases[0].call.tool: the policy names no tool \"vm_agent_exe\" (did you mean \
             \"vm_agent_exec\"?)\n\
             {tests}: note: cases[2].call.tool: the policy names no tool \"vm-agent-exec\" (did you mean \
             \"vm_agent_exec\"?)\n"
        )
    );
    // A name the filter matches to a hidden or denied one by folding is judged as that one: no note.
    let policy = scratch(
        "folds.json",
        r#"{"version":"1","default":"allow","hide":["delete_vm"],"tools":{"stop_vm":{"action":"deny"}}}"#,
    );
    let folded = scratch(
        "folds.tests.yaml",
        "cases:\n  - {name: a, call: {tool: delete-vm}, expect: {kind: denied, rule: hide}}\n  - {name: b, call: {tool: stop-vm}, expect: {kind: denied, rule: tools.stop_vm}}\n",
    );
    assert_eq!(run(&["test", &policy, &folded]).2, "");
}

/// The tests file given where the policy goes: the error says which comes first.
#[test]
fn test_with_its_arguments_swapped_says_so() {
    let (status, out, err) = run(&["test", "envoy/policy.tests.yaml", POLICY]);
    assert_eq!((status, out.as_str()), (2, ""));
    assert!(
        err.ends_with(
            "\nenvoy/policy.tests.yaml: this is a tests file, not a policy (mcp-policy test POLICY.json TESTS takes \
             the policy first)\n"
        ),
        "{err}"
    );
}

/// `test` of one case of tool `x` with `c` prior calls of counter `c` under `policy`: the error of a
/// count above `max`, the max the filter applies (`limit` its path).
fn assert_over(name: &str, policy: &str, calls: u64, max: u64, limit: &str) {
    let policy = scratch(&format!("{name}.json"), policy);
    let case = format!("cases:\n  - {{name: a, state: {{counters: {{c: {calls}}}}}, call: {{tool: x}}, expect: {{kind: rate_limited}}}}\n");
    let tests = scratch(&format!("{name}.tests.yaml"), &case);
    let (status, _, err) = run(&["test", &policy, &tests]);
    assert_eq!(
        (status, err),
        (
            2,
            format!(
                "{tests}: cases[0].state.counters.c: {calls} calls in the minute window, above the max of {max} \
                 ({limit}), the most any limit counting in it admits (by window: {{\"minute\": N}})\n"
            )
        )
    );
}

/// Of two limits of one tool on one counter the filter applies the smaller max: a count above it
/// is no state the filter can reach.
#[test]
fn prior_calls_are_held_to_the_max_the_filter_applies() {
    let policy = r#"{"version":"1","default":"deny","tools":{"x":{"limits":[{"counter":"c","window":"minute","max":5},
        {"counter":"c","window":"minute","max":3}]}}}"#;
    assert_over("two-max", policy, 4, 3, "tools.x.limits[1]");
}

/// Under `default: "deny"` no tool counts `all_tools`' limits alone: a tool's own smaller max is
/// the most its counter holds.
#[test]
fn all_tools_alone_counts_only_where_a_tool_without_an_entry_is_allowed() {
    let policy = r#"{"version":"1","default":"deny","all_tools":{"limits":[{"counter":"c","window":"minute","max":100}]},
        "tools":{"x":{"limits":[{"counter":"c","window":"minute","max":5}]}}}"#;
    assert_over("all-deny", policy, 50, 5, "tools.x.limits[0]");
}
