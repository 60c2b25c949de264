//! The audit record of one decision: the JSON line written to the audit log, and the caps that
//! keep request-derived values (tool names, ids, argument names) from forging or flooding logs.
//! The one home of the audit record; `gate` only fills in the [`Decision`]. Where the record goes
//! ([`AuditMode`], `gateway.audit`) is the host's business: an info log line, one filter-state value
//! for the access log, or nowhere.

use crate::outcome::decision::Decision;

/// Longest request-derived value written to an audit line (characters); longer ones end in `…`.
pub const AUDIT_MAX_VALUE: usize = 256;
/// Most argument names written to an audit line.
pub const AUDIT_MAX_KEYS: usize = 32;

/// `s` cut to at most `max` characters, with `…` marking a cut.
pub fn truncate(s: &str, max: usize) -> std::borrow::Cow<'_, str> {
    if s.len() <= max {
        // At most `max` bytes, so at most `max` characters: the common case, no scan.
        return std::borrow::Cow::Borrowed(s);
    }
    match s.char_indices().nth(max) {
        None => std::borrow::Cow::Borrowed(s),
        Some((at, _)) => std::borrow::Cow::Owned(format!("{}…", s.get(..at).unwrap_or(""))),
    }
}

/// A request-derived value made safe for a plain-text log line (Envoy's access log): control
/// characters and line/paragraph separators are written as `\u{…}` escapes, and the value is cut
/// to 128 characters, so a tool name cannot forge or flood log lines.
pub fn log_safe(s: &str) -> std::borrow::Cow<'_, str> {
    if s.len() <= 128 && crate::wire::fold::plain_ascii(s) {
        // Printable ASCII within the cap is its own safe form: borrowed, not rebuilt by character.
        return std::borrow::Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len().min(160));
    for c in truncate(s, 128).chars() {
        if c.is_control() || c == '\u{2028}' || c == '\u{2029}' {
            out.push_str(&format!("\\u{{{:x}}}", u32::from(c)));
        } else {
            out.push(c);
        }
    }
    std::borrow::Cow::Owned(out)
}

impl Decision {
    /// One audit-log line (JSON, no trailing newline). `ts` is RFC 3339 UTC; `request_id` is Envoy's
    /// `x-request-id`. Never contains tokens or argument values. Schema: see the README.
    pub fn audit_json(&self, ts: &str, request_id: Option<&str>) -> String {
        let mut o = String::with_capacity(512);
        self.write_audit_json(&mut o, ts, request_id);
        o
    }

    /// [`Decision::audit_json`] appended to `o` (a host that writes the line into a buffer of its
    /// own, after a prefix, saves a copy).
    pub fn write_audit_json(&self, o: &mut String, ts: &str, request_id: Option<&str>) {
        let start = o.len();
        // Values that come from the request are capped: an audit line must not be a way to flood logs.
        let field = |o: &mut String, k: &str, v: Option<&str>| {
            if let Some(v) = v {
                o.push_str(if o.len() > start + 1 { ",\"" } else { "\"" });
                o.push_str(k);
                o.push_str("\":");
                crate::wire::json::write_str(o, &truncate(v, AUDIT_MAX_VALUE));
            }
        };
        o.push('{');
        field(o, "ts", Some(ts));
        field(o, "decision", Some(self.label()));
        field(o, "error", self.error_kind());
        field(o, "method", self.method.as_deref());
        field(o, "tool", self.tool.as_deref());
        field(o, "rule", self.rule.as_deref());
        field(o, "reason", self.reason.as_deref());
        field(o, "grant", self.grant.as_deref());
        field(o, "approval_id", self.approval_id.as_deref());
        if let Some(p) = &self.provenance {
            field(o, "policy", p.policy.as_deref());
            field(o, "subject", p.subject.as_deref());
            field(o, "client_id", p.client_id.as_deref());
            if !p.act.is_empty() {
                o.push_str(",\"act\":[");
                for (i, a) in p.act.iter().enumerate() {
                    if i > 0 {
                        o.push(',');
                    }
                    crate::wire::json::write_str(o, &truncate(a, AUDIT_MAX_VALUE));
                }
                o.push(']');
            }
        }
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
                crate::wire::json::write_str(o, &truncate(k, 64));
            }
            o.push(']');
            if self.arg_keys.len() > AUDIT_MAX_KEYS {
                o.push_str(",\"arg_keys_total\":");
                o.push_str(&self.arg_keys.len().to_string());
            }
        }
        field(o, "request_id", request_id);
        o.push('}');
    }
}
