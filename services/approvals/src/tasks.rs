//! The background task: expiry and retention.

use std::time::Duration;

use crate::App;

/// How often the background task applies retention (and once at start).
pub const PURGE_INTERVAL: Duration = Duration::from_secs(3600);

/// Marks expired approvals every `interval`, and deletes rows past `--retain-days` at start and
/// every [`PURGE_INTERVAL`], until shutdown.
pub async fn expiry_task(app: App, interval: Duration) {
    let mut shutdown = app.shutdown_receiver();
    let mut tick = tokio::time::interval(interval);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut last_purge: Option<tokio::time::Instant> = None;
    loop {
        tokio::select! {
            _ = tick.tick() => {
                if let Err(e) = app.expire_now().await {
                    tracing::error!(error = %e, "expiry task");
                }
                if last_purge.is_none_or(|t| t.elapsed() >= PURGE_INTERVAL) {
                    last_purge = Some(tokio::time::Instant::now());
                    if let Err(e) = app.purge_now().await {
                        tracing::error!(error = %e, "retention");
                    }
                }
            }
            _ = shutdown.changed() => return,
        }
    }
}
