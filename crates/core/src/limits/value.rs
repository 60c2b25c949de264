//! The stored values' byte layouts: fixed-window counters and sliding-window logs.

/// A counter value: window start (seconds since the epoch, UTC) and count, 16 bytes little-endian.
pub(super) fn encode(window_start: u64, count: u64) -> [u8; 16] {
    let mut out = [0u8; 16];
    let (a, b) = out.split_at_mut(8);
    a.copy_from_slice(&window_start.to_le_bytes());
    b.copy_from_slice(&count.to_le_bytes());
    out
}

pub(super) fn decode(v: &[u8]) -> Option<(u64, u64)> {
    let a: [u8; 8] = v.get(..8)?.try_into().ok()?;
    let b: [u8; 8] = v.get(8..16)?.try_into().ok()?;
    (v.len() == 16).then(|| (u64::from_le_bytes(a), u64::from_le_bytes(b)))
}

/// A sliding-window log: count (u64 LE) then that many admission times (ms since the epoch, u64 LE).
pub(super) fn encode_log(times: &[u64]) -> Vec<u8> {
    let mut out = Vec::with_capacity(8 + 8 * times.len());
    out.extend_from_slice(&(times.len() as u64).to_le_bytes());
    for t in times {
        out.extend_from_slice(&t.to_le_bytes());
    }
    out
}

pub(super) fn decode_log(v: &[u8]) -> Option<Vec<u64>> {
    let n = usize::try_from(decode_u64(v.get(..8)?)?).ok()?;
    let rest = v.get(8..)?;
    if rest.len() != n.checked_mul(8)? {
        return None;
    }
    rest.chunks_exact(8).map(decode_u64).collect()
}

pub(super) fn decode_u64(v: &[u8]) -> Option<u64> {
    Some(u64::from_le_bytes(v.try_into().ok()?))
}
