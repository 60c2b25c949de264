//! Compile a [`PolicySetSpec`] into a [`PolicySet`], reporting every problem with its JSON path.

use super::spec::{MatcherSpec, PolicySetSpec};
use super::{AttachRule, ContainRule, Matcher, PolicySet, Shared};
use crate::config::spec::{GatewaySpec, PolicySpec};
use crate::config::Map;
use crate::config::{err, fail, ConfigError, ConfigErrors};
use crate::policy::{Policy, Stance};
use crate::terms::Action;

/// The set's gateway with an otherwise empty policy: `hide: ["*"]`, so it lists no tool and denies
/// every tool call; the unattached and contained callers' policy.
fn refusing(gateway: Option<GatewaySpec>) -> PolicySpec {
    PolicySpec {
        version: "1".to_owned(),
        default: Some(Action::Deny),
        hide: vec!["*".to_owned()],
        all_tools: None,
        tools: Map::default(),
        pins: Map::default(),
        default_for: Vec::new(),
        flows: Vec::new(),
        gateway,
    }
}

/// A member name: 1 to 64 of `A-Z a-z 0-9 _ . -` (it is written in logs, access-log fields and
/// limit paths).
fn valid_name(name: &str) -> bool {
    (1..=64).contains(&name.len()) && name.bytes().all(|b| b.is_ascii_alphanumeric() || b"_.-".contains(&b))
}

/// Prefix the paths of a member's errors with `policies.NAME`.
fn within(name: &str, errors: ConfigErrors) -> impl Iterator<Item = ConfigError> + '_ {
    errors.0.into_iter().map(move |e| {
        let path = if e.path == "." { format!("policies.{name}") } else { format!("policies.{name}.{}", e.path) };
        ConfigError { path, message: e.message }
    })
}

/// Turn a parsed set into the runtime set (session-key variables already resolved).
///
/// Errors: the gateway's first (they would repeat in every member), else every problem found.
pub fn compile(spec: PolicySetSpec) -> Result<PolicySet, ConfigErrors> {
    let mut errs = Vec::new();
    if spec.version != "1" {
        fail(&mut errs, "version", "must be \"1\"");
    }
    let base = crate::config::compile(refusing(spec.gateway.clone()))?;
    let one = |e| ConfigErrors(vec![e]);
    let attach = super::read::attach(spec.attach.as_ref().map(|v| &v.0)).map_err(one)?;
    let contained = super::read::contain(spec.contain.as_ref().map(|v| &v.0)).map_err(one)?;
    let mut names = Vec::new();
    let mut members = Vec::new();
    for (name, raw) in spec.policies {
        let mut member: PolicySpec = match crate::config::read::from_json(&raw.0) {
            Ok(m) => m,
            Err(e) => {
                errs.extend(within(&name, ConfigErrors(vec![err(e.path(), e.message())])));
                names.push(name);
                continue;
            }
        };
        if !valid_name(&name) {
            fail(&mut errs, format!("policies.{name}"), "a policy name is 1 to 64 of A-Z a-z 0-9 _ . -");
        }
        if member.gateway.is_some() {
            fail(
                &mut errs,
                format!("policies.{name}.gateway"),
                "gateway settings belong at the top level of the set (one gateway per Envoy)",
            );
        }
        member.gateway = spec.gateway.clone();
        match crate::config::compile(member) {
            Ok(mut p) => {
                p.limits = std::mem::take(&mut p.limits).into_iter().map(|l| l.within(&name)).collect();
                p.name = Some(name.clone());
                members.push(Shared::new(p));
            }
            Err(e) => errs.extend(within(&name, e)),
        }
        names.push(name);
    }
    if names.is_empty() {
        fail(&mut errs, "policies", "must hold at least one policy");
    }
    let mut rules = Vec::new();
    let mut catch_all: Option<usize> = None;
    for (i, rule) in attach.iter().enumerate() {
        let path = format!("attach[{i}]");
        if let Some(earlier) = catch_all {
            fail(&mut errs, &path, format!("never tried: attach[{earlier}] matches every caller"));
        }
        let when = matchers(&rule.when, &path, &base, &mut errs);
        match names.iter().position(|n| *n == rule.policy) {
            Some(policy) => rules.push(AttachRule { policy, when }),
            None => fail(
                &mut errs,
                format!("{path}.policy"),
                format!("unknown policy '{}'; the set defines: {}", rule.policy, names.join(", ")),
            ),
        }
        if rule.when.is_empty() && catch_all.is_none() {
            catch_all = Some(i);
        }
    }
    let mut contain = Vec::new();
    for (i, c) in contained.iter().enumerate() {
        let path = format!("contain[{i}]");
        if c.when.is_empty() {
            fail(&mut errs, format!("{path}.when"), "must name the identity (at least one matcher)");
        }
        if c.reason.trim().is_empty() {
            fail(&mut errs, format!("{path}.reason"), "must not be empty: the agent is shown it");
        }
        let when = matchers(&c.when, &path, &base, &mut errs);
        // Compiled again rather than cloned: a clone of `Policy` would be compiled into the module
        // for this alone.
        match crate::config::compile(refusing(spec.gateway.clone())) {
            Ok(mut p) => {
                p.stance = Stance::Contained { reason: c.reason.clone() };
                contain.push(ContainRule { when, policy: Shared::new(p) });
            }
            Err(e) => errs.extend(e.0),
        }
    }
    if !errs.is_empty() {
        return Err(ConfigErrors(errs));
    }
    let mut unattached = base;
    unattached.stance = Stance::Unattached;
    Ok(PolicySet { members, rules, contain, unattached: Shared::new(unattached), plain: false })
}

