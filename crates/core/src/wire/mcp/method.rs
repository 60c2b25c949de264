//! MCP method names, as the policy and the per-version method table know them.

/// The MCP methods a client may send, by name. Unknown names are kept as [`McpMethod::Other`] so
/// that the policy can deny them by default; notifications are any `notifications/…` name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum McpMethod {
    Initialize,
    Ping,
    /// `server/discover` (2026-07-28): the stateless replacement of `initialize`.
    ServerDiscover,
    /// `subscriptions/listen` (2026-07-28): opens a notification stream.
    SubscriptionsListen,
    ToolsList,
    ToolsCall,
    ResourcesList,
    ResourcesTemplatesList,
    ResourcesRead,
    ResourcesSubscribe,
    ResourcesUnsubscribe,
    PromptsList,
    PromptsGet,
    CompletionComplete,
    LoggingSetLevel,
    TasksGet,
    TasksList,
    TasksResult,
    TasksCancel,
    /// `notifications/…`, e.g. `notifications/initialized`, `notifications/cancelled`.
    Notification(String),
    /// A name MCP does not define.
    Other(String),
}

impl McpMethod {
    /// Classify a method name (case-sensitive, as MCP method names are).
    pub fn from_name(name: &str) -> Self {
        match name {
            "initialize" => McpMethod::Initialize,
            "ping" => McpMethod::Ping,
            "server/discover" => McpMethod::ServerDiscover,
            "subscriptions/listen" => McpMethod::SubscriptionsListen,
            "tools/list" => McpMethod::ToolsList,
            "tools/call" => McpMethod::ToolsCall,
            "resources/list" => McpMethod::ResourcesList,
            "resources/templates/list" => McpMethod::ResourcesTemplatesList,
            "resources/read" => McpMethod::ResourcesRead,
            "resources/subscribe" => McpMethod::ResourcesSubscribe,
            "resources/unsubscribe" => McpMethod::ResourcesUnsubscribe,
            "prompts/list" => McpMethod::PromptsList,
            "prompts/get" => McpMethod::PromptsGet,
            "completion/complete" => McpMethod::CompletionComplete,
            "logging/setLevel" => McpMethod::LoggingSetLevel,
            "tasks/get" => McpMethod::TasksGet,
            "tasks/list" => McpMethod::TasksList,
            "tasks/result" => McpMethod::TasksResult,
            "tasks/cancel" => McpMethod::TasksCancel,
            n if n.starts_with("notifications/") => McpMethod::Notification(n.to_owned()),
            n => McpMethod::Other(n.to_owned()),
        }
    }

    /// The method's wire name.
    pub fn name(&self) -> &str {
        match self {
            McpMethod::Initialize => "initialize",
            McpMethod::Ping => "ping",
            McpMethod::ServerDiscover => "server/discover",
            McpMethod::SubscriptionsListen => "subscriptions/listen",
            McpMethod::ToolsList => "tools/list",
            McpMethod::ToolsCall => "tools/call",
            McpMethod::ResourcesList => "resources/list",
            McpMethod::ResourcesTemplatesList => "resources/templates/list",
            McpMethod::ResourcesRead => "resources/read",
            McpMethod::ResourcesSubscribe => "resources/subscribe",
            McpMethod::ResourcesUnsubscribe => "resources/unsubscribe",
            McpMethod::PromptsList => "prompts/list",
            McpMethod::PromptsGet => "prompts/get",
            McpMethod::CompletionComplete => "completion/complete",
            McpMethod::LoggingSetLevel => "logging/setLevel",
            McpMethod::TasksGet => "tasks/get",
            McpMethod::TasksList => "tasks/list",
            McpMethod::TasksResult => "tasks/result",
            McpMethod::TasksCancel => "tasks/cancel",
            McpMethod::Notification(n) | McpMethod::Other(n) => n,
        }
    }
}
