//! `mcp-policy check ENVOY.yaml`: the policies of an Envoy configuration (a bootstrap, or an ECDS
//! file of `TypedExtensionConfig` resources), each checked where it sits, and what the filter will
//! need of the configuration around it that only shows at the first call otherwise: the clusters
//! the policy calls, and the wasm VM's view of a key's environment variable.
//!
//! Both builds are found: the wasm filter (`envoy.extensions.filters.http.wasm.v3.Wasm`, its
//! `root_id` or its code naming `mcp_policy`) and the native one (`DynamicModuleFilter` of a module
//! named `mcp_policy…`). The native build also takes the policy as a `google.protobuf.Struct`.

use std::collections::{BTreeMap, BTreeSet};

use serde_norway::{Mapping, Value};

use super::check::{key_from_env, key_vars, load_bytes_with, summary_of, unset_key_note, warning_lines};
use super::{Report, INVALID_POLICY};

const WASM: &str = "type.googleapis.com/envoy.extensions.filters.http.wasm.v3.Wasm";
const NATIVE: &str = "type.googleapis.com/envoy.extensions.filters.http.dynamic_modules.v3.DynamicModuleFilter";
const STRING_VALUE: &str = "type.googleapis.com/google.protobuf.StringValue";
const STRUCT: &str = "type.googleapis.com/google.protobuf.Struct";
/// Top-level members of an Envoy bootstrap or an ECDS file that no policy has.
const ENVOY_KEYS: [&str; 5] = ["static_resources", "dynamic_resources", "resources", "admin", "node"];

/// The document as an Envoy configuration, if it is one: a YAML (or JSON) mapping with a member
/// only Envoy's files have. A policy is never one (its members are the policy's). A file named
/// `.yaml` or `.yml` is always read as one, since a policy is JSON: `Err` says why it is not.
pub fn envoy_config(path: &str, bytes: &[u8]) -> Result<Option<Value>, String> {
    let named = path.ends_with(".yaml") || path.ends_with(".yml");
    // A `.yaml` file is read as Envoy reads it (`envoy_yaml`); another is JSON to Envoy, read here
    // as YAML, of which JSON is part. Neither applies merge keys (`<<: *base`): Envoy reads `<<`
    // as a field of that name (`check` refuses each).
    let doc = if named {
        super::envoy_yaml::load(&String::from_utf8_lossy(bytes))
    } else {
        serde_norway::from_slice::<Value>(bytes).map_err(|e| e.to_string())
    };
    let doc: Value = match doc {
        Ok(doc) => doc,
        Err(e) if named => return Err(format!("{path}: not an Envoy configuration: not YAML: {e}")),
        Err(_) => return Ok(None),
    };
    let envoy = doc.as_mapping().is_some_and(|map| ENVOY_KEYS.iter().any(|k| map.contains_key(*k)));
    match (envoy, named) {
        (true, _) => Ok(Some(doc)),
        (false, true) if doc.as_mapping().is_some_and(super::check::is_tests_file) => {
            Err(format!("{path}: this is a tests file, not a policy or an Envoy configuration: run it with mcp-policy test POLICY.json {path}"))
        }
        (false, true) => Err(format!(
            "{path}: not an Envoy configuration: its top level has none of {} (a policy is JSON, not YAML)",
            ENVOY_KEYS.join(", ")
        )),
        (false, false) => Ok(None),
    }
}

/// One filter of this project found in the configuration.
struct Filter {
    /// Where it is, for each line about it: `listener NAME, http filter NAME (native)`.
    place: String,
    /// The policy text, or why there is none.
    policy: Result<Vec<u8>, String>,
    /// The wasm VM's environment (`vm_config.environment_variables`): the variables it takes from
    /// Envoy's (`host_env_keys`) and those given their value here (`key_values`, checked with that
    /// value). `None` for the native build, which reads Envoy's own.
    vm_env: Option<(BTreeSet<String>, BTreeMap<String, String>)>,
    /// Its configuration comes by ECDS (`config_discovery`), from this source: the policy is in
    /// that file, or with the management server.
    ecds: Option<String>,
}

