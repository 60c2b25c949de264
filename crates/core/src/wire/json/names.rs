//! The member names of one object, kept for the duplicate check while the object is read.

use std::borrow::Cow;
use std::collections::hash_map::{Entry, HashMap};

use super::{ParseError, ParseErrorKind, INLINE_KEYS};
use crate::wire::fold::{Clash, TooLong};

/// The member names of one object, for the duplicate check: the first [`INLINE_KEYS`] borrowed
/// from the input on the stack (most objects: no allocation, nothing to drop); past that, or once
/// a name had an escape (an owned, unescaped name), all of them in `owned` and a `Vec` of views.
#[derive(Default)]
pub(super) struct MemberNames<'a> {
    inline: [&'a str; INLINE_KEYS],
    count: usize,
    /// A name in `inline` is not printable ASCII (so the cheap comparison does not apply).
    not_plain: bool,
    owned: Vec<Cow<'a, str>>,
}

impl<'a> MemberNames<'a> {
    /// A name borrowed from the input.
    #[inline(always)]
    pub(super) fn push_borrowed(&mut self, name: &'a str) {
        if self.owned.is_empty() {
            if let Some(slot) = self.inline.get_mut(self.count) {
                *slot = name;
                self.not_plain |= !crate::wire::fold::plain_ascii(name);
                self.count += 1;
                return;
            }
        }
        self.spill(&Cow::Borrowed(name));
    }

    /// A name past [`INLINE_KEYS`], or an unescaped (owned) one: every name from here on is kept
    /// in `owned`. `&Cow`, not `&str`: a borrowed name keeps borrowing the input (`'a`).
    #[allow(clippy::ptr_arg)]
    #[inline(never)]
    pub(super) fn spill(&mut self, key: &Cow<'a, str>) {
        if self.owned.is_empty() {
            let count = self.count;
            self.owned.extend(self.inline.iter().take(count).map(|name| Cow::Borrowed(*name)));
        }
        self.owned.push(key.clone());
        self.count += 1;
    }

    /// The worst clash among the names ([`fold::clash`](crate::wire::fold::clash)), their keys
    /// taken from `budget`.
    pub(super) fn clash(&self, budget: &mut usize) -> Result<Option<Clash>, TooLong> {
        if self.count < 2 {
            return Ok(None);
        }
        if self.owned.is_empty() {
            let names = self.inline.get(..self.count).unwrap_or(&[]);
            if self.not_plain {
                crate::wire::fold::clash(names, budget)
            } else {
                Ok(crate::wire::fold::clash_plain(names))
            }
        } else {
            let names: Vec<&str> = self.owned.iter().map(|k| k.as_ref()).collect();
            crate::wire::fold::clash(&names, budget)
        }
    }
}

/// The two member names behind a [`ParseErrorKind::DuplicateKey`] or
/// [`ParseErrorKind::FoldedDuplicateKey`] error, which reports the object that holds them (its `{`,
/// the error's offset): where the first name that repeats an earlier one starts, and where that
/// earlier one starts. Names compare as the error did: after unescaping, and for a folded clash by
/// their [`fold::name_key`](crate::wire::fold::name_key). `None` for any other error.
///
/// For tools that show a policy author both places (`mcp-policy check`); it reads the object again,
/// so it runs only once an error is found.
pub fn repeated_name(input: &[u8], error: &ParseError) -> Option<(usize, usize)> {
    let folded = match error.kind {
        ParseErrorKind::DuplicateKey => false,
        ParseErrorKind::FoldedDuplicateKey => true,
        _ => return None,
    };
    let open = error.offset;
    let mut p = super::Parser::new(input).ok()?;
    p.pos = open;
    let text = p.src;
    // Each name read so far (or its folded key), and where it starts: a map, since a policy object
    // may hold thousands of names.
    let mut seen: HashMap<Cow<'_, str>, usize> = HashMap::new();
    let mut found = None;
    // A name starts at the first quote after the object's `{` or the previous member's value:
    // only whitespace and a comma lie between.
    let mut next = open.saturating_add(1);
    let _ = p.object_with(|p, name| {
        let Some(at) = text.get(next..).and_then(|rest| rest.find('"')).map(|i| next + i) else {
            return Err(p.err(error.kind));
        };
        let key = if folded { Cow::Owned(crate::wire::fold::name_key(&name).into_owned()) } else { name };
        match seen.entry(key) {
            Entry::Occupied(earlier) => {
                found = Some((at, *earlier.get()));
                // Stop reading: the rest of the object does not matter.
                Err(p.err(error.kind))
            }
            Entry::Vacant(slot) => {
                slot.insert(at);
                p.skip_value()?;
                next = p.pos;
                Ok(())
            }
        }
    });
    found
}

/// The member name whose opening quote is at byte `at` of `input` (a place [`repeated_name`]
/// gives), unescaped; `None` if no string starts there.
pub fn name_at(input: &[u8], at: usize) -> Option<String> {
    let mut p = super::Parser::new(input).ok()?;
    p.pos = at;
    p.string().ok()
}
