//! The book's answer table (docs/src/security/answers.md, "What the filter answers") against the
//! refusals themselves: the table is written for readers, so it is not generated, but it cannot
//! drift. Every refusal's HTTP status, code and `data.kind` stand together in one row of the table,
//! and every `data.kind` the table names is one a refusal renders.

use super::*;

const CHAPTER: &str = include_str!("../../../../../docs/src/security/answers.md");

/// The numbers in a cell, with the chapter's minus sign (U+2212) read as `-`.
fn numbers(cell: &str) -> Vec<i64> {
    cell.replace('\u{2212}', "-")
        .split(|c: char| !(c.is_ascii_digit() || c == '-'))
        .filter_map(|t| t.parse().ok())
        .collect()
}

/// The `code`-quoted words of a cell.
fn quoted(cell: &str) -> Vec<&str> {
    cell.split('`').skip(1).step_by(2).collect()
}

/// (HTTP statuses, codes, kinds) of each row of the "Checks in order" table.
fn rows() -> Vec<(Vec<i64>, Vec<i64>, Vec<&'static str>)> {
    let section = CHAPTER.split("## Checks in order").nth(1).unwrap();
    let table = section.split("\n\n").find(|block| block.starts_with("| #")).unwrap();
    table
        .lines()
        .skip(2) // the header and its rule
        .map(|line| {
            let cells: Vec<&str> = line.trim_end_matches('|').rsplitn(4, '|').collect();
            (numbers(cells[2]), numbers(cells[1]), quoted(cells[0]))
        })
        .collect()
}

#[test]
fn every_refusal_stands_in_the_answer_table_with_its_status_and_code() {
    let rows = rows();
    assert!(rows.len() > 20, "the table was not found: {rows:?}");
    for r in samples() {
        let (status, code, kind) = (i64::from(r.status()), i64::from(r.code()), r.kind());
        let listed = rows.iter().any(|(s, c, k)| s.contains(&status) && c.contains(&code) && k.contains(&kind));
        assert!(listed, "{kind} ({status}, {code}) is not in the answer table: {r:?}");
    }
}

#[test]
fn every_kind_in_the_answer_table_is_a_refusal() {
    let kinds: HashSet<&str> = samples().iter().map(Refusal::kind).collect();
    for (_, _, named) in rows() {
        for k in named {
            assert!(kinds.contains(k), "the answer table names `{k}`, which no refusal renders");
        }
    }
}
