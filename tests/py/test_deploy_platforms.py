"""Tier 1 (no Envoy), deploy: the platform recipes beyond the base, read as test_deploy_manifests.py
reads the base: the native build's manifests, the refusal of header names with '_' on both
platforms, the rate limit service's cluster on each, and the identity overlays (deploy/istio/identity,
deploy/envoy-gateway/identity).
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
import yaml

from testkit.manifests import (DEPLOY, ISTIO_NATIVE, EG_NATIVE, SEED, by_kind, docs, listed, run_validator,
                            without_approval_cluster, fqdn)
from testkit.native import STRIP_STAT_PREFIX
from testkit.paths import REPO_ROOT


# ----------------------------------------------------------------------------------- the native build


def native_istio_patch() -> dict:
    """The one patch of deploy/istio/native's EnvoyFilter: the module (it needs no buffer filter)."""
    (module,) = by_kind("EnvoyFilter", "mcp-policy-native", ISTIO_NATIVE)["spec"]["configPatches"]
    return module


def test_native_manifests_carry_the_seed_policy_without_the_rate_limit_service():
    """The native manifests carry the seed policy (limits counted per proxy, no
    `gateway.rate_limit_service`), and the approval cluster of their platform's wasm manifest."""
    module = native_istio_patch()
    istio = json.loads(module["patch"]["value"]["typed_config"]["filter_config"]["value"])
    (dm,) = by_kind("EnvoyExtensionPolicy", variant=EG_NATIVE)["spec"]["dynamicModule"]
    eg = dm["config"]
    for native in (istio, eg):
        assert "rate_limit_service" not in native["gateway"]
        assert without_approval_cluster(native) == without_approval_cluster(SEED)
    assert istio["gateway"]["approval"] == by_kind("WasmPlugin")["spec"]["pluginConfig"]["gateway"]["approval"]
    wasm_eg = by_kind("EnvoyExtensionPolicy", variant="envoy-gateway")["spec"]["wasm"][0]["config"]
    assert eg["gateway"]["approval"] == wasm_eg["gateway"]["approval"]


def test_native_istio_filter_loads_the_module_before_the_router_without_a_buffer():
    module = native_istio_patch()
    wasm_buffer = by_kind("EnvoyFilter", "mcp-policy-buffer", "istio")["spec"]["configPatches"][0]
    # Right before the router, where the wasm build's buffer goes: the module holds the request itself.
    assert module["applyTo"] == "HTTP_FILTER" and module["patch"]["operation"] == "INSERT_BEFORE"
    assert module["match"] == wasm_buffer["match"]
    tc = module["patch"]["value"]["typed_config"]
    assert module["patch"]["value"]["name"] == "mcp_policy"
    assert tc["@type"] == "type.googleapis.com/envoy.extensions.filters.http.dynamic_modules.v3.DynamicModuleFilter"
    assert (tc["filter_name"], tc["filter_config"]["@type"]) == ("mcp_policy", "type.googleapis.com/google.protobuf.StringValue")
    assert tc["dynamic_module_config"] == {"name": "mcp_policy_native", "do_not_close": True,
                                           "module": {"local": {"filename": "/etc/istio/modules/libmcp_policy_native.so"}}}
    ef = by_kind("EnvoyFilter", "mcp-policy-native", ISTIO_NATIVE)
    plugin = by_kind("WasmPlugin", variant="istio")
    assert ef["spec"]["workloadSelector"] == {"labels": plugin["spec"]["selector"]["matchLabels"]}
    assert ef["metadata"]["namespace"] == plugin["metadata"]["namespace"]


