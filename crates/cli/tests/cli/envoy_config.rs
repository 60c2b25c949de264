//! `check ENVOY.yaml`: the policies of an Envoy configuration checked where they sit, with the
//! clusters they call and the wasm VM's view of their key variable.

use super::check::unset_note;
use super::{run, scratch};

/// The shipped bootstraps and ECDS files check as their policies do, each named by its place.
#[test]
fn check_reads_the_shipped_envoy_configurations() {
    let summary = "ok: version 1, default deny, 3 tool rules, 1 limit, 1 tool requires approval (cluster mcp_approvals, mode retry)";
    for (file, place) in [
        ("envoy/envoy.yaml", "listener mcp_ingress, http filter mcp_policy (wasm)"),
        ("envoy/envoy-dynamic.yaml", "listener mcp_ingress, http filter mcp_policy (native)"),
        ("envoy/ecds/mcp_policy.yaml", "ECDS resource mcp_policy, http filter mcp_policy (wasm)"),
        ("envoy/ecds/mcp_policy_native.yaml", "ECDS resource mcp_policy, http filter mcp_policy (native)"),
    ] {
        let at = format!("{file}: {place}");
        assert_eq!(run(&["check", file]), (0, format!("{at}: {summary}\n"), unset_note(&at)), "{file}");
    }
}

/// A bootstrap with one native filter whose policy is `policy` (JSON on one line), the clusters
/// `clusters`, and `extra` lines at the top level.
fn native(policy: &str, filter_name: &str, clusters: &[&str], extra: &str) -> String {
    let clusters: String = clusters.iter().map(|c| format!("  - name: {c}\n")).collect();
    format!(
        "static_resources:\n  listeners:\n  - name: mcp\n    address: {{socket_address: {{address: 127.0.0.1, port_value: 10000}}}}\n\
         \x20   filter_chains:\n    - filters:\n      - name: envoy.filters.network.http_connection_manager\n        typed_config:\n\
         \x20         \"@type\": type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager\n\
         \x20         http_filters:\n          - name: policy\n            typed_config:\n\
         \x20             \"@type\": type.googleapis.com/envoy.extensions.filters.http.dynamic_modules.v3.DynamicModuleFilter\n\
         \x20             dynamic_module_config: {{name: mcp_policy_native}}\n              filter_name: {filter_name}\n\
         \x20             filter_config:\n                \"@type\": type.googleapis.com/google.protobuf.StringValue\n\
         \x20               value: '{policy}'\n  clusters:\n{clusters}{extra}"
    )
}

/// Where [`native`]'s filter sits, as each line about it begins after the file name.
const NATIVE_AT: &str = "listener mcp, http filter policy (native)";

/// The shipped wasm bootstrap, envoy/envoy.yaml.
fn shipped_wasm() -> String {
    std::fs::read_to_string(format!("{}/envoy/envoy.yaml", super::common::ROOT)).unwrap()
}

const KEY: &str = r#""session_key":{"current":"0123456789abcdef0123456789abcdef"}"#;

#[test]
fn check_names_a_cluster_the_policy_calls_that_envoy_does_not_define() {
    let policy = format!(
        r#"{{"version":"1","tools":{{"a":{{"limits":[{{"counter":"c","window":"minute","max":5}}]}}}},"gateway":{{{KEY},"rate_limit_service":{{"cluster":"mcp_ratelimt"}}}}}}"#
    );
    let ok = "ok: version 1, default deny, 1 tool rule, 1 limit";
    let f = scratch("typo.yaml", &native(&policy, "mcp_policy", &["upstream", "mcp_ratelimit"], ""));
    let at = format!("{f}: {NATIVE_AT}");
    assert_eq!(
        run(&["check", &f]),
        (
            1,
            format!("{at}: {ok}\n"),
            format!(
                "{at}: gateway.rate_limit_service.cluster: no cluster \"mcp_ratelimt\" in static_resources.clusters \
                 (defined: \"mcp_ratelimit\", \"upstream\") and no CDS to deliver one: Envoy would start, and refuse \
                 every call that needs it\n"
            )
        )
    );
    // With CDS the cluster may come later: a note, not an error.
    let cds = "dynamic_resources: {cds_config: {ads: {}}}\n";
    let f = scratch("typo-cds.yaml", &native(&policy, "mcp_policy", &["upstream"], cds));
    let at = format!("{f}: {NATIVE_AT}");
    assert_eq!(
        run(&["check", &f]),
        (
            0,
            format!("{at}: {ok}\n"),
            format!(
                "{at}: note: gateway.rate_limit_service.cluster: cluster \"mcp_ratelimt\" is not among \
                 static_resources.clusters; it must come from CDS, or every call that needs it is refused\n"
            )
        )
    );
    let right = policy.replace("mcp_ratelimt", "mcp_ratelimit");
    let h2 = "  - name: mcp_ratelimit\n    typed_extension_protocol_options: {envoy.extensions.upstreams.http.v3.HttpProtocolOptions: \
              {\"@type\": type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions, \
              explicit_http_config: {http2_protocol_options: {}}}}\n";
    let right =
        native(&right, "mcp_policy", &["upstream", "mcp_ratelimit"], "").replace("  - name: mcp_ratelimit\n", h2);
    let f = scratch("right.yaml", &right);
    assert_eq!(run(&["check", &f]), (0, format!("{f}: {NATIVE_AT}: {ok}\n"), String::new()));
}

