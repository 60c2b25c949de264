//! The wire shape of the JSON-RPC error responses the filter sends as Envoy local replies, and
//! their codes. Which error, with which code, status and headers, is `crate::outcome::refusal::Refusal`'s to
//! say: it is the only caller of [`RpcError`].
//!
//! Shape (JSON-RPC 2.0 §5.1): `{"jsonrpc":"2.0","id":ID,"error":{"code":C,"message":M,"data":{...}}}`
//! with `data.kind` naming the case. The filter's own codes lie outside the reserved range
//! −32768…−32000, as MCP 2026-07-28 (basic/index) asks of new codes; protocol errors use the standard
//! JSON-RPC codes and MCP's −32020 HeaderMismatch.

use crate::wire::json::write_str;
use crate::wire::mcp::Id;

/// Stable error codes. Documented in the README; never renumber.
pub mod code {
    /// The policy denies the call (`data.kind` `denied`).
    pub const DENIED: i32 = -31001;
    /// A rate limit is exhausted (`rate_limited`).
    pub const RATE_LIMITED: i32 = -31002;
    /// No usable grant (`no_grant`), HTTP 401.
    pub const NO_GRANT: i32 = -31003;
    /// The limiter could not count the call; refused to fail closed (`limiter_unavailable`).
    pub const LIMITER_UNAVAILABLE: i32 = -31004;
    /// An allowed element of a batch refused because another element was (`batch_refused`).
    pub const BATCH_REFUSED: i32 = -31005;
    /// A `tools/list` response the filter cannot filter (`bad_upstream_response`), HTTP 502.
    pub const BAD_UPSTREAM_RESPONSE: i32 = -31006;
    /// The tool needs a person's approval and none is usable yet (`approval_required`); `data` holds
    /// `approval_id`, `approval_url` and `expires_in_seconds`. Retry the identical call once approved.
    pub const APPROVAL_REQUIRED: i32 = -31007;
    /// An approver denied this exact call (`approval_denied`); `data` holds `approver` and `note`.
    pub const APPROVAL_DENIED: i32 = -31008;
    /// The approval service could not be asked (unreachable, timeout, bad answer): refused to fail
    /// closed (`approval_unavailable`), with `retry-after: 1`.
    pub const APPROVAL_UNAVAILABLE: i32 = -31009;
    /// The retry of a call offered for approval through `input_required` carries a `requestState`
    /// (or an answer to the gateway's request) that this gateway did not seal for this grant and
    /// call, or that has expired (`approval_state_invalid`, HTTP 400; `crate::approval::offer`).
    pub const APPROVAL_STATE_INVALID: i32 = -31011;
    /// A tool result refused by its tool's `result` rules, or unreadable (`result_refused`).
    pub const RESULT_REFUSED: i32 = -31012;
    /// A tool whose definition does not match its `pin` (`pin_mismatch`).
    pub const PIN_MISMATCH: i32 = -31013;
    /// A tool denied by a flow while the grant carries one of its marks (`flow_denied`); `data`
    /// holds `flow`, `mark` and `retry_after_seconds` (when it lifts).
    pub const FLOW_DENIED: i32 = -31014;
    /// MCP 2025-11-25 URLElicitationRequiredError: a pending approval offered to a client that
    /// declared URL-mode elicitation (`crate::approval::offer`); `data.elicitations` holds the approval page.
    pub const URL_ELICITATION_REQUIRED: i32 = -32042;
    /// MCP 2026-07-28 Streamable HTTP: `Mcp-Method`/`Mcp-Name` disagree with the body.
    pub const HEADER_MISMATCH: i32 = -32020;
    /// `Mcp-Session-Id` was not issued to this grant under `gateway.session_key` (another grant's,
    /// tampered, forged, or from before the key changed): `session_invalid`, HTTP 404, so that
    /// clients start a new session.
    pub const SESSION_INVALID: i32 = -31010;
    /// MCP 2026-07-28: the request's protocol version is unknown or not in
    /// `gateway.protocol_versions` (`unsupported_protocol_version`, HTTP 400); `data.supported`
    /// lists the accepted versions, `data.requested` the one sent.
    pub const UNSUPPORTED_PROTOCOL_VERSION: i32 = -32022;
    /// JSON-RPC 2.0 parse error.
    pub const PARSE_ERROR: i32 = -32700;
    /// JSON-RPC 2.0 invalid request; also used for HTTP-level refusals (405, 413, 415) and for
    /// `unavailable` (503).
    pub const INVALID_REQUEST: i32 = -32600;
    /// JSON-RPC 2.0 invalid params.
    pub const INVALID_PARAMS: i32 = -32602;
    /// JSON-RPC 2.0 method not found: a method the request's protocol version does not define
    /// (`method_not_found`; HTTP 404 in MCP 2026-07-28, 200 before).
    pub const METHOD_NOT_FOUND: i32 = -32601;
}

