//! mcp-policy-core: the decisions of mcp-policy-filter, an Envoy proxy-wasm filter that checks
//! every MCP tool call against a PolicyLayer `policy.json` before it reaches the MCP server.
//!
//! No host calls: shared data, the clock and callouts sit behind the seams that the adapter
//! (`crates/filter-wasm`, the only proxy-wasm crate) implements.
//! - [`json`]: the one strict JSON parser decisions are made on;
//! - [`fold`]: the forms under which different names read as one (case folding, NFKC, invisibles);
//! - [`numbers`]: arguments as the server reads them (numbers as binary64, strings after NFKC);
//! - [`mcp`]: the JSON-RPC 2.0 / MCP message model;
//! - [`config`]: the policy file, parsed and compiled once per plugin configuration;
//! - [`policy`]: the compiled policy and its precedence;
//! - [`conditions`]: argument conditions (`require`, `deny_if`);
//! - [`ratelimit`]: counters over proxy-wasm shared data, by compare-and-swap;
//! - [`rls`]: cluster-wide limits through Envoy's rate limit service protocol (RLS v3);
//! - [`grant`]: credentials, hashed; the hex encoder and decoder of the whole workspace;
//! - [`stray`]: credentials outside the grant's one place (`access_token` query, header variants);
//! - [`challenge`]: the `WWW-Authenticate` challenge of a 401 (RFC 6750, RFC 9728);
//! - [`http`]: HTTP header values (media types, charsets, content codings);
//! - [`refusal`]: every refusal as one type, one variant per `data.kind`, rendered in one place;
//! - [`reply`]: the JSON-RPC error wire shape, its codes and the local reply;
//! - [`b64`]: Base64 (RFC 4648) for short header values;
//! - [`approval`]: require approval: the binding key of a call and the approval service's protocol;
//! - [`protocol`]: MCP protocol versions, the per-version method table and version detection;
//! - [`offer`]: require approval offered through the protocol (`input_required`, −32042), sealed;
//! - [`rewrite`]: request body rewrites the core plans and the host applies;
//! - [`held`]: the per-grant cap on held approval callouts (hold mode), in shared data;
//! - [`gate`]: the request pipeline tying them together;
//! - [`audit`]: the audit record of a decision (the audit-log line, log-safe values);
//! - [`response`]: the response side: the plan from the response headers, and the chunk filter
//!   that removes hidden tools from the body or refuses it (502);
//! - [`session`]: `Mcp-Session-Id` bound to its grant by HMAC (`gateway.session_key`);
//! - [`sse`]: which SSE events can carry a JSON-RPC message;
//! - [`series`]: which per-tool decision counters a policy needs;
//! - [`textpos`]: byte offsets as line and column, for policy syntax errors;
//! - [`toolslist`]: removing hidden tools from `tools/list` results (JSON and SSE);

#![forbid(unsafe_code)]

pub mod approval;
pub mod audit;
pub mod b64;
pub mod challenge;
pub mod conditions;
pub mod config;
pub mod fold;
pub mod gate;
pub mod grant;
pub mod held;
pub mod http;
pub mod json;
pub mod leg;
pub mod mcp;
pub mod numbers;
pub mod offer;
pub mod policy;
pub mod protocol;
pub mod ratelimit;
pub mod refusal;
pub mod reply;
pub mod response;
pub mod rewrite;
pub mod rls;
pub mod series;
pub mod session;
pub mod sse;
pub mod stray;
pub mod textpos;
pub mod toolslist;

/// The crate version, logged in the VM start banner.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");
