//! Fuzz the whole pure decision path: header bytes plus body bytes into `pipeline::on_headers` and
//! `pipeline::on_body`, with an in-memory shared-data store. Any panic is a bug (the filter runs with
//! `panic = "abort"` inside Envoy). Input layout: byte 0 picks the HTTP method and which optional
//! headers are present; byte 1 picks the policy (bit 0: the second one, with a grant header,
//! `client_responses: "deny"`, folded deny/hide names and conditions on numbers and strings) and
//! whether `:path` and an `_` variant of the grant header are sent (bits 1, 2); then up to seven
//! header values separated by 0xFF; the rest is the body.
use mcp_policy_core::config;
use mcp_policy_core::limits::MemoryStore;
use mcp_policy_core::pipeline::{self, HeadOutcome, RequestHead};
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

/// Shapes that the server reads differently: names that fold onto hidden or denied tools, numbers
/// read as binary64, strings read after NFKC, a grant header with `_` variants, client responses
/// denied.
const POLICY_B: &str = r#"{"version":"1","default":"allow","hide":["delete_vm"],
  "tools":{"stop_vm":{"action":"deny","reason":"ticket"},
           "vm_agent_exec":{"require":[{"path":"args.n","op":"lte","value":100}],
             "deny_if":[{"path":"args.vmid","op":"eq","value":9007199254740992},
                        {"path":"args.mode","op":"in","value":["force","ｆｏｒｃｅ"]},
                        {"path":"args.command","op":"regex","value":"^rm"},
                        {"path":"args.tags","op":"contains","value":"x\u200b"}]}},
  "gateway":{"grant_header":"x-mcp-subject","client_responses":"deny"}}"#;

fn policy(second: bool) -> &'static mcp_policy_core::policy::Policy {
    static P: OnceLock<mcp_policy_core::policy::Policy> = OnceLock::new();
    static Q: OnceLock<mcp_policy_core::policy::Policy> = OnceLock::new();
    if second {
        Q.get_or_init(|| config::load(POLICY_B.as_bytes()).expect("second fuzz policy loads"))
    } else {
        P.get_or_init(|| config::load(POLICY.as_bytes()).expect("fuzz policy loads"))
    }
}

/// One fuzz input (the target's body; also replayed by `cargo test` over the seeds).
pub fn run(data: &[u8]) {
    let Some((&sel, rest)) = data.split_first() else { return };
    let Some((&sel2, rest)) = rest.split_first() else { return };
    let method: &[u8] = match sel & 3 {
        0 => b"POST",
        1 => b"GET",
        2 => b"DELETE",
        _ => b"PUT",
    };
    let second = sel2 & 1 != 0;
    let mut parts = rest.splitn(8, |&b| b == 0xFF);
    let credential = if second { "x-mcp-subject" } else { "authorization" };
    let names = ["content-type", "content-encoding", credential, "mcp-method", "mcp-name", ":path", "x_mcp_subject"];
    let mut headers: Vec<(&str, &[u8])> = vec![(":method", method)];
    let mut values = Vec::new();
    for _ in 0..7 {
        values.push(parts.next().unwrap_or(b""));
    }
    let body = parts.next().unwrap_or(b"");
    for (i, name) in names.iter().enumerate() {
        let present = match i {
            0 => true,
            5 => sel2 & 2 != 0,
            6 => sel2 & 4 != 0,
            _ => sel & (4 << i) != 0,
        };
        if present {
            headers.push((name, values[i]));
        }
    }
    headers.push((":authority", b"gw"));
    let p = policy(second);
    let mut head = RequestHead::from_headers(p, headers.iter().copied());
    // The route's cluster (the host reads `xds.cluster_name`), or none: the upstream an approval
    // is bound to, from the body's first bytes.
    head.cluster = match body.first() {
        Some(b'{') | Some(b'[') => Some("mcp_upstream".to_owned()),
        _ => None,
    };
    if let HeadOutcome::NeedBody = pipeline::on_headers(p, &head) {
        let store = MemoryStore::new();
        let mut out = pipeline::on_body(p, &head, body, &store, 1_700_000_000_000);
        if let Some(pending) = out.approval.take() {
            // The callout body is JSON; any service answer (here: bytes from the input) finishes
            // the call with a JSON reply or a forward, and never panics.
            let _: serde_json_check::Value =
                serde_json_check::from_str(&pending.check_body("rid", 0)).expect("check body is JSON");
            let status: &[u8] = if sel & 0x80 != 0 { b"200" } else { b"504" };
            let answer = mcp_policy_core::approval::read_answer(Some(status), values[4]);
            out = pipeline::on_approval_answer(p, *pending, answer, &store, 1_700_000_000_000);
        }
        if let Some(reply) = out.reply {
            // Every reply is valid JSON.
            let _: serde_json_check::Value = serde_json_check::from_str(&reply.body).expect("reply is JSON");
        }
    }
}

mod serde_json_check {
    pub use mcp_policy_core::wire::json::Json as Value;
    pub fn from_str(s: &str) -> Result<Value, mcp_policy_core::wire::json::ParseError> {
        mcp_policy_core::wire::json::parse(s.as_bytes())
    }
}
