//! `mcp-approvals`: the approval service for mcp-policy-filter (see services/approvals/README.md).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use clap::Parser;
use mcp_approvals::auth::Approvers;
use mcp_approvals::notify::NotifyConfig;
use mcp_approvals::store::Location;
use mcp_approvals::{check_router, page_router, router, App, Config, SystemClock};

/// Human approval service for mcp-policy-filter: the Envoy filter asks POST /v1/check; approvers
/// approve or deny on the web page or the JSON API; an approved call goes through once.
#[derive(Parser, Debug)]
#[command(name = "mcp-approvals", version)]
struct Args {
    /// Address of the approvers' page, their JSON API, /metrics and /healthz (and of /v1/check
    /// without --check-listen).
    #[arg(long, default_value = "127.0.0.1:8095")]
    listen: SocketAddr,
    /// Serve /v1/check (and /healthz) only on this address, not on --listen. Bind it where only
    /// Envoy reaches it.
    #[arg(long, value_name = "ADDR")]
    check_listen: Option<SocketAddr>,
    /// Most pending approvals one grant (credential) may have open; a check that would open one
    /// more is answered 429.
    #[arg(long, default_value_t = mcp_approvals::DEFAULT_MAX_PENDING_PER_GRANT, value_parser = clap::value_parser!(u32).range(1..))]
    max_pending_per_grant: u32,
    /// Most pending approvals open in all, whatever the grant; a check that would open one more is
    /// answered 429.
    #[arg(long, default_value_t = mcp_approvals::DEFAULT_MAX_PENDING, value_parser = clap::value_parser!(u32).range(1..))]
    max_pending: u32,
    /// Most bytes of a check's arguments (their JSON text as sent); longer ones are answered 413.
    /// Raise it for tools that take larger arguments (a check body is at most 1 MiB in all).
    #[arg(long, default_value_t = mcp_approvals::DEFAULT_MAX_ARGUMENTS_BYTES, value_parser = parse_bytes)]
    max_arguments_bytes: usize,
    /// Days consumed, denied and expired approvals are kept after their last timestamp (0: forever).
    #[arg(long, default_value_t = mcp_approvals::DEFAULT_RETAIN_DAYS)]
    retain_days: u32,
    /// The database: a SQLite file (created if missing; one instance), or a PostgreSQL URL
    /// postgres://USER:PASSWORD@HOST:PORT/DB (any number of instances on one database).
    /// Migrations run at start. Also MCP_APPROVALS_DB (keeps a password out of `ps`).
    #[arg(long, env = "MCP_APPROVALS_DB", default_value = "approvals.sqlite", hide_env_values = true)]
    db: String,
    /// Most PostgreSQL connections this instance opens (hold-mode waits hold none).
    #[arg(long, default_value_t = mcp_approvals::DEFAULT_DB_POOL_SIZE, value_parser = clap::value_parser!(u32).range(1..=1000))]
    db_pool_size: u32,
    /// Longest wait for one database call (a stalled server, a lock held elsewhere): past it the
    /// request fails (the filter then refuses the call) and /healthz answers 503. Below the
    /// filter's approval timeout (5s by default), so the service answers first.
    #[arg(long, default_value = "2s", value_parser = mcp_service_kit::duration::positive)]
    db_timeout: std::time::Duration,
    /// POST a JSON event (Slack-compatible: a `text` field) to URL when an approval opens and when
    /// it is decided (repeatable). Never blocks a check.
    // Checked in `run`, not by clap, whose errors repeat the value: a webhook URL may hold a secret.
    #[arg(long = "notify-webhook", value_name = "URL")]
    notify_webhooks: Vec<String>,
    /// Put the call's arguments into webhook events (left out by default: they may hold secrets).
    #[arg(long)]
    notify_include_arguments: bool,
    /// Timeout of one webhook attempt (3 retries with backoff follow a failure).
    #[arg(long, default_value = "5s", value_parser = mcp_service_kit::duration::positive)]
    notify_timeout: Duration,
    /// Delay before the first webhook retry; doubled for each next one (3 retries).
    #[arg(long, default_value = "1s", value_parser = mcp_service_kit::duration::positive)]
    notify_backoff: Duration,
    /// Base URL approvers open (approval_url = PUBLIC_URL/approvals/ID). Default: http://LISTEN.
    #[arg(long)]
    public_url: Option<String>,
    /// An approver, NAME=TOKEN (repeatable). Also MCP_APPROVALS_APPROVERS="a=T1,b=T2".
    #[arg(long = "approver", value_name = "NAME=TOKEN")]
    approvers: Vec<String>,
    /// A file of NAME=TOKEN lines (# comments).
    #[arg(long, value_name = "FILE")]
    approvers_file: Option<PathBuf>,
    /// How often expired approvals are marked (e.g. 30s, 1m). Reads apply expiry too.
    #[arg(long, default_value = "5s", value_parser = mcp_service_kit::duration::positive)]
    expire_interval: Duration,
    /// Longest stop after SIGTERM or SIGINT: /healthz answers 503 at once, held checks are
    /// answered, requests in flight finish, and the process exits at this deadline at the latest.
    #[arg(long, default_value = mcp_service_kit::shutdown::DEFAULT_TIMEOUT, value_parser = mcp_service_kit::duration::positive)]
    shutdown_timeout: Duration,
    /// error, warn, info, debug or trace.
    #[arg(long, default_value = "info")]
    log_level: tracing::Level,
}

fn parse_bytes(s: &str) -> Result<usize, String> {
    match s.parse::<usize>() {
        Ok(0) => Err("must be more than 0".into()),
        Ok(n) => Ok(n),
        Err(e) => Err(e.to_string()),
    }
}

