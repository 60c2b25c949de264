//! From an RLS v3 `RateLimitRequest` to the counters one decision touches.
//!
//! Each descriptor is one counter: its key is a hash of the domain, the descriptor's entries (in
//! order) and the window length, so every instance sharing a store derives the same key. The limit
//! comes from the descriptor's `limit` override (`requests_per_unit`, `unit`); a descriptor without
//! one is refused (`INVALID_ARGUMENT`): this service has no limits file, the caller's policy is the
//! one source of truth. Source: envoy/service/ratelimit/v3/rls.proto and
//! envoy/extensions/common/ratelimit/v3/ratelimit.proto.
//!
//! A descriptor whose first entry is `mcp_mark` is a mark, not a counter (the filter's
//! `rls::marks`; README "Marks"): entries `mcp_mark`, `mcp_grant` and `mcp_mark_for_ms` (1 ms to 30
//! days), in that order; `hits_addend` 1 sets the mark (the store keeps the time, in its own clock,
//! for at least that long), 0 checks it (`OVER_LIMIT` while it was set less than that long ago).
//! Its key leaves `mcp_mark_for_ms` out, so that every flow's check reads the one marking.

use envoy_types::pb::envoy::extensions::common::ratelimit::v3::RateLimitDescriptor;
use envoy_types::pb::envoy::r#type::v3::RateLimitUnit;
use envoy_types::pb::envoy::service::ratelimit::v3::RateLimitRequest;
use mcp_policy_core::identity::grant::hex;
use sha2::{Digest, Sha256};

/// Most descriptors in one request: the filter's own bound (`rls::MAX_DESCRIPTORS`), so that the
/// filter never sends a request this service refuses.
pub const MAX_DESCRIPTORS: usize = mcp_policy_core::rls::MAX_DESCRIPTORS;
/// Most entries in one descriptor.
pub const MAX_ENTRIES: usize = 16;
/// Longest domain, entry key or entry value, in bytes (the filter checks counter names against it
/// at policy load).
pub const MAX_TEXT_BYTES: usize = mcp_policy_core::rls::MAX_TEXT_BYTES;

/// Descriptor entry keys of a mark (the filter's `rls::marks`).
pub const MARK_KEY: &str = mcp_policy_core::rls::marks::MARK_KEY;
pub const MARK_GRANT_KEY: &str = mcp_policy_core::rls::GRANT_KEY;
pub const MARK_FOR_KEY: &str = mcp_policy_core::rls::marks::FOR_KEY;
/// Longest `mcp_mark_for_ms`: 30 days (the filter's longest `for`).
pub const MAX_MARK_MS: u64 = 30 * 86_400_000;

/// What a descriptor asks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Count `hits` against `limit` per window.
    Count,
    /// Is the mark set less than `window_ms` ago? (`hits_addend` 0)
    MarkCheck,
    /// Set the mark now, kept for at least `window_ms` (`hits_addend` 1).
    MarkSet,
}

/// One counter a request counts against (or a mark it checks or sets).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Counter {
    /// Store key: `PREFIX` + 32 hex digits of SHA-256 over (domain, entries, window).
    pub key: String,
    /// Most hits admitted per window (`requests_per_unit`).
    pub limit: u64,
    /// Hits this request adds: the descriptor's `hits_addend`, else the request's, else 1.
    pub hits: u64,
    /// Window length in milliseconds; windows are aligned to the Unix epoch (UTC). For a mark:
    /// `mcp_mark_for_ms`.
    pub window_ms: u64,
    pub kind: Kind,
}

impl Counter {
    /// A counter (`Kind::Count`).
    pub fn count(key: impl Into<String>, limit: u64, hits: u64, window_ms: u64) -> Self {
        Counter { key: key.into(), limit, hits, window_ms, kind: Kind::Count }
    }
}

/// Window length of an RLS unit, in milliseconds. Month and year have no fixed length: refused.
pub fn unit_ms(unit: i32) -> Option<u64> {
    match RateLimitUnit::try_from(unit).ok()? {
        RateLimitUnit::Second => Some(1_000),
        RateLimitUnit::Minute => Some(60_000),
        RateLimitUnit::Hour => Some(3_600_000),
        RateLimitUnit::Day => Some(86_400_000),
        RateLimitUnit::Unknown | RateLimitUnit::Month | RateLimitUnit::Year => None,
    }
}

fn push_field(h: &mut Sha256, bytes: &[u8]) {
    // Length-prefixed: ("a=b","c") and ("a","b=c") never hash alike.
    h.update((bytes.len() as u64).to_be_bytes());
    h.update(bytes);
}

/// The store key of one descriptor.
pub fn key(prefix: &str, domain: &str, d: &RateLimitDescriptor, window_ms: u64) -> String {
    let mut h = Sha256::new();
    push_field(&mut h, domain.as_bytes());
    push_field(&mut h, &(d.entries.len() as u64).to_be_bytes());
    for e in &d.entries {
        push_field(&mut h, e.key.as_bytes());
        push_field(&mut h, e.value.as_bytes());
    }
    push_field(&mut h, &window_ms.to_be_bytes());
    let digest = h.finalize();
    format!("{prefix}{}", hex(digest.get(..16).unwrap_or(&[])))
}

