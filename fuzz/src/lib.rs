//! The fuzz targets' bodies, one module each: `fuzz_targets/NAME.rs` hands every input to
//! `NAME::run`, and `crates/core/tests/fuzz_seeds.rs` replays the seeds through the same functions
//! under `cargo test` (these files are included there by path, so they use only `mcp_policy_core`).

pub mod decide;
pub mod json;
pub mod results;
pub mod toolslist;
