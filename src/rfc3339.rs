//! The audit record's `ts`: a UTC time in RFC 3339 with milliseconds, `2026-12-01T14:31:30.123Z`.
//!
//! Written here rather than with `humantime::format_rfc3339_millis`, which reads a `SystemTime`
//! through `duration_since(..).expect(..)` and so links `Duration`'s `Debug` formatting into the
//! module; the text is the same (tested against humantime for every kind of date).

/// Milliseconds since the Unix epoch as `YYYY-MM-DDTHH:MM:SS.mmmZ` (RFC 3339, UTC, the proleptic
/// Gregorian calendar). `None` from year 10000 on (no four-digit year; humantime refuses them too).
pub fn millis(ms: u64) -> Option<String> {
    const LAST: u64 = 253_402_300_800_000; // 10000-01-01T00:00:00Z in ms
    if ms >= LAST {
        return None;
    }
    let secs = ms / 1000;
    let (year, month, day) = civil_from_days(secs / 86_400);
    let s = secs % 86_400;
    let fields = [(year, 4), (month, 2), (day, 2), (s / 3600, 2), (s / 60 % 60, 2), (s % 60, 2), (ms % 1000, 3)];
    let mut out = String::with_capacity(24);
    for ((value, width), sep) in fields.into_iter().zip(["-", "-", "T", ":", ":", ".", "Z"]) {
        let mut div = 10u64.pow(width - 1);
        while div > 0 {
            out.push(char::from(b'0' + (value / div % 10) as u8));
            div /= 10;
        }
        out.push_str(sep);
    }
    Some(out)
}

/// (year, month 1–12, day 1–31) of a day count since 1970-01-01 (H. Hinnant's `civil_from_days`,
/// for days ≥ 0).
fn civil_from_days(days: u64) -> (u64, u64, u64) {
    let z = days + 719_468; // days since 0000-03-01
    let era = z / 146_097;
    let doe = z % 146_097; // day of the 400-year era, 0..=146096
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365; // 0..=399
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100); // day of the year from March 1st, 0..=365
    let mp = (5 * doy + 2) / 153; // month from March, 0..=11
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + u64::from(month <= 2);
    (year, month, day)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, UNIX_EPOCH};

    fn humantime(ms: u64) -> String {
        humantime::format_rfc3339_millis(UNIX_EPOCH + Duration::from_millis(ms)).to_string()
    }

    #[test]
    fn same_text_as_humantime() {
        assert_eq!(millis(0).as_deref(), Some("1970-01-01T00:00:00.000Z"));
        assert_eq!(millis(1_796_135_490_123).as_deref(), Some("2026-12-01T14:31:30.123Z"));
        assert_eq!(millis(951_782_400_000).as_deref(), Some("2000-02-29T00:00:00.000Z"));
        assert_eq!(millis(253_402_300_799_999).as_deref(), Some("9999-12-31T23:59:59.999Z"));
        assert_eq!(millis(253_402_300_800_000), None);
        assert_eq!(millis(u64::MAX), None);
        // Every day boundary of 1970–2500 (leap years, centuries, 2000), plus a pseudo-random walk
        // through all of 0000–9999's reachable range.
        for day in 0..(530 * 366) {
            for ms in [day * 86_400_000, day * 86_400_000 + 86_399_999] {
                assert_eq!(millis(ms).unwrap(), humantime(ms), "{ms}");
            }
        }
        let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
        for _ in 0..200_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let ms = x % 253_402_300_800_000;
            assert_eq!(millis(ms).unwrap(), humantime(ms), "{ms}");
        }
    }
}
