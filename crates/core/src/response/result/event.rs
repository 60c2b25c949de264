//! What happened to one tool result ([`ResultEvent`]): for the audit record and the metrics. It
//! names the tool, the rule and the number of redactions, never the text.

use crate::outcome::refusal::Refusal;
use crate::wire::json::{self, Json};

const PIN_VERIFIED: &str = "pin_verified";

/// One result refused or redacted (or, under dry run, that would have been).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResultEvent {
    pub tool: String,
    /// The JSON-RPC id of the response, as JSON text.
    pub id: String,
    /// `result_refused`, `redacted` or `pin_mismatch`.
    pub kind: &'static str,
    /// The policy path that fired (`tools.NAME.result.deny_if[0]`, `….max_bytes`, `tools.NAME.result`
    /// for an unreadable result, `tools.NAME.result.redact` for redactions, `tools.NAME.pin`).
    pub rule: String,
    pub reason: Option<String>,
    pub redactions: usize,
    /// Dry run: nothing was changed.
    pub dry_run: bool,
    /// `marked`: the mark to set on the call's grant (`crate::policy::flows`).
    pub mark: Option<String>,
}

impl ResultEvent {
    pub(crate) fn redacted(tool: &str, id: &Json, count: usize, dry_run: bool) -> Self {
        ResultEvent {
            tool: tool.to_owned(),
            id: id_text(id),
            kind: "redacted",
            rule: format!("tools.{tool}.result.redact"),
            reason: None,
            redactions: count,
            dry_run,
            mark: None,
        }
    }

    pub(crate) fn refused(refusal: &Refusal, id: &Json, dry_run: bool) -> Self {
        ResultEvent {
            tool: refusal.tool().unwrap_or_default().to_owned(),
            id: id_text(id),
            kind: refusal.kind(),
            rule: refusal.rule().unwrap_or_default().to_owned(),
            reason: Some(refusal.reason().into_owned()),
            redactions: 0,
            dry_run,
            mark: None,
        }
    }

    /// A listed tool whose definition did not match its pin at `rule` (`tools.NAME.pin` or
    /// `pins.NAME.pin`; `enforce`: removed from the list).
    pub fn pin_mismatch(tool: &str, rule: String, dry_run: bool) -> Self {
        ResultEvent {
            tool: tool.to_owned(),
            id: "null".into(),
            kind: "pin_mismatch",
            rule,
            reason: None,
            redactions: 0,
            dry_run,
            mark: None,
        }
    }

    /// A listed tool of `pins` whose definition matched its pin and recorded annotations: only a
    /// marker for `default_for` ([`Self::pin_marker`]), neither audited nor counted.
    pub fn pin_verified(tool: &str) -> Self {
        ResultEvent {
            tool: tool.to_owned(),
            id: "null".into(),
            kind: PIN_VERIFIED,
            rule: format!("pins.{tool}.pin"),
            reason: None,
            redactions: 0,
            dry_run: false,
            mark: None,
        }
    }

    /// Is this event only a marker ([`Self::pin_verified`]): neither audited nor counted?
    pub fn marker_only(&self) -> bool {
        self.kind == PIN_VERIFIED
    }

    /// The key the host sets in the process's shared data for this event, if any: a pin mismatch
    /// under `enforce` (later calls of the tool are refused) or a verified pin (`default_for` may
    /// allow the tool). Both hosts set it to `1`, with no expiry.
    pub fn pin_marker(&self, policy: &crate::policy::Policy) -> Option<crate::limits::Key> {
        let pin = policy.pin(&self.tool)?;
        match (self.kind, self.dry_run) {
            ("pin_mismatch", false) => Some(crate::limits::pin_mismatch_key(&self.tool, pin)),
            (PIN_VERIFIED, _) => Some(crate::limits::pin_verified_key(&self.tool, pin)),
            _ => None,
        }
    }

    /// A result that marks its call's grant with `mark` (`rule`: `tools.NAME.marks` or
    /// `tools.NAME.result.mark_if[i]`). Set under dry run too: flows then report `would_deny`.
    pub fn marked(tool: &str, id: &Json, rule: String, mark: &str) -> Self {
        ResultEvent {
            tool: tool.to_owned(),
            id: id_text(id),
            kind: "marked",
            rule,
            reason: None,
            redactions: 0,
            dry_run: false,
            mark: Some(mark.to_owned()),
        }
    }

    /// `decision`: what the metrics and the audit record call it (`would_deny` under dry run for
    /// refusals and pin mismatches, `would_redact` for redactions).
    pub fn label(&self) -> &'static str {
        match (self.kind, self.dry_run) {
            ("redacted", true) => "would_redact",
            ("redacted", false) => "redacted",
            (_, true) => "would_deny",
            (kind, false) => kind,
        }
    }

    /// The audit record (one JSON object): `{"ts","event":"result","decision","kind","tool","id",
    /// "rule","reason"?,"redactions"}`; `ts` is RFC 3339.
    pub fn audit_json(&self, ts: &str) -> String {
        let mut out = String::from("{\"ts\":");
        json::write_str(&mut out, ts);
        out.push_str(",\"event\":\"result\",\"decision\":");
        json::write_str(&mut out, self.label());
        out.push_str(",\"kind\":");
        json::write_str(&mut out, self.kind);
        out.push_str(",\"tool\":");
        json::write_str(&mut out, &self.tool);
        out.push_str(",\"id\":");
        out.push_str(&self.id);
        out.push_str(",\"rule\":");
        json::write_str(&mut out, &self.rule);
        if let Some(r) = &self.reason {
            out.push_str(",\"reason\":");
            json::write_str(&mut out, r);
        }
        if let Some(m) = &self.mark {
            out.push_str(",\"mark\":");
            json::write_str(&mut out, m);
        }
        out.push_str(",\"redactions\":");
        out.push_str(&self.redactions.to_string());
        out.push('}');
        out
    }
}

pub(super) fn id_text(id: &Json) -> String {
    let mut s = String::new();
    json::write(&mut s, id);
    s
}
