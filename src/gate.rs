//! The request pipeline: from HTTP headers and the whole body to "forward" or a local reply.
//!
//! Pure: the host adapter hands in header bytes, the body, a [`SharedStore`] and the clock, and acts on
//! the [`Outcome`]. The order of checks is the table of the README's "What the filter answers"
//! section; this is the code of that table.

use crate::approval::{self, Answer, CheckRequest};
use crate::grant::{self, Grant};
use crate::http;
use crate::mcp::{self, Body, Call, Id, Message, ProtocolError, ProtocolErrorKind};
use crate::policy::{Action, GrantSource, Mode, NeedsApproval, Policy, Verdict};
use crate::ratelimit::{Admission, GrantId, Limiter, Refusal, SharedStore};
use crate::reply::{code, Reply, RpcError};
use crate::stray;

mod binding;
mod version;

pub use binding::{check_session, session_id_out, SessionCheck};

/// The HTTP method, as far as Streamable HTTP cares (MCP 2025-03-26 transports: POST sends messages,
/// GET opens the server's SSE stream, DELETE ends a session).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HttpMethod {
    Post,
    Get,
    Delete,
    Other,
}

/// A header that matters to the decision: absent, present once, or present more than once (which
/// is refused: the filter and the server might each read a different copy).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum HeaderValue {
    #[default]
    Absent,
    One(Vec<u8>),
    Many,
}

impl HeaderValue {
    fn add(&mut self, v: &[u8]) {
        *self = match self {
            HeaderValue::Absent => HeaderValue::One(v.to_vec()),
            _ => HeaderValue::Many,
        };
    }
}

/// The request headers the filter reads, as bytes (values need not be UTF-8).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestHead {
    pub method: HttpMethod,
    pub content_type: HeaderValue,
    pub content_encoding: HeaderValue,
    /// `authorization`, or `gateway.grant_header`.
    pub credential: HeaderValue,
    pub mcp_method: HeaderValue,
    pub mcp_name: HeaderValue,
    /// `MCP-Protocol-Version`.
    pub protocol_version: HeaderValue,
    /// `Mcp-Session-Id`.
    pub session_id: HeaderValue,
    /// A credential outside the grant's one place (see `stray`), refused with 400.
    pub stray_credential: Option<&'static str>,
}

impl RequestHead {
    /// Collect the relevant headers from `(lower-case name, value)` pairs, e.g. Envoy's request
    /// header map including the `:method` pseudo-header.
    pub fn from_headers<'a>(policy: &Policy, headers: impl IntoIterator<Item = (&'a str, &'a [u8])>) -> Self {
        let credential_header = match &policy.gateway.grant {
            GrantSource::Bearer => "authorization",
            GrantSource::Header(h) => h.as_str(),
        };
        let mut head = RequestHead {
            method: HttpMethod::Other,
            content_type: HeaderValue::Absent,
            content_encoding: HeaderValue::Absent,
            credential: HeaderValue::Absent,
            mcp_method: HeaderValue::Absent,
            mcp_name: HeaderValue::Absent,
            protocol_version: HeaderValue::Absent,
            session_id: HeaderValue::Absent,
            stray_credential: None,
        };
        for (name, value) in headers {
            match name {
                ":method" => {
                    head.method = match value {
                        b"POST" => HttpMethod::Post,
                        b"GET" => HttpMethod::Get,
                        b"DELETE" => HttpMethod::Delete,
                        _ => HttpMethod::Other,
                    }
                }
                "content-type" => head.content_type.add(value),
                "content-encoding" => head.content_encoding.add(value),
                "mcp-method" => head.mcp_method.add(value),
                "mcp-name" => head.mcp_name.add(value),
                "mcp-protocol-version" => head.protocol_version.add(value),
                "mcp-session-id" => head.session_id.add(value),
                n if n == credential_header => head.credential.add(value),
                ":path" if stray::query_has_access_token(value) => {
                    head.stray_credential = Some(STRAY_QUERY);
                }
                n if stray::is_header_variant(n, credential_header) => head.stray_credential = Some(STRAY_HEADER),
                _ => {}
            }
        }
        head
    }
}

/// What happened to a request, for metrics, logs and the access log.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DecisionKind {
    /// A judged call the policy allowed.
    Allowed,
    /// Not subject to policy (lifecycle method, notification, GET/DELETE), forwarded.
    Passed,
    Denied,
    RateLimited,
    NoGrant,
    /// Refused before policy: protocol, media type, size, method or header errors.
    Invalid,
    LimiterUnavailable,
    /// Forwarded after a person approved this exact call (the approval is used up).
    Approved,
    /// Held for a person's approval: refused with `approval_required` until approved.
    ApprovalRequired,
    ApprovalDenied,
    /// The approval service could not be asked; refused.
    ApprovalUnavailable,
}

