//! Two instances on one database (sessions, cross-instance wake-ups on PostgreSQL), and what every
//! store refuses.

use super::*;

#[tokio::test]
async fn sessions_are_stored_hashed_survive_a_restart_and_end_at_logout() {
    let s = svc();
    let cookie = login(&s, "alice", ALICE).await;
    let sid = cookie.split_once('=').unwrap().1.to_string();
    let page = send(&s.router, get("/", Some(&cookie))).await;
    assert_eq!(page.status, StatusCode::OK);
    let csrf = csrf_of(&page.body);
    // The id itself is not stored, only its SHA-256.
    let stored_hash = {
        use sha2::Digest;
        let d = sha2::Sha256::digest(sid.as_bytes());
        d.iter().map(|b| format!("{b:02x}")).collect::<String>()
    };
    let stored: Vec<String> = match &s.db {
        Location::Sqlite(p) => {
            let c = rusqlite::Connection::open(p).unwrap();
            let mut st = c.prepare("SELECT id_hash FROM sessions").unwrap();
            st.query_map([], |r| r.get(0)).unwrap().map(Result::unwrap).collect()
        }
        Location::Postgres(url) => with_pg(url.clone(), |c| {
            c.query("SELECT id_hash FROM sessions", &[]).unwrap().iter().map(|r| r.get(0)).collect()
        }),
    };
    assert_eq!(stored, vec![stored_hash]);
    // A restart keeps the session (and its CSRF token).
    let db = s.db.clone();
    let clock = s.clock.clone();
    let Svc { app, router: old, _dir, .. } = s;
    drop(old);
    drop(app);
    let app = App::open(db.clone(), config(), clock.clone()).unwrap();
    let s = Svc { router: router(app.clone()), app, clock, db, _dir };
    let r = send(&s.router, get("/", Some(&cookie))).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    assert_eq!(csrf_of(&r.body), csrf);
    // A second instance on the same database accepts it too; logout there ends it everywhere.
    let b = second_instance(&s);
    assert_eq!(send(&b.router, get("/ui/version", Some(&cookie))).await.status, StatusCode::OK);
    let out = send(&b.router, form("/logout", Some(&cookie), &[("csrf", &csrf)])).await;
    assert_eq!(out.status, StatusCode::SEE_OTHER);
    assert_eq!(send(&s.router, get("/ui/version", Some(&cookie))).await.status, StatusCode::UNAUTHORIZED);
    assert_eq!(send(&b.router, get("/ui/version", Some(&cookie))).await.status, StatusCode::UNAUTHORIZED);
    // Sessions expire after 12 hours.
    let cookie = login(&s, "alice", ALICE).await;
    assert_eq!(send(&b.router, get("/ui/version", Some(&cookie))).await.status, StatusCode::OK);
    s.clock.advance(12 * 3600);
    assert_eq!(send(&b.router, get("/ui/version", Some(&cookie))).await.status, StatusCode::UNAUTHORIZED);
}

/// PostgreSQL only: a hold-mode check waiting on one instance is woken by a decision made on
/// another (LISTEN/NOTIFY), not by its own timeout.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hold_mode_is_woken_by_a_decision_on_another_instance() {
    if pg_base().is_none() {
        // One SQLite file serves one instance: nothing to wake across processes.
        return;
    }
    let a = svc();
    let b = second_instance(&a);
    // An approval opened on b reaches a as a change of its page's version, and wakes no held check.
    let (mut version, mut settled) = (a.app.subscribe(), a.app.subscribe_settled());
    // The LISTEN connection's own first wake-up (it may have missed changes) is not this one's.
    tokio::time::sleep(Duration::from_millis(300)).await;
    settled.mark_unchanged();
    version.mark_unchanged();
    check(&b, &grant(69)).await;
    tokio::time::timeout(Duration::from_secs(3), version.changed()).await.unwrap().unwrap();
    assert!(!settled.has_changed().unwrap());
    let (v, id) = held_on_a_approved_on_b(&a, &b, 70, Duration::from_millis(500), "from b").await;
    assert_eq!(v, json!({"status": "approved", "approval_id": id, "approver": "alice", "note": "from b"}));
    assert!(settled.has_changed().unwrap());
}

/// A hold-mode check of grant `n` waiting on `a` (left `settle` to start waiting) and approved on
/// `b` with `note`: the held check's answer, which must come within 3 s of the decision, and the
/// approval's id.
async fn held_on_a_approved_on_b(a: &Svc, b: &Svc, n: u8, settle: Duration, note: &str) -> (Value, String) {
    let k = grant(n);
    let id = id_of(&check(a, &k).await);
    let held = held_check(a, &k, 60);
    tokio::time::sleep(settle).await;
    assert!(!held.is_finished());
    let decided = std::time::Instant::now();
    assert_eq!(approve(b, &id, note).await.status, StatusCode::OK);
    let v = tokio::time::timeout(Duration::from_secs(10), held).await.unwrap().unwrap();
    let waited = decided.elapsed();
    assert!(waited < Duration::from_secs(3), "woken {waited:?} after the decision");
    (v, id)
}