#[test]
fn check_refuses_what_envoy_or_the_filter_would_refuse() {
    let policy = format!(r#"{{"version":"1","gateway":{{{KEY}}}}}"#);
    let f = scratch("name.yaml", &native(&policy, "mcp-policy", &["upstream"], ""));
    assert_eq!(
        run(&["check", &f]),
        (
            1,
            String::new(),
            format!(
                "{f}: {NATIVE_AT}: invalid policy at . (the whole document): filter_name is \
                 \"mcp-policy\"; this module serves filter_name \"mcp_policy\"\n"
            )
        )
    );
    // A repeated name: named, with its two places in the policy text.
    let dup = format!(r#"{{"version":"1","tools":{{"a":{{}},"a":{{}}}},"gateway":{{{KEY}}}}}"#);
    let f = scratch("dup.yaml", &native(&dup, "mcp_policy", &["upstream"], ""));
    let (status, out, err) = run(&["check", &f]);
    assert_eq!((status, out.as_str()), (1, ""));
    assert!(
        err.starts_with(&format!(
            "{f}: {NATIVE_AT}: invalid policy at . (the whole document): not a strict \
             JSON document: duplicate object key \"a\" at line 1, column 32 of the policy text, first at line 1, column 25\n"
        )),
        "{err}"
    );
    // The wasm VM sees only the variables listed for it.
    let wasm = shipped_wasm()
        .replace("environment_variables: {host_env_keys: [MCPF_SESSION_KEY]}", "environment_variables: {}");
    let f = scratch("vm-env.yaml", &wasm);
    let at = format!("{f}: listener mcp_ingress, http filter mcp_policy (wasm)");
    let (status, _, err) = run(&["check", &f]);
    assert_eq!(status, 1);
    assert!(
        err.ends_with(&format!(
            "{at}: gateway.session_key: the wasm VM does not see MCPF_SESSION_KEY: add it to \
             vm_config.environment_variables.host_env_keys (or key_values), or Envoy refuses the policy at startup\n"
        )),
        "{err}"
    );
    // A .yaml file is read as Envoy's, whatever it holds: a policy is JSON.
    let f = scratch("broken.yaml", "static_resources: [\n");
    assert_eq!(
        run(&["check", &f]),
        (
            1,
            String::new(),
            format!(
                "{f}: not an Envoy configuration: not YAML: while parsing a node, did not find expected node \
                 content at byte 20 line 2 column 1\n"
            )
        )
    );
    let f = scratch("other.yml", "a: 1\n");
    assert_eq!(
        run(&["check", &f]),
        (
            1,
            String::new(),
            format!(
                "{f}: not an Envoy configuration: its top level has none of static_resources, dynamic_resources, \
                 resources, admin, node (a policy is JSON, not YAML)\n"
            )
        )
    );
    // A tests file: says how to run it.
    assert_eq!(
        run(&["check", "envoy/policy.tests.yaml"]),
        (
            1,
            String::new(),
            "envoy/policy.tests.yaml: this is a tests file, not a policy or an Envoy configuration: run it with \
             mcp-policy test POLICY.json envoy/policy.tests.yaml\n"
                .to_owned()
        )
    );
    let f = scratch("none.yaml", "admin: {}\nstatic_resources: {}\n");
    assert_eq!(
        run(&["check", &f]),
        (
            1,
            String::new(),
            format!(
                "{f}: no mcp_policy filter in this Envoy configuration (a wasm filter whose root_id or code names \
                 mcp_policy, or a dynamic_modules filter of the module mcp_policy_native)\n"
            )
        )
    );
}

/// Envoy hands the native filter a google.protobuf.Struct as JSON, and a wasm filter as protobuf
/// bytes, which it refuses.
#[test]
fn check_reads_a_policy_given_as_a_struct() {
    let yaml = native("{}", "mcp_policy", &["upstream"], "").replace(
        "                \"@type\": type.googleapis.com/google.protobuf.StringValue\n                value: '{}'\n",
        "                \"@type\": type.googleapis.com/google.protobuf.Struct\n                value: {version: \"1\", \
         default: allow, gateway: {session_key: {current: 0123456789abcdef0123456789abcdef}}}\n",
    );
    let f = scratch("struct.yaml", &yaml);
    assert_eq!(
        run(&["check", &f]),
        (0, format!("{f}: {NATIVE_AT}: ok: version 1, default allow, 0 tool rules, 0 limits\n"), String::new())
    );
    let wasm = shipped_wasm();
    let at = wasm.find("                configuration:\n").unwrap();
    let end = wasm.find("          # 2. Holds the request").unwrap();
    let wasm = format!(
        "{}                configuration:\n                  \"@type\": type.googleapis.com/google.protobuf.Struct\n\
         \x20                 value: {{version: \"1\"}}\n{}",
        &wasm[..at],
        &wasm[end..]
    );
    let f = scratch("struct-wasm.yaml", &wasm);
    assert_eq!(
        run(&["check", &f]),
        (
            1,
            String::new(),
            format!(
                "{f}: listener mcp_ingress, http filter mcp_policy (wasm): invalid policy at . (the whole document): the \
                 plugin configuration (configuration) is a google.protobuf.Struct, which Envoy hands a wasm filter as \
                 protobuf bytes: give it a google.protobuf.StringValue whose value is the policy JSON\n"
            )
        )
    );
}

/// A `.yaml` file is read as Envoy reads it, which matters for a Struct policy, handed to the
/// module as the JSON of what Envoy read: a plain `yes` is a boolean and `10.0` a string, `0x10` is
/// 16, a repeated key keeps its last value, and a second document is not read. Each case below was
/// loaded in Envoy 1.40 with the module, with the same outcome.
#[test]
fn check_reads_yaml_scalars_as_envoy_does() {
    let with = |value: &str| {
        let yaml = native("{}", "mcp_policy", &["upstream"], "").replace(
            "                \"@type\": type.googleapis.com/google.protobuf.StringValue\n                value: '{}'\n",
            &format!(
                "                \"@type\": type.googleapis.com/google.protobuf.Struct\n                value: {{version: \"1\", \
                 gateway: {{session_key: {{current: 0123456789abcdef0123456789abcdef}}}}, {value}}}\n"
            ),
        );
        scratch("scalars.yaml", &yaml)
    };
    let refused = |f: &str, why: &str| (1, String::new(), format!("{f}: {NATIVE_AT}: invalid policy at {why}\n"));
    let f = with("hide: [yes]");
    assert_eq!(run(&["check", &f]), refused(&f, "hide[0]: invalid type: boolean `true`, expected a string"));
    let f = with("tools: {t: {limits: [{counter: c, window: minute, max: 10.0}]}}");
    assert_eq!(run(&["check", &f]), refused(&f, "tools.t.limits[0].max: invalid type: string \"10.0\", expected u64"));
    let f = with("gateway: {max_body_bytes: 5000000000}, default: allow");
    assert_eq!(
        run(&["check", &f]).2,
        format!("{f}: {NATIVE_AT}: invalid policy at gateway.max_body_bytes: invalid type: string \"5000000000\", expected u64\n")
    );
    let f = with(
        "hide: [\"yes\", 'no', Off], default: deny, default: allow, tools: {t: {limits: [{counter: c, window: minute, max: 0x10}]}}",
    );
    assert_eq!(run(&["check", &f]), refused(&f, "hide[2]: invalid type: boolean `false`, expected a string"));
    let f = with("hide: [\"yes\", 'no'], default: deny, default: allow, tools: {t: {limits: [{counter: c, window: minute, max: 0x10}]}}");
    let two = format!("{}---\n}}}} not YAML [\n", std::fs::read_to_string(&f).unwrap());
    std::fs::write(&f, two).unwrap();
    assert_eq!(
        run(&["check", &f]),
        (0, format!("{f}: {NATIVE_AT}: ok: version 1, default allow, 1 tool rule, 1 limit\n"), String::new())
    );
    // Envoy applies no merge keys: `<<` is a field of that name, which its messages refuse.
    let merged = format!(
        "node: {{<<: {{id: a}}}}\n{}",
        native(&format!(r#"{{"version":"1","gateway":{{{KEY}}}}}"#), "mcp_policy", &["upstream"], "")
    );
    let f = scratch("merge.yaml", &merged);
    let (status, _, err) = run(&["check", &f]);
    assert_eq!(status, 1);
    assert!(
        err.starts_with(&format!(
            "{f}: node.<<: Envoy does not apply YAML merge keys; it reads `<<` as a field of that name, which a \
             typed configuration refuses: write the merged fields out\n"
        )),
        "{err}"
    );
}

/// A filter whose configuration comes by ECDS is noted, with its source; ADS alone delivers no
/// clusters; the rate limit service's cluster must speak HTTP/2.
#[test]
fn check_follows_ecds_cds_and_the_rate_limit_service_protocol() {
    for file in ["envoy/envoy-ecds.yaml", "envoy/envoy-dynamic-ecds.yaml"] {
        assert_eq!(
            run(&["check", file]),
            (
                0,
                String::new(),
                format!(
                    "{file}: listener mcp_ingress, http filter mcp_policy: note: its policy comes by ECDS from the file \
                     .run/mcp_policy.yaml: check that file too (mcp-policy check reads an ECDS file)\n"
                )
            ),
            "{file}"
        );
    }
    let policy = format!(
        r#"{{"version":"1","tools":{{"a":{{"limits":[{{"counter":"c","window":"minute","max":5}}]}}}},"gateway":{{{KEY},"rate_limit_service":{{"cluster":"rls"}}}}}}"#
    );
    let f = scratch(
        "ads-only.yaml",
        &native(&policy, "mcp_policy", &["upstream"], "dynamic_resources: {ads_config: {}}\n"),
    );
    let (status, _, err) = run(&["check", &f]);
    assert_eq!(status, 1);
    assert!(
        err.contains("no cluster \"rls\" in static_resources.clusters (defined: \"upstream\") and no CDS"),
        "{err}"
    );
    let f = scratch("rls-h1.yaml", &native(&policy, "mcp_policy", &["upstream", "rls"], ""));
    assert_eq!(
        run(&["check", &f]),
        (
            1,
            format!("{f}: {NATIVE_AT}: ok: version 1, default deny, 1 tool rule, 1 limit\n"),
            format!(
                "{f}: {NATIVE_AT}: gateway.rate_limit_service.cluster: cluster \"rls\" does \
                 not speak HTTP/2, which the rate limit service's gRPC needs (typed_extension_protocol_options: \
                 explicit_http_config: http2_protocol_options): every call that needs it would be refused\n"
            )
        )
    );
}

/// A filter wrapped in a TypedStruct, and one given as a config_discovery's default_config.
#[test]
fn check_reads_typed_structs_and_default_configs() {
    let base = native(
        r#"{"version":"1","default":"allow","gateway":{"session_key":{"current":"0123456789abcdef0123456789abcdef"}}}"#,
        "mcp_policy",
        &["upstream"],
        "",
    );
    let wrapped = base
        .replace(
            "              \"@type\": type.googleapis.com/envoy.extensions.filters.http.dynamic_modules.v3.DynamicModuleFilter\n",
            "              \"@type\": type.googleapis.com/xds.type.v3.TypedStruct\n              type_url: type.googleapis.com/envoy.extensions.filters.http.dynamic_modules.v3.DynamicModuleFilter\n              value:\n",
        )
        .replace("\n              dynamic_module_config", "\n                dynamic_module_config")
        .replace("\n              filter_name", "\n                filter_name")
        .replace("\n              filter_config:\n                \"@type\"", "\n                filter_config:\n                  \"@type\"")
        .replace("\n                value: '", "\n                  value: '");
    let f = scratch("typed-struct.yaml", &wrapped);
    assert_eq!(
        run(&["check", &f]),
        (0, format!("{f}: {NATIVE_AT}: ok: version 1, default allow, 0 tool rules, 0 limits\n"), String::new())
    );
}

/// A key the wasm VM is given in `key_values` is checked with that value, as the filter reads it.
#[test]
fn check_reads_a_wasm_key_given_in_key_values() {
    let shipped = shipped_wasm();
    let given = |key: &str| {
        shipped.replace(
            "environment_variables: {host_env_keys: [MCPF_SESSION_KEY]}",
            &format!("environment_variables: {{key_values: {{MCPF_SESSION_KEY: \"{key}\"}}}}"),
        )
    };
    let f = scratch("key-values-short.yaml", &given("short"));
    assert_eq!(
        run(&["check", &f]),
        (
            1,
            String::new(),
            format!(
                "{f}: listener mcp_ingress, http filter mcp_policy (wasm): invalid policy at \
                 gateway.session_key.current_env: the key must be at least 32 bytes\n"
            )
        )
    );
    let f = scratch("key-values.yaml", &given("0123456789abcdef0123456789abcdef"));
    let (status, out, err) = run(&["check", &f]);
    assert_eq!((status, err.as_str()), (0, ""), "{out}");
}
