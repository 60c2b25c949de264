//! The `gateway` section of the policy: grant source, size and tracking limits, grants, the
//! approval service, protocol versions, session keys, the rate limit service and `methods`.

use std::collections::HashMap;

use super::{duration_ms, Errors, TIMEOUT_LIKE};
use crate::config::spec::{
    ApprovalSpec, GatewaySpec, GrantSpec, IdentitySpec, RateLimitServiceSpec, SessionKeySpec, ToolAction, ToolRuleSpec,
};
use crate::config::Map;
use crate::config::{
    fail, DEFAULT_MAX_BODY_BYTES, DEFAULT_MAX_RESPONSE_BYTES, DEFAULT_MAX_TRACKED_GRANTS, MAX_APPROVAL_CALLOUT_MS,
    MAX_BODY_BYTES_CEILING,
};
use crate::identity::session::SessionKeys;
use crate::limits::Limit;
use crate::policy::RateLimitService;
use crate::policy::{ApprovalService, Gateway, GrantSource, IdentitySource, NameMap};
use crate::terms::Action;
use crate::terms::Algorithm;
use crate::terms::ApprovalMode;
use crate::terms::FailureMode;
use crate::terms::Mode;
use crate::wire::protocol::{Version, Versions};

/// An Envoy cluster name, authority or path: 1 to 256 printable ASCII characters.
fn printable(s: &str) -> bool {
    !s.is_empty() && s.len() <= 256 && s.bytes().all(|b| b.is_ascii_graphic())
}

/// `gateway` without `methods` (see [`methods`]); `tools` for the `require_approval` check, `limits`
/// for the rate limit service's.
pub(super) fn gateway(gw: GatewaySpec, tools: &Map<ToolRuleSpec>, limits: &[Limit], errs: &mut Errors) -> Gateway {
    if gw.identity.is_some() && gw.grant_header.is_some() {
        fail(errs, "gateway.grant_header", "with gateway.identity the grant is its grant_claim: remove one");
    }
    let grant = grant_source(gw.grant_header, errs);
    let max_body_bytes = byte_limit(gw.max_body_bytes, DEFAULT_MAX_BODY_BYTES, "gateway.max_body_bytes", errs);
    let max_response_bytes =
        byte_limit(gw.max_response_bytes, DEFAULT_MAX_RESPONSE_BYTES, "gateway.max_response_bytes", errs);
    let max_tracked_grants = gw.max_tracked_grants.unwrap_or(DEFAULT_MAX_TRACKED_GRANTS);
    if max_tracked_grants == 0 {
        fail(errs, "gateway.max_tracked_grants", "must be at least 1");
    }
    let grants = grants(&gw.grants, errs);
    let approval = gw.approval.as_ref().and_then(|a| approval(a, errs));
    if let Some(Err(m)) =
        gw.resource_metadata_url.as_deref().map(crate::identity::challenge::check_resource_metadata_url)
    {
        fail(errs, "gateway.resource_metadata_url", m);
    }
    if gw.approval.is_none() {
        for (name, rule) in tools {
            if rule.action == Some(ToolAction::RequireApproval) {
                fail(
                    errs,
                    format!("tools.{name}.action"),
                    "require_approval needs gateway.approval (the Envoy cluster of the approval service)",
                );
            }
        }
    }
    let protocol_versions = protocol_versions(gw.protocol_versions.as_deref(), errs);
    let session_keys = gw.session_key.as_ref().map(|k| session_key(k, errs));
    let rate_limit_service = gw.rate_limit_service.as_ref().and_then(|r| rate_limit_service(r, limits, errs));
    Gateway {
        grant,
        max_body_bytes,
        max_tracked_grants,
        grants,
        hide_denied_tools: gw.hide_denied_tools,
        mode: gw.mode.unwrap_or(Mode::Enforce),
        tool_modes: hash_map(gw.tool_modes),
        max_response_bytes,
        approval,
        protocol_versions,
        session_keys,
        client_responses: gw.client_responses.unwrap_or(Action::Allow),
        rate_limit_service,
        audit: gw.audit.unwrap_or_default(),
        filter_state: gw.filter_state.unwrap_or(true),
        resource_metadata_url: gw.resource_metadata_url,
        identity: gw.identity.as_ref().map(|i| identity(i, errs)),
        refusal_shape: gw.refusal_shape.unwrap_or_default(),
        pins: gw.pins.unwrap_or_default(),
    }
}

