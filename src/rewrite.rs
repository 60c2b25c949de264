//! Request body rewrites the core plans and the host applies (`set_buffer` on the request body,
//! then `content-length` removed so that Envoy's buffer filter sets it again from the new body).
//!
//! One rewrite exists: the retry of a call offered for approval through `input_required`
//! ([`crate::offer`]) carries the gateway's own `params.inputResponses` entry and `params.requestState`;
//! once checked, both members are cut out of the JSON text, so the MCP server receives the call
//! exactly as the client first sent it. Every other byte of the body is kept as sent (member
//! order, whitespace, escapes, number spellings).

use crate::json::Parser;

/// The members of `params` cut out of a retried `tools/call`.
pub const LEG_MEMBERS: [&str; 2] = ["inputResponses", "requestState"];

/// A new request body for the host to set.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BodyRewrite {
    /// The body the request had, in bytes (the span `set_buffer` replaces).
    pub replaced_bytes: usize,
    /// The body to forward instead.
    pub body: Vec<u8>,
}

/// `body` (one JSON-RPC request object) without the `params` members named in `cut`. `None` when
/// the body is not one JSON object, has no `params` object, or names none of `cut` there (nothing to
/// do). Removing a member removes its key, value and one separating comma, and nothing else:
/// `{"a":1, "b":2 ,"c":3}` without `b` is `{"a":1 ,"c":3}`; without `a`, `{ "b":2 ,"c":3}`.
pub fn without_params_members(body: &[u8], cut: &[&str]) -> Option<BodyRewrite> {
    let text = std::str::from_utf8(body).ok()?;
    // (start, end, cut) of each member of `params`.
    let mut spans: Vec<(usize, usize, bool)> = Vec::new();
    let mut open: Option<usize> = None;
    let mut p = Parser::new(body).ok()?;
    if p.peek_non_ws() != Some(b'{') {
        return None;
    }
    p.object_with(|p, key| {
        if key != "params" || p.peek_non_ws() != Some(b'{') {
            return p.skip_value();
        }
        open = Some(p.offset());
        // Member k spans from the end of member k-1's value (after `{` for the first) to the end
        // of its own value: `, "key" : value`.
        let mut start = p.offset() + 1;
        p.object_with(|p, key| {
            let removed = cut.contains(&key.as_ref());
            p.skip_value()?;
            let end = p.offset();
            spans.push((start, end, removed));
            start = end;
            Ok(())
        })
    })
    .ok()?;
    p.finish().ok()?;
    let open = open?;
    if !spans.iter().any(|&(_, _, cut)| cut) {
        return None;
    }
    let mut out = String::with_capacity(text.len());
    out.push_str(text.get(..=open)?);
    let mut first_kept = true;
    let mut last_end = open + 1;
    for &(start, end, cut) in &spans {
        last_end = end;
        if cut {
            continue;
        }
        let mut seg = text.get(start..end)?;
        if first_kept && start != open + 1 {
            // This member followed a removed one: its leading `,` goes (the whitespace before it stays).
            let comma = seg.find(',')?;
            seg = seg.get(comma + 1..)?;
            out.push_str(text.get(start..start + comma)?);
        }
        first_kept = false;
        out.push_str(seg);
    }
    out.push_str(text.get(last_end..)?);
    Some(BodyRewrite { replaced_bytes: body.len(), body: out.into_bytes() })
}
