//! `mcp-ratelimit`: the rate limit service for mcp-policy-filter (see services/ratelimit/README.md).

use std::net::SocketAddr;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::State;
use axum::http::{header, StatusCode};
use axum::response::IntoResponse;
use axum::routing::get;
use clap::Parser;
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_service_server::RateLimitServiceServer;
use mcp_ratelimit::metrics::Metrics;
use mcp_ratelimit::service::Rls;
use mcp_ratelimit::store::{MemoryStore, RedisStore, Store};
use mcp_service_kit::prom::Registry;
use mcp_service_kit::Shutdown;
use tonic_health::server::HealthReporter;
use tonic_health::ServingStatus;

/// Envoy rate limit service (gRPC envoy.service.ratelimit.v3.RateLimitService): one exact quota
/// per descriptor across every Envoy, with limits taken from each descriptor's `limit` override.
#[derive(Parser)]
#[command(name = "mcp-ratelimit", version)]
struct Args {
    /// gRPC address (RLS v3 and grpc.health.v1.Health).
    #[arg(long, default_value = "127.0.0.1:8081")]
    listen: SocketAddr,
    /// HTTP address of /metrics (Prometheus) and /healthz.
    #[arg(long, default_value = "127.0.0.1:9091")]
    metrics_listen: SocketAddr,
    /// Redis or Valkey URL, e.g. redis://127.0.0.1:6379/0. Without it, counters are kept in this
    /// process's memory: one instance only, lost on restart. Never shown with its password.
    #[arg(long, value_name = "URL")]
    redis: Option<String>,
    /// Decide even when Redis may evict keys (a maxmemory-policy other than noeviction with a
    /// maxmemory): an evicted counter restarts from zero, so a caller that fills Redis resets its
    /// limits. Without it, every decision is UNAVAILABLE while Redis may evict.
    #[arg(long)]
    allow_evicting_redis: bool,
    /// Prefix of every Redis key this service writes.
    #[arg(long, default_value = "mcprl:")]
    redis_prefix: String,
    /// Longest wait for Redis per decision before it fails with UNAVAILABLE, e.g. 50ms. Keep it
    /// below the filter's gateway.rate_limit_service.timeout (default 100ms) less --deadline-margin.
    #[arg(long, default_value = "50ms", value_parser = parse_duration)]
    redis_timeout: Duration,
    /// Part of the caller's grpc-timeout kept for the answer's way back: a decision waits at most
    /// grpc-timeout minus this (and at most --redis-timeout), then answers DEADLINE_EXCEEDED.
    #[arg(long, default_value = "20ms", value_parser = parse_margin)]
    deadline_margin: Duration,
    /// Longest stop after SIGTERM or SIGINT: health reports NOT_SERVING at once, calls in flight
    /// finish, and the process exits at this deadline at the latest, e.g. 10s.
    #[arg(long, default_value = mcp_service_kit::shutdown::DEFAULT_TIMEOUT, value_parser = mcp_service_kit::duration::positive)]
    shutdown_timeout: Duration,
    /// error, warn, info, debug or trace.
    #[arg(long, default_value = "info")]
    log_level: tracing::Level,
}

/// The filter's `gateway.rate_limit_service.timeout` by default.
const FILTER_DEFAULT_TIMEOUT: Duration = Duration::from_millis(100);

fn parse_duration(s: &str) -> Result<Duration, String> {
    at_most_reply_wait(mcp_service_kit::duration::positive(s)?)
}

fn parse_margin(s: &str) -> Result<Duration, String> {
    at_most_reply_wait(mcp_service_kit::duration::parse(s)?)
}

fn at_most_reply_wait(d: Duration) -> Result<Duration, String> {
    if d > REPLY_WAIT {
        return Err(format!("must be at most {} s", REPLY_WAIT.as_secs()));
    }
    Ok(d)
}

/// How long a Redis command waits for its reply (and a connection attempt for its end). Longer
/// than any decision waits: a reply arriving after its decision gave up is still read, so that
/// what it committed is taken back (mcp_ratelimit::decide).
const REPLY_WAIT: Duration = Duration::from_secs(5);

#[derive(Clone)]
struct Http {
    page: Arc<Registry>,
    metrics: Arc<Metrics>,
    shutdown: Shutdown,
}

async fn metrics_page(State(h): State<Http>) -> impl IntoResponse {
    ([(header::CONTENT_TYPE, "text/plain; version=0.0.4")], h.page.render())
}

async fn healthz(State(h): State<Http>) -> impl IntoResponse {
    if h.shutdown.is_stopping() {
        (StatusCode::SERVICE_UNAVAILABLE, "shutting down\n")
    } else if h.metrics.store_up.get() == 1 {
        (StatusCode::OK, "ok\n")
    } else {
        (StatusCode::SERVICE_UNAVAILABLE, "store unavailable\n")
    }
}

