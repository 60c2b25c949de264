//! The Redis URL as logs and messages may show it: without its password (the approach of
//! mcp-approvals' `postgres::redact`).

/// `url` with the password replaced by `***`: the userinfo's password (`user:***@`; a userinfo
/// without `:` is hidden whole, as some clients read it as a password), and the value of a `pass`
/// or `password` query parameter (`redis+unix:///path?pass=…`). Everything up to the last `@` is
/// taken as the userinfo, so a password holding `@`, `/`, `?` or `#` unescaped is hidden whole (at
/// the cost of hiding more than needed when a later part holds an `@`).
pub fn url(url: &str) -> String {
    let (scheme, rest) = match url.split_once("://") {
        Some((scheme, rest)) => (Some(scheme), rest),
        None => (None, url),
    };
    let mut out = String::with_capacity(url.len());
    if let Some(s) = scheme {
        out.push_str(s);
        out.push_str("://");
    }
    let tail = match rest.rsplit_once('@') {
        Some((userinfo, after)) => {
            match userinfo.split_once(':') {
                Some((user, _)) if !user.contains(['/', '?', '#']) => {
                    out.push_str(user);
                    out.push_str(":***");
                }
                _ => out.push_str("***"),
            }
            out.push('@');
            after
        }
        None => rest,
    };
    let (path, query) = match tail.split_once('?') {
        Some((path, query)) => (path, Some(query)),
        None => (tail, None),
    };
    out.push_str(path);
    if let Some(query) = query {
        let (query, fragment) = match query.split_once('#') {
            Some((q, f)) => (q, Some(f)),
            None => (query, None),
        };
        out.push('?');
        for (i, pair) in query.split('&').enumerate() {
            if i > 0 {
                out.push('&');
            }
            match pair.split_once('=') {
                Some((k, _)) if k.eq_ignore_ascii_case("pass") || k.eq_ignore_ascii_case("password") => {
                    out.push_str(k);
                    out.push_str("=***");
                }
                _ => out.push_str(pair),
            }
        }
        if let Some(f) = fragment {
            out.push('#');
            out.push_str(f);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::url;

    #[test]
    fn hides_every_password_and_keeps_the_rest() {
        for (given, shown) in [
            ("redis://user:s3cret@127.0.0.1:6379/0", "redis://user:***@127.0.0.1:6379/0"),
            ("redis://:s3cret@redis.internal:6379", "redis://:***@redis.internal:6379"),
            ("rediss://s3cret@host/2", "rediss://***@host/2"),
            ("redis://u:p@ss@w@host:1/0", "redis://u:***@host:1/0"),
            ("redis://u:s3cret@host/0?protocol=resp3", "redis://u:***@host/0?protocol=resp3"),
            ("redis+unix:///run/redis.sock?db=1&pass=s3cret", "redis+unix:///run/redis.sock?db=1&pass=***"),
            ("unix:///run/r.sock?user=u&PASSWORD=s3cret#x", "unix:///run/r.sock?user=u&PASSWORD=***#x"),
            ("user:s3cret@host:6379", "user:***@host:6379"),
            ("redis://127.0.0.1:6379/0", "redis://127.0.0.1:6379/0"),
            ("redis://u:pa/ss?#@host/0", "redis://u:***@host/0"),
            ("redis://host/0?x=a@b", "redis://***@b"),
            ("", ""),
        ] {
            assert_eq!(url(given), shown, "{given}");
            assert!(!url(given).contains("s3cret"), "{given}");
        }
    }
}