impl DecisionKind {
    pub fn as_str(self) -> &'static str {
        match self {
            DecisionKind::Allowed => "allowed",
            DecisionKind::Passed => "passed",
            DecisionKind::Denied => "denied",
            DecisionKind::RateLimited => "rate_limited",
            DecisionKind::NoGrant => "no_grant",
            DecisionKind::Invalid => "invalid",
            DecisionKind::LimiterUnavailable => "limiter_unavailable",
            DecisionKind::Approved => "approved",
            DecisionKind::ApprovalRequired => "approval_required",
            DecisionKind::ApprovalDenied => "approval_denied",
            DecisionKind::ApprovalUnavailable => "approval_unavailable",
        }
    }

    /// A refusal by policy (subject to dry-run), as opposed to a protocol error.
    pub fn is_policy(self) -> bool {
        matches!(
            self,
            DecisionKind::Denied
                | DecisionKind::RateLimited
                | DecisionKind::NoGrant
                | DecisionKind::LimiterUnavailable
                | DecisionKind::ApprovalRequired
                | DecisionKind::ApprovalDenied
                | DecisionKind::ApprovalUnavailable
        )
    }

    /// Every kind, once, in declaration order. `series` checks its metric labels against it.
    pub const ALL: [DecisionKind; 11] = [
        DecisionKind::Allowed,
        DecisionKind::Passed,
        DecisionKind::Denied,
        DecisionKind::RateLimited,
        DecisionKind::NoGrant,
        DecisionKind::Invalid,
        DecisionKind::LimiterUnavailable,
        DecisionKind::Approved,
        DecisionKind::ApprovalRequired,
        DecisionKind::ApprovalDenied,
        DecisionKind::ApprovalUnavailable,
    ];
}

/// Longest request-derived value written to an audit line (characters); longer ones end in `…`.
pub const AUDIT_MAX_VALUE: usize = 256;
/// Most argument names written to an audit line.
pub const AUDIT_MAX_KEYS: usize = 32;

/// `s` cut to at most `max` characters, with `…` marking a cut.
pub fn truncate(s: &str, max: usize) -> std::borrow::Cow<'_, str> {
    match s.char_indices().nth(max) {
        None => std::borrow::Cow::Borrowed(s),
        Some((at, _)) => std::borrow::Cow::Owned(format!("{}…", s.get(..at).unwrap_or(""))),
    }
}

/// A request-derived value made safe for a plain-text log line (Envoy's access log): control
/// characters and line/paragraph separators are written as `\u{…}` escapes, and the value is cut
/// to 128 characters, so a tool name cannot forge or flood log lines.
pub fn log_safe(s: &str) -> String {
    let mut out = String::with_capacity(s.len().min(160));
    for c in truncate(s, 128).chars() {
        if c.is_control() || c == '\u{2028}' || c == '\u{2029}' {
            out.push_str(&format!("\\u{{{:x}}}", u32::from(c)));
        } else {
            out.push(c);
        }
    }
    out
}

/// The record of one decision. Never holds tokens or argument values.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decision {
    pub kind: DecisionKind,
    pub method: Option<String>,
    pub tool: Option<String>,
    pub rule: Option<String>,
    /// The grant label (`sha256:…`), once known.
    pub grant: Option<String>,
    /// `data.kind` of the error reply, if any.
    pub error_kind: Option<&'static str>,
    pub reason: Option<String>,
    /// The JSON-RPC id as sent (raw JSON text), for requests.
    pub id: Option<String>,
    /// The names of the `tools/call` arguments (never their values).
    pub arg_keys: Vec<String>,
    /// Dry-run: the request was refused by policy but forwarded anyway ("would deny").
    pub dry_run: bool,
    /// The approval this decision is about (`require_approval` tools).
    pub approval_id: Option<String>,
}

impl Decision {
    pub(crate) fn new(kind: DecisionKind) -> Self {
        Decision {
            kind,
            method: None,
            tool: None,
            rule: None,
            grant: None,
            error_kind: None,
            reason: None,
            id: None,
            arg_keys: Vec::new(),
            dry_run: false,
            approval_id: None,
        }
    }

