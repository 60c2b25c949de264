//! The Redis password never leaves the process: the real binary, started with a URL that carries
//! one and points at a closed port, logs its start, its failing health probe and a failing
//! decision, serves /healthz and /metrics and stops; nothing it says holds the password. An URL
//! that does not parse stops it at start, with the same care.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, clippy::indexing_slicing)]

mod common;

use std::io::{Read, Write};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::free_port;
use envoy_types::pb::envoy::extensions::common::ratelimit::v3::rate_limit_descriptor::{Entry, RateLimitOverride};
use envoy_types::pb::envoy::extensions::common::ratelimit::v3::RateLimitDescriptor;
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_service_client::RateLimitServiceClient;
use envoy_types::pb::envoy::service::ratelimit::v3::RateLimitRequest;

const BIN: &str = env!("CARGO_BIN_EXE_mcp-ratelimit");
const SECRET: &str = "s3cret";

/// `GET path` on 127.0.0.1:`port`: (status line, whole response), or `None` if nothing listens.
fn http_get(port: u16, path: &str) -> Option<(String, String)> {
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(3))).ok()?;
    write!(s, "GET {path} HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n").ok()?;
    let mut out = String::new();
    s.read_to_string(&mut out).ok()?;
    Some((out.lines().next().unwrap_or_default().to_owned(), out))
}

fn request() -> RateLimitRequest {
    RateLimitRequest {
        domain: "mcp".into(),
        descriptors: vec![RateLimitDescriptor {
            entries: vec![Entry { key: "mcp_counter".into(), value: "c".into() }],
            limit: Some(RateLimitOverride { requests_per_unit: 5, unit: 3 }),
            hits_addend: None,
            is_negative_hits: false,
        }],
        hits_addend: 0,
    }
}

#[tokio::test]
async fn the_password_appears_in_no_output() {
    let (grpc, http, closed) = (free_port(), free_port(), free_port());
    let url = format!("redis://user:{SECRET}@127.0.0.1:{closed}/");
    let child = Command::new(BIN)
        .args(["--listen", &format!("127.0.0.1:{grpc}"), "--metrics-listen", &format!("127.0.0.1:{http}")])
        .args(["--redis", &url, "--log-level", "debug"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // The health probe fails (connection refused): /healthz says so.
    let deadline = Instant::now() + Duration::from_secs(10);
    let healthz = loop {
        match http_get(http, "/healthz") {
            Some((status, body)) if status.contains("503") => break body,
            _ if Instant::now() > deadline => panic!("no 503 from /healthz"),
            _ => tokio::time::sleep(Duration::from_millis(100)).await,
        }
    };
    let (_, metrics) = http_get(http, "/metrics").unwrap();
    // A decision fails on the connect error, answered UNAVAILABLE.
    let mut client = RateLimitServiceClient::connect(format!("http://127.0.0.1:{grpc}")).await.unwrap();
    let status = client.should_rate_limit(request()).await.unwrap_err();
    assert_eq!(status.code(), tonic::Code::Unavailable, "{status:?}");
    // The connection closed, so that the graceful stop does not wait for it; SIGTERM, then
    // everything it wrote (read on a thread: this runtime must stay free).
    drop(client);
    Command::new("kill").args(["-TERM", &child.id().to_string()]).status().unwrap();
    let pid = child.id().to_string();
    let out =
        tokio::time::timeout(Duration::from_secs(20), tokio::task::spawn_blocking(move || child.wait_with_output()))
            .await
            .unwrap_or_else(|_| {
                let _ = Command::new("kill").args(["-KILL", &pid]).status();
                panic!("mcp-ratelimit did not stop on SIGTERM")
            })
            .unwrap()
            .unwrap();
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    let all = format!("{stdout}{stderr}{healthz}{metrics}{}", status.message());
    assert!(!all.contains(SECRET), "the password leaked:\n{all}");
    assert!(stderr.contains(&format!("redis://user:***@127.0.0.1:{closed}/")), "{stderr}");
    assert!(stderr.contains("store unavailable"), "the decision's connect error is logged: {stderr}");
    assert!(out.status.success(), "{:?}", out.status);
}

#[test]
fn an_url_that_does_not_parse_is_refused_without_its_password() {
    let out = Command::new(BIN)
        .args(["--listen", &format!("127.0.0.1:{}", free_port())])
        .args(["--metrics-listen", &format!("127.0.0.1:{}", free_port())])
        .args(["--redis", &format!("redis://user:{SECRET}@[nope/0")])
        .output()
        .unwrap();
    let all = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert_eq!(out.status.code(), Some(2), "{all}");
    assert!(!all.contains(SECRET), "{all}");
    assert!(all.contains("--redis redis://user:***@[nope/0"), "{all}");
}
