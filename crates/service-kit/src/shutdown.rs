//! Stopping a service: one handler for SIGTERM and SIGINT, and a stop with a deadline.
//!
//! On a signal the service first reports not-serving (its `/healthz` answers 503, mcp-ratelimit's
//! gRPC health says NOT_SERVING) so Envoy's health checks take it out of the pool, and its servers
//! stop accepting and finish what is in flight. A stop that is not done within the deadline
//! (`--shutdown-timeout`) ends anyway: a held request or a stuck peer never keeps the process up.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;
use tokio::task::JoinHandle;

/// `--shutdown-timeout` default: longest stop, from the signal to the exit.
pub const DEFAULT_TIMEOUT: &str = "10s";

/// Whether the service is stopping; cheap to clone, shared by the servers and their handlers.
#[derive(Clone, Debug)]
pub struct Shutdown(Arc<watch::Sender<bool>>);

impl Default for Shutdown {
    fn default() -> Self {
        Shutdown(Arc::new(watch::channel(false).0))
    }
}

impl Shutdown {
    pub fn new() -> Shutdown {
        Shutdown::default()
    }

    /// Starts the stop: not-serving from now on, servers drain.
    pub fn begin(&self) {
        self.0.send_replace(true);
    }

    /// Set once the stop began: the service is not serving.
    pub fn is_stopping(&self) -> bool {
        *self.0.borrow()
    }

    pub fn subscribe(&self) -> watch::Receiver<bool> {
        self.0.subscribe()
    }

    /// Resolves once the stop began (for `with_graceful_shutdown` and its kin).
    pub fn stopping(&self) -> impl Future<Output = ()> + Send + 'static {
        let mut rx = self.subscribe();
        async move {
            let _ = rx.wait_for(|stop| *stop).await;
        }
    }

    /// Begins the stop on the first SIGTERM or SIGINT (logged "shutting down"). Abort the task once
    /// the servers ended on their own.
    pub fn on_signal(&self) -> JoinHandle<()> {
        let this = self.clone();
        tokio::spawn(async move {
            signal().await;
            tracing::info!("shutting down");
            this.begin();
        })
    }

    /// Runs `servers` to their end, but once the stop began, for at most `deadline`: past it,
    /// `None` (logged), and the caller returns with connections still open.
    pub async fn serve<T>(&self, deadline: Duration, servers: impl Future<Output = T>) -> Option<T> {
        tokio::pin!(servers);
        tokio::select! {
            done = &mut servers => return Some(done),
            () = self.stopping() => {}
        }
        match tokio::time::timeout(deadline, servers).await {
            Ok(done) => Some(done),
            Err(_) => {
                tracing::warn!(shutdown_timeout = ?deadline, "still busy at the shutdown deadline: stopping anyway");
                None
            }
        }
    }

    /// A service's servers from start to stop: begins the stop on a signal ([`Shutdown::on_signal`]),
    /// runs `servers` ([`Shutdown::serve`]), then begins the stop anyway so that every task waiting
    /// for it ends, and runs `wind_down` (the service's own tasks ending). Logs "stopped" unless a
    /// server failed, whose error it returns.
    pub async fn run(
        &self,
        deadline: Duration,
        servers: impl Future<Output = Result<(), String>>,
        wind_down: impl Future<Output = ()>,
    ) -> Result<(), String> {
        let signals = self.on_signal();
        let result = self.serve(deadline, servers).await;
        self.begin();
        signals.abort();
        wind_down.await;
        if let Some(r) = result {
            r?;
        }
        tracing::info!("stopped");
        Ok(())
    }
}

/// The first SIGTERM or SIGINT. A handler that cannot be installed is logged and never fires.
pub async fn signal() {
    let ctrl_c = async {
        if let Err(e) = tokio::signal::ctrl_c().await {
            tracing::error!(error = %e, "SIGINT handler");
            std::future::pending::<()>().await;
        }
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(e) => {
                tracing::error!(error = %e, "SIGTERM handler");
                std::future::pending::<()>().await;
            }
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        () = ctrl_c => {}
        () = term => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_stop_waits_for_the_servers_but_not_past_the_deadline() {
        let s = Shutdown::new();
        assert!(!s.is_stopping());
        let quick = s.clone();
        let done = s.serve(Duration::from_secs(10), async move {
            quick.stopping().await;
            7
        });
        s.begin();
        assert!(s.is_stopping());
        assert_eq!(done.await, Some(7));

        let stuck = s.serve(Duration::from_millis(50), std::future::pending::<()>());
        assert_eq!(stuck.await, None);
    }

    #[tokio::test]
    async fn servers_that_end_on_their_own_need_no_stop() {
        let s = Shutdown::new();
        assert_eq!(s.serve(Duration::from_secs(1), async { 3 }).await, Some(3));
    }
}
