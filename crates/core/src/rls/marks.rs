//! Marks (`crate::policy::flows`) through the rate limit service: with
//! `gateway.rate_limit_service`, every Envoy writes and checks a grant's marks in the service's
//! store, so a mark set through one Envoy refuses the flow's tools on every other.
//!
//! A mark is one descriptor, still a valid RLS descriptor, to which mcp-ratelimit gives a meaning
//! of its own (its README, "Marks"):
//! - entries `("mcp_mark", MARK)` (`POLICY/MARK` for a policy of a set, as counters are named),
//!   `("mcp_grant", hex SHA-256 of the credential)` and `("mcp_mark_for_ms", MS)`;
//! - `hits_addend` 1 sets the mark: the service stores the time it was set (its own clock) under a
//!   key of domain, mark and grant (not `MS`), kept for at least `MS`;
//! - `hits_addend` 0 checks it: `OVER_LIMIT` while the mark was set less than `MS` ago, with
//!   `duration_until_reset` the time until it lifts; `OK` otherwise;
//! - the `limit` override is `0` per `SECOND`.
//!
//! Why not a counter with the flow's window: RLS windows are fixed (a second, minute, hour or day,
//! aligned to the epoch), so a mark counted in a window would lift anywhere between 0 and a window
//! after it was set, and `duration_until_reset` would name the window's end, not the mark's. A
//! flow's `for` is any duration, measured from the marking. A key holding the time of the marking
//! is exact for every `for`, and one key serves every flow that names the mark: each check carries
//! its own flow's `for`.
//!
//! Why the `limit` 0: a service that does not know these entries (envoyproxy/ratelimit) counts the
//! descriptor against a limit of 0 and answers `OVER_LIMIT`; a check then refuses and a marking
//! then fails, so a wrong service can never let a flow's tool through.

use super::proto::Descriptor;
use super::GRANT_KEY;
use crate::policy::Policy;

/// Descriptor entry keys of a mark.
pub const MARK_KEY: &str = "mcp_mark";
pub const FOR_KEY: &str = "mcp_mark_for_ms";

/// The descriptor of `mark` on the grant whose hex id is `grant`: a check (`set` false) against a
/// flow's `for_ms`, or the marking itself (`set` true, `for_ms` the longest `for` of the flows that
/// name the mark).
pub fn descriptor(policy: &Policy, mark: &str, grant: &str, for_ms: u64, set: bool) -> Descriptor {
    let name = match &policy.name {
        Some(p) => format!("{p}/{mark}"),
        None => mark.to_owned(),
    };
    Descriptor {
        entries: vec![
            (MARK_KEY.to_owned(), name),
            (GRANT_KEY.to_owned(), grant.to_owned()),
            (FOR_KEY.to_owned(), for_ms.to_string()),
        ],
        limit: Some((0, super::unit(crate::terms::Window::Second))),
        hits_addend: Some(u64::from(set)),
    }
}

/// How long a marking keeps `mark`: the longest `for` of the flows naming it (0: no flow does).
pub fn keep_ms(policy: &Policy, mark: &str) -> u64 {
    policy.flows.iter().filter(|f| f.marks.iter().any(|m| m == mark)).map(|f| f.for_ms).max().unwrap_or(0)
}

/// The `RateLimitRequest` that sets `marks` on the grant whose hex id is `grant`.
pub fn set_request(policy: &Policy, marks: &[String], grant: &str, domain: &str) -> super::proto::Request {
    let descriptors = marks.iter().map(|m| descriptor(policy, m, grant, keep_ms(policy, m), true)).collect();
    super::proto::Request { domain: domain.to_owned(), descriptors, hits_addend: 0 }
}

/// The service's answer to [`set_request`]: `Ok` when it recorded every mark, else why not. Any
/// answer but `OK` (an outage, a refusal, `OVER_LIMIT`, an unreadable answer) is a failure, whatever
/// `failure_mode` says: the result must not reach the client unmarked.
pub fn set_answered(answer: &super::Answer, marks: usize) -> Result<(), String> {
    match answer {
        super::Answer::Decoded(r) if r.overall_code == super::proto::CODE_OK => {
            if r.statuses.len() == marks && r.statuses.iter().all(|s| s.code == super::proto::CODE_OK) {
                Ok(())
            } else {
                Err(format!("rate limit service answered {} statuses for {marks} marks", r.statuses.len()))
            }
        }
        super::Answer::Decoded(r) => Err(format!("rate limit service answered code {} to a marking", r.overall_code)),
        super::Answer::Unavailable(why) | super::Answer::Unusable(why) => Err(why.clone()),
    }
}
