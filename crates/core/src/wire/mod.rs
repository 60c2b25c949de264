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
