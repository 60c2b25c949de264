//! `pins` and `default_for`: tools the policy does not list under `tools`, decided by the
//! annotations of their reviewed (pinned) definitions.
//!
//! MCP calls tool annotations untrusted unless the server is: a server can claim `readOnlyHint`
//! for anything. A pinned definition was reviewed, and a `tools/list` through this Envoy shows
//! whether the server still lists it (the pin's hash covers the annotations, and the listed
//! annotations must equal the ones recorded in `pins.NAME.annotations`). So `default_for` reads
//! the recorded annotations only, and an allow by `default_for` holds only once this Envoy has
//! seen the definition match (the marker `crate::limits::pin_verified_key`, set by the host on a
//! `pin_verified` event): until then the call is judged by `default` (fail closed).

use super::result::Pin;
use super::Policy;
use crate::terms::Action;
use crate::wire::json::{self, Json};

/// The MCP tool annotations `default_for` matches, in this order.
pub const HINTS: [&str; 4] = ["readOnlyHint", "destructiveHint", "idempotentHint", "openWorldHint"];
/// MCP's value of each hint a tool does not state (`readOnlyHint` false, `destructiveHint` true,
/// `idempotentHint` false, `openWorldHint` true).
pub const HINT_DEFAULTS: [bool; 4] = [false, true, false, true];

/// A compiled `pins.NAME`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pinned {
    pub pin: Pin,
    /// The recorded `annotations` in canonical form (`json::write_sorted`); `None`: the tool lists none.
    pub annotations: Option<String>,
    /// The value of each of [`HINTS`] in the recorded annotations, MCP's default where absent.
    pub hints: [bool; 4],
}

impl Pinned {
    /// Does a listed `tool` carry exactly the recorded annotations?
    pub fn annotations_match(&self, tool: &Json) -> bool {
        let listed = tool.get("annotations").map(|a| {
            let mut s = String::new();
            json::write_sorted(&mut s, a);
            s
        });
        listed == self.annotations
    }
}

/// A compiled `default_for[i]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DefaultFor {
    /// `default_for[i]`: the rule a decision names.
    pub path: String,
    /// The hints to match (`None`: any value).
    pub when: [Option<bool>; 4],
    pub action: Action,
    pub reason: Option<String>,
}

impl DefaultFor {
    fn matches(&self, hints: &[bool; 4]) -> bool {
        self.when.iter().zip(hints).all(|(w, h)| w.is_none_or(|w| w == *h))
    }
}

impl Policy {
    /// The `pins.NAME` entry of `tool` (a tool the policy does not list under `tools`).
    pub fn pinned(&self, tool: &str) -> Option<&Pinned> {
        self.pinned.get(tool)
    }

    /// Does the policy have `default_for` rules?
    pub fn has_default_for(&self) -> bool {
        !self.default_for.is_empty()
    }

    /// The names of the tools in `pins`.
    pub fn pinned_tools(&self) -> impl Iterator<Item = &str> {
        self.pinned.keys().map(String::as_str)
    }

    /// The `default_for` rules, in order.
    pub fn default_for_rules(&self) -> &[DefaultFor] {
        &self.default_for
    }

    /// The `default_for` rule that decides `tool` by name: the first whose `when` matches the
    /// tool's pinned annotations, for a tool in `pins` (never one listed under `tools`).
    pub fn default_for(&self, tool: &str) -> Option<&DefaultFor> {
        let pinned = self.pinned.get(tool)?;
        self.default_for.iter().find(|d| d.matches(&pinned.hints))
    }

    /// The pin an allow of `tool` rests on: `Some` when `default_for` allows it, and so the call
    /// is allowed only once this Envoy has seen the definition match its pin.
    pub fn allow_needs_verified_pin(&self, tool: &str) -> Option<&Pin> {
        if self.tools.contains_key(tool) || self.is_hidden(tool) {
            return None;
        }
        self.default_for(tool).filter(|d| d.action == Action::Allow).and_then(|_| self.pinned.get(tool)).map(|p| &p.pin)
    }

