//! The `WWW-Authenticate` challenge of the filter's 401 (`no_grant`), and the check of
//! `gateway.resource_metadata_url` it may carry.
//!
//! RFC 6750 §3: a protected resource answers a request without a usable token with
//! `WWW-Authenticate: Bearer`, optionally with auth-params. RFC 9728 §5.1 adds the parameter
//! `resource_metadata`, the URL of the resource's OAuth 2.0 protected resource metadata, from which
//! MCP clients (MCP authorization, 2025-06-18 and later) discover the authorization server.

/// Longest accepted `gateway.resource_metadata_url`, in bytes.
pub const MAX_URL_LEN: usize = 2048;
/// A URL of no bytes or more than [`MAX_URL_LEN`]: a literal, as a `format!` costs the wasm module
/// bytes (`tests` keeps the two in step).
const URL_LENGTH: &str = "must be an absolute https URL of 1 to 2048 bytes";

/// The challenge header value: `Bearer`, or `Bearer resource_metadata="<url>"` (RFC 9728 §5.1).
/// `url` must have passed [`check_resource_metadata_url`], which admits no character that would need
/// escaping inside an RFC 9110 quoted-string (`"`, `\`, controls).
pub fn bearer(resource_metadata_url: Option<&str>) -> String {
    match resource_metadata_url {
        None => "Bearer".to_owned(),
        Some(url) => format!("Bearer resource_metadata=\"{url}\""),
    }
}

/// RFC 3986 characters a URL may hold literally (unreserved, reserved, and `%` of an escape),
/// without `#`: a metadata URL has no fragment.
fn url_char(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"-._~:/?[]@!$&'()*+,;=%".contains(&b)
}

/// Hosts that may use plain `http`: the loopback interface, for local development.
fn is_loopback(host: &str) -> bool {
    let h = host.to_ascii_lowercase();
    h == "localhost" || h == "[::1]" || h.strip_prefix("127.").is_some_and(|r| r.split('.').count() == 3)
}

