//! The `json` fuzz target: `mcp_policy_filter_fuzz::json::run` (see its documentation).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| mcp_policy_filter_fuzz::json::run(data));
