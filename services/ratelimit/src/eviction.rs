//! Whether Redis may evict the counters: with a `maxmemory` and a `maxmemory-policy` other than
//! `noeviction`, Redis drops keys when it is full, and every counter has a TTL, so the `volatile-*`
//! policies drop them too. A dropped counter restarts from zero: a caller that can create many
//! counters (a grant-scoped limit counts each new token apart) would fill Redis and reset the
//! limits. The health probe reads the two settings ([`read`]); while they let Redis evict, the
//! store answers every decision UNAVAILABLE, unless the operator accepted it
//! (`--allow-evicting-redis`).

use redis::aio::ConnectionManager;

/// Redis's `maxmemory-policy` when it may evict keys: a policy other than `noeviction` with a
/// `maxmemory` set (without one, Redis never evicts). `maxmemory` as `CONFIG GET` gives it (bytes).
pub fn evicting(policy: &str, maxmemory: &str) -> Option<String> {
    (policy != "noeviction" && maxmemory.trim() != "0").then(|| policy.to_owned())
}

/// The policy Redis would evict by (`Ok(None)`: it evicts nothing), read with `CONFIG GET`; an
/// error when Redis refuses `CONFIG` (managed services often rename or forbid it).
pub async fn read(conn: &mut ConnectionManager) -> Result<Option<String>, String> {
    let (policy, max): (Vec<String>, Vec<String>) = redis::pipe()
        .cmd("CONFIG")
        .arg("GET")
        .arg("maxmemory-policy")
        .cmd("CONFIG")
        .arg("GET")
        .arg("maxmemory")
        .query_async(conn)
        .await
        .map_err(|e| e.to_string())?;
    match (policy.get(1), max.get(1)) {
        (Some(policy), Some(max)) => Ok(evicting(policy, max)),
        _ => Err("CONFIG GET answered no value".to_owned()),
    }
}

#[cfg(test)]
mod tests {
    use super::evicting;

    #[test]
    fn only_a_policy_that_evicts_with_a_limit_set_evicts() {
        assert_eq!(evicting("noeviction", "104857600"), None);
        assert_eq!(evicting("allkeys-lru", "0"), None);
        assert_eq!(evicting("volatile-lru", "3145728"), Some("volatile-lru".to_owned()));
        assert_eq!(evicting("allkeys-random", "1"), Some("allkeys-random".to_owned()));
    }
}
