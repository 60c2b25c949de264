//! The response side of one stream, pure: the host reads response headers and body bytes, hands
//! them here, and only acts on what comes back (and counts it).
//!
//! Responses are inspected only for requests the filter forwarded, and only when the policy removes
//! tools from `tools/list` results ([`Policy::filters_tools_list`]) or binds sessions to their grant
//! (`gateway.session_key`). For tool lists:
//! - the reply to a forwarded `tools/list` request must be JSON or SSE the filter can read; any other
//!   reply is refused with 502 before a byte of it leaves (`plan`, the header rules);
//! - the reply to any other forwarded request (the GET stream, `subscriptions/listen`, resumed
//!   streams) is filtered when it is an SSE stream or JSON: a tool list can arrive on any stream,
//!   and the SDKs hand each response of a JSON reply to the request its id names, which may be
//!   another one than the request it replies to.
//!
//! With `gateway.session_key`, every SSE reply also has the ids it hands out sealed for the grant
//! ([`ResponseFilter::sealing`], `crate::identity::session::StreamIds`); one that is content-encoded passes
//! unsealed, since its bare ids are refused when presented back. Where the policy does not filter
//! tool lists, SSE replies are read only for their ids: nothing in them is parsed or refused.
//!
//! The body is then filtered by [`ResponseFilter::on_body`] and [`ResponseFilter::on_chunk`]
//! (`body`): JSON once whole, SSE event by event as it arrives (`crate::response::toolslist`). In Envoy 1.40 a
//! wasm filter that pauses response headers never sees the body, so the headers (status included)
//! leave before the body is read: a body found unfilterable afterwards is replaced by the JSON-RPC
//! error (framed as one SSE event on a stream), and the rest of it is dropped.
//!
//! Every refusal is `bad_upstream_response` (−31006, [`crate::wire::reply::code::BAD_UPSTREAM_RESPONSE`])
//! with the `tools/list` request's id where there is one, else `null`.
//!
//! Layer `response` (crate docs); may use: every layer below it: `terms` … `pipeline`.

use crate::identity::session::StreamIds;
use crate::outcome::refusal::Refusal;
use crate::policy::Policy;
use crate::response::toolslist::SseStream;
use crate::wire::json::{self, Json};
use crate::wire::mcp::Id;
use crate::wire::reply::Reply;

mod body;
mod plan;
pub mod result;
pub mod toolslist;
pub use body::{HostOp, Step};
pub use plan::Plan;

/// The response side of one stream: what its request asked to inspect, and how far its response got.
#[derive(Debug)]
pub struct ResponseFilter {
    /// Ids of the forwarded `tools/list` requests this response answers.
    ids: Vec<Json>,
    /// `gateway.max_response_bytes`: the largest JSON body, or incomplete SSE event, held.
    max_bytes: usize,
    /// The size of the JSON body held so far ([`ResponseFilter::held_json`]).
    held: usize,
    /// How an error replacing the body is framed (set by the plan).
    framing: Framing,
    state: State,
    /// With `gateway.session_key`: seals the ids an SSE reply hands out.
    seal: Option<StreamIds>,
    /// Tool lists are filtered (the policy removes tools from them).
    lists: bool,
    /// Listed tools are checked against their pins (some tool has a `pin`).
    pins: bool,
    /// Tool results are judged (some tool has `result` rules), and the calls this response answers.
    results: bool,
    calls: result::Calls,
    /// What happened to results so far, for the audit record and the metrics ([`Self::take_events`]).
    events: Vec<result::ResultEvent>,
    /// The reply to a GET, the server's SSE stream ([`crate::pipeline::Outcome::event_stream`]).
    event_stream: bool,
}

/// Which replies to a forwarded request can carry a tool list that must be filtered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Scope {
    /// The reply to a `tools/list` request: JSON or SSE; anything else is refused.
    ListReply,
    /// The reply to a `tools/call` whose tool has `result` rules: JSON or SSE; anything else is
    /// refused (`result_refused`).
    CallReply,
    /// Any other forwarded request: SSE and JSON replies; any other passes, unless a client could
    /// read it as messages (`plan.rs`).
    AnyStream,
    /// Tool lists are not filtered: SSE replies are read for their ids only.
    Ids,
}

#[derive(Debug)]
enum State {
    /// Passed untouched: never inspected, not a tool list, filtered already, or refused.
    Pass,
    /// Forwarded; its headers decide ([`ResponseFilter::on_headers`]).
    Awaiting(Scope),
    /// A JSON reply, held until whole, then filtered.
    Json,
    /// An SSE stream, filtered event by event.
    Sse(SseStream),
    /// The body was replaced by an error; the rest of it is dropped.
    Dropping,
}

