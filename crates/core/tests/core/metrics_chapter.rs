//! The book's stats table (docs/src/operate/metrics.md, "Stats") against the names both hosts
//! define (`outcome::catalog`): the table is written for readers, so it is not
//! generated, but it cannot drift. Every stat a filter defines is in it, and every name in it is
//! one a filter defines. A row names its later stats short (`_passed_total` after
//! `mcp_policy_allowed_total`): the first name's stem, up to one of its underscores, then the short
//! name (the longest stem that makes a stat's name).

use std::collections::BTreeSet;

use mcp_policy_core::config;
use mcp_policy_core::outcome::catalog::{self, catalog};
use mcp_policy_core::outcome::series::TOOL_DECISIONS;

const CHAPTER: &str = include_str!("../../../../docs/src/operate/metrics.md");

/// The `code`-quoted names of the first cell of each row of the Stats table, without a
/// `{labels}` suffix.
fn rows() -> Vec<Vec<&'static str>> {
    let section = CHAPTER.split("## Stats").nth(1).unwrap().split("\n## ").next().unwrap();
    let table = section.split("\n\n").find(|block| block.starts_with("| stat")).unwrap();
    table
        .lines()
        .skip(2) // the header and its rule
        .map(|line| {
            let cell = line.split('|').nth(1).unwrap();
            cell.split('`').skip(1).step_by(2).map(|n| n.split('{').next().unwrap()).collect()
        })
        .collect()
}

/// Every name a filter defines (the per-tool counters by their family's name).
fn defined() -> BTreeSet<String> {
    let policy = config::load(br#"{"version":"1","default":"deny","tools":{"t":{}}}"#).unwrap();
    let c = catalog(&[&policy]);
    let mut names: BTreeSet<String> = BTreeSet::new();
    names.extend(c.totals.into_iter().map(|(_, n)| n));
    names.extend(c.offers.into_iter().map(|(_, n)| n));
    names.extend(c.results.into_iter().map(|(_, n)| n));
    names.extend(c.extras.into_iter().map(|(_, n)| n));
    names.extend(
        [TOOL_DECISIONS, catalog::TRACKED_GRANTS, catalog::TOOLS_LIST_REMOVED, catalog::REDACTIONS, catalog::MARKS_SET]
            .map(str::to_owned),
    );
    assert!(c
        .per_tool
        .iter()
        .chain([(String::new(), c.other_tool)].iter())
        .all(|(_, series)| series.iter().all(|(_, n)| n.starts_with(&format!("{TOOL_DECISIONS}.")))));
    names
}

#[test]
fn the_stats_table_names_every_stat_and_only_those() {
    let defined = defined();
    let mut documented = BTreeSet::new();
    for row in rows() {
        let (first, short) = row.split_first().unwrap();
        assert!(defined.contains(*first), "the table names `{first}`, which no filter defines");
        documented.insert(first.to_string());
        let mut stems = BTreeSet::new();
        for s in short {
            // The longest stem the short name can follow into a defined name: the first name's
            // family (`_would_deny_total` after `mcp_policy_flow_denied_total` is the flow's).
            let stem = first
                .match_indices('_')
                .map(|(k, _)| &first[..k])
                .rfind(|stem| defined.contains(&format!("{stem}{s}")))
                .unwrap_or_else(|| panic!("`{s}` after `{first}` is no stat"));
            stems.insert(stem);
            documented.insert(format!("{stem}{s}"));
        }
        // A row is one family: its short names all follow one stem.
        assert!(stems.len() <= 1, "the short names after `{first}` follow {stems:?}");
    }
    let missing: Vec<&String> = defined.difference(&documented).collect();
    assert!(missing.is_empty(), "stats missing from docs/src/operate/metrics.md: {missing:?}");
    assert_eq!(documented.len(), 32);
}
