//! Folding: the forms under which two different strings read as the same name to some server.
//!
//! Servers behind the filter do not all compare names byte for byte. Go's `encoding/json` matches
//! object keys with Unicode simple case folding (`Name`, `ſ` → `s`, Kelvin sign `K` → `k`) and lets
//! the last match win; other decoders drop trailing NUL or control characters; MCP routers resolve
//! tool names case-insensitively. So the filter compares names under one deliberately coarse key,
//! [`name_key`]:
//!
//! 1. remove control characters (`Cc`), format characters (`Cf`) and default-ignorable code points
//!    (zero-width spaces and joiners, soft hyphen, BOM, bidi controls, variation selectors, tags);
//! 2. the UTS #46 mapping of ICU4X's `icu_normalizer` (compiled data): NFKC with case folding
//!    (`NFKC_Casefold`, UAX #44) in effect, plus full case folding of its two deviations
//!    (`ß` → `ss`, `ς` → `σ`). Characters UTS #46 disallows (unassigned, private use) become
//!    U+FFFD, so names made of them fold together: coarser, never finer, than a server's folding.
//!
//! Argument *values* are not case-folded (a server that gets `"Safe"` runs `"Safe"`); their second
//! reading is [`canonical`]: default-ignorable code points removed, then NFKC.
//!
//! Sources: Unicode 16.0 `DerivedCoreProperties.txt` (`Default_Ignorable_Code_Point`) and
//! `UnicodeData.txt` (general category `Cf`), copied as the range tables below.

use std::borrow::Cow;

use icu_normalizer::uts46::Uts46MapperBorrowed;
use icu_normalizer::ComposingNormalizerBorrowed;

/// `Default_Ignorable_Code_Point` (Unicode 16.0, DerivedCoreProperties.txt), inclusive ranges.
const DEFAULT_IGNORABLE: &[(u32, u32)] = &[
    (0x00AD, 0x00AD),
    (0x034F, 0x034F),
    (0x061C, 0x061C),
    (0x115F, 0x1160),
    (0x17B4, 0x17B5),
    (0x180B, 0x180F),
    (0x200B, 0x200F),
    (0x202A, 0x202E),
    (0x2060, 0x206F),
    (0x3164, 0x3164),
    (0xFE00, 0xFE0F),
    (0xFEFF, 0xFEFF),
    (0xFFA0, 0xFFA0),
    (0xFFF0, 0xFFF8),
    (0x1BCA0, 0x1BCA3),
    (0x1D173, 0x1D17A),
    (0xE0000, 0xE0FFF),
];

/// Format characters (`Cf`, Unicode 16.0) that are not default-ignorable.
const OTHER_FORMAT: &[(u32, u32)] = &[
    (0x0600, 0x0605),
    (0x06DD, 0x06DD),
    (0x070F, 0x070F),
    (0x0890, 0x0891),
    (0x08E2, 0x08E2),
    (0xFFF9, 0xFFFB),
    (0x110BD, 0x110BD),
    (0x110CD, 0x110CD),
    (0x13430, 0x1343F),
];

fn in_table(table: &[(u32, u32)], c: char) -> bool {
    let c = u32::from(c);
    table.iter().any(|&(lo, hi)| (lo..=hi).contains(&c))
}

/// Is `c` a default-ignorable code point (rendered as nothing; many systems drop it)?
pub fn is_default_ignorable(c: char) -> bool {
    u32::from(c) >= 0xAD && in_table(DEFAULT_IGNORABLE, c)
}

/// Is `c` invisible in a name: a control character, a format character or default-ignorable?
pub fn is_invisible(c: char) -> bool {
    c.is_control() || (u32::from(c) >= 0xAD && (in_table(DEFAULT_IGNORABLE, c) || in_table(OTHER_FORMAT, c)))
}

/// ASCII without control characters: the common case, where folding is ASCII lower-casing.
#[inline]
pub fn plain_ascii(s: &str) -> bool {
    s.bytes().all(|b| (0x20..0x7F).contains(&b))
}

/// The comparison key of a member or tool name: invisible characters removed, then NFKC with full
/// case folding. Borrowed when `s` is already its own key (lower-case printable ASCII).
pub fn name_key(s: &str) -> Cow<'_, str> {
    name_key_within(s, usize::MAX).unwrap_or(Cow::Borrowed(s))
}

