//! A minimal protobuf (proto3 wire format) codec for just the two messages of Envoy's rate limit
//! service: `envoy.service.ratelimit.v3.RateLimitRequest` (encoded) and `RateLimitResponse`
//! (decoded). Hand-written so the wasm module carries no protobuf runtime; checked against
//! `envoy-types`' prost messages in `services/ratelimit/tests/filter_codec.rs`.
//!
//! Field numbers (envoy/service/ratelimit/v3/rls.proto, envoy/extensions/common/ratelimit/v3/
//! ratelimit.proto, google/protobuf/wrappers.proto and duration.proto):
//! - RateLimitRequest: 1 domain (string), 2 descriptors (RateLimitDescriptor, repeated),
//!   3 hits_addend (uint32);
//! - RateLimitDescriptor: 1 entries (Entry{1 key, 2 value}, repeated), 2 limit
//!   (RateLimitOverride{1 requests_per_unit uint32, 2 unit enum}), 3 hits_addend (UInt64Value{1});
//! - RateLimitResponse: 1 overall_code (enum: 0 UNKNOWN, 1 OK, 2 OVER_LIMIT), 2 statuses
//!   (DescriptorStatus{1 code, 2 current_limit, 3 limit_remaining uint32, 4 duration_until_reset
//!   Duration{1 seconds int64, 2 nanos int32}, 5 quota}), 3–7 not read.

/// `RateLimitUnit`: SECOND 1, MINUTE 2, HOUR 3, DAY 4 (envoy/type/v3/ratelimit_unit.proto).
pub type Unit = i32;

/// One descriptor of a request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Descriptor {
    pub entries: Vec<(String, String)>,
    /// The `limit` override: (requests_per_unit, unit).
    pub limit: Option<(u32, Unit)>,
    /// The per-descriptor `hits_addend` (sent as a `UInt64Value`).
    pub hits_addend: Option<u64>,
}

/// `RateLimitRequest`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    pub domain: String,
    pub descriptors: Vec<Descriptor>,
    /// 0: not sent (the protocol's default of 1).
    pub hits_addend: u32,
}

/// `RateLimitResponse.Code`.
pub const CODE_UNKNOWN: i32 = 0;
pub const CODE_OK: i32 = 1;
pub const CODE_OVER_LIMIT: i32 = 2;

/// One `DescriptorStatus`, as far as the filter reads it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Status {
    pub code: i32,
    pub limit_remaining: u32,
    /// `duration_until_reset` in milliseconds (rounded up), if sent.
    pub until_reset_ms: Option<u64>,
}

/// `RateLimitResponse`, as far as the filter reads it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Response {
    pub overall_code: i32,
    pub statuses: Vec<Status>,
}

fn varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn tag(out: &mut Vec<u8>, field: u32, wire: u8) {
    varint(out, (u64::from(field) << 3) | u64::from(wire));
}

fn bytes_field(out: &mut Vec<u8>, field: u32, bytes: &[u8]) {
    tag(out, field, 2);
    varint(out, bytes.len() as u64);
    out.extend_from_slice(bytes);
}

fn varint_field(out: &mut Vec<u8>, field: u32, v: u64) {
    if v != 0 {
        tag(out, field, 0);
        varint(out, v);
    }
}

/// `envoy.config.core.v3.GrpcService{envoy_grpc: {cluster_name, authority}}` (grpc_service.proto:
/// GrpcService 1 envoy_grpc; EnvoyGrpc 1 cluster_name, 2 authority), serialized.
pub fn grpc_service(cluster: &str, authority: &str) -> Vec<u8> {
    let mut inner = Vec::with_capacity(cluster.len() + authority.len() + 6);
    bytes_field(&mut inner, 1, cluster.as_bytes());
    bytes_field(&mut inner, 2, authority.as_bytes());
    let mut out = Vec::with_capacity(inner.len() + 3);
    bytes_field(&mut out, 1, &inner);
    out
}

