//! Storage of approvals and approver sessions: one [`Storage`] trait, two implementations.
//!
//! - [`sqlite::SqliteStore`]: one SQLite file (`--db PATH`), the embedded default for one
//!   instance; every state change in one `BEGIN IMMEDIATE` transaction.
//! - [`postgres::PgStore`]: PostgreSQL (`--db postgres://...`), for several instances on one
//!   database; checks of one key serialized by a transaction-scoped advisory lock, single use by a
//!   conditional `UPDATE`, one pending per key by a partial unique index, and every change
//!   announced with `NOTIFY` so hold-mode waiters on other instances wake up ([`listen`]).
//!
//! All functions take `now` (Unix seconds) from the caller's [`crate::Clock`], so tests control
//! time. Expiry is applied lazily at the start of every transaction, so correctness never depends
//! on the background task that also calls it. Storage calls are blocking: [`crate::App::db`] runs
//! them on tokio's blocking pool.

mod columns;
mod location;
pub mod postgres;
pub mod sqlite;

pub use location::Location;

use std::sync::{Arc, Mutex};

/// The schema version this build writes (SQLite `PRAGMA user_version`; PostgreSQL
/// `mcp_approvals_migrations`). 3 added the approver sessions, 4 the continuation legs, 5 the
/// upstream an approval is bound to, 6 the caller (policy, subject, client and actor chain).
pub const SCHEMA_VERSION: i64 = 6;

/// The MCP server a call goes to, as the filter's Envoy routes it (the filter's own type): the
/// cluster, `:authority` and `:path`, bound by the key and shown to the approver.
pub use mcp_policy_core::approval::Upstream;

/// Who called and under which policy, as the filter read it from the verified token (the
/// filter's own type): the attached policy's name, `sub`, `client_id` and the RFC 8693 actor chain
/// (each actor's `sub`, the current actor first). Bound by the key, shown to the approver.
pub use mcp_policy_core::identity::payload::Provenance as Caller;

/// A [`Caller`] from its four columns; `act` is the chain as JSON text, `NULL` for an approval
/// without a caller (a plain policy without identity, or a row written before schema 6).
pub(crate) fn caller_of(
    policy: Option<String>,
    subject: Option<String>,
    client_id: Option<String>,
    act: Option<String>,
) -> Option<Caller> {
    let act = serde_json::from_str::<Vec<String>>(&act?).unwrap_or_default();
    Some(Caller { policy, subject, client_id, act })
}

/// The `act` column of a caller: its chain as JSON text (`NULL` without a caller).
pub(crate) fn act_column(caller: Option<&Caller>) -> Option<String> {
    caller.map(|c| serde_json::Value::from(c.act.clone()).to_string())
}
/// The longest prefix of `bytes` that is UTF-8 (a prefix cut may end inside a character).
pub(crate) fn utf8_prefix(bytes: Vec<u8>) -> String {
    match String::from_utf8(bytes) {
        Ok(s) => s,
        Err(e) => {
            let valid = e.utf8_error().valid_up_to();
            let mut bytes = e.into_bytes();
            bytes.truncate(valid);
            String::from_utf8(bytes).unwrap_or_default()
        }
    }
}

/// The lifecycle of an approval (API.md, "States").
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum State {
    Pending,
    Approved,
    Denied,
    Consumed,
    Expired,
}

impl State {
    pub const ALL: [State; 5] = [State::Pending, State::Approved, State::Denied, State::Consumed, State::Expired];

    pub fn as_str(self) -> &'static str {
        match self {
            State::Pending => "pending",
            State::Approved => "approved",
            State::Denied => "denied",
            State::Consumed => "consumed",
            State::Expired => "expired",
        }
    }

    pub fn parse(s: &str) -> Option<State> {
        State::ALL.into_iter().find(|st| st.as_str() == s)
    }
}