/// The matchers of `path.when`, each checked: a claim needs `gateway.identity` and exactly one of
/// `equals` and `includes`; a grant is `sha256:` and 64 hex digits or a `gateway.grants` label, and
/// registered when `gateway.grants` lists any.
fn matchers(specs: &[MatcherSpec], path: &str, base: &Policy, errs: &mut Vec<ConfigError>) -> Vec<Matcher> {
    let mut out = Vec::new();
    for (j, m) in specs.iter().enumerate() {
        let at = format!("{path}.when[{j}]");
        let before = errs.len();
        let matcher = match (&m.claim, &m.equals, &m.includes, &m.grant) {
            (Some(claim), Some(value), None, None) => {
                Matcher::ClaimEquals { claim: claim.clone(), value: value.clone() }
            }
            (Some(claim), None, Some(value), None) => {
                if value.is_empty() || (value.contains(' ') && claim == "scope") {
                    fail(errs, format!("{at}.includes"), "can never hold: a scope entry is one non-empty word");
                }
                Matcher::ClaimIncludes { claim: claim.clone(), value: value.clone() }
            }
            (None, None, None, Some(g)) => match grant_id(g, base) {
                Ok(id) => Matcher::Grant(id),
                Err(m) => {
                    fail(errs, format!("{at}.grant"), m);
                    continue;
                }
            },
            _ => {
                fail(
                    errs,
                    &at,
                    "a matcher is {\"claim\", \"equals\"}, {\"claim\", \"includes\"} or {\"grant\"}, nothing else",
                );
                continue;
            }
        };
        if let Matcher::ClaimEquals { claim, .. } | Matcher::ClaimIncludes { claim, .. } = &matcher {
            if claim.is_empty() {
                fail(errs, format!("{at}.claim"), "must not be empty");
            }
            if base.gateway.identity.is_none() {
                fail(
                    errs,
                    format!("{at}.claim"),
                    "can never hold: claims are read only with gateway.identity (the verified token's payload)",
                );
            }
        }
        if errs.len() == before {
            out.push(matcher);
        }
    }
    out
}

/// A `grant` matcher's value: `sha256:<64 hex>` (any case) or a `gateway.grants` label.
fn grant_id(text: &str, base: &Policy) -> Result<[u8; 32], String> {
    let registry = &base.gateway.grants;
    if let Some(hex) = text.strip_prefix("sha256:") {
        let id = crate::identity::grant::from_hex32(&hex.to_ascii_lowercase())
            .ok_or_else(|| "sha256: must be followed by 64 hex digits (the SHA-256 of the credential)".to_owned())?;
        if !registry.is_empty() && !registry.contains_key(&id) {
            return Err("can never hold: not a grant of gateway.grants, which refuses every other".to_owned());
        }
        return Ok(id);
    }
    // A label may be given to several grants (the registry is a map, in no fixed order): it names
    // one only when it is that grant's alone.
    let mut named = registry.iter().filter(|(_, label)| *label == text);
    match (named.next(), named.next()) {
        (Some((id, _)), None) => Ok(*id),
        (Some(_), Some(_)) => {
            Err("labels more than one grant of gateway.grants: name the grant by sha256:<64 hex>".into())
        }
        (None, _) => Err(format!("'{text}' is neither sha256:<64 hex> nor a label of gateway.grants")),
    }
}
