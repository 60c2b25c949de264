//! Compile a parsed [`PolicySpec`] into the runtime [`Policy`]: one function per section of the
//! document, each checking its values and reporting every problem with its JSON path.
//!
//! The sections are compiled in document order (`version`, `hide`, `all_tools`, `tools`, `pins`,
//! then `gateway` key by key, `flows`, `default_for`), which is also the order of the errors reported.

use super::spec::{AllToolsSpec, ConditionSpec, LimitSpec, OpName, PolicySpec, ToolAction, ToolRuleSpec};
use super::Map;
use super::{
    err, fail, ConfigError, ConfigErrors, DEFAULT_APPROVAL_TIMEOUT, MAX_APPROVAL_TIMEOUT_SECONDS, MAX_REGEX_LEN,
    MAX_SLIDING_MAX,
};
use crate::limits::Limit;
use crate::policy::conditions::{self, Condition, Op};
use crate::policy::{NameMap, NeedsApproval, Policy, ToolRule};
use crate::terms::Action;
use crate::terms::Algorithm;
use crate::wire::json::Json;

mod flows;
mod gateway;
mod pins;
mod result;

pub use gateway::sessions_unbound;
use gateway::{gateway, methods};

type Errors = Vec<ConfigError>;

/// Examples of durations, for error messages.
const TIMEOUT_LIKE: &str = "\"30s\" or \"10m\"";

/// Turn a parsed spec into the runtime policy.
///
/// Errors: every problem found, in document order (see the module documentation).
pub fn compile(spec: PolicySpec) -> Result<Policy, ConfigErrors> {
    let mut errs = Errors::new();
    if spec.version != "1" {
        fail(&mut errs, "version", "must be \"1\"");
    }
    hide(&spec.hide, &mut errs);
    let mut limits = Vec::new();
    let all_tools = all_tools(spec.all_tools.as_ref(), &mut limits, &mut errs);
    let tools = tools(&spec.tools, &mut limits, &mut errs);
    let pinned = pins::pins(&spec.pins, &spec.tools, &mut errs);
    let mut gw = spec.gateway.unwrap_or_default();
    let methods_spec = std::mem::take(&mut gw.methods);
    let gateway = gateway(gw, &spec.tools, &limits, &mut errs);
    if gateway.rate_limit_service.is_some() {
        descriptor_bound(&spec.tools, &tools, &all_tools, &limits, &mut errs);
    }
    let methods = methods(methods_spec, &mut errs);
    let service = gateway.rate_limit_service.is_some();
    let flows = flows::flows(&spec.flows, &tools, service, &mut errs);
    let default_for = pins::default_for(&spec.default_for, !spec.pins.is_empty(), gateway.pins, &mut errs);
    let mut policy =
        Policy::new(spec.default.unwrap_or(Action::Deny), spec.hide, tools, all_tools, limits, methods, gateway)
            .with_pins(pinned, default_for);
    policy.flows = flows;
    if !errs.is_empty() {
        return Err(ConfigErrors(errs));
    }
    Ok(policy)
}

/// With the rate limit service, one call must fit in one `RateLimitRequest`: its tool's limits and
/// `all_tools.limits` make one descriptor per distinct (counter, scope, window), at most
/// [`crate::rls::MAX_DESCRIPTORS`], which the service takes. Beyond it every call of the tool would
/// be refused; only a batch of several such calls is refused at run time.
fn descriptor_bound(
    specs: &Map<ToolRuleSpec>,
    tools: &NameMap<ToolRule>,
    all_tools: &[usize],
    limits: &[Limit],
    errs: &mut Errors,
) {
    let max = crate::rls::MAX_DESCRIPTORS;
    // Distinct (counter, scope, window), counted up to max + 1: `seen` stays short.
    let count = |own: &[usize]| {
        let mut seen: Vec<&Limit> = Vec::new();
        for l in own.iter().chain(all_tools).filter_map(|&i| limits.get(i)) {
            if !seen.iter().any(|o| o.counter == l.counter && o.scope == l.scope && o.window == l.window) {
                seen.push(l);
                if seen.len() > max {
                    break;
                }
            }
        }
        seen.len()
    };
    let why = |what: &str| {
        format!(
            "with gateway.rate_limit_service one call counts against at most {max} distinct limits (counter, scope \
             and window: one RLS descriptor each); {what} make more"
        )
    };
    if count(&[]) > max {
        fail(errs, "all_tools.limits", why("these"));
        return;
    }
    for name in specs.keys() {
        if let Some(rule) = tools.get(name).filter(|r| r.action == Action::Allow) {
            if count(&rule.limits) > max {
                fail(errs, format!("tools.{name}.limits"), why("these and all_tools.limits"));
            }
        }
    }
}