/// Check every policy of the Envoy configuration `doc` read from `file` into `report`.
pub fn check(file: &str, doc: &Value, report: &mut Report) {
    let mut found = Vec::new();
    walk(doc, "", &mut found);
    if found.is_empty() {
        let why = format!(
            "{file}: no mcp_policy filter in this Envoy configuration (a wasm filter whose root_id or code \
             names mcp_policy, or a dynamic_modules filter of the module mcp_policy_native)"
        );
        report.fail(&why, INVALID_POLICY);
        return;
    }
    let mut merges = Vec::new();
    merge_keys(doc, "", &mut merges);
    for at in merges {
        let why = format!(
            "{file}: {at}<<: Envoy does not apply YAML merge keys; it reads `<<` as a field of that name, which \
             a typed configuration refuses: write the merged fields out"
        );
        report.fail(&why, INVALID_POLICY);
    }
    let clusters = Clusters::of(doc);
    for filter in found {
        let label = format!("{file}: {}", filter.place);
        if let Some(source) = &filter.ecds {
            report.stderr.push_str(&format!(
                "{label}: note: its policy comes by ECDS from {source}: check that file too (mcp-policy check \
                 reads an ECDS file)\n"
            ));
            continue;
        }
        let bytes = match filter.policy {
            Ok(bytes) => bytes,
            Err(why) => {
                report.fail(&format!("{label}: invalid policy at . (the whole document): {why}"), INVALID_POLICY);
                continue;
            }
        };
        // A key the wasm VM is given in `key_values` is checked with that value, as the filter reads it.
        let given = |name: &str| filter.vm_env.as_ref().and_then(|(_, values)| values.get(name).cloned());
        let set = match load_bytes_with(&label, &bytes, &|name| given(name).or_else(|| key_from_env(name))) {
            Ok(set) => set,
            Err(f) => {
                report.fail(&f.message, f.status);
                continue;
            }
        };
        let p = set.plain().unwrap_or_else(|| set.base());
        report.stdout.push_str(&format!("{label}: {}\n", summary_of(&set)));
        report.stderr.push_str(&warning_lines(&label, &set));
        // Each cluster the policy calls, and whether it carries gRPC (HTTP/2 upstream).
        let named = [
            ("gateway.approval.cluster", p.gateway.approval.as_ref().map(|a| a.cluster.as_str()), false),
            (
                "gateway.rate_limit_service.cluster",
                p.gateway.rate_limit_service.as_ref().map(|r| r.cluster.as_str()),
                true,
            ),
        ];
        for (path, cluster, grpc) in named {
            let Some(cluster) = cluster else { continue };
            match clusters.judge(cluster) {
                Known::Yes if grpc && !clusters.h2.contains(cluster) => report.fail(
                    &format!(
                        "{label}: {path}: cluster \"{cluster}\" does not speak HTTP/2, which the rate limit service's \
                         gRPC needs (typed_extension_protocol_options: explicit_http_config: \
                         http2_protocol_options): every call that needs it would be refused"
                    ),
                    INVALID_POLICY,
                ),
                Known::Yes | Known::Unseen => {}
                Known::ByCds => report.stderr.push_str(&format!(
                    "{label}: note: {path}: cluster \"{cluster}\" is not among static_resources.clusters; \
                     it must come from CDS, or every call that needs it is refused\n"
                )),
                Known::No => report.fail(
                    &format!(
                        "{label}: {path}: no cluster \"{cluster}\" in static_resources.clusters (defined: {}) and \
                         no CDS to deliver one: Envoy would start, and refuse every call that needs it",
                        clusters.listed()
                    ),
                    INVALID_POLICY,
                ),
            }
        }
        for (member, name) in key_vars(&bytes) {
            match &filter.vm_env {
                // Given its value here: checked with it above.
                Some((host, values)) if !host.contains(&name) && values.contains_key(&name) => {}
                Some((host, _)) if !host.contains(&name) => report.fail(
                    &format!(
                        "{label}: gateway.session_key: the wasm VM does not see {name}: add it to \
                         vm_config.environment_variables.host_env_keys (or key_values), or Envoy refuses \
                         the policy at startup"
                    ),
                    INVALID_POLICY,
                ),
                // A variable Envoy passes on must be set in Envoy's environment: a note when it is not set here.
                _ => report.stderr.push_str(&unset_key_note(&label, member, &name)),
            }
        }
    }
}

