//! The answer to the call, read event by event as the HTTP/2 stream delivers it (headers, data,
//! trailers, reset), with the rules of Envoy's gRPC client for a unary call
//! (`Grpc::AsyncStreamImpl` and `AsyncRequestImpl`), so that the same service behaviour gives the
//! same [`Answer`] on both builds:
//!
//! | event | Envoy's gRPC client | here |
//! |---|---|---|
//! | headers, `:status` not 200 | its `grpc-status` if the headers end the stream (trailers-only), else the HTTP status mapped ([`http_to_grpc_status`]) | the same |
//! | headers, 200, ending the stream | trailers-only: its `grpc-status`, 2 UNKNOWN without one | the same |
//! | data | complete frames are messages, the last one kept; a frame header with an unknown flag, or a compressed frame, is 13 INTERNAL; a partial frame waits for more | the same; a message over [`MAX_ANSWER_BYTES`] is unusable (as in the wasm build) |
//! | data ending the stream | 2 UNKNOWN (a unary answer ends with trailers) | the same |
//! | trailers | their `grpc-status`, 2 UNKNOWN without one | the same |
//! | reset | 13 INTERNAL | the same |
//! | status 0 | the last message; 13 INTERNAL if there was none | the same |
//!
//! The first of these that ends the call decides; nothing after it is read.

use super::{http_to_grpc_status, MAX_ANSWER_BYTES};
use crate::rls::{read_answer, Answer};

/// gRPC's INTERNAL and UNKNOWN, the statuses Envoy's gRPC client gives a broken or unended answer.
const INTERNAL: u32 = 13;
const UNKNOWN: u32 = 2;

/// The answer to one call, fed the stream's events as they come; [`AnswerReader::take`] gives it
/// once an event ended the call.
#[derive(Debug, Default)]
pub struct AnswerReader {
    /// Bytes of a frame not complete yet.
    pending: Vec<u8>,
    /// The last complete message.
    message: Option<Vec<u8>>,
    /// Whether an event ended the call.
    ended: bool,
    /// The answer, from the event that ended the call until [`AnswerReader::take`].
    answer: Option<Answer>,
}

/// A `grpc-status` value as Envoy's `Common::getGrpcStatus` reads it: one that is no number is
/// not a known status (2 UNKNOWN here: refused either way).
fn grpc_status(value: &[u8]) -> u32 {
    std::str::from_utf8(value).ok().and_then(|g| g.parse::<u32>().ok()).unwrap_or(UNKNOWN)
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
        let answer = match (status, &self.message) {
            (0, Some(message)) => read_answer(0, Some(message)),
            (0, None) => read_answer(INTERNAL, None),
            (s, _) => read_answer(s, None),
        };
        self.end(answer);
    }

    fn end(&mut self, answer: Answer) {
        if !self.ended {
            self.ended = true;
            self.answer = Some(answer);
            self.pending = Vec::new();
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
        match (status, grpc, end_stream) {
            (_, Some(g), true) => self.close(grpc_status(g)),
            (200, None, true) => self.close(UNKNOWN),
            (200, _, false) => {}
            (http, _, _) => self.close(http_to_grpc_status(http)),
        }
    }

    /// Response body bytes, and whether they end the stream.
    pub fn data(&mut self, chunk: &[u8], end_stream: bool) {
        if self.ended {
            return;
        }
        self.pending.extend_from_slice(chunk);
        while let Some(head) = self.pending.first_chunk::<5>() {
            let (flag, len) = (head[0], u32::from_be_bytes([head[1], head[2], head[3], head[4]]));
            if flag & !1 != 0 {
                return self.unreadable("unknown gRPC frame flag");
            }
            let len = usize::try_from(len).unwrap_or(usize::MAX);
            if len > MAX_ANSWER_BYTES {
                return self
                    .end(Answer::Unusable(format!("rate limit service answer exceeds {MAX_ANSWER_BYTES} bytes")));
            }
            if self.pending.len() < 5 + len {
                break;
            }
            if flag == 1 && len > 0 {
                return self.unreadable("compressed gRPC message");
            }
            self.message = Some(self.pending.drain(..5 + len).skip(5).collect());
        }
        if end_stream {
            self.close(UNKNOWN);
        }
    }

    fn unreadable(&mut self, why: &str) {
        self.end(Answer::Unusable(format!("rate limit service answer unreadable: {why} (gRPC status 13)")));
    }

    /// The response trailers' `grpc-status`, if any.
    pub fn trailers(&mut self, grpc: Option<&[u8]>) {
        self.close(grpc.map_or(UNKNOWN, grpc_status));
    }

    /// The stream was reset, or ended without an event that ends the call.
    pub fn reset(&mut self) {
        self.close(INTERNAL);
    }
}