def test_native_envoy_gateway_registers_mounts_and_orders_the_module():
    proxy = by_kind("EnvoyProxy", variant=EG_NATIVE)["spec"]
    (dm,) = by_kind("EnvoyExtensionPolicy", variant=EG_NATIVE)["spec"]["dynamicModule"]
    (entry,) = proxy["dynamicModules"]
    assert (dm["name"], dm["filterName"]) == (entry["name"], "mcp_policy")
    assert entry["doNotClose"] is True and entry["source"]["type"] == "Local"
    path = Path(entry["source"]["local"]["path"])
    assert path.name == "libmcp_policy_native.so"
    dep = proxy["provider"]["kubernetes"]["envoyDeployment"]
    (mount,) = dep["container"]["volumeMounts"]
    assert (Path(mount["mountPath"]), mount["readOnly"]) == (path.parent, True)
    (init,) = dep["initContainers"]
    (init_mount,) = init["volumeMounts"]
    assert init_mount["name"] == mount["name"] and init["command"][-1] == f"{init_mount['mountPath']}/{path.name}"
    assert [v["name"] for v in dep["pod"]["volumes"]] == [mount["name"]]
    # A module built for Envoy 1.40 loads in 1.40 and 1.41 only.
    assert dep["container"]["image"].rsplit(":", 1)[1].startswith(("distroless-v1.40.", "distroless-v1.41."))
    # No buffer filter to order: the module holds the request itself, and native/ lists no
    # BackendTrafficPolicy (the wasm build's request buffer).
    assert "filterOrder" not in proxy
    assert [d for _, d in docs(listed(EG_NATIVE)) if d["kind"] == "BackendTrafficPolicy"] == []
    # The runtime flag that prints the module's stats under the wasm build's names in /stats/prometheus.
    assert proxy["bootstrap"]["type"] == "Merge"
    assert yaml.safe_load(proxy["bootstrap"]["value"]) == {"layered_runtime": {"layers": [
        {"name": "mcp-policy-native", "static_layer": {STRIP_STAT_PREFIX: True}}]},
        "stats_config": {"stats_tags": recipe_tags()}}
    # The Gateway of ../common uses this EnvoyProxy, by name.
    gw = by_kind("Gateway", variant=EG_NATIVE)
    assert gw["spec"]["infrastructure"]["parametersRef"]["name"] == by_kind("EnvoyProxy", variant=EG_NATIVE)["metadata"]["name"]
    wasm_env = by_kind("EnvoyProxy", variant="envoy-gateway")["spec"]["provider"]["kubernetes"]["envoyDeployment"]
    assert dep["container"]["env"] == wasm_env["container"]["env"]


def recipe_tags() -> list[dict]:
    """The per-tool counter's tags of deploy/istio/common's bootstrap override (labelled in real Envoy
    on both builds: tests/envoy/test_deploy_stats_tags.py)."""
    cm = by_kind("ConfigMap", "mcp-policy-bootstrap", "istio")
    return json.loads(cm["data"]["custom_bootstrap.json"])["stats_config"]["stats_tags"]


def test_every_platform_recipe_tags_the_per_tool_counter_alike():
    """The tags that give mcp_policy_tool_decisions_total its mcp_tool and mcp_decision labels: the
    same in Istio's bootstrap override (both builds) and in both EnvoyProxy bootstraps, and each
    pattern the shipped Envoy's own for one build or the other."""
    tags = recipe_tags()
    assert [t["tag_name"] for t in tags] == ["mcp_tool", "mcp_decision"]
    assert by_kind("ConfigMap", "mcp-policy-bootstrap", ISTIO_NATIVE) == by_kind("ConfigMap", "mcp-policy-bootstrap", "istio")
    for variant in ("envoy-gateway", EG_NATIVE):
        value = yaml.safe_load(by_kind("EnvoyProxy", variant=variant)["spec"]["bootstrap"]["value"])
        assert value["stats_config"] == {"stats_tags": tags}, variant
    for name, prefix in (("envoy.yaml", "wasmcustom"), ("envoy-dynamic.yaml", "dynamicmodulescustom")):
        shipped = yaml.safe_load((REPO_ROOT / "envoy" / name).read_text(encoding="utf-8"))["stats_config"]["stats_tags"]
        ours = [{**t, "regex": t["regex"].replace("(?:wasmcustom|dynamicmodulescustom)", prefix)} for t in tags]
        assert ours == shipped, name


# ----------------------------------------------------------------------------------- header names with '_'


def test_envoy_gateway_rejects_header_names_with_underscores_on_the_gateway():
    """A request with `x_mcp_grant` or `authorization` spelled with '_' is refused by Envoy, as in
    envoy/envoy.yaml (headers_with_underscores_action: REJECT_REQUEST), before the filter runs."""
    ctp = by_kind("ClientTrafficPolicy", variant="envoy-gateway")
    gw = by_kind("Gateway", variant="envoy-gateway")
    assert ctp["metadata"] == {"name": "mcp-reject-underscore-headers", "namespace": gw["metadata"]["namespace"]}
    assert ctp["spec"] == {
        "targetRefs": [{"group": "gateway.networking.k8s.io", "kind": "Gateway", "name": gw["metadata"]["name"]}],
        "headers": {"withUnderscoresAction": "RejectRequest",
                    # The verified token's payload header: only jwt_authn may write it (identity/).
                    "earlyRequestHeaders": {"remove": ["x-jwt-payload"]}}}


