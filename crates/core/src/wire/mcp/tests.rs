use super::*;
use crate::wire::protocol::MetaVersion;

fn single(body: &str) -> Result<Message, ProtocolError> {
    match read_body(body.as_bytes())? {
        Body::Single(m) => Ok(m),
        Body::Batch(_) => panic!("batch"),
    }
}

fn err(body: &str) -> (ProtocolErrorKind, String) {
    let e = single(body).unwrap_err();
    (e.kind, e.id.raw().to_owned())
}

#[test]
fn reads_a_tool_call() {
    let m = single(
        r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"delete\u005fvm","arguments":{"vmid":100}}}"#,
    )
    .unwrap();
    assert_eq!(
        m,
        Message::Request {
            id: Id { raw: "7".into() },
            meta_version: MetaVersion::Absent,
            call: Call::Tool(ToolCall {
                name: "delete_vm".into(),
                arguments: Some(Arguments { raw: r#"{"vmid":100}"#.into(), keys: vec!["vmid".into()] }),
                leg: Default::default(),
            }),
        }
    );
}

#[test]
fn ids_are_echoed_exactly() {
    let id = |body: &str| single(body).unwrap().id().raw().to_owned();
    assert_eq!(
        id(r#"{"jsonrpc":"2.0","id":123456789012345678901234567890,"method":"ping"}"#),
        "123456789012345678901234567890"
    );
    assert_eq!(id(r#"{"jsonrpc":"2.0","id":"a\u0062c","method":"ping"}"#), r#""a\u0062c""#);
    assert_eq!(id(r#"{"jsonrpc":"2.0","id":-5,"method":"ping"}"#), "-5");
    assert_eq!(id(r#"{"jsonrpc":"2.0","id":null,"method":"ping"}"#), "null");
}

#[test]
fn invalid_envelopes_are_minus_32600_echoing_a_valid_id() {
    use ProtocolErrorKind::*;
    let inv = |id: &str| (InvalidRequest, id.to_owned());
    // The id is valid: echoed, so that the client can match the error (JSON-RPC 2.0 §5).
    assert_eq!(err(r#"{"jsonrpc":"1.0","id":1,"method":"ping"}"#), inv("1"));
    assert_eq!(err(r#"{"jsonrpc":"2.0","id":"a","method":"ping","result":{}}"#), inv(r#""a""#));
    assert_eq!(err(r#"{"jsonrpc":"2.0","id":1,"method":"ping","error":{}}"#), inv("1"));
    assert_eq!(err(r#"{"jsonrpc":"2.0","id":1,"method":"notifications/initialized"}"#), inv("1"));
    assert_eq!(err(r#"{"jsonrpc":"2.0","id":1}"#), inv("1"));
    assert_eq!(err(r#"{"jsonrpc":"2.0","id":1,"method":5}"#), inv("1"));
    assert_eq!(err(r#"{"id":7,"method":"ping"}"#), inv("7"));
    // No id, or one that is not a string, an integer or null: null.
    assert_eq!(err(r#"{"id":{},"method":"ping"}"#), inv("null"));
    assert_eq!(err(r#"{"jsonrpc":"2.0","id":{},"method":"ping"}"#), inv("null"));
    assert_eq!(err(r#"{"jsonrpc":"2.0","id":[1],"method":"ping"}"#), inv("null"));
    assert_eq!(err(r#"{"jsonrpc":"2.0","id":1.5,"method":"ping"}"#), inv("null"));
    assert_eq!(err(r#"{"jsonrpc":"2.0","id":1e3,"method":"ping"}"#), inv("null"));
    assert_eq!(err(r#"{"jsonrpc":"2.0","id":true,"method":"ping"}"#), inv("null"));
    assert_eq!(err(r#"{"jsonrpc":"2.0","method":"tools/call","params":{"name":"x"}}"#), inv("null"));
    assert_eq!(err(r#"{"jsonrpc":"2.0","result":{}}"#), inv("null"));
    assert_eq!(read_body(b"[]").unwrap_err().kind, InvalidRequest);
    assert_eq!(read_body(b"42").unwrap_err().kind, InvalidRequest);
    assert_eq!(read_body(b"\"x\"").unwrap_err().kind, InvalidRequest);
}

#[test]
fn folded_member_names_are_refused_with_the_id() {
    use ProtocolErrorKind::*;
    // Two names of one object that a case-insensitive decoder takes for one: -32600, id echoed.
    for body in [
        r#"{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"list_vms","Name":"delete_vm"}}"#,
        r#"{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"a","arguments":{"cmd":"ls","CMD":"rm"}}}"#,
        r#"{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"a","arguments":{"x":{"y":[{"k":1,"\u212a":2}]}}}}"#,
        r#"{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"a","arguments":{"cmd":1,"cmd\u0000":2}}}"#,
        r#"{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"a","arguments":{"cmd":1,"c\u200bmd":2}}}"#,
        r#"{"jsonrpc":"2.0","id":4,"method":"tools/call","Method":"x","params":{"name":"a"}}"#,
    ] {
        assert_eq!(err(body), (InvalidRequest, "4".to_owned()), "{body}");
    }
    // A member that folds to a known name without being it.
    assert_eq!(err(r#"{"jsonrpc":"2.0","id":4,"Method":"tools/call"}"#), (InvalidRequest, "4".into()));
    assert_eq!(err(r#"{"jsonrpc":"2.0","id":4,"method":"tools/call","param\u017f":{}}"#), (InvalidRequest, "4".into()));
    assert_eq!(err(r#"{"jsonrpc":"2.0","id":4,"ID":5,"method":"ping"}"#), (InvalidRequest, "null".into()));
    assert_eq!(
        err(r#"{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name\u0000":"x","arguments":{}}}"#),
        (InvalidParams, "4".into())
    );
    assert_eq!(
        err(r#"{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"a","Arguments":{}}}"#),
        (InvalidParams, "4".into())
    );
    // Exact duplicates stay parse errors; distinct names pass.
    assert_eq!(read_body(br#"{"jsonrpc":"2.0","id":4,"id":4,"method":"ping"}"#).unwrap_err().kind, Parse);
    assert!(single(
        r#"{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"a","arguments":{"a":1,"b":{"a":2}}}}"#
    )
    .is_ok());
    // In a batch, only the element with the clash is refused.
    let Body::Batch(items) = read_body(
            br#"[{"jsonrpc":"2.0","id":1,"method":"ping"},{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"a","NAME":"b"}}]"#,
        )
        .unwrap() else {
            panic!("not a batch")
        };
    assert!(items[0].is_ok());
    assert_eq!(items[1].as_ref().unwrap_err().id.raw(), "2");
}

#[test]
fn bad_tool_params_are_minus_32602_with_id() {
    use ProtocolErrorKind::*;
    let ip = (InvalidParams, "3".to_owned());
    assert_eq!(err(r#"{"jsonrpc":"2.0","id":3,"method":"tools/call"}"#), ip);
    assert_eq!(err(r#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{}}"#), ip);
    assert_eq!(err(r#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":5}}"#), ip);
    assert_eq!(err(r#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"a","arguments":[]}}"#), ip);
    assert_eq!(err(r#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"a","arguments":null}}"#), ip);
    assert_eq!(err(r#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":"x"}"#), ip);
    assert_eq!(err(r#"{"jsonrpc":"2.0","id":3,"method":"ping","params":"x"}"#), ip);
}

#[test]
fn parse_errors_are_minus_32700() {
    for body in [
        "",
        r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a","name":"b"}}"#,
        r#"{"jsonrpc":"2.0","id":1,"method":"tools/list","method":"tools/call"}"#,
        r#"{"jsonrpc":"2.0","id":1,"method":"ping"}{"x":1}"#,
        r#"[{"jsonrpc":"2.0","id":1,"method":"ping"},]"#,
        r#"[{"jsonrpc":"2.0","id":1,"method":"ping","params":{"a":1,"a":1}}]"#,
    ] {
        let e = read_body(body.as_bytes()).unwrap_err();
        assert_eq!((e.kind, e.id.raw()), (ProtocolErrorKind::Parse, "null"), "{body}");
    }
}

#[test]
fn batches_keep_each_element() {
    let Body::Batch(items) = read_body(
            br#"[{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a"}},5,{"jsonrpc":"2.0","method":"notifications/initialized"},{"jsonrpc":"2.0","id":"r","result":{}}]"#,
        )
        .unwrap() else {
            panic!("not a batch")
        };
    assert_eq!(items.len(), 4);
    assert_eq!(
        items[0],
        Ok(Message::Request {
            id: Id { raw: "1".into() },
            meta_version: MetaVersion::Absent,
            call: Call::Tool(ToolCall { name: "a".into(), arguments: None, leg: Default::default() })
        })
    );
    assert_eq!(items[1].as_ref().unwrap_err().kind, ProtocolErrorKind::InvalidRequest);
    assert_eq!(
        items[2],
        Ok(Message::Notification { method: McpMethod::Notification("notifications/initialized".into()) })
    );
    assert_eq!(items[3], Ok(Message::Response { id: Id { raw: "\"r\"".into() } }));
}

#[test]
fn method_names_round_trip() {
    for name in [
        "initialize",
        "ping",
        "server/discover",
        "subscriptions/listen",
        "tools/list",
        "tools/call",
        "resources/list",
        "resources/templates/list",
        "resources/read",
        "resources/subscribe",
        "resources/unsubscribe",
        "prompts/list",
        "prompts/get",
        "completion/complete",
        "logging/setLevel",
        "tasks/get",
        "tasks/list",
        "tasks/result",
        "tasks/cancel",
        "notifications/cancelled",
        "x/unknown",
    ] {
        assert_eq!(McpMethod::from_name(name).name(), name);
    }
    assert_eq!(McpMethod::from_name("Tools/Call"), McpMethod::Other("Tools/Call".into()));
}

#[test]
fn method_targets_are_read_for_header_checks() {
    let m = single(r#"{"jsonrpc":"2.0","id":1,"method":"resources/read","params":{"uri":"file:///x"}}"#).unwrap();
    assert_eq!(
        m,
        Message::Request {
            id: Id { raw: "1".into() },
            meta_version: MetaVersion::Absent,
            call: Call::Method { method: McpMethod::ResourcesRead, target: Some("file:///x".into()), listen: None }
        }
    );
}

#[test]
fn jsonrpc_and_method_are_compared_after_unescaping_and_must_be_strings() {
    use ProtocolErrorKind::*;
    let plain = single(r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a"}}"#).unwrap();
    for escaped in [
        r#"{"jsonrpc":"2\u002e0","id":1,"method":"tools\/call","params":{"name":"a"}}"#,
        r#"{"jsonrpc":"\u0032.0","id":1,"method":"tools\u002fcall","params":{"name":"a"}}"#,
    ] {
        assert_eq!(single(escaped).unwrap(), plain, "{escaped}");
    }
    let detail = |body: String| {
        let e = single(&body).unwrap_err();
        (e.kind, e.id.raw().to_owned(), e.detail)
    };
    let jsonrpc = (InvalidRequest, "1".to_owned(), "\"jsonrpc\" must be \"2.0\"".to_owned());
    for v in ["2.0", "2", "null", "true", "{}", r#"["2.0"]"#, r#""2.0 ""#, r#""2.0\u0000""#, r#""1.0""#] {
        assert_eq!(detail(format!(r#"{{"jsonrpc":{v},"id":1,"method":"ping"}}"#)), jsonrpc, "{v}");
    }
    assert_eq!(detail(r#"{"id":1,"method":"ping"}"#.to_owned()), jsonrpc);
    let method = (InvalidRequest, "1".to_owned(), "\"method\" must be a string".to_owned());
    for v in ["5", "null", "true", "{}", r#"["ping"]"#, r#"{"a":{"b":[]}}"#] {
        assert_eq!(detail(format!(r#"{{"jsonrpc":"2.0","id":1,"method":{v}}}"#)), method, "{v}");
    }
    // A value that is not a string is still read strictly: broken JSON in it is a parse error, a
    // repeated name in it too, and a folded clash in it is refused like any other, with the id.
    for v in [r#""\ud800""#, r#""\x""#, "[1,]", r#"{"a":1,"a":2}"#, r#"{"a":1,"\u0061":2}"#, "01"] {
        for body in [
            format!(r#"{{"jsonrpc":{v},"id":1,"method":"ping"}}"#),
            format!(r#"{{"jsonrpc":"2.0","id":1,"method":{v}}}"#),
        ] {
            assert_eq!(read_body(body.as_bytes()).unwrap_err().kind, Parse, "{body}");
        }
    }
    for v in [r#"{"A":1,"a":2}"#, r#"[{"cmd":1,"c\u200bmd":2}]"#] {
        let clash =
            "an object holds two member names that are equal after case folding or removing invisible characters";
        assert_eq!(
            detail(format!(r#"{{"jsonrpc":{v},"id":1,"method":"ping"}}"#)),
            (InvalidRequest, "1".to_owned(), clash.to_owned())
        );
        assert_eq!(
            detail(format!(r#"{{"jsonrpc":"2.0","id":1,"method":{v}}}"#)),
            (InvalidRequest, "1".to_owned(), clash.to_owned())
        );
    }
}

/// The kinds a `subscriptions/listen` with filter `filter` asks for, and its unknown member; or
/// the −32602 detail and echoed id.
/// The kinds asked for and the unknown member of a listen filter, or (kind, echoed id, detail).
type Listened = Result<(Vec<&'static str>, Option<String>), (ProtocolErrorKind, String, String)>;

fn listen(filter: &str) -> Listened {
    let body = format!(r#"{{"jsonrpc":"2.0","id":"L","method":"subscriptions/listen","params":{filter}}}"#);
    match single(&body) {
        Ok(Message::Request {
            call: Call::Method { method: McpMethod::SubscriptionsListen, target: None, listen },
            ..
        }) => {
            let l = listen.expect("a listen request carries its filter");
            Ok((l.kinds().map(|k| k.member).collect(), l.unknown().map(str::to_owned)))
        }
        Ok(other) => panic!("{other:?}"),
        Err(e) => Err((e.kind, e.id.raw().to_owned(), e.detail)),
    }
}

#[test]
fn subscriptions_listen_reads_what_its_filter_asks_for() {
    let all = r#"{"notifications":{"resourceSubscriptions":["file:///a"],"toolsListChanged":true,
        "promptsListChanged":true,"resourcesListChanged":true}}"#;
    assert_eq!(
        listen(all),
        Ok((vec!["toolsListChanged", "promptsListChanged", "resourcesListChanged", "resourceSubscriptions"], None))
    );
    // false, null and an empty list ask for nothing (the Python SDK's server reads them so too).
    let none = r#"{"notifications":{"toolsListChanged":false,"promptsListChanged":null,"resourceSubscriptions":[]}}"#;
    assert_eq!(listen(none), Ok((vec![], None)));
    assert_eq!(listen(r#"{"notifications":{}}"#), Ok((vec![], None)));
    assert_eq!(listen(r#"{"notifications":{"resourceSubscriptions":null}}"#), Ok((vec![], None)));
    // Members the table does not know are kept (the first one) for the policy to refuse: an
    // extension's kind, and the snake_case spelling the Python SDK's server also accepts.
    for (filter, unknown) in [
        (r#"{"notifications":{"toolsListChanged":true,"taskIds":["t1"],"x":1}}"#, "taskIds"),
        (r#"{"notifications":{"resource_subscriptions":["file:///a"]}}"#, "resource_subscriptions"),
        (r#"{"notifications":{"ResourceSubscriptions":["file:///a"]}}"#, "ResourceSubscriptions"),
    ] {
        let (_, got) = listen(filter).unwrap();
        assert_eq!(got.as_deref(), Some(unknown), "{filter}");
    }
}

#[test]
fn subscriptions_listen_with_an_unreadable_filter_is_invalid_params_with_its_id() {
    use ProtocolErrorKind::InvalidParams;
    let flag = "a list-changed member of \"params.notifications\" must be true or false";
    let uris = "\"params.notifications.resourceSubscriptions\" must be an array of URI strings";
    let missing = "subscriptions/listen needs \"params.notifications\"";
    let not_object = "\"params.notifications\" must be an object";
    for (params, detail) in [
        // Values a lax decoder (pydantic) would read as `true` or as a list.
        (r#"{"notifications":{"promptsListChanged":"true"}}"#, flag),
        (r#"{"notifications":{"resourcesListChanged":1}}"#, flag),
        (r#"{"notifications":{"toolsListChanged":{}}}"#, flag),
        (r#"{"notifications":{"resourceSubscriptions":"file:///a"}}"#, uris),
        (r#"{"notifications":{"resourceSubscriptions":["file:///a",7]}}"#, uris),
        (r#"{"notifications":{"resourceSubscriptions":{"0":"file:///a"}}}"#, uris),
        (r#"{"notifications":[]}"#, not_object),
        (r#"{"notifications":null}"#, not_object),
        (r#"{"_meta":{}}"#, missing),
        (r#"[{"notifications":{}}]"#, missing),
    ] {
        assert_eq!(listen(params), Err((InvalidParams, "\"L\"".to_owned(), detail.to_owned())), "{params}");
    }
    let body = r#"{"jsonrpc":"2.0","id":"L","method":"subscriptions/listen"}"#;
    assert_eq!(err(body), (InvalidParams, "\"L\"".to_owned()));
    // A member that a case-insensitive decoder reads as `notifications` is refused like any other.
    let (kind, id, detail) = listen(r#"{"Notifications":{"resourceSubscriptions":["file:///a"]}}"#).unwrap_err();
    assert_eq!((kind, id.as_str()), (InvalidParams, "\"L\""));
    assert_eq!(detail, "a \"params\" member name that folds to \"notifications\" without being it");
    // Other methods never look at a `notifications` member, readable or not.
    let m = single(r#"{"jsonrpc":"2.0","id":1,"method":"resources/list","params":{"notifications":5}}"#).unwrap();
    assert!(matches!(m, Message::Request { call: Call::Method { listen: None, .. }, .. }));
}