    /// What `tool` gets by name alone (`tools.NAME.action`, else `default_for`, else `default`).
    pub(super) fn action_by_name(&self, tool: &str) -> Action {
        match self.tools.get(tool) {
            Some(r) => r.action,
            None => self.default_for(tool).map_or(self.default, |d| d.action),
        }
    }

    /// The policy path of `tool`'s pin: `tools.NAME.pin` or `pins.NAME.pin`.
    pub fn pin_rule(&self, tool: &str) -> String {
        if self.pinned.contains_key(tool) {
            format!("pins.{tool}.pin")
        } else {
            format!("tools.{tool}.pin")
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::config;
    use crate::terms::Action;
    use crate::wire::json;

    const PIN: &str = "sha256:2cd8e77770afa7b481a435be89b57345878bb062f6ad9c4994054b32c9c8fa7a";

    fn policy(extra: &str) -> crate::policy::Policy {
        let text = format!(
            r#"{{"version":"1","default":"deny","tools":{{"listed":{{}}}},
            "pins":{{"ro":{{"pin":"{PIN}","annotations":{{"readOnlyHint":true}}}},
                     "rw":{{"pin":"{PIN}","annotations":{{"readOnlyHint":false,"destructiveHint":false}}}},
                     "bare":{{"pin":"{PIN}"}}}}{extra}}}"#
        );
        config::load(text.as_bytes()).unwrap()
    }

    #[test]
    fn default_for_matches_recorded_hints_with_mcp_defaults_first_rule_wins() {
        let p = policy(
            r#","default_for":[{"when":{"readOnlyHint":true},"action":"allow"},
                {"when":{"destructiveHint":true},"action":"deny","reason":"destructive"},
                {"when":{"destructiveHint":false},"action":"allow"}]"#,
        );
        assert_eq!(p.default_for("ro").map(|d| d.path.as_str()), Some("default_for[0]"));
        assert_eq!(p.default_for("rw").map(|d| d.path.as_str()), Some("default_for[2]"));
        // No annotations: destructiveHint is true by MCP's default.
        assert_eq!(p.default_for("bare").map(|d| (d.path.as_str(), d.action)), Some(("default_for[1]", Action::Deny)));
        assert_eq!(p.default_for("unpinned"), None);
        assert_eq!(p.default_for("listed"), None);
        assert!(p.allow_needs_verified_pin("ro").is_some());
        assert!(p.allow_needs_verified_pin("bare").is_none());
        assert!(p.allow_needs_verified_pin("listed").is_none());
        assert_eq!(p.pin_rule("ro"), "pins.ro.pin");
        assert_eq!(p.pin_rule("x"), "tools.x.pin");
    }

    #[test]
    fn listed_annotations_must_equal_the_recorded_ones() {
        let p = policy("");
        let ro = p.pinned("ro").unwrap();
        let listed = |t: &str| json::parse(t.as_bytes()).unwrap();
        assert_eq!(ro.annotations.as_deref(), Some(r#"{"readOnlyHint":true}"#));
        assert_eq!(ro.hints, [true, true, false, true]);
        assert!(ro.annotations_match(&listed(r#"{"name":"ro","annotations":{"readOnlyHint":true}}"#)));
        assert!(
            !ro.annotations_match(&listed(r#"{"name":"ro","annotations":{"readOnlyHint":true,"openWorldHint":true}}"#))
        );
        assert!(!ro.annotations_match(&listed(r#"{"name":"ro"}"#)));
        let bare = p.pinned("bare").unwrap();
        assert!(bare.annotations_match(&listed(r#"{"name":"bare"}"#)));
        assert!(!bare.annotations_match(&listed(r#"{"name":"bare","annotations":null}"#)));
    }
}