/// `gateway.identity`: a plain header name (lower-cased) other than the grant's, the credential
/// headers and `host`; the grant claim (default `sub`) non-empty.
fn identity(spec: &IdentitySpec, errs: &mut Errors) -> IdentitySource {
    let lower = spec.payload_header.to_ascii_lowercase();
    let valid = !lower.is_empty()
        && lower.bytes().all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b))
        && !matches!(lower.as_str(), "authorization" | "cookie" | "host");
    if !valid {
        fail(
            errs,
            "gateway.identity.payload_header",
            "must be a plain header name (letters, digits, '-', '_', '.'), not authorization, cookie or host",
        );
    }
    let grant_claim = spec.grant_claim.clone().unwrap_or_else(|| "sub".to_owned());
    if grant_claim.is_empty() {
        fail(errs, "gateway.identity.grant_claim", "must not be empty");
    }
    IdentitySource { payload_header: lower, grant_claim }
}

/// `gateway.grant_header`: a plain header name (lower-cased), else `Authorization: Bearer`.
fn grant_source(header: Option<String>, errs: &mut Errors) -> GrantSource {
    let Some(h) = header else { return GrantSource::Bearer };
    let lower = h.to_ascii_lowercase();
    let valid = !lower.is_empty()
        && lower.bytes().all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b))
        && !matches!(lower.as_str(), "authorization" | "cookie" | "host");
    if !valid {
        fail(
            errs,
            "gateway.grant_header",
            "must be a plain header name (letters, digits, '-', '_', '.'), not authorization, cookie or host",
        );
    }
    GrantSource::Header(lower)
}

/// `gateway.max_body_bytes` and `max_response_bytes`: 1 to [`MAX_BODY_BYTES_CEILING`] bytes.
fn byte_limit(value: Option<u64>, default: u64, path: &str, errs: &mut Errors) -> usize {
    let bytes = value.unwrap_or(default);
    if bytes == 0 || bytes > MAX_BODY_BYTES_CEILING {
        fail(errs, path, crate::config::BYTE_LIMIT_RANGE);
    }
    usize::try_from(bytes).unwrap_or(usize::MAX)
}

/// `gateway.grants`: labels by SHA-256 of the token, each hash once.
fn grants(specs: &[GrantSpec], errs: &mut Errors) -> HashMap<[u8; 32], String, crate::policy::NameHasher> {
    let mut registry = HashMap::default();
    for (i, g) in specs.iter().enumerate() {
        let path = format!("gateway.grants[{i}]");
        let Some(id) = crate::identity::grant::from_hex32(&g.sha256.to_ascii_lowercase()) else {
            fail(errs, format!("{path}.sha256"), "must be 64 hex digits (the SHA-256 of the token)");
            continue;
        };
        // A label is named where a grant's `sha256:` id may be (a set's `grant` matcher).
        let printable = g.label.bytes().all(|b| b.is_ascii_graphic()) && !g.label.starts_with("sha256:");
        if g.label.is_empty() || g.label.len() > 64 || !printable {
            fail(
                errs,
                format!("{path}.label"),
                "must be 1 to 64 printable ASCII characters, not starting with sha256:",
            );
        }
        if registry.insert(id, g.label.clone()).is_some() {
            fail(errs, format!("{path}.sha256"), "listed twice");
        }
    }
    registry
}