/// [`name_key`], or `None` when the key would be longer than `cap` bytes, found without folding
/// further: NFKC makes a few characters up to 18 times longer (U+FDFA), and the cap is what bounds
/// the work of folding a name.
pub fn name_key_within(s: &str, cap: usize) -> Option<Cow<'_, str>> {
    if plain_ascii(s) {
        if s.len() > cap {
            return None;
        }
        if s.bytes().any(|b| b.is_ascii_uppercase()) {
            return Some(Cow::Owned(s.to_ascii_lowercase()));
        }
        return Some(Cow::Borrowed(s));
    }
    // No visible character folds to less than a quarter of its bytes (`𝐀`, 4 bytes, to `a`), nor
    // does a composed sequence, so a longer text cannot fold within the cap: it is refused as soon
    // as its visible part is that long, without folding, where a run of combining marks would be
    // read whole before any character came out.
    let mut visible = String::new();
    for c in s.chars().filter(|&c| !is_invisible(c)) {
        visible.push(c);
        if visible.len() / 4 > cap {
            return None;
        }
    }
    let mut key = String::with_capacity(visible.len().min(cap));
    for c in Uts46MapperBorrowed::new().map_normalize(visible.chars()) {
        // UTS 46 keeps its deviations; full case folding maps them (ZWJ and ZWNJ are invisible).
        match c {
            'ß' => key.push_str("ss"),
            'ς' => key.push('σ'),
            c if is_invisible(c) => {}
            c => key.push(c),
        }
        if key.len() > cap {
            return None;
        }
    }
    Some(Cow::Owned(key))
}

/// The comparison key of a tool name for `deny` and `hide`: [`name_key`] without surrounding
/// whitespace (or invisible characters), and `-` read as `_` (routers that normalise tool names
/// trim them and treat `-` and `_` alike).
pub fn tool_key(s: &str) -> Cow<'_, str> {
    tool_key_within(s, usize::MAX).unwrap_or(Cow::Borrowed(s))
}

/// [`tool_key`], or `None` when the key would be longer than `cap` bytes, found without folding
/// further. Whitespace and invisible characters at either end are dropped before folding, so the
/// only end the key can still lose is one space that a spacing accent folds to (`¨` to a space and
/// U+0308): a key folded to `cap + 1` bytes is complete enough to tell.
pub fn tool_key_within(s: &str, cap: usize) -> Option<Cow<'_, str>> {
    let key = name_key_within(s.trim_matches(|c: char| c.is_whitespace() || is_invisible(c)), cap.saturating_add(1))?;
    let trimmed = key.trim();
    if trimmed.len() > cap {
        return None;
    }
    if key.contains('-') || trimmed.len() != key.len() {
        return Some(Cow::Owned(trimmed.replace('-', "_")));
    }
    Some(key)
}

/// The second reading of a string value: default-ignorable code points removed, then NFKC.
/// `Ok(None)` when it reads the same as sent (always for ASCII); `Err(TooLong)` when the reading
/// would exceed `cap` bytes, found without normalizing further. NFKC makes a few compatibility
/// characters up to 18 times longer (U+FDFA), so the cap is what bounds the work.
pub fn canonical(s: &str, cap: usize) -> Result<Option<String>, TooLong> {
    if s.is_ascii() {
        return if s.len() > cap { Err(TooLong) } else { Ok(None) };
    }
    let visible: String = s.chars().filter(|&c| !is_default_ignorable(c)).collect();
    let mut out = Capped { text: String::with_capacity(visible.len().min(cap)), cap };
    ComposingNormalizerBorrowed::new_nfkc().normalize_to(&visible, &mut out).map_err(|_| TooLong)?;
    Ok((out.text != s).then_some(out.text))
}

/// A string's reading would exceed its cap.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TooLong;

/// A sink that refuses to grow past `cap` bytes, which stops the normalizer writing into it.
struct Capped {
    text: String,
    cap: usize,
}

impl std::fmt::Write for Capped {
    fn write_str(&mut self, s: &str) -> std::fmt::Result {
        if s.len() > self.cap - self.text.len() {
            return Err(std::fmt::Error);
        }
        self.text.push_str(s);
        Ok(())
    }
}

/// A set of tool names (`hide` entries; tools denied, restricted, pinned or enforced) looked up by
/// [`tool_key`]: the lookup finds the policy's name that a called name folds onto. Of names that
/// fold together, the least (by bytes) is the one found, whatever order they come in: the policy's
/// tools come from a hash map, and the rule a refusal names must not change from one load to the
/// next.
#[derive(Debug, Clone, Default)]
pub struct FoldedNames {
    by_key: super::NameMap<String>,
    /// The longest key: a called name whose key is longer matches none, and is not folded further.
    longest: usize,
}

impl FoldedNames {
    pub fn new<'a>(names: impl IntoIterator<Item = &'a str>) -> Self {
        let mut by_key = super::NameMap::<String>::default();
        for n in names {
            let found = by_key.entry(tool_key(n).into_owned()).or_insert_with(|| n.to_owned());
            if n < found.as_str() {
                n.clone_into(found);
            }
        }
        let longest = by_key.keys().fold(0, |longest, k| longest.max(k.len()));
        FoldedNames { by_key, longest }
    }

    /// The policy's name that `name` folds onto, if any (also when `name` is that name exactly).
    pub fn find(&self, name: &str) -> Option<&str> {
        if self.by_key.is_empty() {
            return None;
        }
        self.by_key.get(tool_key_within(name, self.longest)?.as_ref()).map(String::as_str)
    }
}