impl Request {
    /// The wire bytes (the gRPC message, without the 5-byte gRPC frame header: Envoy adds it).
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(64 + 128 * self.descriptors.len());
        if !self.domain.is_empty() {
            bytes_field(&mut out, 1, self.domain.as_bytes());
        }
        for d in &self.descriptors {
            let mut m = Vec::with_capacity(128);
            for (k, v) in &d.entries {
                let mut e = Vec::with_capacity(k.len() + v.len() + 4);
                if !k.is_empty() {
                    bytes_field(&mut e, 1, k.as_bytes());
                }
                if !v.is_empty() {
                    bytes_field(&mut e, 2, v.as_bytes());
                }
                bytes_field(&mut m, 1, &e);
            }
            if let Some((rpu, unit)) = d.limit {
                let mut l = Vec::with_capacity(8);
                varint_field(&mut l, 1, u64::from(rpu));
                // Enums are int32: negative values are sign-extended to 10 bytes.
                varint_field(&mut l, 2, i64::from(unit) as u64);
                bytes_field(&mut m, 2, &l);
            }
            if let Some(h) = d.hits_addend {
                let mut w = Vec::with_capacity(11);
                varint_field(&mut w, 1, h);
                bytes_field(&mut m, 3, &w);
            }
            bytes_field(&mut out, 2, &m);
        }
        varint_field(&mut out, 3, u64::from(self.hits_addend));
        out
    }
}

/// Why an answer could not be read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DecodeError(pub &'static str);

struct Reader<'a> {
    buf: &'a [u8],
}

impl<'a> Reader<'a> {
    fn varint(&mut self) -> Result<u64, DecodeError> {
        let mut v: u64 = 0;
        for i in 0..10 {
            let (&b, rest) = self.buf.split_first().ok_or(DecodeError("truncated varint"))?;
            self.buf = rest;
            if i == 9 && b > 1 {
                return Err(DecodeError("varint overflow"));
            }
            v |= u64::from(b & 0x7f) << (7 * i);
            if b < 0x80 {
                return Ok(v);
            }
        }
        Err(DecodeError("varint overflow"))
    }

    fn take(&mut self, n: u64) -> Result<&'a [u8], DecodeError> {
        let n = usize::try_from(n).map_err(|_| DecodeError("length overflow"))?;
        if n > self.buf.len() {
            return Err(DecodeError("truncated field"));
        }
        let (head, rest) = self.buf.split_at(n);
        self.buf = rest;
        Ok(head)
    }

    /// The next (field number, wire type), or `None` at the end.
    fn next(&mut self) -> Result<Option<(u64, u8)>, DecodeError> {
        if self.buf.is_empty() {
            return Ok(None);
        }
        let key = self.varint()?;
        let field = key >> 3;
        if field == 0 {
            return Err(DecodeError("field number 0"));
        }
        Ok(Some((field, (key & 7) as u8)))
    }

    /// Skip a value of wire type `wire` (groups, types 3 and 4, are refused).
    fn skip(&mut self, wire: u8) -> Result<(), DecodeError> {
        match wire {
            0 => self.varint().map(|_| ()),
            1 => self.take(8).map(|_| ()),
            2 => {
                let n = self.varint()?;
                self.take(n).map(|_| ())
            }
            5 => self.take(4).map(|_| ()),
            _ => Err(DecodeError("unsupported wire type")),
        }
    }

    fn len_delimited(&mut self, wire: u8) -> Result<&'a [u8], DecodeError> {
        if wire != 2 {
            return Err(DecodeError("wrong wire type for a message"));
        }
        let n = self.varint()?;
        self.take(n)
    }

    fn int(&mut self, wire: u8) -> Result<u64, DecodeError> {
        if wire != 0 {
            return Err(DecodeError("wrong wire type for an integer"));
        }
        self.varint()
    }
}

/// Read an int32 from its varint (negative values arrive sign-extended to 64 bits).
fn int32(v: u64) -> i32 {
    v as i64 as i32
}

