//! Grants: the caller's credential, reduced to a SHA-256 hash at once.
//!
//! By default the grant is the token of `Authorization: Bearer <token>` (RFC 6750 §2.1). With
//! `gateway.grant_header` it is the value of that header instead, which a trusted earlier Envoy
//! filter sets (e.g. `jwt_authn` with `claim_to_headers`). The token itself is never stored, logged
//! or used as a shared-data key; logs and metrics see only the label `sha256:<first 12 hex>`.

use sha2::{Digest, Sha256};

/// SHA-256 of the grant's credential; the raw token is never stored or logged.
pub type GrantId = [u8; 32];

/// A caller's grant.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Grant {
    /// SHA-256 of the credential bytes.
    pub id: GrantId,
    /// The label from `gateway.grants`, when the grant is registered there.
    pub registered: Option<String>,
}

impl Grant {
    pub fn from_credential(credential: &[u8]) -> Self {
        let digest = Sha256::digest(credential);
        let mut id = [0u8; 32];
        id.copy_from_slice(&digest);
        Grant { id, registered: None }
    }

    /// The registered label, else `sha256:` and the first 6 bytes of the hash in hex: enough to
    /// tell grants apart in logs, useless for recovering the token. One allocation, of its exact size.
    pub fn label(&self) -> String {
        if let Some(l) = &self.registered {
            return l.clone();
        }
        let mut s = String::with_capacity("sha256:".len() + 12);
        s.push_str("sha256:");
        push_hex(&mut s, self.id.get(..6).unwrap_or(&[]));
        s
    }
}

/// Lower-case hex of `bytes`, two digits a byte: grant ids, approval keys, session ids. The one hex
/// encoder of the workspace (`services/approvals/` and `services/ratelimit/` use it too; shared-data keys are written
/// on the stack by `ratelimit::Key`).
pub fn hex(bytes: &[u8]) -> String {
    let mut s = String::with_capacity(bytes.len() * 2);
    push_hex(&mut s, bytes);
    s
}

fn push_hex(s: &mut String, bytes: &[u8]) {
    let digit = |n: u8| char::from_digit(u32::from(n), 16).unwrap_or('0');
    for b in bytes {
        s.push(digit(b >> 4));
        s.push(digit(b & 0xf));
    }
}

/// The 32 bytes written as exactly 64 lower-case hex digits (a grant id or an approval key, as
/// [`hex`] writes them); `None` for any other text, upper-case digits included.
pub fn from_hex32(s: &str) -> Option<[u8; 32]> {
    let mut digits = s.bytes().map(|c| match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        _ => None,
    });
    let mut out = [0u8; 32];
    for o in &mut out {
        *o = (digits.next()?? << 4) | digits.next()??;
    }
    digits.next().is_none().then_some(out)
}

/// RFC 6750 §2.1 `b64token`: `1*( ALPHA / DIGIT / "-" / "." / "_" / "~" / "+" / "/" ) *"="`.
fn is_b64token(t: &[u8]) -> bool {
    let body_end = t.iter().rposition(|&b| b != b'=').map_or(0, |i| i + 1);
    body_end > 0 && t.iter().take(body_end).all(|&b| b.is_ascii_alphanumeric() || b"-._~+/".contains(&b))
}

/// The grant of an `Authorization` header value, if it is a well-formed bearer credential.
/// The scheme is case-insensitive (RFC 9110 §11.1); anything else (Basic, empty token, spaces in the
/// token) is no grant.
pub fn from_authorization(value: &[u8]) -> Option<Grant> {
    let value = value.trim_ascii();
    let scheme = value.get(..7)?;
    if !scheme.eq_ignore_ascii_case(b"bearer ") {
        return None;
    }
    let token = value.get(7..)?.trim_ascii_start();
    // `=` padding does not change what a base64 token decodes to (JWT validators accept `T` and
    // `T=` alike), so it must not make a second grant with its own quota.
    let unpadded = token.iter().rposition(|&b| b != b'=').map_or(token, |i| token.get(..=i).unwrap_or(token));
    is_b64token(token).then(|| Grant::from_credential(unpadded))
}

/// The grant of a trusted header value: any non-empty value after trimming whitespace.
pub fn from_trusted_header(value: &[u8]) -> Option<Grant> {
    let v = value.trim_ascii();
    (!v.is_empty()).then(|| Grant::from_credential(v))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bearer_tokens_are_hashed() {
        let g = from_authorization(b"Bearer abc").unwrap();
        // sha256("abc")
        assert_eq!(g.label(), "sha256:ba7816bf8f01");
        assert_eq!(from_authorization(b"bearer   abc"), Some(g.clone()));
        assert_eq!(from_authorization(b"BEARER abc "), Some(g));
        assert!(from_authorization(b"Bearer a.b-c_d~e+f/g==").is_some());
        assert_eq!(from_authorization(b"Bearer abc="), from_authorization(b"Bearer abc"));
        assert_eq!(from_authorization(b"Bearer abc=="), from_authorization(b"Bearer abc"));
    }

    #[test]
    fn malformed_credentials_are_no_grant() {
        for v in [
            &b""[..],
            b"Bearer",
            b"Bearer ",
            b"Basic abc",
            b"Bearerabc",
            b"Bearer a b",
            b"Bearer ===",
            b"Bearer \xff",
            b"Bearer a=b",
        ] {
            assert_eq!(from_authorization(v), None, "{:?}", String::from_utf8_lossy(v));
        }
    }

    #[test]
    fn hex_round_trip() {
        assert_eq!(hex(&[]), "");
        assert_eq!(hex(&[0, 0x0f, 0xab, 0xff]), "000fabff");
        let id = Grant::from_credential(b"abc").id;
        let text = hex(&id);
        assert_eq!(text, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
        assert_eq!(from_hex32(&text), Some(id));
        for bad in [&text[..62], &text.to_uppercase(), &format!("{}g", &text[..63]), &format!("{text}00"), ""] {
            assert_eq!(from_hex32(bad), None, "{bad}");
        }
        // 64 bytes but not 64 ASCII characters.
        assert_eq!(from_hex32(&format!("é{}", &text[..62])), None);
    }

    #[test]
    fn trusted_header_values() {
        assert_eq!(from_trusted_header(b" agent-7 "), Some(Grant::from_credential(b"agent-7")));
        assert_eq!(from_trusted_header(b"  "), None);
    }
}
