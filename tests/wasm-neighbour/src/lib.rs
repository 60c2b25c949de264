//! A test neighbour for mcp-policy-filter: a second wasm plugin in the same shared-data namespace.
//!
//! - On configure it writes `junk` into `lock` and `grants`: the filter's key names without its
//!   `mcpf1:` prefix. If the filter used those names its limiter would read junk and refuse calls.
//! - Every request other than `GET /neighbour` adds one to its own counter `count` (a CAS loop,
//!   exact across worker threads).
//! - `GET /neighbour` answers (locally) with JSON: `count`, the values of `lock` and `grants` as
//!   text, and `filter_grants`: the filter's `mcpf1:grants` (u64 little-endian), or null when this
//!   plugin cannot see it (then the two plugins would not share a namespace and the test proves
//!   nothing).

use proxy_wasm::hostcalls;
use proxy_wasm::traits::{Context, HttpContext, RootContext};
use proxy_wasm::types::{Action, ContextType, LogLevel, Status};

proxy_wasm::main! {{
    proxy_wasm::set_log_level(LogLevel::Info);
    proxy_wasm::set_root_context(|_| Box::new(Root));
}}

struct Root;
impl Context for Root {}
impl RootContext for Root {
    fn on_configure(&mut self, _: usize) -> bool {
        hostcalls::set_shared_data("lock", Some(b"junk"), None).is_ok()
            && hostcalls::set_shared_data("grants", Some(b"junk"), None).is_ok()
    }
    fn create_http_context(&self, _: u32) -> Option<Box<dyn HttpContext>> {
        Some(Box::new(Stream))
    }
    fn get_type(&self) -> Option<ContextType> {
        Some(ContextType::HttpContext)
    }
}

fn text(key: &str) -> String {
    match hostcalls::get_shared_data(key) {
        Ok((Some(v), _)) => format!("\"{}\"", String::from_utf8_lossy(&v).escape_default()),
        _ => "null".to_owned(),
    }
}

fn u64_le(key: &str) -> String {
    match hostcalls::get_shared_data(key) {
        Ok((Some(v), _)) => match <[u8; 8]>::try_from(v.as_slice()) {
            Ok(b) => u64::from_le_bytes(b).to_string(),
            Err(_) => "\"not u64\"".to_owned(),
        },
        _ => "null".to_owned(),
    }
}

/// One more request: read, then CAS-write, retried on a lost race.
fn bump() -> bool {
    for _ in 0..1000 {
        let (value, cas) = match hostcalls::get_shared_data("count") {
            Ok(r) => r,
            Err(_) => return false,
        };
        let n = value.and_then(|v| String::from_utf8(v).ok()).and_then(|s| s.parse::<u64>().ok()).unwrap_or(0);
        match hostcalls::set_shared_data("count", Some((n + 1).to_string().as_bytes()), cas) {
            Ok(()) => return true,
            Err(Status::CasMismatch) => continue,
            Err(_) => return false,
        }
    }
    false
}

struct Stream;
impl Context for Stream {}
impl HttpContext for Stream {
    fn on_http_request_headers(&mut self, _: usize, _: bool) -> Action {
        let path = hostcalls::get_map_value(proxy_wasm::types::MapType::HttpRequestHeaders, ":path").ok().flatten();
        if path.as_deref() == Some("/neighbour") {
            let body = format!(
                "{{\"count\":{},\"lock\":{},\"grants\":{},\"filter_grants\":{}}}",
                u64_or_null(&text("count")),
                text("lock"),
                text("grants"),
                u64_le("mcpf1:grants")
            );
            let _ =
                hostcalls::send_http_response(200, vec![("content-type", "application/json")], Some(body.as_bytes()));
            return Action::Pause;
        }
        if !bump() {
            let _ = hostcalls::send_http_response(500, vec![], Some(b"neighbour: shared data failed"));
            return Action::Pause;
        }
        Action::Continue
    }
}

/// `count` is stored as decimal text; report it as a JSON number (0 before any request).
fn u64_or_null(quoted: &str) -> String {
    let inner = quoted.trim_matches('"');
    inner.parse::<u64>().map(|n| n.to_string()).unwrap_or_else(|_| "0".to_owned())
}
