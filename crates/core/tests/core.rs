//! The core's tests, one binary: each module tests one part of the core through its public API.
//! The property tests that run long (`differential`, `ratelimit_props`, `server_reading_props`) and
//! `alloc_count` (its own global allocator) are binaries of their own.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, clippy::indexing_slicing)]

#[path = "core/approval/mod.rs"]
mod approval;
#[path = "core/b64.rs"]
mod b64;
#[path = "core/flows/mod.rs"]
mod flows;
#[path = "core/gate/mod.rs"]
mod gate;
#[path = "core/json_member_names.rs"]
mod json_member_names;
#[path = "core/leg.rs"]
mod leg;
#[path = "core/metrics_chapter.rs"]
mod metrics_chapter;
#[path = "core/offer/mod.rs"]
mod offer;
#[path = "core/protocol.rs"]
mod protocol;
#[path = "core/refusal/mod.rs"]
mod refusal;
#[path = "core/response.rs"]
mod response;
#[path = "core/results/mod.rs"]
mod results;
#[path = "core/rls/mod.rs"]
mod rls;
#[path = "core/session.rs"]
mod session;
#[path = "core/sets/mod.rs"]
mod sets;
#[path = "core/shared_data_keys.rs"]
mod shared_data_keys;
