//! [`Policy::judge`]: the one function that decides a call by name, and its [`Verdict`]. The
//! precedence is in the module documentation of `policy`.

use super::{Limit, NeedsApproval, Policy};
use crate::policy::conditions;
use crate::terms::Action;
use crate::wire::mcp::{Arguments, Call, McpMethod};

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
    /// Decide a request by name: the single place where precedence lives.
    pub fn judge(&self, call: &Call) -> Verdict<'_> {
        match call {
            Call::Tool(t) => self.judge_tool(&t.name, t.arguments.as_ref()),
            Call::Method { method: McpMethod::SubscriptionsListen, listen, .. } => self.judge_listen(listen.as_ref()),
            Call::Method { method, .. } => self.judge_method(method),
        }
    }

    /// `subscriptions/listen`: every kind it asks for is judged as the method it stands for
    /// (`protocol::SUBSCRIPTION_KINDS`); the first denied one refuses the request, naming the kind
    /// and its method. A kind the filter does not know is refused: what it would open is unknown.
    /// Allowed: under the first rule that allowed a kind; with only kinds that pass (tools
    /// list changes) or none, it passes.
    fn judge_listen(&self, listen: Option<&crate::wire::protocol::Listen>) -> Verdict<'_> {
        let Some(listen) = listen else {
            let reason = "subscriptions/listen must carry params.notifications".into();
            return Verdict::Deny { rule: "default".into(), reason };
        };
        if let Some(member) = listen.unknown() {
            return Verdict::Deny {
                rule: "unknown_subscription".into(),
                reason: format!(
                    "subscriptions/listen asks for notifications.{member}, a subscription kind this gateway does not know"
                ),
            };
        }
        let mut allowed = None;
        for kind in listen.kinds() {
            match self.judge_method(&McpMethod::from_name(kind.method)) {
                Verdict::Deny { rule, reason } => {
                    let (member, method) = (kind.member, kind.method);
                    let reason = format!(
                        "subscriptions/listen asks for notifications.{member}, which stands for {method}: {reason}"
                    );
                    return Verdict::Deny { rule, reason };
                }
                Verdict::Allow { rule, .. } => {
                    allowed.get_or_insert(rule);
                }
                Verdict::Pass => {}
            }
        }
        match allowed {
            Some(rule) => Verdict::Allow { rule, limits: vec![], approval: None },
            None => Verdict::Pass,
        }
    }

    fn judge_tool(&self, name: &str, args: Option<&Arguments>) -> Verdict<'_> {
        if self.is_hidden(name) {
            return Verdict::Deny { rule: HIDE_RULE.into(), reason: "tool is hidden by policy".into() };
        }
        if let Some((denied, r)) = self.denied_by_fold(name) {
            let reason = match (r.action, &r.reason) {
                (Action::Deny, Some(why)) => why.clone(),
                (Action::Deny, None) => "denied by policy".to_owned(),
                (Action::Allow, _) => {
                    format!("the name folds onto '{denied}', which the policy restricts: use its exact name")
                }
            };
            return Verdict::Deny { rule: format!("tools.{denied}"), reason };
        }
        let tool_rule = self.tools.get(name);
        if let (None, Some(pinned)) = (tool_rule, self.pinned_by_fold(name)) {
            let reason = format!("the name folds onto '{pinned}', which the policy pins: use its exact name");
            return Verdict::Deny { rule: format!("pins.{pinned}"), reason };
        }
        let (rule, action, reason, own): (String, Action, Option<&str>, &[usize]) = match tool_rule {
            Some(r) => (tool_rule_name(name), r.action, r.reason.as_deref(), &r.limits),
            None => match self.default_for(name) {
                Some(d) => (d.path.clone(), d.action, d.reason.as_deref(), &[]),
                None => ("default".into(), self.default, None, &[]),
            },
        };
        if let (Action::Allow, Some(r)) = (action, tool_rule) {
            if !r.require.is_empty() || !r.deny_if.is_empty() {
                // Only now is the arguments value built: most tools are decided by name alone.
                // Arguments that were sent are never judged as absent: should they not be read
                // again, they are `null`, on which no condition can be evaluated.
                let value = args.map(|a| a.value().unwrap_or(crate::wire::json::Json::Null));
                // The server's reading may take twice the arguments' text: ordinary text of any
                // script grows at most that much under NFKC (Thai's SARA AM, the commonest that
                // grows, doubles). The calls of a batch hold disjoint parts of the body, so a body's
                // readings in all stay within twice its length plus 64 bytes a call.
                let budget = args.map_or(0, |a| a.raw().len()).saturating_mul(2).saturating_add(64);
                if let Some((cond, why)) = conditions::check(&r.require, &r.deny_if, value.as_ref(), budget) {
                    return Verdict::Deny { rule: cond.rule.clone(), reason: why };
                }
            }
        }
        match action {
            Action::Deny => {
                let reason = match (reason, rule.as_str()) {
                    (Some(r), _) => r.to_owned(),
                    (None, "default") => "not allowed by policy (default: deny)".to_owned(),
                    (None, r) if r.starts_with("default_for[") => {
                        format!("denied by policy ({r}: the tool's pinned annotations match)")
                    }
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

    fn judge_method(&self, method: &McpMethod) -> Verdict<'_> {
        match method {
            McpMethod::Initialize
            | McpMethod::Ping
            | McpMethod::ServerDiscover
            | McpMethod::ToolsList
            | McpMethod::Notification(_) => Verdict::Pass,
            McpMethod::ToolsCall => {
                Verdict::Deny { rule: "default".into(), reason: "tools/call must name a tool".into() }
            }
            McpMethod::SubscriptionsListen => self.judge_listen(None),
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

/// `tools.<name>`, the rule of a tool's own entry, in one allocation of its exact size.
fn tool_rule_name(name: &str) -> String {
    let mut rule = String::with_capacity("tools.".len() + name.len());
    rule.push_str("tools.");
    rule.push_str(name);
    rule
}

/// The `rule` of a denial by the policy's `hide` list (`Policy::judge` names it so).
pub const HIDE_RULE: &str = "hide";

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::load;
    use crate::wire::mcp::ToolCall;

    fn tool(name: &str) -> Call {
        Call::Tool(ToolCall { name: name.into(), arguments: None, leg: Default::default() })
    }

    fn method(name: &str) -> Call {
        Call::Method { method: McpMethod::from_name(name), target: None, listen: None }
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

    /// A `subscriptions/listen` call asking for `kinds` (members of the filter), plus `unknown`.
    fn listen(kinds: &[&str], unknown: Option<&str>) -> Call {
        let mut filter: Vec<String> = kinds
            .iter()
            .map(|k| match k {
                &"resourceSubscriptions" => format!(r#""{k}":["file:///a"]"#),
                k => format!(r#""{k}":true"#),
            })
            .collect();
        filter.extend(unknown.map(|u| format!(r#""{u}":true"#)));
        let json = crate::wire::json::parse(format!("{{{}}}", filter.join(",")).as_bytes()).unwrap();
        let l = crate::wire::protocol::Listen::from_filter(&json).unwrap();
        Call::Method { method: McpMethod::SubscriptionsListen, target: None, listen: Some(l) }
    }

    #[test]
    fn listen_is_judged_as_the_methods_its_kinds_stand_for() {
        let p = load(
            br#"{"version":"1","default":"deny",
            "gateway":{"methods":{"resources/list":"allow","resources/subscribe":"deny","prompts/list":"allow"}}}"#,
        )
        .unwrap();
        let allow = |rule: &str| Verdict::Allow { rule: rule.into(), limits: vec![], approval: None };
        // Nothing asked, or only tool list changes (tools/list always passes): it passes.
        assert_eq!(p.judge(&listen(&[], None)), Verdict::Pass);
        assert_eq!(p.judge(&listen(&["toolsListChanged"], None)), Verdict::Pass);
        assert_eq!(
            p.judge(&listen(&["toolsListChanged", "resourcesListChanged", "promptsListChanged"], None)),
            allow("gateway.methods.prompts/list")
        );
        assert_eq!(
            p.judge(&listen(&["toolsListChanged", "resourceSubscriptions"], None)),
            deny(
                "gateway.methods.resources/subscribe",
                "subscriptions/listen asks for notifications.resourceSubscriptions, which stands for \
                 resources/subscribe: method resources/subscribe is denied by policy"
            )
        );
        // Under default deny, a kind whose method is not listed is refused by `default`.
        let strict = load(br#"{"version":"1","default":"deny"}"#).unwrap();
        for (kind, method) in [
            ("promptsListChanged", "prompts/list"),
            ("resourcesListChanged", "resources/list"),
            ("resourceSubscriptions", "resources/subscribe"),
        ] {
            let reason = format!(
                "subscriptions/listen asks for notifications.{kind}, which stands for {method}: \
                 method {method} is not allowed by policy (default: deny)"
            );
            assert_eq!(strict.judge(&listen(&["toolsListChanged", kind], None)), deny("default", &reason));
        }
        let open = load(br#"{"version":"1","default":"allow"}"#).unwrap();
        assert_eq!(open.judge(&listen(&["resourceSubscriptions"], None)), allow("default"));
    }

    #[test]
    fn listen_with_an_unknown_kind_is_refused_even_when_everything_is_allowed() {
        let open = load(br#"{"version":"1","default":"allow"}"#).unwrap();
        assert_eq!(
            open.judge(&listen(&["toolsListChanged"], Some("taskIds"))),
            deny(
                "unknown_subscription",
                "subscriptions/listen asks for notifications.taskIds, a subscription kind this gateway does not know"
            )
        );
        let bare = Call::Method { method: McpMethod::SubscriptionsListen, target: None, listen: None };
        assert_eq!(open.judge(&bare), deny("default", "subscriptions/listen must carry params.notifications"));
    }
}