/// Every filter of this project under `v`; `listener` names the listener (or ECDS resource) above.
fn walk(v: &Value, listener: &str, found: &mut Vec<Filter>) {
    match v {
        Value::Sequence(items) => items.iter().for_each(|item| walk(item, listener, found)),
        Value::Mapping(map) => {
            let name = text(map, "name");
            // A listener has an address; an ECDS resource is a TypedExtensionConfig.
            let listener = match name {
                Some(n) if map.contains_key("address") || map.contains_key("filter_chains") => format!("listener {n}"),
                Some(n) if text(map, "@type").is_some_and(|t| t.ends_with("TypedExtensionConfig")) => {
                    format!("ECDS resource {n}")
                }
                _ => listener.to_owned(),
            };
            let at = |place: String| if listener.is_empty() { place } else { format!("{listener}, {place}") };
            if let Some(filter) = map.get("typed_config").and_then(Value::as_mapping).and_then(|tc| ours(tc, name)) {
                found.push(Filter { place: at(filter.place), ..filter });
                return;
            }
            if let Some(cd) = map.get("config_discovery").and_then(Value::as_mapping) {
                // Its default configuration, used until ECDS delivers one, is checked as any other.
                let default = cd.get("default_config").and_then(Value::as_mapping).and_then(|dc| ours(dc, name));
                let mine = default.is_some() || name.is_some_and(|n| n.contains("mcp_policy"));
                let types = cd.get("type_urls").and_then(Value::as_sequence).into_iter().flatten();
                if mine && types.filter_map(Value::as_str).any(|t| t == WASM || t == NATIVE) {
                    let source = cd.get("config_source").and_then(|c| c.get("path_config_source"));
                    let source = source.and_then(|p| p.get("path")).and_then(Value::as_str);
                    let place = at(format!("http filter {}", name.unwrap_or("(unnamed)")));
                    let source = source.map_or("the management server".to_owned(), |p| format!("the file {p}"));
                    found.push(Filter { place, policy: Ok(Vec::new()), vm_env: None, ecds: Some(source) });
                }
                if let Some(filter) = default {
                    found.push(Filter { place: at(format!("{} (default_config)", filter.place)), ..filter });
                }
                return;
            }
            map.values().for_each(|value| walk(value, &listener, found));
        }
        _ => {}
    }
}

/// The filter whose `typed_config` is `tc`, if it is this project's; `name` is the filter's name.
fn ours(tc: &Mapping, name: Option<&str>) -> Option<Filter> {
    let kind = text(tc, "@type")?;
    if kind.ends_with("udpa.type.v1.TypedStruct") || kind.ends_with("xds.type.v3.TypedStruct") {
        // The configuration as a Struct of its fields, its type in `type_url`.
        let mut inner = tc.get("value").and_then(Value::as_mapping).cloned().unwrap_or_default();
        inner.insert("@type".into(), tc.get("type_url")?.clone());
        return ours(&inner, name);
    }
    let name = name.unwrap_or("(unnamed)");
    match kind {
        WASM => {
            let config = tc.get("config")?.as_mapping()?;
            let vm = config.get("vm_config").and_then(Value::as_mapping);
            let code = vm.and_then(|vm| vm.get("code")).map(|c| serde_norway::to_string(c).unwrap_or_default());
            let mine = text(config, "root_id") == Some("mcp_policy") || code.is_some_and(|c| c.contains("mcp_policy"));
            if !mine {
                return None;
            }
            let env = vm.and_then(|vm| vm.get("environment_variables")).and_then(Value::as_mapping);
            let (mut host, mut values) = (BTreeSet::new(), BTreeMap::new());
            if let Some(env) = env {
                let keys = env.get("host_env_keys").and_then(Value::as_sequence).into_iter().flatten();
                host.extend(keys.filter_map(Value::as_str).map(str::to_owned));
                let given = env.get("key_values").and_then(Value::as_mapping).into_iter().flatten();
                values.extend(given.filter_map(|(k, v)| Some((k.as_str()?.to_owned(), v.as_str()?.to_owned()))));
            }
            let vm_env = (host, values);
            let policy = policy_of(config.get("configuration"), "the plugin configuration (configuration)", false);
            Some(Filter { place: format!("http filter {name} (wasm)"), policy, vm_env: Some(vm_env), ecds: None })
        }
        NATIVE => {
            let module = tc.get("dynamic_module_config").and_then(Value::as_mapping).and_then(|m| text(m, "name"))?;
            if !module.contains("mcp_policy") {
                return None;
            }
            let policy = match text(tc, "filter_name") {
                Some("mcp_policy") => policy_of(tc.get("filter_config"), "filter_config", true),
                other => Err(format!(
                    "filter_name is {}; this module serves filter_name \"mcp_policy\"",
                    other.map_or("missing".to_owned(), |n| format!("\"{n}\""))
                )),
            };
            Some(Filter { place: format!("http filter {name} (native)"), policy, vm_env: None, ecds: None })
        }
        _ => None,
    }
}

