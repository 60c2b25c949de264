//! Webhook notifications (`--notify-webhook URL`, repeatable): a JSON event POSTed when an
//! approval opens and when it is decided, so approvers need not watch the page.
//!
//! The body is Slack-compatible (a `text` field, so a Slack or Mattermost incoming webhook shows
//! it as is) and carries the event in structured form too:
//!
//! ```json
//! {"text": "...", "event": "approval.opened",
//!  "approval": {"id": "apr_...", "state": "pending", "tool": "start_vm", "grant": "...",
//!               "upstream": {"cluster": "mcp_a", "authority": "..."},
//!               "reason": "...", "approval_url": "https://...", "expires_at": 1764500600, ...}}
//! ```
//!
//! Argument values, and the upstream's `path` (which may hold a credential in its query, as
//! arguments may), are left out unless `--notify-include-arguments`. Sending never blocks a
//! check: events go into a queue of at most [`QUEUE_CAP`] (more are dropped and counted); a
//! worker POSTs each to every URL with a timeout (`--notify-timeout`), retrying 5xx, 429 and
//! network errors [`RETRIES`] times with backoff (1 s, 2 s, 4 s), at most [`IN_FLIGHT`]
//! deliveries at once. Counters: `mcp_approvals_webhook_deliveries_total{result}`.

use std::sync::Arc;
use std::time::Duration;

use mcp_service_kit::prom::{Counter, Labelled, Registry};
use serde_json::{json, Value};
use tokio::sync::{mpsc, Semaphore};

use crate::store::{Approval, State};

/// Most events waiting to be sent; more are dropped (and counted).
pub const QUEUE_CAP: usize = 1000;
/// Retries after a failed attempt (so 1 + RETRIES attempts).
pub const RETRIES: u32 = 3;
/// Most deliveries in flight at once.
pub const IN_FLIGHT: usize = 16;
/// `--notify-timeout` default: one attempt, connect to last byte.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(5);
/// Longest free-text field (reason, note) copied into `text`, in characters.
const TEXT_FIELD_MAX: usize = 300;

/// The webhook settings.
#[derive(Clone, Debug)]
pub struct NotifyConfig {
    /// http:// or https:// URLs (`--notify-webhook`).
    pub webhooks: Vec<String>,
    /// Put the call's arguments in the events (`--notify-include-arguments`).
    pub include_arguments: bool,
    /// One attempt's timeout (`--notify-timeout`).
    pub timeout: Duration,
    /// The first retry's delay; doubled for each next one (tests shorten it).
    pub backoff: Duration,
}

impl Default for NotifyConfig {
    fn default() -> Self {
        NotifyConfig {
            webhooks: Vec::new(),
            include_arguments: false,
            timeout: DEFAULT_TIMEOUT,
            backoff: Duration::from_secs(1),
        }
    }
}

/// Checks a `--notify-webhook` value. The message never repeats the value: a webhook URL may hold a
/// secret (Slack's do), and the message goes to the log.
pub fn parse_webhook(s: &str) -> Result<String, String> {
    let ok_scheme = s.starts_with("http://") || s.starts_with("https://");
    if !ok_scheme || s.len() > 2048 || s.contains(|c: char| c.is_whitespace() || c.is_control()) {
        return Err("must be an http:// or https:// URL (at most 2048 bytes, no whitespace)".into());
    }
    reqwest::Url::parse(s).map_err(|e| format!("not a URL: {e}"))?;
    Ok(s.to_string())
}

#[derive(Default)]
struct Counters {
    delivered: Counter,
    failed: Counter,
    dropped: Counter,
    retries: Counter,
}

/// The queue of events; cheap to share.
pub struct Notifier {
    tx: mpsc::Sender<Value>,
    include_arguments: bool,
    counters: Arc<Counters>,
}

impl Notifier {
    /// Starts the delivery worker on the current tokio runtime; `None` when no webhook is
    /// configured (or, outside a runtime, with an error logged).
    pub fn start(config: &NotifyConfig) -> Option<Notifier> {
        if config.webhooks.is_empty() {
            return None;
        }
        let handle = match tokio::runtime::Handle::try_current() {
            Ok(h) => h,
            Err(e) => {
                tracing::error!(error = %e, "webhooks disabled: no async runtime");
                return None;
            }
        };
        let client = match reqwest::Client::builder()
            .timeout(config.timeout)
            .connect_timeout(config.timeout)
            .redirect(reqwest::redirect::Policy::none())
            .user_agent(concat!("mcp-approvals/", env!("CARGO_PKG_VERSION")))
            .build()
        {
            Ok(c) => c,
            Err(e) => {
                tracing::error!(error = %e, "webhooks disabled: HTTP client");
                return None;
            }
        };
        let (tx, rx) = mpsc::channel(QUEUE_CAP);
        let counters = Arc::new(Counters::default());
        handle.spawn(worker(rx, client, config.clone(), counters.clone()));
        Some(Notifier { tx, include_arguments: config.include_arguments, counters })
    }

