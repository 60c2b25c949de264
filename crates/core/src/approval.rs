//! Require approval: the binding key of a call, the request to the approval service and the
//! reading of its answer. Pure; the host adapter makes the callout (`dispatch_http_call`).
//!
//! The service's contract is `services/approvals/API.md`. An approval is bound to one exact call by its key:
//! SHA-256 over the canonical JSON of `{"arguments":…,"grant":…,"tool":…,"upstream":…}` (see
//! [`canonical`]), so an approval of `{"vmid":100,"command":"uptime"}` can never let
//! `{"command":"cat /etc/shadow"}` through, nor the same call to another MCP server behind the same
//! Envoy ([`Upstream`]), and the service lets an approval through once.
//!
//! Layer `approval` (crate docs); may use: `terms`, `wire`, `identity`, `limits`, `policy`, `rls`, `config`.

use sha2::{Digest, Sha256};

pub mod offer;

use crate::identity::grant::hex;
use crate::identity::grant::GrantId;
use crate::identity::payload::Provenance;
use crate::wire::json::{self, write_str, Json};

/// The reason shown for a `require_approval` tool whose rule gives none.
pub const DEFAULT_REASON: &str = "this tool needs a person's approval for each call";

/// Where a call goes, as this Envoy routes it: the MCP server an approval is for. Two routes of one
/// listener to two clusters, or one cluster serving several servers by host name or path, are
/// different upstreams, so an approval given for one never lets the same call run on another.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Upstream {
    /// The Envoy cluster the request's route chose (property `xds.cluster_name`).
    pub cluster: String,
    /// The request's `:authority` (HTTP/1.1 `Host`).
    pub authority: String,
    /// The request's `:path`, query included, as received (before any route rewrite).
    pub path: String,
}

impl Upstream {
    /// `{"authority":…,"cluster":…,"path":…}`: canonical (members in code point order), as the key
    /// hashes it and the filter sends it.
    pub fn write_json(&self, out: &mut String) {
        out.push_str("{\"authority\":");
        write_str(out, &self.authority);
        out.push_str(",\"cluster\":");
        write_str(out, &self.cluster);
        out.push_str(",\"path\":");
        write_str(out, &self.path);
        out.push('}');
    }
}

/// Canonical JSON text of `v`: object members sorted by key (Unicode code point order, which is the
/// byte order of their UTF-8), no insignificant whitespace, strings unescaped and re-escaped one way
/// (`json::write_str`: only `"`, `\` and control characters), numbers exactly as sent (`1.0` and `1`
/// are different values to a tool, so they are different keys).
pub fn canonical(v: &Json, out: &mut String) {
    json::write_sorted(out, v);
}

/// The approval key of a call: lower-case hex SHA-256 of the canonical JSON of
/// `{"arguments": ARGS, "grant": "<hex SHA-256 of the credential>", "tool": NAME,
/// "upstream": {"authority": …, "cluster": …, "path": …}}`.
/// Absent arguments count as `{}` (MCP treats them alike).
pub fn key(grant: &GrantId, upstream: &Upstream, tool: &str, arguments: Option<&Json>) -> String {
    key_with(grant, upstream, tool, arguments, None, None)
}

/// The approval key of a call that may be a continuation leg (MCP 2026-07-28, [`crate::wire::leg`]):
/// lower-case hex SHA-256 of the canonical JSON of `{"arguments": ARGS, "grant": "<hex>",
/// "inputResponses": ANSWERS, "requestState": "STATE", "tool": NAME, "upstream": {…}}`, where
/// `inputResponses` and `requestState` are left out when the call does not carry them (so a first
/// leg has exactly the [`key`] of an ordinary call, and every continuation leg another key).
pub fn key_with(
    grant: &GrantId,
    upstream: &Upstream,
    tool: &str,
    arguments: Option<&Json>,
    input_responses: Option<&Json>,
    request_state: Option<&str>,
) -> String {
    key_for(None, grant, upstream, tool, arguments, input_responses, request_state)
}

