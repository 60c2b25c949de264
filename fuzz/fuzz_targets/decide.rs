//! Fuzz the whole pure decision path: header bytes plus body bytes into `gate::on_headers` and
//! `gate::on_body`, with an in-memory shared-data store. Any panic is a bug (the filter runs with
//! `panic = "abort"` inside Envoy). Input layout: byte 0 picks the HTTP method and which optional
//! headers are present; then up to five header values separated by 0xFF; the rest is the body.
#![no_main]

use libfuzzer_sys::fuzz_target;
use mcp_policy_filter::config;
use mcp_policy_filter::gate::{self, HeadOutcome, RequestHead};
use mcp_policy_filter::ratelimit::MemoryStore;
use std::sync::OnceLock;

const POLICY: &str = r#"{"version":"1","default":"deny","hide":["delete_vm"],
  "all_tools":{"limits":[{"counter":"all","window":"second","max":1000,"scope":"global"}]},
  "tools":{"list_vms":{},
           "start_vm":{"action":"require_approval","limits":[{"counter":"starts","window":"minute","max":5}],
             "deny_if":[{"path":"args.vmid","op":"eq","value":0}]},"stop_vm":{"action":"deny","reason":"ticket"},
           "vm_agent_exec":{"limits":[{"counter":"vm_agent_exec_rate","window":"minute","max":10},
                                      {"counter":"s","window":"second","max":3,"algorithm":"sliding"}],
             "require":[{"path":"args.vmid","op":"in","value":[100,101]},{"path":"args.n","op":"lt","value":1e3}],
             "deny_if":[{"path":"args.command","op":"regex","value":"(^|\\s)rm\\s"},
                        {"path":"args.tags[0]","op":"contains","value":"x"}]}},
  "gateway":{"max_body_bytes":65536,"approval":{"cluster":"mcp_approvals"},"methods":{"resources/read":"allow"}}}"#;

fn policy() -> &'static mcp_policy_filter::policy::Policy {
    static P: OnceLock<mcp_policy_filter::policy::Policy> = OnceLock::new();
    P.get_or_init(|| config::load(POLICY.as_bytes()).expect("fuzz policy loads"))
}

fuzz_target!(|data: &[u8]| {
    let Some((&sel, rest)) = data.split_first() else { return };
    let method: &[u8] = match sel & 3 {
        0 => b"POST",
        1 => b"GET",
        2 => b"DELETE",
        _ => b"PUT",
    };
    let mut parts = rest.splitn(6, |&b| b == 0xFF);
    let names = ["content-type", "content-encoding", "authorization", "mcp-method", "mcp-name"];
    let mut headers: Vec<(&str, &[u8])> = vec![(":method", method)];
    let mut values = Vec::new();
    for _ in 0..5 {
        values.push(parts.next().unwrap_or(b""));
    }
    let body = parts.next().unwrap_or(b"");
    for (i, name) in names.iter().enumerate() {
        if sel & (4 << i) != 0 || i == 0 {
            headers.push((name, values[i]));
        }
    }
    let p = policy();
    let head = RequestHead::from_headers(p, headers.iter().copied());
    if let HeadOutcome::NeedBody = gate::on_headers(p, &head) {
        let store = MemoryStore::new();
        let mut out = gate::on_body(p, &head, body, &store, 1_700_000_000_000);
        if let Some(pending) = out.approval.take() {
            // The callout body is JSON; any service answer (here: bytes from the input) finishes
            // the call with a JSON reply or a forward, and never panics.
            let _: serde_json_check::Value =
                serde_json_check::from_str(&pending.check_body("rid", 0)).expect("check body is JSON");
            let status: &[u8] = if sel & 0x80 != 0 { b"200" } else { b"504" };
            let answer = mcp_policy_filter::approval::read_answer(Some(status), values[4]);
            out = gate::on_approval_answer(p, *pending, answer, &store, 1_700_000_000_000);
        }
        if let Some(reply) = out.reply {
            // Every reply is valid JSON.
            let _: serde_json_check::Value = serde_json_check::from_str(&reply.body).expect("reply is JSON");
        }
    }
});

mod serde_json_check {
    pub use mcp_policy_filter::json::Json as Value;
    pub fn from_str(s: &str) -> Result<Value, mcp_policy_filter::json::ParseError> {
        mcp_policy_filter::json::parse(s.as_bytes())
    }
}
