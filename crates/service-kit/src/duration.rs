//! Duration flags, one grammar for every service: `humantime`'s (`50ms`, `5s`, `1m`, `1h 30m`).
//! A number needs its unit: `5` is refused, since seconds and milliseconds are both usual.

use std::time::Duration;

/// A duration (zero allowed). For clap's `value_parser`.
pub fn parse(s: &str) -> Result<Duration, String> {
    humantime::parse_duration(s).map_err(|e| e.to_string())
}

/// A duration of more than zero. For clap's `value_parser`.
pub fn positive(s: &str) -> Result<Duration, String> {
    let d = parse(s)?;
    if d.is_zero() {
        return Err("must be more than 0".into());
    }
    Ok(d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn units_are_required_and_zero_is_refused_where_asked() {
        assert_eq!(parse("50ms"), Ok(Duration::from_millis(50)));
        assert_eq!(parse("5s"), Ok(Duration::from_secs(5)));
        assert_eq!(parse("1m"), Ok(Duration::from_secs(60)));
        assert_eq!(parse("0s"), Ok(Duration::ZERO));
        assert_eq!(positive("1s"), Ok(Duration::from_secs(1)));
        assert_eq!(positive("0ms"), Err("must be more than 0".into()));
        assert!(parse("5").is_err());
        assert!(parse("").is_err());
        assert!(parse("fast").is_err());
    }
}
