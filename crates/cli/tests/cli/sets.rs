//! Policy sets through the CLI: `check` summarises a set, `explain --claims` says which policy
//! applies and why, `contain` and `release` edit the set (checked before writing).

use super::{call, run, scratch};

const SET: &str = r#"{"version": "1",
 "policies": {"ops": {"version": "1", "default": "deny", "tools": {"vm_agent_exec": {}}},
              "readonly": {"version": "1", "default": "deny", "hide": ["vm_agent_exec"], "tools": {"list_vms": {}}}},
 "attach": [{"policy": "ops", "when": [{"claim": "groups", "includes": "ops"}]},
            {"policy": "readonly", "when": [{"claim": "scope", "includes": "vms:read"}]}],
 "gateway": {"identity": {"payload_header": "x-jwt-payload", "grant_claim": "sub"},
             "session_key": {"current": "0123456789abcdef0123456789abcdef"}}}
"#;

#[test]
fn check_summarises_a_set_and_names_errors_by_path() {
    let file = scratch("set-check.json", SET);
    let (status, out, err) = run(&["check", &file]);
    assert_eq!((status, err.as_str()), (0, ""));
    assert_eq!(
        out,
        format!(
            "{file}: ok: version 1, policy set of 2 policies, 2 attach rules, identity from x-jwt-payload (grant claim sub)\n  \
             policies.ops: default deny, 1 tool rule, 0 limits\n  policies.readonly: default deny, 1 tool rule, 0 limits\n"
        )
    );
    let bad = scratch("bad-set.json", &SET.replace(r#""policy": "readonly""#, r#""policy": "read-only""#));
    let (status, out, err) = run(&["check", &bad]);
    assert_eq!((status, out.as_str()), (1, ""));
    assert_eq!(
        err,
        format!(
            "{bad}: invalid policy at attach[1].policy: unknown policy 'read-only'; the set defines: ops, readonly\n"
        )
    );
}

#[test]
fn explain_says_which_policy_applies_and_why() {
    let file = scratch("set-explain.json", SET);
    let req = scratch("call-explain.json", &call("vm_agent_exec"));
    let (status, out, _) = run(&["explain", "--claims", r#"{"sub":"alice","groups":["ops"]}"#, &file, &req]);
    assert_eq!(status, 0, "{out}");
    assert!(
        out.starts_with(
            "policy:   ops (attach[0]: the first rule whose every matcher holds)\nsubject:  alice\ndecision: allowed\n"
        ),
        "{out}"
    );
    let (status, out, _) =
        run(&["explain", "--claims", r#"{"sub":"bob","scope":"vms:read","act":{"sub":"agent"}}"#, &file, &req]);
    assert_eq!(status, 3);
    assert!(out.starts_with("policy:   readonly (attach[1]: the first rule whose every matcher holds)\nsubject:  bob\nact:      agent\ndecision: denied\nrule:     hide\n"), "{out}");
    let (status, out, _) = run(&["explain", "--claims", r#"{"sub":"carol"}"#, &file, &req]);
    assert_eq!(status, 3);
    assert!(out.contains("\nerror:    no_policy\n"), "{out}");
    // Without claims there is no identity: 401.
    let (status, out, _) = run(&["explain", &file, &req]);
    assert_eq!(status, 3);
    assert!(out.contains("decision: no_grant\n") && out.contains("the token payload header is missing"), "{out}");
    let (status, _, err) = run(&["explain", "--claims", "[1]", &file, &req]);
    assert_eq!(status, 2);
    assert!(err.contains("--claims must be a JSON object"), "{err}");
}

#[test]
fn contain_and_release_edit_the_set() {
    let file = scratch("set-contain.json", SET);
    let req = scratch("call-contain.json", &call("vm_agent_exec"));
    let (status, out, err) = run(&["contain", "--claim", "sub=alice", "--reason", "incident 42", &file]);
    assert_eq!((status, out.as_str(), err.as_str()), (0, format!("{file}: contained: sub=alice\n").as_str(), ""));
    let text = std::fs::read_to_string(&file).unwrap();
    assert!(
        text.contains(r#"  "contain": [{"when":[{"claim":"sub","equals":"alice"}],"reason":"incident 42"}],"#),
        "{text}"
    );
    let (status, out, _) = run(&["explain", "--claims", r#"{"sub":"alice","groups":["ops"]}"#, &file, &req]);
    assert_eq!(status, 3);
    assert!(out.starts_with("policy:   contained (contain[0] matches"), "{out}");
    assert!(out.contains(r#""data":{"kind":"contained","tool":"vm_agent_exec","reason":"incident 42"}"#), "{out}");
    let (status, out, _) = run(&["release", "--claim", "sub=alice", &file]);
    assert_eq!((status, out), (0, format!("{file}: released: sub=alice\n")));
    assert!(!std::fs::read_to_string(&file).unwrap().contains("contain"));
    let (status, _, err) = run(&["release", "--claim", "sub=alice", &file]);
    assert_eq!(status, 2);
    assert!(err.ends_with("nothing to release\n"), "{err}");
    // A plain policy is no set; a claim needs NAME=VALUE; contain needs a reason.
    let plain = scratch("plain.json", r#"{"version":"1"}"#);
    assert_eq!(run(&["contain", "--claim", "sub=a", "--reason", "r", &plain]).0, 2);
    assert_eq!(run(&["contain", "--claim", "sub", "--reason", "r", &file]).0, 2);
    assert_eq!(run(&["contain", "--claim", "sub=a", &file]).0, 2);
}