def test_istio_rejects_header_names_with_underscores_on_the_inbound_listener():
    ef = by_kind("EnvoyFilter", "mcp-reject-underscore-headers", "istio")
    buffer = by_kind("EnvoyFilter", "mcp-policy-buffer", "istio")
    plugin = by_kind("WasmPlugin", variant="istio")
    assert ef["metadata"]["namespace"] == buffer["metadata"]["namespace"] == plugin["metadata"]["namespace"]
    # The same workloads and listener as the filter and its buffer.
    assert ef["spec"]["workloadSelector"] == buffer["spec"]["workloadSelector"] == {
        "labels": plugin["spec"]["selector"]["matchLabels"]}
    buffer_listener = buffer["spec"]["configPatches"][0]["match"]["listener"]
    assert ef["spec"]["configPatches"] == [{
        "applyTo": "NETWORK_FILTER",
        "match": {"context": "SIDECAR_INBOUND", "listener": {
            "portNumber": buffer_listener["portNumber"],
            "filterChain": {"filter": {"name": "envoy.filters.network.http_connection_manager"}}}},
        "patch": {"operation": "MERGE", "value": {"typed_config": {
            "@type": "type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager",
            "common_http_protocol_options": {"headers_with_underscores_action": "REJECT_REQUEST"}}}}}]
    assert buffer_listener["portNumber"] == 8000


def test_crd_validator_refuses_a_bad_underscores_action(tmp_path):
    ctp = (DEPLOY / "envoy-gateway" / "common" / "clienttrafficpolicy.yaml").read_text(encoding="utf-8")
    assert "withUnderscoresAction: RejectRequest\n" in ctp
    (tmp_path / "enum.yaml").write_text(ctp.replace("withUnderscoresAction: RejectRequest",
                                                    "withUnderscoresAction: REJECT_REQUEST"))
    done = run_validator([tmp_path / "enum.yaml"])
    out = done.stdout
    assert done.returncode == 1, out
    assert ("enum.yaml ClientTrafficPolicy/mcp-reject-underscore-headers: schema: /spec/headers/withUnderscoresAction "
            "must be equal to one of the allowed values") in out, out
    assert out.splitlines()[-1] == "deploy-validate: 0 of 1 resources valid"


# ----------------------------------------------------------------------------------- the rate limit service's cluster


def istio_protocol(port: dict) -> str:
    """The protocol Istio gives a Service port (pkg/config/kube/conversion.go, ConvertProtocol, Istio
    1.29): appProtocol first (kubernetes.io/h2c is HTTP2), else the port name's prefix before '-'."""
    app = port.get("appProtocol")
    if app is not None:
        if app == "kubernetes.io/h2c":
            return "HTTP2"
        if app in ("kubernetes.io/ws", "kubernetes.io/wss"):
            return {"kubernetes.io/ws": "HTTP", "kubernetes.io/wss": "HTTPS"}[app]
        name = app
    else:
        name = port.get("name", "")
    if name.lower().startswith("grpc-web"):
        return "GRPC-Web"
    prefix = name.split("-", 1)[0].lower()
    return {"grpc": "GRPC", "http2": "HTTP2", "http": "HTTP", "tcp": "TCP", "https": "HTTPS",
            "tls": "TLS"}.get(prefix, "UnsupportedProtocol")


def test_istio_protocol_rule_tells_http2_from_the_rest():
    assert istio_protocol({"name": "grpc-rls", "appProtocol": "kubernetes.io/h2c"}) == "HTTP2"
    assert istio_protocol({"name": "tcp-rls", "appProtocol": "grpc"}) == "GRPC"
    assert istio_protocol({"name": "grpc-rls"}) == "GRPC"
    assert istio_protocol({"name": "http-rls"}) == "HTTP"        # HTTP/1.1: a gRPC callout would fail
    assert istio_protocol({"name": "rls"}) == "UnsupportedProtocol"  # sniffed: not HTTP/2 either
    assert istio_protocol({"name": "grpc-x", "appProtocol": "http"}) == "HTTP"  # appProtocol wins


def test_istio_rate_limit_service_is_the_http2_outbound_cluster_of_mcp_ratelimit():
    rls = by_kind("WasmPlugin")["spec"]["pluginConfig"]["gateway"]["rate_limit_service"]
    svc = by_kind("Service", "mcp-ratelimit")
    (port,) = svc["spec"]["ports"]
    # pilot/pkg/model/service.go BuildSubsetKey: outbound|PORT|SUBSET|HOST; HTTP/2 options only for
    # HTTP2/GRPC ports (cluster_builder.go setUpstreamProtocol -> setH2Options).
    # The authority is the Service's host: '|' is not valid in an :authority (HTTP/2 servers reset
    # the stream; tests/envoy/test_deploy_istio.py shows both).
    assert rls == {"cluster": f"outbound|{port['port']}||{fqdn(svc)}", "authority": fqdn(svc), "domain": "mcp",
                   "timeout": "250ms", "failure_mode": "deny"}
    assert rls["cluster"] == "outbound|8081||mcp-ratelimit.mcp-system.svc.cluster.local"
    assert istio_protocol(port) in ("HTTP2", "GRPC")
    dep = by_kind("Deployment", "mcp-ratelimit")
    (c,) = dep["spec"]["template"]["spec"]["containers"]
    assert {p["name"]: p["containerPort"] for p in c["ports"]}[port["targetPort"]] == 8081


