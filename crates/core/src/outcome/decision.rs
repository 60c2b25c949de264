//! The record of one decision ([`Decision`]), for metrics, logs and the access log.

use std::sync::Arc;

use super::kind::DecisionKind;
use super::refusal::Refusal;

/// The record of one decision. Never holds tokens or argument values.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decision {
    pub kind: DecisionKind,
    pub method: Option<String>,
    pub tool: Option<String>,
    pub rule: Option<String>,
    /// The grant label (`sha256:…`), once known.
    pub grant: Option<String>,
    /// The refusal answered (or, in dry-run, that would have been), if any. Shared, not boxed: a
    /// decision is copied into a pending callout, and sharing spares the wasm module a clone of
    /// every refusal kind (2.2 KB).
    pub refusal: Option<Arc<Refusal>>,
    pub reason: Option<String>,
    /// The JSON-RPC id as sent (raw JSON text), for requests.
    pub id: Option<String>,
    /// The names of the `tools/call` arguments (never their values).
    pub arg_keys: Vec<String>,
    /// Dry-run: the request was refused by policy but forwarded anyway ("would deny").
    pub dry_run: bool,
    /// The approval this decision is about (`require_approval` tools).
    pub approval_id: Option<String>,
    /// The attached policy's name under a policy set, and who called, from the verified token only
    /// (`gateway.identity`).
    pub provenance: Option<Box<crate::identity::payload::Provenance>>,
    /// The request is MCP 2026-07-28, whose schema requires `resultType` in every result: a
    /// refusal shaped as a tool result (`gateway.refusal_shape`) says `"resultType":"complete"`.
    pub tagged_results: bool,
}

impl Decision {
    pub(crate) fn new(kind: DecisionKind) -> Self {
        Decision {
            kind,
            method: None,
            tool: None,
            rule: None,
            grant: None,
            refusal: None,
            reason: None,
            id: None,
            arg_keys: Vec::new(),
            dry_run: false,
            approval_id: None,
            provenance: None,
            tagged_results: false,
        }
    }

    /// An allowed `tools/call` of `tool` with the JSON-RPC id `id` (raw JSON text, e.g. `7` or
    /// `"a-1"`), nothing else known: the decision a response filter is built from
    /// ([`crate::response::ResponseFilter::judging`]). For tests, benches and fuzzing.
    pub fn allowed_call(tool: &str, id: &str) -> Self {
        Decision {
            method: Some("tools/call".into()),
            tool: Some(tool.into()),
            id: Some(id.into()),
            ..Decision::new(DecisionKind::Allowed)
        }
    }

    /// `data.kind` of the refusal, if any.
    pub fn error_kind(&self) -> Option<&'static str> {
        self.refusal.as_deref().map(Refusal::kind)
    }

    /// Record `refusal` as this decision's outcome: its kind, reason and the refusal itself (the
    /// tool, rule and everything else known so far stay).
    pub(crate) fn refused(&mut self, refusal: Refusal) {
        self.kind = refusal.decision_kind();
        self.reason = Some(refusal.reason().into_owned());
        self.refusal = Some(Arc::new(refusal));
    }

    /// The decision as shown in the access log and the audit log: the kind, or `would_deny` in
    /// dry-run mode.
    pub fn label(&self) -> &'static str {
        if self.dry_run {
            "would_deny"
        } else {
            self.kind.as_str()
        }
    }
}
