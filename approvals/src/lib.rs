//! mcp-approvals: the human approval service for mcp-policy-filter.
//!
//! The Envoy filter asks `POST /v1/check` before letting a tool call that needs approval through;
//! approvers decide on a web page or through a JSON API. The contract is `approvals/API.md`.
//!
//! - [`store`]: SQLite or PostgreSQL behind one trait, one transaction per state change (single
//!   use, one pending per key, across instances on PostgreSQL);
//! - [`auth`]: approvers, tokens, random ids;
//! - [`sessions`]: the approvers' web sessions, stored in the database;
//! - [`notify`]: webhooks when an approval opens or is decided;
//! - [`api`]: `/v1/check` and the approvers' JSON API;
//! - [`web`]: the approvers' HTML pages;
//! - this module: the shared state, the clock, metrics and the router.

pub mod api;
pub mod auth;
pub mod check;
pub mod notify;
pub mod sessions;
pub mod store;
pub mod web;

use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use axum::extract::DefaultBodyLimit;
use axum::http::{header, HeaderValue};
use axum::routing::{get, post};
use axum::Router;
use tokio::sync::watch;

use crate::auth::Approvers;
use crate::notify::{Notifier, NotifyConfig};
use crate::store::{Backend, Changes, Location, Storage, StoreError};

/// Largest request body accepted (`/v1/check`, forms, API).
pub const MAX_BODY: usize = 1 << 20;

/// The time source (Unix seconds); tests inject a [`ManualClock`].
pub trait Clock: Send + Sync + 'static {
    fn now(&self) -> i64;
}

/// The system clock.
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> i64 {
        SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
    }
}

/// A clock that moves only when told (tests).
pub struct ManualClock(AtomicI64);

impl ManualClock {
    pub fn new(now: i64) -> Arc<ManualClock> {
        Arc::new(ManualClock(AtomicI64::new(now)))
    }

    pub fn advance(&self, secs: i64) {
        self.0.fetch_add(secs, Ordering::SeqCst);
    }

    pub fn set(&self, now: i64) {
        self.0.store(now, Ordering::SeqCst);
    }
}

impl Clock for ManualClock {
    fn now(&self) -> i64 {
        self.0.load(Ordering::SeqCst)
    }
}

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
            notify: NotifyConfig::default(),
        }
    }
}

/// Counters since the process started (`/metrics`).
#[derive(Default)]
pub struct Metrics {
    pub opened: AtomicU64,
    pub approved: AtomicU64,
    pub denied: AtomicU64,
    pub consumed: AtomicU64,
    pub expired: AtomicU64,
    pub checks_approved: AtomicU64,
    pub checks_denied: AtomicU64,
    pub checks_pending: AtomicU64,
    /// `/v1/check` answered 429 (the per-grant or the global cap on pending approvals).
    pub checks_refused: AtomicU64,
    pub bad_requests: AtomicU64,
}

/// Errors answered with 500 (and logged).
#[derive(Debug)]
pub enum Error {
    Store(StoreError),
    Internal(String),
}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Error::Store(e) => write!(f, "{e}"),
            Error::Internal(e) => write!(f, "{e}"),
        }
    }
}

impl From<StoreError> for Error {
    fn from(e: StoreError) -> Self {
        Error::Store(e)
    }
}

