//! `POST /v1/check`: the filter asks whether a call is approved (the body is parsed in
//! [`crate::check`]); hold mode waits for a decision.

use std::time::Duration;

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{header, HeaderMap};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::json;

// 64 lower-case hex digits (a key or grant id) as bytes: the filter's decoder (the check body is
// read in crate::check; the tests here use it).
#[cfg(test)]
use mcp_policy_core::identity::grant::from_hex32 as hex32;

use crate::auth;
use crate::store::{CheckInput, CheckOutcome, NewPending};
use crate::{ApiError, App, Error};

pub use crate::check::{arguments_too_large, parse_check, parse_check_limited, CheckError, KEY_MISMATCH};

/// Whether a `content-type` header value is `application/json` (parameters such as `charset`
/// allowed). Browsers cannot send it cross-origin without a CORS preflight, which this service
/// never approves.
pub fn is_json_content_type(headers: &HeaderMap) -> bool {
    let mut values = headers.get_all(header::CONTENT_TYPE).iter();
    let (Some(v), None) = (values.next(), values.next()) else {
        return false;
    };
    let Ok(v) = v.to_str() else {
        return false;
    };
    let essence = v.split(';').next().unwrap_or("").trim();
    essence.eq_ignore_ascii_case("application/json")
}

/// Runs the check (API.md steps 1-4) once.
pub async fn check_once(app: &App, input: &CheckInput) -> Result<CheckOutcome, Error> {
    let new_id = auth::new_approval_id().map_err(Error::Internal)?;
    let input = input.clone();
    let (max_per_grant, max_in_all) = (app.config.max_pending_per_grant, app.config.max_pending);
    app.db(move |s, now| s.check(&input, now, &NewPending { id: &new_id, max_per_grant, max_in_all })).await
}

/// The check with hold mode: while pending, wait for an approval to be decided, consumed or
/// expired (or the end of the wait), then check again.
pub async fn check_hold(app: &App, input: &CheckInput, wait: Duration) -> Result<CheckOutcome, Error> {
    // Subscribe before the first check so no decision between the two is missed.
    let mut changes = app.subscribe_settled();
    let mut shutdown = app.shutdown_receiver();
    let deadline = tokio::time::Instant::now() + wait;
    loop {
        let out = check_once(app, input).await?;
        log_outcome(&out);
        if !matches!(out, CheckOutcome::Pending { .. })
            || wait.is_zero()
            || tokio::time::Instant::now() >= deadline
            || *shutdown.borrow()
        {
            return Ok(out);
        }
        tokio::select! {
            r = changes.changed() => if r.is_err() { return Ok(out) },
            _ = tokio::time::sleep_until(deadline) => {}
            _ = shutdown.changed() => {}
        }
    }
}

fn log_outcome(out: &CheckOutcome) {
    match out {
        // Request-derived values are Debug-formatted (quoted, escaped): no forged log lines.
        CheckOutcome::Pending { approval: a, opened: true } => tracing::info!(
            approval = %a.id, tool = ?a.tool, grant = ?a.grant, cluster = ?a.upstream.cluster,
            request_id = ?a.request_id, state = "pending", "approval opened"
        ),
        CheckOutcome::Approved { approval: a } => tracing::info!(
            approval = %a.id, tool = ?a.tool, grant = ?a.grant, request_id = ?a.consumed_request_id.as_deref().unwrap_or(""),
            state = "consumed", "approval consumed"
        ),
        _ => {}
    }
}

/// `POST /v1/check`.
pub async fn check(State(app): State<App>, headers: HeaderMap, body: Bytes) -> Result<Response, ApiError> {
    if !is_json_content_type(&headers) {
        app.metrics.bad_requests.inc();
        tracing::warn!("bad /v1/check request: content-type is not application/json");
        return Err(ApiError::UnsupportedMediaType("content-type must be application/json".into()));
    }
    let (input, wait) = parse_check_limited(&body, app.config.max_arguments_bytes).map_err(|e| {
        app.metrics.bad_requests.inc();
        match e {
            CheckError::Bad(msg) => {
                tracing::warn!(error = ?msg, "bad /v1/check request");
                ApiError::BadRequest(msg)
            }
            CheckError::ArgumentsTooLarge(max) => {
                tracing::warn!(max_arguments_bytes = max, "/v1/check refused: arguments too large");
                ApiError::PayloadTooLarge(arguments_too_large(max))
            }
        }
    })?;
    let wait = Duration::from_secs(wait.unsigned_abs());
    let out = check_hold(&app, &input, wait).await?;
    let now = app.now();
    let m = &app.metrics;
    let body = match out {
        CheckOutcome::Approved { approval: a } => {
            m.checks_approved.inc();
            json!({"status": "approved", "approval_id": a.id, "approver": a.approver.unwrap_or_default(), "note": a.note})
        }
        CheckOutcome::Denied { approval: a } => {
            m.checks_denied.inc();
            json!({"status": "denied", "approval_id": a.id, "approver": a.approver.unwrap_or_default(), "note": a.note})
        }
        CheckOutcome::Pending { approval: a, .. } => {
            m.checks_pending.inc();
            json!({
                "status": "pending",
                "approval_id": a.id,
                "approval_url": app.approval_url(&a.id),
                "expires_at": a.expires_at,
                "expires_in_seconds": (a.expires_at - now).max(0),
            })
        }
        CheckOutcome::TooManyPending { pending } => return Err(too_many_pending(&app, &input, pending, Cap::PerGrant)),
        CheckOutcome::TooManyPendingInAll { pending } => {
            return Err(too_many_pending(&app, &input, pending, Cap::InAll))
        }
    };
    Ok(Json(body).into_response())
}

