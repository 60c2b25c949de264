//! How a [`Refusal`] is written: its `error.message`, the JSON-RPC error response (JSON-RPC 2.0
//! §5.1, shape in `crate::wire::reply`) and the whole local reply.

use super::*;

impl Refusal {
    /// `message`: a one-line summary for people.
    fn message(&self) -> String {
        let reason = self.reason();
        match self {
            Refusal::ParseError { .. } => format!("Parse error: {reason}"),
            Refusal::InvalidParams { .. } | Refusal::ApprovalStateInvalid { .. } => {
                format!("Invalid params: {reason}")
            }
            Refusal::InvalidRequest { .. }
            | Refusal::StrayCredential { .. }
            | Refusal::MethodNotAllowed
            | Refusal::UnsupportedMediaType { .. }
            | Refusal::BodyTooLarge { .. } => format!("Invalid Request: {reason}"),
            Refusal::HeaderMismatch { .. } => format!("Header mismatch: {reason}"),
            Refusal::UnsupportedProtocolVersion { .. } => format!("Unsupported protocol version: {reason}"),
            Refusal::SessionInvalid { .. } => format!("Not Found: {reason}"),
            Refusal::MethodNotFound { .. } => format!("Method not found: {reason}"),
            Refusal::NoGrant { .. } => format!("Unauthorized: {reason}"),
            Refusal::Denied { subject, .. } | Refusal::NoPolicy { subject } | Refusal::Contained { subject, .. } => {
                format!("{subject} denied: {reason}")
            }
            Refusal::RateLimited { subject, retry_after_seconds, .. } => {
                format!("{subject} rate limited: {reason}; retry in {retry_after_seconds} s")
            }
            Refusal::LimiterUnavailable { subject, .. } => format!("{subject} refused: {reason}"),
            Refusal::BatchRefused => format!("Batch refused: {reason}"),
            Refusal::BadUpstreamResponse { .. } => format!("Bad gateway: {reason}"),
            Refusal::ApprovalRequired { tool, link: Some(l), .. } => format!(
                "tool '{tool}' requires approval: ask an approver to approve it at {}, then retry the identical call",
                l.approval_url
            ),
            Refusal::ApprovalRequired { tool, link: None, .. } => format!("tool '{tool}' requires approval: {reason}"),
            Refusal::UrlElicitationRequired { tool, link, .. } => {
                format!("tool '{tool}' requires approval: open {} to approve it", link.approval_url)
            }
            Refusal::ApprovalDenied { tool, .. } => format!("tool '{tool}' was denied by an approver: {reason}"),
            Refusal::ApprovalUnavailable { tool, .. } => {
                format!("tool '{tool}' refused: approval could not be checked: {reason}")
            }
            Refusal::Unavailable { reason } => (*reason).to_owned(),
            Refusal::ResultRefused { tool, .. } => format!("tool '{tool}' result refused: {reason}"),
            Refusal::PinMismatch { tool } => format!("tool '{tool}' refused: {reason}"),
            Refusal::FlowDenied { tool, flow, retry_after_seconds, .. } => {
                format!("tool '{tool}' denied by flow '{flow}': {reason}; retry in {retry_after_seconds} s")
            }
        }
    }

    /// The JSON-RPC error response for `id`: `{"jsonrpc":"2.0","id":ID,"error":{"code","message",
    /// "data":{"kind","tool"?,"reason","rule"?,…}}}`. The one place a refusal is rendered.
    pub fn to_json(&self, id: &Id) -> String {
        let mut e = RpcError::new(self.code(), self.kind(), self.message(), self.reason());
        e.tool = self.tool().map(str::to_owned);
        e.rule = self.rule().map(str::to_owned);
        match self {
            Refusal::RateLimited { limit, retry_after_seconds, .. } => {
                e.retry_after_seconds = Some(*retry_after_seconds);
                e.counter = Some(limit.counter.clone());
            }
            Refusal::LimiterUnavailable { .. } | Refusal::ApprovalUnavailable { .. } => e.retry_after_seconds = Some(1),
            Refusal::FlowDenied { flow, mark, retry_after_seconds, .. } => {
                e.retry_after_seconds = Some(*retry_after_seconds);
                e.extra = vec![("flow", flow.clone()), ("mark", mark.clone())];
            }
            Refusal::ApprovalRequired { link: Some(l), .. } => {
                e.expires_in_seconds = Some(l.expires_in_seconds);
                e.extra = vec![("approval_id", l.approval_id.clone()), ("approval_url", l.approval_url.clone())];
            }
            Refusal::ApprovalDenied { approval_id, approver, note, .. } => {
                e.extra =
                    vec![("approval_id", approval_id.clone()), ("approver", approver.clone()), ("note", note.clone())];
            }
            Refusal::UnsupportedProtocolVersion { requested, supported, .. } => {
                if !requested.is_empty() {
                    e.extra.push(("requested", requested.clone()));
                }
                let mut list = String::from("[");
                for v in supported.iter() {
                    if list.len() > 1 {
                        list.push(',');
                    }
                    crate::wire::json::write_str(&mut list, v.as_str());
                }
                list.push(']');
                return e.to_json_with(id, &[("supported", &list)]);
            }
            Refusal::UrlElicitationRequired { reason, link, .. } => {
                let list = format!("[{}]", crate::approval::offer::elicitation(link, reason));
                return e.to_json_with(id, &[("elicitations", &list)]);
            }
            _ => {}
        }
        e.to_json(id)
    }

    /// The whole local reply for `id`: status, headers and body.
    pub fn reply(&self, id: &Id) -> Reply {
        Reply { status: self.status(), headers: self.headers(), body: self.to_json(id) }
    }
}