/// The store key of a mark: domain, mark and grant (not its `for`), hashed apart from every counter
/// (a window length of 0, which no counter has).
pub fn mark_key(prefix: &str, domain: &str, d: &RateLimitDescriptor) -> String {
    let mut d = d.clone();
    d.entries.retain(|e| e.key != MARK_FOR_KEY);
    key(prefix, domain, &d, 0)
}

/// A mark descriptor (first entry `mcp_mark`), or why it is invalid.
fn mark(prefix: &str, domain: &str, i: usize, d: &RateLimitDescriptor, hits: u64) -> Result<Counter, String> {
    let keys: Vec<&str> = d.entries.iter().map(|e| e.key.as_str()).collect();
    if keys != [MARK_KEY, MARK_GRANT_KEY, MARK_FOR_KEY] || d.entries.iter().any(|e| e.value.is_empty()) {
        return Err(format!(
            "descriptors[{i}]: a mark has the entries {MARK_KEY}, {MARK_GRANT_KEY} and {MARK_FOR_KEY}, in that order, \
             none empty"
        ));
    }
    let for_ms = d.entries.get(2).and_then(|e| e.value.parse::<u64>().ok()).filter(|ms| (1..=MAX_MARK_MS).contains(ms));
    let Some(for_ms) = for_ms else {
        return Err(format!("descriptors[{i}]: {MARK_FOR_KEY} must be 1 to {MAX_MARK_MS} milliseconds"));
    };
    let kind = match hits {
        0 => Kind::MarkCheck,
        1 => Kind::MarkSet,
        _ => return Err(format!("descriptors[{i}]: a mark's hits_addend is 0 (check) or 1 (set)")),
    };
    Ok(Counter { key: mark_key(prefix, domain, d), limit: 0, hits, window_ms: for_ms, kind })
}

/// The counters of `req`, or why the request is invalid (answered `INVALID_ARGUMENT`).
pub fn counters(prefix: &str, req: &RateLimitRequest) -> Result<Vec<Counter>, String> {
    if req.domain.is_empty() || req.domain.len() > MAX_TEXT_BYTES {
        return Err(format!("domain must be 1 to {MAX_TEXT_BYTES} bytes"));
    }
    if req.descriptors.is_empty() || req.descriptors.len() > MAX_DESCRIPTORS {
        return Err(format!("a request needs 1 to {MAX_DESCRIPTORS} descriptors"));
    }
    let request_hits = if req.hits_addend == 0 { 1 } else { u64::from(req.hits_addend) };
    let mut out = Vec::with_capacity(req.descriptors.len());
    for (i, d) in req.descriptors.iter().enumerate() {
        if d.entries.is_empty() || d.entries.len() > MAX_ENTRIES {
            return Err(format!("descriptors[{i}]: needs 1 to {MAX_ENTRIES} entries"));
        }
        if d.entries.iter().any(|e| e.key.is_empty() || e.key.len() > MAX_TEXT_BYTES || e.value.len() > MAX_TEXT_BYTES)
        {
            return Err(format!(
                "descriptors[{i}]: entry keys must be 1 to {MAX_TEXT_BYTES} bytes, values at most that"
            ));
        }
        if d.is_negative_hits {
            return Err(format!("descriptors[{i}]: is_negative_hits is not supported (quota is never given back)"));
        }
        if d.entries.first().is_some_and(|e| e.key == MARK_KEY) {
            let hits = d.hits_addend.as_ref().map_or(request_hits, |h| h.value);
            let counter = mark(prefix, &req.domain, i, d, hits)?;
            // Two flows naming one mark check it with their own `for`: the same key, two descriptors.
            if out
                .iter()
                .any(|c: &Counter| c.key == counter.key && c.kind == counter.kind && c.window_ms == counter.window_ms)
            {
                return Err(format!("descriptors[{i}]: the same descriptor twice in one request"));
            }
            out.push(counter);
            continue;
        }
        let Some(limit) = d.limit.as_ref() else {
            return Err(format!(
                "descriptors[{i}]: no limit override; mcp-ratelimit takes every limit from the request"
            ));
        };
        let Some(window_ms) = unit_ms(limit.unit) else {
            return Err(format!("descriptors[{i}]: limit unit must be SECOND, MINUTE, HOUR or DAY"));
        };
        let hits = d.hits_addend.as_ref().map_or(request_hits, |h| h.value);
        if hits > 1_000_000 {
            return Err(format!("descriptors[{i}]: hits_addend above 1000000"));
        }
        let counter = Counter {
            key: key(prefix, &req.domain, d, window_ms),
            limit: u64::from(limit.requests_per_unit),
            hits,
            window_ms,
            kind: Kind::Count,
        };
        if out.iter().any(|c: &Counter| c.key == counter.key) {
            return Err(format!("descriptors[{i}]: the same descriptor twice in one request"));
        }
        out.push(counter);
    }
    Ok(out)
}
