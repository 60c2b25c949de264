//! The request pipeline: from HTTP headers and the whole body to "forward" or a local reply.
//!
//! Pure: the host adapter hands in header bytes, the body, a [`SharedStore`] and the clock, and acts on
//! the [`Outcome`]. The order of checks is the table of the README's "What the filter answers"
//! section; this is the code of that table.
//!
//! - [`head`]: the request headers and what they alone decide; [`headers`]: the whole
//!   request-headers step (the set's choice, bound ids, then [`head`]), the plan each host acts on;
//! - [`credential`]: the request's grant, or 401 `no_grant`;
//! - [`body`]: a POST decided on its whole body, one message; [`batch`]: a JSON-RPC batch;
//! - [`judge`]: one message against the policy and the limits;
//! - [`approval`]: calls held for a person's approval; [`offer`]: their approval offered through
//!   the protocol (`input_required`, −32042) and the retry of such an offer;
//! - [`version`]: the protocol version a request is read by; [`binding`]: sessions bound to grants;
//! - [`decision`]: the decision record and the outcome the host acts on.
//!
//! The audit line written for a decision lives in [`crate::outcome::audit`].
//!
//! Layer `pipeline` (crate docs); may use: every layer below it: `terms` … `outcome`.

use crate::outcome::decision::Decision;
use crate::outcome::refusal::Refusal;
use crate::wire::mcp::Id;

mod approval;
mod attach;
mod batch;
mod binding;
mod body;
mod credential;
mod decision;
mod flows;
mod head;
mod headers;
mod judge;
mod offer;
pub mod rewrite;
pub mod rls;
mod version;

pub use approval::{on_approval_answer, ApprovalCallout, PendingApproval};
pub use attach::{attach, Attached};
pub use binding::{check_session, session_id_out, stream_ids, Binding, SessionCheck};
pub use body::on_body;
pub use decision::Outcome;
pub use flows::{record_mark, MarkRecord};
pub use head::{
    body_too_large, body_unreadable, on_headers, unexpected_body, HeadOutcome, HeaderValue, HttpMethod, RequestHead,
    NO_AUTHORITY, NO_CLUSTER, NO_PATH,
};
pub use headers::{request_headers, HeadersPlan};

/// A request refused with `refusal`, answered to `id`; the decision records its kind, reason,
/// tool and rule.
fn refuse(refusal: Refusal, id: &Id) -> Outcome {
    let reply = refusal.reply(id);
    Outcome::new(refused(refusal), Some(reply))
}

/// The decision of a request refused with `refusal`: its kind, reason, tool and rule.
fn refused(refusal: Refusal) -> Decision {
    let mut decision = Decision::new(refusal.decision_kind());
    decision.tool = refusal.tool().map(str::to_owned);
    decision.rule = refusal.rule().map(str::to_owned);
    decision.refused(refusal);
    decision
}

/// Why a callout to `cluster` (the approval or rate limit service) is an outage when the host
/// could not start it. The same text from both builds: what the host said (a proxy-wasm status, a
/// dynamic-module result code) differs between them, so each host logs it instead.
pub fn cannot_call(cluster: &str) -> String {
    format!("cannot call cluster '{cluster}'")
}
