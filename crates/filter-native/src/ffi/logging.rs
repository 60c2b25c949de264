//! The `log` crate routed to Envoy's `dynamic_modules` logger, and the panic hook.

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

impl log::Log for EnvoyLogger {
    fn enabled(&self, metadata: &log::Metadata) -> bool {
        log_enabled(level_of(metadata.level()))
    }

    fn log(&self, record: &log::Record) {
        if self.enabled(record.metadata()) {
            log(level_of(record.level()), &record.args().to_string());
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