/// One row of the approvals table.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Approval {
    pub id: String,
    pub key: String,
    pub state: State,
    pub grant: String,
    pub tool: String,
    /// The call's arguments as JSON text.
    pub arguments: String,
    /// The request id of the check that opened it.
    pub request_id: String,
    pub reason: String,
    pub created_at: i64,
    pub expires_in: i64,
    pub expires_at: i64,
    pub decided_at: Option<i64>,
    pub approver: Option<String>,
    pub note: String,
    pub consumed_at: Option<i64>,
    pub consumed_request_id: Option<String>,
    /// Hex SHA-256 of the agent's credential ("" for rows written before schema 2).
    pub grant_id: String,
    /// MCP 2026-07-28 continuation leg: `params.inputResponses` as JSON text as the filter sent it
    /// ("" when the call carried none; schema 4).
    pub input_responses: String,
    /// The leg's `params.requestState` (`None` when the call carried none; schema 4).
    pub request_state: Option<String>,
    /// The MCP server the call goes to (schema 5; empty strings in rows written before, whose keys
    /// no check of a current filter can match).
    pub upstream: Upstream,
    /// Who called, under which policy (schema 6; `None` without identity and in rows before).
    pub caller: Option<Caller>,
}

impl Approval {
    /// Whether the row names its upstream (written at schema 5 or later).
    pub fn has_upstream(&self) -> bool {
        !self.upstream.cluster.is_empty()
    }

    /// Whether the call is a continuation leg of a multi-round-trip request.
    pub fn is_continuation(&self) -> bool {
        !self.input_responses.is_empty() || self.request_state.is_some()
    }
}

/// An approval as a list page shows it: at most a prefix of its arguments, and their size.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Listed {
    /// The row; `arguments` holds only the first bytes asked for (cut at a character boundary).
    pub approval: Approval,
    /// Size of the arguments in all, in bytes.
    pub arguments_bytes: usize,
}

impl Listed {
    /// Whether `approval.arguments` holds all of them.
    pub fn complete(&self) -> bool {
        self.approval.arguments.len() == self.arguments_bytes
    }
}

/// How many pending approvals one grant has open.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GrantCount {
    pub grant_id: String,
    /// A grant label of its pending approvals (the greatest, should the filter have sent several).
    pub grant: String,
    pub pending: i64,
}

/// The approvers' queue (`GET /`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PendingPage {
    /// The oldest pending approvals, oldest first, arguments cut to a prefix.
    pub list: Vec<Listed>,
    /// Pending approvals in all.
    pub total: i64,
    /// The grants with the most pending approvals, most first (at most the number asked for).
    pub grants: Vec<GrantCount>,
    /// Grants with pending approvals in all.
    pub grants_total: i64,
}

/// A validated `/v1/check` request.
#[derive(Clone, Debug)]
pub struct CheckInput {
    /// Recomputed from `grant_id`, `upstream`, `tool` and `arguments` (and a leg's answers and
    /// state) by the service (never trusted as sent).
    pub key: String,
    /// Hex SHA-256 of the agent's credential.
    pub grant_id: String,
    pub grant: String,
    pub tool: String,
    /// The MCP server the call goes to.
    pub upstream: Upstream,
    /// JSON text of the arguments.
    pub arguments: String,
    pub request_id: String,
    pub expires_in: i64,
    pub reason: String,
    /// A continuation leg's `inputResponses` (JSON text as sent, "" when none) and `requestState`.
    pub input_responses: String,
    pub request_state: Option<String>,
    /// Who called and under which policy, from the verified token (bound by the key).
    pub caller: Option<Caller>,
}

/// The pending approval a check may open (API.md step 4), and the limits it opens within.
#[derive(Clone, Copy, Debug)]
pub struct NewPending<'a> {
    /// Its id, used only when it opens.
    pub id: &'a str,
    /// It opens only while the grant has fewer pending than this,
    pub max_per_grant: u32,
    /// and fewer than this are pending in all.
    pub max_in_all: u32,
}

/// The answer to a check (API.md steps 1-4).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CheckOutcome {
    /// Step 1: an approved approval was consumed by this check.
    Approved { approval: Approval },
    /// Step 2: a current denial.
    Denied { approval: Approval },
    /// Steps 3-4: pending (`opened` when this check opened it).
    Pending { approval: Approval, opened: bool },
    /// Step 4 refused: the grant already has `pending` open approvals (the per-grant cap).
    TooManyPending { pending: i64 },
    /// Step 4 refused: `pending` approvals are open in all (the global cap).
    TooManyPendingInAll { pending: i64 },
}

