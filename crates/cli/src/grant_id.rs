//! `mcp-policy grant-id`: the grant id of a token, as `gateway.grants[].sha256` lists it, computed
//! with the filter's own code (`grant::from_authorization` / `grant::from_trusted_header`).

use mcp_policy_filter::grant;
use mcp_policy_filter::grant::hex;

/// The token read from standard input, without one trailing `\n` or `\r\n` (what `echo` and editors
/// add).
fn token(stdin: &[u8]) -> &[u8] {
    let t = stdin.strip_suffix(b"\n").unwrap_or(stdin);
    t.strip_suffix(b"\r").unwrap_or(t)
}

/// Run `grant-id ARGS` on the bytes read from standard input; returns what to print, or the error.
pub fn run(args: &[String], stdin: &[u8]) -> Result<String, String> {
    let mut header = false;
    let mut label: Option<&str> = None;
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--header" => header = true,
            "--label" => label = Some(it.next().ok_or("--label needs a value")?),
            s if s.starts_with("--label=") => label = s.strip_prefix("--label="),
            s if s.starts_with('-') => return Err(format!("unknown option {s}")),
            _ => {
                return Err("grant-id reads the token from standard input, not from its arguments \
                             (they would stay in the shell history): printf %s TOKEN | mcp-policy grant-id"
                    .into())
            }
        }
    }
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
            mcp_policy_filter::json::write_str(&mut label_json, l);
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
        assert_eq!(run(&[], b"abc").unwrap(), format!("{ABC}\n"));
        assert_eq!(run(&[], b"abc\n").unwrap(), format!("{ABC}\n"));
        assert_eq!(run(&[], b"abc==\r\n").unwrap(), format!("{ABC}\n"));
        assert!(run(&[], b"a b").unwrap_err().starts_with("not a bearer token"));
        assert!(run(&[], b"").is_err());
        assert!(run(&["abc".into()], b"").unwrap_err().starts_with("grant-id reads the token from standard input"));
    }

    #[test]
    fn header_values_and_labels() {
        assert_eq!(run(&["--header".into()], b" abc \n").unwrap(), format!("{ABC}\n"));
        assert_eq!(
            run(&["--label".into(), "agent \"a\"".into()], b"abc").unwrap(),
            format!("{{\"sha256\": \"{ABC}\", \"label\": \"agent \\\"a\\\"\"}}\n")
        );
    }
}
