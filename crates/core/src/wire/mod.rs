//! Layer `wire`: the bytes on the wire and how both ends read them: strict JSON, folding, numbers,
//! HTTP header values, SSE, Base64, the JSON-RPC / MCP message model, protocol versions, the
//! JSON-RPC error replies and continuation legs.
//!
//! May use: `terms`. Used by every layer above.

pub mod b64;
pub mod fold;
pub mod http;
pub mod json;
pub mod leg;
pub mod mcp;
pub mod numbers;
pub mod pin;
pub mod protocol;
pub mod reply;
pub mod sse;
pub mod textpos;

/// A map keyed by names the policy holds (tools, methods, folded tool names, registered grants,
/// the wasm build's per-tool counters), looked up several times for every call (the rule, its
/// limits, its mode, its pin). No seed from the operating system is needed: the keys are the
/// policy's own, inserted at load, and a caller's name only looks one up, so no caller can build a
/// chain of colliding keys. Natively it hashes with foldhash (SipHash costs about 600 instructions
/// of every allowed call, `bench/native_instructions.py`), seeded per map by foldhash itself.
pub type NameMap<V> = std::collections::HashMap<String, V, NameHasher>;

/// The hasher of [`NameMap`], seeded per map.
#[cfg(not(target_arch = "wasm32"))]
pub type NameHasher = foldhash::fast::RandomState;
/// The hasher of [`NameMap`] in the wasm module: std's SipHash with fixed keys. std's seeded
/// `RandomState` would cost the module about 1.1 KB (its seed from WASI's `random_get`), and
/// foldhash more.
#[cfg(target_arch = "wasm32")]
pub type NameHasher = std::hash::BuildHasherDefault<std::hash::DefaultHasher>;
