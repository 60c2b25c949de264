//! The request headers: what the filter reads of them ([`RequestHead`]) and what can be decided
//! from them alone ([`on_headers`]), plus the HTTP-level refusals of a body.

use std::cell::OnceCell;

use super::credential::{grant_of, no_grant};
use super::{refuse, version, Outcome};
use crate::approval;
use crate::identity::grant::Grant;
use crate::identity::payload::Provenance;
use crate::identity::stray;
use crate::outcome::decision::Decision;
use crate::outcome::kind::DecisionKind;
use crate::outcome::refusal::Refusal;
use crate::policy::{GrantSource, Policy};
use crate::terms::Mode;
use crate::wire::http;
use crate::wire::mcp::Id;

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
    /// `Last-Event-ID`; read only with `gateway.session_key` (`check_session`).
    pub last_event_id: HeaderValue,
    /// `:path`, when it has a query; read only with `gateway.session_key` (the HTTP+SSE session
    /// in the query, `check_session`).
    pub target: Option<Vec<u8>>,
    /// A credential outside the grant's one place (see `stray`), refused with 400.
    pub stray_credential: Option<&'static str>,
    /// `:authority` and `:path`: with `gateway.approval`, part of the [`approval::Upstream`] an
    /// approval is bound to (read only then).
    pub authority: HeaderValue,
    pub path: HeaderValue,
    /// The Envoy cluster the request's route chose (`xds.cluster_name`), set by the host with
    /// `gateway.approval`; `None` when it could not be read.
    pub cluster: Option<String>,
    /// `gateway.identity.payload_header`: the verified token's payload (read only then).
    pub payload: HeaderValue,
    /// The grant read from `credential`, once: the credential is hashed (SHA-256) at most once per
    /// request, however many steps ask (`check_session`, `on_headers`, `on_body`).
    pub(super) grant: OnceCell<Result<Grant, &'static str>>,
    /// Who calls and under which policy, set by [`super::attach`] when there is a verified identity
    /// or a named policy: bound by an approval's key and shown to its approver.
    pub(super) caller: OnceCell<Provenance>,
    /// The first `x-request-id`, when it is UTF-8: the audit record's `request_id`.
    pub request_id: Option<String>,
    /// `Content-Length`, when it is a number: a body declared over `gateway.max_body_bytes` is
    /// refused from the headers, without waiting for the bytes to arrive.
    pub declared_length: Option<usize>,
    /// An `Accept` names `text/event-stream`: a GET of an MCP client, which opens the server's
    /// event stream (not a health check or a page).
    pub accepts_events: bool,
}

impl RequestHead {
    /// Collect the relevant headers from `(lower-case name, value)` pairs, e.g. Envoy's request
    /// header map including the `:method` pseudo-header.
    pub fn from_headers<'a>(policy: &Policy, headers: impl IntoIterator<Item = (&'a str, &'a [u8])>) -> Self {
        let credential_header = match &policy.gateway.grant {
            GrantSource::Bearer => "authorization",
            GrantSource::Header(h) => h.as_str(),
        };
        let bound = policy.gateway.session_keys.is_some();
        let mut head = RequestHead {
            method: HttpMethod::Other,
            content_type: HeaderValue::Absent,
            content_encoding: HeaderValue::Absent,
            credential: HeaderValue::Absent,
            mcp_method: HeaderValue::Absent,
            mcp_name: HeaderValue::Absent,
            protocol_version: HeaderValue::Absent,
            session_id: HeaderValue::Absent,
            last_event_id: HeaderValue::Absent,
            target: None,
            stray_credential: None,
            authority: HeaderValue::Absent,
            path: HeaderValue::Absent,
            cluster: None,
            payload: HeaderValue::Absent,
            grant: OnceCell::new(),
            caller: OnceCell::new(),
            request_id: None,
            declared_length: None,
            accepts_events: false,
        };
        let payload_header = policy.gateway.identity.as_ref().map_or("", |i| i.payload_header.as_str());
        // Only a call that may need approval is bound to its upstream: no copies otherwise.
        let upstream = policy.gateway.approval.is_some();
        let mut request_id_seen = false;
        for (name, value) in headers {
            if name == "x-request-id" && !std::mem::replace(&mut request_id_seen, true) {
                head.request_id = std::str::from_utf8(value).ok().map(str::to_owned);
            }
            // Read once, before the arms: a value that is not a length goes on to them, as any other
            // header does.
            if name == "content-length" {
                if let Some(n) = http::content_length(value) {
                    head.declared_length = head.declared_length.max(Some(n));
                    continue;
                }
            }
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
                "accept" => head.accepts_events |= http::holds(value, b"text/event-stream"),
                "content-encoding" => head.content_encoding.add(value),
                "mcp-method" => head.mcp_method.add(value),
                "mcp-name" => head.mcp_name.add(value),
                "mcp-protocol-version" => head.protocol_version.add(value),
                "mcp-session-id" => head.session_id.add(value),
                "last-event-id" if bound => head.last_event_id.add(value),
                n if n == credential_header => head.credential.add(value),
                n if n == payload_header => head.payload.add(value),
                ":path" => {
                    if stray::query_has_access_token(value) {
                        head.stray_credential = Some(STRAY_QUERY);
                    }
                    if bound && value.contains(&b'?') {
                        head.target = Some(value.to_vec());
                    }
                    if upstream {
                        head.path.add(value);
                    }
                }
                ":authority" if upstream => head.authority.add(value),
                n if stray::is_header_variant(n, credential_header) => head.stray_credential = Some(STRAY_HEADER),
                _ => {}
            }
        }
        head
    }
}

