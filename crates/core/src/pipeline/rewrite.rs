//! Request body rewrites the core plans and the host applies (`set_buffer` on the buffered request
//! body).
//!
//! One rewrite exists: the retry of a call offered for approval through `input_required`
//! ([`crate::approval::offer`]) carries the gateway's own `params.inputResponses` entry and `params.requestState`;
//! once checked, both members are blanked out of the JSON text: every byte of them (and of the one
//! comma that separated them) becomes a space (U+0020, insignificant whitespace, RFC 8259 §2), so
//! the MCP server receives the call as the client first sent it, and the body keeps its length.
//! Keeping the length matters: Envoy lets a filter change request headers only before it lets them
//! continue, and the body is judged after that, so `content-length` cannot be changed then. Every
//! other byte is kept as sent (member order, escapes, number spellings).

use crate::wire::json::Parser;

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
/// do). Removing a member blanks its key, value and one separating comma, and nothing else:
/// `{"a":1,"b":2,"c":3}` without `b` is `{"a":1      ,"c":3}`; without `a`, `{      "b":2,"c":3}`.
pub fn without_params_members(body: &[u8], cut: &[&str]) -> Option<BodyRewrite> {
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
    let mut out = body.to_vec();
    let mut first_kept = true;
    for &(start, end, cut) in &spans {
        if cut {
            out.get_mut(start..end)?.fill(b' ');
        } else {
            if first_kept && start != open + 1 {
                // The first member kept after removed ones: its leading `,` goes too.
                let comma = start + body.get(start..end)?.iter().position(|&b| b == b',')?;
                *out.get_mut(comma)? = b' ';
            }
            first_kept = false;
        }
    }
    Some(BodyRewrite { replaced_bytes: body.len(), body: out })
}
