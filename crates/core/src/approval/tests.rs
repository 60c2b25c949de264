//! Unit tests of the approval key, the check request and the answer.

use super::*;

fn canon(text: &str) -> String {
    let mut out = String::new();
    canonical(&json::parse(text.as_bytes()).unwrap(), &mut out);
    out
}

fn up(cluster: &str, authority: &str, path: &str) -> Upstream {
    Upstream { cluster: cluster.into(), authority: authority.into(), path: path.into() }
}

fn server_a() -> Upstream {
    up("mcp_a", "mcp.example.com", "/a/mcp")
}

fn key_of(args: &str) -> String {
    key(&[7u8; 32], &server_a(), "vm_agent_exec", Some(&json::parse(args.as_bytes()).unwrap()))
}

#[test]
fn canonical_form_is_exact() {
    assert_eq!(
        canon(r#" { "b" : [ 1 , {"z":null,"a":true} ], "a" : "x\u00e9\n\/" , "é":1.50 } "#),
        "{\"a\":\"xé\\n/\",\"b\":[1,{\"a\":true,\"z\":null}],\"é\":1.50}"
    );
}

#[test]
fn same_call_written_differently_gives_the_same_key() {
    let base = key_of(r#"{"vmid":100,"command":"uptime","opts":{"a":[1,2],"b":"é"}}"#);
    for same in [
        r#"{"command":"uptime","vmid":100,"opts":{"b":"é","a":[1,2]}}"#,
        "{ \"vmid\" : 100 ,\n\t\"command\" : \"uptime\" , \"opts\" : { \"a\" : [ 1 , 2 ] , \"b\" : \"é\" } }",
        r#"{"vmid":100,"command":"\u0075ptime","opts":{"a":[1,2],"b":"\u00e9"}}"#,
        r#"{"\u0076mid":100,"command":"uptime","opts":{"a":[1,2],"b":"\u00E9"}}"#,
    ] {
        assert_eq!(key_of(same), base, "{same}");
    }
    // Surrogate pairs and big numbers, as sent.
    assert_eq!(
        key_of(r#"{"n":123456789012345678901234567890,"s":"\ud83d\ude00"}"#),
        key_of(r#"{"s":"😀","n":123456789012345678901234567890}"#)
    );
    assert_eq!(
        key_of(r#"{"a":{"b":{"c":{"d":[{"y":1,"x":2}]}}}}"#),
        key_of(r#"{"a":{"b":{"c":{"d":[{"x":2,"y":1}]}}}}"#)
    );
}

#[test]
fn any_change_gives_another_key() {
    let base = key_of(r#"{"vmid":100,"command":"uptime"}"#);
    for other in [
        r#"{"vmid":101,"command":"uptime"}"#,
        r#"{"vmid":100,"command":"cat /etc/shadow"}"#,
        r#"{"command":"uptime"}"#,
        r#"{"vmid":100,"command":"uptime","extra":null}"#,
        r#"{"vmid":100.0,"command":"uptime"}"#,
        r#"{"vmid":1e2,"command":"uptime"}"#,
        r#"{"vmid":"100","command":"uptime"}"#,
        r#"{"vmid":[100],"command":"uptime"}"#,
        r#"{"vmid":100,"command":"uptime "}"#,
        r#"{"vmid":100,"command":"Uptime"}"#,
    ] {
        assert_ne!(key_of(other), base, "{other}");
    }
    let args = json::parse(br#"{"vmid":100,"command":"uptime"}"#).unwrap();
    let a = server_a();
    assert_eq!(key(&[7u8; 32], &a, "vm_agent_exec", Some(&args)), base);
    assert_ne!(key(&[8u8; 32], &a, "vm_agent_exec", Some(&args)), base, "another grant");
    assert_ne!(key(&[7u8; 32], &a, "vm_agent_exec2", Some(&args)), base, "another tool");
    // The same call to another MCP server: another cluster, host name or path (query included).
    for other in [
        up("mcp_b", "mcp.example.com", "/a/mcp"),
        up("mcp_a", "mcp2.example.com", "/a/mcp"),
        up("mcp_a", "mcp.example.com", "/b/mcp"),
        up("mcp_a", "mcp.example.com", "/a/mcp?tenant=2"),
        up("mcp_a", "mcp.example.com", "/a/mcp/"),
        up("mcp_a", "mcp.example.com:443", "/a/mcp"),
    ] {
        assert_ne!(key(&[7u8; 32], &other, "vm_agent_exec", Some(&args)), base, "{other:?}");
    }
    // No member can be shifted into another: each is a JSON string of its own.
    assert_ne!(
        key(&[7u8; 32], &up("a", "b", "/c"), "t", Some(&args)),
        key(&[7u8; 32], &up("a\",\"authority\":\"b", "", "/c"), "t", Some(&args))
    );
    // Big numbers differing in the last digit stay different (no float rounding).
    assert_ne!(key_of(r#"{"n":9007199254740993}"#), key_of(r#"{"n":9007199254740992}"#));
}

#[test]
fn key_is_sha256_of_the_documented_text() {
    let args = json::parse(br#"{"b":2,"a":1}"#).unwrap();
    let grant = [0xabu8; 32];
    let text = format!(
        "{{\"arguments\":{{\"a\":1,\"b\":2}},\"grant\":\"{}\",\"tool\":\"t\",\
         \"upstream\":{{\"authority\":\"h:1\",\"cluster\":\"c\\\"x\",\"path\":\"/mcp?a=\\u0001\"}}}}",
        "ab".repeat(32)
    );
    let u = up("c\"x", "h:1", "/mcp?a=\u{1}");
    assert_eq!(key(&grant, &u, "t", Some(&args)), hex(&Sha256::digest(text.as_bytes())));
    assert_eq!(key(&grant, &u, "t", None), key(&grant, &u, "t", Some(&Json::Object(vec![]))));
    assert_eq!(key(&grant, &u, "t", None).len(), 64);
}

#[test]
fn check_request_json() {
    let r = CheckRequest {
        key: "k",
        grant: "sha256:0123",
        grant_id: &[0xab; 32],
        tool: "start_vm",
        upstream: &up("mcp_a", "mcp.example.com", "/a/mcp"),
        arguments: Some(r#"{"vmid":100}"#),
        request_id: "rid",
        expires_in_seconds: 600,
        wait_seconds: 0,
        reason: Some("costs \"money\""),
        input_responses: None,
        request_state: None,
        caller: None,
    };
    assert_eq!(
        r.to_json(),
        r#"{"key":"k","grant":"sha256:0123","grant_id":"abababababababababababababababababababababababababababababababab","tool":"start_vm","upstream":{"authority":"mcp.example.com","cluster":"mcp_a","path":"/a/mcp"},"arguments":{"vmid":100},"request_id":"rid","expires_in_seconds":600,"wait_seconds":0,"reason":"costs \"money\""}"#
    );
    let r = CheckRequest { arguments: None, reason: None, wait_seconds: 29, ..r };
    assert_eq!(
        r.to_json(),
        r#"{"key":"k","grant":"sha256:0123","grant_id":"abababababababababababababababababababababababababababababababab","tool":"start_vm","upstream":{"authority":"mcp.example.com","cluster":"mcp_a","path":"/a/mcp"},"arguments":{},"request_id":"rid","expires_in_seconds":600,"wait_seconds":29}"#
    );
}

#[test]
fn request_ids_must_be_plain_tokens() {
    assert_eq!(request_id_token("c923e182-0611-4f68-a410-70d101e69aaf"), "c923e182-0611-4f68-a410-70d101e69aaf");
    assert_eq!(request_id_token("a.b:c_d-9"), "a.b:c_d-9");
    for bad in ["", "PRE-APPROVED by security", "x\ny", "é", "<b>"] {
        assert_eq!(request_id_token(bad), "", "{bad:?}");
    }
    assert_eq!(request_id_token(&"a".repeat(128)).len(), 128);
    assert_eq!(request_id_token(&"a".repeat(129)), "");
}

#[test]
fn answers() {
    let ok = Some(&b"200"[..]);
    assert_eq!(
        read_answer(ok, br#"{"status":"approved","approval_id":"apr_1","approver":"alice","note":""}"#),
        Answer::Approved { approval_id: "apr_1".into(), approver: "alice".into() }
    );
    assert_eq!(
        read_answer(ok, br#"{"status":"pending","approval_id":"apr_1","approval_url":"http://x/approvals/apr_1","expires_at":1,"expires_in_seconds":593}"#),
        Answer::Pending { approval_id: "apr_1".into(), approval_url: "http://x/approvals/apr_1".into(), expires_in_seconds: 593 }
    );
    assert_eq!(
        read_answer(ok, br#"{"status":"denied","approval_id":"apr_1","approver":"bob","note":"no"}"#),
        Answer::Denied { approval_id: "apr_1".into(), approver: "bob".into(), note: "no".into() }
    );
    let unavailable = |status: Option<&[u8]>, body: &[u8]| match read_answer(status, body) {
        Answer::Unavailable(why) => why,
        other => panic!("{other:?}"),
    };
    assert_eq!(unavailable(Some(b"504"), b""), "the approval service did not answer in time");
    assert_eq!(unavailable(Some(b"503"), b"no healthy upstream"), "the approval service answered HTTP 503");
    assert_eq!(unavailable(None, b""), "the approval service answered without a status");
    for garbage in [
        &b""[..],
        b"approved",
        b"[]",
        br#"{"status":"approved"}"#,
        br#"{"status":"APPROVED","approval_id":"a"}"#,
        br#"{"status":"pending","approval_id":"a","approval_url":"u"}"#,
        br#"{"status":"pending","approval_id":"a","approval_url":"u","expires_in_seconds":-1}"#,
        br#"{"status":"pending","approval_id":"a","approval_url":"","expires_in_seconds":1}"#,
        br#"{"status":"approved","approval_id":""}"#,
        br#"{"status":"approved","approval_id":"a","status":"denied"}"#,
        br#"{"status":"approved","approval_id":7}"#,
    ] {
        assert!(
            unavailable(ok, garbage).starts_with("the approval service's answer is malformed"),
            "{}",
            String::from_utf8_lossy(garbage)
        );
    }
}

fn caller(policy: Option<&str>, subject: Option<&str>, client_id: Option<&str>, act: &[&str]) -> Provenance {
    Provenance {
        policy: policy.map(str::to_owned),
        subject: subject.map(str::to_owned),
        client_id: client_id.map(str::to_owned),
        act: act.iter().map(|a| (*a).to_owned()).collect(),
    }
}

#[test]
fn a_caller_is_bound_by_the_key() {
    let args = json::parse(br#"{"vmid":100}"#).unwrap();
    let (g, a) = ([7u8; 32], server_a());
    let delegated = caller(Some("ops"), Some("alice"), Some("cli-1"), &["agent-x", "orchestrator"]);
    let text = format!(
        "{{\"arguments\":{{\"vmid\":100}},\"caller\":{{\"act\":[\"agent-x\",\"orchestrator\"],\"client_id\":\"cli-1\",\
         \"policy\":\"ops\",\"subject\":\"alice\"}},\"grant\":\"{}\",\"tool\":\"t\",\"upstream\":{{\"authority\":\
         \"mcp.example.com\",\"cluster\":\"mcp_a\",\"path\":\"/a/mcp\"}}}}",
        "07".repeat(32)
    );
    let bound = key_for(Some(&delegated), &g, &a, "t", Some(&args), None, None);
    assert_eq!(bound, hex(&Sha256::digest(text.as_bytes())));
    // No caller: exactly the key of a plain policy.
    assert_eq!(key_for(None, &g, &a, "t", Some(&args), None, None), key(&g, &a, "t", Some(&args)));
    // Every member counts, and an empty caller is not no caller.
    for other in [
        caller(Some("readonly"), Some("alice"), Some("cli-1"), &["agent-x", "orchestrator"]),
        caller(Some("ops"), Some("bob"), Some("cli-1"), &["agent-x", "orchestrator"]),
        caller(Some("ops"), Some("alice"), Some("cli-2"), &["agent-x", "orchestrator"]),
        caller(Some("ops"), Some("alice"), Some("cli-1"), &["agent-y", "orchestrator"]),
        caller(Some("ops"), Some("alice"), Some("cli-1"), &["agent-x"]),
        caller(Some("ops"), Some("alice"), Some("cli-1"), &[]),
        caller(None, Some("alice"), Some("cli-1"), &["agent-x", "orchestrator"]),
        caller(None, None, None, &[]),
    ] {
        assert_ne!(key_for(Some(&other), &g, &a, "t", Some(&args), None, None), bound, "{other:?}");
    }
    assert_ne!(
        key_for(Some(&caller(None, None, None, &[])), &g, &a, "t", Some(&args), None, None),
        key(&g, &a, "t", Some(&args))
    );
}

#[test]
fn check_request_json_with_a_caller() {
    let c = caller(Some("ops"), Some("alice \"A\""), None, &["agent-x"]);
    let r = CheckRequest {
        key: "k",
        grant: "sha256:0123",
        grant_id: &[0xab; 32],
        tool: "t",
        upstream: &up("c", "a", "/p"),
        arguments: None,
        request_id: "",
        expires_in_seconds: 1,
        wait_seconds: 0,
        reason: None,
        input_responses: None,
        request_state: None,
        caller: Some(&c),
    };
    assert_eq!(
        r.to_json(),
        format!(
            r#"{{"key":"k","grant":"sha256:0123","grant_id":"{}","tool":"t","upstream":{{"authority":"a","cluster":"c","path":"/p"}},"arguments":{{}},"request_id":"","expires_in_seconds":1,"wait_seconds":0,"act":["agent-x"],"client_id":null,"policy":"ops","subject":"alice \"A\""}}"#,
            "ab".repeat(32)
        )
    );
}

#[test]
fn answer_too_large_names_the_limit() {
    assert_eq!(ANSWER_TOO_LARGE, format!("the approval service's answer exceeds {MAX_ANSWER_BYTES} bytes"));
}
