//! The process around a service's `run`: logging on stderr, a multi-threaded runtime, and the
//! exit status.

use std::future::Future;
use std::process::ExitCode;
use std::time::Duration;

/// How long the runtime waits, once `run` returned, for blocking work still in flight (a database
/// call) before the process exits anyway.
const BLOCKING_GRACE: Duration = Duration::from_secs(1);

/// Logs at `level` and above on stderr (colours only on a terminal), runs `run` to its end, and
/// maps its result to the exit status: 0; 2 with `NAME: ERROR` on stderr when `run` fails (a bad
/// flag, a port taken); 1 when the runtime cannot start.
pub fn main(name: &str, level: tracing::Level, run: impl Future<Output = Result<(), String>>) -> ExitCode {
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
    tracing_subscriber::fmt()
        .with_max_level(level)
        .with_target(false)
        .with_ansi(ansi)
        .with_writer(std::io::stderr)
        .init();
    let rt = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("{name}: tokio runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let result = rt.block_on(run);
    rt.shutdown_timeout(BLOCKING_GRACE);
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("{name}: {e}");
            ExitCode::from(2)
        }
    }
}
