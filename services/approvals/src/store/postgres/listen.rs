//! LISTEN for [`CHANNEL`]: wakes this instance's hold-mode waiters and pages when any instance
//! changes an approval.

use std::time::Duration;

use postgres::fallible_iterator::FallibleIterator;
use postgres::NoTls;

use super::{CHANNEL, OPENED};
use crate::store::{Result, StoreError};

/// Listens for [`CHANNEL`] on a connection of its own and calls `changed` for each notification
/// (with whether it may settle an approval: any but [`OPENED`]), and once after every
/// (re)connection, settling (changes may have been missed meanwhile). Reconnects with
/// backoff (0.1 s doubling to 5 s) until `stop` returns true. Blocking: run on a thread.
pub fn listen(url: &str, changed: impl Fn(bool), stop: impl Fn() -> bool) {
    let mut backoff = Duration::from_millis(100);
    while !stop() {
        match listen_once(url, &changed, &stop) {
            Ok(()) => return,
            Err(e) => {
                tracing::warn!(error = %e, retry_in = ?backoff, "postgres LISTEN connection lost");
                std::thread::sleep(backoff);
                backoff = (backoff * 2).min(Duration::from_secs(5));
            }
        }
    }
}

fn listen_once(url: &str, changed: &impl Fn(bool), stop: &impl Fn() -> bool) -> Result<()> {
    let mut config: postgres::Config = url.parse()?;
    config.connect_timeout(Duration::from_secs(5));
    config.application_name("mcp-approvals listen");
    let mut client = config.connect(NoTls)?;
    client.batch_execute(&format!("LISTEN {CHANNEL}"))?;
    changed(true);
    loop {
        if stop() {
            return Ok(());
        }
        // Each notification is handled at once; the timeout only bounds how late `stop` is seen.
        {
            let mut notifications = client.notifications();
            let mut it = notifications.timeout_iter(Duration::from_millis(250));
            while let Some(n) = it.next()? {
                changed(n.payload() != OPENED);
                if stop() {
                    return Ok(());
                }
            }
        }
        if client.is_closed() {
            return Err(StoreError::Internal("LISTEN connection closed".into()));
        }
    }
}
