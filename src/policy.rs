//! The compiled policy and the one function that decides a call by name.
//!
//! Precedence for `tools/call` (first match wins), see [`Policy::judge`]:
//! 1. `hide` names the tool (or holds `"*"`): denied, rule `hide`.
//! 2. `tools.NAME` exists: its `action` (absent means allow); rule `tools.NAME`.
//! 3. otherwise `default`; rule `default`.
//! 4. if allowed by its rule: every `require` condition holds and no `deny_if` condition does
//!    (a condition that cannot be evaluated denies; see `conditions`);
//! 5. then the tool's `limits` and `all_tools.limits` must all admit the call (see `ratelimit`);
//! 6. last, for `action: "require_approval"`, a person must approve this exact call (see `approval`):
//!    asked only once every rule above allows it, with the quota reserved meanwhile and given back
//!    unless the call goes upstream.
//!    With `gateway.rate_limit_service` (see `rls`) the order of 5 and 6 is reversed: the approval
//!    is asked first and the service counts only approved calls, since it cannot give quota back.
//!
//! Other methods: lifecycle methods pass; other MCP methods follow `gateway.methods`, else `default`;
//! methods MCP does not define are denied unless `gateway.methods` allows them.

use std::collections::{BTreeSet, HashMap};

use crate::conditions::{self, Condition};
use crate::fold::FoldedNames;
use crate::mcp::{Arguments, Call, McpMethod};

mod terms;

pub use terms::{Action, Algorithm, ApprovalMode, Mode, Scope, Window};

/// A compiled rate limit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Limit {
    pub counter: String,
    pub window: Window,
    pub max: u64,
    pub scope: Scope,
    pub algorithm: Algorithm,
    /// JSON path of the limit in the policy, e.g. `tools.vm_agent_exec.limits[0]`.
    pub path: String,
}

/// A compiled `tools.NAME` rule. `limits` index [`Policy::limits`].
#[derive(Debug, Clone)]
pub struct ToolRule {
    /// The tool by name: `Deny` for `action: "deny"`, else `Allow` (`require_approval` included:
    /// its calls are judged like allowed ones, then `approval` applies).
    pub action: Action,
    /// The rule's `reason`: shown to the agent when the tool is denied.
    pub reason: Option<String>,
    /// `action: "require_approval"`: each call the other rules allow needs a person's approval.
    pub approval: Option<NeedsApproval>,
    pub limits: Vec<usize>,
    pub require: Vec<Condition>,
    pub deny_if: Vec<Condition>,
}

/// Where the grant (the caller's credential) comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GrantSource {
    /// `Authorization: Bearer <token>` (RFC 6750 §2.1).
    Bearer,
    /// A trusted header set by an earlier filter; lower-case name.
    Header(String),
}

/// `gateway` settings after defaults.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Gateway {
    pub grant: GrantSource,
    /// Bytes.
    pub max_body_bytes: usize,
    pub max_tracked_grants: u64,
    /// Registered grants by SHA-256 of the token, with their labels; empty means any token.
    pub grants: HashMap<[u8; 32], String>,
    /// Also remove tools denied by name from `tools/list` results.
    pub hide_denied_tools: bool,
    /// Largest `tools/list` response filtered, in bytes; larger ones get 502.
    pub max_response_bytes: usize,
    /// `gateway.mode`.
    pub mode: Mode,
    /// `gateway.tool_modes`: per-tool overrides of `mode`.
    pub tool_modes: HashMap<String, Mode>,
    /// `gateway.approval`: the approval service, required when a tool uses `require_approval`.
    pub approval: Option<ApprovalService>,
    /// `gateway.protocol_versions`: the MCP protocol versions accepted.
    pub protocol_versions: crate::protocol::Versions,
    /// `gateway.session_key`: bind `Mcp-Session-Id` to its grant.
    pub session_keys: Option<crate::session::SessionKeys>,
    /// `gateway.client_responses`: forward (`Allow`, default) or refuse (`Deny`) JSON-RPC responses
    /// from the client.
    pub client_responses: Action,
    /// `gateway.rate_limit_service`: when set, it decides every limit instead of shared data.
    pub rate_limit_service: Option<crate::rls::RateLimitService>,
    /// `gateway.resource_metadata_url`: the RFC 9728 protected resource metadata URL named in the
    /// `WWW-Authenticate` challenge of every 401 (checked by `challenge::check_resource_metadata_url`).
    pub resource_metadata_url: Option<String>,
}

