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

impl Approvers {
    /// Adds `name=TOKEN`. Names: 1-64 of `A-Z a-z 0-9 . _ @ -`; tokens non-empty; names unique.
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
            return Err(format!("approver name {name:?}: 1-64 characters of A-Z a-z 0-9 . _ @ -"));
        }
        if token.is_empty() {
            return Err(format!("approver {name}: empty token"));
        }
        if self.list.iter().any(|(n, _)| n == name) {
            return Err(format!("approver {name} is configured twice"));
        }
        self.list.push((name.to_string(), digest(token)));
        Ok(())
    }

    /// Adds every `NAME=TOKEN` of a comma-separated list (the environment variable).
    pub fn add_list(&mut self, list: &str) -> Result<(), String> {
        for spec in list.split(',').filter(|s| !s.trim().is_empty()) {
            self.add_spec(spec)?;
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
        let mut a = Approvers::default();
        a.add_list("alice=tok1, bob=tok2").unwrap();
        a.add_file("# comment\n\ncarol = tok3\n").unwrap();
        assert_eq!(a.by_token("tok2"), Some("bob"));
        assert_eq!(a.by_token("tok3"), Some("carol"));
        assert_eq!(a.by_token("tok"), None);
        assert_eq!(a.login("alice", "tok1"), Some("alice"));
        assert_eq!(a.login("alice", "tok2"), None);
        assert!(a.add_spec("alice=x").is_err());
        assert!(a.add_spec("dave").is_err());
        assert!(a.add_spec("dave=").is_err());
        assert!(a.add_spec("da ve=x").is_err());
        assert!(a.add_file("ok=1\nbad\n").unwrap_err().starts_with("line 2:"));
        assert_eq!(format!("{a:?}"), r#"["alice", "bob", "carol", "ok"]"#);
    }

    #[test]
    fn hex_and_ct() {
        assert_eq!(hex(&[0, 0xab, 0xff]), "00abff");
        assert!(ct_str_eq("abc", "abc"));
        assert!(!ct_str_eq("abc", "abd"));
        assert!(!ct_str_eq("abc", "ab"));
    }
}