/// How an error that replaces a body is written: a JSON body, or one SSE `message` event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Framing {
    Json,
    Sse,
}

/// A response the filter cannot pass (`bad_upstream_response`, −31006): why (for the log line), and
/// the text sent instead: the JSON-RPC error (as one SSE event when it replaces a stream's bytes).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BadUpstream {
    pub why: String,
    pub body: String,
    /// The status of the local reply when refused at its headers: 502 (`bad_upstream_response`),
    /// or 200 for a tool result (`result_refused`, a tool call error the agent is shown).
    pub status: u16,
}

impl BadUpstream {
    /// The local reply of a response refused at its headers, with the JSON-RPC error.
    pub fn reply(self) -> Reply {
        Reply { status: self.status, headers: vec![], body: self.body }
    }
}

impl ResponseFilter {
    /// The size of the JSON body held to its end so far, if one is: a body that ends in trailers
    /// (HTTP/2) is read at them, whole, with this size ([`ResponseFilter::on_body`] with `end`;
    /// trailers add no bytes, and each chunk was measured against the limit as it came). No body
    /// at all before the trailers is `None`: nothing to filter, and no buffer a wasm host could
    /// write an error into.
    pub fn held_json(&self) -> Option<usize> {
        (matches!(self.state, State::Json) && self.held > 0).then_some(self.held)
    }

    /// The body was refused part-way: what more of it comes is dropped ([`Step::Drop`]).
    pub fn dropping(&self) -> bool {
        matches!(self.state, State::Dropping)
    }

    /// A response that is not inspected (answered locally, or before a decision).
    pub fn pass() -> Self {
        ResponseFilter {
            ids: Vec::new(),
            max_bytes: 0,
            held: 0,
            framing: Framing::Json,
            state: State::Pass,
            seal: None,
            lists: false,
            pins: false,
            results: false,
            calls: result::Calls::default(),
            events: Vec::new(),
            event_stream: false,
        }
    }

    /// The response to a request the filter forwarded; `tools_list_ids` are the ids of the
    /// `tools/list` requests in it (`gate::Outcome::tools_list_ids`). Not inspected unless the policy
    /// removes tools from lists or pins them ([`Self::judging`]: or judges tool results).
    pub fn forwarded(policy: &Policy, tools_list_ids: &[Id]) -> Self {
        if !policy.filters_tools_list() && !policy.has_pins() {
            return Self::pass();
        }
        let scope = if tools_list_ids.is_empty() { Scope::AnyStream } else { Scope::ListReply };
        ResponseFilter {
            ids: tools_list_ids.iter().filter_map(|id| json::parse(id.raw().as_bytes()).ok()).collect(),
            max_bytes: policy.gateway.max_response_bytes,
            held: 0,
            state: State::Awaiting(scope),
            lists: policy.filters_tools_list(),
            pins: policy.has_pins(),
            ..Self::pass()
        }
    }

    /// Where some tool has `result` rules, the response's tool results are judged: those of the
    /// `tools/call` its request's `decision` forwarded by their tool's rules, any other on any
    /// stream by every tool's ([`result`]).
    pub fn judging(mut self, policy: &Policy, decision: &crate::outcome::decision::Decision) -> Self {
        if !policy.has_result_rules() {
            return self;
        }
        self.results = true;
        self.calls = result::Calls::of(policy, decision);
        let gateway_max = policy.gateway.max_response_bytes;
        // Held up to the largest limit that applies; each result is then held to its own.
        let own =
            self.calls.judged.iter().filter_map(|(_, t)| policy.result_rules(t)).map(|r| r.max_bytes_or(gateway_max));
        let all = || policy.all_result_rules().into_iter().map(|(_, r)| r.max_bytes_or(gateway_max)).max();
        let limit = own.max().or_else(all).unwrap_or(gateway_max);
        // The reply to `tasks/result` (MCP 2025-11-25) is the result of a `tools/call` made as a
        // task: its call is not known here, so its JSON is read too, and judged by every tool's
        // rules, as a result replayed on a stream is.
        let task_result = decision.method.as_deref() == Some("tasks/result");
        self.max_bytes = match (self.ids.is_empty(), self.calls.judged.is_none()) {
            (true, false) => limit,
            // The reply to any other request is held as a tool list's would be, at least: each
            // result in it is then held to every tool's limit.
            (true, true) if !task_result => limit.max(gateway_max),
            _ => self.max_bytes.max(limit),
        };
        self.state = match self.state {
            State::Pass | State::Awaiting(Scope::AnyStream) if self.calls.judged.is_some() || task_result => {
                State::Awaiting(Scope::CallReply)
            }
            State::Pass => State::Awaiting(Scope::AnyStream),
            other => other,
        };
        self
    }

