//! The fuzz targets' seeds, replayed under `cargo test` through the very functions the targets
//! call (`fuzz/src`, included here by path): a seed that panics fails the ordinary test run, on
//! stable Rust, without cargo-fuzz. `make fuzz` explores beyond the seeds.
// Test code, and the fuzz targets' checks panic by design.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, clippy::indexing_slicing)]

use std::path::{Path, PathBuf};

#[path = "../../../fuzz/src/decide.rs"]
mod decide;
#[path = "../../../fuzz/src/json.rs"]
mod json;
#[path = "../../../fuzz/src/results.rs"]
mod results;
#[path = "../../../fuzz/src/toolslist.rs"]
mod toolslist;

/// Every file of `fuzz/DIR`, sorted by name; at least one.
fn seeds(dir: &str) -> Vec<(PathBuf, Vec<u8>)> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz").join(dir);
    let mut out: Vec<_> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_file())
        .map(|p| {
            let bytes = std::fs::read(&p).unwrap();
            (p, bytes)
        })
        .collect();
    out.sort();
    assert!(!out.is_empty(), "no seeds in {}", dir.display());
    out
}

/// Every seed of `fuzz/DIR` (there must be `count`) through a target's `run`, each named first so
/// that a failure shows which.
fn replay(dir: &str, count: usize, run: fn(&[u8])) {
    let all = seeds(dir);
    assert_eq!(all.len(), count, "seeds in fuzz/{dir}");
    for (path, bytes) in all {
        eprintln!("{}", path.display());
        run(&bytes);
    }
}

#[test]
fn results_seeds_replay() {
    replay("seeds-results", 11, results::run);
}

#[test]
fn json_seeds_replay() {
    replay("seeds-json", 4, json::run);
}

#[test]
fn decide_seeds_replay() {
    replay("seeds", 32, decide::run);
}

/// The tools/list target has no seeds of its own: upstream replies of both kinds serve.
#[test]
fn toolslist_replays_the_result_seeds() {
    for (path, bytes) in seeds("seeds-results") {
        eprintln!("{}", path.display());
        toolslist::run(&bytes);
    }
}
