//! Times `pipeline::on_body` on one body under one policy, with the load benchmark's request head
//! (`crates/core/benches/support/request.rs`), in whatever runs this program: `run.mjs` runs the wasm32-wasip1
//! build in Node.js's V8. Arguments: `POLICY BODY [ITERATIONS]` (files; `run.mjs` passes them as
//! absolute paths under the one directory it preopens, `/`). Prints one JSON line: the best and
//! median of 5 timed runs of ITERATIONS decisions each, in µs per decision, after as many untimed
//! ones.

use std::time::Instant;

use mcp_policy_core::limits::MemoryStore;
use mcp_policy_core::{config, pipeline};

#[path = "../../../crates/core/benches/support/request.rs"]
mod request;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let (Some(policy), Some(body)) = (args.get(1), args.get(2)) else {
        eprintln!("usage: mcpf-bench-v8-decision POLICY BODY [ITERATIONS]");
        std::process::exit(2);
    };
    let n: u32 = args.get(3).and_then(|a| a.parse().ok()).unwrap_or(20_000);
    let policy = match std::fs::read(policy)
        .map_err(|e| e.to_string())
        .and_then(|t| config::load(&t).map_err(|e| e.to_string()))
    {
        Ok(p) => p,
        Err(e) => {
            eprintln!("{policy}: {e}");
            std::process::exit(1);
        }
    };
    let Ok(body) = std::fs::read(body) else {
        eprintln!("{body}: cannot read");
        std::process::exit(1);
    };
    let store = MemoryStore::new();
    let once = |n: u32| {
        let t = Instant::now();
        for _ in 0..n {
            let head = request::head(&policy);
            std::hint::black_box(pipeline::on_body(&policy, &head, std::hint::black_box(&body), &store, request::NOW_MS));
        }
        t.elapsed().as_secs_f64() * 1e6 / f64::from(n)
    };
    // The first outcome must be the allowed forward the load benchmark measures.
    let first = pipeline::on_body(&policy, &request::head(&policy), &body, &store, request::NOW_MS);
    if first.reply.is_some() {
        eprintln!("the body is not allowed under this policy: {:?}", first.decision.label());
        std::process::exit(1);
    }
    once(n);
    let mut runs: Vec<f64> = (0..5).map(|_| once(n)).collect();
    runs.sort_by(f64::total_cmp);
    println!(
        "{{\"us_per_decision_best\":{:.3},\"us_per_decision_median\":{:.3},\"iterations\":{n}}}",
        runs[0], runs[2]
    );
}