/// The approval key of a call by a `caller` read from a verified token (`gateway.identity`) or
/// judged by a named policy of a set: the [`key_with`] text with a `"caller"` member after
/// `"arguments"`: `{"act":[…],"client_id":…,"policy":…,"subject":…}` (each `null` when absent).
/// Without a caller the key is exactly [`key_with`]'s. So an approval a person gave to one actor
/// chain, client or policy (all shown on the approval's page) never lets the same call of the same
/// grant through for another.
pub fn key_for(
    caller: Option<&Provenance>,
    grant: &GrantId,
    upstream: &Upstream,
    tool: &str,
    arguments: Option<&Json>,
    input_responses: Option<&Json>,
    request_state: Option<&str>,
) -> String {
    let empty = Json::Object(Vec::new());
    let mut text = String::from("{\"arguments\":");
    canonical(arguments.unwrap_or(&empty), &mut text);
    if let Some(c) = caller {
        text.push_str(",\"caller\":{");
        write_caller(&mut text, c);
        text.push('}');
    }
    text.push_str(",\"grant\":\"");
    text.push_str(&hex(grant));
    text.push('"');
    if let Some(answers) = input_responses {
        text.push_str(",\"inputResponses\":");
        canonical(answers, &mut text);
    }
    if let Some(state) = request_state {
        text.push_str(",\"requestState\":");
        write_str(&mut text, state);
    }
    text.push_str(",\"tool\":");
    write_str(&mut text, tool);
    text.push_str(",\"upstream\":");
    upstream.write_json(&mut text);
    text.push('}');
    hex(&Sha256::digest(text.as_bytes()))
}

/// The caller's four members, in key order (`act`, `client_id`, `policy`, `subject`; each `null`
/// when absent): the `"caller"` object of the key and the members of the check request alike, so
/// what the service shows is what the key binds.
pub(crate) fn write_caller(out: &mut String, c: &Provenance) {
    out.push_str("\"act\":");
    write_act(out, &c.act);
    out.push_str(",\"client_id\":");
    write_opt(out, c.client_id.as_deref());
    out.push_str(",\"policy\":");
    write_opt(out, c.policy.as_deref());
    out.push_str(",\"subject\":");
    write_opt(out, c.subject.as_deref());
}

/// A JSON string, or `null`.
fn write_opt(out: &mut String, v: Option<&str>) {
    match v {
        Some(s) => write_str(out, s),
        None => out.push_str("null"),
    }
}

/// A JSON array of strings.
fn write_act(out: &mut String, act: &[String]) {
    out.push('[');
    for (i, a) in act.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        write_str(out, a);
    }
    out.push(']');
}

/// What the filter sends to `POST {gateway.approval.path}` (services/approvals/API.md, "Filter -> service").
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckRequest<'a> {
    pub key: &'a str,
    /// The grant's label (`sha256:…` or the registry label), never the credential.
    pub grant: &'a str,
    /// The grant id (SHA-256 of the credential), so the service can recompute `key` from what it
    /// shows the approver.
    pub grant_id: &'a GrantId,
    pub tool: &'a str,
    /// The MCP server the call goes to (bound by `key`, shown to the approver).
    pub upstream: &'a Upstream,
    /// The arguments' JSON text as the agent sent them (already strictly checked); `None` is `{}`.
    pub arguments: Option<&'a str>,
    /// Envoy's `x-request-id` ("" when absent).
    pub request_id: &'a str,
    /// Seconds.
    pub expires_in_seconds: u64,
    /// Seconds the service may hold the callout (hold mode); 0 in retry mode.
    pub wait_seconds: u64,
    pub reason: Option<&'a str>,
    /// A 2026-07-28 continuation leg: `inputResponses` (JSON text as sent) and `requestState`,
    /// sent as `input_responses` / `request_state` (left out when absent).
    pub input_responses: Option<&'a str>,
    pub request_state: Option<&'a str>,
    /// Who called, from the verified token, and the attached policy (bound by `key`, shown): sent
    /// as `act`, `client_id`, `policy` and `subject` (each `null` when absent), all four or none.
    pub caller: Option<&'a Provenance>,
}

impl CheckRequest<'_> {
    /// The JSON body.
    pub fn to_json(&self) -> String {
        let mut o = String::with_capacity(256 + self.upstream.path.len() + self.arguments.map_or(2, str::len));
        o.push_str("{\"key\":");
        write_str(&mut o, self.key);
        o.push_str(",\"grant\":");
        write_str(&mut o, self.grant);
        o.push_str(",\"grant_id\":\"");
        o.push_str(&hex(self.grant_id));
        o.push('"');
        o.push_str(",\"tool\":");
        write_str(&mut o, self.tool);
        o.push_str(",\"upstream\":");
        self.upstream.write_json(&mut o);
        o.push_str(",\"arguments\":");
        o.push_str(self.arguments.unwrap_or("{}"));
        o.push_str(",\"request_id\":");
        write_str(&mut o, self.request_id);
        o.push_str(",\"expires_in_seconds\":");
        o.push_str(&self.expires_in_seconds.to_string());
        o.push_str(",\"wait_seconds\":");
        o.push_str(&self.wait_seconds.to_string());
        if let Some(r) = self.reason {
            o.push_str(",\"reason\":");
            write_str(&mut o, r);
        }
        if let Some(answers) = self.input_responses {
            o.push_str(",\"input_responses\":");
            o.push_str(answers);
        }
        if let Some(state) = self.request_state {
            o.push_str(",\"request_state\":");
            write_str(&mut o, state);
        }
        if let Some(c) = self.caller {
            o.push(',');
            write_caller(&mut o, c);
        }
        o.push('}');
        o
    }
}

