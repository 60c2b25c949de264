//! Property tests of what the server reads, one block per kind: the filter must judge what the
//! server will run.
//! Each generates variants of an input that some server reads as another input, and checks the
//! decision of the whole pipeline (`pipeline::on_headers`, `pipeline::on_body`). The variants include every
//! case folding of each envelope member, every default-ignorable code point, and numbers around the
//! limits of binary64 precision.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, clippy::indexing_slicing)]

use mcp_policy_core::config;
use mcp_policy_core::limits::MemoryStore;
use mcp_policy_core::outcome::kind::DecisionKind;
use mcp_policy_core::pipeline::{self, HeadOutcome, Outcome, RequestHead};
use mcp_policy_core::policy::Policy;
use mcp_policy_core::response::toolslist;
use mcp_policy_core::wire::fold;
use mcp_policy_core::wire::json::Json;
use proptest::prelude::*;
use serde_json::Value;

const NOW: u64 = 1_700_000_040_000;

fn policy(gateway: &str) -> Policy {
    let text = format!(
        r#"{{"version":"1","default":"allow","hide":["delete_vm"],
        "tools":{{"stop_vm":{{"action":"deny"}},
          "vm_agent_exec":{{"deny_if":[{{"path":"args.vmid","op":"eq","value":9007199254740992}},
                                       {{"path":"args.mode","op":"in","value":["force"]}},
                                       {{"path":"args.command","op":"regex","value":"^rm"}}]}},
          "exact_only":{{"require":[{{"path":"args.n","op":"lte","value":100}}]}}}},
        "gateway":{{{gateway}}}}}"#
    );
    config::load(text.as_bytes()).unwrap()
}

fn head(p: &Policy, extra: &[(&str, &[u8])]) -> RequestHead {
    let mut h: Vec<(&str, &[u8])> = vec![
        (":method", b"POST"),
        (":path", b"/mcp"),
        ("content-type", b"application/json"),
        ("authorization", b"Bearer t"),
    ];
    for (k, v) in extra {
        h.retain(|(n, _)| n != k);
        h.push((k, v));
    }
    RequestHead::from_headers(p, h)
}

/// The outcome of one POST: from the headers if they decide, else from the body.
fn decide(p: &Policy, extra: &[(&str, &[u8])], body: &str) -> Outcome {
    let h = head(p, extra);
    match pipeline::on_headers(p, &h) {
        HeadOutcome::Done(o) => *o,
        HeadOutcome::NeedBody => pipeline::on_body(p, &h, body.as_bytes(), &MemoryStore::new(), NOW),
    }
}

fn status(o: &Outcome) -> u16 {
    o.reply.as_ref().map_or(0, |r| r.status)
}

fn reply_json(o: &Outcome) -> Value {
    serde_json::from_str(&o.reply.as_ref().expect("a reply").body).unwrap()
}

/// Every code point with `Default_Ignorable_Code_Point` (Unicode 16.0) that JSON text can carry.
fn default_ignorables() -> Vec<char> {
    (0u32..0x10FFFF).filter_map(char::from_u32).filter(|&c| fold::is_default_ignorable(c)).collect()
}

/// Every case variant of an ASCII name, other than the name itself.
fn case_variants(name: &str) -> Vec<String> {
    let letters: Vec<usize> = name.char_indices().filter(|(_, c)| c.is_ascii_alphabetic()).map(|(i, _)| i).collect();
    (1u32..(1 << letters.len()))
        .map(|mask| {
            let mut b = name.as_bytes().to_vec();
            for (bit, &i) in letters.iter().enumerate() {
                if mask & (1 << bit) != 0 {
                    b[i] = b[i].to_ascii_uppercase();
                }
            }
            String::from_utf8(b).unwrap()
        })
        .collect()
}

fn escaped(name: &str) -> String {
    let mut out = String::new();
    mcp_policy_core::wire::json::write_str(&mut out, name);
    out
}