    /// Queues the event of an approval just opened or decided. Never waits: a full queue drops it.
    pub fn send(&self, a: &Approval, approval_url: &str) {
        let event = event(a, approval_url, self.include_arguments);
        if self.tx.try_send(event).is_err() {
            self.counters.dropped.inc();
            tracing::warn!(approval = %a.id, "webhook event dropped: queue full");
        }
    }

    /// Adds the webhook metrics to the `/metrics` page.
    pub fn register(&self, page: &mut Registry) {
        let c = &self.counters;
        page.register(
            "mcp_approvals_webhook_deliveries_total",
            "Webhook events by outcome (delivered: a 2xx answer; failed: all attempts failed; dropped: the queue \
             was full).",
            Labelled::new(
                "result",
                [("delivered", c.delivered.clone()), ("failed", c.failed.clone()), ("dropped", c.dropped.clone())],
            ),
        );
        page.register("mcp_approvals_webhook_retries_total", "Webhook attempts retried.", c.retries.clone());
    }
}

async fn worker(mut rx: mpsc::Receiver<Value>, client: reqwest::Client, config: NotifyConfig, c: Arc<Counters>) {
    let slots = Arc::new(Semaphore::new(IN_FLIGHT));
    while let Some(event) = rx.recv().await {
        let body = Arc::new(event);
        for url in &config.webhooks {
            let Ok(permit) = slots.clone().acquire_owned().await else {
                return;
            };
            let (client, url, body, c, backoff) =
                (client.clone(), url.clone(), body.clone(), c.clone(), config.backoff);
            tokio::spawn(async move {
                deliver(&client, &url, &body, &c, backoff).await;
                drop(permit);
            });
        }
    }
}

async fn deliver(client: &reqwest::Client, url: &str, body: &Value, c: &Counters, backoff: Duration) {
    let mut delay = backoff;
    for attempt in 0..=RETRIES {
        if attempt > 0 {
            c.retries.inc();
            tokio::time::sleep(delay).await;
            delay = delay.saturating_mul(2);
        }
        let (retry, why) = match client.post(url).json(body).send().await {
            Ok(r) if r.status().is_success() => {
                c.delivered.inc();
                return;
            }
            Ok(r) => {
                let s = r.status();
                (s.is_server_error() || s == reqwest::StatusCode::TOO_MANY_REQUESTS, format!("HTTP {s}"))
            }
            // Without the URL: its path may hold a secret (Slack's do), and reqwest's errors name it.
            Err(e) => (true, if e.is_timeout() { "timeout".to_string() } else { e.without_url().to_string() }),
        };
        // The URL may hold a secret (Slack's do): only its host is logged.
        let host = reqwest::Url::parse(url).ok().and_then(|u| u.host_str().map(str::to_string)).unwrap_or_default();
        tracing::warn!(webhook_host = %host, attempt = attempt + 1, error = %why, "webhook delivery failed");
        if !retry {
            break;
        }
    }
    c.failed.inc();
}

/// Slack's `mrkdwn` escaping of text from requests: `&`, `<` and `>`; backticks and newlines are
/// replaced so a value cannot end the code span or forge lines. Cut to [`TEXT_FIELD_MAX`].
fn slack_text(s: &str) -> String {
    let mut out = String::new();
    for (n, ch) in s.chars().enumerate() {
        if n == TEXT_FIELD_MAX {
            out.push('…');
            break;
        }
        match ch {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '`' => out.push('\''),
            c if c.is_control() => out.push(' '),
            c => out.push(c),
        }
    }
    out
}

fn rfc3339(t: i64) -> String {
    let t = u64::try_from(t).unwrap_or(0);
    humantime::format_rfc3339_seconds(std::time::UNIX_EPOCH + Duration::from_secs(t)).to_string()
}