/// `hide`: tool names, none empty.
fn hide(names: &[String], errs: &mut Errors) {
    for (i, name) in names.iter().enumerate() {
        if name.is_empty() {
            fail(errs, format!("hide[{i}]"), "must not be empty");
        }
    }
}

/// `all_tools.limits`, appended to `limits`; returns their indices there.
fn all_tools(spec: Option<&AllToolsSpec>, limits: &mut Vec<Limit>, errs: &mut Errors) -> Vec<usize> {
    let Some(all) = spec else { return Vec::new() };
    limit_list(&all.limits, "all_tools.limits", limits, errs)
}

/// Compiles a list of limits at `base` into `limits`; returns the indices of those that compiled.
fn limit_list(specs: &[LimitSpec], base: &str, limits: &mut Vec<Limit>, errs: &mut Errors) -> Vec<usize> {
    let mut own = Vec::new();
    for (i, l) in specs.iter().enumerate() {
        match limit(l, format!("{base}[{i}]")) {
            Ok(compiled) => {
                own.push(limits.len());
                limits.push(compiled);
            }
            Err(e) => errs.push(e),
        }
    }
    own
}

/// One limit at `path`: a counter name, `max` at least 1 (at most [`MAX_SLIDING_MAX`] if sliding).
fn limit(spec: &LimitSpec, path: String) -> Result<Limit, ConfigError> {
    if spec.counter.is_empty() {
        return Err(err(format!("{path}.counter"), "must not be empty"));
    }
    if spec.max == 0 {
        return Err(err(format!("{path}.max"), "must be at least 1"));
    }
    if spec.algorithm == Algorithm::Sliding && spec.max > MAX_SLIDING_MAX {
        return Err(err(format!("{path}.max"), super::SLIDING_MAX_TOO_LARGE));
    }
    Ok(Limit::new(spec.counter.clone(), spec.window, spec.max, spec.scope, spec.algorithm, path))
}

/// `tools`: each rule, its own limits appended to `limits`.
fn tools(specs: &Map<ToolRuleSpec>, limits: &mut Vec<Limit>, errs: &mut Errors) -> NameMap<ToolRule> {
    let mut tools = NameMap::default();
    for (name, rule) in specs {
        if name.is_empty() {
            fail(errs, "tools", "tool names must not be empty");
        }
        tools.insert(name.clone(), tool(rule, &format!("tools.{name}"), limits, errs));
    }
    tools
}

/// `tools.NAME`: conditions, limits, and the action (`require_approval` with its timeout).
fn tool(rule: &ToolRuleSpec, path: &str, limits: &mut Vec<Limit>, errs: &mut Errors) -> ToolRule {
    let require = condition_list(&rule.require, &format!("{path}.require"), errs);
    let deny_if = condition_list(&rule.deny_if, &format!("{path}.deny_if"), errs);
    let own = limit_list(&rule.limits, &format!("{path}.limits"), limits, errs);
    let approval = match (rule.action, &rule.approval_timeout) {
        (Some(ToolAction::RequireApproval), t) => {
            let text = t.as_deref().unwrap_or(DEFAULT_APPROVAL_TIMEOUT);
            match duration_ms(text, TIMEOUT_LIKE, 1000, MAX_APPROVAL_TIMEOUT_SECONDS * 1000) {
                Ok(ms) => Some(NeedsApproval { timeout_seconds: ms.div_ceil(1000), reason: rule.reason.clone() }),
                Err(m) => {
                    fail(errs, format!("{path}.approval_timeout"), m);
                    None
                }
            }
        }
        (_, Some(_)) => {
            fail(errs, format!("{path}.approval_timeout"), "only applies to action \"require_approval\"");
            None
        }
        (_, None) => None,
    };
    ToolRule {
        action: match rule.action {
            Some(ToolAction::Deny) => Action::Deny,
            Some(ToolAction::Allow | ToolAction::RequireApproval) | None => Action::Allow,
        },
        reason: rule.reason.clone(),
        approval,
        limits: own,
        require,
        deny_if,
        marks: flows::tool_marks(&rule.marks, path, errs),
        // A tool that marks its grant has its results read (to know it was answered with one).
        result: match (&rule.result, rule.marks.is_empty()) {
            (Some(r), _) => Some(result::result(r, path, errs)),
            (None, false) => Some(crate::policy::result::ResultRules {
                path: path.to_owned(),
                max_bytes: None,
                deny_if: Vec::new(),
                redact: Vec::new(),
                mark_if: Vec::new(),
            }),
            (None, true) => None,
        },
        pin: rule.pin.as_deref().and_then(|p| result::pin(p, path, errs)),
    }
}

