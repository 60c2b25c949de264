//! Every `Refusal` variant: its exact code, `data.kind`, HTTP status, headers, decision kind and
//! rendered JSON-RPC error. `row` matches exhaustively, so a new variant does not compile until it
//! has a row here; `every_variant_has_a_sample` then asks for a sample of it.

use std::collections::HashSet;
use std::mem::discriminant;

use mcp_policy_core::approval::offer::ApprovalLink;
use mcp_policy_core::limits::Limit;
use mcp_policy_core::limits::Unavailable;
use mcp_policy_core::outcome::kind::DecisionKind;
use mcp_policy_core::outcome::refusal::{
    LimiterFault, Refusal, Subject, BODY_UNREADABLE, BODY_UNWRITABLE, EVENT_ID_INVALID, HEADERS_UNREADABLE,
    LAST_EVENT_ID_NOT_REWRITTEN, LEGACY_SESSION_INVALID, PATH_NOT_REWRITTEN, POLICY_NOT_LOADED,
    SESSION_ID_NOT_REWRITTEN, SESSION_INVALID,
};
use mcp_policy_core::terms::Algorithm;
use mcp_policy_core::terms::Scope;
use mcp_policy_core::terms::Window;
use mcp_policy_core::wire::mcp::Id;
use mcp_policy_core::wire::protocol::{Version, Versions};

mod answers_chapter;
mod rows;
mod samples;
use rows::row;
use samples::samples;

/// The number of `Refusal` variants.
const VARIANTS: usize = 28;

#[test]
fn every_refusal_has_its_exact_code_kind_status_headers_and_json() {
    let id: Id = Id::of(&mcp_policy_core::wire::json::parse(b"7").unwrap());
    for r in samples() {
        let want = row(&r);
        assert_eq!(r.code(), want.code, "{r:?}");
        assert_eq!(r.kind(), want.kind, "{r:?}");
        assert_eq!(r.status(), want.status, "{r:?}");
        let owned = r.headers();
        let headers: Vec<(&str, &str)> = owned.iter().map(|(k, v)| (*k, v.as_str())).collect();
        assert_eq!(headers, want.headers, "{r:?}");
        assert_eq!(r.decision_kind(), want.decision, "{r:?}");
        assert_eq!(r.to_json(&id), want.json, "{r:?}");
        let reply = r.reply(&id);
        assert_eq!((reply.status, reply.body.as_str()), (want.status, want.json), "{r:?}");
        // The code and kind in the body are the ones the accessors give; the body is JSON.
        let v: serde_json::Value = serde_json::from_str(&reply.body).unwrap();
        assert_eq!(v["error"]["code"], want.code);
        assert_eq!(v["error"]["data"]["kind"], want.kind);
        assert_eq!(v["error"]["data"]["reason"], r.reason().as_ref());
        assert_eq!(v["error"]["data"]["tool"].as_str(), r.tool());
        assert_eq!(v["error"]["data"]["rule"].as_str(), r.rule());
    }
}

#[test]
fn every_variant_has_a_sample() {
    let seen: HashSet<_> = samples().iter().map(discriminant).collect();
    assert_eq!(seen.len(), VARIANTS, "add a sample of the new variant to samples() and raise VARIANTS");
    let kinds: HashSet<_> = samples().iter().map(Refusal::kind).collect();
    // One variant per data.kind, except that approval_required has two renderings: −31007 for every
    // client, −32042 for a 2025-11-25 client that declared URL elicitation (the spec's own error).
    assert_eq!(kinds.len(), VARIANTS - 1, "one variant per data.kind");
}

#[test]
fn only_a_denial_by_hide_is_hidden() {
    let hidden: Vec<bool> = samples().iter().map(Refusal::is_hidden).collect();
    assert_eq!(hidden.iter().filter(|h| **h).count(), 1);
    assert!(Refusal::Denied { subject: Subject::Tool("h".into()), rule: "hide".into(), reason: "r".into() }.is_hidden());
}