/// The event of an approval (its state tells opened from decided).
pub fn event(a: &Approval, approval_url: &str, include_arguments: bool) -> Value {
    let (name, text) = match a.state {
        State::Pending => (
            "approval.opened",
            format!(
                "MCP approval needed: `{}`{} for grant {}{}. Expires {}. <{}|Approve or deny>",
                slack_text(&a.tool),
                on_cluster(a),
                slack_text(&a.grant),
                if a.reason.is_empty() { String::new() } else { format!(" ({})", slack_text(&a.reason)) },
                rfc3339(a.expires_at),
                approval_url
            ),
        ),
        state => (
            if state == State::Approved { "approval.approved" } else { "approval.denied" },
            format!(
                "MCP approval {}: `{}`{} for grant {}, by {}{}. <{}|Details>",
                state.as_str(),
                slack_text(&a.tool),
                on_cluster(a),
                slack_text(&a.grant),
                slack_text(a.approver.as_deref().unwrap_or("")),
                if a.note.is_empty() { String::new() } else { format!(": {}", slack_text(&a.note)) },
                approval_url
            ),
        ),
    };
    let mut approval = json!({
        "id": a.id,
        "state": a.state.as_str(),
        "tool": a.tool,
        "grant": a.grant,
        "reason": a.reason,
        "approval_url": approval_url,
        "created_at": a.created_at,
        "expires_at": a.expires_at,
        "decided_at": a.decided_at,
        "approver": a.approver,
        "note": a.note,
    });
    if let Some(obj) = approval.as_object_mut() {
        let upstream = match (a.has_upstream(), include_arguments) {
            (false, _) => Value::Null,
            (true, false) => json!({"cluster": a.upstream.cluster, "authority": a.upstream.authority}),
            (true, true) => {
                json!({"cluster": a.upstream.cluster, "authority": a.upstream.authority, "path": a.upstream.path})
            }
        };
        obj.insert("upstream".into(), upstream);
        if include_arguments {
            let args = serde_json::from_str::<Value>(&a.arguments).unwrap_or(Value::Null);
            obj.insert("arguments".into(), args);
        }
    }
    json!({ "text": text, "event": name, "approval": approval })
}

/// " on `CLUSTER`" for the text line (nothing for an approval stored without its upstream).
fn on_cluster(a: &Approval) -> String {
    if a.has_upstream() {
        format!(" on `{}`", slack_text(&a.upstream.cluster))
    } else {
        String::new()
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn approval(state: State) -> Approval {
        Approval {
            id: "apr_0123456789abcdefghjkmnpqrs".into(),
            key: "k".into(),
            state,
            grant: "sha256:0123456789ab".into(),
            tool: "start_vm<@here>`".into(),
            arguments: r#"{"secret":"s3cr3t"}"#.into(),
            request_id: "r".into(),
            reason: "needs a human".into(),
            created_at: 1_764_500_000,
            expires_in: 600,
            expires_at: 1_764_500_600,
            decided_at: None,
            approver: Some("alice".into()),
            note: "ok & go".into(),
            consumed_at: None,
            consumed_request_id: None,
            grant_id: "g".into(),
            input_responses: String::new(),
            request_state: None,
            upstream: crate::store::Upstream {
                cluster: "mcp_a".into(),
                authority: "gw.example".into(),
                path: "/a/mcp?key=s3cr3t-path".into(),
            },
            caller: None,
        }
    }

    #[test]
    fn opened_event_is_slack_text_without_arguments() {
        let e = event(&approval(State::Pending), "https://a.example/approvals/apr_1", false);
        assert_eq!(e["event"], "approval.opened");
        assert_eq!(
            e["text"],
            "MCP approval needed: `start_vm&lt;@here&gt;'` on `mcp_a` for grant sha256:0123456789ab (needs a human). \
             Expires 2025-11-30T11:03:20Z. <https://a.example/approvals/apr_1|Approve or deny>"
        );
        assert_eq!(e["approval"]["expires_at"], 1_764_500_600);
        assert_eq!(e["approval"]["upstream"], json!({"cluster": "mcp_a", "authority": "gw.example"}));
        assert!(!e.to_string().contains("s3cr3t"), "neither arguments nor the path: {e}");
        let with = event(&approval(State::Pending), "u", true);
        assert_eq!(with["approval"]["arguments"], json!({"secret": "s3cr3t"}));
        assert_eq!(with["approval"]["upstream"]["path"], "/a/mcp?key=s3cr3t-path");
        let mut old = approval(State::Pending);
        old.upstream = crate::store::Upstream { cluster: String::new(), authority: String::new(), path: String::new() };
        let e = event(&old, "u", false);
        assert_eq!(e["approval"]["upstream"], Value::Null);
        assert!(e["text"].as_str().unwrap().starts_with("MCP approval needed: `start_vm&lt;@here&gt;'` for grant"));
    }

    #[test]
    fn decided_event_names_the_approver() {
        let e = event(&approval(State::Denied), "u", false);
        assert_eq!(e["event"], "approval.denied");
        assert_eq!(e["text"], "MCP approval denied: `start_vm&lt;@here&gt;'` on `mcp_a` for grant sha256:0123456789ab, by alice: ok &amp; go. <u|Details>");
    }

    #[test]
    fn webhook_urls() {
        assert!(parse_webhook("https://hooks.slack.com/services/T/B/x").is_ok());
        assert!(parse_webhook("ftp://x").is_err());
        assert!(parse_webhook("http://a b").is_err());
        // The value may be a secret: no message repeats it.
        for bad in ["https://hooks.example/T/B/s3cr3t x", "https://[s3cr3t/x", "ftp://s3cr3t"] {
            assert!(!parse_webhook(bad).unwrap_err().contains("s3cr3t"), "{bad}");
        }
    }
}
