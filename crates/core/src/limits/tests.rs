use super::*;
use crate::identity::grant::GrantId;
use crate::terms::{Algorithm, Scope, Window};

fn limit(counter: &str, window: Window, max: u64, scope: Scope) -> Limit {
    Limit::new(counter.into(), window, max, scope, Algorithm::Fixed, format!("tools.t.limits[{counter}]"))
}

const T0: u64 = 1_700_000_040_000; // a minute boundary: 1700000040 % 60 == 0

fn lim(store: &MemoryStore, now_ms: u64) -> Limiter<'_> {
    Limiter { store, now_ms, max_tracked_grants: 100 }
}

#[test]
fn t0_is_a_minute_boundary() {
    assert_eq!((T0 / 1000) % 60, 0);
}

#[test]
fn admits_max_then_refuses_with_retry_after() {
    let s = MemoryStore::new();
    let l = limit("c", Window::Minute, 3, Scope::Grant);
    let g = [1u8; 32];
    for i in 0..3 {
        assert!(lim(&s, T0 + 10_000 + i).admit(&[&l], &g).is_ok());
    }
    assert_eq!(lim(&s, T0 + 10_500).admit(&[&l], &g), Err(NotAdmitted::Limited { limit: &l, retry_after_seconds: 50 }));
    // 59.001 s into the window: 0.999 s left rounds up to 1.
    assert_eq!(lim(&s, T0 + 59_001).admit(&[&l], &g), Err(NotAdmitted::Limited { limit: &l, retry_after_seconds: 1 }));
    // The next window admits again, reusing the same key.
    let keys = s.len();
    assert!(lim(&s, T0 + 60_000).admit(&[&l], &g).is_ok());
    assert_eq!(s.len(), keys);
}

#[test]
fn grants_and_counters_are_separate_and_global_is_shared() {
    let s = MemoryStore::new();
    let per = limit("c", Window::Minute, 1, Scope::Grant);
    let glob = limit("c", Window::Minute, 2, Scope::Global);
    let (a, b, c) = ([1u8; 32], [2u8; 32], [3u8; 32]);
    assert!(lim(&s, T0).admit(&[&per], &a).is_ok());
    assert!(lim(&s, T0).admit(&[&per], &b).is_ok());
    assert!(matches!(lim(&s, T0).admit(&[&per], &a), Err(NotAdmitted::Limited { .. })));
    assert!(lim(&s, T0).admit(&[&glob], &a).is_ok());
    assert!(lim(&s, T0).admit(&[&glob], &b).is_ok());
    assert!(matches!(lim(&s, T0).admit(&[&glob], &c), Err(NotAdmitted::Limited { .. })));
}

#[test]
fn keys_cannot_collide_across_field_boundaries() {
    let g1 = [b'a'; 32];
    let a = counter_key(&limit("b_c", Window::Minute, 1, Scope::Grant), &g1);
    let b = counter_key(&limit("b", Window::Minute, 1, Scope::Grant), &g1);
    let c = counter_key(&limit("b_c", Window::Hour, 1, Scope::Grant), &g1);
    let d = counter_key(&limit("b_c", Window::Minute, 1, Scope::Global), &g1);
    let e = counter_key(&limit("b_c", Window::Minute, 1, Scope::Global), &[b'z'; 32]);
    assert_eq!(d, e, "global counters ignore the grant");
    let all = [&a, &b, &c, &d];
    for (i, x) in all.iter().enumerate() {
        for y in all.iter().skip(i + 1) {
            assert_ne!(x, y);
        }
    }
    assert_eq!(a.len(), "mcpf1:c:".len() + 32);
}

#[test]
fn a_refusal_by_a_later_limit_gives_back_earlier_units() {
    let s = MemoryStore::new();
    let first = limit("first", Window::Minute, 5, Scope::Grant);
    let second = limit("second", Window::Minute, 1, Scope::Grant);
    let g = [7u8; 32];
    assert!(lim(&s, T0).admit(&[&first, &second], &g).is_ok());
    for _ in 0..3 {
        assert!(
            matches!(lim(&s, T0).admit(&[&first, &second], &g), Err(NotAdmitted::Limited { limit, .. }) if limit.counter == "second")
        );
    }
    let (v, _) = s.get(&counter_key(&first, &g)).unwrap().unwrap();
    assert_eq!(decode(&v), Some((T0 / 1000, 1)));
}

#[test]
fn grant_cap_refuses_new_grants_and_keeps_existing_ones() {
    let s = MemoryStore::new();
    let l = limit("c", Window::Minute, 100, Scope::Grant);
    let cap = |now| Limiter { store: &s, now_ms: now, max_tracked_grants: 2 };
    assert!(cap(T0).admit(&[&l], &[1; 32]).is_ok());
    assert!(cap(T0).admit(&[&l], &[2; 32]).is_ok());
    assert_eq!(cap(T0).admit(&[&l], &[3; 32]), Err(NotAdmitted::Unavailable(Unavailable::GrantCapReached)));
    assert!(cap(T0).admit(&[&l], &[1; 32]).is_ok());
    assert_eq!(tracked_grants(&s), 2);
    // A second counter for a tracked grant does not count as a new grant.
    let other = limit("d", Window::Hour, 1, Scope::Grant);
    assert!(cap(T0).admit(&[&other], &[2; 32]).is_ok());
    assert_eq!(tracked_grants(&s), 2);
}

