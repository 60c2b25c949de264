//! `POST /v1/check` (the filter) and the approvers' JSON API (bearer token).
//!
//! - [`check`]: `POST /v1/check`, asked by the filter;
//! - [`approvers`]: the approvers' JSON API (`/v1/approvals`), and the decision both it and the
//!   page use;
//! - [`ops`]: `/healthz` and `/metrics`.

pub mod approvers;
pub mod check;
pub mod ops;

pub use approvers::{approval_json, approve, decide, deny, get_one, list, ApprovalJson, ListQuery};
pub use check::{
    arguments_too_large, check, check_hold, check_once, is_json_content_type, parse_check, parse_check_limited,
    CheckError, KEY_MISMATCH,
};
pub use ops::{healthz, metrics};

/// Limits on `/v1/check` fields (API.md).
pub const MAX_TOOL: usize = 256;
pub const MAX_GRANT: usize = 1024;
pub const MAX_REQUEST_ID: usize = 1024;
pub const MAX_REASON: usize = 4096;
/// `policy`, `subject`, `client_id` and each actor of `act`, in bytes; `act` has at most
/// `mcp_policy_core::identity::payload::MAX_ACTORS` actors (the filter reads no more).
pub const MAX_CALLER: usize = 1024;
/// The filter accepts answer fields up to 2048 bytes (`MAX_ANSWER_FIELD` in crates/core/src/approval.rs).
pub const MAX_NOTE: usize = 2048;
pub const MAX_EXPIRES_IN: i64 = 604_800;
pub const MAX_WAIT: i64 = 300;