/// One JSON-RPC error, before it is given an id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RpcError {
    pub code: i32,
    /// `data.kind`.
    pub kind: &'static str,
    pub message: String,
    pub tool: Option<String>,
    pub reason: String,
    pub rule: Option<String>,
    pub retry_after_seconds: Option<u64>,
    pub counter: Option<String>,
    /// Seconds an approval request stays open (`approval_required`).
    pub expires_in_seconds: Option<u64>,
    /// Further string members of `data`, in order (approval id, URL, approver, note).
    pub extra: Vec<(&'static str, String)>,
}

impl RpcError {
    pub fn new(code: i32, kind: &'static str, message: impl Into<String>, reason: impl Into<String>) -> Self {
        RpcError {
            code,
            kind,
            message: message.into(),
            tool: None,
            reason: reason.into(),
            rule: None,
            retry_after_seconds: None,
            counter: None,
            expires_in_seconds: None,
            extra: Vec::new(),
        }
    }

    /// The error response object for `id`.
    pub fn to_json(&self, id: &Id) -> String {
        self.to_json_with(id, &[])
    }

    /// [`RpcError::to_json`] with further members of `data` whose values are JSON texts (e.g. the
    /// `supported` array of −32022).
    pub fn to_json_with(&self, id: &Id, extra_json: &[(&str, &str)]) -> String {
        let mut out = String::with_capacity(160 + self.message.len() + self.reason.len());
        out.push_str("{\"jsonrpc\":\"2.0\",\"id\":");
        out.push_str(id.raw());
        out.push_str(",\"error\":{\"code\":");
        out.push_str(&self.code.to_string());
        out.push_str(",\"message\":");
        write_str(&mut out, &self.message);
        out.push_str(",\"data\":{\"kind\":");
        write_str(&mut out, self.kind);
        if let Some(t) = &self.tool {
            out.push_str(",\"tool\":");
            write_str(&mut out, t);
        }
        out.push_str(",\"reason\":");
        write_str(&mut out, &self.reason);
        if let Some(r) = &self.rule {
            out.push_str(",\"rule\":");
            write_str(&mut out, r);
        }
        if let Some(s) = self.retry_after_seconds {
            out.push_str(",\"retry_after_seconds\":");
            out.push_str(&s.to_string());
        }
        if let Some(c) = &self.counter {
            out.push_str(",\"counter\":");
            write_str(&mut out, c);
        }
        if let Some(s) = self.expires_in_seconds {
            out.push_str(",\"expires_in_seconds\":");
            out.push_str(&s.to_string());
        }
        for (k, v) in &self.extra {
            out.push_str(",\"");
            out.push_str(k);
            out.push_str("\":");
            write_str(&mut out, v);
        }
        for (k, v) in extra_json {
            out.push_str(",\"");
            out.push_str(k);
            out.push_str("\":");
            out.push_str(v);
        }
        out.push_str("}}}");
        out
    }
}

/// A complete local reply: HTTP status, extra headers, and the JSON body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reply {
    pub status: u16,
    /// Besides `content-type: application/json`, which is always set.
    pub headers: Vec<(&'static str, String)>,
    pub body: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_json_is_exact_and_parses() {
        let mut e = RpcError::new(code::RATE_LIMITED, "rate_limited", "tool 'x' rate limited", "limit \"c\" reached");
        e.tool = Some("x".into());
        e.retry_after_seconds = Some(42);
        e.counter = Some("c".into());
        let text = e.to_json(&Id::null());
        assert_eq!(
            text,
            r#"{"jsonrpc":"2.0","id":null,"error":{"code":-31002,"message":"tool 'x' rate limited","data":{"kind":"rate_limited","tool":"x","reason":"limit \"c\" reached","retry_after_seconds":42,"counter":"c"}}}"#
        );
        let v: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(v["error"]["data"]["reason"], "limit \"c\" reached");
    }
}
