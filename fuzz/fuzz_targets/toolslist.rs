//! Fuzz the tools/list response filter (JSON and SSE) with arbitrary upstream bytes: it must never
//! panic, and whenever it succeeds its output must not list a hidden tool in the matching response.
#![no_main]

use libfuzzer_sys::fuzz_target;
use mcp_policy_filter::json::{self, Json};
use mcp_policy_filter::toolslist;

fuzz_target!(|data: &[u8]| {
    let Some((&sel, body)) = data.split_first() else { return };
    let ids = [Json::Number("1".into()), Json::String("L".into())];
    let hidden = |name: &str| name.starts_with("delete");
    let result = if sel & 1 == 0 {
        toolslist::filter_json(body, &ids, &hidden)
    } else {
        toolslist::filter_sse(body, &ids, &hidden)
    };
    if let (Ok((out, _)), 0) = (result, sel & 1) {
        // A matching JSON response keeps no hidden tool.
        if let Ok(Json::Object(m)) = json::parse(&out) {
            let matches = m.iter().any(|(k, v)| k == "id" && (v == &ids[0] || v == &ids[1]));
            if matches {
                if let Some(Json::Array(tools)) = Json::Object(m.clone()).get("result").and_then(|r| r.get("tools")) {
                    for t in tools {
                        assert!(!t.get("name").and_then(Json::as_str).is_some_and(hidden), "hidden tool kept");
                    }
                }
            }
        }
    }
});
