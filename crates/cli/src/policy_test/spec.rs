//! The policy tests file: its types (the JSON Schema `schema/policy-tests.schema.json` is derived from
//! them) and its reading. YAML or JSON (a JSON document is read as YAML, whose flow style it is);
//! unknown keys and duplicate keys are errors, reported with the path of the key.

use std::collections::BTreeMap;

use std::borrow::Cow;

use mcp_policy_core::outcome::kind::DecisionKind;
use schemars::{json_schema, JsonSchema, Schema, SchemaGenerator};
use serde::{de, Deserialize};

/// A policy tests file: the calls to decide under one policy and the decision each must get.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, expecting = "a mapping with a list of cases: `cases: [{name, call, expect}, ...]`")]
pub struct TestsFile {
    /// The JSON Schema of this file, for editors (not read).
    #[serde(rename = "$schema", default)]
    #[allow(dead_code)]
    pub schema: Option<String>,
    /// The cases, decided in order, each from a fresh rate-limit store.
    pub cases: Vec<Case>,
}

/// One case: who calls, what, from which prior state, and the decision expected.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, expecting = "a case, a mapping: `{name, call, expect}` (and `grant`, `claims`, `state`)")]
pub struct Case {
    /// The case's name, unique in the file (the test runner's and JUnit's test name).
    pub name: String,
    /// The agent's credential (default `cli`), as `mcp-policy explain --grant` takes it: sent as
    /// `Authorization: Bearer GRANT`, or as `gateway.grant_header` when the policy sets one. With
    /// `gateway.grants`, a token whose SHA-256 is listed there.
    #[serde(default)]
    pub grant: Option<String>,
    /// Verified identity claims (the JWT payload `jwt_authn` forwards), for a policy with
    /// `gateway.identity`: they choose the policy of a set and, through `grant_claim`, the grant.
    #[serde(default)]
    pub claims: Option<serde_json::Map<String, serde_json::Value>>,
    /// The call, sent as a JSON-RPC request (id 1) in a POST to the MCP server.
    pub call: Call,
    /// What happened before the call.
    #[serde(default)]
    pub state: Option<State>,
    /// The decision expected.
    pub expect: Expect,
}

/// A call: a tool (`tools/call`) with its arguments, or a JSON-RPC method with its params.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(extend("oneOf" = [
    {"required": ["tool"], "not": {"anyOf": [{"required": ["method"]}, {"required": ["params"]}]}},
    {"required": ["method"], "not": {"anyOf": [{"required": ["tool"]}, {"required": ["arguments"]}]}}
]))]
pub struct Call {
    /// The tool called with `tools/call`. Exactly one of `tool` and `method`.
    #[serde(default)]
    pub tool: Option<String>,
    /// The tool's arguments (default `{}`); only with `tool`.
    #[serde(default)]
    pub arguments: Option<serde_json::Map<String, serde_json::Value>>,
    /// A JSON-RPC method, e.g. `tools/list`. Exactly one of `tool` and `method`.
    #[serde(default)]
    pub method: Option<String>,
    /// The method's params (none when absent); only with `method`.
    #[serde(default)]
    pub params: Option<serde_json::Value>,
}

/// The state before the call.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct State {
    /// Calls already counted in the current window, for the case's grant, by the `counter` of
    /// the limits the call counts: e.g. `{"vm_agent_exec_rate": 10}` (each of that counter's
    /// windows), or by window, `{"vm_agent_exec_rate": {"minute": 3, "hour": 95}}`.
    #[serde(default)]
    pub counters: BTreeMap<String, Prior>,
    /// What a `tools/list` through this Envoy showed of pinned tools, by name: `matched` (the
    /// definition matched its pin: `default_for` may allow the tool) or `changed` (it did not:
    /// calls are refused with `pin_mismatch`).
    #[serde(default)]
    pub pins: BTreeMap<String, PinSeen>,
}

/// The calls a counter already counted: in each of its windows, or by window.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(
    untagged,
    expecting = "each counter takes a number of calls (a whole number, 0 or more), or calls by window, such as {\"minute\": 3, \"hour\": 95}"
)]
pub enum Prior {
    /// The same number in each window the call counts with this counter.
    Calls(u64),
    /// By window name (`second`, `minute`, `hour`, `day`).
    ByWindow(BTreeMap<String, u64>),
}

