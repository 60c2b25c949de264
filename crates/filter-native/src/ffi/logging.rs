//! The `log` crate routed to Envoy's `dynamic_modules` logger, and the panic hook.
//!
//! A line is formatted once, into a buffer kept by the worker thread (no allocation per line), and
//! handed to Envoy, which formats it again into its own log line and writes it to its sink.

use std::cell::RefCell;
use std::fmt::Write as _;

use super::{log, log_enabled, Level};

/// The `log` crate's records, forwarded to Envoy's `dynamic_modules` logger.
struct EnvoyLogger;

fn level_of(l: log::Level) -> Level {
    match l {
        log::Level::Error => Level::Error,
        log::Level::Warn => Level::Warn,
        log::Level::Info => Level::Info,
        log::Level::Debug => Level::Debug,
        log::Level::Trace => Level::Trace,
    }
}

thread_local! {
    /// The line being built on this thread; its capacity is kept from line to line.
    static LINE: RefCell<String> = const { RefCell::new(String::new()) };
}

/// A buffer this large is given back rather than kept (a rare huge line must not stay resident).
const KEEP_CAPACITY: usize = 16 * 1024;

/// Log the line `build` writes at `level`, if Envoy's `dynamic_modules` logger has that level on:
/// one check of the level through the ABI, the line built in the thread's buffer, one call into
/// Envoy. The same line, at the same level, as `log::info!` and the others give.
pub fn log_built(level: Level, build: impl FnOnce(&mut String)) {
    if !log_enabled(level) {
        return;
    }
    let emit = |line: &mut String| {
        line.clear();
        build(line);
        log(level, line);
    };
    LINE.with(|cell| match cell.try_borrow_mut() {
        Ok(mut line) => {
            emit(&mut line);
            if line.capacity() > KEEP_CAPACITY {
                *line = String::new();
            }
        }
        // A line logged while another is built on this thread (never by this crate): its own buffer.
        Err(_) => emit(&mut String::new()),
    });
}

impl log::Log for EnvoyLogger {
    fn enabled(&self, metadata: &log::Metadata) -> bool {
        log_enabled(level_of(metadata.level()))
    }

    fn log(&self, record: &log::Record) {
        let args = record.args();
        match args.as_str() {
            Some(text) if log_enabled(level_of(record.level())) => log(level_of(record.level()), text),
            Some(_) => {}
            None => log_built(level_of(record.level()), |line| {
                let _ = line.write_fmt(*args);
            }),
        }
    }

    fn flush(&self) {}
}

static LOGGER: EnvoyLogger = EnvoyLogger;

/// Route the `log` crate to Envoy (once per process) and log panics at critical level.
pub fn init_logging() {
    if log::set_logger(&LOGGER).is_ok() {
        log::set_max_level(log::LevelFilter::Trace);
    }
    std::panic::set_hook(Box::new(|info| {
        log(Level::Critical, &format!("mcp-policy-filter panicked: {info}; failing closed"));
    }));
}