/// Envoy's `x-request-id` as sent to the approval service, or "" when it is not a plain token:
/// 1 to 128 of `[A-Za-z0-9._:-]`. A client on a trusted address can set the header itself, and the
/// approver's page shows it, so free text ("pre-approved by security") must not get through.
pub fn request_id_token(rid: &str) -> &str {
    let plain =
        !rid.is_empty() && rid.len() <= 128 && rid.bytes().all(|b| b.is_ascii_alphanumeric() || b".:_-".contains(&b));
    if plain {
        rid
    } else {
        ""
    }
}

/// The service's answer, or why there is none.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Answer {
    /// Approved and consumed by the service for this call: forward it.
    Approved {
        approval_id: String,
        approver: String,
    },
    /// Waiting for a person.
    Pending {
        approval_id: String,
        approval_url: String,
        expires_in_seconds: u64,
    },
    Denied {
        approval_id: String,
        approver: String,
        note: String,
    },
    /// No usable answer (unreachable, timeout, non-200, malformed): fail closed.
    Unavailable(String),
}

/// Longest approval id, URL, approver or note accepted from the service, in bytes.
pub const MAX_ANSWER_FIELD: usize = 2048;

/// Largest answer body read from the approval service, in bytes; a longer one is
/// [`Answer::Unavailable`] with [`ANSWER_TOO_LARGE`].
pub const MAX_ANSWER_BYTES: usize = 64 * 1024;

/// Why an answer over [`MAX_ANSWER_BYTES`] is unavailable: a literal, not formatted at run time,
/// which costs the wasm module bytes (`tests` keeps the two in step).
pub const ANSWER_TOO_LARGE: &str = "the approval service's answer exceeds 65536 bytes";

/// Read the callout's result. `status` is the response's `:status` (Envoy answers a timeout with a
/// synthetic 504 and an unreachable cluster with 503), `body` its bytes. Anything but a 200 JSON
/// object of one of the three documented shapes is [`Answer::Unavailable`].
pub fn read_answer(status: Option<&[u8]>, body: &[u8]) -> Answer {
    match status {
        Some(b"200") => {}
        Some(b"504") => return Answer::Unavailable("the approval service did not answer in time".into()),
        Some(s) => {
            let s = String::from_utf8_lossy(s.get(..3).unwrap_or(s)).into_owned();
            return Answer::Unavailable(format!("the approval service answered HTTP {s}"));
        }
        None => return Answer::Unavailable("the approval service answered without a status".into()),
    }
    let bad = |why: &str| Answer::Unavailable(format!("the approval service's answer is malformed: {why}"));
    let Ok(v) = json::parse(body) else { return bad("not a JSON object") };
    let text = |name: &str, required: bool| -> Result<String, String> {
        match v.get(name) {
            Some(Json::String(s)) if s.len() <= MAX_ANSWER_FIELD && (!required || !s.is_empty()) => Ok(s.clone()),
            None | Some(Json::Null) if !required => Ok(String::new()),
            _ => Err(format!("field {name}")),
        }
    };
    let result = (|| -> Result<Answer, String> {
        let approval_id = text("approval_id", true)?;
        match v.get("status") {
            Some(Json::String(s)) if s == "approved" => {
                Ok(Answer::Approved { approval_id, approver: text("approver", false)? })
            }
            Some(Json::String(s)) if s == "denied" => {
                Ok(Answer::Denied { approval_id, approver: text("approver", false)?, note: text("note", false)? })
            }
            Some(Json::String(s)) if s == "pending" => {
                let expires_in_seconds = match v.get("expires_in_seconds") {
                    Some(Json::Number(n)) => n.parse::<u64>().map_err(|_| "field expires_in_seconds".to_owned())?,
                    _ => return Err("field expires_in_seconds".into()),
                };
                Ok(Answer::Pending { approval_id, approval_url: text("approval_url", true)?, expires_in_seconds })
            }
            _ => Err("field status".into()),
        }
    })();
    result.unwrap_or_else(|why| bad(&why))
}

#[cfg(test)]
mod tests;