fn approvers(args: &Args) -> Result<Approvers, String> {
    let mut a = Approvers::default();
    for spec in &args.approvers {
        a.add_spec(spec).map_err(|e| format!("--approver: {e}"))?;
    }
    if let Some(path) = &args.approvers_file {
        let text = std::fs::read_to_string(path).map_err(|e| format!("--approvers-file {}: {e}", path.display()))?;
        a.add_file(&text).map_err(|e| format!("--approvers-file {}: {e}", path.display()))?;
    }
    if let Ok(list) = std::env::var("MCP_APPROVALS_APPROVERS") {
        a.add_list(&list).map_err(|e| format!("MCP_APPROVALS_APPROVERS: {e}"))?;
    }
    if a.is_empty() {
        return Err("no approver configured: give --approver NAME=TOKEN, --approvers-file FILE or \
                    MCP_APPROVALS_APPROVERS=NAME=TOKEN,... (nobody could approve anything)"
            .into());
    }
    Ok(a)
}

fn public_url(args: &Args) -> Result<String, String> {
    let url = args.public_url.clone().unwrap_or_else(|| format!("http://{}", args.listen));
    let url = url.trim_end_matches('/').to_string();
    if !(url.starts_with("http://") || url.starts_with("https://"))
        || url.contains(|c: char| c.is_whitespace() || c.is_control() || c == '"' || c == '<' || c == '>')
        || url.len() > 1024
    {
        return Err(format!("--public-url {url:?}: must be an http:// or https:// URL (at most 1024 bytes)"));
    }
    Ok(url)
}

async fn run(args: Args) -> Result<(), String> {
    let approvers = approvers(&args)?;
    let public_url = public_url(&args)?;
    for (n, url) in args.notify_webhooks.iter().enumerate() {
        mcp_approvals::notify::parse_webhook(url).map_err(|e| format!("--notify-webhook number {}: {e}", n + 1))?;
    }
    let names: Vec<&str> = approvers.names().collect();
    let config = Config {
        max_pending_per_grant: args.max_pending_per_grant,
        max_pending: args.max_pending,
        max_arguments_bytes: args.max_arguments_bytes,
        retain_days: args.retain_days,
        db_pool_size: args.db_pool_size,
        db_timeout: args.db_timeout,
        notify: NotifyConfig {
            webhooks: args.notify_webhooks.clone(),
            include_arguments: args.notify_include_arguments,
            timeout: args.notify_timeout,
            backoff: args.notify_backoff,
        },
        ..Config::new(public_url.clone(), approvers.clone())
    };
    if Location::is_keyword_string(&args.db) {
        return Err("--db: a libpq connection string (KEY=VALUE words) is not read here; give a URL, \
                    postgres://USER:PASSWORD@HOST:PORT/DB, or a SQLite file path"
            .to_string());
    }
    let location = Location::parse(&args.db);
    let db_shown = location.redacted();
    let app = App::open(location, config, Arc::new(SystemClock)).map_err(|e| format!("--db {db_shown}: {e}"))?;
    let listener =
        tokio::net::TcpListener::bind(args.listen).await.map_err(|e| format!("--listen {}: {e}", args.listen))?;
    let check_listener = match args.check_listen {
        Some(addr) => {
            Some(tokio::net::TcpListener::bind(addr).await.map_err(|e| format!("--check-listen {addr}: {e}"))?)
        }
        None => None,
    };
    tracing::info!(
        listen = %args.listen, check_listen = ?args.check_listen, db = %db_shown, webhooks = args.notify_webhooks.len(), public_url = %public_url,
        approvers = ?names, max_pending_per_grant = args.max_pending_per_grant,
        max_pending = args.max_pending, max_arguments_bytes = args.max_arguments_bytes, retain_days = args.retain_days,
        "mcp-approvals {} started", env!("CARGO_PKG_VERSION")
    );
    if check_listener.is_none() {
        tracing::warn!(
            listen = %args.listen,
            "/v1/check is served on --listen, next to the approvers' page: anyone who can reach this address can \
             open approval requests. Give --check-listen ADDR, bound where only Envoy reaches it"
        );
    }
    let expiry = tokio::spawn(mcp_approvals::expiry_task(app.clone(), args.expire_interval));
    let stopped = app.shutdown().stopping();
    let main_router = if check_listener.is_some() { page_router(app.clone()) } else { router(app.clone()) };
    // The peer address reaches the handlers (a failed login logs it, and nothing typed).
    let main_server = axum::serve(listener, main_router.into_make_service_with_connect_info::<SocketAddr>())
        .with_graceful_shutdown(stopped);
    let servers = async {
        match check_listener {
            Some(l) => {
                let check_server =
                    axum::serve(l, check_router(app.clone())).with_graceful_shutdown(app.shutdown().stopping());
                // Either server failing stops both.
                let r = tokio::try_join!(
                    async { main_server.await.map_err(|e| format!("server (--listen): {e}")) },
                    async { check_server.await.map_err(|e| format!("server (--check-listen): {e}")) },
                );
                r.map(|_| ())
            }
            None => main_server.await.map_err(|e| format!("server: {e}")),
        }
    };
    // On SIGTERM or SIGINT: /healthz answers 503 and held checks (pending) are answered, so the
    // servers can stop.
    app.shutdown()
        .run(args.shutdown_timeout, servers, async {
            let _ = expiry.await;
        })
        .await
}

fn main() -> ExitCode {
    let args = Args::parse();
    mcp_service_kit::main("mcp-approvals", args.log_level, run(args))
}
