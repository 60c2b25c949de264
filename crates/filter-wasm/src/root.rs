//! The root context: the policy loaded from the plugin configuration (`on_configure`, once per VM)
//! and the HTTP context of each stream.

use std::rc::Rc;

use log::{error, info, warn};
use proxy_wasm::hostcalls;
use proxy_wasm::traits::{Context, HttpContext, RootContext};
use proxy_wasm::types::{BufferType, ContextType};

use super::metrics::Metrics;
use super::{Filter, HostStore, RequestState};
use mcp_policy_core::config::{self, PolicySet};
use mcp_policy_core::limits;
use mcp_policy_core::policy::Policy;
use mcp_policy_core::response::ResponseFilter;

pub(super) struct Root {
    id: u32,
    policy: Option<Rc<Policy>>,
    /// The policy set, when a request's policy must be chosen (a set, or `gateway.identity`).
    set: Option<Rc<PolicySet>>,
    metrics: Rc<Metrics>,
}

impl Root {
    pub(super) fn new(id: u32) -> Self {
        Root { id, policy: None, set: None, metrics: Rc::new(Metrics::none()) }
    }
}

impl Context for Root {}

impl RootContext for Root {
    fn on_vm_start(&mut self, _vm_configuration_size: usize) -> bool {
        // Follow Envoy's wasm log level so that disabled levels cost nothing to format.
        if let Ok(level) = hostcalls::get_log_level() {
            proxy_wasm::set_log_level(level);
        }
        info!("[root {}] mcp-policy-filter {} starting", self.id, mcp_policy_core::VERSION);
        true
    }

    fn on_configure(&mut self, _plugin_configuration_size: usize) -> bool {
        let bytes = match hostcalls::get_buffer(BufferType::PluginConfiguration, 0, usize::MAX) {
            Ok(Some(b)) => b,
            Ok(None) => {
                error!(
                    "[root {}] invalid policy at . (the whole document): the plugin configuration is empty",
                    self.id
                );
                return false;
            }
            Err(s) => {
                error!("[root {}] cannot read the plugin configuration: {s:?}", self.id);
                return false;
            }
        };
        // The VM's environment (Envoy vm_config.environment_variables), for keys named by variable.
        match config::load_set_with_env(&bytes, &|name| std::env::var(name).ok()) {
            Ok(set) => {
                // A plain policy without an identity is the request's policy as is: nothing to choose.
                let policy = Rc::clone(set.plain().unwrap_or_else(|| set.base()));
                let chooses = set.plain().is_none() || policy.gateway.identity.is_some();
                if set.plain().is_none() {
                    info!(
                        "[root {}] policy set loaded: {} policies, {} attach rules, {} contained",
                        self.id,
                        set.members().len(),
                        set.rules().len(),
                        set.contained().len()
                    );
                }
                if let Err(e) = limits::init_lock(&HostStore) {
                    error!("[root {}] shared data unavailable: {e:?}", self.id);
                    return false;
                }
                info!(
                    "[root {}] policy loaded: default={:?}, {} tool rules, {} limits, max_body_bytes={}",
                    self.id,
                    policy.default,
                    policy.listed_tools().count(),
                    policy.limits.len(),
                    policy.gateway.max_body_bytes
                );
                for w in config::warnings(&policy) {
                    warn!("[root {}] {w}", self.id);
                }
                let mut all: Vec<&Policy> = set.members().iter().map(|p| &**p).collect();
                all.push(set.base());
                self.metrics = Rc::new(Metrics::define(&all));
                // From here on the gauge is only incremented, by the VM that registers a grant.
                self.metrics.set_tracked_grants(limits::tracked_grants(&HostStore));
                self.set = chooses.then(|| Rc::new(set));
                self.policy = Some(policy);
                true
            }
            Err(e) => {
                // Envoy follows this with its own `[critical] Plugin configured to fail closed failed to
                // load` lines: say first what they mean for traffic.
                error!(
                    "[root {}] policy not loaded: {e}. Envoy refuses this configuration: on a reload the \
                     previous policy keeps serving; at startup Envoy exits, or with the policy from ECDS \
                     answers every request 500 until a valid one is applied; its next lines (\"Plugin ... \
                     failed to load\") are about this refusal",
                    self.id
                );
                false
            }
        }
    }

    fn create_http_context(&self, context_id: u32) -> Option<Box<dyn HttpContext>> {
        Some(Box::new(Filter {
            id: context_id,
            policy: self.policy.clone(),
            set: self.set.clone(),
            attached: None,
            metrics: Rc::clone(&self.metrics),
            request: RequestState::Headers,
            response: ResponseFilter::pass(),
            request_id: None,
            session_grant: None,
            session_upstream: None,
            session_url_elicitation: false,
            held: None,
            rewrite: None,
            decided_at_ms: None,
            mark_grant: None,
            mark_failed: false,
            marks_out: Vec::new(),
            mark_call: None,
            error_after_marks: None,
        }))
    }

    fn get_type(&self) -> Option<ContextType> {
        Some(ContextType::HttpContext)
    }
}
