//! Fuzz the native build's shorter check of skipped JSON values (`crates/core/src/wire/json/fast.rs`)
//! against the strict parser: any bytes, read once with the shorter check (the strict path taking
//! over wherever it gives up) and once by the strict path alone, must give the same result, error,
//! offset, end and count of folded name clashes. The shorter check only ever accepts; a difference
//! is a value one build would read otherwise than the server-side reading the filter stands for.
use mcp_policy_core::wire::json::skip_both_ways;

/// One fuzz input (the target's body; also replayed by `cargo test` over the seeds).
pub fn run(data: &[u8]) {
    let [fast, strict] = skip_both_ways(data);
    assert_eq!(fast, strict, "the shorter check and the strict path differ on {:?}", String::from_utf8_lossy(data));
}