def test_envoy_gateway_rate_limit_cluster_is_http2_and_points_at_mcp_ratelimit():
    rls = by_kind("EnvoyExtensionPolicy", variant="envoy-gateway")["spec"]["wasm"][0]["config"]["gateway"]["rate_limit_service"]
    assert rls == {"cluster": "mcp_ratelimit", "domain": "mcp", "timeout": "250ms", "failure_mode": "deny"}
    epp = by_kind("EnvoyPatchPolicy", "mcp-ratelimit-cluster")
    assert epp["spec"]["targetRef"] == {"group": "gateway.networking.k8s.io", "kind": "Gateway",
                                        "name": by_kind("Gateway")["metadata"]["name"]}
    (patch,) = epp["spec"]["jsonPatches"]
    assert (patch["type"], patch["name"]) == ("type.googleapis.com/envoy.config.cluster.v3.Cluster", rls["cluster"])
    assert (patch["operation"]["op"], patch["operation"]["path"]) == ("add", "")
    cluster = patch["operation"]["value"]
    assert cluster["name"] == cluster["load_assignment"]["cluster_name"] == rls["cluster"]
    assert cluster["typed_extension_protocol_options"] == {"envoy.extensions.upstreams.http.v3.HttpProtocolOptions": {
        "@type": "type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions",
        "explicit_http_config": {"http2_protocol_options": {}}}}
    svc = by_kind("Service", "mcp-ratelimit")
    (ep,) = cluster["load_assignment"]["endpoints"][0]["lb_endpoints"]
    assert ep["endpoint"]["address"]["socket_address"] == {"address": fqdn(svc), "port_value": svc["spec"]["ports"][0]["port"]}
    assert cluster["type"] == "STRICT_DNS"


# ----------------------------------------------------------------------------------- identity overlays

PAYLOAD_HEADER = "x-jwt-payload"


def seed_member() -> dict:
    """The seed policy as a member of a set (without its gateway)."""
    return {k: v for k, v in SEED.items() if k != "gateway"}


def check_identity_config(base: dict, overlay: dict) -> None:
    """An overlay's filter config: the base's gateway plus identity, the seed policy as `ops`, a
    read-only policy for the scope vms:read, and no catch-all (anyone else has no policy)."""
    assert overlay["gateway"]["identity"] == {"payload_header": PAYLOAD_HEADER, "grant_claim": "sub"}
    assert {k: v for k, v in overlay["gateway"].items() if k != "identity"} == base["gateway"]
    assert set(overlay) == {"version", "policies", "attach", "gateway"}
    assert overlay["policies"]["ops"] == seed_member()
    assert overlay["policies"]["readonly"] == {"version": "1", "default": "deny", "hide": ["vm_agent_exec"],
                                              "tools": {"list_vms": {}}}
    assert overlay["attach"] == [{"policy": "ops", "when": [{"claim": "groups", "includes": "ops"}]},
                                 {"policy": "readonly", "when": [{"claim": "scope", "includes": "vms:read"}]}]


