//! `mcp-policy grant-id`: the grant id of a token, as `gateway.grants[].sha256` lists it, computed
//! with the filter's own code (`grant::from_authorization` / `grant::from_trusted_header`).

use std::io::Read;

use mcp_policy_core::identity::grant::{self, hex};
use mcp_policy_core::wire::json;

use super::args::GrantIdArgs;
use super::{Failure, Report, OK, USAGE_OR_IO};

/// The token read from standard input, without one trailing `\n` or `\r\n` (what `echo` and editors
/// add).
fn token(stdin: &[u8]) -> &[u8] {
    let t = stdin.strip_suffix(b"\n").unwrap_or(stdin);
    t.strip_suffix(b"\r").unwrap_or(t)
}

/// `grant-id`: the token from standard input, never from the arguments.
pub fn command(args: &GrantIdArgs) -> Result<Report, Failure> {
    let fail = |m: &str| Failure { status: USAGE_OR_IO, message: format!("mcp-policy: {m}") };
    if !args.token.is_empty() {
        return Err(fail(
            "grant-id reads the token from standard input, not from its arguments \
             (they would stay in the shell history): printf %s TOKEN | mcp-policy grant-id",
        ));
    }
    let mut stdin = Vec::new();
    std::io::stdin().read_to_end(&mut stdin).map_err(|e| fail(&format!("cannot read the token: {e}")))?;
    grant_id(&stdin, args.header, args.label.as_deref()).map(|out| Report::out(out, OK)).map_err(fail)
}

/// What `grant-id` prints for the bytes read from standard input, or the error: the grant id of a
/// bearer token (or, with `header`, of a `gateway.grant_header` value), as a `gateway.grants` entry
/// when it has a `label`.
fn grant_id(stdin: &[u8], header: bool, label: Option<&str>) -> Result<String, &'static str> {
    let token = token(stdin);
    let g = if header {
        grant::from_trusted_header(token).ok_or("the header value is empty")?
    } else {
        let mut value = b"Bearer ".to_vec();
        value.extend_from_slice(token);
        grant::from_authorization(&value).ok_or(
            "not a bearer token (RFC 6750 b64token: letters, digits, - . _ ~ + /, then optional =); \
             for a gateway.grant_header value use --header",
        )?
    };
    let id = hex(&g.id);
    Ok(match label {
        None => format!("{id}\n"),
        Some(l) => {
            let mut label_json = String::new();
            json::write_str(&mut label_json, l);
            format!("{{\"sha256\": \"{id}\", \"label\": {label_json}}}\n")
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const ABC: &str = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"; // sha256("abc")

    #[test]
    fn bearer_tokens() {
        assert_eq!(grant_id(b"abc", false, None).unwrap(), format!("{ABC}\n"));
        assert_eq!(grant_id(b"abc\n", false, None).unwrap(), format!("{ABC}\n"));
        assert_eq!(grant_id(b"abc==\r\n", false, None).unwrap(), format!("{ABC}\n"));
        assert!(grant_id(b"a b", false, None).unwrap_err().starts_with("not a bearer token"));
        assert!(grant_id(b"", false, None).is_err());
    }

    #[test]
    fn header_values_and_labels() {
        assert_eq!(grant_id(b" abc \n", true, None).unwrap(), format!("{ABC}\n"));
        assert_eq!(
            grant_id(b"abc", false, Some("agent \"a\"")).unwrap(),
            format!("{{\"sha256\": \"{ABC}\", \"label\": \"agent \\\"a\\\"\"}}\n")
        );
    }
}