/// The policy text of a `StringValue` field, or of a `Struct` one where `structs` (the native
/// build: Envoy hands a module a `Struct` as JSON, and a wasm VM as protobuf bytes, which the filter
/// refuses); `what` names the field for an error.
fn policy_of(field: Option<&Value>, what: &str, structs: bool) -> Result<Vec<u8>, String> {
    let Some(field) = field.and_then(Value::as_mapping) else {
        return Err(format!("{what} is missing: give it a google.protobuf.StringValue whose value is the policy JSON"));
    };
    match (text(field, "@type"), field.get("value")) {
        (Some(STRING_VALUE), Some(Value::String(policy))) => Ok(policy.clone().into_bytes()),
        (Some(STRUCT), _) if !structs => Err(format!(
            "{what} is a google.protobuf.Struct, which Envoy hands a wasm filter as protobuf bytes: give it a \
             google.protobuf.StringValue whose value is the policy JSON"
        )),
        (Some(STRUCT), Some(value @ Value::Mapping(_))) => serde_json::to_vec(value).map_err(|e| e.to_string()),
        (Some(t), _) if t != STRING_VALUE && t != STRUCT => {
            Err(format!("{what} is a {t}: give it a google.protobuf.StringValue whose value is the policy JSON"))
        }
        _ => Err(format!("{what} has no value: give it the policy JSON as its value")),
    }
}

fn text<'a>(map: &'a Mapping, key: &str) -> Option<&'a str> {
    map.get(key).and_then(Value::as_str)
}

/// The clusters an Envoy configuration defines, and whether CDS may add others.
struct Clusters {
    names: BTreeSet<String>,
    /// Those set to speak HTTP/2 upstream, as gRPC needs.
    h2: BTreeSet<String>,
    cds: bool,
    /// The file defines no clusters at all and no CDS: an ECDS file, whose Envoy is elsewhere.
    unseen: bool,
}

enum Known {
    Yes,
    ByCds,
    No,
    Unseen,
}

impl Clusters {
    fn of(doc: &Value) -> Clusters {
        let list = doc.get("static_resources").and_then(|s| s.get("clusters")).and_then(Value::as_sequence);
        let named = list.into_iter().flatten().filter_map(|c| Some((c.get("name")?.as_str()?, c)));
        let (mut names, mut h2) = (BTreeSet::new(), BTreeSet::new());
        for (name, cluster) in named {
            names.insert(name.to_owned());
            // `explicit_http_config.http2_protocol_options` (or the older `http2_protocol_options`).
            if serde_norway::to_string(cluster).is_ok_and(|c| c.contains("http2_protocol_options")) {
                h2.insert(name.to_owned());
            }
        }
        let dynamic = doc.get("dynamic_resources");
        // `ads_config` alone is the transport, not a request for clusters.
        let cds = dynamic.is_some_and(|d| d.get("cds_config").is_some());
        let unseen = doc.get("static_resources").is_none() && dynamic.is_none();
        Clusters { names, h2, cds, unseen }
    }

    fn judge(&self, cluster: &str) -> Known {
        if self.names.contains(cluster) {
            Known::Yes
        } else if self.unseen {
            Known::Unseen
        } else if self.cds {
            Known::ByCds
        } else {
            Known::No
        }
    }

    fn listed(&self) -> String {
        if self.names.is_empty() {
            return "none".to_owned();
        }
        self.names.iter().map(|n| format!("\"{n}\"")).collect::<Vec<_>>().join(", ")
    }
}

/// The places (`path.` before `<<`) of every mapping that has a `<<` key.
fn merge_keys(v: &Value, path: &str, out: &mut Vec<String>) {
    match v {
        Value::Mapping(map) => {
            if map.contains_key("<<") {
                out.push(path.to_owned());
            }
            for (k, v) in map {
                merge_keys(v, &format!("{path}{}.", k.as_str().unwrap_or("?")), out);
            }
        }
        Value::Sequence(items) => {
            for (i, v) in items.iter().enumerate() {
                merge_keys(v, &format!("{}[{i}].", path.trim_end_matches('.')), out);
            }
        }
        _ => {}
    }
}