    /// `event_stream`: the request was a GET, which opens the server's SSE stream
    /// ([`crate::pipeline::Outcome::event_stream`]): a 2xx reply that is not SSE is refused.
    pub fn set_event_stream(&mut self, event_stream: bool) {
        self.event_stream = event_stream;
    }

    /// What happened to tool results since the last call (for the audit record and the metrics).
    pub fn take_events(&mut self) -> Vec<result::ResultEvent> {
        std::mem::take(&mut self.events)
    }

    /// With `ids` (`gate::stream_ids`: `gateway.session_key` is set and the request has a grant),
    /// the ids its SSE reply hands out are sealed; a reply whose tool lists are not filtered is then
    /// read only when it is an SSE stream, and only for its ids.
    pub fn sealing(mut self, policy: &Policy, ids: Option<StreamIds>) -> Self {
        let Some(ids) = ids else { return self };
        if matches!(self.state, State::Pass) {
            self.max_bytes = policy.gateway.max_response_bytes;
            self.state = State::Awaiting(Scope::Ids);
        }
        self.seal = Some(ids);
        self
    }

    /// The response names the server's session (its `Mcp-Session-Id`, as `initialize` does): the
    /// events it sends belong to that session.
    pub fn set_session(&mut self, upstream: &[u8]) {
        if let Some(seal) = &mut self.seal {
            seal.set_session(upstream);
        }
    }

    /// The reply to a judged call will not carry its answer, or did not: its marks are set all
    /// the same, as at a body's end ([`Self::on_chunk_judged`]), once. The result may still reach
    /// the client on another stream, where the call is not known. `held`: the host holds the reply
    /// until the marks are recorded: a reply that only acknowledges the call or has no body
    /// ([`Plan::Unanswered`], at its headers), or a refused one (before its error goes on). Else
    /// the stream has ended without the reply's end being seen (a reset; HTTP/2 trailers: the
    /// host's last hook for the stream), and the marks are set only where the process records them
    /// at once: with `gateway.rate_limit_service` nothing is left to hold until the service has.
    pub fn on_end(&mut self, policy: &Policy, held: bool) {
        if held || policy.gateway.rate_limit_service.is_none() {
            result::reply_ended(policy, &self.calls, &mut self.events);
        }
    }

    /// The refusal for `why` and the id it answers: with a `tools/list` id (or no call), −31006 with
    /// that id, else `null`; for the reply to a `tools/call` whose results are judged,
    /// `result_refused` for that call (`rule`: `tools.NAME.result`, else the rule given).
    fn refusal_for(&self, why: &str, rule: Option<&str>) -> (Refusal, Id) {
        match (self.ids.first(), &self.calls.judged) {
            (None, Some((id, tool))) => {
                let (rule, reason) = match rule {
                    Some(rule) => (rule.to_owned(), why.to_owned()),
                    None => (
                        format!("tools.{tool}.result"),
                        format!("the tool result cannot be read with certainty: {why}"),
                    ),
                };
                let refusal = Refusal::ResultRefused { tool: tool.clone(), rule, reason };
                (refusal, Id::of(id))
            }
            (first, _) => (Refusal::BadUpstreamResponse { why: why.to_owned() }, first.map_or_else(Id::null, Id::of)),
        }
    }

    /// The error for `why`: it replaces the bytes at hand (`end`: they end the body, else the rest
    /// is dropped), or the whole response (a local 502, refused at its headers: `end` true, JSON).
    fn fail(&mut self, why: String, end: bool) -> BadUpstream {
        self.fail_rule(why, None, end)
    }

    /// [`Self::fail`], naming the rule that refused a tool result.
    fn fail_rule(&mut self, why: String, rule: Option<&str>, end: bool) -> BadUpstream {
        let (refusal, id) = self.refusal_for(&why, rule);
        let json = refusal.to_json(&id);
        if matches!(refusal, Refusal::ResultRefused { .. }) {
            let id_json = json::parse(id.raw().as_bytes()).unwrap_or(Json::Null);
            self.events.push(result::ResultEvent::refused(&refusal, &id_json, false));
        }
        let status = refusal.status();
        let body = match self.framing {
            Framing::Json => json,
            Framing::Sse => format!("event: message\ndata: {json}\n\n"),
        };
        self.state = if end { State::Pass } else { State::Dropping };
        BadUpstream { why, body, status }
    }
}