    /// The decision as shown in the access log and the audit log: the kind, or `would_deny` in
    /// dry-run mode.
    pub fn label(&self) -> &'static str {
        if self.dry_run {
            "would_deny"
        } else {
            self.kind.as_str()
        }
    }

    /// One audit-log line (JSON, no trailing newline). `ts` is RFC 3339 UTC; `request_id` is Envoy's
    /// `x-request-id`. Never contains tokens or argument values. Schema: see the README.
    pub fn audit_json(&self, ts: &str, request_id: Option<&str>) -> String {
        let mut o = String::with_capacity(256);
        // Values that come from the request are capped: an audit line must not be a way to flood logs.
        let field = |o: &mut String, k: &str, v: Option<&str>| {
            if let Some(v) = v {
                o.push_str(if o.len() > 1 { ",\"" } else { "\"" });
                o.push_str(k);
                o.push_str("\":");
                crate::json::write_str(o, &truncate(v, AUDIT_MAX_VALUE));
            }
        };
        o.push('{');
        field(&mut o, "ts", Some(ts));
        field(&mut o, "decision", Some(self.label()));
        field(&mut o, "error", self.error_kind);
        field(&mut o, "method", self.method.as_deref());
        field(&mut o, "tool", self.tool.as_deref());
        field(&mut o, "rule", self.rule.as_deref());
        field(&mut o, "reason", self.reason.as_deref());
        field(&mut o, "grant", self.grant.as_deref());
        field(&mut o, "approval_id", self.approval_id.as_deref());
        match &self.id {
            Some(id) if id.len() <= AUDIT_MAX_VALUE => {
                o.push_str(",\"id\":");
                o.push_str(id);
            }
            Some(id) => {
                o.push_str(",\"id_bytes\":");
                o.push_str(&id.len().to_string());
            }
            None => {}
        }
        if !self.arg_keys.is_empty() {
            o.push_str(",\"arg_keys\":[");
            for (i, k) in self.arg_keys.iter().take(AUDIT_MAX_KEYS).enumerate() {
                if i > 0 {
                    o.push(',');
                }
                crate::json::write_str(&mut o, &truncate(k, 64));
            }
            o.push(']');
            if self.arg_keys.len() > AUDIT_MAX_KEYS {
                o.push_str(",\"arg_keys_total\":");
                o.push_str(&self.arg_keys.len().to_string());
            }
        }
        field(&mut o, "request_id", request_id);
        o.push('}');
        o
    }
}

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
    /// [`crate::rls::on_answer`] (after approval, when both are needed).
    pub rls: Option<Box<crate::rls::Pending>>,
}

impl Outcome {
    pub(crate) fn new(decision: Decision, reply: Option<Reply>) -> Self {
        Outcome { decision, reply, tools_list_ids: Vec::new(), approval: None, rls: None }
    }
}

/// A call held while the approval service is asked. Owns what is needed to finish it later: the
/// quota reserved for it (given back unless it goes upstream) and the decision so far.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PendingApproval {
    /// SHA-256 binding key (`approval::key`).
    pub key: String,
    pub grant_label: String,
    /// SHA-256 of the credential.
    pub grant_id: GrantId,
    pub tool: String,
    /// The arguments' JSON text as sent.
    pub arguments: Option<String>,
    /// `approval_timeout`, seconds.
    pub expires_in_seconds: u64,
    pub reason: Option<String>,
    pub id: Id,
    pub admission: Option<Admission>,
    /// With `gateway.rate_limit_service`: the limits (indices into `Policy::limits`) the service
    /// counts once the call is approved. Asked after approval, so waiting calls consume nothing.
    pub rls_limits: Vec<usize>,
    pub decision: Decision,
    /// A 2026-07-28 continuation leg's `inputResponses`/`requestState` (bound by `key`, shown).
    pub leg: crate::leg::Leg,
}

impl PendingApproval {
    /// The body of the callout to the approval service (approvals/API.md). `request_id` is Envoy's
    /// `x-request-id`; anything but a plain token is sent as "" ([`approval::request_id_token`]).
    pub fn check_body(&self, request_id: &str, wait_seconds: u64) -> String {
        CheckRequest {
            key: &self.key,
            grant: &self.grant_label,
            grant_id: &self.grant_id,
            tool: &self.tool,
            arguments: self.arguments.as_deref(),
            request_id: approval::request_id_token(request_id),
            expires_in_seconds: self.expires_in_seconds,
            wait_seconds,
            reason: self.reason.as_deref(),
            input_responses: self.leg.input_responses.as_deref(),
            request_state: self.leg.request_state.as_deref(),
        }
        .to_json()
    }
}

/// Finish a held call with the approval service's answer: forward it when approved; otherwise
/// give its reserved quota back and answer `approval_required`, `approval_denied` or
/// `approval_unavailable` (JSON-RPC errors −31007/−31008/−31009, HTTP 200, id echoed).
pub fn on_approval_answer(
    policy: &Policy,
    pending: PendingApproval,
    answer: Answer,
    store: &dyn SharedStore,
    now_ms: u64,
) -> Outcome {
    let PendingApproval { tool, id, admission, mut decision, reason, grant_id, rls_limits, .. } = pending;
    let subject = format!("tool '{tool}'");
    let (kind, err, headers) = match answer {
        Answer::Approved { approval_id, approver: _ } => {
            decision.kind = DecisionKind::Approved;
            decision.approval_id = Some(approval_id);
            // The approval is used up; the service counts the call now (it cannot be given back).
            let rls = crate::rls::Pending::single(policy, grant_id, id, Some(tool), &rls_limits);
            return Outcome {
                rls: rls.map(|p| Box::new(crate::rls::Pending { decision: decision.clone(), ..p })),
                ..Outcome::new(decision, None)
            };
        }
        Answer::Pending { approval_id, approval_url, expires_in_seconds } => {
            let why = reason.unwrap_or_else(|| "this tool needs a person's approval for each call".to_owned());
            let mut e = RpcError::new(
                code::APPROVAL_REQUIRED,
                "approval_required",
                format!("{subject} requires approval: ask an approver to approve it at {approval_url}, then retry the identical call"),
                why,
            );
            e.expires_in_seconds = Some(expires_in_seconds);
            decision.approval_id = Some(approval_id.clone());
            e.extra = vec![("approval_id", approval_id), ("approval_url", approval_url)];
            (DecisionKind::ApprovalRequired, e, vec![])
        }
        Answer::Denied { approval_id, approver, note } => {
            let why = if note.is_empty() { "denied by an approver".to_owned() } else { note.clone() };
            let e_msg = format!("{subject} was denied by an approver: {why}");
            let mut e = RpcError::new(code::APPROVAL_DENIED, "approval_denied", e_msg, why);
            decision.approval_id = Some(approval_id.clone());
            e.extra = vec![("approval_id", approval_id), ("approver", approver), ("note", note)];
            (DecisionKind::ApprovalDenied, e, vec![])
        }
        Answer::Unavailable(why) => {
            let mut e = RpcError::new(
                code::APPROVAL_UNAVAILABLE,
                "approval_unavailable",
                format!("{subject} refused: approval could not be checked: {why}"),
                why,
            );
            e.retry_after_seconds = Some(1);
            (DecisionKind::ApprovalUnavailable, e, vec![("retry-after", "1".to_owned())])
        }
    };
    if let Some(adm) = &admission {
        Limiter { store, now_ms, max_tracked_grants: policy.gateway.max_tracked_grants }.give_back(adm);
    }
    // The decision so far (method, tool, rule, grant, id, argument names) stays; only the outcome changes.
    let err = RpcError { tool: Some(tool), ..err };
    decision.kind = kind;
    decision.error_kind = Some(err.kind);
    decision.reason = Some(err.reason.clone());
    Outcome::new(decision, Some(Reply { status: 200, headers, body: err.to_json(&id) }))
}

