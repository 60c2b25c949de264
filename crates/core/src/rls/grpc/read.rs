//! The answer to the call, read event by event as the HTTP/2 stream delivers it (headers, data,
//! trailers, reset), with the rules of Envoy's gRPC client for a unary call
//! (`Grpc::AsyncStreamImpl` and `AsyncRequestImpl`), so that the same service behaviour gives the
//! same [`Answer`] on both builds:
//!
//! | event | Envoy's gRPC client | here |
//! |---|---|---|
//! | headers, `:status` not 200 | its `grpc-status` if the headers end the stream (trailers-only), else the HTTP status mapped ([`http_to_grpc_status`]) | the same |
//! | headers, 200, ending the stream | trailers-only: its `grpc-status`, 2 UNKNOWN without one | the same |
//! | data | complete frames are messages, the last one kept; a frame's flag byte other than 0 or 1 is 13 INTERNAL as soon as it comes, a compressed frame with a message once it is complete; a partial frame waits for more | the same; a message over [`MAX_ANSWER_BYTES`] is counted, not kept, and refused if it is the last one (as the wasm build refuses it) |
//! | data ending the stream | 2 UNKNOWN (a unary answer ends with trailers) | the same |
//! | trailers | their `grpc-status`, 2 UNKNOWN without one | the same |
//! | reset | 13 INTERNAL | the same |
//! | status 0 | the last message; 13 INTERNAL if there was none | the same |
//! | a `grpc-status` value | `absl::SimpleAtoi` (ASCII whitespace around it allowed); over 16 or no number: `InvalidCode` | the same |
//!
//! The first of these that ends the call decides; nothing after it is read.

use super::{http_to_grpc_status, MAX_ANSWER_BYTES};
use crate::rls::{read_answer, Answer};

/// gRPC's INTERNAL and UNKNOWN, the statuses Envoy's gRPC client gives a broken or unended answer.
const INTERNAL: u32 = 13;
const UNKNOWN: u32 = 2;
/// The highest status gRPC defines (16 UNAUTHENTICATED), and what Envoy reads a `grpc-status`
/// beyond it, or that is no number, as (`Status::WellKnownGrpcStatus::InvalidCode`, -1).
const MAX_KNOWN: u64 = 16;
const INVALID_CODE: u32 = u32::MAX;

/// The last complete message of the answer.
#[derive(Debug, Default)]
enum Last {
    #[default]
    None,
    Message(Vec<u8>),
    /// Over [`MAX_ANSWER_BYTES`]: counted, not kept (refused, as the wasm build refuses it).
    TooLarge,
}

/// The answer to one call, fed the stream's events as they come; [`AnswerReader::take`] gives it
/// once an event ended the call.
#[derive(Debug, Default)]
pub struct AnswerReader {
    /// The frame being read: its header (5 bytes), then its message while it is at most
    /// [`MAX_ANSWER_BYTES`].
    frame: Vec<u8>,
    /// Bytes still to come of a message over [`MAX_ANSWER_BYTES`], and whether its frame is
    /// compressed.
    skipping: usize,
    skipping_compressed: bool,
    last: Last,
    /// Whether an event ended the call.
    ended: bool,
    /// The answer, from the event that ended the call until [`AnswerReader::take`].
    answer: Option<Answer>,
}

/// A `grpc-status` value as Envoy's `Common::getGrpcStatus` reads it: absent or empty is none; a
/// number (`absl::SimpleAtoi`: ASCII whitespace around it, a leading `+`) up to 16 is that status;
/// anything else is `InvalidCode`. Either way only 0, 4 and 14 are read as more than a refusal.
fn grpc_status(value: Option<&[u8]>) -> Option<u32> {
    let value = value.filter(|v| !v.is_empty())?;
    let number = std::str::from_utf8(value)
        .ok()
        .and_then(|g| g.trim_matches(|c: char| c.is_ascii_whitespace() || c == '\x0b').parse::<u64>().ok())
        .filter(|&g| g <= MAX_KNOWN);
    Some(number.and_then(|g| u32::try_from(g).ok()).unwrap_or(INVALID_CODE))
}

/// The message length a 5-byte frame header announces.
fn announced(header: &[u8]) -> usize {
    match header {
        [_, a, b, c, d, ..] => usize::try_from(u32::from_be_bytes([*a, *b, *c, *d])).unwrap_or(usize::MAX),
        _ => 0,
    }
}

