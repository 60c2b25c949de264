//! The shorter check must accept exactly what the strict path accepts without a folded clash, and
//! leave every other input to it: the same result, error, offset, end and folded count, with and
//! without it, on generated values (valid, near-valid and broken).

use super::super::{ParseError, Parser, MAX_DEPTH};
use super::skip;

/// What a whole-input skip gives: the result, where the cursor ended, and the folded clashes.
fn skip_all(text: &str, fast: bool) -> (Result<(), ParseError>, usize, usize) {
    super::skip_all(text.as_bytes(), fast)
}

/// A small deterministic generator (xorshift64*), so a failure names a reproducible case.
struct Gen(u64);

impl Gen {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
        items[self.below(items.len())]
    }
}

/// Member names: repeats, ASCII case twins, non-ASCII, escaped, and one invisible character.
const NAMES: &[&str] =
    &["a", "b", "A", "k", "id", "ID", "name", "é", "É", "\\u0061", "a\\n", "x\u{200b}", "key-long-name-12"];
/// Scalars: every kind, strings short and past 16 bytes with escapes on either side of it, and
/// some the strict grammar refuses.
const SCALARS: &[&str] = &[
    "0",
    "-1.5e+3",
    "123456789012345678901234567890",
    "true",
    "false",
    "null",
    "\"\"",
    "\"x\"",
    "\"key-0\"",
    "\"line \\\"quoted\\\" \\\\ tab\\t\"",
    "\"0123456789abcdefghij\\\"klm\"",
    "\"0123456789abcdef\\/x\"",
    "\"\\u00e9\\ud83d\\ude00\"",
    "\"\\ud800\"",
    "\"é😀 long enough to take chunks, é\"",
    "\"\\x\"",
    "\"\u{1}\"",
    "01",
    "1.",
    "tru",
    "nul",
];

/// Whitespace between tokens: mostly none, as on the wire.
const WS: &[&str] = &[" ", "", "", "\n\t"];

fn value(g: &mut Gen, out: &mut String, depth: usize) {
    out.push_str(g.pick(WS));
    let kind = if depth == 0 { 0 } else { g.below(4) };
    match kind {
        0 | 1 => out.push_str(g.pick(SCALARS)),
        2 => {
            out.push('[');
            let n = g.below(4);
            for i in 0..n {
                if i > 0 {
                    out.push(',');
                }
                value(g, out, depth - 1);
            }
            out.push(']');
        }
        _ => {
            out.push('{');
            // Up to 18 members: past the 16 names the shorter check keeps.
            let n = if g.below(8) == 0 { 14 + g.below(5) } else { g.below(5) };
            for i in 0..n {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(g.pick(WS));
                out.push('"');
                out.push_str(g.pick(NAMES));
                if n > 4 {
                    out.push_str(&i.to_string());
                }
                out.push('"');
                out.push_str(g.pick(WS));
                out.push(':');
                value(g, out, depth - 1);
            }
            out.push('}');
        }
    }
    out.push_str(g.pick(WS));
}

#[test]
fn fast_and_strict_skips_agree() {
    let mut g = Gen(0x9E37_79B9_7F4A_7C15);
    let (mut accepted, mut refused, mut folded, mut taken) = (0, 0, 0, 0);
    for case in 0..40_000 {
        let mut text = String::new();
        let depth = 1 + g.below(5);
        value(&mut g, &mut text, depth);
        // A third of the inputs broken by one byte deleted, doubled or replaced.
        if g.below(3) == 0 && !text.is_empty() {
            let at = g.below(text.len());
            if text.is_char_boundary(at) && text.is_char_boundary(at + 1) {
                let junk = [",", "}", "]", "\"", ":", "\\", "1", "{"];
                let (how, with) = (g.below(3), g.pick(&junk));
                match how {
                    0 => text.replace_range(at..at + 1, ""),
                    1 => text.insert_str(at, with),
                    _ => text.replace_range(at..at + 1, with),
                }
            }
        }
        let strict = skip_all(&text, false);
        assert_eq!(skip_all(&text, true), strict, "case {case}: {text:?}");
        match strict {
            (Ok(()), end, f) => {
                accepted += 1;
                folded += usize::from(f > 0);
                // Whatever the shorter check itself accepts, it ends where the strict path does,
                // and only where the strict path counts no folded clash.
                if let Ok(at) = skip(&text, 0, MAX_DEPTH) {
                    taken += 1;
                    assert_eq!((at + text[at..].len() - text[at..].trim_start().len(), f), (end, 0), "{text:?}");
                }
            }
            _ => refused += 1,
        }
    }
    assert!(
        accepted > 8_000 && refused > 8_000 && folded > 100 && taken > 4_000,
        "{accepted} {refused} {folded} {taken}"
    );
}

#[test]
fn depth_and_member_limits_are_the_strict_paths() {
    for depth in [MAX_DEPTH - 1, MAX_DEPTH, MAX_DEPTH + 1] {
        for (open, close) in [("[", "]"), ("{\"a\":", "}")] {
            let text = format!("{}1{}", open.repeat(depth), close.repeat(depth));
            assert_eq!(skip_all(&text, true), skip_all(&text, false), "{depth} {open}");
            assert_eq!(skip_all(&text, true).0.is_ok(), depth <= MAX_DEPTH, "{depth} {open}");
        }
    }
    for n in [15, 16, 17, 40] {
        let members: Vec<String> = (0..n).map(|i| format!("\"m{i}\":{i}")).collect();
        let text = format!("{{{}}}", members.join(","));
        assert_eq!(skip(&text, 0, MAX_DEPTH).is_ok(), n <= 16, "{n}");
        assert_eq!(skip_all(&text, true), (Ok(()), text.len(), 0), "{n}");
    }
}