/// Check `gateway.resource_metadata_url`: an absolute `https` URL (RFC 9728 §3 requires `https`;
/// `http` is accepted for a loopback host only: `localhost`, `127.x.y.z`, `[::1]`), with a host, an
/// optional port 1–65535, no user info, no fragment, only RFC 3986 characters (well-formed `%`
/// escapes), at most [`MAX_URL_LEN`] bytes. Errors: what is wrong, for the config error.
pub fn check_resource_metadata_url(url: &str) -> Result<(), String> {
    if url.is_empty() || url.len() > MAX_URL_LEN {
        return Err(URL_LENGTH.into());
    }
    let bytes = url.as_bytes();
    if let Some(i) = bytes.iter().position(|&b| !url_char(b)) {
        return Err(format!(
            "byte {i} is not allowed in a URL here (only RFC 3986 characters, no '#' fragment, no spaces or quotes)"
        ));
    }
    for (i, _) in url.match_indices('%') {
        if !bytes.get(i + 1..i + 3).is_some_and(|h| h.iter().all(u8::is_ascii_hexdigit)) {
            return Err(format!("'%' at byte {i} does not start a %XX escape"));
        }
    }
    let (https, rest) = if let Some(r) = url.strip_prefix("https://") {
        (true, r)
    } else if let Some(r) = url.strip_prefix("http://") {
        (false, r)
    } else {
        return Err("must start with https:// (RFC 9728 §3)".to_owned());
    };
    let authority = rest.split(['/', '?']).next().unwrap_or("");
    if authority.contains('@') {
        return Err("must not carry user info (user@host)".to_owned());
    }
    let (host, port) = if authority.starts_with('[') {
        match authority.find(']') {
            Some(end) => (authority.get(..=end).unwrap_or(""), authority.get(end + 1..).unwrap_or("")),
            None => return Err("unclosed '[' in the host".to_owned()),
        }
    } else {
        match authority.find(':') {
            Some(i) => (authority.get(..i).unwrap_or(""), authority.get(i..).unwrap_or("")),
            None => (authority, ""),
        }
    };
    let host_ok = if let Some(inner) = host.strip_prefix('[').and_then(|h| h.strip_suffix(']')) {
        !inner.is_empty() && inner.bytes().all(|b| b.is_ascii_hexdigit() || b == b':' || b == b'.')
    } else {
        !host.is_empty() && host.bytes().all(|b| b.is_ascii_alphanumeric() || b"-._~".contains(&b))
    };
    if !host_ok {
        return Err("must name a host (a DNS name, IPv4 address or [IPv6] address)".to_owned());
    }
    if !port.is_empty() {
        let digits = port.strip_prefix(':').unwrap_or("");
        let valid = !digits.is_empty()
            && digits.len() <= 5
            && digits.bytes().all(|b| b.is_ascii_digit())
            && digits.parse::<u32>().is_ok_and(|p| (1..=65535).contains(&p));
        if !valid {
            return Err("the port must be a number from 1 to 65535".to_owned());
        }
    }
    if !https && !is_loopback(host) {
        return Err("must use https (RFC 9728 §3); http is accepted for localhost, 127.x.y.z and [::1] only".to_owned());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_length_error_names_the_limit() {
        assert_eq!(super::URL_LENGTH, format!("must be an absolute https URL of 1 to {} bytes", super::MAX_URL_LEN));
    }

    use super::*;

    #[test]
    fn challenge_values() {
        assert_eq!(bearer(None), "Bearer");
        assert_eq!(
            bearer(Some("https://mcp.example.com/.well-known/oauth-protected-resource")),
            "Bearer resource_metadata=\"https://mcp.example.com/.well-known/oauth-protected-resource\""
        );
    }

    #[test]
    fn accepted_urls() {
        for url in [
            "https://mcp.example.com/.well-known/oauth-protected-resource",
            "https://mcp.example.com/.well-known/oauth-protected-resource/mcp",
            "https://mcp.example.com:8443/.well-known/oauth-protected-resource?x=%2F",
            "https://mcp.example.com",
            "https://[2001:db8::1]:443/.well-known/oauth-protected-resource",
            "https://192.0.2.7/m",
            "http://127.0.0.1:10000/.well-known/oauth-protected-resource",
            "http://localhost/.well-known/oauth-protected-resource",
            "http://[::1]:8080/x",
        ] {
            assert_eq!(check_resource_metadata_url(url), Ok(()), "{url}");
        }
    }

    #[test]
    fn refused_urls() {
        let long = format!("https://a.example/{}", "x".repeat(MAX_URL_LEN));
        for (url, why) in [
            ("", "absolute https URL"),
            (long.as_str(), "absolute https URL"),
            ("mcp.example.com/.well-known/oauth-protected-resource", "must start with https://"),
            ("ftp://mcp.example.com/", "must start with https://"),
            ("HTTPS://mcp.example.com/", "must start with https://"),
            ("http://mcp.example.com/.well-known/oauth-protected-resource", "http is accepted for localhost"),
            ("http://127.0.0.1.example.com/x", "http is accepted for localhost"),
            ("https://mcp.example.com/a\"b", "byte 25 is not allowed"),
            ("https://mcp.example.com/a b", "byte 25 is not allowed"),
            ("https://mcp.example.com/a\\b", "byte 25 is not allowed"),
            ("https://mcp.example.com/x#frag", "byte 25 is not allowed"),
            ("https://mcp.example.com/\u{e9}", "byte 24 is not allowed"),
            ("https://mcp.example.com/%zz", "does not start a %XX escape"),
            ("https://mcp.example.com/%4", "does not start a %XX escape"),
            ("https://user:pw@mcp.example.com/", "user info"),
            ("https:///path", "must name a host"),
            ("https://:443/path", "must name a host"),
            ("https://[::1/x", "unclosed"),
            ("https://[]/x", "must name a host"),
            ("https://mcp.example.com:0/", "port"),
            ("https://mcp.example.com:65536/", "port"),
            ("https://mcp.example.com:/", "port"),
            ("https://mcp.example.com:44a/", "port"),
        ] {
            let e = check_resource_metadata_url(url).unwrap_err();
            assert!(e.contains(why), "{url:?}: {e}");
        }
    }
}
