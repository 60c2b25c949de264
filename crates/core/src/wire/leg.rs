//! Continuation legs of MCP 2026-07-28 multi-round-trip requests.
//!
//! A server may answer a `tools/call` with `{"resultType":"input_required","inputRequests":{…},
//! "requestState":"…"}`; the client then retries the same call with the same arguments plus
//! `params.inputResponses` (an object keyed like `inputRequests`) and `params.requestState` (the
//! opaque string, verbatim). Source: MCP 2026-07-28 "multi round-trip requests"; Python SDK 2.3
//! `mcp_types.InputResponseRequestParams` / `InputRequiredResult`.
//!
//! The answers decide what the retried call does ("type the VM name to confirm"), so an approval
//! binds them: [`crate::approval::key_with`] hashes them with the arguments, and the approver sees
//! them. An approval of the first leg never covers a continuation, and an approval of answers X
//! never covers answers Y.

use crate::wire::json::{self, Json, ParseError, Parser};

/// `params.inputResponses` and `params.requestState` of a retried request, as sent.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Leg {
    /// `params.inputResponses`: the JSON text of an object as sent (strictly checked).
    pub input_responses: Option<Box<str>>,
    /// `params.requestState`, unescaped.
    pub request_state: Option<String>,
    /// `params._meta`'s client capabilities declare URL-mode elicitation, so the call may be offered
    /// for approval through `input_required` (`crate::approval::offer`). Not part of any binding key.
    pub url_elicitation: bool,
}

impl Leg {
    /// Whether the request is a continuation leg (carries either member).
    pub fn is_continuation(&self) -> bool {
        self.input_responses.is_some() || self.request_state.is_some()
    }

    /// `inputResponses` as a value (numbers keep their exact text). Text that was sent but does not
    /// parse again (it was checked strictly, and [`json::parse_again`] folds its names without a
    /// bound, so never) is `null`: still a member of the binding key, so such a leg never shares a
    /// key with a first leg.
    pub fn input_responses_value(&self) -> Option<Json> {
        self.input_responses.as_deref().map(|t| json::parse_again(t.as_bytes()).unwrap_or(Json::Null))
    }
}

/// What [`read_input_responses`] / [`read_request_state`] found: a member of the wrong type is kept
/// as `Wrong` so only the methods that use it (`tools/call`) refuse it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) enum Member<T> {
    #[default]
    Absent,
    Ok(T),
    Wrong,
}

/// `params.inputResponses`: an object is checked strictly and kept as its text.
pub(crate) fn read_input_responses(p: &mut Parser<'_>) -> Result<Member<Box<str>>, ParseError> {
    let start = p.offset();
    if p.peek_non_ws() != Some(b'{') {
        p.skip_value()?;
        return Ok(Member::Wrong);
    }
    let start = start.max(p.offset());
    p.skip_value()?;
    Ok(Member::Ok(p.slice(start..p.offset()).into()))
}

/// `params.requestState`: a string.
pub(crate) fn read_request_state(p: &mut Parser<'_>) -> Result<Member<String>, ParseError> {
    Ok(match p.value()? {
        Json::String(s) => Member::Ok(s),
        _ => Member::Wrong,
    })
}

/// Both members of a `tools/call`, or which one has the wrong type.
pub(crate) fn leg_of(ir: Member<Box<str>>, rs: Member<String>) -> Result<Leg, &'static str> {
    let input_responses = match ir {
        Member::Absent => None,
        Member::Ok(t) => Some(t),
        Member::Wrong => return Err("\"params.inputResponses\" must be an object"),
    };
    let request_state = match rs {
        Member::Absent => None,
        Member::Ok(s) => Some(s),
        Member::Wrong => return Err("\"params.requestState\" must be a string"),
    };
    Ok(Leg { input_responses, request_state, url_elicitation: false })
}
