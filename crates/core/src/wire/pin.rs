//! Pins of tool definitions: the canonical form of a tool as `tools/list` returns it, and its
//! SHA-256 (`tools.NAME.pin`, `mcp-policy pin`). One definition here, shared by the filter and the
//! CLI, so that both always hash the same bytes.
//!
//! The canonical form of a tool (an object of a `tools/list` result's `tools`):
//! 1. keep only the members [`PINNED_MEMBERS`] (`annotations`, `description`, `inputSchema`, `name`,
//!    `outputSchema`, `title`) that the tool has; every other member (`_meta`, `icons`, `execution`,
//!    members MCP adds later) is left out, and an absent member stays absent (`null` stays `null`);
//! 2. write it as JSON text with no whitespace, the members of every object sorted by name in code
//!    point order (the byte order of their UTF-8), at every depth, array elements in order;
//! 3. strings as the parser decoded them (escapes resolved), written back with the fewest escapes:
//!    `\"`, `\\`, `\n`, `\r`, `\t`, other control characters as `\u00xx` (lower-case hex), every other
//!    character as its UTF-8 bytes (no `\u` escapes for non-ASCII, no `\/`);
//! 4. numbers as their exact source text (`1.0` and `1` differ: a server changing how it writes a
//!    number changes its definition);
//! 5. the pin is `sha256:` and the lower-case hex of the SHA-256 of those UTF-8 bytes.

use sha2::{Digest, Sha256};

use super::json::{self, Json};

/// The members of a tool that its pin covers, in canonical (sorted) order.
pub const PINNED_MEMBERS: [&str; 6] = ["annotations", "description", "inputSchema", "name", "outputSchema", "title"];

/// The canonical form of `tool` (see the module documentation).
pub fn canonical(tool: &Json) -> String {
    let kept: Vec<(String, Json)> = match tool {
        Json::Object(members) => {
            members.iter().filter(|(k, _)| PINNED_MEMBERS.contains(&k.as_str())).cloned().collect()
        }
        _ => Vec::new(),
    };
    let mut out = String::new();
    json::write_sorted(&mut out, &Json::Object(kept));
    out
}

/// The SHA-256 of the canonical form of `tool`.
pub fn hash(tool: &Json) -> [u8; 32] {
    Sha256::digest(canonical(tool).as_bytes()).into()
}

/// `sha256:` and the lower-case hex of `hash`: the pin as a policy writes it.
pub fn text(hash: &[u8; 32]) -> String {
    let mut s = String::with_capacity(71);
    s.push_str("sha256:");
    for b in hash {
        s.push_str(&format!("{b:02x}"));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn canonical_form_sorts_keeps_pinned_members_and_decodes_escapes() {
        let tool = json::parse(
            br#"{"name":"list_vms","_meta":{"x":1},"description":"Lists \u0056Ms\/all","inputSchema":{"type":"object","properties":{"b":{},"a":{"default":1.0}}},"annotations":{"readOnlyHint":true}}"#,
        )
        .unwrap();
        assert_eq!(
            canonical(&tool),
            r#"{"annotations":{"readOnlyHint":true},"description":"Lists VMs/all","inputSchema":{"properties":{"a":{"default":1.0},"b":{}},"type":"object"},"name":"list_vms"}"#
        );
        assert_eq!(text(&hash(&tool)), text(&Sha256::digest(canonical(&tool).as_bytes()).into()));
        assert!(text(&hash(&tool)).starts_with("sha256:") && text(&hash(&tool)).len() == 71);
    }
}
