//! The readers of the policy's types: each struct's fields in declaration order with their keys as
//! written (the `#[serde(…)]` attributes of `config::spec` say the same for the schema and the
//! tests' serde oracle), each enum's names and the name its messages give it.

use super::{invalid_type, missing, object, read_enum, read_struct, variant, Error, Path, Read};
use crate::config::set::spec::PolicySetSpec;
use crate::config::spec::{
    AllToolsSpec, ApprovalSpec, ConditionSpec, DefaultForSpec, FlowSpec, GatewaySpec, GrantSpec, IdentitySpec,
    LimitSpec, MarkIfSpec, OpName, PinnedSpec, PolicySpec, RateLimitServiceSpec, RedactSpec, ResultDenySpec,
    ResultSpec, SessionKeySpec, ToolAction, ToolRuleSpec, WhenSpec,
};
use crate::terms::{
    Action, Algorithm, ApprovalMode, AuditMode, FailureMode, Mode, PinMode, RefusalShape, Scope, Window,
};
use crate::wire::json::Json;

read_struct!(PolicySpec into {
    version: "version" required,
    default: "default" default,
    hide: "hide" default,
    all_tools: "all_tools" default,
    tools: "tools" default,
    pins: "pins" default,
    default_for: "default_for" default,
    flows: "flows" default,
    gateway: "gateway" default,
});

read_struct!(PolicySetSpec into {
    version: "version" required,
    policies: "policies" required,
    attach: "attach" default,
    contain: "contain" default,
    gateway: "gateway" default,
});

read_struct!(AllToolsSpec into { limits: "limits" default });

read_struct!(ToolRuleSpec into {
    action: "action" default,
    reason: "reason" default,
    approval_timeout: "approval_timeout" default,
    limits: "limits" default,
    require: "require" default,
    deny_if: "deny_if" default,
    result: "result" default,
    marks: "marks" default,
    pin: "pin" default,
});

read_struct!(ConditionSpec {
    path: "path" required,
    op: "op" required,
    value: "value" default,
    reason: "reason" default,
});

read_struct!(LimitSpec {
    counter: "counter" required,
    window: "window" required,
    max: "max" required,
    scope: "scope" default,
    algorithm: "algorithm" default,
});

read_struct!(ResultSpec into {
    max_bytes: "max_bytes" default,
    deny_if: "deny_if" default,
    redact: "redact" default,
    mark_if: "mark_if" default,
});

read_struct!(MarkIfSpec { regex: "regex" required, mark: "mark" required });

read_struct!(ResultDenySpec { regex: "regex" required, reason: "reason" default });

read_struct!(RedactSpec { regex: "regex" required, with: "with" required });

read_struct!(PinnedSpec { pin: "pin" required, annotations: "annotations" default });

read_struct!(DefaultForSpec { when: "when" required, action: "action" required, reason: "reason" default });

read_struct!(WhenSpec into {
    read_only_hint: "readOnlyHint" default,
    destructive_hint: "destructiveHint" default,
    idempotent_hint: "idempotentHint" default,
    open_world_hint: "openWorldHint" default,
});

read_struct!(FlowSpec {
    name: "name" required,
    if_marked: "if_marked" required,
    deny: "deny" required,
    for_: "for" required,
    reason: "reason" default,
});

read_struct!(GatewaySpec into {
    grant_header: "grant_header" default,
    max_body_bytes: "max_body_bytes" default,
    max_tracked_grants: "max_tracked_grants" default,
    methods: "methods" default,
    mode: "mode" default,
    tool_modes: "tool_modes" default,
    hide_denied_tools: "hide_denied_tools" default,
    max_response_bytes: "max_response_bytes" default,
    grants: "grants" default,
    approval: "approval" default,
    client_responses: "client_responses" default,
    rate_limit_service: "rate_limit_service" default,
    resource_metadata_url: "resource_metadata_url" default,
    protocol_versions: "protocol_versions" default,
    audit: "audit" default,
    filter_state: "filter_state" default,
    session_key: "session_key" default,
    pins: "pins" default,
    identity: "identity" default,
    refusal_shape: "refusal_shape" default,
});

read_struct!(IdentitySpec { payload_header: "payload_header" required, grant_claim: "grant_claim" default });

read_struct!(SessionKeySpec into {
    current: "current" default,
    current_env: "current_env" default,
    previous: "previous" default,
    previous_env: "previous_env" default,
});

read_struct!(ApprovalSpec into {
    cluster: "cluster" required,
    path: "path" default,
    authority: "authority" default,
    timeout: "timeout" default,
    mode: "mode" default,
    max_held_per_grant: "max_held_per_grant" default,
});

read_struct!(GrantSpec { sha256: "sha256" required, label: "label" required });

read_struct!(RateLimitServiceSpec into {
    cluster: "cluster" required,
    authority: "authority" default,
    domain: "domain" default,
    timeout: "timeout" default,
    failure_mode: "failure_mode" default,
});

read_enum!(ToolAction "enum ToolActionSpec" { Allow: "allow", Deny: "deny", RequireApproval: "require_approval" });

read_enum!(OpName "enum OpSpec" {
    Eq: "eq",
    Neq: "neq",
    In: "in",
    NotIn: "not_in",
    Lt: "lt",
    Lte: "lte",
    Gt: "gt",
    Gte: "gte",
    Regex: "regex",
    Contains: "contains",
    Exists: "exists",
});

read_enum!(Action "enum ActionSpec" { Allow: "allow", Deny: "deny" });

read_enum!(Window "enum WindowSpec" { Second: "second", Minute: "minute", Hour: "hour", Day: "day" });

read_enum!(Mode "enum ModeSpec" { Enforce: "enforce", DryRun: "dry_run" });

read_enum!(Scope "enum ScopeSpec" { Grant: "grant", Global: "global" });

read_enum!(Algorithm "enum AlgorithmSpec" { Fixed: "fixed", Sliding: "sliding" });

read_enum!(ApprovalMode "enum ApprovalModeSpec" { Retry: "retry", Hold: "hold" });

read_enum!(AuditMode "enum AuditSpec" { Log: "log", AccessLog: "access_log", Off: "off" });

read_enum!(PinMode "enum PinsSpec" { Enforce: "enforce", Report: "report" });

read_enum!(FailureMode "enum FailureModeSpec" { Deny: "deny", Allow: "allow" });

read_enum!(RefusalShape "enum RefusalShapeSpec" { Error: "error", ToolResult: "tool_result" });