// ------------------------------------------------------------------ kind 1: member names that fold

#[test]
fn kind1_every_case_folding_of_every_envelope_and_params_member_is_refused() {
    let p = policy("");
    let members = ["jsonrpc", "id", "method", "params", "result", "error"];
    let mut checked = 0;
    for m in members {
        for v in case_variants(m) {
            // Beside the real member (a clash), and alone (a near miss).
            for body in [
                format!(r#"{{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{{"name":"list_vms"}},"{v}":1}}"#),
                format!(r#"{{"jsonrpc":"2.0","{v}":1,"id":5,"method":"tools/call","params":{{"name":"list_vms"}}}}"#),
            ] {
                let o = decide(&p, &[], &body);
                assert_eq!((status(&o), o.decision.kind), (400, DecisionKind::Invalid), "{body}");
                let want = if m == "id" { Value::Null } else { Value::from(5) };
                assert_eq!(reply_json(&o)["id"], want, "{body}");
                checked += 1;
            }
        }
    }
    for m in ["name", "arguments", "uri", "cursor", "_meta"] {
        for v in case_variants(m) {
            let body = format!(
                r#"{{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{{"name":"list_vms","{v}":{{}}}}}}"#
            );
            let o = decide(&p, &[], &body);
            assert_eq!(status(&o), 400, "{body}");
            assert_eq!(reply_json(&o)["id"], 5, "{body}");
            checked += 1;
        }
    }
    assert_eq!(checked, 2 * (127 + 3 + 63 + 63 + 63 + 31) + (15 + 511 + 7 + 63 + 15));
}

#[test]
fn kind1_every_default_ignorable_code_point_makes_a_clash_at_any_depth() {
    let p = policy("");
    let all = default_ignorables();
    assert_eq!(all.len(), 4174);
    for (i, c) in all.iter().enumerate() {
        let key = match i % 3 {
            0 => format!("cmd{c}"),
            1 => format!("{c}cmd"),
            _ => format!("c{c}md"),
        };
        let nested = ["", r#"{"x":"#, r#"{"x":[{"y":"#][i % 3];
        let close = ["", "}", "}]}"][i % 3];
        let body = format!(
            r#"{{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{{"name":"list_vms","arguments":{nested}{{"cmd":1,{}:2}}{close}}}}}"#,
            escaped(&key)
        );
        let o = decide(&p, &[], &body);
        assert_eq!((status(&o), reply_json(&o)["id"].clone()), (400, Value::from(5)), "U+{:04X}", u32::from(*c));
    }
}

proptest! {
    #[test]
    fn kind1_control_and_case_variants_of_argument_names_clash(
        name in "[a-z]{1,8}", upper in prop::collection::vec(any::<bool>(), 8), ctl in 0u32..0x20, depth in 0usize..5,
    ) {
        let p = policy("");
        let mut variant: String = name.chars().zip(&upper).map(|(c, &u)| if u { c.to_ascii_uppercase() } else { c }).collect();
        if variant == name {
            variant.push(char::from_u32(ctl).unwrap());
        }
        let inner = format!("{{{}:1,{}:2}}", escaped(&name), escaped(&variant));
        let args = (0..depth).fold(inner, |acc, i| if i % 2 == 0 { format!("{{\"k\":{acc}}}") } else { format!("[{acc}]") });
        let args = if args.starts_with('[') { format!("{{\"k\":{args}}}") } else { args };
        let body = format!(r#"{{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{{"name":"list_vms","arguments":{args}}}}}"#);
        let o = decide(&p, &[], &body);
        prop_assert_eq!(status(&o), 400);
        prop_assert_eq!(reply_json(&o)["error"]["code"].clone(), Value::from(-32600));
    }
}

// ------------------------------------------------------------------------ kind 2: request charsets

proptest! {
    #[test]
    fn kind2_only_one_utf8_charset_passes(
        charsets in prop::collection::vec(prop::sample::select(vec!["utf-8", "UTF-8", "Utf-8", "utf-7", "utf8", "latin1", "utf-16", ""]), 0..3),
        quoted in any::<bool>(), space in any::<bool>(),
    ) {
        let p = policy("");
        let mut ct = String::from("application/json");
        for c in &charsets {
            ct.push_str(if space { "; " } else { ";" });
            ct.push_str(if quoted { "CharSet=\"" } else { "charset=" });
            ct.push_str(c);
            if quoted { ct.push('"'); }
        }
        let ok = charsets.is_empty() || (charsets.len() == 1 && charsets[0].eq_ignore_ascii_case("utf-8"));
        let o = decide(&p, &[("content-type", ct.as_bytes())], r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"list_vms"}}"#);
        prop_assert_eq!(status(&o), if ok { 0 } else { 415 }, "{}", ct);
    }
}

// ----------------------------------------------------------------------- kind 3: client responses

proptest! {
    #[test]
    fn kind3_batches_mixing_responses_are_refused_and_responses_follow_the_policy(
        kinds in prop::collection::vec(0u8..3, 1..6), deny in any::<bool>(),
    ) {
        let p = policy(if deny { r#""client_responses":"deny""# } else { "" });
        let items: Vec<String> = kinds.iter().enumerate().map(|(i, k)| match k {
            0 => format!(r#"{{"jsonrpc":"2.0","id":{i},"method":"tools/call","params":{{"name":"list_vms"}}}}"#),
            1 => r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#.to_owned(),
            _ => format!(r#"{{"jsonrpc":"2.0","id":"s{i}","result":{{}}}}"#),
        }).collect();
        let responses = kinds.contains(&2);
        let others = kinds.iter().any(|&k| k != 2);
        let o = decide(&p, &[], &format!("[{}]", items.join(",")));
        if responses && others {
            prop_assert_eq!(status(&o), 400);
        } else if responses && deny {
            prop_assert!(o.reply.is_some());
            prop_assert_eq!(o.decision.kind, DecisionKind::Denied);
        } else {
            prop_assert!(o.reply.is_none());
        }
    }
}

// --------------------------------------------------- kind 4: names that differ by case or invisibles

fn name_variant(base: &str, upper: &[bool], dash: &[bool], ignorable: Option<(usize, char)>) -> String {
    let mut out: String = base
        .chars()
        .zip(upper.iter().chain(std::iter::repeat(&false)))
        .zip(dash.iter().chain(std::iter::repeat(&false)))
        .map(|((c, &u), &d)| {
            if c == '_' && d {
                '-'
            } else if u {
                c.to_ascii_uppercase()
            } else {
                c
            }
        })
        .collect();
    if let Some((at, c)) = ignorable {
        let at = out.char_indices().nth(at % (out.len() + 1)).map_or(out.len(), |(i, _)| i);
        out.insert(at, c);
    }
    out
}

proptest! {
    #[test]
    fn kind4_folded_names_of_hidden_or_denied_tools_are_denied_allow_stays_exact(
        base in prop::sample::select(vec!["delete_vm", "stop_vm"]),
        upper in prop::collection::vec(any::<bool>(), 9), dash in prop::collection::vec(any::<bool>(), 9),
        ignorable in prop::option::of((0usize..10, prop::sample::select(default_ignorables()))),
    ) {
        let p = policy("");
        let name = name_variant(base, &upper, &dash, ignorable);
        let body = serde_json::json!({"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":name,"arguments":{}}}).to_string();
        let o = decide(&p, &[], &body);
        prop_assert_eq!(o.decision.kind, DecisionKind::Denied, "{:?}", name);
        prop_assert_eq!(reply_json(&o)["id"].clone(), Value::from(3));
        // Allow rules stay exact: under default deny, a variant of an allowed tool is not allowed.
        let strict = config::load(br#"{"version":"1","default":"deny","tools":{"delete_vm":{},"stop_vm":{}}}"#).unwrap();
        let o = decide(&strict, &[], &body);
        prop_assert_eq!(o.decision.kind, if name == base { DecisionKind::Allowed } else { DecisionKind::Denied });
    }
}

// ------------------------------------------------------- kind 5: numbers around binary64 precision

proptest! {
    #[test]
    fn kind5_a_number_denied_as_sent_or_as_binary64_is_denied(
        delta in -40i64..40, frac in prop::option::of("[0-9]{1,25}"), exp in prop::option::of(-3i32..3),
    ) {
        let p = policy("");
        // Around 2^53, where binary64 steps by 2: the deny_if is eq 9007199254740992.
        let n = 9_007_199_254_740_992i64 + delta;
        let mut text = n.to_string();
        if let Some(f) = &frac { text.push('.'); text.push_str(f); }
        if let Some(e) = exp { text = format!("{}e{}", text, e); }
        let body = format!(r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{{"name":"vm_agent_exec","arguments":{{"vmid":{text},"mode":"x","command":"ls"}}}}}}"#);
        let o = decide(&p, &[], &body);
        let Ok(Json::Number(exact)) = mcp_policy_core::wire::json::parse(text.as_bytes()) else { panic!() };
        let exact_eq = mcp_policy_core::wire::numbers::cmp_numbers(&exact, "9007199254740992") == Some(std::cmp::Ordering::Equal);
        let double_eq = text.parse::<f64>().unwrap() == 9_007_199_254_740_992f64;
        let denied = o.decision.kind == DecisionKind::Denied;
        prop_assert_eq!(denied, exact_eq || double_eq, "{}", text);
    }

    #[test]
    fn kind5_lte_passes_only_if_both_readings_pass_and_exponents_stay_bounded(
        tail in "[0-9]{15,30}", exp in prop::sample::select(vec![0i64, 1, 308, 309, 999_999_999, -400, -999_999_999]),
    ) {
        let p = policy("");
        let text = format!("100.{tail}e{exp}");
        let body = format!(r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{{"name":"exact_only","arguments":{{"n":{text}}}}}}}"#);
        let start = std::time::Instant::now();
        let o = decide(&p, &[], &body);
        prop_assert!(start.elapsed() < std::time::Duration::from_secs(1));
        let d: f64 = text.parse().unwrap();
        let exact_ok = exp <= 0; // 100.x e0 is above 100 unless the tail is all zeros
        let exact_ok = exact_ok && (exp < 0 || tail.bytes().all(|b| b == b'0'));
        let double_ok = d.is_finite() && d <= 100.0;
        prop_assert_eq!(o.decision.kind == DecisionKind::Allowed, exact_ok && double_ok, "{}", text);
    }
}

// ----------------------------------------------- kind 6: strings with invisible or compatibility forms

proptest! {
    #[test]
    fn kind6_invisible_or_compatibility_forms_do_not_pass_deny_if(
        which in 0usize..2, at in 0usize..6, c in prop::sample::select(default_ignorables()), fullwidth in any::<bool>(),
    ) {
        let p = policy("");
        let word = ["force", "rm"][which];
        let mut s: String = if fullwidth {
            word.chars().map(|ch| char::from_u32(u32::from(ch) - 0x21 + 0xFF01).unwrap()).collect()
        } else {
            word.to_owned()
        };
        let at = s.char_indices().nth(at % (word.len() + 1)).map_or(s.len(), |(i, _)| i);
        s.insert(at, c);
        let (mode, command) = if which == 0 { (s.as_str(), "ls") } else { ("x", s.as_str()) };
        let body = serde_json::json!({"jsonrpc":"2.0","id":1,"method":"tools/call",
            "params":{"name":"vm_agent_exec","arguments":{"vmid":1,"mode":mode,"command":command}}}).to_string();
        prop_assert_eq!(decide(&p, &[], &body).decision.kind, DecisionKind::Denied, "{:?}", s);
    }
}

// -------------------------------------------------- kind 7: credentials outside the grant's place

proptest! {
    #[test]
    fn kind7_access_token_query_and_grant_header_variants_are_refused(
        upper in prop::collection::vec(any::<bool>(), 12), encode in prop::collection::vec(any::<bool>(), 12),
        swaps in prop::collection::vec(any::<bool>(), 13),
    ) {
        let p = policy("");
        let name: String = "access_token".chars().zip(&upper).zip(&encode).map(|((c, &u), &e)| {
            let c = if u { c.to_ascii_uppercase() } else { c };
            if e { format!("%{:02X}", u32::from(c)) } else { c.to_string() }
        }).collect();
        let path = format!("/mcp?x=1&{name}=abc");
        let o = decide(&p, &[(":path", path.as_bytes())], "{}");
        prop_assert_eq!((status(&o), o.decision.kind), (400, DecisionKind::Invalid), "{}", path);

        let hp = policy(r#""grant_header":"x-mcp-subject""#);
        let variant: String = "x-mcp-subject".chars().zip(&swaps).map(|(c, &s)| if c == '-' && s { '_' } else { c }).collect();
        let call = r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"list_vms"}}"#;
        let o = decide(&hp, &[("x-mcp-subject", b"agent"), (variant.as_str(), b"admin")], call);
        if variant == "x-mcp-subject" {
            prop_assert_eq!(status(&o), 0); // the header itself (given once here): allowed
        } else {
            prop_assert_eq!(status(&o), 400, "{}", variant);
        }
    }
}

// -------------------------------------------------------- kind 8: SSE lines lenient clients read

proptest! {
    #[test]
    fn kind8_lenient_data_fields_never_pass_a_tool_list(
        upper in prop::collection::vec(any::<bool>(), 4),
        pre in prop::sample::select(vec!["", " ", "\t", "\u{feff}", "\u{200b}"]),
        post in prop::sample::select(vec!["", " ", "\t", "\u{feff}"]),
    ) {
        let field: String = "data".chars().zip(&upper).map(|(c, &u)| if u { c.to_ascii_uppercase() } else { c }).collect();
        let field = format!("{pre}{field}{post}");
        let list = r#"{"jsonrpc":"2.0","id":1,"result":{"tools":[{"name":"delete_vm"}]}}"#;
        let stream = format!("event: message\n{field}: {list}\n\n");
        let hidden = |n: &str| n == "delete_vm";
        let ids = [Json::Number("1".into())];
        match toolslist::filter_sse(stream.as_bytes(), &ids, &hidden) {
            Ok((out, removed)) => {
                prop_assert_eq!(field.as_str(), "data");
                prop_assert_eq!(removed, 1);
                prop_assert!(!String::from_utf8(out).unwrap().contains("delete_vm"));
            }
            Err(_) => prop_assert_ne!(field.as_str(), "data"),
        }
    }
}

// ---------------------------------------------------------------------- kind 9: ids of −32600

proptest! {
    #[test]
    fn kind9_invalid_requests_echo_a_valid_id(
        id in prop_oneof![any::<i64>().prop_map(|n| n.to_string()), "[a-z0-9-]{0,12}".prop_map(|s| format!("\"{s}\""))],
        fault in 0usize..5,
    ) {
        let p = policy("");
        let body = match fault {
            0 => format!(r#"{{"jsonrpc":"1.0","id":{id},"method":"ping"}}"#),
            1 => format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"ping","result":{{}}}}"#),
            2 => format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"notifications/x"}}"#),
            3 => format!(r#"{{"jsonrpc":"2.0","id":{id},"method":7}}"#),
            _ => format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"ping","Params":{{}}}}"#),
        };
        let o = decide(&p, &[], &body);
        let r = reply_json(&o);
        prop_assert_eq!(status(&o), 400);
        prop_assert_eq!(r["error"]["code"].clone(), Value::from(-32600));
        prop_assert_eq!(r["id"].to_string(), serde_json::from_str::<Value>(&id).unwrap().to_string());
    }
}
