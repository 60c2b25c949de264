//! Stray credentials: a credential in a place where a server might read one, other than the one
//! place the filter takes the grant from (`gateway.grant_header` or `Authorization`).
//!
//! The filter counts, limits and logs the grant it reads; a server that authenticates a different
//! credential acts for someone the filter never saw. Two places are known to be read:
//!
//! - the query parameter `access_token` (RFC 6750 §2.3). The MCP authorization spec forbids access
//!   tokens in the query string, yet many OAuth server libraries still accept them. Parameter
//!   names are compared as servers decode them: percent-decoded, `+` as space, ASCII case folded,
//!   and with PHP's mapping of space, `.`, `-` and an unmatched `[` to `_` (`access.token`,
//!   `ACCESS%5FTOKEN`, `access[token`), and `access_token[]` as the array `access_token`;
//! - a header whose name differs from the grant header only by `-` versus `_`. CGI-style servers
//!   (WSGI `environ`, gunicorn, PHP) map both to `HTTP_X_MCP_SUBJECT`, so `x_mcp_subject` beside
//!   `x-mcp-subject` can make the server see a forged subject. The shipped Envoy configs also set
//!   `headers_with_underscores_action: REJECT_REQUEST`, which refuses such headers before any filter.

/// Does the request target (`:path`, bytes) carry an `access_token` query parameter in any spelling
/// a server may decode to that name?
pub fn query_has_access_token(path: &[u8]) -> bool {
    let path = path.split(|&b| b == b'#').next().unwrap_or(b"");
    let Some(q) = path.iter().position(|&b| b == b'?') else { return false };
    let query = path.get(q + 1..).unwrap_or(b"");
    query.split(|&b| b == b'&' || b == b';').any(|param| {
        let name = param.split(|&b| b == b'=').next().unwrap_or(b"");
        let name = normalize(name);
        // PHP reads a first `[` with no `]` after it as `_`, and the rest of the name as it is
        // (`php_register_variable_ex`): of such names, only `access[token` is `access_token`.
        name == b"access_token" || name == b"access[token" || name.split(|&b| b == b'[').next() == Some(b"access_token")
    })
}

/// A query parameter name as servers decode it: percent-decoded, `+` as space, ASCII lower-case,
/// leading spaces dropped, and space, `.` and `-` read as `_` (PHP).
fn normalize(name: &[u8]) -> Vec<u8> {
    let hex = |b: u8| char::from(b).to_digit(16).and_then(|d| u8::try_from(d).ok());
    let mut out = Vec::with_capacity(name.len());
    let mut i = 0;
    while let Some(&b) = name.get(i) {
        let decoded = match (b, name.get(i + 1).copied().and_then(hex), name.get(i + 2).copied().and_then(hex)) {
            (b'%', Some(h), Some(l)) => {
                i += 3;
                h * 16 + l
            }
            (b'+', _, _) => {
                i += 1;
                b' '
            }
            _ => {
                i += 1;
                b
            }
        };
        out.push(decoded.to_ascii_lowercase());
    }
    // PHP cuts a name at a NUL (`access_token%00x` is `access_token`).
    if let Some(nul) = out.iter().position(|&b| b == 0) {
        out.truncate(nul);
    }
    let start = out.iter().position(|&b| b != b' ').unwrap_or(out.len());
    out.drain(..start);
    for b in &mut out {
        if matches!(*b, b' ' | b'.' | b'-') {
            *b = b'_';
        }
    }
    out
}

/// Is `name` (lower-case) another spelling of the grant header `grant` that CGI-style servers read
/// as the same header: equal once `-` and `_` are treated alike, without being equal?
pub fn is_header_variant(name: &str, grant: &str) -> bool {
    name != grant
        && name.len() == grant.len()
        && name
            .bytes()
            .zip(grant.bytes())
            .all(|(a, b)| a == b || (matches!(a, b'-' | b'_') && matches!(b, b'-' | b'_')))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn access_token_in_any_spelling() {
        for path in [
            &b"/mcp?access_token=abc"[..],
            b"/mcp?x=1&ACCESS_TOKEN=abc",
            b"/mcp?x=1;Access_Token",
            b"/mcp?access%5Ftoken=abc",
            b"/mcp?%61ccess_token=abc",
            b"/mcp?access.token=abc",
            b"/mcp?access+token=abc",
            b"/mcp?access-token=abc",
            b"/mcp?access_token[]=abc",
            b"/mcp?+access_token=abc",
            // An unmatched `[` is PHP's `_`, however spelled.
            b"/mcp?access[token=stolen",
            b"/mcp?ACCESS[TOKEN=stolen",
            b"/mcp?access%5Btoken=stolen",
            b"/mcp?access%5btoken=stolen",
            // PHP cuts a name at a NUL.
            b"/mcp?access_token%00=s",
            b"/mcp?access_token%00x=s",
            b"/mcp?access.token%00.x=s",
            b"/mcp?access%00=s&access+token%00=s",
        ] {
            assert!(query_has_access_token(path), "{}", String::from_utf8_lossy(path));
        }
        for path in [
            &b"/mcp"[..],
            b"/mcp/access_token",
            b"/mcp?token=abc",
            b"/mcp?x=access_token",
            b"/mcp?access_tokens=1",
            b"/mcp#?access_token=1",
            b"/mcp?a=1#access_token=1",
            b"/mcp?%zz",
            // A matched `[` is an index of the array `access`, which no server reads as the token;
            // after an unmatched one, the rest of the name is kept as it is.
            b"/mcp?access[token]=1",
            b"/mcp?access[token.x=1",
        ] {
            assert!(!query_has_access_token(path), "{}", String::from_utf8_lossy(path));
        }
    }

    #[test]
    fn header_variants() {
        assert!(is_header_variant("x_mcp_subject", "x-mcp-subject"));
        assert!(is_header_variant("x-mcp_subject", "x-mcp-subject"));
        assert!(is_header_variant("x-mcp-subject", "x_mcp_subject"));
        assert!(!is_header_variant("x-mcp-subject", "x-mcp-subject"));
        assert!(!is_header_variant("x-mcp-subjects", "x-mcp-subject"));
        assert!(!is_header_variant("authorization", "authorization"));
    }
}
