//! What happened to a request ([`DecisionKind`]) and its record ([`Decision`]), for metrics, logs
//! and the access log.

use super::refusal::Refusal;

/// What happened to a request, for metrics, logs and the access log.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DecisionKind {
    /// A judged call the policy allowed.
    Allowed,
    /// Not subject to policy (lifecycle method, notification, GET/DELETE), forwarded.
    Passed,
    Denied,
    RateLimited,
    NoGrant,
    /// Refused before policy: protocol, media type, size, method or header errors.
    Invalid,
    LimiterUnavailable,
    /// Forwarded after a person approved this exact call (the approval is used up).
    Approved,
    /// Held for a person's approval: refused with `approval_required` until approved.
    ApprovalRequired,
    ApprovalDenied,
    /// The approval service could not be asked; refused.
    ApprovalUnavailable,
}

impl DecisionKind {
    pub fn as_str(self) -> &'static str {
        match self {
            DecisionKind::Allowed => "allowed",
            DecisionKind::Passed => "passed",
            DecisionKind::Denied => "denied",
            DecisionKind::RateLimited => "rate_limited",
            DecisionKind::NoGrant => "no_grant",
            DecisionKind::Invalid => "invalid",
            DecisionKind::LimiterUnavailable => "limiter_unavailable",
            DecisionKind::Approved => "approved",
            DecisionKind::ApprovalRequired => "approval_required",
            DecisionKind::ApprovalDenied => "approval_denied",
            DecisionKind::ApprovalUnavailable => "approval_unavailable",
        }
    }

    /// A refusal by policy (subject to dry-run), as opposed to a protocol error.
    pub fn is_policy(self) -> bool {
        matches!(
            self,
            DecisionKind::Denied
                | DecisionKind::RateLimited
                | DecisionKind::NoGrant
                | DecisionKind::LimiterUnavailable
                | DecisionKind::ApprovalRequired
                | DecisionKind::ApprovalDenied
                | DecisionKind::ApprovalUnavailable
        )
    }

    /// Every kind, once, in declaration order. `series` checks its metric labels against it.
    pub const ALL: [DecisionKind; 11] = [
        DecisionKind::Allowed,
        DecisionKind::Passed,
        DecisionKind::Denied,
        DecisionKind::RateLimited,
        DecisionKind::NoGrant,
        DecisionKind::Invalid,
        DecisionKind::LimiterUnavailable,
        DecisionKind::Approved,
        DecisionKind::ApprovalRequired,
        DecisionKind::ApprovalDenied,
        DecisionKind::ApprovalUnavailable,
    ];
}

/// The record of one decision. Never holds tokens or argument values.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decision {
    pub kind: DecisionKind,
    pub method: Option<String>,
    pub tool: Option<String>,
    pub rule: Option<String>,
    /// The grant label (`sha256:…`), once known.
    pub grant: Option<String>,
    /// The refusal answered (or, in dry-run, that would have been), if any.
    pub refusal: Option<Box<Refusal>>,
    pub reason: Option<String>,
    /// The JSON-RPC id as sent (raw JSON text), for requests.
    pub id: Option<String>,
    /// The names of the `tools/call` arguments (never their values).
    pub arg_keys: Vec<String>,
    /// Dry-run: the request was refused by policy but forwarded anyway ("would deny").
    pub dry_run: bool,
    /// The approval this decision is about (`require_approval` tools).
    pub approval_id: Option<String>,
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
        self.refusal = Some(Box::new(refusal));
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
