use super::*;
use crate::config::PolicySpec;
use crate::wire::json;

/// This reader: (path, message).
fn ours(text: &str) -> Result<(), (String, String)> {
    let doc = json::parse(text.as_bytes()).unwrap();
    from_json::<PolicySpec>(&doc).map(drop).map_err(|e| (e.path().to_owned(), e.message().to_owned()))
}

/// The oracle: serde_json through serde_path_to_error, without its position suffix (for documents
/// without a condition `value`: serde_json would round its numbers).
fn serde_json_reader(text: &str) -> Result<(), (String, String)> {
    let mut de = serde_json::Deserializer::from_str(text);
    serde_path_to_error::deserialize::<_, PolicySpec>(&mut de).map(drop).map_err(|e| {
        let path = e.path().to_string();
        let message = e.into_inner().to_string();
        let message = message.rsplit_once(" at line ").map_or(message.as_str(), |(m, _)| m).to_owned();
        (path, message)
    })
}

#[test]
fn same_paths_and_messages_as_serde_json() {
    let docs = [
        r#"{"version":"1"}"#,
        r#"{"default":"deny"}"#,
        r#"{}"#,
        r#"{"version":1}"#,
        r#"{"version":null}"#,
        r#"{"version":true}"#,
        r#"{"version":"1","":1}"#,
        r#"{"version":"1","defualt":"deny"}"#,
        r#"{"version":"1","default":"maybe"}"#,
        r#"{"version":"1","default":null}"#,
        r#"{"version":"1","hide":null}"#,
        r#"{"version":"1","hide":"x"}"#,
        r#"{"version":"1","hide":["a",1]}"#,
        r#"{"version":"1","hide":{"a":1}}"#,
        r#"{"version":"1","tools":null}"#,
        r#"{"version":"1","tools":{"x":null}}"#,
        r#"{"version":"1","tools":{"a.b":{"actoin":"deny"}}}"#,
        r#"{"version":"1","tools":{"":{"action":"nope"}}}"#,
        r#"{"version":"1","tools":{"x":{"action":"require_approval","approval_timeout":5}}}"#,
        r#"{"version":"1","tools":{"x":{"limits":[{"counter":"c","window":"fortnight","max":1}]}}}"#,
        r#"{"version":"1","tools":{"x":{"limits":[{"counter":"c","window":"minute","max":-1}]}}}"#,
        r#"{"version":"1","tools":{"x":{"limits":[{"counter":"c","window":"minute","max":1.5}]}}}"#,
        r#"{"version":"1","tools":{"x":{"limits":[{"counter":"c","window":"minute","max":"1"}]}}}"#,
        r#"{"version":"1","tools":{"x":{"limits":[{"counter":"c","window":"minute"}]}}}"#,
        r#"{"version":"1","tools":{"x":{"limits":[{"counter":"c","window":"minute","max":1,"scope":"team"}]}}}"#,
        r#"{"version":"1","tools":{"x":{"limits":[{"counter":"c","window":"minute","max":1},{"window":"day"}]}}}"#,
        r#"{"version":"1","tools":{"x":{"require":[{"path":"args.a","op":"like"}]}}}"#,
        r#"{"version":"1","tools":{"x":{"require":[{"op":"eq"}]}}}"#,
        r#"{"version":"1","tools":{"x":{"deny_if":[{"path":"args.a","op":"eq","x":0}]}}}"#,
        r#"{"version":"1","tools":{"x":{"deny_if":[{"path":"args.a","op":"eq","reason":7}]}}}"#,
        r#"{"version":"1","all_tools":{"limits":{}}}"#,
        r#"{"version":"1","all_tools":{"limitz":[]}}"#,
        r#"{"version":"1","gateway":{"colour":"red"}}"#,
        r#"{"version":"1","gateway":{"max_body_bytes":-5}}"#,
        r#"{"version":"1","gateway":{"max_tracked_grants":"many"}}"#,
        r#"{"version":"1","gateway":{"hide_denied_tools":"yes"}}"#,
        r#"{"version":"1","gateway":{"hide_denied_tools":null}}"#,
        r#"{"version":"1","gateway":{"grant_header":7}}"#,
        r#"{"version":"1","gateway":{"methods":{"resources/read":"maybe"}}}"#,
        r#"{"version":"1","gateway":{"tool_modes":{"x":"sometimes"}}}"#,
        r#"{"version":"1","gateway":{"mode":"dry-run"}}"#,
        r#"{"version":"1","gateway":{"grants":[{"sha256":"ab"}]}}"#,
        r#"{"version":"1","gateway":{"grants":[{"sha256":"ab","label":"a","x":1}]}}"#,
        r#"{"version":"1","gateway":{"approval":{"path":"/x"}}}"#,
        r#"{"version":"1","gateway":{"approval":{"cluster":"c","mode":"later"}}}"#,
        r#"{"version":"1","gateway":{"approval":{"cluster":"c","clutser":"d"}}}"#,
        r#"{"version":"1","gateway":{"approval":null}}"#,
        r#"{"version":"1","gateway":{"approval":{"cluster":"c","max_held_per_grant":4294967296}}}"#,
        r#"{"version":"1","gateway":{"approval":{"cluster":"c","max_held_per_grant":-1}}}"#,
        r#"{"version":"1","gateway":{"approval":{"cluster":null}}}"#,
        r#"{"version":"1","tools":{"x":{"limits":[{"counter":null,"window":"minute","max":1}]}}}"#,
        r#"{"version":"1","tools":{"x":{"result":{"redact":[{"regex":"a"}],"mark_if":[{"mark":"m","zz":1}]}}}}"#,
        r#"{"version":"1","default_for":[{"when":null,"action":"allow"}]}"#,
        r#"{"version":"1","default_for":[{"when":{"readOnlyHint":true,"readOnly":true},"action":"allow"}]}"#,
        r#"{"version":"1","default_for":[{"when":{},"action":"block"}]}"#,
        r#"{"version":"1","pins":{"x":{"pin":"p","annotations":null}}}"#,
        r#"{"version":"1","pins":{"x":{"annotations":{}}}}"#,
        r#"{"version":"1","pins":null}"#,
        r#"{"version":"1","flows":[{"name":"f","if_marked":["m"],"deny":["x"]}]}"#,
        r#"{"version":"1","flows":[{"name":"f","if_marked":"m","deny":["x"],"for":"1m"}]}"#,
        r#"{"version":"1","gateway":{"protocol_versions":null,"identity":{"grant_claim":"sub"}}}"#,
        r#"{"version":"1","gateway":{"session_key":{"current":"k","previous_env":7}}}"#,
        r#"{"version":"1","gateway":{"rate_limit_service":{"cluster":"c","failure_mode":"open"}}}"#,
        r#"{"version":"1","gateway":{"audit":"loud","refusal_shape":"tool_result"}}"#,
        r#"{"version":"1","gateway":{"filter_state":"no"}}"#,
        r#"{"version":"1","default":"allow","hide":["a"],"all_tools":{"limits":[{"counter":"g","window":"second","max":3,"scope":"global","algorithm":"sliding"}]},"tools":{"x":{"action":"deny","reason":"r","limits":[],"require":[{"path":"args.a","op":"exists"}],"deny_if":[]}},"gateway":{"grant_header":"x-grant","max_body_bytes":10,"max_tracked_grants":5,"methods":{"resources/read":"allow"},"mode":"dry_run","tool_modes":{"x":"enforce"},"hide_denied_tools":true,"max_response_bytes":9,"grants":[],"approval":{"cluster":"c","path":"/p","authority":"a","timeout":"5s","mode":"hold"}}}"#,
    ];
    for text in docs {
        assert_eq!(ours(text), serde_json_reader(text), "{text}");
    }
}

