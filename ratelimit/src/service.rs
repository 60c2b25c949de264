//! The RLS v3 gRPC service (`envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit`).
//!
//! Answers: `overall_code` OK or OVER_LIMIT, one status per descriptor (its code, the limit it was
//! checked against, `limit_remaining`, `duration_until_reset`). Errors: `INVALID_ARGUMENT` for a
//! request this service cannot count (no limit override, unknown unit, …); `UNAVAILABLE` when the
//! store cannot decide (Redis down or slow): Envoy's caller then applies its failure mode.

use std::sync::Arc;
use std::time::Instant;

use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::{
    rate_limit::Unit, Code, DescriptorStatus, RateLimit,
};
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_service_server::RateLimitService;
use envoy_types::pb::envoy::service::ratelimit::v3::{RateLimitRequest, RateLimitResponse};
use envoy_types::pb::google::protobuf::Duration as PbDuration;
use tonic::{Request, Response, Status};

use crate::counters::{self, Counter};
use crate::metrics::Metrics;
use crate::store::{Applied, Store};

pub struct Rls {
    pub store: Arc<Store>,
    pub prefix: String,
    pub metrics: Arc<Metrics>,
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
            let reset = applied.until_reset_ms(c);
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
        let req = request.into_inner();
        let counters = match counters::counters(&self.prefix, &req) {
            Ok(c) => c,
            Err(why) => {
                self.metrics.invalid.inc();
                tracing::warn!(domain = %req.domain.escape_debug(), "invalid request: {why}");
                return Err(Status::invalid_argument(why));
            }
        };
        let result = self.store.apply(&counters).await;
        self.metrics.observe(started.elapsed());
        match result {
            Ok(applied) => {
                if applied.admitted {
                    self.metrics.ok.inc();
                } else {
                    self.metrics.over_limit.inc();
                }
                Ok(Response::new(response(&counters, &applied)))
            }
            Err(e) => {
                self.metrics.unavailable.inc();
                tracing::warn!("store unavailable: {}", e.0);
                Err(Status::unavailable(format!("{} store unavailable: {}", self.store.name(), e.0)))
            }
        }
    }
}
