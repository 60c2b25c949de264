//! An audit record's `ts`: RFC 3339 UTC with milliseconds (`2026-12-05T08:42:52.123Z`), as the
//! core writes it ([`timestamp`]).
//!
//! The date and the time of day up to the second are formatted once a second on each worker thread
//! and kept; within that second only the milliseconds are written, which saves about half the
//! instructions of formatting the whole stamp for every decision.

use mcp_policy_core::outcome::audit::timestamp;
use std::cell::RefCell;
use std::time::{SystemTime, UNIX_EPOCH};

thread_local! {
    /// The second the kept text is for, and the stamp up to that second (`2026-12-05T08:42:52`).
    static SECOND: RefCell<(u64, String)> = const { RefCell::new((u64::MAX, String::new())) };
}

/// The stamp of `at` (24 bytes; within a second, one allocation).
pub(crate) fn audit_ts(at: SystemTime) -> String {
    let ms = at.duration_since(UNIX_EPOCH).map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX));
    SECOND.try_with(|kept| within_second(kept, ms)).ok().flatten().unwrap_or_else(|| timestamp(ms))
}

/// The stamp from the kept second, formatted again first when `ms` falls in another; `None` when
/// the kept text is in use or the stamp is not 24 bytes (then the caller formats it whole).
fn within_second(kept: &RefCell<(u64, String)>, ms: u64) -> Option<String> {
    let (secs, millis) = (ms / 1000, ms % 1000);
    let mut kept = kept.try_borrow_mut().ok()?;
    if kept.0 != secs {
        let text = timestamp(ms);
        if text.len() != 24 {
            return None;
        }
        kept.1.clear();
        kept.1.push_str(text.get(..19)?);
        kept.0 = secs;
    }
    let mut ts = String::with_capacity(24);
    ts.push_str(&kept.1);
    ts.push('.');
    for d in [millis / 100, millis / 10 % 10, millis % 10] {
        ts.push(char::from_digit(u32::try_from(d).ok()?, 10)?);
    }
    ts.push('Z');
    Some(ts)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    /// Every stamp equals the core's whole one and `humantime`'s, across seconds, minutes and days, at every millisecond
    /// boundary that changes a digit, and going back in time.
    #[test]
    fn equals_humantime_at_every_step() {
        let base = UNIX_EPOCH + Duration::from_secs(1_796_460_172); // 2026-12-05T08:42:52Z
        let steps_ms = [0u64, 1, 9, 10, 99, 100, 999, 1_000, 1_001, 59_999, 60_000, 86_399_999, 86_400_000, 5, 0];
        for offset in steps_ms.iter().chain([1_000u64, 0, 31_536_000_000].iter()) {
            let at = base + Duration::from_millis(*offset);
            let whole = timestamp(u64::try_from(at.duration_since(UNIX_EPOCH).unwrap().as_millis()).unwrap());
            assert_eq!(audit_ts(at), whole, "{offset} ms");
            assert_eq!(audit_ts(at), humantime::format_rfc3339_millis(at).to_string(), "{offset} ms");
        }
        assert_eq!(audit_ts(base + Duration::from_millis(123)), "2026-12-05T08:42:52.123Z");
        assert_eq!(audit_ts(base + Duration::from_millis(1_007)), "2026-12-05T08:42:53.007Z");
        assert_eq!(audit_ts(UNIX_EPOCH), "1970-01-01T00:00:00.000Z");
    }
}