/// What changed in one transaction, for metrics, logs and the UI version.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Changes {
    pub expired: Vec<Approval>,
    /// Approvals opened or decided in this transaction, for the webhooks (arguments included:
    /// the notifier drops them unless `--notify-include-arguments`).
    pub events: Vec<Approval>,
    pub opened: u64,
    pub consumed: u64,
    pub approved: u64,
    pub denied: u64,
}

impl Changes {
    pub fn any(&self) -> bool {
        !self.expired.is_empty() || self.opened + self.consumed + self.approved + self.denied > 0
    }

    /// Did an approval leave `pending` or get consumed: what a hold-mode check waits for (an
    /// approval opened changes no other check's answer).
    pub fn settles(&self) -> bool {
        !self.expired.is_empty() || self.consumed + self.approved + self.denied > 0
    }
}

/// The result of an approver's decision.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Decided {
    Ok(Approval),
    NotFound,
    /// Not pending (already decided, consumed or expired): the row as it is.
    NotPending(Approval),
}

/// An approver's web session as stored: the id itself is never stored, only its SHA-256.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StoredSession {
    pub approver: String,
    /// The session's CSRF token (not a credential on its own: it is checked with the cookie).
    pub csrf: String,
    /// Unix seconds.
    pub expires_at: i64,
    /// A one-shot message shown on the next page.
    pub flash: Option<String>,
}

#[derive(Debug)]
pub enum StoreError {
    Sqlite(rusqlite::Error),
    Postgres(::postgres::Error),
    /// No PostgreSQL connection could be had from the pool in time.
    Pool(r2d2::Error),
    /// The database was written by a newer mcp-approvals.
    NewerSchema(i64),
    /// A row another transaction was changing vanished (PostgreSQL; retried).
    Conflict,
    /// The database answered something this build cannot read.
    Internal(String),
}

impl std::fmt::Display for StoreError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StoreError::Sqlite(e) => write!(f, "sqlite: {e}"),
            StoreError::Postgres(e) => match e.as_db_error() {
                Some(db) => write!(f, "postgres: {} ({})", db.message(), db.code().code()),
                // The client's Display leaves out the cause ("error connecting to server"): add
                // the chain ("...: Connection refused (os error 111)").
                None => {
                    write!(f, "postgres: {e}")?;
                    let mut cause = std::error::Error::source(e);
                    while let Some(c) = cause {
                        write!(f, ": {c}")?;
                        cause = c.source();
                    }
                    Ok(())
                }
            },
            StoreError::Pool(e) => write!(f, "postgres pool: {e}"),
            StoreError::Conflict => write!(f, "postgres: concurrent change, try again"),
            StoreError::Internal(e) => write!(f, "store: {e}"),
            StoreError::NewerSchema(v) => write!(
                f,
                "database schema version {v} is newer than this mcp-approvals supports ({SCHEMA_VERSION}); upgrade mcp-approvals"
            ),
        }
    }
}

impl std::error::Error for StoreError {}

impl From<rusqlite::Error> for StoreError {
    fn from(e: rusqlite::Error) -> Self {
        StoreError::Sqlite(e)
    }
}

impl From<::postgres::Error> for StoreError {
    fn from(e: ::postgres::Error) -> Self {
        StoreError::Postgres(e)
    }
}

impl From<r2d2::Error> for StoreError {
    fn from(e: r2d2::Error) -> Self {
        StoreError::Pool(e)
    }
}

pub type Result<T> = std::result::Result<T, StoreError>;

/// What the service stores, whatever the database. Every method is one transaction (blocking).
pub trait Storage {
    /// The schema version of the database.
    fn schema_version(&mut self) -> Result<i64>;

    /// Marks pending and approved approvals past their expiry as `expired` (the background
    /// expiry; every other transaction also does it first).
    fn expire(&mut self, now: i64) -> Result<Changes>;

