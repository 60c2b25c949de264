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

/// An audit record's `ts`: `ms` milliseconds after the Unix epoch, as RFC 3339 UTC with
/// milliseconds (`2026-12-05T08:42:52.123Z`, always 24 bytes); empty from the year 10000 on, which
/// four digits cannot write. Both hosts stamp records with it: `humantime`'s formatter writes the
/// same text, but links about 3 KB into the wasm module (a `Duration` debug formatter for an
/// `expect` no `u64` can reach among them), and wants a `SystemTime`.
pub fn timestamp(ms: u64) -> String {
    let (secs, millis) = (ms / 1000, ms % 1000);
    if secs >= 253_402_300_800 {
        return String::new();
    }
    let (days, time) = (secs / 86_400, secs % 86_400);
    // The civil date of a day number (Howard Hinnant's `civil_from_days`), in eras of 400 years
    // counted from 0000-03-01, so that a leap day ends its year; unsigned, as no day precedes 1970.
    let z = days + 719_468;
    let (era, day_of_era) = (z / 146_097, z % 146_097);
    let year_of_era = (day_of_era - day_of_era / 1_460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let month_from_march = (5 * day_of_year + 2) / 153;
    let day = day_of_year - (153 * month_from_march + 2) / 5 + 1;
    let month = if month_from_march < 10 { month_from_march + 3 } else { month_from_march - 9 };
    let year = era * 400 + year_of_era + u64::from(month <= 2);
    let mut ts = *b"0000-00-00T00:00:00.000Z";
    // Two digits at a time (each value here is below 100), into the bytes they replace.
    let (hour, minute, second) = (time / 3600, time / 60 % 60, time % 60);
    let pairs = [(0, year / 100), (2, year % 100), (5, month), (8, day), (11, hour), (14, minute), (17, second)];
    for (at, value) in pairs.into_iter().chain([(20, millis / 10)]) {
        if let Some([tens, ones]) = ts.get_mut(at..at + 2) {
            *tens = b'0' + (value / 10) as u8;
            *ones = b'0' + (value % 10) as u8;
        }
    }
    if let Some(last) = ts.get_mut(22) {
        *last = b'0' + (millis % 10) as u8;
    }
    String::from_utf8(ts.to_vec()).unwrap_or_default()
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

#[cfg(test)]
mod tests {
    use super::timestamp;
    use proptest::prelude::*;
    use std::time::{Duration, UNIX_EPOCH};

    fn humantime_ms(ms: u64) -> String {
        humantime::format_rfc3339_millis(UNIX_EPOCH + Duration::from_millis(ms)).to_string()
    }

    #[test]
    fn writes_rfc3339_millis_as_humantime_does() {
        assert_eq!(timestamp(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(timestamp(1_796_460_172_123), "2026-12-05T08:42:52.123Z");
        assert_eq!(timestamp(1_796_460_173_007), "2026-12-05T08:42:53.007Z");
        assert_eq!(timestamp(951_782_400_000), "2000-02-29T00:00:00.000Z");
        assert_eq!(timestamp(4_107_542_399_999), "2100-02-28T23:59:59.999Z");
        assert_eq!(timestamp(4_107_542_400_000), "2100-03-01T00:00:00.000Z");
        assert_eq!(timestamp(253_402_300_799_999), "9999-12-31T23:59:59.999Z");
        assert_eq!(timestamp(253_402_300_800_000), "");
        assert_eq!(timestamp(u64::MAX), "");
        // Every day's first and last millisecond over 400 years from the epoch (1970 to 2370: each
        // leap rule, 2000 and 2100 among them).
        for day in 0..146_097u64 {
            for ms in [day * 86_400_000, (day + 1) * 86_400_000 - 1] {
                assert_eq!(timestamp(ms), humantime_ms(ms), "{ms}");
            }
        }
    }

    proptest! {
        #[test]
        fn equals_humantime(ms in 0u64..253_402_300_800_000) {
            prop_assert_eq!(timestamp(ms), humantime_ms(ms));
        }
    }
}
