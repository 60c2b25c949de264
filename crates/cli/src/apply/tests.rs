//! Unit tests of `apply`: the ECDS file rendered, Envoy's log read, the admin address.

use super::*;

const ECDS: &str = r#"{"resources":[{"@type":"type.googleapis.com/envoy.config.core.v3.TypedExtensionConfig","name":"mcp_policy",
    "typed_config":{"@type":"type.googleapis.com/envoy.extensions.filters.http.wasm.v3.Wasm","config":{"name":"mcp_policy",
    "vm_config":{"vm_id":"mcp_policy"},"configuration":{"@type":"type.googleapis.com/google.protobuf.StringValue","value":"{}"}}}}]}"#;

#[test]
fn render_replaces_only_the_policy() {
    let Rendered { text, name, unchanged } = render(ECDS.as_bytes(), "{\"version\":\"1\"}\n").unwrap();
    assert_eq!(name, "mcp_policy");
    assert!(!unchanged);
    let mut got: Value = serde_json::from_str(&text).unwrap();
    let want: Value = serde_json::from_str(ECDS).unwrap();
    assert_eq!(got.pointer("/resources/0/typed_config/config/configuration/value").unwrap(), "{\"version\":\"1\"}\n");
    *got.pointer_mut("/resources/0/typed_config/config/configuration/value").unwrap() = "{}".into();
    assert_eq!(got, want);
    // The same policy text in a file of another layout is the same resource to Envoy.
    let same = render(ECDS.as_bytes(), "{}").unwrap();
    assert!(same.unchanged);
    assert_ne!(same.text, ECDS);
    assert!(render(b"resources: []", "{}").unwrap_err().starts_with("not the JSON ECDS file"));
    assert_eq!(
        render(br#"{"resources":[]}"#, "{}").unwrap_err(),
        "0 resources; expected exactly one (the mcp_policy filter)"
    );
}

#[test]
fn render_replaces_the_native_filters_policy() {
    let ecds = r#"{"resources":[{"@type":"type.googleapis.com/envoy.config.core.v3.TypedExtensionConfig","name":"mcp_policy",
        "typed_config":{"@type":"type.googleapis.com/envoy.extensions.filters.http.dynamic_modules.v3.DynamicModuleFilter",
        "dynamic_module_config":{"name":"mcp_policy_native"},"filter_name":"mcp_policy",
        "filter_config":{"@type":"type.googleapis.com/google.protobuf.StringValue","value":"{}"}}}]}"#;
    let Rendered { text, name, .. } = render(ecds.as_bytes(), "{\"version\":\"1\"}\n").unwrap();
    assert_eq!(name, "mcp_policy");
    let mut got: Value = serde_json::from_str(&text).unwrap();
    let pointer = "/resources/0/typed_config/filter_config/value";
    assert_eq!(got.pointer(pointer).unwrap(), "{\"version\":\"1\"}\n");
    *got.pointer_mut(pointer).unwrap() = "{}".into();
    assert_eq!(got, serde_json::from_str::<Value>(ecds).unwrap());
    let no_value = ecds.replace(r#""value":"{}""#, r#""v":"{}""#);
    assert_eq!(
        render(no_value.as_bytes(), "{}").unwrap_err(),
        "the resource has no typed_config.filter_config.value (the dynamic module filter's)"
    );
}

#[test]
fn trailing_newline_toggles() {
    assert_eq!(toggle_trailing_newline("{}\n"), "{}");
    assert_eq!(toggle_trailing_newline("{}"), "{}\n");
}

#[test]
fn counters_from_stats() {
    let stats = "extension_config_discovery.http_filter.mcp_policy.update_rejected: 2\n\
                 extension_config_discovery.http_filter.mcp_policy.update_success: 7\n\
                 extension_config_discovery.http_filter.other.update_success: 9\n";
    assert_eq!(parse_counters(stats, "mcp_policy"), Counters { success: 7, rejected: 2 });
    assert_eq!(parse_counters("", "mcp_policy"), Counters { success: 0, rejected: 0 });
}

#[test]
fn rejection_lines_from_envoys_log() {
    let log = "\
[2026-11-30 22:58:00.122][1][info][wasm] [source/extensions/common/wasm/context.cc:1151] wasm log mcp_policy mcp_policy: [root 1] mcp-policy-filter 0.1.0 starting
[2026-11-30 22:58:00.122][1][error][wasm] [source/extensions/common/wasm/context.cc:1157] wasm log mcp_policy mcp_policy: [root 1] invalid policy at tools.x.acton: unknown field `acton`
[2026-11-30 22:58:00.122][2][critical][wasm] [source/extensions/common/wasm/wasm.cc:479] Plugin configured to fail closed failed to load
[2026-11-30 22:58:00.122][3][critical][wasm] [source/extensions/common/wasm/wasm.cc:479] Plugin configured to fail closed failed to load
[2026-11-30 22:58:00.124][1][warning][config] [source/extensions/config_subscription/filesystem/filesystem_subscription_impl.cc:81] Filesystem config update rejected: Unable to create Wasm plugin mcp_policy
";
    assert_eq!(
        rejection_lines(log),
        [
            "[error] wasm log mcp_policy mcp_policy: [root 1] invalid policy at tools.x.acton: unknown field `acton`",
            "[critical] Plugin configured to fail closed failed to load (x2)",
            "[warning] Filesystem config update rejected: Unable to create Wasm plugin mcp_policy",
        ]
    );
}

#[test]
fn long_lines_end_at_a_word() {
    assert_eq!(shortened("keeps serving until a valid one", 24), "keeps serving until a …");
    assert_eq!(shortened("short", 24), "short");
    assert_eq!(shortened("[error] abcdefghijklmnopqrstuvwxyz", 16), "[error] abcdefgh …");
}

#[test]
fn chunked_bodies() {
    assert_eq!(dechunk("5\r\nhello\r\n7;x=1\r\n, world\r\n0\r\n\r\n").unwrap(), "hello, world");
    assert_eq!(dechunk("5\r\nhel"), None);
}

#[test]
fn admin_addresses() {
    assert_eq!(admin_authority("http://127.0.0.1:9901/").ok().unwrap(), "127.0.0.1:9901");
    assert_eq!(admin_authority("127.0.0.1:9901").ok().unwrap(), "127.0.0.1:9901");
    assert!(admin_authority("https://127.0.0.1:9901").is_err());
    assert!(admin_authority("http://h:1/x").is_err());
}
