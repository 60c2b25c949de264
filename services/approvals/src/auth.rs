//! Approvers (name + token, kept as SHA-256 digests and compared in constant time), random ids,
//! and the web session type.

use std::time::Duration;

use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

/// How long a web session lasts after login.
pub const SESSION_TTL: Duration = Duration::from_secs(12 * 3600);

/// The configured approvers.
#[derive(Clone, Default)]
pub struct Approvers {
    list: Vec<(String, [u8; 32])>,
}

impl std::fmt::Debug for Approvers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never print digests.
        f.debug_list().entries(self.list.iter().map(|(n, _)| n)).finish()
    }
}

fn digest(token: &str) -> [u8; 32] {
    Sha256::digest(token.as_bytes()).into()
}

/// The fewest bytes an approver's token may have: a guessable token is a way around every approval.
/// `openssl rand -hex 24` gives 48.
pub const MIN_TOKEN_BYTES: usize = 16;

impl Approvers {
    /// Adds `name=TOKEN`. Names: 1-64 of `A-Z a-z 0-9 . _ @ -`; tokens at least
    /// [`MIN_TOKEN_BYTES`]; names unique. An error never quotes the spec: a line without its name
    /// (a bare base64 token ends in `=`) would put the token in the message, and so in a log.
    pub fn add_spec(&mut self, spec: &str) -> Result<(), String> {
        let spec = spec.trim();
        let Some((name, token)) = spec.split_once('=') else {
            return Err("approver must be NAME=TOKEN".to_string());
        };
        self.add(name.trim(), token.trim())
    }

    pub fn add(&mut self, name: &str, token: &str) -> Result<(), String> {
        if name.is_empty()
            || name.len() > 64
            || !name.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '@' | '-'))
        {
            return Err("approver name: 1-64 characters of A-Z a-z 0-9 . _ @ - before the first '=' \
                        (NAME=TOKEN)"
                .to_string());
        }
        if token.len() < MIN_TOKEN_BYTES {
            return Err(format!(
                "the token after the first '=' (NAME=TOKEN) has {} bytes, fewer than {MIN_TOKEN_BYTES}: \
                 make one with `openssl rand -hex 24`",
                token.len()
            ));
        }
        if self.list.iter().any(|(n, _)| n == name) {
            return Err(format!("approver {name} is configured twice"));
        }
        self.list.push((name.to_string(), digest(token)));
        Ok(())
    }

    /// Adds every `NAME=TOKEN` of a comma-separated list (the environment variable). A token cannot
    /// hold a comma there: `alice=to,ken` is refused rather than read as two approvers.
    pub fn add_list(&mut self, list: &str) -> Result<(), String> {
        for (n, spec) in list.split(',').enumerate().filter(|(_, s)| !s.trim().is_empty()) {
            if !spec.contains('=') {
                return Err(format!(
                    "entry {}: no '=' (NAME=TOKEN); entries are separated by commas, which a token cannot hold",
                    n + 1
                ));
            }
            self.add_spec(spec).map_err(|e| format!("entry {}: {e}", n + 1))?;
        }
        Ok(())
    }

    /// Adds a file's lines: `NAME=TOKEN`, blank lines and `#` comments ignored.
    pub fn add_file(&mut self, text: &str) -> Result<(), String> {
        for (n, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            self.add_spec(line).map_err(|e| format!("line {}: {e}", n + 1))?;
        }
        Ok(())
    }

    pub fn is_empty(&self) -> bool {
        self.list.is_empty()
    }

    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.list.iter().map(|(n, _)| n.as_str())
    }

    /// The approver whose token this is (a bearer token). Every digest is compared.
    pub fn by_token(&self, token: &str) -> Option<&str> {
        let d = digest(token);
        let mut found = None;
        for (name, want) in &self.list {
            if bool::from(want.ct_eq(&d)) {
                found = Some(name.as_str());
            }
        }
        found
    }

    /// The login form: name and token must belong together.
    pub fn login(&self, name: &str, token: &str) -> Option<&str> {
        let d = digest(token);
        let mut found = None;
        for (n, want) in &self.list {
            let token_ok = bool::from(want.ct_eq(&d));
            if token_ok && n == name {
                found = Some(n.as_str());
            }
        }
        found
    }
}

/// `n` random bytes from the OS.
pub fn random_bytes<const N: usize>() -> Result<[u8; N], String> {
    let mut b = [0u8; N];
    getrandom::fill(&mut b).map_err(|e| format!("random: {e}"))?;
    Ok(b)
}

