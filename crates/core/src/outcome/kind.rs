//! What happened to a request ([`DecisionKind`]): the word metrics, logs and the access log use.
//! Below both the refusal (which names its kind) and the decision record (which holds one).

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
    pub const fn as_str(self) -> &'static str {
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
