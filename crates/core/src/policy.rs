//! The compiled policy and the one function that decides a call by name.
//!
//! Precedence for `tools/call` (first match wins), see [`Policy::judge`]:
//! 1. `hide` names the tool (or holds `"*"`): denied, rule `hide`.
//! 2. `tools.NAME` exists: its `action` (absent means allow); rule `tools.NAME`.
//! 3. otherwise, for a tool in `pins`: the first `default_for` rule its pinned annotations match;
//!    rule `default_for[i]` (an allow holds only once this Envoy saw the definition match its
//!    pin, else `default` decides: see `pinned`);
//! 4. otherwise `default`; rule `default`.
//! 5. if allowed by its rule: every `require` condition holds and no `deny_if` condition does
//!    (a condition that cannot be evaluated denies; see `conditions`);
//! 6. then the tool's `limits` and `all_tools.limits` must all admit the call (see `ratelimit`);
//! 7. last, for `action: "require_approval"`, a person must approve this exact call (see `approval`):
//!    asked only once every rule above allows it, with the quota reserved meanwhile and given back
//!    unless the call goes upstream.
//!    With `gateway.rate_limit_service` (see `rls`) the order of 6 and 7 is reversed: the approval
//!    is asked first and the service counts only approved calls, since it cannot give quota back.
//!
//! Other methods: lifecycle methods pass; other MCP methods follow `gateway.methods`, else `default`;
//! methods MCP does not define are denied unless `gateway.methods` allows them.
//!
//! Layer `policy` (crate docs); may use: `terms`, `wire`, `identity`, `limits`.

use std::collections::BTreeSet;

use crate::wire::fold::FoldedNames;

pub mod conditions;
pub mod flows;
mod gateway;
mod judge;
pub mod needle;
pub mod pinned;
pub mod result;
mod rules;

use crate::terms::{Action, Mode};
pub use gateway::{ApprovalService, Gateway, GrantSource, IdentitySource, RateLimitService};
pub use judge::{Verdict, HIDE_RULE};
pub use rules::{NeedsApproval, ToolRule};

use crate::limits::Limit;

pub use crate::wire::{NameHasher, NameMap};

/// The runtime policy, built once per plugin configuration.
#[derive(Debug, Clone)]
pub struct Policy {
    pub default: Action,
    hide_all: bool,
    hidden: BTreeSet<String>,
    /// `hide` and the tools with `action: "deny"`, matched after folding (`fold::tool_key`).
    hidden_folded: FoldedNames,
    denied_folded: FoldedNames,
    /// Under `default: "allow"`, the tools the policy restricts (`ToolRule::restricts`), matched
    /// after folding.
    restricted_folded: FoldedNames,
    /// The tools `gateway.tool_modes` enforces, matched after folding ([`Policy::mode_for`]).
    enforced_folded: FoldedNames,
    /// Under `default: "allow"`, the tools of `pins`, matched after folding ([`Policy::pinned_by_fold`]).
    pinned_folded: FoldedNames,
    tools: NameMap<ToolRule>,
    all_tools: Vec<usize>,
    pub limits: Vec<Limit>,
    methods: NameMap<Action>,
    pub gateway: Gateway,
    /// Its name in a policy set (`policies.NAME`); `None` for a plain `policy.json`.
    pub name: Option<String>,
    /// Whether it is a caller's attached policy, or stands for a caller with none or a contained one.
    pub stance: Stance,
    /// `flows`: rules across calls (`flows`).
    pub flows: Vec<flows::Flow>,
    /// `pins`: reviewed definitions of tools not under `tools` (`pinned`).
    pinned: NameMap<pinned::Pinned>,
    /// `default_for`: those tools decided by their pinned annotations (`pinned`).
    default_for: Vec<pinned::DefaultFor>,
}

/// What a policy of a set stands for: an attached policy, or the refusal of every call of a caller
/// that has none (`no_policy`) or is contained (`contained`, with the operator's reason). The last
/// two deny every tool call and hide every tool; lifecycle methods still pass, so a client can
/// connect and read the refusal.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Stance {
    Attached,
    Unattached,
    Contained { reason: String },
}