fn condition_list(specs: &[ConditionSpec], base: &str, errs: &mut Errors) -> Vec<Condition> {
    let mut out = Vec::new();
    for (i, c) in specs.iter().enumerate() {
        match condition(c, format!("{base}[{i}]")) {
            Ok(cond) => out.push(cond),
            Err(e) => errs.push(e),
        }
    }
    out
}

/// One condition at `rule`: its path, and a value of the shape its op needs (a regex that compiles).
fn condition(spec: &ConditionSpec, rule: String) -> Result<Condition, ConfigError> {
    let path = conditions::parse_path(&spec.path).map_err(|m| err(format!("{rule}.path"), m))?;
    let vpath = format!("{rule}.value");
    let value = spec.value.as_ref().map(|v| v.0.clone());
    let need = |what: &str| err(&vpath, format!("op {} needs {what}", spec.op.name()));
    let op = match (spec.op, value) {
        (OpName::Exists, None) => Op::Exists(true),
        (OpName::Exists, Some(Json::Bool(b))) => Op::Exists(b),
        (OpName::Exists, Some(_)) => return Err(need("no value, or a boolean")),
        (_, None) => return Err(need("a value")),
        (OpName::Eq, Some(v)) => Op::Eq(v),
        (OpName::Neq, Some(v)) => Op::Neq(v),
        (OpName::In, Some(Json::Array(v))) => Op::In(v),
        (OpName::NotIn, Some(Json::Array(v))) => Op::NotIn(v),
        (OpName::In | OpName::NotIn, Some(_)) => return Err(need("an array")),
        (OpName::Lt, Some(v @ Json::Number(_))) => Op::Lt(v),
        (OpName::Lte, Some(v @ Json::Number(_))) => Op::Lte(v),
        (OpName::Gt, Some(v @ Json::Number(_))) => Op::Gt(v),
        (OpName::Gte, Some(v @ Json::Number(_))) => Op::Gte(v),
        (OpName::Lt | OpName::Lte | OpName::Gt | OpName::Gte, Some(_)) => return Err(need("a number")),
        (OpName::Regex, Some(Json::String(src))) => {
            if src.len() > MAX_REGEX_LEN {
                return Err(err(&vpath, super::REGEX_TOO_LONG));
            }
            let regex = regex_lite::Regex::new(&src).map_err(|e| err(&vpath, format!("invalid regex: {e}")))?;
            Op::Regex(crate::policy::needle::Needle::new(regex))
        }
        (OpName::Regex, Some(_)) => return Err(need("a string (the regex)")),
        (OpName::Contains, Some(v)) => Op::Contains(v),
    };
    Ok(Condition { path_text: spec.path.clone(), path, op, reason: spec.reason.clone(), rule })
}

/// A duration such as `"30s"`, `"10m"` or `"1h 30m"` (humantime syntax) in milliseconds, between
/// `min_ms` and `max_ms`; `like` gives examples for the error message.
fn duration_ms(text: &str, like: &str, min_ms: u64, max_ms: u64) -> Result<u64, String> {
    let d = humantime::parse_duration(text).map_err(|e| format!("not a duration like {like}: {e}"))?;
    let ms = u64::try_from(d.as_millis()).unwrap_or(u64::MAX);
    if ms < min_ms || ms > max_ms {
        return Err(format!("must be between {} ms and {} s", min_ms, max_ms / 1000));
    }
    Ok(ms)
}
