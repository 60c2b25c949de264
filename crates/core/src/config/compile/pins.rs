//! `pins` and `default_for` (see `crate::policy::pinned`): every error with its JSON path.

use crate::config::Map;

use super::super::spec::{DefaultForSpec, PinnedSpec, ToolRuleSpec};
use super::super::{fail, ConfigError};
use crate::policy::pinned::{DefaultFor, Pinned, HINTS, HINT_DEFAULTS};
use crate::policy::NameMap;
use crate::terms::PinMode;
use crate::wire::json::{self, Json};

type Errors = Vec<ConfigError>;

/// `pins`: each a pin and the recorded annotations (an object whose hints are booleans). A tool
/// listed under `tools` takes its pin there: one tool, one pin.
pub(super) fn pins(specs: &Map<PinnedSpec>, tools: &Map<ToolRuleSpec>, errs: &mut Errors) -> NameMap<Pinned> {
    let mut out = NameMap::default();
    for (name, spec) in specs {
        let path = format!("pins.{name}");
        if name.is_empty() {
            fail(errs, "pins", "tool names must not be empty");
        }
        if tools.contains_key(name) {
            fail(errs, &path, format!("the tool is listed under tools: its pin goes in tools.{name}.pin"));
            continue;
        }
        let Some(pin) = super::result::pin(&spec.pin, &path, errs) else { continue };
        let mut hints = HINT_DEFAULTS;
        let annotations = match spec.annotations.as_ref().map(|v| &v.0) {
            None => None,
            Some(a @ Json::Object(members)) => {
                for (value, hint) in hints.iter_mut().zip(HINTS) {
                    match members.iter().find(|(k, _)| k == hint).map(|(_, v)| v) {
                        None => {}
                        Some(Json::Bool(b)) => *value = *b,
                        Some(_) => fail(errs, format!("{path}.annotations.{hint}"), "must be a boolean"),
                    }
                }
                let mut text = String::new();
                json::write_sorted(&mut text, a);
                Some(text)
            }
            // A server that lists `"annotations": null` is recorded as such (the pin covers it).
            Some(Json::Null) => Some("null".to_owned()),
            Some(_) => {
                fail(errs, format!("{path}.annotations"), "must be an object or null (the tool's annotations)");
                continue;
            }
        };
        out.insert(name.clone(), Pinned { pin, annotations, hints });
    }
    out
}

/// `default_for`: it decides only tools in `pins`, and only while a changed definition is
/// enforced (`gateway.pins: "enforce"`): under `report` a changed definition stays in use, so
/// nothing could rest on the review.
pub(super) fn default_for(
    specs: &[DefaultForSpec],
    has_pins: bool,
    mode: PinMode,
    errs: &mut Errors,
) -> Vec<DefaultFor> {
    if specs.is_empty() {
        return Vec::new();
    }
    if !has_pins {
        fail(
            errs,
            "default_for",
            "decides only tools recorded in pins (reviewed definitions, mcp-policy pin --write), and the policy has none",
        );
    }
    if mode != PinMode::Enforce {
        fail(
            errs,
            "default_for",
            "needs gateway.pins \"enforce\": under \"report\" a changed definition stays in use, so its annotations \
             cannot be relied on",
        );
    }
    let mut out = Vec::new();
    for (i, spec) in specs.iter().enumerate() {
        let path = format!("default_for[{i}]");
        let w = &spec.when;
        let when = [w.read_only_hint, w.destructive_hint, w.idempotent_hint, w.open_world_hint];
        if when.iter().all(Option::is_none) {
            fail(
                errs,
                format!("{path}.when"),
                "must name at least one annotation (readOnlyHint, destructiveHint, idempotentHint, openWorldHint)",
            );
            continue;
        }
        out.push(DefaultFor { path, when, action: spec.action, reason: spec.reason.clone() });
    }
    out
}