/// The service names gRPC health reports on: the server as a whole (""), and the RLS.
const HEALTH_SERVICES: [&str; 2] = ["", "envoy.service.ratelimit.v3.RateLimitService"];

async fn report(reporter: &HealthReporter, status: ServingStatus) {
    for service in HEALTH_SERVICES {
        reporter.set_service_status(service, status).await;
    }
}

/// Probe the store every second; gRPC health and /healthz follow it, until the stop begins: then
/// both say not-serving, whatever the store, so Envoy stops sending calls here. Its messages name
/// the store, never its URL.
async fn health_loop(store: Arc<Store>, metrics: Arc<Metrics>, reporter: HealthReporter, shutdown: Shutdown) {
    let probe = async {
        let mut up: Option<bool> = None;
        loop {
            probe_once(&store, &metrics, &reporter, &mut up).await;
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
    };
    tokio::select! {
        _ = probe => {}
        () = shutdown.stopping() => report(&reporter, ServingStatus::NotServing).await,
    }
}

async fn probe_once(store: &Store, metrics: &Metrics, reporter: &HealthReporter, up: &mut Option<bool>) {
    let now = tokio::time::timeout(Duration::from_secs(1), store.healthy()).await.unwrap_or(false);
    metrics.store_up.set(i64::from(now));
    if *up != Some(now) {
        let status = if now { ServingStatus::Serving } else { ServingStatus::NotServing };
        report(reporter, status).await;
        if up.is_some() || !now {
            if now {
                tracing::info!("{} store reachable", store.name());
            } else {
                tracing::warn!("{} store unreachable or not fit to count: answering UNAVAILABLE", store.name());
            }
        }
        *up = Some(now);
    }
}

async fn run(args: Args) -> Result<(), String> {
    let store = Arc::new(match &args.redis {
        Some(url) => {
            let store = RedisStore::new(url, REPLY_WAIT)?;
            Store::Redis(if args.allow_evicting_redis { store.allowing_eviction() } else { store })
        }
        None => Store::Memory(MemoryStore::new()),
    });
    let metrics = Arc::new(Metrics::default());
    let grpc =
        tokio::net::TcpListener::bind(args.listen).await.map_err(|e| format!("--listen {}: {e}", args.listen))?;
    let http = tokio::net::TcpListener::bind(args.metrics_listen)
        .await
        .map_err(|e| format!("--metrics-listen {}: {e}", args.metrics_listen))?;
    let shutdown = Shutdown::new();
    let (reporter, health) = tonic_health::server::health_reporter();
    let health_task = tokio::spawn(health_loop(store.clone(), metrics.clone(), reporter, shutdown.clone()));
    let rls = Rls {
        store: store.clone(),
        prefix: args.redis_prefix.clone(),
        metrics: metrics.clone(),
        redis_timeout: args.redis_timeout,
        deadline_margin: args.deadline_margin,
    };
    let router =
        axum::Router::new().route("/metrics", get(metrics_page)).route("/healthz", get(healthz)).with_state(Http {
            page: Arc::new(metrics.registry(store.name())),
            metrics: metrics.clone(),
            shutdown: shutdown.clone(),
        });
    tracing::info!(
        listen = %args.listen, metrics_listen = %args.metrics_listen, store = store.name(),
        redis = args.redis.as_deref().map(mcp_ratelimit::redact::url).unwrap_or_default(),
        redis_prefix = %args.redis_prefix, redis_timeout = ?args.redis_timeout, deadline_margin = ?args.deadline_margin,
        "mcp-ratelimit {} started", env!("CARGO_PKG_VERSION")
    );
    if args.deadline_margin >= FILTER_DEFAULT_TIMEOUT {
        tracing::warn!(
            deadline_margin = ?args.deadline_margin,
            "--deadline-margin is at least the filter's default gateway.rate_limit_service.timeout (100ms): \
             a call asked with that timeout gets DEADLINE_EXCEEDED at once"
        );
    }
    let http_server = axum::serve(http, router).with_graceful_shutdown(shutdown.stopping());
    let grpc_server = tonic::transport::Server::builder()
        .add_service(health)
        .add_service(RateLimitServiceServer::new(rls))
        // TCP_NODELAY: without it, Nagle's algorithm holds the second write of an answer until the
        // filter's delayed ACK (about 40 ms), which a request of 16 descriptors or more reaches.
        .serve_with_incoming_shutdown(
            tonic::transport::server::TcpIncoming::from(grpc).with_nodelay(Some(true)),
            shutdown.stopping(),
        );
    let servers = async {
        tokio::try_join!(async { grpc_server.await.map_err(|e| format!("gRPC server: {e}")) }, async {
            http_server.await.map_err(|e| format!("metrics server: {e}"))
        })
        .map(|_| ())
    };
    shutdown.run(args.shutdown_timeout, servers, async { health_task.abort() }).await
}

fn main() -> ExitCode {
    let args = Args::parse();
    mcp_service_kit::main("mcp-ratelimit", args.log_level, run(args))
}
