//! `tools.NAME.result` and `tools.NAME.pin`: regexes compiled once, every error with its JSON path.

use super::Errors;
use crate::config::spec::ResultSpec;
use crate::config::{fail, MAX_BODY_BYTES_CEILING, MAX_REGEX_LEN};
use crate::policy::needle::Needle;
use crate::policy::result::{MarkIf, Pin, Redact, ResultDeny, ResultRules, DEFAULT_RESULT_REASON};

/// `tools.NAME.result` at `path` (`tools.NAME`).
pub(super) fn result(spec: &ResultSpec, path: &str, errs: &mut Errors) -> ResultRules {
    let base = format!("{path}.result");
    let max_bytes = spec.max_bytes.map(|b| {
        if b == 0 || b > MAX_BODY_BYTES_CEILING {
            fail(errs, format!("{base}.max_bytes"), crate::config::BYTE_LIMIT_RANGE);
        }
        usize::try_from(b).unwrap_or(usize::MAX)
    });
    let mut deny_if = Vec::new();
    for (i, d) in spec.deny_if.iter().enumerate() {
        if let Some(regex) = regex(&d.regex, &format!("{base}.deny_if[{i}].regex"), errs) {
            let reason = d.reason.clone().unwrap_or_else(|| DEFAULT_RESULT_REASON.to_owned());
            deny_if.push(ResultDeny { needle: Needle::new(regex), reason });
        }
    }
    let mut redact = Vec::new();
    for (i, r) in spec.redact.iter().enumerate() {
        if let Some(regex) = regex(&r.regex, &format!("{base}.redact[{i}].regex"), errs) {
            redact.push(Redact { needle: Needle::new(regex), with: r.with.clone() });
        }
    }
    let mut mark_if = Vec::new();
    for (i, m) in spec.mark_if.iter().enumerate() {
        let at = format!("{base}.mark_if[{i}]");
        super::flows::mark_name(&m.mark, &format!("{at}.mark"), errs);
        if let Some(regex) = regex(&m.regex, &format!("{at}.regex"), errs) {
            mark_if.push(MarkIf { needle: Needle::new(regex), mark: m.mark.clone() });
        }
    }
    ResultRules { path: path.to_owned(), max_bytes, deny_if, redact, mark_if }
}

/// A regex of a result rule: at most [`MAX_REGEX_LEN`] bytes, one that compiles, and one that cannot
/// match the empty text (it would match every result, or redact between every character).
fn regex(src: &str, path: &str, errs: &mut Errors) -> Option<regex_lite::Regex> {
    if src.len() > MAX_REGEX_LEN {
        fail(errs, path, crate::config::REGEX_TOO_LONG);
        return None;
    }
    match regex_lite::Regex::new(src) {
        Ok(r) if r.is_match("") => {
            fail(errs, path, "the regex matches the empty text");
            None
        }
        Ok(r) => Some(r),
        Err(e) => {
            fail(errs, path, format!("invalid regex: {e}"));
            None
        }
    }
}

/// `tools.NAME.pin`: `sha256:` and 64 lowercase hex digits.
pub(super) fn pin(text: &str, path: &str, errs: &mut Errors) -> Option<Pin> {
    let parsed = text.strip_prefix("sha256:").and_then(crate::identity::grant::from_hex32);
    if parsed.is_none() {
        fail(errs, format!("{path}.pin"), "must be \"sha256:\" and 64 lowercase hex digits (mcp-policy pin)");
    }
    parsed
}
