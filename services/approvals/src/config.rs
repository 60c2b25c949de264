//! The settings of a running service (from the command line, see main.rs).

use crate::auth::Approvers;
use crate::notify::NotifyConfig;

/// Settings of a running service.
#[derive(Clone, Debug)]
pub struct Config {
    /// Base URL approvers reach the pages at, without a trailing slash.
    pub public_url: String,
    pub approvers: Approvers,
    /// Most pending approvals one grant (`grant_id`) may have open (`--max-pending-per-grant`).
    pub max_pending_per_grant: u32,
    /// Most pending approvals open in all, whatever the grant (`--max-pending`).
    pub max_pending: u32,
    /// Most bytes of a check's arguments (their JSON text as sent; `--max-arguments-bytes`).
    pub max_arguments_bytes: usize,
    /// Days consumed, denied and expired approvals are kept (`--retain-days`; 0 = forever).
    pub retain_days: u32,
    /// Most PostgreSQL connections of this instance (`--db-pool-size`; SQLite has one).
    pub db_pool_size: u32,
    /// The longest wait for one database call (`--db-timeout`): past it the request fails.
    pub db_timeout: std::time::Duration,
    /// Webhooks told when an approval opens or is decided (`--notify-webhook`).
    pub notify: NotifyConfig,
}

/// `--max-pending-per-grant` default.
pub const DEFAULT_MAX_PENDING_PER_GRANT: u32 = 20;
/// `--max-pending` default.
pub const DEFAULT_MAX_PENDING: u32 = 1000;
/// `--max-arguments-bytes` default.
pub const DEFAULT_MAX_ARGUMENTS_BYTES: usize = 65_536;
/// `--retain-days` default.
pub const DEFAULT_RETAIN_DAYS: u32 = 90;
/// `--db-pool-size` default.
pub const DEFAULT_DB_POOL_SIZE: u32 = 10;
/// `--db-timeout` default.
pub const DEFAULT_DB_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(2);

impl Config {
    /// A config with the default limits.
    pub fn new(public_url: impl Into<String>, approvers: Approvers) -> Config {
        Config {
            public_url: public_url.into(),
            approvers,
            max_pending_per_grant: DEFAULT_MAX_PENDING_PER_GRANT,
            max_pending: DEFAULT_MAX_PENDING,
            max_arguments_bytes: DEFAULT_MAX_ARGUMENTS_BYTES,
            retain_days: DEFAULT_RETAIN_DAYS,
            db_pool_size: DEFAULT_DB_POOL_SIZE,
            db_timeout: DEFAULT_DB_TIMEOUT,
            notify: NotifyConfig::default(),
        }
    }
}
