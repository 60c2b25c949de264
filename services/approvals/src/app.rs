//! The shared state of the service: the store, the clock, the settings, the metrics, and what
//! changed (the version pages and hold-mode checks wait on).

use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use mcp_service_kit::prom::Registry;
use mcp_service_kit::Shutdown;
use tokio::sync::watch;

use crate::notify::Notifier;
use crate::store::{self, Backend, Changes, Location, Storage, StoreError};
use crate::{Clock, Config, Error, Metrics};

pub struct Inner {
    store: Backend,
    pub clock: Arc<dyn Clock>,
    pub config: Config,
    pub metrics: Metrics,
    /// The webhooks' queue (none configured: `None`).
    pub notifier: Option<Notifier>,
    /// Bumped whenever an approval is opened, decided, consumed or expired, here or (PostgreSQL)
    /// on another instance: `/ui/version`, which pages wait on.
    version: watch::Sender<u64>,
    /// Bumped whenever an approval is decided, consumed or expired: wakes hold-mode checks. Not on
    /// an opening, which changes no waiting check's answer: so an agent that opens approvals does
    /// not make every held check run again.
    settled: watch::Sender<u64>,
    /// Set on SIGTERM or SIGINT: `/healthz` answers 503, hold-mode checks answer at once.
    shutdown: Shutdown,
    /// The `/metrics` page: [`Metrics`], then the webhooks' counters.
    page: Registry,
}

/// The shared state of the service (cheap to clone).
#[derive(Clone)]
pub struct App(pub Arc<Inner>);

impl std::ops::Deref for App {
    type Target = Inner;
    fn deref(&self) -> &Inner {
        &self.0
    }
}

impl Inner {
    /// An approval changed, here or on another instance: pages follow every change; hold-mode
    /// checks wake only when it `settles` (decided, consumed or expired).
    fn changed(&self, settles: bool) {
        self.version.send_modify(|v| *v = v.wrapping_add(1));
        if settles {
            self.settled.send_modify(|v| *v = v.wrapping_add(1));
        }
    }
}

impl App {
    /// Opens the database (running its migrations) and builds the state. On PostgreSQL, also
    /// starts the thread that listens for changes made by other instances (it ends when the
    /// last clone of the `App` is dropped or on shutdown).
    pub fn open(db: impl Into<Location>, config: Config, clock: Arc<dyn Clock>) -> Result<App, Error> {
        let location = db.into();
        let store = Backend::open(&location, config.db_pool_size, config.db_timeout)?;
        // Starts from the wall clock in milliseconds so a restarted service never repeats a
        // version an open page has seen.
        let start = SystemTime::now().duration_since(UNIX_EPOCH).map_or(1, |d| d.as_millis() as u64);
        let (version, _) = watch::channel(start);
        let (settled, _) = watch::channel(0);
        let notifier = Notifier::start(&config.notify);
        let metrics = Metrics::default();
        let mut page = metrics.registry();
        if let Some(n) = &notifier {
            n.register(&mut page);
        }
        let shutdown = Shutdown::new();
        let app = App(Arc::new(Inner { store, clock, config, metrics, notifier, version, settled, shutdown, page }));
        if let Location::Postgres(url) = location {
            app.start_listener(url)?;
        }
        Ok(app)
    }

    /// `LISTEN` on its own connection and thread: every change on any instance bumps the version.
    fn start_listener(&self, url: String) -> Result<(), Error> {
        let weak = Arc::downgrade(&self.0);
        let stop_weak = weak.clone();
        std::thread::Builder::new()
            .name("pg-listen".into())
            .spawn(move || {
                store::postgres::listen(
                    &url,
                    |settles| {
                        if let Some(inner) = weak.upgrade() {
                            inner.changed(settles);
                        }
                    },
                    || stop_weak.upgrade().is_none_or(|inner| inner.shutdown.is_stopping()),
                )
            })
            .map(|_| ())
            .map_err(|e| Error::Internal(format!("listen thread: {e}")))
    }

    pub fn now(&self) -> i64 {
        self.clock.now()
    }