fn duration_ms(buf: &[u8]) -> Result<u64, DecodeError> {
    let mut r = Reader { buf };
    let (mut seconds, mut nanos) = (0i64, 0i32);
    while let Some((field, wire)) = r.next()? {
        match field {
            1 => seconds = r.int(wire)? as i64,
            2 => nanos = int32(r.int(wire)?),
            _ => r.skip(wire)?,
        }
    }
    if seconds < 0 || nanos < 0 {
        return Ok(0);
    }
    let ms = (seconds as u64).saturating_mul(1000);
    Ok(ms.saturating_add((nanos as u64).div_ceil(1_000_000)))
}

fn status(buf: &[u8]) -> Result<Status, DecodeError> {
    let mut r = Reader { buf };
    let mut s = Status::default();
    while let Some((field, wire)) = r.next()? {
        match field {
            1 => s.code = int32(r.int(wire)?),
            3 => s.limit_remaining = r.int(wire)? as u32,
            4 => s.until_reset_ms = Some(duration_ms(r.len_delimited(wire)?)?),
            _ => r.skip(wire)?,
        }
    }
    Ok(s)
}

impl Response {
    /// Read a `RateLimitResponse` (the gRPC message without its frame header). Unknown fields are
    /// skipped, as protobuf requires; malformed input is an error, never a panic.
    pub fn decode(buf: &[u8]) -> Result<Response, DecodeError> {
        let mut r = Reader { buf };
        let mut out = Response::default();
        while let Some((field, wire)) = r.next()? {
            match field {
                1 => out.overall_code = int32(r.int(wire)?),
                2 => {
                    if out.statuses.len() >= 1024 {
                        return Err(DecodeError("too many statuses"));
                    }
                    out.statuses.push(status(r.len_delimited(wire)?)?);
                }
                _ => r.skip(wire)?,
            }
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varints_round_trip() {
        for v in [0u64, 1, 127, 128, 300, u32::MAX as u64, u64::MAX] {
            let mut b = Vec::new();
            varint(&mut b, v);
            assert_eq!(Reader { buf: &b }.varint(), Ok(v));
        }
        assert!(Reader { buf: &[0x80] }.varint().is_err());
        assert!(Reader { buf: &[0xff; 11] }.varint().is_err());
    }

    #[test]
    fn grpc_service_names_cluster_and_authority() {
        assert_eq!(grpc_service("c|1", "h"), [0x0a, 0x08, 0x0a, 0x03, b'c', b'|', b'1', 0x12, 0x01, b'h']);
        // Lengths from 128 on take two varint bytes, which are not ASCII (rls::compile refuses them).
        let long = grpc_service(&"c".repeat(200), "h");
        assert_eq!(&long[..5], &[0x0a, 0xce, 0x01, 0x0a, 0xc8]);
        assert!(grpc_service(&"c".repeat(100), &"h".repeat(23)).is_ascii());
        assert!(!grpc_service(&"c".repeat(100), &"h".repeat(24)).is_ascii());
    }

    #[test]
    fn decodes_a_known_answer_and_refuses_junk() {
        // overall_code OVER_LIMIT; one status {code 2, limit_remaining 0, duration {seconds 42, nanos 1}}.
        let bytes = [0x08, 0x02, 0x12, 0x08, 0x08, 0x02, 0x22, 0x04, 0x08, 0x2a, 0x10, 0x01];
        let r = Response::decode(&bytes).unwrap();
        assert_eq!(r.overall_code, CODE_OVER_LIMIT);
        assert_eq!(r.statuses, vec![Status { code: 2, limit_remaining: 0, until_reset_ms: Some(42_001) }]);
        assert!(Response::decode(&[0x12, 0x05, 0x08]).is_err());
        assert!(Response::decode(&[0x0b]).is_err()); // a group
        assert_eq!(Response::decode(&[]).unwrap().overall_code, CODE_UNKNOWN);
    }
}