impl Policy {
    pub(crate) fn new(
        default: Action,
        hide: Vec<String>,
        tools: NameMap<ToolRule>,
        all_tools: Vec<usize>,
        limits: Vec<Limit>,
        methods: NameMap<Action>,
        gateway: Gateway,
    ) -> Self {
        let hide_all = hide.iter().any(|h| h == "*");
        let hidden_folded = FoldedNames::new(hide.iter().map(String::as_str).filter(|h| *h != "*"));
        // Under `default: "allow"` a name that folds onto a restricted tool's would be allowed
        // unrestricted, by a server that folds names run as that tool: so restricted tools match
        // folded names too, as deny rules do. Two sets: a deny rule wins over a restricted one
        // whatever their names, which decide only within a set.
        let denied = tools.iter().filter(|(_, r)| r.action == Action::Deny).map(|(n, _)| n.as_str());
        let denied_folded = FoldedNames::new(denied);
        let restricts = |r: &ToolRule| default == Action::Allow && r.action != Action::Deny && r.restricts();
        let restricted = tools.iter().filter(|(_, r)| restricts(r)).map(|(n, _)| n.as_str());
        let restricted_folded = FoldedNames::new(restricted);
        let enforced = gateway.tool_modes.iter().filter(|(_, m)| **m == Mode::Enforce).map(|(n, _)| n.as_str());
        let enforced_folded = FoldedNames::new(enforced);
        // Inserted one by one: `collect` into a set sorts first, which links another sort (3.5 KB).
        let mut hidden = BTreeSet::new();
        for h in hide.into_iter().filter(|h| h != "*") {
            hidden.insert(h);
        }
        Policy {
            default,
            hide_all,
            hidden_folded,
            denied_folded,
            restricted_folded,
            enforced_folded,
            pinned_folded: FoldedNames::default(),
            hidden,
            tools,
            all_tools,
            limits,
            methods,
            gateway,
            flows: Vec::new(),
            pinned: NameMap::default(),
            default_for: Vec::new(),
            name: None,
            stance: Stance::Attached,
        }
    }

    /// The policy with its `pins` and `default_for`.
    pub(crate) fn with_pins(mut self, pinned: NameMap<pinned::Pinned>, default_for: Vec<pinned::DefaultFor>) -> Self {
        if self.default == Action::Allow {
            self.pinned_folded = FoldedNames::new(pinned.keys().map(String::as_str));
        }
        self.pinned = pinned;
        self.default_for = default_for;
        self
    }

    /// Under `default: "allow"`, the pinned tool that `tool` folds onto without being it, if any:
    /// a server that folds names would run that tool, which `default_for` or its pin decides. A
    /// pinned tool called by its exact name is decided by its own pin.
    pub(crate) fn pinned_by_fold(&self, tool: &str) -> Option<&str> {
        if self.pinned.contains_key(tool) {
            return None;
        }
        self.pinned_folded.find(tool)
    }

    /// Is `tool` hidden (by name or by `"*"`)? A name that folds onto a hidden name (`Delete_VM`,
    /// `delete\u200bvm`, `delete-vm` for `delete_vm`; see `fold::tool_key`) is hidden too.
    pub fn is_hidden(&self, tool: &str) -> bool {
        self.hide_all || self.hidden.contains(tool) || self.hidden_folded.find(tool).is_some()
    }

    /// The tool with `action: "deny"` (or, under `default: "allow"`, a restricted one) that `tool`
    /// folds onto without being it, if any: those rules match folded names, other allow rules only
    /// exact ones.
    fn denied_by_fold(&self, tool: &str) -> Option<(&str, &ToolRule)> {
        // `tool` itself is in neither set where one is consulted: not among the denied (its own
        // rule does not deny), and not among the restricted (it has no rule).
        let onto = |set: &FoldedNames| {
            let (name, rule) = self.tools.get_key_value(set.find(tool)?)?;
            Some((name.as_str(), rule))
        };
        // A name with a deny rule of its own is refused by it; a restricted tool's folded names
        // only when they have no rule of their own.
        match self.tools.get(tool) {
            Some(r) if r.action == Action::Deny => None,
            Some(_) => onto(&self.denied_folded),
            None => onto(&self.denied_folded).or_else(|| onto(&self.restricted_folded)),
        }
    }

    /// Is `tool` removed from `tools/list` results? Hidden tools always are; with
    /// `gateway.hide_denied_tools`, so is every tool denied by name alone (unlisted under
    /// `default: "deny"`, or `action: "deny"`). Tools denied only by argument conditions stay listed.
    pub fn is_unlisted(&self, tool: &str) -> bool {
        if self.is_hidden(tool) {
            return true;
        }
        self.gateway.hide_denied_tools
            && (self.action_by_name(tool) == Action::Deny || self.denied_by_fold(tool).is_some())
    }