impl RequestHead {
    /// The MCP server this request goes to, which an approval is bound to; why not, when the host
    /// could not read the cluster or the request has no single UTF-8 `:authority` or `:path`
    /// (`data.reason` of `approval_unavailable`: an approval is never bound to an empty upstream).
    pub fn upstream(&self) -> Result<approval::Upstream, &'static str> {
        let text = |h: &HeaderValue| match h {
            HeaderValue::One(v) if !v.is_empty() => std::str::from_utf8(v).ok().map(str::to_owned),
            _ => None,
        };
        let cluster = self.cluster.clone().filter(|c| !c.is_empty()).ok_or(NO_CLUSTER)?;
        let authority = text(&self.authority).ok_or(NO_AUTHORITY)?;
        let path = text(&self.path).ok_or(NO_PATH)?;
        Ok(approval::Upstream { cluster, authority, path })
    }
}

/// Why a call that needs approval has no upstream to bind it to.
pub const NO_CLUSTER: &str =
    "the upstream cluster of this request could not be read (Envoy property xds.cluster_name); an approval is bound to it";
pub const NO_AUTHORITY: &str = "the request has no single UTF-8 :authority; an approval is bound to it";
pub const NO_PATH: &str = "the request has no single UTF-8 :path; an approval is bound to it";

/// After the headers: done already, or the body is needed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HeadOutcome {
    Done(Box<Outcome>),
    NeedBody,
}

const STRAY_QUERY: &str =
    "credentials are not accepted in the query string (access_token); send the grant as configured";
const STRAY_HEADER: &str =
    "a header that servers read as the grant header (differs only by '-' or '_') is not accepted";

/// Decide what can be decided from the headers alone.
pub fn on_headers(policy: &Policy, head: &RequestHead) -> HeadOutcome {
    if let (Some(why), HttpMethod::Post | HttpMethod::Get | HttpMethod::Delete) = (head.stray_credential, head.method) {
        return HeadOutcome::Done(Box::new(refuse(Refusal::StrayCredential { why }, &Id::null())));
    }
    match head.method {
        HttpMethod::Other => HeadOutcome::Done(Box::new(refuse(Refusal::MethodNotAllowed, &Id::null()))),
        HttpMethod::Get | HttpMethod::Delete => {
            if let Err(refusal) = version::of_stream(policy, head) {
                return HeadOutcome::Done(refusal);
            }
            let mut out = match grant_of(policy, head) {
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
            };
            out.event_stream = head.method == HttpMethod::Get && head.accepts_events;
            HeadOutcome::Done(Box::new(out))
        }
        HttpMethod::Post => {
            let ct_ok = matches!(&head.content_type, HeaderValue::One(v) if http::is_media_type(v, "application/json"));
            let charset_ok = matches!(&head.content_type, HeaderValue::One(v) if http::request_charset_ok(v));
            if ct_ok && !charset_ok {
                return HeadOutcome::Done(media_type(
                    "a request body is UTF-8 JSON (RFC 8259): Content-Type may declare charset=utf-8 once, no other",
                ));
            }
            if !ct_ok {
                return HeadOutcome::Done(media_type("Content-Type must be application/json"));
            }
            let enc_ok = match &head.content_encoding {
                HeaderValue::Absent => true,
                HeaderValue::One(v) => http::is_identity_encoding(v),
                HeaderValue::Many => false,
            };
            if !enc_ok {
                return HeadOutcome::Done(media_type(
                    "Content-Encoding must be identity: encoded bodies cannot be checked",
                ));
            }
            // The same refusal as once the bytes are in, at once: a client that declares more than
            // the limit does not hold the stream open while it sends them.
            if head.declared_length.is_some_and(|n| n > policy.gateway.max_body_bytes) {
                return HeadOutcome::Done(Box::new(body_too_large(policy)));
            }
            HeadOutcome::NeedBody
        }
    }
}

/// The reply for a body over `gateway.max_body_bytes`; the body is never judged on a prefix.
pub fn body_too_large(policy: &Policy) -> Outcome {
    refuse(Refusal::BodyTooLarge { max_bytes: policy.gateway.max_body_bytes }, &Id::null())
}

/// The reply when the host could not hand over the request body: 503 `unavailable` (a fault on the
/// proxy's side, not the client's; a retry may succeed), never judged on what could be read.
pub fn body_unreadable() -> Outcome {
    refuse(Refusal::Unavailable { reason: crate::outcome::refusal::BODY_UNREADABLE }, &Id::null())
}

fn media_type(why: &'static str) -> Box<Outcome> {
    Box::new(refuse(Refusal::UnsupportedMediaType { why }, &Id::null()))
}

/// The reply for a GET or DELETE that carries a body: Streamable HTTP sends messages only by POST,
/// and a body the filter does not judge must not reach the server.
pub fn unexpected_body() -> Outcome {
    let detail = "GET and DELETE requests must not carry a body".to_owned();
    refuse(Refusal::InvalidRequest { detail }, &Id::null())
}