/// `gateway.approval`, after defaults; `None` if any of its values is wrong.
fn approval(a: &ApprovalSpec, errs: &mut Errors) -> Option<ApprovalService> {
    let before = errs.len();
    if !printable(&a.cluster) {
        fail(errs, "gateway.approval.cluster", "must be 1 to 256 printable ASCII characters (an Envoy cluster name)");
    }
    let path = a.path.clone().unwrap_or_else(|| "/v1/check".to_owned());
    if !path.starts_with('/') || !printable(&path) {
        fail(errs, "gateway.approval.path", "must start with '/' and hold only printable ASCII characters");
    }
    let authority = a.authority.clone().unwrap_or_else(|| a.cluster.clone());
    if a.authority.is_some() && !printable(&authority) {
        fail(errs, "gateway.approval.authority", "must be 1 to 256 printable ASCII characters");
    }
    let mode = a.mode.unwrap_or(ApprovalMode::Retry);
    let (default, min) = match mode {
        ApprovalMode::Retry => ("5s", 1),
        ApprovalMode::Hold => ("30s", 2000),
    };
    let timeout = a.timeout.as_deref().unwrap_or(default);
    let timeout_ms = match duration_ms(timeout, TIMEOUT_LIKE, min, MAX_APPROVAL_CALLOUT_MS) {
        Ok(ms) => ms,
        Err(m) => {
            fail(errs, "gateway.approval.timeout", m);
            0
        }
    };
    let max_held_per_grant = a.max_held_per_grant.unwrap_or(crate::limits::held::DEFAULT_MAX_HELD_PER_GRANT);
    if !(1..=crate::limits::held::MAX_MAX_HELD_PER_GRANT).contains(&max_held_per_grant) {
        fail(errs, "gateway.approval.max_held_per_grant", "must be an integer from 1 to 10000");
    }
    (errs.len() == before).then_some(ApprovalService {
        cluster: a.cluster.clone(),
        path,
        authority,
        timeout_ms,
        mode,
        max_held_per_grant,
    })
}

/// `gateway.protocol_versions`: known versions, each once, at least one; absent means all.
fn protocol_versions(spec: Option<&[String]>, errs: &mut Errors) -> Versions {
    let Some(list) = spec else { return Versions::ALL };
    let mut set = Versions::default();
    if list.is_empty() {
        fail(errs, "gateway.protocol_versions", "must list at least one version");
    }
    for (i, name) in list.iter().enumerate() {
        match Version::parse(name) {
            Some(v) if set.contains(v) => fail(errs, format!("gateway.protocol_versions[{i}]"), "listed twice"),
            Some(v) => set.insert(v),
            None => fail(
                errs,
                format!("gateway.protocol_versions[{i}]"),
                "unknown MCP protocol version; known: 2025-03-26, 2025-06-18, 2025-11-25, 2026-07-28",
            ),
        }
    }
    set
}

/// Whether `gw` admits MCP sessions without binding them to their grant: no `session_key`, and
/// `protocol_versions` accepts a version with `Mcp-Session-Id` (2025-03-26 to 2025-11-25). The
/// 2024-11-05 HTTP+SSE transport's POSTs carry no version header and are read as 2025-03-26, so a
/// policy that accepts that version admits them too; a policy accepting only 2026-07-28 (no
/// sessions) needs no key.
pub fn sessions_unbound(gw: &Gateway) -> bool {
    gw.session_keys.is_none() && gw.protocol_versions.iter().any(|v| v.rules().sessions)
}

/// `gateway.session_key` (its `…_env` names already resolved by `load_with_env`): keys of at least
/// `session::MIN_KEY_BYTES` bytes, the previous one different from the current one.
fn session_key(k: &SessionKeySpec, errs: &mut Errors) -> SessionKeys {
    let min = crate::identity::session::MIN_KEY_BYTES;
    let current = k.current.clone().unwrap_or_default();
    // A key read from the environment is reported at the member that names its variable.
    let at = |env: &Option<String>, inline, named| if env.is_some() { named } else { inline };
    if k.current.is_none() && k.current_env.is_none() {
        fail(errs, "gateway.session_key.current", "required (or current_env)");
    } else if current.len() < min {
        let path = at(&k.current_env, "gateway.session_key.current", "gateway.session_key.current_env");
        fail(errs, path, format!("the key must be at least {min} bytes"));
    }
    if k.previous.as_ref().is_some_and(|p| p.len() < min) {
        let path = at(&k.previous_env, "gateway.session_key.previous", "gateway.session_key.previous_env");
        fail(errs, path, format!("the key must be at least {min} bytes"));
    }
    if k.previous.as_ref() == Some(&current) {
        fail(errs, "gateway.session_key.previous", "must differ from current");
    }
    SessionKeys { current: current.into_bytes(), previous: k.previous.as_ref().map(|p| p.as_bytes().to_vec()) }
}

