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
    // Spaces behind an invisible character are dropped too, however many.
    assert_eq!(tool_key(&format!("\u{200b}{}delete-vm", " ".repeat(10_000))), "delete_vm");
    assert_eq!(tool_key("\u{a8}x"), "\u{308}x");
    assert_eq!(tool_key_within("\u{a8}x", 3).as_deref(), Some("\u{308}x"));
    assert_eq!(tool_key_within("\u{a8}x", 2), None);
    assert_eq!(tool_key_within("Delete-VM", 9).as_deref(), Some("delete_vm"));
    assert_eq!(tool_key_within("Delete-VM", 8), None);
}

#[test]
fn canonical_strips_ignorables_and_applies_nfkc() {
    let read = |s: &str| canonical(s, usize::MAX).unwrap();
    assert_eq!(read("rm -rf"), None);
    assert_eq!(read("r\u{200b}m"), Some("rm".into()));
    assert_eq!(read("ｒｍ"), Some("rm".into()));
    assert_eq!(read("\u{ad}rm\u{202e}"), Some("rm".into()));
    assert_eq!(read("Ωmega"), None);
    assert_eq!(read("A\u{fe0f}"), Some("A".into()));
}

#[test]
fn canonical_stops_at_its_cap() {
    // U+FDFA (3 bytes) reads as 18 Arabic letters and spaces: 33 bytes.
    let word = "\u{fdfa}";
    assert_eq!(canonical(word, 33).unwrap().map(|r| r.len()), Some(33));
    assert_eq!(canonical(word, 32), Err(TooLong));
    assert_eq!(canonical("rm -rf", 6), Ok(None));
    assert_eq!(canonical("rm -rf", 5), Err(TooLong));
    assert_eq!(canonical("ｒｍ", 2), Ok(Some("rm".into())));
    assert_eq!(canonical("ｒｍ", 1), Err(TooLong));
    let many = word.repeat(100_000);
    assert_eq!(canonical(&many, 1 << 20), Err(TooLong));
    assert_eq!(canonical(&many, 3_300_000).unwrap().map(|r| r.len()), Some(3_300_000));
}

fn unbounded() -> usize {
    usize::MAX
}

#[test]
fn clashes() {
    assert_eq!(clash(&["a", "b"], &mut unbounded()), Ok(None));
    assert_eq!(clash(&["name", "Name"], &mut unbounded()), Ok(Some(Clash::Folded)));
    assert_eq!(clash(&["name", "Name", "name"], &mut unbounded()), Ok(Some(Clash::Exact)));
    assert_eq!(clash(&["cmd", "cmd\u{0}"], &mut unbounded()), Ok(Some(Clash::Folded)));
    let many: Vec<String> = (0..20).map(|i| format!("k{i}")).collect();
    let mut keys: Vec<&str> = many.iter().map(String::as_str).collect();
    assert_eq!(clash(&keys, &mut unbounded()), Ok(None));
    keys.push("K7");
    assert_eq!(clash(&keys, &mut unbounded()), Ok(Some(Clash::Folded)));
    keys.push("k7");
    assert_eq!(clash(&keys, &mut unbounded()), Ok(Some(Clash::Exact)));
}

#[test]
fn folding_stops_at_its_cap() {
    // U+FDFA (3 bytes) folds to 18 Arabic letters and spaces: 33 bytes.
    assert_eq!(name_key_within("\u{fdfa}", 33).map(|k| k.len()), Some(33));
    assert_eq!(name_key_within("\u{fdfa}", 32), None);
    assert_eq!(name_key_within("Name", 4).as_deref(), Some("name"));
    assert_eq!(name_key_within("Name", 3), None);
    // The keys of one object's names share the budget, which they take from.
    let mut budget = 70;
    assert_eq!(clash(&["\u{fdfa}", "a\u{fdfa}"], &mut budget), Ok(None));
    assert_eq!(budget, 3);
    assert_eq!(clash(&["\u{fdfa}", "ab"], &mut budget), Err(TooLong));
    let many: Vec<String> = (0..20).map(|i| format!("{i}\u{fdfa}")).collect();
    let keys: Vec<&str> = many.iter().map(String::as_str).collect();
    // Past 8 names the keys are sorted: 10 of 34 bytes and 10 of 35.
    let mut budget = 689;
    assert_eq!(clash(&keys, &mut budget), Err(TooLong));
    let mut budget = 690;
    assert_eq!(clash(&keys, &mut budget), Ok(None));
    assert_eq!(budget, 0);
}

#[test]
fn a_long_name_is_found_only_when_it_folds_onto_one() {
    let names = FoldedNames::new(["delete_vm", "stop"]);
    assert_eq!(names.find("Delete-VM"), Some("delete_vm"));
    // Padded with invisible characters and spaces, it still folds onto delete_vm.
    let padded = format!("{}delete-vm{}", "\u{200b} ".repeat(100_000), "\u{3000}".repeat(100_000));
    assert_eq!(names.find(&padded), Some("delete_vm"));
    // A name that folds to anything longer than every policy name is none of them.
    assert_eq!(names.find(&"\u{fdfa}".repeat(100_000)), None);
    assert_eq!(names.find("delete_vmx"), None);
}

#[test]
fn near_misses() {
    let known = ["name", "arguments"];
    assert_eq!(near_miss("name", &known), None);
    assert_eq!(near_miss("Name", &known), Some("name"));
    assert_eq!(near_miss("name\u{0}", &known), Some("name"));
    assert_eq!(near_miss("argument\u{17f}", &known), Some("arguments"));
    assert_eq!(near_miss("other", &known), None);
    // However long the name, invisible characters fold away; a key longer than every known
    // name is no near miss, and is not folded further.
    assert_eq!(near_miss(&format!("na{}me", "\u{200b}".repeat(10_000)), &known), Some("name"));
    assert_eq!(near_miss(&"\u{fdfa}".repeat(100_000), &known), None);
    assert_eq!(near_miss("ＮＡＭＥ", &known), Some("name"));
}

#[test]
fn no_visible_character_folds_to_less_than_a_quarter_of_its_bytes() {
    // What lets `name_key_within` refuse a long text without folding it.
    for c in (0..=0x10FFFF).filter_map(char::from_u32).filter(|&c| !is_invisible(c)) {
        let text = c.to_string();
        assert!(name_key(&text).len() * 4 >= text.len(), "{:04X}", u32::from(c));
    }
    assert_eq!(name_key("\u{1d400}"), "a");
    // A run of combining marks is refused at once: it would be read whole before any character
    // came out.
    let marks = format!("a{}", "\u{316}\u{301}".repeat(250_000));
    assert_eq!(name_key_within(&marks, 9), None);
    assert_eq!(tool_key_within(&marks, 9), None);
    assert_eq!(FoldedNames::new(["delete_vm"]).find(&marks), None);
}
