//! The request pipeline end to end, natively: every row of the README's decision table.
//! One module a concept; the shared policy and request helpers are here.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, clippy::indexing_slicing)]

mod audit;
mod decisions;
mod grants;
mod http;
mod limits;

use mcp_policy_core::config;
use mcp_policy_core::pipeline::{HeadOutcome, Outcome, RequestHead};
use mcp_policy_core::policy::Policy;
use serde_json::{json, Value};

const T0: u64 = 1_700_000_040_000; // a UTC minute boundary

fn policy(extra_gateway: &str) -> Policy {
    let text = format!(
        r#"{{"version":"1","default":"deny","hide":["delete_vm"],
        "all_tools":{{"limits":[{{"counter":"everything","window":"minute","max":3,"scope":"global"}}]}},
        "tools":{{"list_vms":{{}},"stop_vm":{{"action":"deny","reason":"stopping VMs needs a change ticket"}},
                  "vm_agent_exec":{{"limits":[{{"counter":"vm_agent_exec_rate","window":"minute","max":2}}]}}}},
        "gateway":{{"methods":{{"resources/read":"allow"}}{extra_gateway}}}}}"#
    );
    config::load(text.as_bytes()).unwrap()
}

fn head(p: &Policy, headers: &[(&str, &[u8])]) -> RequestHead {
    RequestHead::from_headers(p, headers.iter().copied())
}

fn post(p: &Policy, token: &str) -> RequestHead {
    let auth = format!("Bearer {token}");
    RequestHead::from_headers(
        p,
        [(":method", &b"POST"[..]), ("content-type", b"application/json"), ("authorization", auth.as_bytes())],
    )
}

fn call(id: u64, tool: &str) -> String {
    json!({"jsonrpc":"2.0","id":id,"method":"tools/call","params":{"name":tool,"arguments":{}}}).to_string()
}

fn done(h: HeadOutcome) -> Outcome {
    match h {
        HeadOutcome::Done(o) => *o,
        HeadOutcome::NeedBody => panic!("expected a decision from the headers"),
    }
}

/// (status, body as JSON, extra headers) of a local reply.
fn reply(o: &Outcome) -> (u16, Value, Vec<(&'static str, String)>) {
    let r = o.reply.as_ref().expect("a local reply");
    (r.status, serde_json::from_str(&r.body).unwrap(), r.headers.clone())
}