    /// Runs `f` on the store in a blocking thread, then records what changed. A database that does
    /// not answer within `--db-timeout` (a stalled server, or a lock held elsewhere) fails the
    /// request: `f` is not started once that time is past, PostgreSQL cancels a statement that
    /// runs longer (`statement_timeout`, `lock_timeout`), and what a call still in flight commits
    /// is recorded when it ends.
    pub async fn db<T: Send + 'static>(
        &self,
        f: impl FnOnce(&mut dyn Storage, i64) -> Result<(T, Changes), StoreError> + Send + 'static,
    ) -> Result<T, Error> {
        let store = self.store.clone();
        let now = self.now();
        let wait = self.config.db_timeout;
        let deadline = std::time::Instant::now() + wait;
        let mut task = tokio::task::spawn_blocking(move || {
            store.with(|s| {
                // A call that got the store only after its request gave up does nothing: it would
                // open or consume an approval for a request already refused.
                if std::time::Instant::now() > deadline {
                    return Err(StoreError::Internal("the request gave up before the store was free".into()));
                }
                f(s, now)
            })
        });
        let joined = match tokio::time::timeout(wait, &mut task).await {
            Ok(joined) => joined,
            Err(_) => {
                let app = self.clone();
                tokio::spawn(async move {
                    if let Ok(Ok((_, changes))) = task.await {
                        app.record(&changes);
                    }
                });
                return Err(Error::Internal(format!("the database did not answer within {wait:?}")));
            }
        };
        let (value, changes) = joined.map_err(|e| Error::Internal(format!("store task: {e}")))??;
        self.record(&changes);
        Ok(value)
    }

    fn record(&self, changes: &Changes) {
        let m = &self.metrics;
        for a in &changes.expired {
            // Request-derived values are Debug-formatted (quoted, escaped): no forged log lines.
            tracing::info!(approval = %a.id, tool = ?a.tool, grant = ?a.grant, state = "expired", "approval expired");
        }
        m.expired.inc_by(changes.expired.len() as u64);
        m.opened.inc_by(changes.opened);
        m.consumed.inc_by(changes.consumed);
        m.approved.inc_by(changes.approved);
        m.denied.inc_by(changes.denied);
        if changes.any() {
            self.changed(changes.settles());
        }
        if let Some(n) = &self.notifier {
            for a in &changes.events {
                n.send(a, &self.approval_url(&a.id));
            }
        }
    }

    /// The UI version (`GET /ui/version`).
    pub fn version(&self) -> u64 {
        *self.version.borrow()
    }

    pub fn subscribe(&self) -> watch::Receiver<u64> {
        self.version.subscribe()
    }

    /// Changes that may settle a waiting check: an approval decided, consumed or expired.
    pub fn subscribe_settled(&self) -> watch::Receiver<u64> {
        self.settled.subscribe()
    }

    pub fn shutdown_receiver(&self) -> watch::Receiver<bool> {
        self.shutdown.subscribe()
    }

    /// The service's stop: begun on SIGTERM or SIGINT (main.rs).
    pub fn shutdown(&self) -> &Shutdown {
        &self.shutdown
    }

    /// Reports not-serving and releases hold-mode checks (graceful shutdown).
    pub fn begin_shutdown(&self) {
        self.shutdown.begin();
    }

    /// Marks expired approvals (the background task; reads also do it).
    pub async fn expire_now(&self) -> Result<usize, Error> {
        self.db(|s, now| {
            let c = s.expire(now)?;
            Ok((c.expired.len(), c))
        })
        .await
    }

    /// Retention (`--retain-days`): deletes old consumed, denied and expired approvals.
    pub async fn purge_now(&self) -> Result<usize, Error> {
        let days = self.config.retain_days;
        let n = self.db(move |s, now| Ok((s.purge(now, days)?, Changes::default()))).await?;
        if n > 0 {
            tracing::info!(deleted = n, retain_days = days, "retention: old approvals deleted");
        }
        Ok(n)
    }

    /// `{public_url}/approvals/{id}`.
    pub fn approval_url(&self, id: &str) -> String {
        format!("{}/approvals/{}", self.config.public_url, id)
    }

    /// The `/metrics` page (pending approvals counted now).
    pub async fn metrics_text(&self) -> Result<String, Error> {
        let ((pending, oldest), now) = self.db(|s, now| Ok(((s.pending_count(now)?, now), Changes::default()))).await?;
        self.metrics.pending.set(pending);
        self.metrics.oldest_pending_age.set(oldest.map_or(0, |opened| now.saturating_sub(opened).max(0)));
        Ok(self.page.render())
    }
}