/// The id of `msg` if it is a `tools/list` request.
fn tools_list_id(msg: &Message) -> Option<Id> {
    match msg {
        Message::Request { id, call: Call::Method { method: crate::mcp::McpMethod::ToolsList, .. }, .. } => {
            Some(id.clone())
        }
        _ => None,
    }
}

/// After the headers: done already, or the body is needed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HeadOutcome {
    Done(Box<Outcome>),
    NeedBody,
}

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

const STRAY_QUERY: &str =
    "credentials are not accepted in the query string (access_token); send the grant as configured";
const STRAY_HEADER: &str =
    "a header that servers read as the grant header (differs only by '-' or '_') is not accepted";
const NO_CREDENTIAL: &str = "a grant is required: send Authorization: Bearer <token>";
const NOT_REGISTERED: &str = "the credential is not a registered grant";
/// `gateway.grant_header` present more than once: `jwt_authn`'s `claim_to_headers` appends the verified
/// claim after any copy the client sent, so neither copy can be trusted.
const GRANT_HEADER_REPEATED: &str = "the grant header was sent more than once";
const GRANT_HEADER_EMPTY: &str = "the grant header is empty";

fn no_grant(policy: &Policy, id: &Id, reason: &str) -> Outcome {
    let err = RpcError::new(code::NO_GRANT, "no_grant", format!("Unauthorized: {reason}"), reason);
    let challenge = crate::challenge::bearer(policy.gateway.resource_metadata_url.as_deref());
    refuse(DecisionKind::NoGrant, 401, err, id, vec![("www-authenticate", challenge)])
}

/// The request's grant, or why there is none.
fn grant_of(policy: &Policy, head: &RequestHead) -> Result<Grant, &'static str> {
    let v = match (&head.credential, &policy.gateway.grant) {
        (HeaderValue::One(v), _) => v,
        (HeaderValue::Many, GrantSource::Header(_)) => return Err(GRANT_HEADER_REPEATED),
        _ => return Err(NO_CREDENTIAL),
    };
    let mut g = match policy.gateway.grant {
        GrantSource::Bearer => grant::from_authorization(v).ok_or(NO_CREDENTIAL),
        GrantSource::Header(_) => grant::from_trusted_header(v).ok_or(GRANT_HEADER_EMPTY),
    }?;
    if !policy.gateway.grants.is_empty() {
        g.registered = Some(policy.gateway.grants.get(&g.id).ok_or(NOT_REGISTERED)?.clone());
    }
    Ok(g)
}

