//! The JSON-RPC 2.0 / MCP message model, read from one strict parse of the request body.
//!
//! Sources: JSON-RPC 2.0 specification §4–§6; MCP specification 2025-03-26 "Base Protocol" (batches)
//! and "Transports / Streamable HTTP" (one message or one batch per POST); MCP 2025-06-18
//! `server/tools` (`tools/call` params `{name, arguments}`).
//!
//! - [`message`]: the message model (ids, calls, messages, bodies); [`method`]: MCP method names;
//! - [`error`]: the protocol errors the filter answers itself (−32700, −32600, −32602);
//! - `read`: the envelope of a body, a message or a batch; `params`: what a decision reads of `params`;
//! - `member`: a member neither reader acts on: checked strictly, a near miss of a known name noted.

mod error;
mod member;
mod message;
mod method;
mod params;
mod read;

pub use error::{ProtocolError, ProtocolErrorKind};
pub use message::{Arguments, Body, Call, Id, Message, ToolCall};
pub use method::McpMethod;
pub use params::{declares_url_elicitation, CAPABILITIES_META_KEY};
pub use read::read_body;

#[cfg(test)]
mod tests;