pub struct Inner {
    store: Backend,
    pub clock: Arc<dyn Clock>,
    pub config: Config,
    pub metrics: Metrics,
    /// The webhooks' queue (none configured: `None`).
    pub notifier: Option<Notifier>,
    /// Bumped whenever an approval is opened, decided, consumed or expired, here or (PostgreSQL)
    /// on another instance: wakes hold-mode checks and is `/ui/version`.
    version: watch::Sender<u64>,
    /// Set on shutdown: hold-mode checks answer at once.
    shutdown: watch::Sender<bool>,
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

impl App {
    /// Opens the database (running its migrations) and builds the state. On PostgreSQL, also
    /// starts the thread that listens for changes made by other instances (it ends when the
    /// last clone of the `App` is dropped or on shutdown).
    pub fn open(db: impl Into<Location>, config: Config, clock: Arc<dyn Clock>) -> Result<App, Error> {
        let location = db.into();
        let store = Backend::open(&location, config.db_pool_size)?;
        // Starts from the wall clock in milliseconds so a restarted service never repeats a
        // version an open page has seen.
        let start = SystemTime::now().duration_since(UNIX_EPOCH).map_or(1, |d| d.as_millis() as u64);
        let (version, _) = watch::channel(start);
        let (shutdown, _) = watch::channel(false);
        let notifier = Notifier::start(&config.notify);
        let app =
            App(Arc::new(Inner { store, clock, config, metrics: Metrics::default(), notifier, version, shutdown }));
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
                    || {
                        if let Some(inner) = weak.upgrade() {
                            inner.version.send_modify(|v| *v = v.wrapping_add(1));
                        }
                    },
                    || stop_weak.upgrade().is_none_or(|inner| *inner.shutdown.borrow()),
                )
            })
            .map(|_| ())
            .map_err(|e| Error::Internal(format!("listen thread: {e}")))
    }

    pub fn now(&self) -> i64 {
        self.clock.now()
    }

    /// Runs `f` on the store in a blocking thread, then records what changed.
    pub async fn db<T: Send + 'static>(
        &self,
        f: impl FnOnce(&mut dyn Storage, i64) -> Result<(T, Changes), StoreError> + Send + 'static,
    ) -> Result<T, Error> {
        let store = self.store.clone();
        let now = self.now();
        let (value, changes) = tokio::task::spawn_blocking(move || store.with(|s| f(s, now)))
            .await
            .map_err(|e| Error::Internal(format!("store task: {e}")))??;
        self.record(&changes);
        Ok(value)
    }

    fn record(&self, changes: &Changes) {
        let m = &self.metrics;
        for a in &changes.expired {
            // Request-derived values are Debug-formatted (quoted, escaped): no forged log lines.
            tracing::info!(approval = %a.id, tool = ?a.tool, grant = ?a.grant, state = "expired", "approval expired");
        }
        m.expired.fetch_add(changes.expired.len() as u64, Ordering::Relaxed);
        m.opened.fetch_add(changes.opened, Ordering::Relaxed);
        m.consumed.fetch_add(changes.consumed, Ordering::Relaxed);
        m.approved.fetch_add(changes.approved, Ordering::Relaxed);
        m.denied.fetch_add(changes.denied, Ordering::Relaxed);
        if changes.any() {
            self.version.send_modify(|v| *v = v.wrapping_add(1));
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

    pub fn shutdown_receiver(&self) -> watch::Receiver<bool> {
        self.shutdown.subscribe()
    }

    /// Releases hold-mode checks (graceful shutdown).
    pub fn begin_shutdown(&self) {
        self.shutdown.send_replace(true);
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

    /// Counts for `/metrics`.
    pub async fn metrics_text(&self) -> Result<String, Error> {
        let pending = self.db(|s, now| Ok((s.pending_count(now)?, Changes::default()))).await?;
        let m = &self.metrics;
        let mut out = String::new();
        let counters: [(&str, &str, &AtomicU64); 5] = [
            ("opened", "Approvals opened (new pending approvals).", &m.opened),
            ("approved", "Approvals approved by an approver.", &m.approved),
            ("denied", "Approvals denied by an approver.", &m.denied),
            ("consumed", "Approved approvals used by a call (single use).", &m.consumed),
            ("expired", "Pending or approved approvals that expired unused.", &m.expired),
        ];
        for (name, help, c) in counters {
            out.push_str(&format!(
                "# HELP mcp_approvals_{name}_total {help}\n# TYPE mcp_approvals_{name}_total counter\nmcp_approvals_{name}_total {}\n",
                c.load(Ordering::Relaxed)
            ));
        }
        out.push_str(&format!(
            "# HELP mcp_approvals_pending Pending approvals now.\n# TYPE mcp_approvals_pending gauge\nmcp_approvals_pending {pending}\n"
        ));
        out.push_str("# HELP mcp_approvals_checks_total Answers to /v1/check by status.\n# TYPE mcp_approvals_checks_total counter\n");
        for (status, c) in [
            ("approved", &m.checks_approved),
            ("denied", &m.checks_denied),
            ("pending", &m.checks_pending),
            ("too_many_pending", &m.checks_refused),
        ] {
            out.push_str(&format!("mcp_approvals_checks_total{{status=\"{status}\"}} {}\n", c.load(Ordering::Relaxed)));
        }
        out.push_str(&format!(
            "# HELP mcp_approvals_bad_requests_total Refused /v1/check requests (400, 413, 415).\n# TYPE mcp_approvals_bad_requests_total counter\nmcp_approvals_bad_requests_total {}\n",
            m.bad_requests.load(Ordering::Relaxed)
        ));
        if let Some(n) = &self.notifier {
            out.push_str(&n.metrics_text());
        }
        Ok(out)
    }
}

/// Security headers on every response.
async fn security_headers(mut res: axum::response::Response) -> axum::response::Response {
    let h = res.headers_mut();
    h.insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    h.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    // Not no-referrer: with it browsers send `Origin: null` on same-origin form posts, which the
    // Origin check refuses.
    h.insert(header::REFERRER_POLICY, HeaderValue::from_static("same-origin"));
    h.entry(header::CACHE_CONTROL).or_insert(HeaderValue::from_static("no-store"));
    res
}

/// All HTTP routes (API.md) on one listener: the pages, the approvers' API, `/metrics`,
/// `/healthz` and `/v1/check` (no `--check-listen`).
pub fn router(app: App) -> Router {
    finish(page_routes().route("/v1/check", post(api::check)), app)
}

/// The routes of `--listen` when `/v1/check` has a listener of its own: everything but `/v1/check`.
pub fn page_router(app: App) -> Router {
    finish(page_routes(), app)
}

/// The routes of `--check-listen`: `/v1/check` and `/healthz` (for Envoy's health checks).
pub fn check_router(app: App) -> Router {
    finish(Router::new().route("/v1/check", post(api::check)).route("/healthz", get(api::healthz)), app)
}

fn finish(routes: Router<App>, app: App) -> Router {
    routes
        .layer(axum::middleware::map_response(security_headers))
        .layer(DefaultBodyLimit::max(MAX_BODY))
        .with_state(app)
}

fn page_routes() -> Router<App> {
    Router::new()
        .route("/v1/approvals", get(api::list))
        .route("/v1/approvals/{id}", get(api::get_one))
        .route("/v1/approvals/{id}/approve", post(api::approve))
        .route("/v1/approvals/{id}/deny", post(api::deny))
        .route("/healthz", get(api::healthz))
        .route("/metrics", get(api::metrics))
        .route("/", get(web::index))
        .route("/login", get(web::login_form).post(web::login))
        .route("/logout", post(web::logout))
        .route("/approvals/{id}", get(web::one))
        .route("/approvals/{id}/decision", post(web::decision))
        .route("/ui/version", get(web::version))
        .route("/favicon.ico", get(|| async { axum::http::StatusCode::NO_CONTENT }))
}

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