/// Decide what can be decided from the headers alone.
pub fn on_headers(policy: &Policy, head: &RequestHead) -> HeadOutcome {
    if let (Some(why), HttpMethod::Post | HttpMethod::Get | HttpMethod::Delete) = (head.stray_credential, head.method) {
        return HeadOutcome::Done(Box::new(http_refusal(400, "stray_credential", why, vec![])));
    }
    match head.method {
        HttpMethod::Other => HeadOutcome::Done(Box::new(http_refusal(
            405,
            "method_not_allowed",
            "MCP Streamable HTTP uses POST, GET and DELETE only",
            vec![("allow", "GET, POST, DELETE".into())],
        ))),
        HttpMethod::Get | HttpMethod::Delete => {
            if let Err(refusal) = version::of_stream(policy, head) {
                return HeadOutcome::Done(refusal);
            }
            HeadOutcome::Done(Box::new(match grant_of(policy, head) {
                Err(why) if policy.mode_for(None) == Mode::DryRun => {
                    // Same as POST in dry-run: counted as "would deny", forwarded.
                    let mut out = no_grant(policy, &Id::null(), why);
                    out.reply = None;
                    out.decision.dry_run = true;
                    out
                }
                Err(why) => no_grant(policy, &Id::null(), why),
                Ok(g) => {
                    let mut d = Decision::new(DecisionKind::Passed);
                    d.grant = Some(g.label());
                    Outcome::new(d, None)
                }
            }))
        }
        HttpMethod::Post => {
            let ct_ok = matches!(&head.content_type, HeaderValue::One(v) if http::is_media_type(v, "application/json"));
            let charset_ok = matches!(&head.content_type, HeaderValue::One(v) if http::request_charset_ok(v));
            if ct_ok && !charset_ok {
                return HeadOutcome::Done(Box::new(http_refusal(
                    415,
                    "unsupported_media_type",
                    "a request body is UTF-8 JSON (RFC 8259): Content-Type may declare charset=utf-8 once, no other",
                    vec![],
                )));
            }
            if !ct_ok {
                return HeadOutcome::Done(Box::new(http_refusal(
                    415,
                    "unsupported_media_type",
                    "Content-Type must be application/json",
                    vec![],
                )));
            }
            let enc_ok = match &head.content_encoding {
                HeaderValue::Absent => true,
                HeaderValue::One(v) => http::is_identity_encoding(v),
                HeaderValue::Many => false,
            };
            if !enc_ok {
                return HeadOutcome::Done(Box::new(http_refusal(
                    415,
                    "unsupported_media_type",
                    "Content-Encoding must be identity: encoded bodies cannot be checked",
                    vec![],
                )));
            }
            HeadOutcome::NeedBody
        }
    }
}

/// The reply for a body over `gateway.max_body_bytes`; the body is never judged on a prefix.
pub fn body_too_large(policy: &Policy) -> Outcome {
    http_refusal(
        413,
        "body_too_large",
        &format!("request body exceeds {} bytes", policy.gateway.max_body_bytes),
        vec![],
    )
}

fn protocol_error(e: &ProtocolError) -> (RpcError, u16) {
    let (code, kind, title) = match e.kind {
        ProtocolErrorKind::Parse => (code::PARSE_ERROR, "parse_error", "Parse error"),
        ProtocolErrorKind::InvalidRequest => (code::INVALID_REQUEST, "invalid_request", "Invalid Request"),
        ProtocolErrorKind::InvalidParams => (code::INVALID_PARAMS, "invalid_params", "Invalid params"),
    };
    (RpcError::new(code, kind, format!("{title}: {}", e.detail), e.detail.clone()), 400)
}

/// MCP 2026-07-28 Streamable HTTP: `Mcp-Method` and `Mcp-Name` mirror the body; any difference is
/// −32020. `Mcp-Name` is decoded first (SEP-2243 `=?base64?…?=`), then both are compared as exact
/// bytes against the unescaped body values. When `required` (2026-07-28), `Mcp-Method` must be
/// present, and `Mcp-Name` too for the methods whose table row names a mirrored parameter.
fn header_mismatch(head: &RequestHead, msg: &Message, required: bool) -> Option<&'static str> {
    let (method, name): (Option<&str>, Option<&str>) = match msg {
        Message::Request { call: Call::Tool(t), .. } => (Some("tools/call"), Some(&t.name)),
        Message::Request { call: Call::Method { method, target }, .. } => (Some(method.name()), target.as_deref()),
        Message::Notification { method } => (Some(method.name()), None),
        Message::Response { .. } => (None, None),
    };
    if required && head.mcp_method == HeaderValue::Absent && method.is_some() {
        return Some("Mcp-Method header is required in MCP 2026-07-28");
    }
    let named = method.and_then(crate::protocol::row_of).is_some_and(|r| r.name_param.is_some());
    if required && named && head.mcp_name == HeaderValue::Absent {
        return Some("Mcp-Name header is required in MCP 2026-07-28 for tools/call, prompts/get and resources/read");
    }
    let differs = |h: &HeaderValue, body: Option<&str>, decode: bool| match h {
        HeaderValue::Absent => false,
        HeaderValue::Many => true,
        HeaderValue::One(v) if decode => crate::protocol::decode_header_value(v).as_deref() != body,
        HeaderValue::One(v) => body.map(str::as_bytes) != Some(v.as_slice()),
    };
    if differs(&head.mcp_method, method, false) {
        return Some("Mcp-Method header does not match the body's method");
    }
    if differs(&head.mcp_name, name, true) {
        return Some("Mcp-Name header does not match the body's name or uri");
    }
    None
}