/// `gateway.approval` after defaults: where the filter asks for approvals (an Envoy cluster).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApprovalService {
    /// Envoy cluster name of the approval service.
    pub cluster: String,
    /// Request path of the check endpoint (default `/v1/check`).
    pub path: String,
    /// `:authority` of the callout (default: the cluster name).
    pub authority: String,
    /// Callout timeout in milliseconds (default 5000 in retry mode, 30000 in hold mode).
    pub timeout_ms: u64,
    pub mode: ApprovalMode,
    /// Hold mode: most held callouts of one grant at once, per Envoy process (`crate::held`).
    pub max_held_per_grant: u32,
}

impl ApprovalService {
    /// How long the service may hold a callout in hold mode, in seconds: one second less than the
    /// callout timeout, so its answer arrives before Envoy gives up. 0 in retry mode.
    pub fn wait_seconds(&self) -> u64 {
        match self.mode {
            ApprovalMode::Retry => 0,
            ApprovalMode::Hold => (self.timeout_ms / 1000).saturating_sub(1).max(1),
        }
    }
}

/// `action: "require_approval"` of a tool: its calls need a person's approval before they may go
/// upstream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NeedsApproval {
    /// Seconds an approval request stays open, and an approval stays usable (`approval_timeout`,
    /// default 10 minutes, 1 s to 7 days).
    pub timeout_seconds: u64,
    /// The rule's `reason`, shown to the approver and the agent.
    pub reason: Option<String>,
}

/// The runtime policy, built once per plugin configuration.
#[derive(Debug, Clone)]
pub struct Policy {
    pub default: Action,
    hide_all: bool,
    hidden: BTreeSet<String>,
    /// `hide` and the tools with `action: "deny"`, matched after folding (`fold::tool_key`).
    hidden_folded: FoldedNames,
    denied_folded: FoldedNames,
    tools: HashMap<String, ToolRule>,
    all_tools: Vec<usize>,
    pub limits: Vec<Limit>,
    methods: HashMap<String, Action>,
    pub gateway: Gateway,
}

/// The outcome of judging one request by name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict<'p> {
    /// Not subject to policy (lifecycle methods, notifications, responses).
    Pass,
    /// Allowed by `rule`, subject to `limits` (deduplicated: a shared counter is counted once) and,
    /// last, to a person's approval when `approval` is set.
    Allow {
        rule: String,
        limits: Vec<&'p Limit>,
        approval: Option<&'p NeedsApproval>,
    },
    Deny {
        rule: String,
        reason: String,
    },
}

impl Policy {
    pub(crate) fn new(
        default: Action,
        hide: Vec<String>,
        tools: HashMap<String, ToolRule>,
        all_tools: Vec<usize>,
        limits: Vec<Limit>,
        methods: HashMap<String, Action>,
        gateway: Gateway,
    ) -> Self {
        let hide_all = hide.iter().any(|h| h == "*");
        let hidden_folded = FoldedNames::new(hide.iter().map(String::as_str).filter(|h| *h != "*"));
        let denied =
            tools.iter().filter(|(_, r)| r.action == Action::Deny).map(|(n, _)| n.as_str()).collect::<Vec<_>>();
        let denied_folded = FoldedNames::new(denied);
        Policy {
            default,
            hide_all,
            hidden_folded,
            denied_folded,
            hidden: hide.into_iter().filter(|h| h != "*").collect(),
            tools,
            all_tools,
            limits,
            methods,
            gateway,
        }
    }

    /// Is `tool` hidden (by name or by `"*"`)? A name that folds onto a hidden name (`Delete_VM`,
    /// `delete\u200bvm`, `delete-vm` for `delete_vm`; see `fold::tool_key`) is hidden too.
    pub fn is_hidden(&self, tool: &str) -> bool {
        self.hide_all || self.hidden.contains(tool) || self.hidden_folded.find(tool).is_some()
    }

    /// The tool with `action: "deny"` that `tool` folds onto without being it, if any: deny rules
    /// match folded names, allow rules only exact ones.
    fn denied_by_fold(&self, tool: &str) -> Option<(&str, &ToolRule)> {
        let denied = self.denied_folded.find(tool).filter(|d| *d != tool)?;
        self.tools.get_key_value(denied).map(|(n, r)| (n.as_str(), r))
    }

    /// Is `tool` removed from `tools/list` results? Hidden tools always are; with
    /// `gateway.hide_denied_tools`, so is every tool denied by name alone (unlisted under
    /// `default: "deny"`, or `action: "deny"`). Tools denied only by argument conditions stay listed.
    pub fn is_unlisted(&self, tool: &str) -> bool {
        if self.is_hidden(tool) {
            return true;
        }
        self.gateway.hide_denied_tools
            && (self.tools.get(tool).map_or(self.default, |r| r.action) == Action::Deny
                || self.denied_by_fold(tool).is_some())
    }