#[test]
fn stale_clock_reads_do_not_reset_a_newer_window() {
    let s = MemoryStore::new();
    let l = limit("c", Window::Second, 1, Scope::Grant);
    let g = [9u8; 32];
    assert!(lim(&s, T0 + 1000).admit(&[&l], &g).is_ok());
    // A worker whose clock reading is from the previous second must not open a fresh window.
    assert!(matches!(lim(&s, T0 + 999).admit(&[&l], &g), Err(NotAdmitted::Limited { .. })));
}

#[test]
fn corrupt_values_fail_closed() {
    let s = MemoryStore::new();
    let l = limit("c", Window::Second, 1, Scope::Grant);
    let g = [9u8; 32];
    s.set(&counter_key(&l, &g), b"junk", 0).unwrap();
    assert_eq!(lim(&s, T0).admit(&[&l], &g), Err(NotAdmitted::Unavailable(Unavailable::CorruptValue)));
}

#[test]
fn memory_store_is_cas_faithful() {
    let s = MemoryStore::new();
    s.set("k", b"a", 0).unwrap();
    let (_, cas) = s.get("k").unwrap().unwrap();
    s.set("k", b"b", cas).unwrap();
    assert_eq!(s.set("k", b"c", cas), Err(StoreError::CasMismatch));
    assert_eq!(s.get("k").unwrap().unwrap().0, b"b");
    // Absent keys are inserted whatever cas says (the host's behaviour).
    s.set("new", b"x", 12345).unwrap();
    assert_eq!(s.get("new").unwrap().unwrap().0, b"x");
}

#[test]
fn parallel_workers_admit_exactly_max() {
    use std::sync::atomic::{AtomicU64, Ordering};
    let s = MemoryStore::new();
    let l = limit("c", Window::Hour, 10, Scope::Grant);
    let admitted = AtomicU64::new(0);
    std::thread::scope(|sc| {
        for _ in 0..8 {
            sc.spawn(|| {
                for _ in 0..25 {
                    if lim(&s, T0).admit(&[&l], &[5u8; 32]).is_ok() {
                        admitted.fetch_add(1, Ordering::SeqCst);
                    }
                }
            });
        }
    });
    assert_eq!(admitted.load(Ordering::SeqCst), 10);
    let (v, _) = s.get(&counter_key(&l, &[5u8; 32])).unwrap().unwrap();
    assert_eq!(decode(&v), Some((T0 / 1000 - (T0 / 1000) % 3600, 10)));
}

#[test]
fn keys_are_built_on_the_stack_with_the_stored_layout() {
    let g: GrantId = std::array::from_fn(|i| (i as u8).wrapping_mul(17));
    assert_eq!(&*grant_key(&g), "mcpf1:g:00112233445566778899aabbccddeeff");
    assert_eq!(format!("{:?}", grant_key(&g)), "mcpf1:g:00112233445566778899aabbccddeeff");
    // The base: the first 16 bytes of SHA-256 over the length-prefixed fields ("counter", "c",
    // "grant", 60 as u64 BE, "fixed"); the key: that XOR the grant's first 16 bytes. Both computed
    // independently (Python hashlib).
    let l = limit("c", Window::Minute, 1, Scope::Grant);
    assert_eq!(*l.key_base(), *b"\xa9\x92\x63\xa8\xfe\xc5\x4f\xb8\x98\x41\xe4\x7e\x17\x58\xb7\xee");
    assert_eq!(&*counter_key(&l, &g), "mcpf1:c:a983419bba9029cf10d84ec5db855911");
    // A global limit's key is its base alone, whatever the grant.
    let global = limit("c", Window::Minute, 1, Scope::Global);
    assert_eq!(&*counter_key(&global, &g), "mcpf1:c:2ed27f4c4daa5204663192669de6c6c8");
    assert_eq!(&*counter_key(&global, &[0u8; 32]), "mcpf1:c:2ed27f4c4daa5204663192669de6c6c8");
}

#[test]
fn units_past_the_first_are_given_back_too() {
    let s = MemoryStore::new();
    let (a, b) = (limit("a", Window::Minute, 5, Scope::Grant), limit("b", Window::Hour, 5, Scope::Grant));
    let last = limit("last", Window::Minute, 1, Scope::Grant);
    let g = [4u8; 32];
    let adm = lim(&s, T0).admit(&[&a, &b], &g).unwrap();
    assert_eq!(adm.taken().count(), 2);
    assert!(lim(&s, T0).admit(&[&last], &g).is_ok());
    assert!(
        matches!(lim(&s, T0).admit(&[&a, &b, &last], &g), Err(NotAdmitted::Limited { limit, .. }) if limit.counter == "last")
    );
    let count = |l: &Limit| decode(&s.get(&counter_key(l, &g)).unwrap().unwrap().0);
    assert_eq!((count(&a), count(&b)), (Some((T0 / 1000, 1)), Some((T0 / 1000 - (T0 / 1000) % 3600, 1))));
    lim(&s, T0).give_back(&adm);
    assert_eq!((count(&a), count(&b)), (Some((T0 / 1000, 0)), Some((T0 / 1000 - (T0 / 1000) % 3600, 0))));
}