/// What a `tools/list` showed of a pinned tool.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum PinSeen {
    Matched,
    Changed,
}

/// The decision expected; every key given must match.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Expect {
    /// The decision, as the access log's `mcp_decision` and the metrics name it.
    pub kind: Kind,
    /// The rule that decided, exactly as `mcp-policy explain` prints it (e.g. `tools.delete_vm`,
    /// `default`).
    #[serde(default)]
    pub rule: Option<String>,
    /// Text the decision's reason contains.
    #[serde(default)]
    pub reason: Option<String>,
}

/// A decision as the filter labels it (`Decision::label`): one of its decision kinds, or
/// `would_deny` (a refusal in dry-run mode: forwarded). Read from its word, so the words are the
/// core's and never a second list.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Decided(DecisionKind),
    WouldDeny,
}

/// Every word a `kind` can be, in the core's order, then `would_deny` (serde names them when a
/// word is none of them). Built at compile time, where an index out of range fails the build.
#[allow(clippy::indexing_slicing)]
const WORDS: [&str; DecisionKind::ALL.len() + 1] = {
    let mut words = [WOULD_DENY; DecisionKind::ALL.len() + 1];
    let mut i = 0;
    while i < DecisionKind::ALL.len() {
        words[i] = DecisionKind::ALL[i].as_str();
        i += 1;
    }
    words
};

const WOULD_DENY: &str = "would_deny";

impl Kind {
    /// The word `Decision::label` gives for this decision.
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Decided(k) => k.as_str(),
            Kind::WouldDeny => WOULD_DENY,
        }
    }

    /// The decision named `word`.
    fn from_word(word: &str) -> Option<Kind> {
        match DecisionKind::ALL.into_iter().find(|k| k.as_str() == word) {
            Some(k) => Some(Kind::Decided(k)),
            None => (word == WOULD_DENY).then_some(Kind::WouldDeny),
        }
    }
}

/// Read as serde derives a unit-variant enum: `deserialize_enum`, the variant named by its word
/// (in YAML also by a tag, `!allowed`), with serde's "unknown variant" error at the key's path.
impl<'de> Deserialize<'de> for Kind {
    fn deserialize<D: de::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        /// The variant's word.
        struct Word;
        impl<'de> de::DeserializeSeed<'de> for Word {
            type Value = Kind;
            fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<Kind, D::Error> {
                d.deserialize_identifier(self)
            }
        }
        impl de::Visitor<'_> for Word {
            type Value = Kind;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("variant identifier")
            }
            fn visit_str<E: de::Error>(self, word: &str) -> Result<Kind, E> {
                Kind::from_word(word).ok_or_else(|| E::unknown_variant(word, &WORDS))
            }
        }
        /// The enum: a variant without content.
        struct Unit;
        impl<'de> de::Visitor<'de> for Unit {
            type Value = Kind;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("enum Kind")
            }
            fn visit_enum<A: de::EnumAccess<'de>>(self, data: A) -> Result<Kind, A::Error> {
                let (kind, variant) = data.variant_seed(Word)?;
                de::VariantAccess::unit_variant(variant)?;
                Ok(kind)
            }
        }
        d.deserialize_enum("Kind", &WORDS, Unit)
    }
}

impl JsonSchema for Kind {
    fn schema_name() -> Cow<'static, str> {
        "Kind".into()
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({
            "description": "A decision: the filter's decision kinds, and `would_deny` (a refusal in dry-run mode: forwarded).",
            "type": "string",
            "enum": WORDS,
        })
    }
}