/// The cap on pending approvals a check reached.
enum Cap {
    /// `--max-pending-per-grant`: pending approvals of the check's grant.
    PerGrant,
    /// `--max-pending`: pending approvals in all.
    InAll,
}

/// The 429 answer when no approval can be opened because `pending` approvals reached `cap`: counts
/// the refused check, logs at warn with the grant, tool, pending count and cap (`max`), and
/// answers `{"error": "... {pending} pending approvals (at most {max} ...): decide them or let
/// them expire"}` (API.md, `/v1/check`).
fn too_many_pending(app: &App, input: &CheckInput, pending: i64, cap: Cap) -> ApiError {
    let (max, log, who, scope) = match cap {
        Cap::PerGrant => (
            app.config.max_pending_per_grant,
            "approval refused: too many pending approvals for this grant",
            "this grant already has",
            "per grant",
        ),
        Cap::InAll => (
            app.config.max_pending,
            "approval refused: too many pending approvals in all (--max-pending)",
            "there are already",
            "in all",
        ),
    };
    app.metrics.checks_refused.inc();
    tracing::warn!(grant = ?input.grant, tool = ?input.tool, pending, max, "{log}");
    ApiError::TooManyRequests(format!(
        "{who} {pending} pending approvals (at most {max} {scope}): decide them or let them expire"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::check::UPSTREAM_SHAPE;
    use serde_json::Value;

    const GRANT_ID: &str = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
    /// The upstream of every check here unless told otherwise, as the filter sends it.
    const UP: &str = r#"{"cluster":"mcp_a","authority":"gw:10000","path":"/a/mcp"}"#;

    fn up(v: &Value) -> crate::store::Upstream {
        let s = |k: &str| v[k].as_str().unwrap().to_owned();
        crate::store::Upstream { cluster: s("cluster"), authority: s("authority"), path: s("path") }
    }

    /// The filter's key of a call to [`UP`] (crates/core/src/approval.rs).
    fn key_of(grant_id: &str, tool: &str, args: &str) -> String {
        key_to(grant_id, &serde_json::from_str(UP).unwrap(), tool, args)
    }

    /// The filter's key of a call to `upstream`.
    fn key_to(grant_id: &str, upstream: &Value, tool: &str, args: &str) -> String {
        let g = hex32(grant_id).unwrap();
        let args = mcp_policy_core::wire::json::parse(args.as_bytes()).unwrap();
        mcp_policy_core::approval::key(&g, &up(upstream), tool, Some(&args))
    }

    /// A body with the right key for its grant_id, upstream ([`UP`] unless it has one), tool and
    /// arguments.
    fn body(mut v: Value) -> Vec<u8> {
        if v.get("upstream").is_none() {
            v["upstream"] = serde_json::from_str(UP).unwrap();
        }
        let args = v["arguments"].to_string();
        let k = key_to(v["grant_id"].as_str().unwrap(), &v["upstream"], v["tool"].as_str().unwrap(), &args);
        if v.get("key").is_none() {
            v["key"] = json!(k);
        }
        serde_json::to_vec(&v).unwrap()
    }

    #[test]
    fn parses_a_good_check() {
        let (c, wait) = parse_check(&body(json!({
            "grant_id": GRANT_ID, "grant": "g", "tool": "t", "arguments": {"b": 1, "a": [true]}, "request_id": "",
            "expires_in_seconds": 600, "wait_seconds": 30, "reason": "why"
        })))
        .unwrap();
        assert_eq!(wait, 30);
        assert_eq!(c.arguments, r#"{"a":[true],"b":1}"#);
        assert_eq!(c.reason, "why");
        assert_eq!(c.expires_in, 600);
        assert_eq!(c.grant_id, GRANT_ID);
        assert_eq!(c.upstream, up(&serde_json::from_str(UP).unwrap()));
        assert_eq!(c.key, key_of(GRANT_ID, "t", r#"{"b":1,"a":[true]}"#));
    }

    #[test]
    fn key_is_the_filters_key() {
        // crates/core/src/approval.rs: SHA-256 of the canonical {arguments, grant (hex), tool, upstream}.
        use sha2::{Digest, Sha256};
        let text = format!(
            r#"{{"arguments":{{"a":1,"b":"é"}},"grant":"{GRANT_ID}","tool":"t","upstream":{{"authority":"gw:10000","cluster":"mcp_a","path":"/a/mcp"}}}}"#
        );
        let want = auth::hex(&Sha256::digest(text.as_bytes()));
        let sent = format!(
            r#"{{"key":"{want}","grant_id":"{GRANT_ID}","grant":"g","tool":"t","upstream":{UP},"arguments":{{"b":"\u00e9", "a":1}},"request_id":"","expires_in_seconds":1,"wait_seconds":0}}"#
        );
        let (c, _) = parse_check(sent.as_bytes()).unwrap();
        assert_eq!(c.key, want);
        assert_eq!(c.arguments, r#"{"b":"\u00e9", "a":1}"#);
    }

    #[test]
    fn refuses_a_key_of_another_call() {
        let good = json!({"grant_id": GRANT_ID, "grant": "g", "tool": "start_vm", "arguments": {"vmid": 100},
            "request_id": "r", "expires_in_seconds": 1, "wait_seconds": 0});
        assert!(parse_check(&body(good.clone())).is_ok());
        let other_grant = "f".repeat(64);
        for (what, k) in [
            ("other arguments", key_of(GRANT_ID, "start_vm", r#"{"vmid":101}"#)),
            ("other tool", key_of(GRANT_ID, "delete_vm", r#"{"vmid":100}"#)),
            ("other grant", key_of(&other_grant, "start_vm", r#"{"vmid":100}"#)),
            ("no arguments is {} not this", key_of(GRANT_ID, "start_vm", "{}")),
            ("another number text", key_of(GRANT_ID, "start_vm", r#"{"vmid":100.0}"#)),
            (
                "another upstream",
                key_to(
                    GRANT_ID,
                    &json!({"cluster": "mcp_b", "authority": "gw:10000", "path": "/a/mcp"}),
                    "start_vm",
                    r#"{"vmid":100}"#,
                ),
            ),
            (
                "another path",
                key_to(
                    GRANT_ID,
                    &json!({"cluster": "mcp_a", "authority": "gw:10000", "path": "/b/mcp"}),
                    "start_vm",
                    r#"{"vmid":100}"#,
                ),
            ),
        ] {
            let mut b = good.clone();
            b["key"] = json!(k);
            assert_eq!(parse_check(&body(b)).unwrap_err(), KEY_MISMATCH, "{what}");
        }
    }

    #[test]
    fn rejects_bad_checks() {
        let good = json!({"grant_id": GRANT_ID, "grant": "g", "tool": "t", "arguments": {}, "request_id": "r",
            "expires_in_seconds": 1, "wait_seconds": 0, "upstream": serde_json::from_str::<Value>(UP).unwrap()});
        assert!(parse_check(&body(good.clone())).is_ok());
        let k = key_of(GRANT_ID, "t", "{}");
        let cases: &[(&str, Value, &str)] = &[
            ("key", json!(k.to_uppercase()), "key: must be 64 lowercase hex characters"),
            ("key", json!(&k[..63]), "key: must be 64 lowercase hex characters"),
            ("key", json!(5), "key: must be a string"),
            ("grant_id", json!(GRANT_ID.to_uppercase()), "grant_id: must be 64 lowercase hex characters"),
            ("grant_id", json!(&GRANT_ID[..63]), "grant_id: must be 64 lowercase hex characters"),
            ("grant_id", json!(format!("{}g", &GRANT_ID[..63])), "grant_id: must be 64 lowercase hex characters"),
            ("grant_id", json!(format!("{GRANT_ID}0")), "grant_id: longer than 64 bytes"),
            ("grant_id", json!(null), "grant_id: must be a string"),
            ("tool", json!(""), "tool: must not be empty"),
            ("tool", json!("x".repeat(257)), "tool: longer than 256 bytes"),
            ("expires_in_seconds", json!(0), "expires_in_seconds: must be an integer in 1..=604800"),
            ("expires_in_seconds", json!(604801), "expires_in_seconds: must be an integer in 1..=604800"),
            ("expires_in_seconds", json!(1.5), "expires_in_seconds: must be an integer in 1..=604800"),
            ("wait_seconds", json!(301), "wait_seconds: must be an integer in 0..=300"),
            ("wait_seconds", json!(-1), "wait_seconds: must be an integer in 0..=300"),
            ("grant", json!(5), "grant: must be a string"),
            ("reason", json!(5), "reason: must be a string"),
            ("upstream", json!("mcp_a"), UPSTREAM_SHAPE),
            ("upstream", json!({"cluster": "mcp_a", "authority": "gw:10000"}), UPSTREAM_SHAPE),
            ("upstream", json!({"cluster": "", "authority": "gw:10000", "path": "/a/mcp"}), UPSTREAM_SHAPE),
            ("upstream", json!({"cluster": "mcp_a", "authority": 5, "path": "/a/mcp"}), UPSTREAM_SHAPE),
            ("upstream", json!({"cluster": "mcp_a", "authority": "gw", "path": "/", "route": "r"}), UPSTREAM_SHAPE),
            (
                "upstream",
                json!({"cluster": "a\u{0}", "authority": "gw", "path": "/"}),
                "upstream: must not contain U+0000",
            ),
            (
                "upstream",
                json!({"cluster": "mcp_a", "authority": "gw", "path": format!("/{}", "p".repeat(16_384))}),
                "upstream: path at most 16384 bytes",
            ),
            (
                "upstream",
                json!({"cluster": "c".repeat(1025), "authority": "gw", "path": "/"}),
                "upstream: cluster and authority at most 1024 bytes",
            ),
        ];
        for (field, value, msg) in cases {
            let mut b = good.clone();
            b["key"] = json!(k);
            b[*field] = value.clone();
            let bytes = serde_json::to_vec(&b).unwrap();
            assert_eq!(parse_check(&bytes).unwrap_err(), *msg, "{field}={value}");
        }
        for field in [
            "key",
            "grant_id",
            "grant",
            "tool",
            "upstream",
            "arguments",
            "request_id",
            "expires_in_seconds",
            "wait_seconds",
        ] {
            let mut b = good.clone();
            b["key"] = json!(k);
            b.as_object_mut().unwrap().remove(field);
            assert_eq!(parse_check(&serde_json::to_vec(&b).unwrap()).unwrap_err(), format!("{field}: missing"));
        }
        assert_eq!(parse_check(b"[]").unwrap_err(), "body must be a JSON object");
        assert_eq!(parse_check(b"{").unwrap_err(), "body is not strict JSON: unexpected end of input at byte 1");
    }

    #[test]
    fn strict_json_only() {
        let k = key_of(GRANT_ID, "t", "{}");
        let base = format!(
            r#""key":"{k}","grant_id":"{GRANT_ID}","grant":"g","tool":"t","upstream":{UP},"request_id":"","expires_in_seconds":1,"wait_seconds":0"#
        );
        for (args, msg) in [
            (r#"{"a":1,"a":2}"#, "body is not strict JSON: duplicate object key at byte "),
            (r#"{"s":"\ud800"}"#, "body is not strict JSON: unpaired UTF-16 surrogate escape at byte "),
            (r#"{"n":NaN}"#, "body is not strict JSON: unexpected character at byte "),
        ] {
            let text = format!(r#"{{{base},"arguments":{args}}}"#);
            let err = parse_check(text.as_bytes()).unwrap_err();
            assert!(err.starts_with(msg), "{args}: {err}");
        }
        // A duplicate top-level field (two tools: which one would the page show?).
        let text = format!(r#"{{{base},"arguments":{{}},"tool":"u"}}"#);
        assert_eq!(
            parse_check(text.as_bytes()).unwrap_err(),
            "body is not strict JSON: duplicate object key at byte 0"
        );
    }

    #[test]
    fn keeps_arguments_verbatim() {
        let args = r#"{"n":123456789012345678901234567890, "s":"\u003c"}"#;
        let k = key_of(GRANT_ID, "t", args);
        let body = format!(
            r#"{{"key":"{k}","grant_id":"{GRANT_ID}","grant":"g","tool":"t","upstream":{UP},"arguments": {args} ,"request_id":"","expires_in_seconds":1,"wait_seconds":0}}"#
        );
        let (c, _) = parse_check(body.as_bytes()).unwrap();
        assert_eq!(c.arguments, args);
    }

    #[test]
    fn content_types() {
        let h = |values: &[&str]| {
            let mut m = HeaderMap::new();
            for v in values {
                m.append(header::CONTENT_TYPE, v.parse().unwrap());
            }
            is_json_content_type(&m)
        };
        assert!(h(&["application/json"]));
        assert!(h(&["Application/JSON; charset=utf-8"]));
        for bad in [
            &[][..],
            &["text/plain"],
            &["application/x-www-form-urlencoded"],
            &["multipart/form-data; boundary=x"],
            &["application/jsonx"],
            &["application/json", "application/json"],
        ] {
            assert!(!h(bad), "{bad:?}");
        }
    }
}
