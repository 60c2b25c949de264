//! What the two services of mcp-policy-filter (mcp-approvals, mcp-ratelimit) share, so each main
//! only says what is its own:
//!
//! - [`run`]: the process: logging, the runtime, the exit status;
//! - [`shutdown`]: SIGTERM and SIGINT, not-serving first, then a stop with a deadline;
//! - [`duration`]: the one grammar of duration flags (`humantime`: `50ms`, `5s`, `1m`);
//! - [`prom`]: Prometheus text exposition of `/metrics` (`prometheus-client`).

pub mod duration;
pub mod prom;
pub mod run;
pub mod shutdown;

pub use run::main;
pub use shutdown::Shutdown;