/// How one message fared.
enum Judged {
    /// Forward; with the rate limit service, after it admits the limits listed (indices).
    Forward(Decision, Option<Admission>, Vec<usize>),
    Refused(DecisionKind, u16, RpcError, Vec<(&'static str, String)>),
    /// Allowed by every rule, quota reserved; a person must approve it.
    Ask(Box<PendingApproval>),
}

fn judge_message(policy: &Policy, msg: &Message, grant: &Grant, limiter: &Limiter<'_>) -> Judged {
    let mut d = Decision::new(DecisionKind::Passed);
    d.grant = Some(grant.label());
    let Message::Request { call, .. } = msg else {
        if let Message::Notification { method } = msg {
            d.method = Some(method.name().to_owned());
        }
        if matches!(msg, Message::Response { .. }) && policy.gateway.client_responses == Action::Deny {
            let reason = "responses from the client are denied by policy (gateway.client_responses)";
            let mut e = RpcError::new(code::DENIED, "denied", format!("client response denied: {reason}"), reason);
            e.rule = Some("gateway.client_responses".into());
            return Judged::Refused(DecisionKind::Denied, 403, e, vec![]);
        }
        return Judged::Forward(d, None, Vec::new());
    };
    let tool = match call {
        Call::Tool(t) => Some(t.name.clone()),
        Call::Method { .. } => None,
    };
    d.method = Some(match call {
        Call::Tool(_) => "tools/call".to_owned(),
        Call::Method { method, .. } => method.name().to_owned(),
    });
    d.tool = tool.clone();
    let subject = match &tool {
        Some(t) => format!("tool '{t}'"),
        None => format!("method {}", d.method.as_deref().unwrap_or("")),
    };
    match policy.judge(call) {
        Verdict::Pass => Judged::Forward(d, None, Vec::new()),
        Verdict::Deny { rule, reason } => {
            let mut e = RpcError::new(code::DENIED, "denied", format!("{subject} denied: {reason}"), reason);
            e.tool = tool;
            e.rule = Some(rule);
            Judged::Refused(DecisionKind::Denied, 200, e, vec![])
        }
        Verdict::Allow { rule, limits, approval } => {
            d.kind = DecisionKind::Allowed;
            d.rule = Some(rule);
            let ask = |d: Decision, adm: Option<Admission>, counted: Vec<usize>, need: &NeedsApproval| {
                let Call::Tool(t) = call else { return Judged::Forward(d, adm, counted) };
                let args = t.arguments.as_ref();
                let value = args.and_then(crate::mcp::Arguments::value);
                Judged::Ask(Box::new(PendingApproval {
                    key: approval::key_with(
                        &grant.id,
                        &t.name,
                        value.as_ref(),
                        t.leg.input_responses_value().as_ref(),
                        t.leg.request_state.as_deref(),
                    ),
                    grant_label: grant.label(),
                    grant_id: grant.id,
                    tool: t.name.clone(),
                    arguments: args.map(|a| a.raw().to_owned()),
                    expires_in_seconds: need.timeout_seconds,
                    reason: need.reason.clone(),
                    id: msg.id(),
                    admission: adm,
                    rls_limits: counted,
                    decision: d,
                    leg: t.leg.clone(),
                }))
            };
            let service = policy.gateway.rate_limit_service.is_some();
            if limits.is_empty() || service {
                // With the rate limit service, shared data counts nothing: the limits travel with the call.
                let counted = if service { crate::rls::limit_indices(policy, &limits) } else { Vec::new() };
                return match approval {
                    Some(need) => ask(d, None, counted, need),
                    None => Judged::Forward(d, None, counted),
                };
            }
            match limiter.admit(&limits, &grant.id) {
                Ok(adm) => match approval {
                    Some(need) => ask(d, Some(adm), Vec::new(), need),
                    None => Judged::Forward(d, Some(adm), Vec::new()),
                },
                Err(Refusal::Limited { limit, retry_after_seconds }) => {
                    let mut e = RpcError::rate_limited(&subject, limit, retry_after_seconds);
                    e.tool = tool;
                    Judged::Refused(
                        DecisionKind::RateLimited,
                        200,
                        e,
                        vec![("retry-after", retry_after_seconds.to_string())],
                    )
                }
                Err(Refusal::Unavailable(u)) => {
                    let mut e = RpcError::limiter_unavailable(&subject, u.reason());
                    e.tool = tool;
                    Judged::Refused(DecisionKind::LimiterUnavailable, 200, e, vec![("retry-after", "1".into())])
                }
            }
        }
    }
}

/// Decide a POST on its whole body.
///
/// `now_ms` is milliseconds since the Unix epoch (UTC); `store` is the proxy-wasm shared data.
pub fn on_body(policy: &Policy, head: &RequestHead, body: &[u8], store: &dyn SharedStore, now_ms: u64) -> Outcome {
    if body.len() > policy.gateway.max_body_bytes {
        return body_too_large(policy);
    }
    let limiter = Limiter { store, now_ms, max_tracked_grants: policy.gateway.max_tracked_grants };
    let parsed = match mcp::read_body(body) {
        Ok(b) => b,
        Err(e) => {
            let (err, status) = protocol_error(&e);
            return refuse(DecisionKind::Invalid, status, err, &e.id, vec![]);
        }
    };
    match parsed {
        Body::Single(msg) => {
            let mut out = on_message(policy, head, &msg, &limiter);
            describe(&mut out.decision, &msg);
            if let Some(p) = out.approval.as_mut() {
                p.decision = out.decision.clone();
            }
            let tool = match &msg {
                Message::Request { call: Call::Tool(t), .. } => Some(t.name.as_str()),
                _ => None,
            };
            if out.reply.is_some() && out.decision.kind.is_policy() && policy.mode_for(tool) == Mode::DryRun {
                // Shadow mode: the full decision is logged and counted as "would deny", and the
                // request goes on. Nothing was consumed: refused calls never take quota.
                out.reply = None;
                out.decision.dry_run = true;
            }
            if out.approval.is_some() && policy.mode_for(tool) == Mode::DryRun {
                // Shadow mode asks nobody: the call goes on, logged as one that would wait for approval.
                if let Some(p) = out.approval.take() {
                    // As with local limits, the call still counts: the service is asked.
                    out.rls = crate::rls::Pending::single(policy, p.grant_id, p.id, Some(p.tool), &p.rls_limits)
                        .map(Box::new);
                }
                out.decision.kind = DecisionKind::ApprovalRequired;
                out.decision.dry_run = true;
            }
            if out.reply.is_none() {
                out.tools_list_ids.extend(tools_list_id(&msg));
            }
            if let Some(r) = out.rls.as_mut() {
                r.decision = out.decision.clone();
                r.tools_list_ids = out.tools_list_ids.clone();
                r.dry_run = policy.mode_for(tool) == Mode::DryRun;
            }
            out
        }
        Body::Batch(items) => on_batch(policy, head, items, &limiter),
    }
}

fn on_message(policy: &Policy, head: &RequestHead, msg: &Message, limiter: &Limiter<'_>) -> Outcome {
    let id = msg.id();
    let version = match version::of_message(policy, head, msg) {
        Ok(v) => v,
        Err(out) => return *out,
    };
    if let Some(why) = header_mismatch(head, msg, version.rules().method_headers) {
        let err = RpcError::new(code::HEADER_MISMATCH, "header_mismatch", format!("Header mismatch: {why}"), why);
        return refuse(DecisionKind::Invalid, 400, err, &id, vec![]);
    }
    let grant = match grant_of(policy, head) {
        Ok(g) => g,
        Err(why) => return no_grant(policy, &id, why),
    };
    match judge_message(policy, msg, &grant, limiter) {
        Judged::Forward(d, _, counted) => {
            let rls = crate::rls::Pending::single(policy, grant.id, id, d.tool.clone(), &counted);
            Outcome { rls: rls.map(Box::new), ..Outcome::new(d, None) }
        }
        Judged::Ask(pending) => {
            let mut out = Outcome::new(pending.decision.clone(), None);
            out.approval = Some(pending);
            out
        }
        Judged::Refused(kind, status, err, headers) => {
            let mut out = refuse(kind, status, err, &id, headers);
            out.decision.grant = Some(grant.label());
            out
        }
    }
}

/// Fill in what the audit log says about the message: method, tool, id and argument keys.
fn describe(d: &mut Decision, msg: &Message) {
    d.method = judged_method(msg);
    if let Message::Request { id, call, .. } = msg {
        d.id = Some(id.raw().to_owned());
        if let Call::Tool(t) = call {
            d.tool = Some(t.name.clone());
            if let Some(args) = &t.arguments {
                d.arg_keys = args.keys().to_vec();
            }
        }
    }
}

fn judged_method(msg: &Message) -> Option<String> {
    match msg {
        Message::Request { call: Call::Tool(_), .. } => Some("tools/call".into()),
        Message::Request { call: Call::Method { method, .. }, .. } => Some(method.name().into()),
        Message::Notification { method } => Some(method.name().into()),
        Message::Response { .. } => None,
    }
}

/// A batch (MCP 2025-03-26): forwarded only if every element is allowed; otherwise one error per
/// element that has an id (invalid elements answer with id null, as JSON-RPC 2.0 §6 shows), and the
/// quota of admitted elements is given back.
fn on_batch(
    policy: &Policy,
    head: &RequestHead,
    items: Vec<Result<Message, ProtocolError>>,
    limiter: &Limiter<'_>,
) -> Outcome {
    if let Err(out) = version::of_batch(policy, head) {
        return *out;
    }
    if head.mcp_method != HeaderValue::Absent || head.mcp_name != HeaderValue::Absent {
        let why = "Mcp-Method/Mcp-Name headers cannot describe a batch";
        let err = RpcError::new(code::HEADER_MISMATCH, "header_mismatch", format!("Header mismatch: {why}"), why);
        return refuse(DecisionKind::Invalid, 400, err, &Id::null(), vec![]);
    }
    if let Some(out) = mixed_batch(&items) {
        return out;
    }
    let grant = match grant_of(policy, head) {
        Ok(g) => g,
        Err(why) => return no_grant(policy, &Id::null(), why),
    };
    enum Slot {
        Ok(Option<Id>),
        Err(Id, RpcError),
    }
    let mut slots = Vec::with_capacity(items.len());
    let mut list_ids = Vec::new();
    let mut admissions = Vec::new();
    let mut worst: Option<(DecisionKind, RpcError)> = None;
    let mut invalid = false;
    let mut first_allowed: Option<Decision> = None;
    // With the rate limit service: what the whole batch counts, asked once it is allowed.
    let mut service = crate::rls::Pending::new(grant.id, true);
    for item in items {
        match item {
            Err(e) => {
                let (err, _) = protocol_error(&e);
                invalid = true;
                worst.get_or_insert((DecisionKind::Invalid, err.clone()));
                slots.push(Slot::Err(e.id.clone(), err));
            }
            Ok(msg) => {
                let id = match &msg {
                    Message::Notification { .. } => None,
                    m => Some(m.id()),
                };
                list_ids.extend(tools_list_id(&msg));
                match judge_message(policy, &msg, &grant, limiter) {
                    Judged::Forward(d, adm, counted) => {
                        service.add(policy, id.clone(), d.tool.clone(), &counted);
                        admissions.extend(adm);
                        first_allowed.get_or_insert(d);
                        slots.push(Slot::Ok(id));
                    }
                    Judged::Refused(kind, _, err, _) => {
                        worst.get_or_insert((kind, err.clone()));
                        slots.push(Slot::Err(id.unwrap_or_else(Id::null), err));
                    }
                    Judged::Ask(pending) => {
                        // One callout per request: a call that needs approval must come alone.
                        admissions.extend(pending.admission);
                        let reason = "a call that needs approval cannot be part of a batch; send it on its own";
                        let mut err = RpcError::new(
                            code::APPROVAL_REQUIRED,
                            "approval_required",
                            format!("tool '{}' requires approval: {reason}", pending.tool),
                            reason,
                        );
                        err.tool = Some(pending.tool.clone());
                        worst.get_or_insert((DecisionKind::ApprovalRequired, err.clone()));
                        slots.push(Slot::Err(id.unwrap_or_else(Id::null), err));
                    }
                }
            }
        }
    }
    let Some((kind, first_err)) = worst else {
        let mut d = first_allowed.unwrap_or_else(|| Decision::new(DecisionKind::Passed));
        d.grant = Some(grant.label());
        let mut out = Outcome::new(d, None);
        out.tools_list_ids = list_ids;
        if !service.is_empty() {
            service.decision = out.decision.clone();
            service.tools_list_ids = out.tools_list_ids.clone();
            out.rls = Some(Box::new(service));
        }
        return out;
    };
    for adm in &admissions {
        limiter.give_back(adm);
    }
    let mut body = String::from("[");
    for slot in &slots {
        let piece = match slot {
            Slot::Ok(None) => continue,
            Slot::Ok(Some(id)) => {
                let reason = "another message in the batch was refused";
                RpcError::new(code::BATCH_REFUSED, "batch_refused", format!("Batch refused: {reason}"), reason)
                    .to_json(id)
            }
            Slot::Err(id, err) => err.to_json(id),
        };
        if body.len() > 1 {
            body.push(',');
        }
        body.push_str(&piece);
    }
    body.push(']');
    let mut decision = Decision::new(kind);
    decision.grant = Some(grant.label());
    decision.error_kind = Some(first_err.kind);
    decision.reason = Some(first_err.reason.clone());
    decision.tool = first_err.tool.clone();
    decision.rule = first_err.rule.clone();
    decision.method = Some("batch".into());
    Outcome::new(decision, Some(Reply { status: if invalid { 400 } else { 200 }, headers: vec![], body }))
}

/// MCP 2025-03-26 (Base Protocol, batching): a batch holds requests and notifications, or responses,
/// never both; responses are data the policy does not judge. A mixed batch is refused whole: 400,
/// one −32600 per request (id echoed), or one with id null when it holds no request.
fn mixed_batch(items: &[Result<Message, ProtocolError>]) -> Option<Outcome> {
    let responses = items.iter().any(|m| matches!(m, Ok(Message::Response { .. })));
    let others = items.iter().any(|m| matches!(m, Ok(Message::Request { .. } | Message::Notification { .. })));
    if !(responses && others) {
        return None;
    }
    let reason = "a batch must not mix requests or notifications with responses";
    let err = RpcError::new(code::INVALID_REQUEST, "invalid_request", format!("Invalid Request: {reason}"), reason);
    let ids: Vec<&Id> = items
        .iter()
        .filter_map(|m| match m {
            Ok(Message::Request { id, .. }) => Some(id),
            _ => None,
        })
        .collect();
    let body = if ids.is_empty() {
        err.to_json(&Id::null())
    } else {
        let parts: Vec<String> = ids.iter().map(|id| err.to_json(id)).collect();
        format!("[{}]", parts.join(","))
    };
    let mut decision = Decision::new(DecisionKind::Invalid);
    decision.error_kind = Some(err.kind);
    decision.reason = Some(err.reason);
    decision.method = Some("batch".into());
    Some(Outcome::new(decision, Some(Reply { status: 400, headers: vec![], body })))
}

/// The reply for a GET or DELETE that carries a body: Streamable HTTP sends messages only by POST,
/// and a body the filter does not judge must not reach the server.
pub fn unexpected_body() -> Outcome {
    http_refusal(400, "invalid_request", "GET and DELETE requests must not carry a body", vec![])
}
