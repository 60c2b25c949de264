//! The minimal body-reading filter (the throughput target's baseline): for each request it reads one
//! header (`authorization`, the credential the filter reads) and, at end of stream, the whole body
//! in one host call; then it continues. No parsing, no decision, no logging. Run behind the same
//! buffer filter as mcp-policy-filter (`bench/envoy/filters-wasm.yaml`).

use proxy_wasm::traits::{Context, HttpContext, RootContext};
use proxy_wasm::types::{Action, ContextType, LogLevel};

proxy_wasm::main! {{
    proxy_wasm::set_log_level(LogLevel::Warn);
    proxy_wasm::set_root_context(|_| -> Box<dyn RootContext> { Box::new(Root) });
}}

struct Root;

impl Context for Root {}

impl RootContext for Root {
    fn on_configure(&mut self, _: usize) -> bool {
        true
    }

    fn create_http_context(&self, _: u32) -> Option<Box<dyn HttpContext>> {
        Some(Box::new(Minimal { seen: 0 }))
    }

    fn get_type(&self) -> Option<ContextType> {
        Some(ContextType::HttpContext)
    }
}

struct Minimal {
    /// Bytes read: kept so that the reads cannot be optimised away.
    seen: usize,
}

impl Context for Minimal {}

impl HttpContext for Minimal {
    fn on_http_request_headers(&mut self, _: usize, _: bool) -> Action {
        self.seen += self.get_http_request_header("authorization").map_or(0, |v| v.len());
        Action::Continue
    }

    fn on_http_request_body(&mut self, body_size: usize, end_of_stream: bool) -> Action {
        if !end_of_stream {
            return Action::Pause;
        }
        self.seen += self.get_http_request_body(0, body_size).map_or(0, |b| b.len());
        Action::Continue
    }
}
