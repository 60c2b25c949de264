//! mcp-approvals: the human approval service for mcp-policy-filter.
//!
//! The Envoy filter asks `POST /v1/check` before letting a tool call that needs approval through;
//! approvers decide on a web page or through a JSON API. The contract is `services/approvals/API.md`.
//!
//! - [`store`]: SQLite or PostgreSQL behind one trait, one transaction per state change (single
//!   use, one pending per key, across instances on PostgreSQL);
//! - [`auth`]: approvers, tokens, random ids;
//! - [`sessions`]: the approvers' web sessions, stored in the database;
//! - [`notify`]: webhooks when an approval opens or is decided;
//! - [`api`]: `/v1/check` and the approvers' JSON API;
//! - [`web`]: the approvers' HTML pages;
//! - [`app`]: the shared state; [`clock`], [`config`], [`metrics`]: what it holds;
//! - [`error`]: what handlers fail with, and its answer;
//! - [`routes`]: the routers of the two listeners; [`tasks`]: the expiry task.

pub mod api;
pub mod app;
pub mod auth;
pub mod check;
pub mod clock;
pub mod config;
pub mod error;
pub mod metrics;
pub mod notify;
pub mod routes;
pub mod sessions;
pub mod store;
pub mod tasks;
pub mod web;

pub use app::{App, Inner};
pub use clock::{Clock, ManualClock, SystemClock};
pub use config::{
    Config, DEFAULT_DB_POOL_SIZE, DEFAULT_DB_TIMEOUT, DEFAULT_MAX_ARGUMENTS_BYTES, DEFAULT_MAX_PENDING,
    DEFAULT_MAX_PENDING_PER_GRANT, DEFAULT_RETAIN_DAYS,
};
pub use error::{ApiError, Error};
pub use metrics::Metrics;
pub use routes::{check_router, page_router, router, MAX_BODY};
pub use tasks::{expiry_task, PURGE_INTERVAL};