def test_istio_identity_verifies_the_token_and_forwards_its_payload_stripped_first():
    base = by_kind("WasmPlugin", variant="istio")
    plugin = by_kind("WasmPlugin", variant="istio/identity")
    # The same plugin (name, image, phase, fail-closed, port, env) with another configuration.
    assert plugin["metadata"] == base["metadata"]
    assert {k: v for k, v in plugin["spec"].items() if k != "pluginConfig"} == \
        {k: v for k, v in base["spec"].items() if k != "pluginConfig"}
    check_identity_config(base["spec"]["pluginConfig"], plugin["spec"]["pluginConfig"])
    ra = by_kind("RequestAuthentication", variant="istio/identity")
    assert ra["metadata"]["namespace"] == plugin["metadata"]["namespace"]
    assert ra["spec"]["selector"] == plugin["spec"]["selector"]
    (rule,) = ra["spec"]["jwtRules"]
    assert rule["outputPayloadToHeader"] == PAYLOAD_HEADER
    assert rule["fromHeaders"] == [{"name": "authorization", "prefix": "Bearer "}]
    assert "fromParams" not in rule and rule["forwardOriginalToken"] is False
    assert rule["issuer"] and rule["audiences"] and rule["jwksUri"].startswith("https://")
    # The client's copy is removed first thing on the same inbound listener, in the base (so that
    # turning identity on later cannot open the gap).
    strip = by_kind("EnvoyFilter", "mcp-strip-jwt-payload", "istio")
    assert strip["spec"]["workloadSelector"]["labels"] == plugin["spec"]["selector"]["matchLabels"]
    (p,) = strip["spec"]["configPatches"]
    assert p["applyTo"] == "HTTP_FILTER" and p["patch"]["operation"] == "INSERT_FIRST"
    assert p["match"]["context"] == "SIDECAR_INBOUND"
    assert p["match"]["listener"]["portNumber"] == plugin["spec"]["match"][0]["ports"][0]["number"]
    lua = p["patch"]["value"]["typed_config"]
    assert lua["@type"] == "type.googleapis.com/envoy.extensions.filters.http.lua.v3.Lua"
    assert lua["default_source_code"]["inline_string"] == (
        "function envoy_on_request(request_handle)\n"
        f"  request_handle:headers():remove(\"{PAYLOAD_HEADER}\")\n"
        "end\n")


def test_envoy_gateway_identity_verifies_the_token_and_forwards_its_payload_stripped_first():
    base = by_kind("EnvoyExtensionPolicy", variant="envoy-gateway")
    ext = by_kind("EnvoyExtensionPolicy", variant="envoy-gateway/identity")
    assert ext["metadata"] == base["metadata"]
    assert ext["spec"]["targetRefs"] == base["spec"]["targetRefs"]
    (w,), (bw,) = ext["spec"]["wasm"], base["spec"]["wasm"]
    assert {k: v for k, v in w.items() if k != "config"} == {k: v for k, v in bw.items() if k != "config"}
    check_identity_config(bw["config"], w["config"])
    sp = by_kind("SecurityPolicy", variant="envoy-gateway/identity")
    assert sp["spec"]["targetRefs"] == ext["spec"]["targetRefs"]
    (provider,) = sp["spec"]["jwt"]["providers"]
    assert "optional" not in sp["spec"]["jwt"], "a request without a token is refused by jwt_authn"
    assert provider["extractFrom"] == {"headers": [{"name": "authorization", "valuePrefix": "Bearer "}]}
    assert provider["remoteJWKS"]["uri"].startswith("https://") and provider["issuer"] and provider["audiences"]
    # jwt_authn's forward_payload_header, added by a patch on the Gateway's listener.
    gw = by_kind("Gateway", variant="envoy-gateway")
    epp = by_kind("EnvoyPatchPolicy", "mcp-jwt-payload-header", "envoy-gateway/identity")
    assert epp["spec"]["targetRef"] == {"group": "gateway.networking.k8s.io", "kind": "Gateway",
                                        "name": gw["metadata"]["name"]}
    (patch,) = epp["spec"]["jsonPatches"]
    (listener,) = gw["spec"]["listeners"]
    assert patch["type"] == "type.googleapis.com/envoy.config.listener.v3.Listener"
    assert patch["name"] == f"{gw['metadata']['namespace']}/{gw['metadata']['name']}/{listener['name']}"
    assert patch["operation"] == {
        "op": "add",
        "jsonPath": "..http_filters[?(@.name=='envoy.filters.http.jwt_authn')].typed_config.providers.*",
        "path": "/forward_payload_header",
        "value": PAYLOAD_HEADER,
    }
    # The client's copy is removed before routing and every filter, in the base.
    ctp = by_kind("ClientTrafficPolicy", variant="envoy-gateway")
    assert ctp["spec"]["headers"]["earlyRequestHeaders"] == {"remove": [PAYLOAD_HEADER]}


def test_identity_policy_sets_pass_mcp_policy_check(tmp_path):
    cli = Path(REPO_ROOT / "target" / "release" / "mcp-policy")
    if not cli.is_file():
        pytest.fail(f"mcp-policy not built: {cli} is missing (make cli)", pytrace=False)
    configs = {
        "istio": by_kind("WasmPlugin", variant="istio/identity")["spec"]["pluginConfig"],
        "envoy-gateway": by_kind("EnvoyExtensionPolicy", variant="envoy-gateway/identity")["spec"]["wasm"][0]["config"],
    }
    for name, config in configs.items():
        f = tmp_path / f"{name}.json"
        f.write_text(json.dumps(config), encoding="utf-8")
        r = subprocess.run([str(cli), "check", str(f)], capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, (name, r.stdout, r.stderr)
