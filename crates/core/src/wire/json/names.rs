//! The member names of one object, kept for the duplicate check while the object is read.

use std::borrow::Cow;

use super::INLINE_KEYS;

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

    pub(super) fn clash(&self) -> Option<crate::wire::fold::Clash> {
        if self.count < 2 {
            return None;
        }
        if self.owned.is_empty() {
            let names = self.inline.get(..self.count).unwrap_or(&[]);
            if self.not_plain {
                crate::wire::fold::clash(names)
            } else {
                crate::wire::fold::clash_plain(names)
            }
        } else {
            let names: Vec<&str> = self.owned.iter().map(|k| k.as_ref()).collect();
            crate::wire::fold::clash(&names)
        }
    }
}
