//! The request every decision benchmark and the allocation test judge: the load benchmark's
//! headers (`bench/load.py`) and its clock. Shared by `benches/core.rs`, `benches/alloc.rs` and
//! `tests/alloc_count.rs` (included with `#[path]`).

use mcp_policy_core::pipeline::RequestHead;
use mcp_policy_core::policy::Policy;

/// 2026-01-01T00:00:00Z, in ms since the Unix epoch.
pub const NOW_MS: u64 = 1_767_225_600_000;

/// The POST headers of one allowed agent (`Bearer bench-agent-token-0001`).
pub fn head(p: &Policy) -> RequestHead {
    RequestHead::from_headers(
        p,
        [
            (":method", &b"POST"[..]),
            (":path", b"/mcp"),
            ("content-type", b"application/json"),
            ("accept", b"application/json, text/event-stream"),
            ("authorization", b"Bearer bench-agent-token-0001"),
        ],
    )
}
