//! `flows`, `tools.NAME.marks` and `tools.NAME.result.mark_if` in the policy file: what loads, and
//! every error with its JSON path.

use super::{load_errors, trifecta, TRIFECTA};

#[test]
fn the_trifecta_policy_loads_with_its_flow() {
    let p = trifecta("");
    assert_eq!(p.flows.len(), 1);
    let f = &p.flows[0];
    assert_eq!((f.name.as_str(), f.path.as_str(), f.for_ms), ("no-egress-after-secrets", "flows[0]", 600_000));
    assert_eq!(f.marks, vec!["secret".to_owned(), "pii".to_owned()]);
    assert!(f.denies("http_post") && f.denies("send_email"));
    // Folded as `action: "deny"` is: a name that folds onto a denied one is denied too.
    assert!(f.denies("HTTP-Post") && f.denies("http\u{200b}_post"));
    assert!(!f.denies("list_files") && !f.denies("read_secret"));
    assert_eq!(p.marks_of("read_secret"), ["secret".to_owned()]);
    // A marking tool has its results read, with no other result rule.
    assert!(p.result_rules("read_secret").is_some());
}

#[test]
fn star_denies_every_tool_but_the_marking_ones() {
    let text = TRIFECTA.replace(r#""deny": ["http_post", "send_email"]"#, r#""deny": ["*"]"#);
    let p = mcp_policy_core::config::load(format!("{text}}}").as_bytes()).unwrap();
    let f = &p.flows[0];
    for t in ["http_post", "send_email", "list_files", "anything"] {
        assert!(f.denies(t), "{t}");
    }
    assert!(!f.denies("read_secret") && !f.denies("query_db"));
}

#[test]
fn errors_name_their_json_path() {
    let base = r#"{"version":"1","tools":{"read_secret":{"marks":["secret"]}},"flows":[FLOW]}"#;
    let with = |flow: &str| load_errors(&base.replace("FLOW", flow));
    assert_eq!(
        with(r#"{"name":"f","if_marked":["secret","pii"],"deny":["x"],"for":"10m"}"#),
        vec![(
            "flows[0].if_marked[1]".to_owned(),
            "no tool sets the mark \"pii\" (tools.NAME.marks or tools.NAME.result.mark_if)".to_owned()
        )]
    );
    assert_eq!(
        with(r#"{"name":"f","if_marked":["secret"],"deny":["x"],"for":"31d"}"#),
        vec![("flows[0].for".to_owned(), "must be between 1000 ms and 2592000 s".to_owned())]
    );
    assert_eq!(
        with(r#"{"name":"f","if_marked":["secret"],"deny":[],"for":"1h"}"#),
        vec![("flows[0].deny".to_owned(), "must name at least one tool, or \"*\"".to_owned())]
    );
    assert_eq!(
        with(
            r#"{"name":"f","if_marked":["secret"],"deny":["x"],"for":"1h"},{"name":"f","if_marked":["secret"],"deny":["x"],"for":"1h"}"#
        ),
        vec![("flows[1].name".to_owned(), "duplicate flow name".to_owned())]
    );
    let unknown = with(r#"{"name":"f","if_marked":["secret"],"deny":["x"],"for":"1h","until":"x"}"#);
    assert_eq!(unknown.len(), 1);
    assert!(unknown[0].1.contains("unknown field `until`"), "{unknown:?}");
    assert_eq!(
        load_errors(
            r#"{"version":"1","tools":{"t":{"marks":["a b"],"result":{"mark_if":[{"regex":"x*","mark":"m"}]}}}}"#
        ),
        vec![
            ("tools.t.marks[0]".to_owned(), "must be 1 to 64 characters of A-Z, a-z, 0-9, _, ., : and -".to_owned()),
            ("tools.t.result.mark_if[0].regex".to_owned(), "the regex matches the empty text".to_owned()),
        ]
    );
}

#[test]
fn flows_load_with_the_rate_limit_service_within_the_mark_bound() {
    let p = trifecta(r#","gateway":{"rate_limit_service":{"cluster":"rls"}}"#);
    assert_eq!(p.flows.len(), 1);
    // 33 marks named by the flows together: one more than a call may carry to the service.
    let marks: Vec<String> = (0..33).map(|i| format!("m{i}")).collect();
    let text = format!(
        r#"{{"version":"1","tools":{{"r":{{"marks":{m}}},"p":{{}}}},"flows":[{{"name":"f","if_marked":{m},"deny":["p"],"for":"1m"}}],"gateway":{{"rate_limit_service":{{"cluster":"rls"}}}}}}"#,
        m = serde_json::to_string(&marks).unwrap()
    );
    assert_eq!(
        load_errors(&text),
        vec![(
            "flows".to_owned(),
            "with gateway.rate_limit_service, the flows together name at most 32 marks (they name 33): a call \
             carries one descriptor per mark of each flow that denies it"
                .to_owned()
        )]
    );
}
