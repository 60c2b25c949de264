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
    if plain_ascii(s) {
        if s.bytes().any(|b| b.is_ascii_uppercase()) {
            return Cow::Owned(s.to_ascii_lowercase());
        }
        return Cow::Borrowed(s);
    }
    let visible: String = s.chars().filter(|&c| !is_invisible(c)).collect();
    let mut key = String::with_capacity(visible.len());
    for c in Uts46MapperBorrowed::new().map_normalize(visible.chars()) {
        // UTS 46 keeps its deviations; full case folding maps them (ZWJ and ZWNJ are invisible).
        match c {
            'ß' => key.push_str("ss"),
            'ς' => key.push('σ'),
            c if is_invisible(c) => {}
            c => key.push(c),
        }
    }
    Cow::Owned(key)
}

/// The comparison key of a tool name for `deny` and `hide`: [`name_key`] without surrounding
/// whitespace, and `-` read as `_` (routers that normalise tool names trim them and treat `-` and
/// `_` alike).
pub fn tool_key(s: &str) -> Cow<'_, str> {
    let key = name_key(s.trim());
    if key.contains('-') || key.trim().len() != key.len() {
        return Cow::Owned(key.trim().replace('-', "_"));
    }
    key
}

/// The second reading of a string value: default-ignorable code points removed, then NFKC.
/// `None` when it reads the same as sent (always for ASCII).
pub fn canonical(s: &str) -> Option<String> {
    if s.is_ascii() {
        return None;
    }
    let visible: String = s.chars().filter(|&c| !is_default_ignorable(c)).collect();
    let out = ComposingNormalizerBorrowed::new_nfkc().normalize(&visible).into_owned();
    (out != s).then_some(out)
}

/// A set of tool names (`hide` entries; tools denied, restricted, pinned or enforced) looked up by
/// [`tool_key`]: the lookup finds the policy's name that a called name folds onto. Of names that
/// fold together, the least (by bytes) is the one found, whatever order they come in: the policy's
/// tools come from a hash map, and the rule a refusal names must not change from one load to the
/// next.
#[derive(Debug, Clone, Default)]
pub struct FoldedNames {
    by_key: std::collections::HashMap<String, String>,
}

impl FoldedNames {
    pub fn new<'a>(names: impl IntoIterator<Item = &'a str>) -> Self {
        let mut by_key = std::collections::HashMap::<String, String>::new();
        for n in names {
            let found = by_key.entry(tool_key(n).into_owned()).or_insert_with(|| n.to_owned());
            if n < found.as_str() {
                n.clone_into(found);
            }
        }
        FoldedNames { by_key }
    }

    /// The policy's name that `name` folds onto, if any (also when `name` is that name exactly).
    pub fn find(&self, name: &str) -> Option<&str> {
        if self.by_key.is_empty() {
            return None;
        }
        self.by_key.get(tool_key(name).as_ref()).map(String::as_str)
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

/// The worst clash among the member names of one object (`Exact` before `Folded`), if any.
pub fn clash(keys: &[&str]) -> Option<Clash> {
    if keys.len() < 2 {
        return None;
    }
    if keys.len() <= 8 && keys.iter().all(|k| plain_ascii(k)) {
        return clash_plain(keys);
    }
    if keys.len() <= 8 {
        let mut folded: [Cow<'_, str>; 8] = Default::default();
        for (slot, k) in folded.iter_mut().zip(keys) {
            *slot = name_key(k);
        }
        let mut found = None;
        for (i, k) in keys.iter().enumerate() {
            for (j, other) in keys.iter().enumerate().skip(i + 1) {
                if k == other {
                    return Some(Clash::Exact);
                }
                if folded.get(i) == folded.get(j) {
                    found = Some(Clash::Folded);
                }
            }
        }
        return found;
    }
    // Large objects: sort instead of a quadratic scan (a 1 MiB body can hold ~100k keys).
    let mut exact: Vec<&str> = keys.to_vec();
    exact.sort_unstable();
    if exact.windows(2).any(|w| w.first() == w.get(1)) {
        return Some(Clash::Exact);
    }
    // Sorted as `&str`, the sort `exact` already uses (a sort of `Cow`s would link one more, 2.3 KB).
    let owned: Vec<Cow<'_, str>> = keys.iter().map(|k| name_key(k)).collect();
    let mut folded: Vec<&str> = owned.iter().map(|k| k.as_ref()).collect();
    folded.sort_unstable();
    folded.windows(2).any(|w| w.first() == w.get(1)).then_some(Clash::Folded)
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
    let folded = name_key(key);
    known.iter().copied().find(|k| *k == folded)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn name_keys_fold_case_compatibility_and_invisibles() {
        assert_eq!(name_key("name"), "name");
        assert!(matches!(name_key("name"), Cow::Borrowed(_)));
        assert_eq!(name_key("Name"), "name");
        assert_eq!(name_key("param\u{17f}"), "params"); // long s
        assert_eq!(name_key("\u{212a}ey"), "key"); // Kelvin sign
        assert_eq!(name_key("name\u{0}"), "name");
        assert_eq!(name_key("na\u{200b}me"), "name");
        assert_eq!(name_key("\u{feff}NAME\u{200d}"), "name");
        assert_eq!(name_key("ｎａｍｅ"), "name"); // fullwidth
        assert_eq!(name_key("Straße"), "strasse");
        assert_eq!(name_key("e\u{301}"), name_key("\u{e9}"));
        assert_eq!(name_key("ΣΑΣ"), name_key("σας"));
        assert_eq!(name_key("ﬁle"), "file");
        assert_eq!(tool_key("Delete-VM"), "delete_vm");
        assert_eq!(tool_key("delete_vm"), "delete_vm");
        assert_eq!(tool_key(" Delete_VM\u{3000}"), "delete_vm");
    }

    #[test]
    fn canonical_strips_ignorables_and_applies_nfkc() {
        assert_eq!(canonical("rm -rf"), None);
        assert_eq!(canonical("r\u{200b}m"), Some("rm".into()));
        assert_eq!(canonical("ｒｍ"), Some("rm".into()));
        assert_eq!(canonical("\u{ad}rm\u{202e}"), Some("rm".into()));
        assert_eq!(canonical("Ωmega"), None);
        assert_eq!(canonical("A\u{fe0f}"), Some("A".into()));
    }

    #[test]
    fn clashes() {
        assert_eq!(clash(&["a", "b"]), None);
        assert_eq!(clash(&["name", "Name"]), Some(Clash::Folded));
        assert_eq!(clash(&["name", "Name", "name"]), Some(Clash::Exact));
        assert_eq!(clash(&["cmd", "cmd\u{0}"]), Some(Clash::Folded));
        let many: Vec<String> = (0..20).map(|i| format!("k{i}")).collect();
        let mut keys: Vec<&str> = many.iter().map(String::as_str).collect();
        assert_eq!(clash(&keys), None);
        keys.push("K7");
        assert_eq!(clash(&keys), Some(Clash::Folded));
        keys.push("k7");
        assert_eq!(clash(&keys), Some(Clash::Exact));
    }

    #[test]
    fn near_misses() {
        let known = ["name", "arguments"];
        assert_eq!(near_miss("name", &known), None);
        assert_eq!(near_miss("Name", &known), Some("name"));
        assert_eq!(near_miss("name\u{0}", &known), Some("name"));
        assert_eq!(near_miss("argument\u{17f}", &known), Some("arguments"));
        assert_eq!(near_miss("other", &known), None);
    }
}