    /// The mode for a call to `tool` (`None`: not a tool call): its `gateway.tool_modes` entry, else
    /// `gateway.mode`.
    pub fn mode_for(&self, tool: Option<&str>) -> Mode {
        if matches!(self.stance, Stance::Contained { .. }) {
            // `contain` cuts a caller off at once: no dry run shadows it.
            return Mode::Enforce;
        }
        let Some(t) = tool else { return self.gateway.mode };
        match self.gateway.tool_modes.get(t) {
            Some(m) => *m,
            // A name that folds onto an enforced tool's is enforced too: under a dry-run `mode`, a
            // server that folds names would otherwise run that tool unenforced.
            None if self.enforced_folded.find(t).is_some() => Mode::Enforce,
            None => self.gateway.mode,
        }
    }

    /// Does any tool leave `tools/list`? (If not, responses need not be inspected.)
    pub fn filters_tools_list(&self) -> bool {
        self.hide_all || !self.hidden.is_empty() || self.gateway.hide_denied_tools
    }

    /// Are responses read (tool lists filtered or checked against pins, tool results judged)? Then
    /// the request's `accept-encoding` is removed, as a compressed response cannot be read.
    pub fn reads_responses(&self) -> bool {
        self.filters_tools_list() || self.has_pins() || self.has_result_rules()
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

    /// `all_tools.limits`, which every tool the policy allows counts beside its own.
    pub fn all_tools_limits(&self) -> impl Iterator<Item = &Limit> {
        self.all_tools.iter().filter_map(|&i| self.limits.get(i))
    }

    /// Every tool name the policy mentions (`tools`, `pins` and `hide`), each once: the bounded set of
    /// per-tool metric labels.
    pub fn named_tools(&self) -> Vec<&str> {
        let mut names: Vec<&str> = self
            .listed_tools()
            .chain(self.pinned.keys().map(String::as_str))
            .chain(self.hidden.iter().map(String::as_str))
            .collect();
        names.sort_unstable();
        names.dedup();
        names
    }

    /// Does `gateway.methods` name the method `name` (allow or deny)?
    pub fn names_method(&self, name: &str) -> bool {
        self.methods.contains_key(name)
    }

    /// The `result` rules of `tool`, if it has any.
    pub fn result_rules(&self, tool: &str) -> Option<&result::ResultRules> {
        self.tools.get(tool).and_then(|r| r.result.as_ref())
    }

    /// Does any tool have `result` rules? (If not, results need not be read.)
    pub fn has_result_rules(&self) -> bool {
        self.tools.values().any(|r| r.result.is_some())
    }

    /// Every tool's `result` rules, by tool name: applied to a result whose call is not known
    /// (a response replayed on another stream, the reply to `tasks/result`), so that none passes
    /// unread.
    pub fn all_result_rules(&self) -> Vec<(&str, &result::ResultRules)> {
        // Names sorted as `&str`, the sort `named_tools` already links (sorting the pairs would
        // link one more, about 3 KB of the .wasm), then looked up again.
        let mut names: Vec<&str> =
            self.tools.iter().filter(|(_, r)| r.result.is_some()).map(|(n, _)| n.as_str()).collect();
        names.sort_unstable();
        names.into_iter().filter_map(|n| self.result_rules(n).map(|rules| (n, rules))).collect()
    }

    /// The pin of `tool`, if it has one: `tools.NAME.pin` or `pins.NAME.pin`.
    pub fn pin(&self, tool: &str) -> Option<&result::Pin> {
        self.tools.get(tool).and_then(|r| r.pin.as_ref()).or_else(|| self.pinned.get(tool).map(|p| &p.pin))
    }

    /// Does any tool have a pin? (If not, tool lists need not be read for it.)
    pub fn has_pins(&self) -> bool {
        !self.pinned.is_empty() || self.tools.values().any(|r| r.pin.is_some())
    }

    /// The flows that deny `tool` while one of their marks holds.
    pub fn flows_denying<'p>(&'p self, tool: &'p str) -> impl Iterator<Item = &'p flows::Flow> + 'p {
        self.flows.iter().filter(move |f| f.denies(tool))
    }

    /// Is a call of `tool` checked against flows by the rate limit service (`crate::rls::marks`)
    /// rather than in shared data?
    pub fn checks_flows_remotely(&self, tool: Option<&str>) -> bool {
        self.gateway.rate_limit_service.is_some() && tool.is_some_and(|t| self.flows_denying(t).next().is_some())
    }

    /// The marks a forwarded call of `tool` sets once answered with a result.
    pub fn marks_of(&self, tool: &str) -> &[String] {
        self.tools.get(tool).map_or(&[], |r| r.marks.as_slice())
    }

    /// Does `gateway.methods` allow the method `name` explicitly?
    pub fn allows_method_by_name(&self, name: &str) -> bool {
        self.methods.get(name) == Some(&Action::Allow)
    }
}
