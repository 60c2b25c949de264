//! The chunk filter: the response body, chunk by chunk as Envoy hands it over, after a
//! [`Plan::FilterJson`](super::Plan::FilterJson) or [`Plan::FilterSse`](super::Plan::FilterSse).
//!
//! The body rules (each replaces the body by the JSON-RPC error −31006, see `crate::response::toolslist`):
//! - a JSON body over `gateway.max_response_bytes`, or an incomplete SSE event over it;
//! - JSON that does not parse (duplicate members included), or an SSE stream that is not UTF-8;
//! - an SSE event whose data does not parse but could carry a JSON-RPC message (`crate::wire::sse`), or a
//!   field name that lenient clients read as `data`;
//! - a result answering the request, or carrying `tools`, whose `tools` is not an array of objects
//!   with string names, or whose member names clash after case folding.

use super::{BadUpstream, ResponseFilter, State};
use crate::policy::Policy;
use crate::response::result;
use crate::response::toolslist::{self, ListError};
use crate::wire::json::{self, Json};

/// A host call on the body bytes that failed ([`ResponseFilter::host_failed`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HostOp {
    Read,
    Write,
}

/// What the host does with the body bytes Envoy holds now ([`ResponseFilter::on_body`],
/// [`ResponseFilter::on_chunk`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// Leave them as they are and continue.
    Pass,
    /// Keep buffering (pause): a JSON body is filtered only once whole.
    Hold,
    /// Read them (for JSON: the whole buffered body) and hand them to [`ResponseFilter::on_chunk`].
    Read,
    /// Replace them by `bytes`, from which `removed` tools were taken out.
    Write { bytes: Vec<u8>, removed: usize },
    /// Drop them: an error already replaced this body.
    Drop,
    /// Replace them by [`BadUpstream::body`]; the rest of the body is dropped.
    Fail(BadUpstream),
}

impl ResponseFilter {
    /// The step for the body bytes at hand: `body_size` bytes are buffered (JSON, held) or new
    /// (SSE); `end`: they end the body.
    pub fn on_body(&mut self, body_size: usize, end: bool) -> Step {
        match self.state {
            State::Dropping => Step::Drop,
            State::Sse(_) => Step::Read,
            State::Json if body_size > self.max_bytes => match self.call_oversize() {
                Some((rule, why)) => Step::Fail(self.fail_rule(why, Some(&rule), end)),
                None => Step::Fail(self.fail(self.too_large().into(), end)),
            },
            State::Json if !end => {
                self.held = body_size;
                Step::Hold
            }
            State::Json => Step::Read,
            State::Pass | State::Awaiting(_) => Step::Pass,
        }
    }

    /// Filter the bytes read after [`Step::Read`]; `hidden` says which tools leave lists
    /// ([`crate::policy::Policy::is_unlisted`]).
    pub fn on_chunk(&mut self, chunk: &[u8], end: bool, hidden: &dyn Fn(&str) -> bool) -> Step {
        self.filter_chunk(chunk, end, hidden, None)
    }

    /// [`Self::on_chunk`], with the tool results in the bytes judged by `policy`'s `result` rules
    /// ([`ResponseFilter::judging`]); what happened is kept for [`ResponseFilter::take_events`].
    pub fn on_chunk_judged(&mut self, chunk: &[u8], end: bool, hidden: &dyn Fn(&str) -> bool, policy: &Policy) -> Step {
        let step = self.filter_chunk(chunk, end, hidden, Some(policy));
        if end {
            result::reply_ended(policy, &self.calls, &mut self.events);
        }
        step
    }

    fn filter_chunk(
        &mut self,
        chunk: &[u8],
        end: bool,
        hidden: &dyn Fn(&str) -> bool,
        policy: Option<&Policy>,
    ) -> Step {
        let (lists, ids, calls, events) = (self.lists, &self.ids, &self.calls, &mut self.events);
        let (results, pins) = (self.results, self.pins);
        let read = lists || pins || results;
        let mut results_changed = false;
        // What redaction may add to the responses at hand: what the limit leaves of a JSON body (a
        // batch's responses together), the limit for the SSE events of one chunk.
        let mut room = self.max_bytes.saturating_sub(if matches!(self.state, State::Json) { chunk.len() } else { 0 });
        let mut judge = |msg: &mut Json, size: usize| -> Result<Option<usize>, ListError> {
            // The member names of every message read for its tools or results are checked (two
            // equal after case folding, one that folds to a JSON-RPC or MCP member without being
            // it): a client that matches names loosely reads the other member, the filter this one.
            // (A stream read only for the ids it hands out is never refused.)
            let mut changed = if read { toolslist::filter_message(msg, ids, hidden)? } else { None };
            if let Some(p) = policy.filter(|_| pins) {
                if let Some(removed) = result::pins::check_lists(msg, p, events) {
                    changed = Some(changed.unwrap_or(0) + removed);
                }
            }
            if let Some(p) = policy.filter(|_| results) {
                if result::judge_message(msg, size, p, calls, events, &mut room) {
                    results_changed = true;
                    changed = Some(changed.unwrap_or(0));
                }
            }
            Ok(changed)
        };
        let filtered = match &mut self.state {
            State::Sse(stream) => match stream.push_judged(chunk, end, &mut judge, self.seal.as_ref()) {
                Ok((out, 0)) if out == chunk => return Step::Pass,
                other => other,
            },
            State::Json => {
                let r = judge_json(chunk, &mut judge);
                if r.is_ok() {
                    self.state = State::Pass;
                }
                match r {
                    // A tool list with nothing removed passes byte for byte.
                    Ok(None) | Ok(Some((_, 0))) if !results_changed => return Step::Pass,
                    Ok(Some(changed)) => Ok(changed),
                    Ok(None) => return Step::Pass,
                    Err(e) => Err(e),
                }
            }
            _ => return Step::Pass,
        };
        match filtered {
            Ok((bytes, removed)) => Step::Write { bytes, removed },
            Err(e) => Step::Fail(self.fail(e.to_string(), end)),
        }
    }

    /// The host could not read the body bytes ([`HostOp::Read`]) or write a [`Step::Write`]
    /// ([`HostOp::Write`]); `detail` is its status, written with `{:?}`. The error replaces the body
    /// like any other body that cannot be filtered.
    pub fn host_failed(&mut self, op: HostOp, detail: &dyn std::fmt::Debug, end: bool) -> BadUpstream {
        let what = match op {
            HostOp::Read => "read",
            HostOp::Write => "rewrite",
        };
        self.fail(format!("cannot {what} the response body: {detail:?}"), end)
    }
}

/// A whole JSON body through `judge`: `None` if it passes unchanged, else the new body and the
/// number of tools removed.
fn judge_json(body: &[u8], judge: &mut toolslist::Judge<'_>) -> Result<Option<(Vec<u8>, usize)>, ListError> {
    let mut msg = json::parse_folded_keys_allowed(body).map_err(|e| ListError::Unreadable(e.to_string()))?;
    let Some(removed) = judge(&mut msg, body.len())? else { return Ok(None) };
    let mut out = String::with_capacity(body.len());
    json::write(&mut out, &msg);
    Ok(Some((out.into_bytes(), removed)))
}
