//! What the host does about a request: the [`Outcome`] (its decision is recorded as a
//! [`Decision`]).

use super::PendingApproval;
use crate::outcome::decision::Decision;
use crate::wire::mcp::Id;
use crate::wire::reply::Reply;

/// The result: forward (`reply == None`) or answer locally with `reply` — unless `approval` is set:
/// then hold the request, ask the approval service, and finish with [`on_approval_answer`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outcome {
    pub decision: Decision,
    pub reply: Option<Reply>,
    /// Ids of forwarded `tools/list` requests, whose responses must be filtered (`toolslist`).
    pub tools_list_ids: Vec<Id>,
    /// A call allowed by every rule that still needs a person's approval.
    pub approval: Option<Box<PendingApproval>>,
    /// With `gateway.rate_limit_service`: hold the request, ask the service, finish with
    /// [`crate::pipeline::rls::on_answer`] (after approval, when both are needed).
    pub rls: Option<Box<crate::pipeline::rls::Pending>>,
    /// The body to forward instead of the one received, whenever the request goes upstream (after
    /// an approval or the rate limit service, too): the retry of an offer without the gateway's
    /// `inputResponses` entry and `requestState` (`crate::approval::offer`).
    pub rewrite: Option<crate::pipeline::rewrite::BodyRewrite>,
    /// An `initialize` whose client declares URL elicitation (`capabilities.elicitation.url`): the
    /// session id the server hands out is bound as an `m2.` id (`crate::identity::session`, `crate::approval::offer`).
    pub url_elicitation: bool,
    /// What this outcome did with an approval offer, for the stats (`crate::approval::offer::Event`).
    pub offer: Option<crate::approval::offer::Event>,
    /// The grant of a request that may go upstream: the marks its results set are set on it
    /// (`crate::policy::flows`).
    pub grant_id: Option<crate::identity::grant::GrantId>,
    /// A GET that accepts events: it opens the server's SSE stream, whose 2xx body a client may
    /// read as events whatever its content type (`crate::response::ResponseFilter::set_event_stream`).
    pub event_stream: bool,
}

impl Outcome {
    /// With `gateway.refusal_shape: "tool_result"`: a refused `tools/call` (a policy refusal about
    /// one tool, answered 200) becomes a successful JSON-RPC response whose result is a failed tool
    /// call, `{"content":[{"type":"text","text":REASON}],"isError":true}` (with `"resultType":"complete"`
    /// first for an MCP 2026-07-28 request, whose schema requires it); every other reply stays.
    pub fn shape(&mut self, shape: crate::terms::RefusalShape) {
        if shape != crate::terms::RefusalShape::ToolResult {
            return;
        }
        let (Some(reply), Some(refusal), Some(id)) = (&mut self.reply, &self.decision.refusal, &self.decision.id)
        else {
            return;
        };
        let about_a_call = self.decision.method.as_deref() == Some("tools/call") && refusal.tool().is_some();
        if !about_a_call
            || reply.status != 200
            || !reply.body.starts_with('{')
            || refusal.code() == crate::wire::reply::code::URL_ELICITATION_REQUIRED
        {
            return;
        }
        let mut body = String::with_capacity(96 + reply.body.len() / 2);
        body.push_str("{\"jsonrpc\":\"2.0\",\"id\":");
        body.push_str(id);
        body.push_str(",\"result\":{");
        if self.decision.tagged_results {
            body.push_str("\"resultType\":\"complete\",");
        }
        body.push_str("\"content\":[{\"type\":\"text\",\"text\":");
        crate::wire::json::write_str(&mut body, &refusal.reason());
        body.push_str("}],\"isError\":true}}");
        reply.body = body;
        reply.headers.retain(|(k, _)| *k != "retry-after");
    }

    pub(crate) fn new(decision: Decision, reply: Option<Reply>) -> Self {
        Outcome {
            decision,
            reply,
            tools_list_ids: Vec::new(),
            approval: None,
            rls: None,
            rewrite: None,
            url_elicitation: false,
            offer: None,
            grant_id: None,
            event_stream: false,
        }
    }
}