    /// The mode for a call to `tool` (`None`: not a tool call): its `gateway.tool_modes` entry, else
    /// `gateway.mode`.
    pub fn mode_for(&self, tool: Option<&str>) -> Mode {
        tool.and_then(|t| self.gateway.tool_modes.get(t)).copied().unwrap_or(self.gateway.mode)
    }

    /// Does any tool leave `tools/list`? (If not, responses need not be inspected.)
    pub fn filters_tools_list(&self) -> bool {
        self.hide_all || !self.hidden.is_empty() || self.gateway.hide_denied_tools
    }

    /// Tool names the policy lists under `tools`.
    pub fn listed_tools(&self) -> impl Iterator<Item = &str> {
        self.tools.keys().map(String::as_str)
    }

    /// Tool names whose calls need a person's approval (`action: "require_approval"`).
    pub fn approval_tools(&self) -> impl Iterator<Item = &str> {
        self.tools.iter().filter(|(_, r)| r.approval.is_some()).map(|(n, _)| n.as_str())
    }

    /// The rule of a tool listed under `tools`.
    pub fn tool_rule(&self, tool: &str) -> Option<&ToolRule> {
        self.tools.get(tool)
    }

    /// Does `all_tools.limits` hold a limit (one every tool call counts against)?
    pub fn has_all_tools_limits(&self) -> bool {
        !self.all_tools.is_empty()
    }

    /// Every tool name the policy mentions (`tools` and `hide`), each once: the bounded set of
    /// per-tool metric labels.
    pub fn named_tools(&self) -> Vec<&str> {
        let mut names: Vec<&str> = self.listed_tools().chain(self.hidden.iter().map(String::as_str)).collect();
        names.sort_unstable();
        names.dedup();
        names
    }