    /// API.md `/v1/check` steps 1-4 in one transaction; a new pending approval opens only within
    /// `open`'s limits.
    fn check(&mut self, input: &CheckInput, now: i64, open: &NewPending<'_>) -> Result<(CheckOutcome, Changes)>;

    /// An approver approves (`approve`) or denies a pending approval. The decision stays current
    /// for `expires_in` seconds from now.
    fn decide(&mut self, id: &str, approve: bool, approver: &str, note: &str, now: i64) -> Result<(Decided, Changes)>;

    /// One approval (expiry applied first).
    fn get(&mut self, id: &str, now: i64) -> Result<(Option<Approval>, Changes)>;

    /// Approvals in `state` (all when `None`), newest first, at most `limit`.
    fn list(&mut self, state: Option<State>, limit: u32, now: i64) -> Result<(Vec<Approval>, Changes)>;

    /// The approvers' queue: the oldest `limit` pending approvals, oldest first (new ones join at
    /// the bottom), each with at most the first `prefix` bytes of its arguments; how many are
    /// pending in all; and the `top_grants` grants with the most pending approvals. Never reads
    /// more than `prefix` bytes of arguments per row.
    fn pending(&mut self, now: i64, limit: u32, prefix: usize, top_grants: u32) -> Result<(PendingPage, Changes)>;

    /// The most recent `limit` decided approvals (by an approver: `decided_at` set; approvals that
    /// expired undecided are not decisions), newest first. Their arguments are not read (`""`).
    fn recent(&mut self, limit: u32) -> Result<Vec<Approval>>;

    /// Retention: deletes consumed, denied and expired approvals whose last timestamp (the latest
    /// of opened, decided, used and expiry) is more than `retain_days` days before `now`
    /// (`retain_days` 0 keeps everything), and sessions past their expiry. Returns the number of
    /// approvals deleted.
    fn purge(&mut self, now: i64, retain_days: u32) -> Result<usize>;

    /// Count of unexpired pending approvals, and when the oldest of them was opened (the metrics
    /// gauges: pending approvals and their age).
    fn pending_count(&mut self, now: i64) -> Result<(i64, Option<i64>)>;

    /// A cheap liveness probe of the database.
    fn ping(&mut self) -> Result<()>;

    /// Stores a new session under the SHA-256 (hex) of its id.
    fn session_create(&mut self, id_hash: &str, session: &StoredSession, now: i64) -> Result<()>;

    /// The unexpired session stored under `id_hash`; with `take_flash` its flash message is
    /// cleared (returned once).
    fn session_get(&mut self, id_hash: &str, now: i64, take_flash: bool) -> Result<Option<StoredSession>>;

    /// Sets the flash message of a session.
    fn session_set_flash(&mut self, id_hash: &str, flash: &str) -> Result<()>;

    /// Deletes a session (logout): the cookie stops working on every instance at once.
    fn session_remove(&mut self, id_hash: &str) -> Result<()>;
}

/// An open database: one SQLite connection behind a mutex, or a pool of PostgreSQL connections.
#[derive(Clone)]
pub enum Backend {
    Sqlite(Arc<Mutex<sqlite::SqliteStore>>),
    Postgres(Arc<postgres::Pool>),
}

impl Backend {
    /// Opens the database and runs the migrations it lacks. `pool_size`: most PostgreSQL
    /// connections this instance opens (ignored for SQLite).
    /// On PostgreSQL, a statement or a lock wait longer than `timeout` is cancelled by the server
    /// (`--db-timeout`).
    pub fn open(location: &Location, pool_size: u32, timeout: std::time::Duration) -> Result<Backend> {
        match location {
            Location::Sqlite(path) => Ok(Backend::Sqlite(Arc::new(Mutex::new(sqlite::SqliteStore::open(path)?)))),
            Location::Postgres(url) => Ok(Backend::Postgres(Arc::new(postgres::open(url, pool_size, timeout)?))),
        }
    }

    /// Runs `f` on a store (blocking: call from a blocking thread).
    pub fn with<T>(&self, f: impl FnOnce(&mut dyn Storage) -> Result<T>) -> std::result::Result<T, crate::Error> {
        match self {
            Backend::Sqlite(store) => {
                let mut guard = store.lock().map_err(|_| crate::Error::Internal("store lock poisoned".into()))?;
                Ok(f(&mut *guard)?)
            }
            Backend::Postgres(pool) => {
                let conn = pool.get()?;
                let mut store = postgres::PgStore::new(conn);
                Ok(f(&mut store)?)
            }
        }
    }

    /// Whether changes made on other instances are announced (PostgreSQL `LISTEN`).
    pub fn is_shared(&self) -> bool {
        matches!(self, Backend::Postgres(_))
    }
}
