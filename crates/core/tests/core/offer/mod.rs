//! Require approval offered through the protocol (`offer`): the sealed `requestState` (round trip,
//! tamper, forge, expiry, another grant or call, key rotation, as property tests), the body rewrite
//! of a retry, the exact offer JSON, and the gate's flow: offer → retry → approved and forwarded
//! without the gateway's members; pending → a new offer; denied → −31008; invalid → 400 −31011;
//! and every case that keeps the −31007 fallback.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, clippy::indexing_slicing)]

use hmac::{Mac, SimpleHmac};
use mcp_policy_core::approval::offer::state::{self, StateError};
use mcp_policy_core::approval::offer::ApprovalLink;
use mcp_policy_core::approval::offer::{self, Offer};
use mcp_policy_core::approval::{self, Answer};
use mcp_policy_core::config;
use mcp_policy_core::identity::grant;
use mcp_policy_core::identity::session::{self, SessionKeys};
use mcp_policy_core::limits::MemoryStore;
use mcp_policy_core::outcome::kind::DecisionKind;
use mcp_policy_core::outcome::refusal::Refusal;
use mcp_policy_core::pipeline::rewrite::{self, BodyRewrite};
use mcp_policy_core::pipeline::{self, HeadOutcome, Outcome, PendingApproval, RequestHead};
use mcp_policy_core::policy::Policy;
use mcp_policy_core::wire::b64::{self, Alphabet};
use mcp_policy_core::wire::mcp::Id;
use proptest::prelude::*;
use serde_json::{json, Value};
use sha2::Sha256;

const T0: u64 = 1_700_000_040_000; // ms
const KEY: &str = "0123456789abcdef0123456789abcdef";
const OLD_KEY: &str = "fedcba9876543210fedcba9876543210";
const V26: &str = "2026-07-28";
const CAPS: &str = r#""io.modelcontextprotocol/clientCapabilities":{"elicitation":{"form":{},"url":{}}}"#;
const URL: &str = "http://127.0.0.1:9/approvals/apr_1";

fn keys() -> SessionKeys {
    SessionKeys { current: KEY.as_bytes().to_vec(), previous: None }
}

fn policy(session_key: bool) -> Policy {
    let key = if session_key { format!(r#","session_key":{{"current":"{KEY}"}}"#) } else { String::new() };
    let text = format!(
        r#"{{"version":"1","default":"deny","tools":{{"start_vm":{{"action":"require_approval","reason":"starting a VM costs money"}}}},
        "gateway":{{"approval":{{"cluster":"mcp_approvals"}}{key}}}}}"#
    );
    config::load(text.as_bytes()).unwrap()
}

/// The MCP server of every call here unless told otherwise (`xds.cluster_name`, `:authority`, `:path`).
fn server_a() -> approval::Upstream {
    approval::Upstream { cluster: "mcp_a".into(), authority: "gw:10000".into(), path: "/a/mcp".into() }
}

/// The other MCP server behind the same listener: another route, to another cluster.
fn server_b() -> approval::Upstream {
    approval::Upstream { cluster: "mcp_b".into(), authority: "gw:10000".into(), path: "/b/mcp".into() }
}

fn head(p: &Policy, version: &str, session: Option<&str>) -> RequestHead {
    head_as(p, version, session, "Bearer agent-a", &server_a())
}

/// The request head of a POST with credential `auth` to the MCP server `to`.
fn head_as(p: &Policy, version: &str, session: Option<&str>, auth: &str, to: &approval::Upstream) -> RequestHead {
    let mut h: Vec<(&str, &[u8])> = vec![
        (":method", b"POST"),
        (":authority", to.authority.as_bytes()),
        (":path", to.path.as_bytes()),
        ("content-type", b"application/json"),
        ("authorization", auth.as_bytes()),
    ];
    h.push(("mcp-protocol-version", version.as_bytes()));
    if version == V26 {
        h.push(("mcp-method", b"tools/call"));
        h.push(("mcp-name", b"start_vm"));
    }
    if let Some(s) = session {
        h.push(("mcp-session-id", s.as_bytes()));
    }
    let mut head = RequestHead::from_headers(p, h);
    head.cluster = Some(to.cluster.clone());
    head
}

fn decide_at(p: &Policy, h: &RequestHead, body: &str, now: u64) -> Outcome {
    assert_eq!(pipeline::on_headers(p, h), HeadOutcome::NeedBody);
    pipeline::on_body(p, h, body.as_bytes(), &MemoryStore::default(), now)
}

/// A 2026-07-28 `tools/call` of start_vm with `meta` inside `_meta` and `tail` after it in params.
fn call26(id: u64, meta: &str, tail: &str) -> String {
    format!(
        r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"start_vm","arguments":{{"vmid":100}},"_meta":{{"io.modelcontextprotocol/protocolVersion":"2026-07-28"{meta}}}{tail}}}}}"#
    )
}

fn json_of(text: &str) -> mcp_policy_core::wire::json::Json {
    mcp_policy_core::wire::json::parse(text.as_bytes()).unwrap()
}

fn grant_a() -> [u8; 32] {
    grant::from_authorization(b"Bearer agent-a").unwrap().id
}

fn call_key() -> String {
    let args = mcp_policy_core::wire::json::parse(br#"{"vmid":100}"#).unwrap();
    approval::key(&grant_a(), &server_a(), "start_vm", Some(&args))
}

fn pending(o: Outcome) -> PendingApproval {
    assert_eq!(o.reply, None);
    *o.approval.expect("held for approval")
}

fn answer_pending(p: &Policy, held: PendingApproval, now: u64) -> Outcome {
    let answer = Answer::Pending { approval_id: "apr_1".into(), approval_url: URL.into(), expires_in_seconds: 600 };
    pipeline::on_approval_answer(p, held, answer, &MemoryStore::default(), now)
}

fn body_of(o: &Outcome) -> (u16, Value) {
    let r = o.reply.as_ref().expect("a reply");
    (r.status, serde_json::from_str(&r.body).unwrap())
}

mod flow;
mod seal;