    /// Decide a request by name: the single place where precedence lives.
    pub fn judge(&self, call: &Call) -> Verdict<'_> {
        match call {
            Call::Tool(t) => self.judge_tool(&t.name, t.arguments.as_ref()),
            Call::Method { method, .. } => self.judge_method(method),
        }
    }

    fn judge_tool(&self, name: &str, args: Option<&Arguments>) -> Verdict<'_> {
        if self.is_hidden(name) {
            return Verdict::Deny { rule: "hide".into(), reason: "tool is hidden by policy".into() };
        }
        if let Some((denied, r)) = self.denied_by_fold(name) {
            let reason = r.reason.clone().unwrap_or_else(|| "denied by policy".to_owned());
            return Verdict::Deny { rule: format!("tools.{denied}"), reason };
        }
        let tool_rule = self.tools.get(name);
        let (rule, action, reason, own): (String, Action, Option<&str>, &[usize]) = match tool_rule {
            Some(r) => (format!("tools.{name}"), r.action, r.reason.as_deref(), &r.limits),
            None => ("default".into(), self.default, None, &[]),
        };
        if let (Action::Allow, Some(r)) = (action, tool_rule) {
            if !r.require.is_empty() || !r.deny_if.is_empty() {
                // Only now is the arguments value built: most tools are decided by name alone.
                let value = args.and_then(Arguments::value);
                if let Some((cond, why)) = conditions::check(&r.require, &r.deny_if, value.as_ref()) {
                    return Verdict::Deny { rule: cond.rule.clone(), reason: why };
                }
            }
        }
        match action {
            Action::Deny => {
                let reason = match (reason, rule.as_str()) {
                    (Some(r), _) => r.to_owned(),
                    (None, "default") => "not allowed by policy (default: deny)".to_owned(),
                    (None, _) => "denied by policy".to_owned(),
                };
                Verdict::Deny { rule, reason }
            }
            Action::Allow => Verdict::Allow {
                rule,
                limits: self.limits_for(own),
                approval: tool_rule.and_then(|r| r.approval.as_ref()),
            },
        }
    }

    /// Does `gateway.methods` allow the method `name` explicitly?
    pub fn allows_method_by_name(&self, name: &str) -> bool {
        self.methods.get(name) == Some(&Action::Allow)
    }

    fn judge_method(&self, method: &McpMethod) -> Verdict<'_> {
        match method {
            McpMethod::Initialize
            | McpMethod::Ping
            | McpMethod::ServerDiscover
            | McpMethod::SubscriptionsListen
            | McpMethod::ToolsList
            | McpMethod::Notification(_) => Verdict::Pass,
            McpMethod::ToolsCall => {
                Verdict::Deny { rule: "default".into(), reason: "tools/call must name a tool".into() }
            }
            other => {
                let name = other.name();
                match (self.methods.get(name), other) {
                    (Some(Action::Allow), _) => {
                        Verdict::Allow { rule: format!("gateway.methods.{name}"), limits: vec![], approval: None }
                    }
                    (Some(Action::Deny), _) => Verdict::Deny {
                        rule: format!("gateway.methods.{name}"),
                        reason: format!("method {name} is denied by policy"),
                    },
                    (None, McpMethod::Other(_)) => Verdict::Deny {
                        rule: "unknown_method".into(),
                        reason: format!("method {name} is not an MCP method this gateway knows"),
                    },
                    (None, _) => match self.default {
                        Action::Allow => Verdict::Allow { rule: "default".into(), limits: vec![], approval: None },
                        Action::Deny => Verdict::Deny {
                            rule: "default".into(),
                            reason: format!("method {name} is not allowed by policy (default: deny)"),
                        },
                    },
                }
            }
        }
    }

    /// The tool's own limits then `all_tools.limits`, each distinct counter once. Limits that share a
    /// counter, window, scope and algorithm share one count; the call must fit under the smallest `max`.
    fn limits_for(&self, own: &[usize]) -> Vec<&Limit> {
        let mut out: Vec<&Limit> = Vec::new();
        for l in own.iter().chain(self.all_tools.iter()).filter_map(|&i| self.limits.get(i)) {
            match out.iter_mut().find(|o| {
                o.counter == l.counter && o.window == l.window && o.scope == l.scope && o.algorithm == l.algorithm
            }) {
                Some(existing) if l.max < existing.max => *existing = l,
                Some(_) => {}
                None => out.push(l),
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::load;
    use crate::mcp::ToolCall;

    fn tool(name: &str) -> Call {
        Call::Tool(ToolCall { name: name.into(), arguments: None, leg: Default::default() })
    }

    fn method(name: &str) -> Call {
        Call::Method { method: McpMethod::from_name(name), target: None }
    }

    fn policy() -> Policy {
        load(
            br#"{"version":"1","default":"deny","hide":["secret"],
            "all_tools":{"limits":[{"counter":"all","window":"hour","max":100,"scope":"global"},
                                   {"counter":"shared","window":"minute","max":5}]},
            "tools":{"list_vms":{},"secret":{},
                     "stop_vm":{"action":"deny","reason":"needs a change ticket"},
                     "nuke":{"action":"deny"},
                     "vm_agent_exec":{"limits":[{"counter":"shared","window":"minute","max":3},
                                                {"counter":"x","window":"second","max":2}]}},
            "gateway":{"methods":{"resources/read":"allow","prompts/get":"deny","x/custom":"allow"}}}"#,
        )
        .unwrap()
    }

    fn deny(rule: &str, reason: &str) -> Verdict<'static> {
        Verdict::Deny { rule: rule.into(), reason: reason.into() }
    }

    #[test]
    fn hide_wins_over_a_listed_rule() {
        assert_eq!(policy().judge(&tool("secret")), deny("hide", "tool is hidden by policy"));
    }

    #[test]
    fn hide_star_hides_everything() {
        let p = load(br#"{"version":"1","default":"allow","hide":["*"],"tools":{"a":{}}}"#).unwrap();
        assert_eq!(p.judge(&tool("a")), deny("hide", "tool is hidden by policy"));
        assert_eq!(p.judge(&tool("b")), deny("hide", "tool is hidden by policy"));
    }

    #[test]
    fn listed_empty_rule_allows_under_default_deny() {
        let p = policy();
        let Verdict::Allow { rule, limits, .. } = p.judge(&tool("list_vms")) else { panic!() };
        assert_eq!(rule, "tools.list_vms");
        let paths: Vec<&str> = limits.iter().map(|l| l.path.as_str()).collect();
        assert_eq!(paths, ["all_tools.limits[0]", "all_tools.limits[1]"]);
    }

    #[test]
    fn deny_action_uses_its_reason_or_a_default_text() {
        let p = policy();
        assert_eq!(p.judge(&tool("stop_vm")), deny("tools.stop_vm", "needs a change ticket"));
        assert_eq!(p.judge(&tool("nuke")), deny("tools.nuke", "denied by policy"));
    }

    #[test]
    fn unlisted_tools_follow_default() {
        assert_eq!(policy().judge(&tool("delete_vm")), deny("default", "not allowed by policy (default: deny)"));
        assert_eq!(policy().judge(&tool("LIST_VMS")), deny("default", "not allowed by policy (default: deny)"));
        let p = load(
            br#"{"version":"1","default":"allow","all_tools":{"limits":[{"counter":"a","window":"day","max":9}]}}"#,
        )
        .unwrap();
        let Verdict::Allow { rule, limits, .. } = p.judge(&tool("anything")) else { panic!() };
        assert_eq!((rule.as_str(), limits.len(), limits[0].max), ("default", 1, 9));
    }

    #[test]
    fn shared_counters_are_counted_once_at_the_smallest_max() {
        let p = policy();
        let Verdict::Allow { limits, .. } = p.judge(&tool("vm_agent_exec")) else { panic!() };
        let got: Vec<(&str, u64)> = limits.iter().map(|l| (l.counter.as_str(), l.max)).collect();
        assert_eq!(got, [("shared", 3), ("x", 2), ("all", 100)]);
    }

    #[test]
    fn conditions_run_after_the_action_and_before_limits() {
        let p = load(
            br#"{"version":"1","default":"deny","hide":["h"],
            "tools":{"vm_agent_exec":{"require":[{"path":"args.vmid","op":"in","value":[100,101]}],
                                      "deny_if":[{"path":"args.command","op":"regex","value":"(^|[;&|\\s])rm\\s","reason":"destructive command"}],
                                      "limits":[{"counter":"c","window":"minute","max":10}]},
                     "h":{"require":[{"path":"args.x","op":"exists"}]},
                     "d":{"action":"deny","require":[{"path":"args.x","op":"exists"}]}}}"#,
        )
        .unwrap();
        let call = |name: &str, args: &str| {
            Call::Tool(ToolCall {
                name: name.into(),
                arguments: Some(Arguments::from_json_text(args).unwrap()),
                leg: Default::default(),
            })
        };
        let Verdict::Allow { rule, limits, .. } = p.judge(&call("vm_agent_exec", r#"{"vmid":100,"command":"uptime"}"#))
        else {
            panic!()
        };
        assert_eq!((rule.as_str(), limits.len()), ("tools.vm_agent_exec", 1));
        assert_eq!(
            p.judge(&call("vm_agent_exec", r#"{"vmid":102,"command":"uptime"}"#)),
            deny("tools.vm_agent_exec.require[0]", "required condition not met: args.vmid in")
        );
        assert_eq!(
            p.judge(&call("vm_agent_exec", r#"{"vmid":"100","command":"uptime"}"#)),
            deny("tools.vm_agent_exec.require[0]", "required condition cannot be evaluated: args.vmid in")
        );
        assert_eq!(
            p.judge(&call("vm_agent_exec", r#"{"vmid":101,"command":"cd /; rm -rf x"}"#)),
            deny("tools.vm_agent_exec.deny_if[0]", "destructive command")
        );
        assert_eq!(
            p.judge(&Call::Tool(ToolCall { name: "vm_agent_exec".into(), arguments: None, leg: Default::default() })),
            deny("tools.vm_agent_exec.require[0]", "required condition cannot be evaluated: args.vmid in")
        );
        assert_eq!(p.judge(&call("h", r#"{"x":1}"#)), deny("hide", "tool is hidden by policy"));
        assert_eq!(p.judge(&call("d", r#"{"x":1}"#)), deny("tools.d", "denied by policy"));
    }

    #[test]
    fn lifecycle_methods_pass() {
        let p = policy();
        for m in ["initialize", "ping", "tools/list", "notifications/initialized"] {
            assert_eq!(p.judge(&method(m)), Verdict::Pass, "{m}");
        }
    }

    #[test]
    fn other_methods_follow_gateway_methods_then_default() {
        let p = policy();
        assert_eq!(
            p.judge(&method("resources/read")),
            Verdict::Allow { rule: "gateway.methods.resources/read".into(), limits: vec![], approval: None }
        );
        assert_eq!(
            p.judge(&method("prompts/get")),
            deny("gateway.methods.prompts/get", "method prompts/get is denied by policy")
        );
        assert_eq!(
            p.judge(&method("completion/complete")),
            deny("default", "method completion/complete is not allowed by policy (default: deny)")
        );
        let open = load(br#"{"version":"1","default":"allow"}"#).unwrap();
        assert_eq!(
            open.judge(&method("resources/read")),
            Verdict::Allow { rule: "default".into(), limits: vec![], approval: None }
        );
    }

    #[test]
    fn unknown_methods_are_denied_unless_allowed_by_name() {
        let open = load(br#"{"version":"1","default":"allow"}"#).unwrap();
        assert_eq!(
            open.judge(&method("x/secret")),
            deny("unknown_method", "method x/secret is not an MCP method this gateway knows")
        );
        assert_eq!(
            policy().judge(&method("x/custom")),
            Verdict::Allow { rule: "gateway.methods.x/custom".into(), limits: vec![], approval: None }
        );
    }
}