/// Lower-case hex: the filter's encoder, so session ids, grant ids and keys are written alike.
pub use mcp_policy_core::identity::grant::hex;

const BASE32: &[u8; 32] = b"0123456789abcdefghjkmnpqrstvwxyz";

/// `apr_` + 26 characters of lowercase Crockford base32 (130 random bits).
pub fn new_approval_id() -> Result<String, String> {
    let bytes = random_bytes::<26>()?;
    let mut s = String::with_capacity(30);
    s.push_str("apr_");
    for b in bytes {
        s.push(BASE32.get(usize::from(b & 31)).map_or('0', |&c| char::from(c)));
    }
    Ok(s)
}

/// Whether `s` looks like an approval id (before touching the database).
pub fn is_approval_id(s: &str) -> bool {
    s.len() == 30 && s.starts_with("apr_") && s.bytes().skip(4).all(|b| BASE32.contains(&b))
}

/// A logged-in approver's web session ([`crate::sessions`]).
#[derive(Clone, Debug)]
pub struct Session {
    pub approver: String,
    pub csrf: String,
    /// Unix seconds.
    pub expires_at: i64,
    /// A one-shot message shown on the next page.
    pub flash: Option<String>,
}

/// Constant-time equality of two strings (CSRF tokens).
pub fn ct_str_eq(a: &str, b: &str) -> bool {
    a.len() == b.len() && bool::from(a.as_bytes().ct_eq(b.as_bytes()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids() {
        let a = new_approval_id().unwrap();
        let b = new_approval_id().unwrap();
        assert_eq!(a.len(), 30);
        assert!(is_approval_id(&a), "{a}");
        assert_ne!(a, b);
        assert!(!is_approval_id("apr_../../etc"));
        assert!(!is_approval_id("apr_ABCDEFGHJKMNPQRSTVWXYZ0123"));
    }

    #[test]
    fn approvers() {
        const T1: &str = "token-one-0123456789";
        const T2: &str = "token-two-0123456789";
        const T3: &str = "token-three-0123456789";
        let mut a = Approvers::default();
        a.add_list(&format!("alice={T1}, bob={T2}")).unwrap();
        a.add_file(&format!("# comment\n\ncarol = {T3}\n")).unwrap();
        assert_eq!(a.by_token(T2), Some("bob"));
        assert_eq!(a.by_token(T3), Some("carol"));
        assert_eq!(a.by_token("token"), None);
        assert_eq!(a.login("alice", T1), Some("alice"));
        assert_eq!(a.login("alice", T2), None);
        assert_eq!(a.add_spec(&format!("alice={T3}")).unwrap_err(), "approver alice is configured twice");
        assert!(a.add_spec("dave").is_err());
        assert!(a.add_spec("dave=").is_err());
        assert!(a.add_spec(&format!("da ve={T1}")).is_err());
        assert!(a.add_file(&format!("ok={T1}x\nbad\n")).unwrap_err().starts_with("line 2:"));
        assert_eq!(format!("{a:?}"), r#"["alice", "bob", "carol", "ok"]"#);
    }

    /// A line that is only a base64 token (its padding `==`) would otherwise make an approver whose
    /// token is `=`, and every error quoted the token as its name.
    #[test]
    fn short_tokens_are_refused_and_errors_never_quote_the_spec() {
        let secret = "c2VjcmV0LXRva2VuLWJhc2U2NA";
        let mut a = Approvers::default();
        for spec in [format!("{secret}=="), "alice=short".to_owned(), format!("ab+cd{secret}/x=yz")] {
            let e = a.add_spec(&spec).unwrap_err();
            assert!(!e.contains(secret) && !e.contains("short"), "{e}");
        }
        assert_eq!(
            a.add_spec(&format!("{secret}==")).unwrap_err(),
            "the token after the first '=' (NAME=TOKEN) has 1 bytes, fewer than 16: make one with `openssl rand -hex 24`"
        );
        assert!(a.is_empty());
        // A comma inside a token of the environment variable is refused, not read as a second entry
        // (the service then does not start).
        let e = a.add_list(&format!("alice=token-0123456789,{secret}-en")).unwrap_err();
        assert_eq!(e, "entry 2: no '=' (NAME=TOKEN); entries are separated by commas, which a token cannot hold");
    }

    #[test]
    fn hex_and_ct() {
        assert_eq!(hex(&[0, 0xab, 0xff]), "00abff");
        assert!(ct_str_eq("abc", "abc"));
        assert!(!ct_str_eq("abc", "abd"));
        assert!(!ct_str_eq("abc", "ab"));
    }
}
