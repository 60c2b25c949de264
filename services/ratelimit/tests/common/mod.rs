//! A real `redis-server` for the tests (Debian's `redis-server`; `make test` installs it when
//! missing and run as root), and a TCP proxy in front of it that can delay Redis's replies.

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used, clippy::panic, clippy::indexing_slicing)]

use std::net::TcpListener;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

pub struct Redis {
    child: Child,
    pub port: u16,
}

impl Redis {
    /// A `redis-server` on `port`, once it answers as itself: a server of another test that took
    /// the same port would also accept connections, so the answer's `process_id` must be ours.
    pub fn start_on(port: u16) -> Redis {
        Self::try_start_on(port).unwrap_or_else(|| panic!("redis-server could not listen on port {port}"))
    }

    /// `None` when the server exits before it answers (its port was taken in the meantime).
    fn try_start_on(port: u16) -> Option<Redis> {
        let mut child = Command::new("redis-server")
            .args(["--port", &port.to_string(), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"])
            .stdout(Stdio::null())
            .spawn()
            .expect("redis-server must be installed (apt-get install redis-server)");
        let deadline = Instant::now() + Duration::from_secs(10);
        let ours = format!("process_id:{}", child.id());
        loop {
            if child.try_wait().unwrap().is_some() {
                return None;
            }
            if cli_on(port, &["INFO", "server"]).lines().any(|l| l.trim() == ours) {
                return Some(Redis { child, port });
            }
            assert!(Instant::now() < deadline, "redis-server did not start");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// A `redis-server` on a free port. A port found free can be taken by another test before the
    /// server binds it: then the server exits, and another port is tried.
    pub fn start() -> Redis {
        for _ in 0..10 {
            let port = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
            if let Some(redis) = Self::try_start_on(port) {
                return redis;
            }
        }
        panic!("redis-server found no free port in 10 tries")
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/0", self.port)
    }

    pub fn stop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    pub fn cli(&self, args: &[&str]) -> String {
        cli_on(self.port, args)
    }
}

/// `redis-cli -p PORT ARGS...`, its output trimmed (empty when nothing answers).
fn cli_on(port: u16, args: &[&str]) -> String {
    let out = Command::new("redis-cli").args(["-p", &port.to_string()]).args(args).output().unwrap();
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

impl Drop for Redis {
    fn drop(&mut self) {
        self.stop();
    }
}

/// A free port on 127.0.0.1.
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// A TCP proxy on 127.0.0.1 to `upstream` that holds every chunk of the upstream's replies for
/// `delay_ms` (changeable while it runs) before passing it on, in order; requests pass at once.
pub struct SlowProxy {
    pub port: u16,
    pub delay_ms: Arc<AtomicU64>,
}

impl SlowProxy {
    pub async fn start(upstream: u16) -> SlowProxy {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let delay_ms = Arc::new(AtomicU64::new(0));
        let delay = delay_ms.clone();
        tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                let server = tokio::net::TcpStream::connect(("127.0.0.1", upstream)).await.unwrap();
                let (mut cr, mut cw) = client.into_split();
                let (mut sr, mut sw) = server.into_split();
                tokio::spawn(async move {
                    let _ = tokio::io::copy(&mut cr, &mut sw).await;
                });
                let delay = delay.clone();
                tokio::spawn(async move {
                    use tokio::io::{AsyncReadExt, AsyncWriteExt};
                    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<(tokio::time::Instant, Vec<u8>)>();
                    tokio::spawn(async move {
                        while let Some((at, chunk)) = rx.recv().await {
                            tokio::time::sleep_until(at).await;
                            if cw.write_all(&chunk).await.is_err() {
                                return;
                            }
                        }
                    });
                    let mut buf = vec![0u8; 65536];
                    loop {
                        let n = match sr.read(&mut buf).await {
                            Ok(0) | Err(_) => return,
                            Ok(n) => n,
                        };
                        let at = tokio::time::Instant::now() + Duration::from_millis(delay.load(Ordering::Relaxed));
                        if tx.send((at, buf[..n].to_vec())).is_err() {
                            return;
                        }
                    }
                });
            }
        });
        SlowProxy { port, delay_ms }
    }

    pub fn set_delay(&self, ms: u64) {
        self.delay_ms.store(ms, Ordering::Relaxed);
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/0", self.port)
    }
}
