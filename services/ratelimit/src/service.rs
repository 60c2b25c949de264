//! The RLS v3 gRPC service (`envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit`).
//!
//! Answers: `overall_code` OK or OVER_LIMIT, one status per descriptor (its code, the limit it was
//! checked against, `limit_remaining`, `duration_until_reset`). Errors: `INVALID_ARGUMENT` for a
//! request this service cannot count (no limit override, unknown unit, …), which the filter refuses
//! whatever its failure mode; `UNAVAILABLE` when the store cannot decide (Redis down, or slower than
//! `--redis-timeout`) and `DEADLINE_EXCEEDED` when no decision fits in the caller's `grpc-timeout`
//! ([`crate::decide`]): the filter then applies its failure mode.

use std::sync::Arc;
use std::time::{Duration, Instant};

use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::{
    rate_limit::Unit, Code, DescriptorStatus, RateLimit,
};
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_service_server::RateLimitService;
use envoy_types::pb::envoy::service::ratelimit::v3::{RateLimitRequest, RateLimitResponse};
use envoy_types::pb::google::protobuf::Duration as PbDuration;
use tonic::{Request, Response, Status};

use crate::counters::{self, Counter};
use crate::decide::{self, Decided};
use crate::metrics::Metrics;
use crate::store::{Applied, Store};

pub struct Rls {
    pub store: Arc<Store>,
    pub prefix: String,
    pub metrics: Arc<Metrics>,
    /// Longest wait for the store per decision (`--redis-timeout`).
    pub redis_timeout: Duration,
    /// Part of the caller's `grpc-timeout` left for the answer's way back (`--deadline-margin`).
    pub deadline_margin: Duration,
}

fn unit(window_ms: u64) -> Unit {
    match window_ms {
        1_000 => Unit::Second,
        60_000 => Unit::Minute,
        3_600_000 => Unit::Hour,
        86_400_000 => Unit::Day,
        _ => Unit::Unknown,
    }
}

/// The answer for a decision the store made.
pub fn response(counters: &[Counter], applied: &Applied) -> RateLimitResponse {
    let statuses = counters
        .iter()
        .enumerate()
        .map(|(i, c)| {
            let reset = applied.until_reset_ms(i, c);
            DescriptorStatus {
                code: if applied.over(i, c) { Code::OverLimit } else { Code::Ok } as i32,
                current_limit: Some(RateLimit {
                    name: String::new(),
                    requests_per_unit: u32::try_from(c.limit).unwrap_or(u32::MAX),
                    unit: unit(c.window_ms) as i32,
                }),
                limit_remaining: u32::try_from(applied.remaining(i, c)).unwrap_or(u32::MAX),
                duration_until_reset: Some(PbDuration {
                    seconds: i64::try_from(reset / 1000).unwrap_or(i64::MAX),
                    nanos: i32::try_from((reset % 1000) * 1_000_000).unwrap_or(0),
                }),
                quota: None,
            }
        })
        .collect();
    RateLimitResponse {
        overall_code: if applied.admitted { Code::Ok } else { Code::OverLimit } as i32,
        statuses,
        ..Default::default()
    }
}

#[tonic::async_trait]
impl RateLimitService for Rls {
    async fn should_rate_limit(
        &self,
        request: Request<RateLimitRequest>,
    ) -> Result<Response<RateLimitResponse>, Status> {
        let started = Instant::now();
        let sent = request.metadata().get("grpc-timeout").and_then(|v| v.to_str().ok()).unwrap_or_default().to_owned();
        let caller = decide::parse_grpc_timeout(&sent);
        if caller.is_some() {
            self.metrics.grpc_timeout_sent.inc();
        } else {
            self.metrics.grpc_timeout_absent.inc();
        }
        let req = request.into_inner();
        let counters = match counters::counters(&self.prefix, &req) {
            Ok(c) => c,
            Err(why) => {
                self.metrics.invalid.inc();
                tracing::warn!(domain = %req.domain.escape_debug(), "invalid request: {why}");
                return Err(Status::invalid_argument(why));
            }
        };
        let Some(budget) = decide::budget(self.redis_timeout, caller, self.deadline_margin) else {
            self.metrics.deadline_exceeded.inc();
            return Err(Status::deadline_exceeded("the caller's grpc-timeout leaves no time to decide"));
        };
        tracing::debug!(grpc_timeout = %sent.escape_debug(), wait_ms = budget.wait.as_millis(), "deciding");
        let counters: Arc<[Counter]> = counters.into();
        let result = decide::decide(&self.store, &self.metrics, counters.clone(), budget.wait).await;
        self.metrics.observe(started.elapsed());
        match result {
            Decided::Applied(applied) => {
                if applied.admitted {
                    self.metrics.ok.inc();
                } else {
                    self.metrics.over_limit.inc();
                }
                Ok(Response::new(response(&counters, &applied)))
            }
            Decided::Failed(e) => {
                self.metrics.unavailable.inc();
                tracing::warn!("store unavailable: {}", e.0);
                Err(Status::unavailable(format!("{} store unavailable: {}", self.store.name(), e.0)))
            }
            Decided::TimedOut if budget.by_caller => {
                self.metrics.deadline_exceeded.inc();
                let ms = budget.wait.as_millis();
                tracing::warn!("no decision within the caller's grpc-timeout ({ms} ms left for the store)");
                Err(Status::deadline_exceeded(format!("no decision within the caller's grpc-timeout ({ms} ms)")))
            }
            Decided::TimedOut => {
                self.metrics.unavailable.inc();
                let ms = budget.wait.as_millis();
                tracing::warn!("store unavailable: no answer within --redis-timeout ({ms} ms)");
                Err(Status::unavailable(format!("{} store did not answer within {ms} ms", self.store.name())))
            }
        }
    }
}
