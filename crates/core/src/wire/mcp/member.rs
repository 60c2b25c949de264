//! A member that a reader does not act on: its value is still checked strictly, and a name that a
//! case-insensitive decoder (Go's `encoding/json`) would read as a known member is noted, so that the
//! message can be refused.

use crate::wire::json::{ParseError, Parser};

/// Skip the value of the member `key`, which is none of `known`, checking it strictly. If
/// `near_miss` is still `None`, it becomes the name in `known` that `key` folds to without being it
/// ([`crate::wire::fold::near_miss`]), so the first near miss of an object is kept.
///
/// Errors: the [`ParseError`] of the skipped value.
pub(super) fn skip_unknown(
    p: &mut Parser<'_>,
    key: &str,
    known: &[&'static str],
    near_miss: &mut Option<&'static str>,
) -> Result<(), ParseError> {
    if near_miss.is_none() {
        *near_miss = crate::wire::fold::near_miss(key, known);
    }
    p.skip_value()
}
