//! `mcp-ratelimit`: the rate limit service for mcp-policy-filter (see ratelimit/README.md).

use std::net::SocketAddr;
use std::process::ExitCode;
use std::sync::atomic::Ordering;
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
    /// error, warn, info, debug or trace.
    #[arg(long, default_value = "info")]
    log_level: tracing::Level,
}

fn parse_duration(s: &str) -> Result<Duration, String> {
    let d = humantime::parse_duration(s).map_err(|e| e.to_string())?;
    if d.is_zero() {
        return Err("must be more than 0".into());
    }
    if d > REPLY_WAIT {
        return Err(format!("must be at most {} s", REPLY_WAIT.as_secs()));
    }
    Ok(d)
}

fn parse_margin(s: &str) -> Result<Duration, String> {
    let d = humantime::parse_duration(s).map_err(|e| e.to_string())?;
    if d > REPLY_WAIT {
        return Err(format!("must be at most {} s", REPLY_WAIT.as_secs()));
    }
    Ok(d)
}

/// How long a Redis command waits for its reply (and a connection attempt for its end). Longer
/// than any decision waits: a reply arriving after its decision gave up is still read, so that
/// what it committed is taken back (mcp_ratelimit::decide).
const REPLY_WAIT: Duration = Duration::from_secs(5);

async fn shutdown_signal() {
    let ctrl_c = async {
        if tokio::signal::ctrl_c().await.is_err() {
            std::future::pending::<()>().await;
        }
    };
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    tokio::select! {
        _ = ctrl_c => {}
        _ = term => {}
    }
}

#[derive(Clone)]
struct Http {
    store: Arc<Store>,
    metrics: Arc<Metrics>,
}

async fn metrics_page(State(h): State<Http>) -> impl IntoResponse {
    ([(header::CONTENT_TYPE, "text/plain; version=0.0.4")], h.metrics.render(h.store.name()))
}

async fn healthz(State(h): State<Http>) -> impl IntoResponse {
    if h.metrics.store_up.load(Ordering::Relaxed) == 1 {
        (StatusCode::OK, "ok\n")
    } else {
        (StatusCode::SERVICE_UNAVAILABLE, "store unavailable\n")
    }
}

/// Probe the store every second; gRPC health and /healthz follow it. Its messages name the store,
/// never its URL.
async fn health_loop(store: Arc<Store>, metrics: Arc<Metrics>, reporter: tonic_health::server::HealthReporter) {
    let mut up: Option<bool> = None;
    loop {
        let now = tokio::time::timeout(Duration::from_secs(1), store.healthy()).await.unwrap_or(false);
        metrics.store_up.store(u64::from(now), Ordering::Relaxed);
        if up != Some(now) {
            let status = if now { ServingStatus::Serving } else { ServingStatus::NotServing };
            reporter.set_service_status("", status).await;
            reporter.set_service_status("envoy.service.ratelimit.v3.RateLimitService", status).await;
            if up.is_some() || !now {
                if now {
                    tracing::info!("{} store reachable", store.name());
                } else {
                    tracing::warn!("{} store unreachable: answering UNAVAILABLE", store.name());
                }
            }
            up = Some(now);
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

async fn run(args: Args) -> Result<(), String> {
    let store = Arc::new(match &args.redis {
        Some(url) => Store::Redis(RedisStore::new(url, REPLY_WAIT)?),
        None => Store::Memory(MemoryStore::new()),
    });
    let metrics = Arc::new(Metrics::default());
    let grpc =
        tokio::net::TcpListener::bind(args.listen).await.map_err(|e| format!("--listen {}: {e}", args.listen))?;
    let http = tokio::net::TcpListener::bind(args.metrics_listen)
        .await
        .map_err(|e| format!("--metrics-listen {}: {e}", args.metrics_listen))?;
    let (reporter, health) = tonic_health::server::health_reporter();
    let health_task = tokio::spawn(health_loop(store.clone(), metrics.clone(), reporter));
    let rls = Rls {
        store: store.clone(),
        prefix: args.redis_prefix.clone(),
        metrics: metrics.clone(),
        redis_timeout: args.redis_timeout,
        deadline_margin: args.deadline_margin,
    };
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let signals = tokio::spawn(async move {
        shutdown_signal().await;
        tracing::info!("shutting down");
        let _ = stop_tx.send(true);
    });
    let stopped = |mut rx: tokio::sync::watch::Receiver<bool>| async move {
        let _ = rx.wait_for(|s| *s).await;
    };
    let router = axum::Router::new()
        .route("/metrics", get(metrics_page))
        .route("/healthz", get(healthz))
        .with_state(Http { store: store.clone(), metrics: metrics.clone() });
    tracing::info!(
        listen = %args.listen, metrics_listen = %args.metrics_listen, store = store.name(),
        redis = args.redis.as_deref().map(mcp_ratelimit::redact::url).unwrap_or_default(),
        redis_prefix = %args.redis_prefix, redis_timeout = ?args.redis_timeout, deadline_margin = ?args.deadline_margin,
        "mcp-ratelimit {} started", env!("CARGO_PKG_VERSION")
    );
    let http_server = axum::serve(http, router).with_graceful_shutdown(stopped(stop_rx.clone()));
    let grpc_server = tonic::transport::Server::builder()
        .add_service(health)
        .add_service(RateLimitServiceServer::new(rls))
        .serve_with_incoming_shutdown(tokio_stream::wrappers::TcpListenerStream::new(grpc), stopped(stop_rx));
    let result = tokio::try_join!(async { grpc_server.await.map_err(|e| format!("gRPC server: {e}")) }, async {
        http_server.await.map_err(|e| format!("metrics server: {e}"))
    });
    signals.abort();
    health_task.abort();
    result?;
    tracing::info!("stopped");
    Ok(())
}

fn main() -> ExitCode {
    let args = Args::parse();
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
    tracing_subscriber::fmt()
        .with_max_level(args.log_level)
        .with_target(false)
        .with_ansi(ansi)
        .with_writer(std::io::stderr)
        .init();
    let rt = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("mcp-ratelimit: tokio runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match rt.block_on(run(args)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("mcp-ratelimit: {e}");
            ExitCode::from(2)
        }
    }
}