/// Read a tests file; the error names the path in the file and the line.
pub fn parse(text: &[u8]) -> Result<TestsFile, String> {
    let file: TestsFile = serde_norway::from_slice(text).map_err(|e| e.to_string())?;
    let mut errors = Vec::new();
    let mut names = std::collections::HashSet::new();
    if file.cases.is_empty() {
        errors.push("cases: no cases".to_owned());
    }
    for (i, case) in file.cases.iter().enumerate() {
        let at = format!("cases[{i}]");
        if case.name.trim().is_empty() {
            errors.push(format!("{at}.name: empty"));
        } else if !names.insert(case.name.as_str()) {
            errors.push(format!("{at}.name: {:?} is the name of an earlier case", case.name));
        }
        if case.grant.as_deref().is_some_and(|g| g.is_empty() || g.bytes().any(|b| b.is_ascii_control())) {
            errors.push(format!("{at}.grant: must be non-empty, without control characters"));
        }
        let c = &case.call;
        match (&c.tool, &c.method) {
            (Some(_), Some(_)) => errors.push(format!("{at}.call: give `tool` or `method`, not both")),
            (None, None) => {
                errors.push(format!("{at}.call: give `tool` (with `arguments`) or `method` (with `params`)"))
            }
            (Some(_), None) if c.params.is_some() => {
                errors.push(format!("{at}.call.params: only with `method`; a tool takes `arguments`"))
            }
            (None, Some(_)) if c.arguments.is_some() => {
                errors.push(format!("{at}.call.arguments: only with `tool`; a method takes `params`"))
            }
            _ => {}
        }
    }
    if errors.is_empty() {
        Ok(file)
    } else {
        Err(errors.join("\n"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_decision_label_can_be_expected_by_its_word() {
        assert_eq!(
            WORDS,
            [
                "allowed",
                "passed",
                "denied",
                "rate_limited",
                "no_grant",
                "invalid",
                "limiter_unavailable",
                "approved",
                "approval_required",
                "approval_denied",
                "approval_unavailable",
                "would_deny"
            ]
        );
        for (i, word) in WORDS.into_iter().enumerate() {
            let k = Kind::from_word(word).unwrap();
            assert_eq!(k.as_str(), word);
            assert_eq!(k, DecisionKind::ALL.get(i).map_or(Kind::WouldDeny, |&d| Kind::Decided(d)));
        }
        assert_eq!(Kind::from_word("allow"), None);
    }

    #[test]
    fn unknown_and_duplicate_keys_are_errors_with_their_path() {
        let e = parse(b"cases:\n- name: a\n  call: {tool: t}\n  expect: {kind: allowed}\n  state: {marks: {}}\n")
            .unwrap_err();
        assert!(e.starts_with("cases[0].state: unknown field `marks`, expected `counters` or `pins`"), "{e}");
        let e = parse(b"cases:\n- name: a\n  name: b\n  call: {tool: t}\n  expect: {kind: allowed}\n").unwrap_err();
        assert!(e.contains("duplicate"), "{e}");
        let e =
            parse(br#"{"cases": [{"name": "a", "call": {"tool": "t"}, "expect": {"kind": "allow"}}]}"#).unwrap_err();
        assert_eq!(
            e,
            "cases[0].expect.kind: unknown variant `allow`, expected one of `allowed`, `passed`, `denied`, \
             `rate_limited`, `no_grant`, `invalid`, `limiter_unavailable`, `approved`, `approval_required`, \
             `approval_denied`, `approval_unavailable`, `would_deny` at line 1 column 68"
        );
    }

    /// As a derived enum: the word, or in YAML a tag naming the variant; nothing else.
    #[test]
    fn a_kind_is_a_word_or_a_tag() {
        let kind = |k: &str| {
            parse(format!("cases: [{{name: a, call: {{tool: t}}, expect: {{kind: {k}}}}}]").as_bytes())
                .map(|f| f.cases[0].expect.kind)
        };
        assert_eq!(kind("would_deny"), Ok(Kind::WouldDeny));
        assert_eq!(kind("!approval_required ~"), Ok(Kind::Decided(DecisionKind::ApprovalRequired)));
        assert_eq!(
            kind("[allowed]").unwrap_err(),
            "cases[0].expect.kind: invalid type: sequence, expected a YAML tag starting with '!' at line 1 column 51"
        );
    }

    #[test]
    fn a_call_is_a_tool_or_a_method() {
        let one =
            |call: &str| parse(format!("cases: [{{name: a, call: {call}, expect: {{kind: allowed}}}}]").as_bytes());
        assert!(one("{tool: t, arguments: {a: 1}}").is_ok());
        assert!(one("{method: tools/list}").is_ok());
        assert_eq!(one("{tool: t, method: m}").unwrap_err(), "cases[0].call: give `tool` or `method`, not both");
        assert_eq!(
            one("{method: m, arguments: {}}").unwrap_err(),
            "cases[0].call.arguments: only with `tool`; a method takes `params`"
        );
    }
}