/// `gateway.rate_limit_service`, after defaults; `None` if any value is wrong. Every limit must be
/// sayable in the protocol: fixed windows only, `max` at most 2^32 − 1.
fn rate_limit_service(spec: &RateLimitServiceSpec, limits: &[Limit], errs: &mut Errors) -> Option<RateLimitService> {
    use crate::rls::{DEFAULT_DOMAIN, DEFAULT_TIMEOUT, MAX_TIMEOUT_MS};
    let before = errs.len();
    if !printable(&spec.cluster) {
        let m = "must be 1 to 256 printable ASCII characters (an Envoy cluster name)";
        fail(errs, "gateway.rate_limit_service.cluster", m);
    }
    if let Some(a) = &spec.authority {
        if let Err(why) = crate::rls::upstream::check_authority(&spec.cluster, a) {
            fail(errs, "gateway.rate_limit_service.authority", why);
        }
    }
    let domain = spec.domain.clone().unwrap_or_else(|| DEFAULT_DOMAIN.to_owned());
    if !printable(&domain) {
        fail(errs, "gateway.rate_limit_service.domain", "must be 1 to 256 printable ASCII characters");
    }
    let text = spec.timeout.as_deref().unwrap_or(DEFAULT_TIMEOUT);
    let timeout_ms = duration_ms(text, "\"100ms\"", 1, MAX_TIMEOUT_MS)
        .map_err(|m| fail(errs, "gateway.rate_limit_service.timeout", m))
        .unwrap_or(0);
    for l in limits {
        if l.counter.len() > crate::rls::MAX_TEXT_BYTES {
            let m = format!("must be at most {} bytes with gateway.rate_limit_service", crate::rls::MAX_TEXT_BYTES);
            fail(errs, format!("{}.counter", l.path), m);
        }
        if l.algorithm == Algorithm::Sliding {
            fail(
                errs,
                format!("{}.algorithm", l.path),
                format!(
                    "limit '{}' is sliding, which the rate limit service protocol cannot express (fixed windows \
                     only); use \"fixed\" or remove gateway.rate_limit_service",
                    l.counter
                ),
            );
        }
        if l.max > u64::from(u32::MAX) {
            let m = format!("must be at most {} with gateway.rate_limit_service", u32::MAX);
            fail(errs, format!("{}.max", l.path), m);
        }
    }
    let failure_mode = spec.failure_mode.unwrap_or(FailureMode::Deny);
    (errs.len() == before).then(|| RateLimitService {
        cluster: spec.cluster.clone(),
        authority: spec.authority.clone(),
        domain,
        timeout_ms,
        failure_mode,
    })
}

/// Lifecycle methods always pass, so `gateway.methods` may not name them; `tools/call` is governed
/// by `tools` and `default`.
const NOT_CONFIGURABLE: [&str; 6] =
    ["initialize", "ping", "server/discover", "subscriptions/listen", "tools/list", "tools/call"];

/// `gateway.methods`: other MCP methods (and methods MCP does not define) by name.
pub(super) fn methods(spec: Map<Action>, errs: &mut Errors) -> NameMap<Action> {
    for name in spec.keys() {
        if NOT_CONFIGURABLE.contains(&name.as_str()) || name.starts_with("notifications/") || name.is_empty() {
            fail(
                errs,
                format!("gateway.methods.{name}"),
                "lifecycle methods always pass and tools/call follows tools/default; list other methods here",
            );
        }
    }
    hash_map(spec)
}

/// The members of `map` as a hash map, for lookups per request. Not inlined: `methods` (of
/// `Action`) and `tool_modes` (of `Mode`) are then one function, their values being of one size.
#[inline(never)]
fn hash_map<V>(map: Map<V>) -> NameMap<V> {
    map.into_iter().collect()
}