impl AnswerReader {
    /// The answer, once an event has ended the call (`None` until then; given once).
    pub fn take(&mut self) -> Option<Answer> {
        self.answer.take()
    }

    /// Whether an event has ended the call (its answer given or not).
    pub fn ended(&self) -> bool {
        self.ended
    }

    fn close(&mut self, status: u32) {
        let answer = match (status, &self.last) {
            (0, Last::Message(message)) => read_answer(0, Some(message)),
            (0, Last::None) => read_answer(INTERNAL, None),
            (0, Last::TooLarge) => Answer::Unusable(super::ANSWER_TOO_LARGE.into()),
            (s, _) => read_answer(s, None),
        };
        self.end(answer);
    }

    fn end(&mut self, answer: Answer) {
        if !self.ended {
            self.ended = true;
            self.answer = Some(answer);
            self.frame = Vec::new();
        }
    }

    /// The response headers: `:status`, `grpc-status` (each if present), and whether they end the
    /// stream.
    pub fn headers(&mut self, status: Option<&[u8]>, grpc: Option<&[u8]>, end_stream: bool) {
        if self.ended {
            return;
        }
        let Some(status) = status.and_then(|s| std::str::from_utf8(s).ok()?.parse::<u16>().ok()) else {
            return self.end(Answer::Unusable("rate limit service answer has no HTTP status".into()));
        };
        match (status, grpc_status(grpc), end_stream) {
            (_, Some(g), true) => self.close(g),
            (200, None, true) => self.close(UNKNOWN),
            (200, _, false) => {}
            (http, _, _) => self.close(http_to_grpc_status(http)),
        }
    }

    /// Response body bytes, and whether they end the stream.
    pub fn data(&mut self, chunk: &[u8], end_stream: bool) {
        let mut rest = chunk;
        while !rest.is_empty() && !self.ended {
            rest = self.read_frame(rest);
        }
        if end_stream {
            self.close(UNKNOWN);
        }
    }

    /// Read `bytes` into the frame being read, as far as it goes; what is left of them. As Envoy's
    /// decoder: a frame's flag byte is checked as soon as it comes, a compressed frame with a
    /// message only once it is complete, and a message replaces the last one once complete.
    fn read_frame<'b>(&mut self, bytes: &'b [u8]) -> &'b [u8] {
        if self.skipping > 0 {
            let n = self.skipping.min(bytes.len());
            self.skipping -= n;
            if self.skipping == 0 {
                if self.skipping_compressed {
                    self.unreadable();
                }
                self.last = Last::TooLarge;
            }
            return bytes.get(n..).unwrap_or_default();
        }
        if self.frame.len() < 5 {
            let Some((&b, rest)) = bytes.split_first() else { return bytes };
            if self.frame.is_empty() && b & !1 != 0 {
                self.unreadable();
                return &[];
            }
            self.frame.push(b);
            let len = announced(&self.frame);
            if self.frame.len() == 5 && len > MAX_ANSWER_BYTES {
                self.skipping = len;
                self.skipping_compressed = self.frame.first() == Some(&1);
                self.frame.clear();
            } else if self.frame.len() == 5 && len == 0 {
                self.complete();
            }
            return rest;
        }
        let want = (5 + announced(&self.frame)).saturating_sub(self.frame.len());
        let (now, rest) = bytes.split_at(want.min(bytes.len()));
        self.frame.extend_from_slice(now);
        if now.len() == want {
            self.complete();
        }
        rest
    }

    /// The frame read is complete.
    fn complete(&mut self) {
        let frame = std::mem::take(&mut self.frame);
        match frame.split_first() {
            Some((1, header_and_message)) if header_and_message.len() > 4 => {
                self.unreadable();
            }
            _ => self.last = Last::Message(frame.get(5..).unwrap_or_default().to_vec()),
        }
    }

    /// An answer Envoy's gRPC client refuses as 13 INTERNAL (an unknown frame flag, a compressed
    /// message), ended as that client ends it: the agent reads the same reason on both builds.
    fn unreadable(&mut self) {
        self.end(read_answer(INTERNAL, None));
    }

    /// The response trailers' `grpc-status`, if any.
    pub fn trailers(&mut self, grpc: Option<&[u8]>) {
        self.close(grpc_status(grpc).unwrap_or(UNKNOWN));
    }

    /// The stream was reset, or ended without an event that ends the call.
    pub fn reset(&mut self) {
        self.close(INTERNAL);
    }
}
