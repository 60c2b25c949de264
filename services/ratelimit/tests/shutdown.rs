//! SIGTERM: the real binary reports NOT_SERVING to a gRPC health watcher at once (so Envoy's
//! health checks drain it), and exits by `--shutdown-timeout` although that watch never ends.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, clippy::indexing_slicing)]

mod common;

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::free_port;
use tonic::Streaming;
use tonic_health::pb::health_check_response::ServingStatus;
use tonic_health::pb::health_client::HealthClient;
use tonic_health::pb::{HealthCheckRequest, HealthCheckResponse};

const BIN: &str = env!("CARGO_BIN_EXE_mcp-ratelimit");

async fn next(watch: &mut Streaming<HealthCheckResponse>) -> ServingStatus {
    ServingStatus::try_from(watch.message().await.unwrap().unwrap().status).unwrap()
}

#[tokio::test]
async fn sigterm_reports_not_serving_then_stops_by_the_deadline() {
    let (grpc, http) = (free_port(), free_port());
    let mut child = Command::new(BIN)
        .args(["--listen", &format!("127.0.0.1:{grpc}"), "--metrics-listen", &format!("127.0.0.1:{http}")])
        .args(["--shutdown-timeout", "2s"])
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    let channel = loop {
        match tonic::transport::Endpoint::from_shared(format!("http://127.0.0.1:{grpc}")).unwrap().connect().await {
            Ok(c) => break c,
            Err(_) if Instant::now() < deadline => tokio::time::sleep(Duration::from_millis(50)).await,
            Err(e) => panic!("mcp-ratelimit did not start: {e}"),
        }
    };
    let mut health = HealthClient::new(channel);
    let mut watch = health.watch(HealthCheckRequest { service: String::new() }).await.unwrap().into_inner();
    let mut status = next(&mut watch).await;
    while status != ServingStatus::Serving {
        status = tokio::time::timeout(Duration::from_secs(5), next(&mut watch)).await.expect("never serving");
    }

    let stop = Instant::now();
    assert!(Command::new("kill").args(["-TERM", &child.id().to_string()]).status().unwrap().success());
    let status = tokio::time::timeout(Duration::from_secs(2), next(&mut watch)).await.expect("no status after SIGTERM");
    assert_eq!(status, ServingStatus::NotServing);

    // The open watch keeps a call in flight: the stop waits for it, up to the deadline only.
    let exit = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        assert!(stop.elapsed() < Duration::from_secs(6), "still running past --shutdown-timeout");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert!(exit.success(), "{exit}");
}
