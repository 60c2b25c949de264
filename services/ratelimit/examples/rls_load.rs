//! Load generator for `make bench`: ShouldRateLimit decisions per second against running
//! mcp-ratelimit instances (or any RLS v3 server).
//!
//!     rls_load --target http://127.0.0.1:8081 [--target ...] [--concurrency 64] [--seconds 5]
//!              [--distinct N]
//!
//! Each request carries one `grant`-shaped descriptor (`mcp_counter`, `mcp_grant`) with a limit
//! override no request reaches, spread over `--distinct` grants (each a counter in the store).
//! Prints one JSON line: decisions, errors, seconds, per_second, p50_us, p99_us.

use std::time::{Duration, Instant};

use envoy_types::pb::envoy::extensions::common::ratelimit::v3::rate_limit_descriptor::{Entry, RateLimitOverride};
use envoy_types::pb::envoy::extensions::common::ratelimit::v3::RateLimitDescriptor;
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_service_client::RateLimitServiceClient;
use envoy_types::pb::envoy::service::ratelimit::v3::RateLimitRequest;
use envoy_types::pb::google::protobuf::UInt64Value;

struct Args {
    targets: Vec<String>,
    concurrency: usize,
    seconds: u64,
    distinct: u64,
}

fn args() -> Result<Args, String> {
    let mut a = Args { targets: Vec::new(), concurrency: 64, seconds: 5, distinct: 1000 };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let value = it.next().ok_or_else(|| format!("{flag} needs a value"))?;
        let num = |v: &str| v.parse::<u64>().map_err(|e| format!("{flag}: {e}"));
        match flag.as_str() {
            "--target" => a.targets.push(value),
            "--concurrency" => a.concurrency = usize::try_from(num(&value)?).map_err(|e| e.to_string())?,
            "--seconds" => a.seconds = num(&value)?,
            "--distinct" => a.distinct = num(&value)?.max(1),
            _ => return Err(format!("unknown flag {flag}")),
        }
    }
    if a.targets.is_empty() {
        return Err("give at least one --target http://HOST:PORT".into());
    }
    Ok(a)
}

fn request(n: u64) -> RateLimitRequest {
    RateLimitRequest {
        domain: "bench".into(),
        descriptors: vec![RateLimitDescriptor {
            entries: vec![
                Entry { key: "mcp_counter".into(), value: "bench".into() },
                Entry { key: "mcp_grant".into(), value: format!("{n:064x}") },
            ],
            limit: Some(RateLimitOverride { requests_per_unit: u32::MAX, unit: 3 }),
            hits_addend: Some(UInt64Value { value: 1 }),
            is_negative_hits: false,
        }],
        hits_addend: 0,
    }
}

#[tokio::main]
async fn main() -> Result<(), String> {
    let a = args()?;
    let mut clients = Vec::new();
    for t in &a.targets {
        // A few HTTP/2 connections per target, so one connection's ordering is not the limit.
        for _ in 0..4 {
            let ch = tonic::transport::Endpoint::from_shared(t.clone())
                .map_err(|e| e.to_string())?
                .connect()
                .await
                .map_err(|e| format!("{t}: {e}"))?;
            clients.push(RateLimitServiceClient::new(ch));
        }
    }
    let deadline = Instant::now() + Duration::from_secs(a.seconds);
    let started = Instant::now();
    let mut tasks = Vec::new();
    for w in 0..a.concurrency {
        let Some(client) = clients.get(w % clients.len()) else { continue };
        let mut client = client.clone();
        let distinct = a.distinct;
        let workers = a.concurrency as u64;
        tasks.push(tokio::spawn(async move {
            let (mut ok, mut err, mut lat) = (0u64, 0u64, Vec::with_capacity(100_000));
            let mut n = w as u64;
            while Instant::now() < deadline {
                let t0 = Instant::now();
                match client.should_rate_limit(request(n % distinct)).await {
                    Ok(_) => ok += 1,
                    Err(_) => err += 1,
                }
                lat.push(t0.elapsed().as_micros() as u64);
                n += workers;
            }
            (ok, err, lat)
        }));
    }
    let (mut ok, mut err, mut lat) = (0u64, 0u64, Vec::new());
    for t in tasks {
        let (o, e, l) = t.await.map_err(|e| e.to_string())?;
        ok += o;
        err += e;
        lat.extend(l);
    }
    let secs = started.elapsed().as_secs_f64();
    lat.sort_unstable();
    let pct =
        |p: f64| lat.get(((lat.len() as f64 * p) as usize).min(lat.len().saturating_sub(1))).copied().unwrap_or(0);
    println!(
        "{{\"decisions\":{ok},\"errors\":{err},\"seconds\":{secs:.3},\"per_second\":{:.0},\"p50_us\":{},\"p99_us\":{}}}",
        ok as f64 / secs,
        pct(0.5),
        pct(0.99)
    );
    Ok(())
}