#[test]
fn where_it_differs_from_serde_json() {
    // Every struct or map position holds an object (or null): serde_json reads arrays as structs.
    for (text, path, what) in [
        (r#"["1"]"#, ".", "array"),
        (r#""1""#, ".", "string"),
        (r#"{"version":"1","tools":{"x":["deny","why"]}}"#, "tools.x", "array"),
        (r#"{"version":"1","tools":{"x":"deny"}}"#, "tools.x", "string"),
        (r#"{"version":"1","tools":[]}"#, "tools", "array"),
        (r#"{"version":"1","tools":{"x":{"require":[["args.a","eq",1]]}}}"#, "tools.x.require[0]", "array"),
        (r#"{"version":"1","tools":{"x":{"deny_if":[3]}}}"#, "tools.x.deny_if[0]", "number"),
        (r#"{"version":"1","tools":{"x":{"limits":[true]}}}"#, "tools.x.limits[0]", "boolean"),
        (r#"{"version":"1","all_tools":[]}"#, "all_tools", "array"),
        (r#"{"version":"1","all_tools":{"limits":[["c","minute",1]]}}"#, "all_tools.limits[0]", "array"),
        (r#"{"version":"1","gateway":[]}"#, "gateway", "array"),
        (r#"{"version":"1","gateway":{"grants":[["ab","c"]]}}"#, "gateway.grants[0]", "array"),
        (r#"{"version":"1","gateway":{"methods":[]}}"#, "gateway.methods", "array"),
        (r#"{"version":"1","gateway":{"tool_modes":"dry_run"}}"#, "gateway.tool_modes", "string"),
        (r#"{"version":"1","gateway":{"approval":["c"]}}"#, "gateway.approval", "array"),
    ] {
        assert_eq!(ours(text), Err((path.to_owned(), format!("must be an object, not {what}"))), "{text}");
    }
    // Enums are strings: serde_json also reads `{"deny": null}` as a variant.
    assert!(serde_json_reader(r#"{"version":"1","default":{"deny":null}}"#).is_ok());
    assert_eq!(
        ours(r#"{"version":"1","default":{"deny":null}}"#),
        Err(("default".to_owned(), "invalid type: map, expected enum ActionSpec".to_owned()))
    );
    // serde_json says only "expected value" for a non-string enum.
    assert_eq!(
        ours(r#"{"version":"1","default":1}"#),
        Err(("default".to_owned(), "invalid type: integer `1`, expected enum ActionSpec".to_owned()))
    );
    // Numbers that are no u64 are quoted as written (serde_json prints them as an f64).
    let max = |n: &str| ours(&format!(r#"{{"version":"1","gateway":{{"max_body_bytes":{n}}}}}"#));
    let float = |n: &str| format!("invalid type: floating point `{n}`, expected u64");
    assert_eq!(max("1e3"), Err(("gateway.max_body_bytes".to_owned(), float("1e3"))));
    assert_eq!(max("2.50"), Err(("gateway.max_body_bytes".to_owned(), float("2.50"))));
    assert_eq!(max("-0"), Err(("gateway.max_body_bytes".to_owned(), float("-0"))));
    assert_eq!(
        max("18446744073709551616"),
        Err((
            "gateway.max_body_bytes".to_owned(),
            "invalid type: integer `18446744073709551616`, expected u64".to_owned()
        ))
    );
    assert_eq!(max("18446744073709551615"), Ok(()));
    assert_eq!(
        max("-9223372036854775809"),
        Err((
            "gateway.max_body_bytes".to_owned(),
            "invalid type: integer `-9223372036854775809`, expected u64".to_owned()
        ))
    );
}

#[test]
fn enum_positions_refuse_every_other_kind() {
    for (value, what) in [
        ("null", "null"),
        ("true", "boolean `true`"),
        ("7", "integer `7`"),
        ("-7", "integer `-7`"),
        ("-0", "floating point `-0`"),
        ("1.5", "floating point `1.5`"),
        ("18446744073709551616", "integer `18446744073709551616`"),
        ("[\"deny\"]", "sequence"),
        ("{\"deny\":null}", "map"),
    ] {
        let text = format!(r#"{{"version":"1","gateway":{{"methods":{{"resources/read":{value}}}}}}}"#);
        assert_eq!(
            ours(&text),
            Err((
                "gateway.methods.resources/read".to_owned(),
                format!("invalid type: {what}, expected enum ActionSpec")
            )),
            "{value}"
        );
    }
}

#[test]
fn typed_positions_refuse_every_other_kind() {
    let kinds = [
        ("null", "null"),
        ("true", "boolean `true`"),
        ("7", "integer `7`"),
        ("-7", "integer `-7`"),
        ("1.5", "floating point `1.5`"),
        ("\"x\"", "string \"x\""),
        ("[\"x\"]", "sequence"),
        ("{\"x\":1}", "map"),
    ];
    // (where, its path, what it expects, the kind it accepts)
    let positions = [
        (r#"{"version":$}"#, "version", "a string", "\"x\""),
        (r#"{"version":"1","hide":$}"#, "hide", "a sequence", "[\"x\"]"),
        (r#"{"version":"1","gateway":{"hide_denied_tools":$}}"#, "gateway.hide_denied_tools", "a boolean", "true"),
        (
            r#"{"version":"1","all_tools":{"limits":[{"counter":"c","window":"minute","max":$}]}}"#,
            "all_tools.limits[0].max",
            "u64",
            "7",
        ),
    ];
    for (doc, path, expected, accepted) in positions {
        for (value, what) in kinds {
            let text = doc.replace('$', value);
            let got = ours(&text);
            if value == accepted {
                assert!(got.is_ok(), "{text}: {got:?}");
            } else if value == "-7" && expected == "u64" {
                let message = "invalid value: integer `-7`, expected u64".to_owned();
                assert_eq!(got, Err((path.to_owned(), message)), "{text}");
            } else {
                let message = format!("invalid type: {what}, expected {expected}");
                assert_eq!(got, Err((path.to_owned(), message)), "{text}");
            }
        }
    }
}

#[test]
fn condition_values_keep_their_exact_text() {
    let text = r#"{"version":"1","tools":{"x":{"require":[{"path":"args.a","op":"eq",
        "value":{"n":[123456789012345678901234567890,1.0,-0,1E+2,"\u00e9\n",true,null,{}]}}]}}}"#;
    let doc = json::parse(text.as_bytes()).unwrap();
    let spec: PolicySpec = from_json(&doc).unwrap();
    let want = json::parse(br#"{"n":[123456789012345678901234567890,1.0,-0,1E+2,"\u00e9\n",true,null,{}]}"#).unwrap();
    assert_eq!(spec.tools.get("x").unwrap().require[0].value, Some(JsonValue(want)));
    let Some(JsonValue(Json::Object(members))) = &spec.tools.get("x").unwrap().require[0].value else { panic!() };
    let Json::Array(items) = &members[0].1 else { panic!() };
    let numbers: Vec<&Json> = items.iter().take(4).collect();
    assert_eq!(
        numbers,
        ["123456789012345678901234567890", "1.0", "-0", "1E+2"]
            .map(|n| Json::Number(n.into()))
            .iter()
            .collect::<Vec<_>>()
    );
}

/// A policy set: its own keys read as a plain policy's, and each member's errors under
/// `policies.NAME` (through `set::compile`), arrays where objects are expected included.
#[test]
fn a_set_and_its_members_read_alike() {
    let set = |text: &str| {
        let doc = json::parse(text.as_bytes()).unwrap();
        from_json::<crate::config::PolicySetSpec>(&doc)
            .map(drop)
            .map_err(|e| (e.path().to_owned(), e.message().to_owned()))
    };
    let fail = |path: &str, message: &str| Err((path.to_owned(), message.to_owned()));
    assert_eq!(set(r#"{"version":"1","policies":{}}"#), Ok(()));
    assert_eq!(set(r#"{"version":"1"}"#), fail(".", "missing field `policies`"));
    assert_eq!(set(r#"{"version":"1","policies":null}"#), fail("policies", "invalid type: null, expected a map"));
    assert_eq!(set(r#"{"version":"1","policies":[]}"#), fail("policies", "must be an object, not array"));
    assert_eq!(
        set(r#"{"version":"1","policies":{},"polices":{}}"#),
        fail(
            "polices",
            "unknown field `polices`, expected one of `version`, `policies`, `attach`, `contain`, `gateway`"
        )
    );
    assert_eq!(
        set(r#"{"version":"1","policies":{},"gateway":{"approval":["c"]}}"#),
        fail("gateway.approval", "must be an object, not array")
    );
    let member = |text: &str| {
        let e = crate::config::load_set(text.as_bytes()).map(drop).unwrap_err();
        let first = e.first().unwrap();
        (first.path.clone(), first.message.clone())
    };
    assert_eq!(
        member(r#"{"version":"1","policies":{"a":{"version":"1","tools":{"x":{"actoin":"deny"}}}}}"#),
        (
            "policies.a.tools.x.actoin".to_owned(),
            "unknown field `actoin`, expected one of `action`, `reason`, `approval_timeout`, `limits`, `require`, \
             `deny_if`, `result`, `marks`, `pin`"
                .to_owned()
        )
    );
    assert_eq!(
        member(r#"{"version":"1","policies":{"a":{"version":"1","tools":{"x":{"limits":[["c","minute",1]]}}}}}"#),
        ("policies.a.tools.x.limits[0]".to_owned(), "must be an object, not array".to_owned())
    );
    assert_eq!(
        member(r#"{"version":"1","policies":{"a":{"version":"1","tools":{"x":{"limits":[{"counter":null}]}}}}}"#),
        ("policies.a.tools.x.limits[0].counter".to_owned(), "invalid type: null, expected a string".to_owned())
    );
}