/// Two member names of one object that a server may take for one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Clash {
    /// The same name twice, byte for byte after unescaping.
    Exact,
    /// Different names with the same [`name_key`].
    Folded,
}

/// The worst clash among the member names of one object (`Exact` before `Folded`), if any. The
/// keys of names that are not printable ASCII may take `budget` bytes in all, which this takes
/// from; past it, `Err(TooLong)`.
pub fn clash<'k>(keys: &[&'k str], budget: &mut usize) -> Result<Option<Clash>, TooLong> {
    if keys.len() < 2 {
        return Ok(None);
    }
    if keys.len() <= 8 && keys.iter().all(|k| plain_ascii(k)) {
        return Ok(clash_plain(keys));
    }
    // Printable ASCII folds to itself, lower-cased, at no cost worth bounding: only other names
    // take from the budget (as the native build's shorter check, which compares plain names
    // itself, takes nothing).
    let mut key = |k: &'k str| -> Result<Cow<'k, str>, TooLong> {
        if plain_ascii(k) {
            return Ok(name_key(k));
        }
        let key = name_key_within(k, *budget).ok_or(TooLong)?;
        *budget -= key.len();
        Ok(key)
    };
    if keys.len() <= 8 {
        let mut folded: [Cow<'_, str>; 8] = Default::default();
        for (slot, k) in folded.iter_mut().zip(keys) {
            *slot = key(k)?;
        }
        let mut found = None;
        for (i, k) in keys.iter().enumerate() {
            for (j, other) in keys.iter().enumerate().skip(i + 1) {
                if k == other {
                    return Ok(Some(Clash::Exact));
                }
                if folded.get(i) == folded.get(j) {
                    found = Some(Clash::Folded);
                }
            }
        }
        return Ok(found);
    }
    // Large objects: sort instead of a quadratic scan (a 1 MiB body can hold ~100k keys).
    let mut exact: Vec<&str> = keys.to_vec();
    exact.sort_unstable();
    if exact.windows(2).any(|w| w.first() == w.get(1)) {
        return Ok(Some(Clash::Exact));
    }
    // Sorted as `&str`, the sort `exact` already uses (a sort of `Cow`s would link one more, 2.3 KB).
    let mut owned: Vec<Cow<'_, str>> = Vec::with_capacity(keys.len());
    for k in keys {
        owned.push(key(k)?);
    }
    let mut folded: Vec<&str> = owned.iter().map(|k| k.as_ref()).collect();
    folded.sort_unstable();
    Ok(folded.windows(2).any(|w| w.first() == w.get(1)).then_some(Clash::Folded))
}

/// [`clash`] for a few names that are all printable ASCII (the caller knows: `json`'s member
/// names check each name as they are kept), where folding is ASCII case; no allocation. Every pair
/// is compared: `json` calls it for up to 8 names (16 on its native shorter path), past which
/// [`clash`] sorts instead.
pub fn clash_plain(keys: &[&str]) -> Option<Clash> {
    // Names are short: a pair is compared only when its lengths and first bytes (ASCII case
    // folded) agree, then byte by byte, without a `memcmp` call: this check runs for every object
    // of every body, and comparing every pair of equal length cost ~300 instructions an object.
    let mut found = None;
    let mut rest = keys;
    while let Some((k, tail)) = rest.split_first() {
        rest = tail;
        let k = k.as_bytes();
        let first = k.first().map(u8::to_ascii_lowercase);
        for other in tail {
            let other = other.as_bytes();
            if k.len() != other.len() || first != other.first().map(u8::to_ascii_lowercase) {
                continue;
            }
            let mut exact = true;
            let mut folded = true;
            for (a, b) in k.iter().zip(other) {
                if a != b {
                    exact = false;
                    if !a.eq_ignore_ascii_case(b) {
                        folded = false;
                        break;
                    }
                }
            }
            if exact {
                return Some(Clash::Exact);
            }
            if folded {
                found = Some(Clash::Folded);
            }
        }
    }
    found
}

/// Is `key` a near miss of one of `known`: not one of them, yet equal to one under [`name_key`]?
/// Returns the known name it folds to.
pub fn near_miss<'k>(key: &str, known: &[&'k str]) -> Option<&'k str> {
    if known.contains(&key) {
        return None;
    }
    if plain_ascii(key) {
        return known.iter().copied().find(|k| k.eq_ignore_ascii_case(key));
    }
    // A key longer than every known name matches none: folding stops there.
    let longest = known.iter().fold(0, |longest, k| longest.max(k.len()));
    let folded = name_key_within(key, longest)?;
    known.iter().copied().find(|k| *k == folded)
}

#[cfg(test)]
mod tests;