/// Giving up deep inside a value does not make the strict path read it again from each level:
/// the shorter check is tried next only past where it gave up.
#[test]
fn giving_up_is_tried_again_only_past_that_point() {
    let text = format!("{}\"\\u0061\"{}", "[".repeat(60), "]".repeat(60));
    let mut p = Parser::new(text.as_bytes()).unwrap();
    p.skip_value().unwrap();
    assert_eq!(p.fast_from, 61);
    assert_eq!(p.pos, text.len());
}

#[test]
fn the_name_table_is_its_definition() {
    for c in 0..=255u8 {
        let in_name = crate::wire::fold::plain_ascii(&char::from(c).to_string()) && c != b'"' && c != b'\\';
        assert_eq!(super::NAME[usize::from(c)], in_name, "{c:#x}");
    }
}

/// Names are compared only when two share a bit of the object's signature set (the same length and
/// first letter always do): those that share one without clashing are accepted, and every clash is
/// still left to the strict path.
#[test]
fn only_names_alike_are_compared() {
    // "a" and "hx" share a bit (1 × 7 ^ 'a' and 2 × 7 ^ 'h' agree in their low six bits), as do
    // "node" and "note" (the same length and first letter): compared, and apart.
    let bit = |name: &str| super::signature(name.len(), name.bytes().next());
    assert_eq!(bit("a"), bit("hx"));
    assert_eq!(bit("node"), bit("Note"));
    assert_ne!(bit("k"), bit("v"));
    for text in [r#"{"a":1,"hx":2}"#, r#"{"node":1,"note":2,"vmid":3}"#] {
        assert_eq!(skip(text, 0, MAX_DEPTH), Ok(text.len()), "{text}");
        assert_eq!(skip_all(text, true), (Ok(()), text.len(), 0), "{text}");
    }
    // A folded pair and an exact one: the shorter check gives up at the object's end, and the
    // strict path decides (a folded clash counted; a duplicate refused).
    for (text, folded) in [(r#"{"Key":1,"x":0,"kEY":2}"#, Some(1)), (r#"{"k":1,"k":2}"#, None)] {
        assert_eq!(skip(text, 0, MAX_DEPTH), Err(text.len() - 1), "{text}");
        let strict = skip_all(text, false);
        assert_eq!(skip_all(text, true), strict, "{text}");
        match folded {
            Some(f) => assert_eq!(strict, (Ok(()), text.len(), f), "{text}"),
            None => assert!(strict.0.is_err(), "{text}"),
        }
    }
}

/// Numbers in every part of the grammar, well and badly formed, where the shorter check reads the
/// digits itself (a number led by 1 to 9) and where it leaves them to `number_end`: the same
/// outcome as the strict path, in an array and as a member's value.
#[test]
fn numbers_read_as_the_strict_path_reads_them() {
    let numbers = [
        "1",
        "12",
        "90",
        "1.5",
        "12.34e+56",
        "1E-2",
        "7e0",
        "1.",
        "1.e3",
        "1e",
        "1e+",
        "1.5.5",
        "1x",
        "1-2",
        "12 ",
        "9007199254740993",
        "0",
        "-0.0e0",
        "01",
        "-01",
        "-",
        "-1",
        "00",
        "1e5x",
        "2.5E",
    ];
    for n in numbers {
        for text in [format!("[{n}]"), format!("[{n},3]"), format!("{{\"a\":{n}}}"), format!("{{\"a\":{n},\"b\":1}}")] {
            let strict = skip_all(&text, false);
            assert_eq!(skip_all(&text, true), strict, "{text}");
            // What the strict path accepts, the shorter check accepts itself (it does not give up
            // on every number and leave them all to the strict path).
            assert_eq!(skip(&text, 0, MAX_DEPTH).is_ok(), strict.0.is_ok(), "{text}");
        }
        let strict = skip_all(n, false);
        assert_eq!(skip_all(n, true), strict, "{n}");
    }
}

#[test]
fn the_folding_bound_counts_what_both_paths_fold() {
    // Printable ASCII names take nothing from the bound, on either path: an object of nine plain
    // names (which the shorter check compares itself) beside one whose names fold long.
    let text = format!(
        r#"{{"a":{{"x":1,"{}":2}},"b":{{"k0":0,"k1":0,"k2":0,"k3":0,"k4":0,"k5":0,"k6":0,"k7":0,"k8":0}}}}"#,
        "\u{fdfa}".repeat(4)
    );
    let strict = skip_all(&text, false);
    assert_eq!(skip_all(&text, true), strict);
    assert!(strict.0.is_ok(), "{strict:?}");
    // Twelve U+FDFA (396 bytes folded) against 2·122 + 64: refused, at the same byte, both ways.
    let text = text.replace("\u{fdfa}\u{fdfa}\u{fdfa}\u{fdfa}", &"\u{fdfa}".repeat(12));
    let strict = skip_all(&text, false);
    assert_eq!(skip_all(&text, true), strict);
    assert!(matches!(strict.0, Err(ParseError { kind: super::super::ParseErrorKind::FoldedNamesTooLong, .. })));
}
