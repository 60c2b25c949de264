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
    pub fn start_on(port: u16) -> Redis {
        let child = Command::new("redis-server")
            .args(["--port", &port.to_string(), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"])
            .stdout(Stdio::null())
            .spawn()
            .expect("redis-server must be installed (apt-get install redis-server)");
        let deadline = Instant::now() + Duration::from_secs(10);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(Instant::now() < deadline, "redis-server did not start");
            std::thread::sleep(Duration::from_millis(20));
        }
        Redis { child, port }
    }

    pub fn start() -> Redis {
        let port = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        Self::start_on(port)
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/0", self.port)
    }

    pub fn stop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    pub fn cli(&self, args: &[&str]) -> String {
        let out = Command::new("redis-cli").args(["-p", &self.port.to_string()]).args(args).output().unwrap();
        String::from_utf8_lossy(&out.stdout).trim().to_owned()
    }
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
