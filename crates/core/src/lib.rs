//! mcp-policy-core: the decisions of mcp-policy-filter, an Envoy proxy-wasm filter that checks
//! every MCP tool call against a PolicyLayer `policy.json` before it reaches the MCP server.
//!
//! No host calls: shared data, the clock and callouts sit behind the seams that the adapter
//! (`crates/filter-wasm`, the only proxy-wasm crate) implements.
//!
//! The modules are layers, bottom to top; a module uses only its own layer and the layers below it,
//! never one above (`scripts/layers.py`, run by `make lint`, holds the order and checks it):
//!
//! 1. [`terms`]: the words a policy is written with (actions, windows, modes, failure modes);
//! 2. [`wire`]: JSON, folding, numbers, HTTP values, SSE, Base64, the MCP message model, protocol
//!    versions, JSON-RPC error replies, continuation legs;
//! 3. [`identity`]: grants (hashed credentials, `GrantId`), sessions bound to grants, stray
//!    credentials, the 401 challenge;
//! 4. [`limits`]: rate limit counters in shared data (by compare-and-swap) and the cap on held
//!    approval callouts;
//! 5. [`policy`]: the compiled policy, its rules, argument conditions and precedence;
//! 6. [`rls`]: the rate limit service protocol (RLS v3), the codec only;
//! 7. [`config`]: the policy file, parsed and compiled once per plugin configuration;
//! 8. [`approval`]: require approval: the binding key, the approval service's protocol, the offer
//!    through the protocol (`input_required`, −32042);
//! 9. [`outcome`]: refusals, the decision record, the audit line, the per-tool series;
//! 10. [`pipeline`]: the request path tying them together, from the headers and the body to an
//!     outcome; the body rewrites the host applies; the rate limit service's answer;
//! 11. [`response`]: the response side: the plan from the response headers and the chunk filter
//!     (`tools/list` results without hidden tools, or 502).
//!
//! The result-like types, by the layer that produces each:
//! - `limits`: `Admission`, `Taken` (units counted, to give back if the call does not go
//!   upstream) and `NotAdmitted` (over a limit, or the limiter unavailable);
//! - `policy`: `Verdict` (a call by name against the policy), `conditions::Step`;
//! - `rls`: `rls::Answer` (the rate limit service's reply, read);
//! - `approval`: `approval::Answer` (the approval service's reply), `offer::Retry` (what a
//!   continuation leg says about an offer);
//! - `outcome`: `Refusal` (what is answered), `Decision` and `DecisionKind` (what is recorded);
//! - `pipeline`: `HeadOutcome` (the headers alone), `Judged` (one message), `SessionCheck`,
//!   `Outcome` (what the host does next);
//! - `response`: `Plan` (from the response headers) and `Step` (per body chunk).

#![forbid(unsafe_code)]

pub mod approval;
pub mod config;
pub mod identity;
pub mod limits;
pub mod outcome;
pub mod pipeline;
pub mod policy;
pub mod response;
pub mod rls;
pub mod terms;
pub mod wire;

/// The crate version, logged in the VM start banner.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");
