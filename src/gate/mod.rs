//! The request pipeline: from HTTP headers and the whole body to "forward" or a local reply.
//!
//! Pure: the host adapter hands in header bytes, the body, a [`SharedStore`] and the clock, and acts on
//! the [`Outcome`]. The order of checks is the table of the README's "What the filter answers"
//! section; this is the code of that table.
//!
//! - [`head`]: the request headers and what they alone decide;
//! - [`credential`]: the request's grant, or 401 `no_grant`;
//! - [`body`]: a POST decided on its whole body, one message; [`batch`]: a JSON-RPC batch;
//! - [`judge`]: one message against the policy and the limits;
//! - [`approval`]: calls held for a person's approval;
//! - [`version`]: the protocol version a request is read by; [`binding`]: sessions bound to grants;
//! - [`decision`]: the decision record and the outcome the host acts on.
//!
//! The audit line written for a decision lives in [`crate::audit`].

use crate::mcp::Id;
use crate::reply::{code, Reply, RpcError};

mod approval;
mod batch;
mod binding;
mod body;
mod credential;
mod decision;
mod head;
mod judge;
mod version;

pub use crate::audit::{log_safe, truncate, AUDIT_MAX_KEYS, AUDIT_MAX_VALUE};
pub use approval::{on_approval_answer, PendingApproval};
pub use binding::{check_session, session_id_out, SessionCheck};
pub use body::on_body;
pub use decision::{Decision, DecisionKind, Outcome};
pub use head::{body_too_large, on_headers, unexpected_body, HeadOutcome, HeaderValue, HttpMethod, RequestHead};

fn refuse(kind: DecisionKind, status: u16, err: RpcError, id: &Id, headers: Vec<(&'static str, String)>) -> Outcome {
    let mut decision = Decision::new(kind);
    decision.error_kind = Some(err.kind);
    decision.reason = Some(err.reason.clone());
    decision.tool = err.tool.clone();
    decision.rule = err.rule.clone();
    Outcome::new(decision, Some(Reply { status, headers, body: err.to_json(id) }))
}

fn http_refusal(status: u16, kind: &'static str, reason: &str, headers: Vec<(&'static str, String)>) -> Outcome {
    let err = RpcError::new(code::INVALID_REQUEST, kind, format!("Invalid Request: {reason}"), reason);
    refuse(DecisionKind::Invalid, status, err, &Id::null(), headers)
}
