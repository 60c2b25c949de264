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
use crate::response::toolslist;

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
            State::Json if body_size > self.max_bytes => {
                Step::Fail(self.fail("the tools/list response exceeds gateway.max_response_bytes".into(), end))
            }
            State::Json if !end => Step::Hold,
            State::Json => Step::Read,
            State::Pass | State::Awaiting(_) => Step::Pass,
        }
    }

    /// Filter the bytes read after [`Step::Read`]; `hidden` says which tools leave lists
    /// ([`crate::policy::Policy::is_unlisted`]).
    pub fn on_chunk(&mut self, chunk: &[u8], end: bool, hidden: &dyn Fn(&str) -> bool) -> Step {
        let filtered = match &mut self.state {
            State::Sse(stream) => match stream.push_sealed(chunk, end, &self.ids, hidden, self.seal.as_ref()) {
                Ok((out, 0)) if out == chunk => return Step::Pass,
                other => other,
            },
            State::Json => {
                let r = toolslist::filter_json(chunk, &self.ids, hidden);
                if r.is_ok() {
                    self.state = State::Pass;
                }
                match r {
                    Ok((_, 0)) => return Step::Pass,
                    other => other,
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