#[tokio::test]
async fn nul_characters_are_refused_on_every_store() {
    let s = svc();
    let mut b = check_body(&grant(71), json!({"vmid": 100}), 600, 0);
    b["tool"] = json!("start\u{0}vm");
    let r = check_raw(&s, sign(b)).await;
    assert_eq!((r.status, r.json()), (StatusCode::BAD_REQUEST, json!({"error": "tool: must not contain U+0000"})));
    let mut b = check_body(&grant(71), json!({"vmid": 100}), 600, 0);
    b["reason"] = json!("a\u{0}");
    assert_eq!(check_raw(&s, b).await.status, StatusCode::BAD_REQUEST);
    // In the arguments it is an escape sequence, kept verbatim.
    let r = check_raw(&s, check_body(&grant(71), json!({"s": "a\u{0}b"}), 600, 0)).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    let id = id_of(&r.json());
    let r = approve(&s, &id, "x\u{0}").await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST, "{}", r.body);
    assert_eq!(all_approvals(&s).await["approvals"][0]["arguments"], json!({"s": "a\u{0}b"}));
}

/// PostgreSQL only: the LISTEN connection is killed by the server; the instance reconnects and
/// cross-instance wake-ups keep working.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hold_mode_wakeups_survive_a_lost_listen_connection() {
    let Some(base) = pg_base() else {
        return;
    };
    let a = svc();
    let b = second_instance(&a);
    let Location::Postgres(url) = a.db.clone() else { unreachable!() };
    let db = url.rsplit_once('/').unwrap().1.to_string();
    // Each instance opens its LISTEN connection in the background: wait until both are there (on
    // a loaded machine that can take a while), so the kill below hits both.
    let deadline = std::time::Instant::now() + Duration::from_secs(15);
    loop {
        let (base, db) = (base.clone(), db.clone());
        let listening: i64 = with_pg(base, move |c| {
            c.query_one(
                "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'mcp-approvals listen' AND datname = $1",
                &[&db],
            )
            .unwrap()
            .get(0)
        });
        if listening == 2 || std::time::Instant::now() > deadline {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let killed = with_pg(base, move |c| {
        c.query(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity \
             WHERE application_name = 'mcp-approvals listen' AND datname = $1",
            &[&db],
        )
        .unwrap()
        .len()
    });
    assert_eq!(killed, 2, "one LISTEN connection per instance");
    // Reconnects after 0.1 s (the first backoff step); give it time.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let (v, _) = held_on_a_approved_on_b(&a, &b, 72, Duration::from_millis(300), "after reconnect").await;
    assert_eq!(v["status"], "approved");
}

/// A database that does not answer (here a lock held by another client: every write waits) fails
/// the request within `--db-timeout`, so the filter refuses the call instead of waiting on it; once
/// the database answers again, so does the service.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_database_that_does_not_answer_fails_the_request_within_the_timeout() {
    use std::sync::atomic::AtomicBool;
    use std::sync::mpsc;
    let s = svc_with(Config { db_timeout: Duration::from_millis(300), ..config() });
    let released = Arc::new(AtomicBool::new(false));
    let (locked_tx, locked_rx) = mpsc::channel::<()>();
    let (done_tx, done_rx) = mpsc::channel::<()>();
    let (db, flag) = (s.db.clone(), released.clone());
    let holder = std::thread::spawn(move || {
        // Held until the test is done with it, 3 s at most (less than SQLite's own 5 s wait for a
        // lock): a request that waited for it would be answered only after `released` is set.
        let hold = |commit: &mut dyn FnMut()| {
            locked_tx.send(()).unwrap();
            let _ = done_rx.recv_timeout(Duration::from_secs(3));
            flag.store(true, Ordering::SeqCst);
            commit();
        };
        match db {
            Location::Sqlite(path) => {
                let c = rusqlite::Connection::open(path).unwrap();
                c.execute_batch("BEGIN EXCLUSIVE").unwrap();
                hold(&mut || c.execute_batch("COMMIT").unwrap());
            }
            Location::Postgres(url) => {
                let mut c = postgres::Client::connect(&url, postgres::NoTls).unwrap();
                c.batch_execute("BEGIN; LOCK TABLE approvals IN ACCESS EXCLUSIVE MODE").unwrap();
                hold(&mut || c.batch_execute("COMMIT").unwrap());
            }
        }
    });
    locked_rx.recv().unwrap();
    let r = check_raw(&s, check_body(&grant(95), json!({"vmid": 100}), 600, 0)).await;
    assert!(!released.load(Ordering::SeqCst), "answered only once the lock was released");
    assert_eq!((r.status, r.json()), (StatusCode::INTERNAL_SERVER_ERROR, json!({"error": "internal error"})));
    done_tx.send(()).unwrap();
    holder.join().unwrap();
    assert_eq!(check(&s, &grant(96)).await["status"], "pending");
}
